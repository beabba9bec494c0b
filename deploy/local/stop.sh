#!/usr/bin/env bash
# Stops a stack started with DETACH=1 deploy/local/run.sh: the three services, then PostgreSQL.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
state="$root/.local"
if [ -f "$state/pids" ]; then
  xargs -r kill <"$state/pids" 2>/dev/null
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
