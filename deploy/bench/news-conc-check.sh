#!/usr/bin/env bash
# Concurrency, cancellation and idempotency check of news's writes (docs/news.md), from
# outside: two replicas of news-service on one PostgreSQL (and, with READ_REPLICA=1, a streaming
# read replica for their anonymous reads), many readers liking, bookmarking and following the
# same few targets at once (with dropped connections), keyed comment posts racing, replies
# posted concurrently, then every count, list and viewer flag compared with the rows
# (news_conc_check.py says what it checks).
# Not a bench: no numbers, a list of disagreements (exit 1 when there is one).
#
#   deploy/bench/news-conc-check.sh [news_conc_check.py options, e.g. --users 40 --seed 7]
#
# Environment: PG_PORT (25660; the read replica on the next port), NEWS_PORT (19760; the second
# replica on the next port), BENCH_STATE (.local/news-conc-check, a fresh database each run),
# BUILD=0 (use the binary already built), PROFILE (debug), READ_REPLICA (0). The service's own
# NEWS_* settings pass through (NEWS_REQUEST_TIMEOUT_MS=60 NEWS_COUNTER_FOLD_INTERVAL_MS=20 ...).
# Every process it starts is stopped on exit (PostgreSQL included).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PG_PORT=${PG_PORT:-25660}
NEWS=${NEWS_PORT:-19760}
REPLICA_PORT=$((PG_PORT + 1))
require_free_ports "$PG_PORT" "$NEWS" $((NEWS + 1))
bench_folders "$root/.local/news-conc-check" lingonews-news-conc-check
PROFILE=${PROFILE:-debug}
build_flags=(); [ "$PROFILE" = release ] && build_flags+=(--release)
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked "${build_flags[@]}" -p news-service)
cp "$(target_dir)/$PROFILE/news-service" "$work/news-service"
news_bin="$work/news-service"
replica_data="$state/pgdata-replica"

rm -rf "$pg_data" "$replica_data" # fresh clusters every run
rm -f "$logs"/news-*.log
trap 'bench_cleanup; pg_stop "$replica_data"' INT TERM EXIT
start_bench_postgres
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$news_bin" migrate >>"$logs/setup.log" 2>&1
"$news_bin" seed --articles 300 >>"$logs/setup.log" 2>&1
if [ "${READ_REPLICA:-0}" = 1 ]; then
  require_free_ports "$REPLICA_PORT"
  say "streaming read replica on 127.0.0.1:$REPLICA_PORT"
  pg_start_replica "$replica_data" "$PG_PORT" "$REPLICA_PORT"
  export NEWS_DATABASE_READ_URL="postgres://news_app@127.0.0.1:$REPLICA_PORT/$database"
fi

export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256 AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')
for port in "$NEWS" $((NEWS + 1)); do
  say "starting news-service :$port"
  spawn "news-$port" "$logs" env NEWS_LISTEN_ADDR="127.0.0.1:$port" "$news_bin" serve
  wait_ready news-service "$port" "$last_pid"
done

status=0
python3 "$bench_dir/news_conc_check.py" --secret "$AUTH_HS256_SECRET" \
  --urls "http://127.0.0.1:$NEWS/v1/news,http://127.0.0.1:$((NEWS + 1))/v1/news" \
  --admin-url "postgres://postgres@127.0.0.1:$PG_PORT/$database" --psql "$PSQL" \
  --recount "$news_bin recount" "$@" || status=$?
if grep -l '"level":"ERROR"' "$logs"/news-*.log >/dev/null 2>&1; then
  say "errors in the service logs ($logs):"
  grep -h '"level":"ERROR"' "$logs"/news-*.log | head -20 >&2
fi
exit $status
