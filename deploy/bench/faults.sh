#!/usr/bin/env bash
# Load and fault tests against real processes (issue 9). Starts its own stack on spare loopback
# ports: a throwaway PostgreSQL cluster and a streaming replica of it (the news services' read
# pool, NEWS_DATABASE_READ_URL), lingo-service, two news-service replicas, the gateway, a
# second gateway whose lingo upstream accepts connections and never answers; then runs
# deploy/bench/faults.py:
#   1. mixed traffic through the gateway (reads, likes, comments, study sessions): no 5xx, every
#      successful write in the database exactly once;
#   2. PostgreSQL stopped for 5 s mid-run: only 503 problems, no hang, no crash, the services
#      recover by themselves within 5 s of PostgreSQL returning;
#   3. an upstream that stops answering: 504 at the gateway's timeout, other routes keep serving;
#   4. the PostgreSQL streaming replica killed (immediate shutdown) for 10 s under mixed traffic:
#      no 5xx (anonymous reads fall back to the primary), /readyz of the news services stays 200,
#      the fallback is counted, reads return to the replica, every write exactly once;
#   5. a third news instance with a small in-flight limit and pool, driven straight at about 4x
#      what it serves: the excess gets 503 overloaded at once, admitted requests keep a bounded
#      p99 (printed), no other 5xx, it recovers by itself, every write exactly once;
#   6. one news replica killed with SIGKILL mid-run: errors under 1%, traffic continues.
# Exits non-zero when any property fails. Everything it starts is stopped on exit.
#
# Usage: deploy/bench/faults.sh [--short]     (--short: what CI runs, about 2.5 minutes of load)
# Environment: PROFILE (debug|release, default debug), FAULTS_PORT_BASE (19300: seven ports from
# it), PG_PORT (the first free pair from 25460; the replica on PG_PORT+1), FAULTS_WORKERS (16 concurrent clients), BUILD=0 (use the binaries as built).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

mode=full
case "${1:-}" in
  --short) mode=short ;;
  "") ;;
  *) die "usage: $0 [--short]" ;;
esac
PROFILE=${PROFILE:-debug}
base=${FAULTS_PORT_BASE:-19300}
PG_PORT=${PG_PORT:-$(free_port_pair 25460)}
PG_REPLICA_PORT=$((PG_PORT + 1))
GATEWAY_PORT=$base GATEWAY2_PORT=$((base + 1)) LINGO_PORT=$((base + 2))
NEWS1_PORT=$((base + 3)) NEWS2_PORT=$((base + 4)) HOLE_PORT=$((base + 5)) NEWS3_PORT=$((base + 6))
ARTICLES=2000
if [ "$mode" = short ]; then
  durations=(--mixed-secs 20 --outage-before-secs 4 --outage-after-secs 8 --kill-secs 15
             --db-replica-before-secs 4 --db-replica-after-secs 10 --overload-secs 8)
else
  durations=(--mixed-secs 60 --outage-before-secs 10 --outage-after-secs 20 --kill-secs 30
             --db-replica-before-secs 10 --db-replica-after-secs 20 --overload-secs 20)
fi

for port in "$GATEWAY_PORT" "$GATEWAY2_PORT" "$LINGO_PORT" "$NEWS1_PORT" "$NEWS2_PORT" "$HOLE_PORT" "$NEWS3_PORT" "$PG_PORT" "$PG_REPLICA_PORT"; do
  port_in_use "$port" && die "port $port is in use (set FAULTS_PORT_BASE / PG_PORT)"
done

state=$(mktemp -d /tmp/lingonews-faults.XXXXXX)
chmod 755 "$state"   # the postgres user must reach the cluster inside it
logs="$state/logs"; mkdir -p "$logs"; chmod 777 "$logs"
pg_data="$state/pgdata"
pg_replica="$state/pgreplica"
failed=1
cleanup() {
  trap - INT TERM EXIT
  stop_spawned
  pg_stop "$pg_replica"
  pg_stop "$pg_data"
  if [ "$failed" = 1 ]; then
    for log in "$logs"/*.log; do
      [ -f "$log" ] || continue
      printf '\n--- last lines of %s\n' "$(basename "$log")" >&2
      tail -n 6 "$log" >&2
    done
  fi
  rm -rf "$state"
}
trap cleanup INT TERM EXIT

say "building the binaries ($PROFILE)"
build_flags=(); [ "$PROFILE" = release ] && build_flags+=(--release)
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked -q "${build_flags[@]}" -p gateway -p lingo-service -p news-service)
bin="$(target_dir)/$PROFILE"
need_venv aiohttp:aiohttp==3.14.5

say "PostgreSQL on 127.0.0.1:$PG_PORT (throwaway cluster in $pg_data)"
pg_start "$pg_data" "$PG_PORT"
db_bootstrap "$PG_PORT"
export_db_env
export AUTH_ALGORITHMS=HS256 AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news
export AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=')
export LOG_FORMAT=human RUST_LOG=${RUST_LOG:-warn}
"$bin/lingo-service" migrate >>"$logs/setup.log" 2>&1
"$bin/news-service" migrate >>"$logs/setup.log" 2>&1
"$bin/lingo-service" seed >>"$logs/setup.log" 2>&1
"$bin/news-service" seed --articles "$ARTICLES" >>"$logs/setup.log" 2>&1
say "streaming replica on 127.0.0.1:$PG_REPLICA_PORT (pg_basebackup -R into $pg_replica)"
pg_start_replica "$pg_replica" "$PG_PORT" "$PG_REPLICA_PORT"
# Anonymous news reads go to the replica; a short cool-down so the run sees them come back.
export NEWS_DATABASE_READ_URL="postgres://news_app@127.0.0.1:$PG_REPLICA_PORT/$database"
export NEWS_READ_FALLBACK_COOLDOWN_SECS=3

say "starting lingo :$LINGO_PORT, news :$NEWS1_PORT and :$NEWS2_PORT, gateways :$GATEWAY_PORT and :$GATEWAY2_PORT"
spawn lingo "$logs" env LINGO_LISTEN_ADDR="127.0.0.1:$LINGO_PORT" "$bin/lingo-service" serve
lingo_pid=$last_pid; wait_ready lingo-service "$LINGO_PORT" "$lingo_pid"
spawn news1 "$logs" env NEWS_LISTEN_ADDR="127.0.0.1:$NEWS1_PORT" "$bin/news-service" serve
news1_pid=$last_pid; wait_ready news-service "$NEWS1_PORT" "$news1_pid"
spawn news2 "$logs" env NEWS_LISTEN_ADDR="127.0.0.1:$NEWS2_PORT" "$bin/news-service" serve
news2_pid=$last_pid; wait_ready news-service "$NEWS2_PORT" "$news2_pid"
# The overload target: few requests at once and a small pool, so 4x its capacity is quick to reach.
overload_in_flight=4
spawn news3 "$logs" env NEWS_LISTEN_ADDR="127.0.0.1:$NEWS3_PORT" NEWS_MAX_IN_FLIGHT=$overload_in_flight \
  NEWS_DB_MAX_CONNECTIONS=2 NEWS_DB_ACQUIRE_TIMEOUT_MS=250 "$bin/news-service" serve
news3_pid=$last_pid; wait_ready news-service "$NEWS3_PORT" "$news3_pid"
spawn hole "$logs" "$venv/bin/python" "$bench_dir/faults.py" blackhole --port "$HOLE_PORT"
hole_pid=$last_pid
for _ in $(seq 1 50); do port_in_use "$HOLE_PORT" && break; sleep 0.1; done
# The gateways' settings for load: no per-caller limits, quick probes and cooldowns.
gateway_env=(RATE_LIMIT_ENABLED=false UPSTREAM_PROBE_INTERVAL_SECS=1 UPSTREAM_COOLDOWN_SECS=5)
spawn gateway "$logs" env "${gateway_env[@]}" GATEWAY_LISTEN_ADDR="127.0.0.1:$GATEWAY_PORT" \
  LINGO_UPSTREAMS="http://127.0.0.1:$LINGO_PORT" \
  NEWS_UPSTREAMS="http://127.0.0.1:$NEWS1_PORT,http://127.0.0.1:$NEWS2_PORT" \
  "$bin/gateway" serve
gateway_pid=$last_pid; wait_ready gateway "$GATEWAY_PORT" "$gateway_pid" /healthz
spawn gateway2 "$logs" env "${gateway_env[@]}" GATEWAY_LISTEN_ADDR="127.0.0.1:$GATEWAY2_PORT" \
  UPSTREAM_TIMEOUT_MS=1000 LINGO_UPSTREAMS="http://127.0.0.1:$HOLE_PORT" \
  NEWS_UPSTREAMS="http://127.0.0.1:$NEWS2_PORT" "$bin/gateway" serve
wait_ready gateway2 "$GATEWAY2_PORT" "$last_pid" /healthz

as_pg_prefix=""
[ "$(id -u)" = 0 ] && as_pg_prefix="setpriv --reuid=postgres --regid=postgres --init-groups --"
pg_stop_cmd="$as_pg_prefix '$PG_CTL' -D '$pg_data' -m fast -w stop"
pg_start_cmd="$as_pg_prefix '$PG_CTL' -D '$pg_data' -l '$pg_data/postgres.log' -w -t 60 -o \"$(cat "$pg_data/bench-opts")\" start"
# The replica dies the hard way (immediate shutdown: no checkpoint, sessions cut) and restarts
# with crash recovery before it streams again.
replica_kill_cmd="$as_pg_prefix '$PG_CTL' -D '$pg_replica' -m immediate -w stop"
replica_start_cmd="$as_pg_prefix '$PG_CTL' -D '$pg_replica' -l '$pg_replica/postgres.log' -w -t 60 -o \"$(cat "$pg_replica/bench-opts")\" start"

say "load and faults ($mode)"
"$venv/bin/python" -u "$bench_dir/faults.py" run "${durations[@]}" \
  --gateway "http://127.0.0.1:$GATEWAY_PORT" --gateway2 "http://127.0.0.1:$GATEWAY2_PORT" \
  --lingo "http://127.0.0.1:$LINGO_PORT" \
  --news "http://127.0.0.1:$NEWS2_PORT,http://127.0.0.1:$NEWS1_PORT" \
  --psql "$PSQL" --db-url "postgres://postgres@127.0.0.1:$PG_PORT/$database" \
  --articles "$ARTICLES" --workers "${FAULTS_WORKERS:-16}" \
  --pg-stop "$pg_stop_cmd" --pg-start "$pg_start_cmd" \
  --db-replica-kill "$replica_kill_cmd" --db-replica-start "$replica_start_cmd" \
  --db-replica-cooldown-secs "$NEWS_READ_FALLBACK_COOLDOWN_SECS" \
  --overload-news "http://127.0.0.1:$NEWS3_PORT" --overload-in-flight "$overload_in_flight" \
  --overload-log "$logs/news3.log" \
  --alive-pids "$lingo_pid,$news1_pid,$news2_pid,$news3_pid,$gateway_pid" \
  --kill-pid "$news1_pid" --hole-pid "$hole_pid" --upstream-timeout-ms 1000 --probe-detect-secs 3.5
failed=0
say "faults: all properties hold"
