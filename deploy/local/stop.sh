#!/usr/bin/env bash
# Stops a stack started with DETACH=1 deploy/local/run.sh: the three services, then PostgreSQL.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
state="$root/.local"
if [ -f "$state/pids" ]; then
  ours=()
  while read -r pid; do
    # Only a process that is still one of ours: its PID may belong to another one by now.
    grep -qaE 'gateway|lingo-service|news-service' "/proc/$pid/cmdline" 2>/dev/null && ours+=("$pid")
  done <"$state/pids"
  [ "${#ours[@]}" -eq 0 ] || kill "${ours[@]}" 2>/dev/null
  # Let them finish their requests and close their database connections before PostgreSQL stops
  # (up to 10 s).
  for _ in $(seq 50); do
    alive=0
    for pid in "${ours[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  rm -f "$state/pids"
fi
pg_ctl=$(command -v pg_ctl || ls -d /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | sort -V | tail -n 1)
if [ -f "$state/pgdata/PG_VERSION" ]; then
  if [ "$(id -u)" = 0 ]; then
    setpriv --reuid=postgres --regid=postgres --init-groups -- "$pg_ctl" -D "$state/pgdata" -m fast -w stop >/dev/null 2>&1
  else
    "$pg_ctl" -D "$state/pgdata" -m fast -w stop >/dev/null 2>&1
  fi
fi
echo "stopped"
