#!/usr/bin/env bash
# Concurrency and arrival-order check of lingo's learning writes (docs/lingo.md, "Phrase
# progress"), from outside: two replicas of lingo-service on one PostgreSQL, many learners
# posting their sessions concurrently (shuffled, split across the replicas, with racing
# Idempotency-Key replays and dropped connections), then every learner's reads compared with
# the same sessions posted in time order to a fresh learner and with the Python `fsrs`
# reference (conc_check.py says what it checks).
# Not a bench: no numbers, a list of disagreements (exit 1 when there is one).
#
#   deploy/bench/conc-check.sh [conc_check.py options, e.g. --learners 40 --inflight 48 --seed 7]
#
# Needs the Python package `fsrs` 6.x for python3 (pip install 'fsrs>=6,<7'). Environment:
# PG_PORT (25650), LINGO_PORT (19750; the second replica on the next port), BENCH_STATE
# (.local/conc-check, a fresh database each run), BUILD=0 (use the binary already built),
# PROFILE (debug). Every process it starts is stopped on exit (PostgreSQL included).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PG_PORT=${PG_PORT:-25650}
LINGO=${LINGO_PORT:-19750}
require_free_ports "$PG_PORT" "$LINGO" $((LINGO + 1))
bench_folders "$root/.local/conc-check" lingonews-conc-check
PROFILE=${PROFILE:-debug}
build_flags=(); [ "$PROFILE" = release ] && build_flags+=(--release)
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked "${build_flags[@]}" -p lingo-service)
cp "$(target_dir)/$PROFILE/lingo-service" "$work/lingo-service"
lingo_bin="$work/lingo-service"
python3 -c 'import fsrs' || die "python3 lacks the fsrs package (pip install 'fsrs>=6,<7')"

rm -rf "$pg_data" # a fresh cluster every run
start_bench_postgres max_connections=200
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$lingo_bin" migrate >>"$logs/setup.log" 2>&1
# Two languages of 6 phrases each (few phrases: many sessions touch the same ones) and a third.
"$PSQL" -X -q -v ON_ERROR_STOP=1 "$LINGO_PIPELINE_DATABASE_URL" <<'SQL'
INSERT INTO languages (code, name) VALUES ('es', 'Spanish'), ('fr', 'French'), ('de', 'German');
INSERT INTO phrases (id, text, language_code)
  SELECT format('cc-%s-%s', l, i), format('%s phrase %s', l, i), l
  FROM (VALUES ('es'), ('fr'), ('de')) v (l), generate_series(1, 6) i;
SQL

export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256 AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')
for port in "$LINGO" $((LINGO + 1)); do
  say "starting lingo-service :$port"
  spawn "lingo-$port" "$logs" env LINGO_LISTEN_ADDR="127.0.0.1:$port" "$lingo_bin" serve
  wait_ready lingo-service "$port" "$last_pid"
done

python3 "$bench_dir/conc_check.py" --secret "$AUTH_HS256_SECRET" \
  --urls "http://127.0.0.1:$LINGO/v1/lingo,http://127.0.0.1:$((LINGO + 1))/v1/lingo" "$@"
status=$?
if grep -l '"level":"ERROR"' "$logs"/lingo-*.log >/dev/null 2>&1; then
  say "errors in the service logs ($logs):"
  grep -h '"level":"ERROR"' "$logs"/lingo-*.log | head -20 >&2
fi
exit $status
