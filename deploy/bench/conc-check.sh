#!/usr/bin/env bash
# Concurrency and arrival-order check of lingo's learning writes (docs/lingo.md, "Phrase
# progress"), from outside: two replicas of lingo-service on one PostgreSQL, many learners
# posting their sessions concurrently (shuffled, split across the replicas, with racing
# Idempotency-Key replays and dropped connections), then every learner's reads compared with
# the same sessions posted in time order to a fresh learner and with the Python `fsrs`
# reference (conc_check.py says what it checks).
# Not a bench: no numbers, a list of disagreements (exit 1 when there is one). Afterwards
# PostgreSQL itself is read as its admin: every 201 on record once, the review log, checkpoints,
# idempotency records and learners' rows, and `phrase_due_days` equal to counts of `phrase_states`.
#
#   deploy/bench/conc-check.sh [--crash] [conc_check.py options, e.g. --learners 40 --inflight 48 --seed 7]
#
# `--aged N` writes N learners' histories 35-60 days old in the database before the writes, so that
# the service cuts checkpoints and the checkpoint check compares some (docs/lingo.md, "Checkpoints").
#
# --crash (first, before conc_check.py's options): processes crash while the writes run. Every
# 1.5-4 s one of the two replicas, picked at random, is killed (kill -9) and started again on its
# port after 0-1 s; twice, instead, PostgreSQL is stopped as in a crash (pg_ctl stop -m immediate)
# and started again after 1-2 s, the replicas staying up to recover by themselves. The clients take
# a connection error, a reset, a timeout or a 5xx as "outcome unknown": a session with an
# Idempotency-Key is posted again with its key until it answers 201 (at most --retry-secs, 60:
# else its key is stuck, a disagreement), one without a key must exist at most once, reads and
# exports retry. The sessions are posted in waves of --inflight (48) at an even pace over
# --spread-secs (30), not all at once, so that the crashes meet writes in flight. Then the same
# comparisons run, once both replicas are up again. The run fails when the writes end before both
# PostgreSQL crashes (a longer --spread-secs). A debug run with `--learners 20` takes 1 to 2.5
# minutes (build excluded, a 2-core machine at load 3-5; most of it the reference for the states
# read during the writes); it is stopped after CHECK_TIMEOUT_SECS (600).
#
# Needs the Python package `fsrs` 6.x for python3 (pip install 'fsrs>=6,<7'). Environment:
# PG_PORT (25650), LINGO_PORT (19750; the second replica on the next port), BENCH_STATE
# (.local/conc-check, a fresh database each run), BUILD=0 (use the binary already built),
# PROFILE (debug). Every process it starts is stopped on exit (PostgreSQL included).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

crash=0
if [ "${1:-}" = --crash ]; then crash=1; shift; fi

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

rm -rf "$pg_data" "$logs"/lingo-*.log # a fresh cluster every run, and the replicas' logs of this run only
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
replica_pids=() # replica i listens on LINGO + i
start_replica() {
  local i=$1 port=$((LINGO + $1))
  spawn "lingo-$port" "$logs" env LINGO_LISTEN_ADDR="127.0.0.1:$port" "$lingo_bin" serve
  replica_pids[i]=$last_pid
  wait_ready lingo-service "$port" "$last_pid"
}
for i in 0 1; do
  say "starting lingo-service :$((LINGO + i))"
  start_replica "$i"
done

# --- crashes (--crash) ------------------------------------------------------------------------------
# random_secs MIN_MS MAX_MS: a random time between the two, in seconds, for sleep.
random_secs() {
  local ms=$(($1 + RANDOM % ($2 - $1 + 1)))
  printf '%d.%03d' $((ms / 1000)) $((ms % 1000))
}

# The killed replica's pid leaves the list stop_spawned goes through (it could be reused).
forget_pid() {
  local kept=() pid
  for pid in "${spawned_pids[@]}"; do [ "$pid" = "$1" ] || kept+=("$pid"); done
  spawned_pids=("${kept[@]}")
}

kill_replica() {
  local i=$((RANDOM % 2)) pid
  pid=${replica_pids[i]}
  say "crash: kill -9 lingo-service :$((LINGO + i))"
  kill -9 "$pid" 2>/dev/null || say "lingo-service :$((LINGO + i)) had already exited (see its log)"
  wait "$pid" 2>/dev/null || true
  forget_pid "$pid"
  sleep "$(random_secs 0 1000)"
  start_replica "$i"
}

crash_postgres() {
  say "crash: PostgreSQL stopped (immediate)"
  as_pg "$PG_CTL" -D "$pg_data" -m immediate -w stop >/dev/null
  sleep "$(random_secs 1000 2000)"
  as_pg "$PG_CTL" -D "$pg_data" -l "$pg_data/postgres.log" -w -t 60 -o "$(cat "$pg_data/bench-opts")" start \
    >/dev/null || die "PostgreSQL did not start again, see $pg_data/postgres.log"
  say "crash: PostgreSQL started again"
}

# crash_while_writing FOLDER PID: crashes a process every 1.5-4 s (PostgreSQL as the 2nd and 4th,
# a replica otherwise) until conc_check.py (PID) says in FOLDER that its writes are over, then
# tells it what it did once both replicas are ready (crashes-done, renamed into place whole).
crash_while_writing() {
  local folder=$1 python_pid=$2 events=0 kills=0 pg_crashes=0
  while kill -0 "$python_pid" 2>/dev/null; do
    sleep "$(random_secs 1500 4000)"
    [ -e "$folder/writes-done" ] && break
    events=$((events + 1))
    if [ "$events" = 2 ] || [ "$events" = 4 ]; then
      crash_postgres
      pg_crashes=$((pg_crashes + 1))
    else
      kill_replica
      kills=$((kills + 1))
    fi
  done
  say "crash: the writes are over after $kills replica kills and $pg_crashes PostgreSQL crashes"
  for i in 0 1; do # ready: their database too, after a last PostgreSQL crash
    wait_ready lingo-service $((LINGO + i)) "${replica_pids[i]}"
  done
  printf '{"replica_kills": %d, "postgres_crashes": %d}\n' "$kills" "$pg_crashes" >"$folder/crashes-done.tmp"
  mv "$folder/crashes-done.tmp" "$folder/crashes-done"
}

crash_args=()
if [ "$crash" = 1 ]; then
  crash_args=(--crash "$work/crash")
  mkdir "$work/crash"
fi
# In the background, so that this shell can crash processes meanwhile (and stop it on exit).
timeout "${CHECK_TIMEOUT_SECS:-600}" python3 "$bench_dir/conc_check.py" --secret "$AUTH_HS256_SECRET" \
  --urls "http://127.0.0.1:$LINGO/v1/lingo,http://127.0.0.1:$((LINGO + 1))/v1/lingo" \
  --psql "$PSQL" --db-url "postgres://postgres@127.0.0.1:$PG_PORT/$database" "${crash_args[@]}" "$@" &
python_pid=$!
spawned_pids+=("$python_pid")
[ "$crash" = 0 ] || crash_while_writing "$work/crash" "$python_pid"
status=0
wait "$python_pid" || status=$?
[ "$status" != 124 ] || say "conc_check.py stopped after CHECK_TIMEOUT_SECS (${CHECK_TIMEOUT_SECS:-600} s)"
if grep -l '"level":"ERROR"' "$logs"/lingo-*.log >/dev/null 2>&1; then
  say "errors in the service logs ($logs):"
  if [ "$crash" = 1 ]; then # many, most of them "database unavailable": how many of each
    grep -h '"level":"ERROR"' "$logs"/lingo-*.log | grep -o '"message":"[^"]*","error":"[^"]*"' \
      | sed 's/(os error [0-9]*)//' | sort | uniq -c | sort -rn | head -20 >&2
  else
    grep -h '"level":"ERROR"' "$logs"/lingo-*.log | head -20 >&2
  fi
fi
exit $status
