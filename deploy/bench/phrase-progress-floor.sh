#!/usr/bin/env bash
# What bounds issue 32's goals 1 and 2 (GET /me/reviews and GET /me/phrases >= 0.5x GET /me/xp; a
# session with 100 answers >= 0.3x one without): the CPU each request costs in lingo-service and in
# PostgreSQL, and the CPU of the statements it cannot do without, run alone (pgbench, prepared, no
# service), on phrase-progress.sh's data (run that script first: this one reuses its cluster in
# BENCH_STATE, and removes what it adds).
#
# The statements are the ones the service sends: the script has PostgreSQL log the runtime role's
# statements while it asks each endpoint once, and turns what it logged into pgbench scripts (the
# parameters become pgbench variables of the same values). It also splits the reviews statement
# into its two parts (the due count; the page with its phrases and stats), and adds the least a
# page must read: 20 due states of the learner's language with their phrases, no count, no stats.
# Then, over ROUNDS interleaved rounds: each endpoint through wrk (CPU of lingo-service and of the
# whole cluster from /proc, divided by the requests), and each statement through pgbench (CPU of
# the cluster divided by the transactions).
#
# The bound it reports for goal 1: the ratio a page would reach if the service's own work for it
# (HTTP, the token, decoding 20 rows, writing the JSON) cost no more than for /me/xp, so that only
# the statement's PostgreSQL CPU and the client's differ. With every core busy, req/s follow the
# CPU a request costs everything on the machine, so the client (wrk) counts too: (xp service + xp
# PostgreSQL + xp client) / (xp service + page PostgreSQL + page client). Below 0.5, no change in
# the service can meet the goal with that statement.
#
# For goal 2: a session with 100 answers does all a session without answers does, and also reads
# the 100 stored states (FSRS advances them), updates them (each answer moves `due_at`, which the
# design's "due first" index holds, so no update is HOT), and writes the review log's row. The
# script gives 1,000 learners 100 states each and runs only that read, update and insert in
# pgbench (simpler statements than the service's: no UNNEST, no FSRS), less the cost of an empty
# transaction; the bound is (session without answers, its client included) / (the same + that). Below
# 0.3, no implementation that keeps a state row per (learner, phrase) indexed by `due_at` meets it.
#
# Environment: as phrase-progress.sh (BENCH_STATE, PG_PORT, BENCH_PORT_BASE, BUILD=0, CONNS),
# STEP_SECS (6), ROUNDS (2). Writes its section between the phrase-progress-floor markers in
# deploy/bench/RESULTS.md. All processes it starts are stopped on exit (PostgreSQL included).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STEP_SECS=${STEP_SECS:-6}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-16}
PG_PORT=${PG_PORT:-55486}
LINGO=${BENCH_PORT_BASE:-19460}
PGBENCH=$(find_pg_bin pgbench)
require_free_ports "$LINGO" "$PG_PORT"
bench_folders "$root/.local/bench-phrase-progress" lingonews-phrase-progress-floor
[ -f "$pg_data/PG_VERSION" ] || die "no cluster in $state: run deploy/bench/phrase-progress.sh first"

need_apt wrk:wrk
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked --release -p lingo-service)
cp "$(target_dir)/release/lingo-service" "$work/lingo-service"

start_bench_postgres shared_buffers=512MB
heavy=bench-heavy-00000
[ "$(admin_psql -c "SELECT count(*) FROM lingo.phrase_states WHERE learner_id = '$heavy'")" -ge 20000 ] \
  || die "$heavy has no 20,000 phrases here: run deploy/bench/phrase-progress.sh first"

export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256 AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
url="http://127.0.0.1:$LINGO"
python3 "$bench_dir/bench.py" tokens --secret "$AUTH_HS256_SECRET" --prefix bench-heavy --count 1 \
  --ttl 7200 --out "$work/heavy.tokens"
token=$(cat "$work/heavy.tokens")
start_lingo() {
  spawn lingo "$logs" env LINGO_LISTEN_ADDR="127.0.0.1:$LINGO" "$work/lingo-service" serve
  lingo_pid=$last_pid; wait_ready lingo-service "$LINGO" "$lingo_pid"
}

# --- the statements, as the service sends them ------------------------------------------------------
say "capturing the statements of each endpoint from PostgreSQL's log"
pg_log="$pg_data/postgres.log"
admin_psql -c "ALTER ROLE lingo_app SET log_min_duration_statement = 0" >/dev/null
start_lingo
endpoints=(xp "reviews?limit=20" "phrases?limit=20")
names=(xp reviews phrases)
for i in "${!endpoints[@]}"; do
  from=$(stat -c %s "$pg_log")
  curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$url/v1/lingo/me/${endpoints[$i]}"
  sleep 0.5 # the log is written by another process
  tail -c +$((from + 1)) "$pg_log" >"$work/${names[$i]}.log"
done
admin_psql -c "ALTER ROLE lingo_app RESET log_min_duration_statement" >/dev/null
stop_spawned

# pgbench scripts from the logged `execute` of the learner and its `parameters:` line: $n becomes :pn cast to the
# type its value has (date, timestamptz, bigint, else text), as the service binds it.
python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
def statement(name):
    lines = open(f"{work}/{name}.log").read().splitlines()
    # The request's statement names the learner; the service's background tasks' do not.
    found = [(re.search(r" execute [^:]+: (.*)$", line).group(1), detail.split("parameters: ", 1)[1])
             for line, detail in zip(lines, lines[1:])
             if " execute " in line and "parameters: " in detail and "bench-heavy-00000" in detail]
    if len(found) != 1:
        sys.exit(f"{name}: expected one statement in the log, found {len(found)}")
    sql, params = found[0]
    values = dict(re.findall(r"\$(\d+) = '((?:[^']|'')*)'", params))
    def kind(value):
        if re.fullmatch(r"\d{4}-\d\d-\d\d", value): return "date"
        if re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\+00", value): return "timestamptz"
        if re.fullmatch(r"-?\d+", value): return "bigint"
        return "text"
    body = re.sub(r"\$(\d+)\b", lambda m: f":p{m.group(1)}::{kind(values[m.group(1)])}", sql)
    open(f"{work}/{name}.vars", "w").write("\n".join(f"p{n}={v}" for n, v in values.items()) + "\n")
    return body
for name in ["xp", "reviews", "phrases"]:
    open(f"{work}/{name}.sql", "w").write(statement(name) + ";\n")
reviews = open(f"{work}/reviews.sql").read()
count, page = reviews.split(" AS due_total, ", 1)
open(f"{work}/due.sql", "w").write(count + ";\n")
open(f"{work}/nodue.sql", "w").write("SELECT " + page)
PY
cp "$work/reviews.vars" "$work/due.vars"; cp "$work/reviews.vars" "$work/nodue.vars"
# The least a page of reviews reads: the first 20 due states of the learner's language, in order,
# with their phrases (no due count, no stats), by the same index.
cat >"$work/minimal.sql" <<'SQL'
SELECT s.phrase_id, s.stability, s.difficulty, s.due_at, s.reviews, s.correct, s.lapses,
       s.first_reviewed_at, s.last_reviewed_at, s.last_grade, p.text, p.language_code,
       p.translation_count
FROM phrase_states s JOIN phrases p ON p.id = s.phrase_id
WHERE s.learner_id = (SELECT :learner::text) AND s.language_code = 'es'
  AND s.due_at <= (SELECT :now::timestamptz)
ORDER BY s.due_at, s.phrase_id LIMIT 20;
SQL
printf 'learner=%s\nnow=%s\n' "$heavy" "$(date -u +'%Y-%m-%d %H:%M:%S+00')" >"$work/minimal.vars"

# Goal 2: 1,000 learners with 100 stored states each (the answers of phrase-progress.sh's writers),
# the least a 100-answer session writes for them, an empty transaction, and 1,000 callers of
# sessions without answers.
say "goal 2: 1,000 learners with 100 states each"
floor_learners='bench-floor-%'
trap 'remove_learners "$floor_learners" >/dev/null 2>&1 || true; bench_cleanup' INT TERM EXIT
remove_learners "$floor_learners"
admin_psql <<'SQL'
INSERT INTO lingo.phrase_states (learner_id, phrase_id, language_code, stability, difficulty, due_at,
                                 reviews, correct, lapses, first_reviewed_at, last_reviewed_at,
                                 last_grade, updated_at)
  SELECT format('bench-floor-%s', lpad(l::text, 5, '0')), format('bench-es-%s', lpad(i::text, 6, '0')),
         'es', 3.0, 5.0, now() + make_interval(days => (l + i) % 7), 1, 1, 0, now(), now(), 3, now()
  FROM generate_series(0, 999) l, generate_series(101, 200) i;
SQL
ids=$(python3 -c 'print("{" + ",".join(f"bench-es-{n:06d}" for n in range(101, 201)) + "}")')
grades=$(python3 -c 'print("{" + ",".join(str(1 + n % 4) for n in range(100)) + "}")')
printf 'ids=%s\ngrades=%s\n' "$ids" "$grades" >"$work/answers100.vars"
cat >"$work/answers100.sql" <<'SQL'
\set w random(0, 999)
BEGIN;
SELECT phrase_id, stability, difficulty, due_at, reviews, correct, lapses, first_reviewed_at,
       last_reviewed_at, last_grade
FROM phrase_states WHERE learner_id = ('bench-floor-' || lpad(:w::text, 5, '0')) AND phrase_id = ANY (:ids::text[]);
UPDATE phrase_states SET stability = stability + 0.1, due_at = due_at + interval '1 day',
       reviews = reviews + 1, correct = correct + 1, last_reviewed_at = clock_timestamp(),
       last_grade = 3, updated_at = clock_timestamp()
WHERE learner_id = ('bench-floor-' || lpad(:w::text, 5, '0')) AND phrase_id = ANY (:ids::text[]);
INSERT INTO phrase_review_sessions (learner_id, studied_at, session_id, phrase_ids, grades)
  VALUES ('bench-floor-' || lpad(:w::text, 5, '0'), clock_timestamp(), gen_random_uuid(), :ids::text[], :grades::smallint[]);
COMMIT;
SQL
printf 'BEGIN;\nSELECT 1;\nCOMMIT;\n' >"$work/empty.sql"; : >"$work/empty.vars"
python3 "$bench_dir/bench.py" tokens --secret "$AUTH_HS256_SECRET" --prefix bench-floor-plain \
  --count 1000 --ttl 7200 --out "$work/plain.tokens"
plain_body='{"duration_seconds":300,"phrases_seen":12,"phrases_correct":10,"language_code":"es"}'

# --- measuring ----------------------------------------------------------------------------------------
postmaster=$(head -n 1 "$pg_data/postmaster.pid")
ticks() { # CPU ticks of the pids given, and of PostgreSQL's exited processes when the postmaster is
  local total=0 pid
  for pid in "$@"; do
    [ -r "/proc/$pid/stat" ] && total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$total"
}
cluster_ticks() {
  echo $(( $(ticks $(pgrep -u postgres)) + $(awk '{print $16 + $17}' "/proc/$postmaster/stat") ))
}
us_per() { python3 -c "import os, sys; print(f'{(int(sys.argv[1])) * 1e6 / os.sysconf(\"SC_CLK_TCK\") / int(sys.argv[2]):.1f}')" "$1" "$2"; }
rows="$work/rows.tsv"; : >"$rows"

# NAME PATH [ENV=VALUE...]: one wrk step; appends "endpoint NAME service_us pg_us rps client_us"
# (the client: wrk's own CPU, user and system, which the req/s of a goal also pays for).
measure_endpoint() {
  local name=$1 path=$2 s0 p0 out n client; shift 2
  s0=$(ticks "$lingo_pid"); p0=$(cluster_ticks)
  out=$( { TIMEFORMAT='%3U %3S'; time env TOKEN="$token" "$@" wrk -t2 -c"$CONNS" -d"${STEP_SECS}s" \
    -s "$bench_dir/bench.lua" "$url/v1/lingo/me/$path" 2>&1; } 2>"$work/wrk.time" )
  local s1 p1; s1=$(ticks "$lingo_pid"); p1=$(cluster_ticks)
  n=$(awk '/requests in/{print $1}' <<<"$out")
  [ "$(sed -n 's/^RESULT //p' <<<"$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["non_2xx_3xx"])')" = 0 ] \
    || die "$name: answers that were not 2xx"
  client=$(awk -v n="$n" '{printf "%.1f", ($1 + $2) * 1e6 / n}' "$work/wrk.time")
  printf 'endpoint\t%s\t%s\t%s\t%s\t%s\n' "$name" "$(us_per $((s1 - s0)) "$n")" "$(us_per $((p1 - p0)) "$n")" \
    "$(awk '/Requests\/sec/{print $2}' <<<"$out")" "$client" | tee -a "$rows" >&2
}
measure_statement() { # NAME: one pgbench step of $work/NAME.sql; appends "statement NAME - pg_us tps"
  local p0 p1 out n vars=()
  while IFS= read -r line; do [ -n "$line" ] && vars+=(-D "$line"); done <"$work/$1.vars"
  p0=$(cluster_ticks)
  out=$("$PGBENCH" -n -M prepared -c "$CONNS" -j 2 -T "$STEP_SECS" "${vars[@]}" -f "$work/$1.sql" \
    "$LINGO_DATABASE_URL" 2>&1) || { printf '%s\n' "$out" >&2; die "pgbench failed on $1"; }
  p1=$(cluster_ticks)
  n=$(awk '/number of transactions actually processed/{print $NF}' <<<"$out" | cut -d/ -f1)
  printf 'statement\t%s\t-\t%s\t%s\n' "$1" "$(us_per $((p1 - p0)) "$n")" \
    "$(awk '/^tps/{printf "%.0f", $3}' <<<"$out")" | tee -a "$rows" >&2
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
start_lingo
for round in $(seq "$ROUNDS"); do
  say "round $round of $ROUNDS"
  for i in "${!endpoints[@]}"; do measure_endpoint "${names[$i]}" "${endpoints[$i]}"; done
  for name in xp reviews due nodue phrases minimal; do measure_statement "$name"; done
  measure_endpoint plain study-sessions MODE=post-session TOKENS_FILE="$work/plain.tokens" SESSION_BODY="$plain_body"
  for name in answers100 empty; do measure_statement "$name"; done
done
say "removing goal 2's learners"
remove_learners "$floor_learners"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# --- report ---------------------------------------------------------------------------------------------
section="$work/section.md"
python3 - "$rows" "$ROUNDS" >"$work/tables.md" <<'PY'
import sys, statistics
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
def mean(kind, name, col):
    return statistics.mean(float(r[col]) for r in rows if r[0] == kind and r[1] == name)
def spread(kind, name, col):
    values = [float(r[col]) for r in rows if r[0] == kind and r[1] == name]
    return f"{min(values):.0f}-{max(values):.0f}"
print("| endpoint (wrk) | service µs | PostgreSQL µs | client (wrk) µs | total µs | ÷ xp by CPU | req/s |")
print("|---|---|---|---|---|---|---|")
def total(name):
    return sum(mean("endpoint", name, col) for col in (2, 3, 5))
xp = total("xp")
paths = {"xp": "GET /me/xp", "reviews": "GET /me/reviews?limit=20",
         "phrases": "GET /me/phrases?limit=20", "plain": "POST /me/study-sessions without answers"}
for name, path in paths.items():
    svc, pg, client = (mean("endpoint", name, col) for col in (2, 3, 5))
    print(f"| `{path}` | {svc:.0f} ({spread('endpoint', name, 2)}) | {pg:.0f} "
          f"({spread('endpoint', name, 3)}) | {client:.0f} | {total(name):.0f} | "
          f"{xp / total(name):.2f} | {mean('endpoint', name, 4):.0f} |")
print()
labels = {
    "xp": "the statement of `GET /me/xp`",
    "reviews": "the statement of `GET /me/reviews` (due count + page)",
    "due": "its due count alone",
    "nodue": "its page alone (states, phrases, stats; no count)",
    "phrases": "the statement of `GET /me/phrases`",
    "minimal": "the least a page reads: 20 due states with their phrases (no count, no stats)",
    "answers100": "the least a 100-answer session adds: read, update 100 states, insert the log row (a transaction)",
    "empty": "an empty transaction (`BEGIN`, `SELECT 1`, `COMMIT`)",
}
print("| statement (pgbench, prepared, no service) | PostgreSQL µs per execution | per second |")
print("|---|---|---|")
for name, label in labels.items():
    print(f"| {label} | {mean('statement', name, 3):.0f} ({spread('statement', name, 3)}) | "
          f"{mean('statement', name, 4):.0f} |")
print()
# When the machine is saturated, req/s follow the CPU a request costs everything on it: the
# service, PostgreSQL and the client. The bounds count all three.
xp_svc = mean("endpoint", "xp", 2)
for name in ["reviews", "phrases"]:
    pg, client = mean("endpoint", name, 3), mean("endpoint", name, 5)
    bound = xp / (xp_svc + pg + client)
    print(f"- **bound, `GET /me/{name}` ÷ `GET /me/xp`** if its service work cost no more than "
          f"/me/xp's (its PostgreSQL and client CPU as measured): {xp:.0f} / ({xp_svc:.0f} + "
          f"{pg:.0f} + {client:.0f}) = **{bound:.2f}** "
          f"({'below' if bound < 0.5 else 'not below'} the goal's 0.5)")
plain = total("plain")
added = mean("statement", "answers100", 3) - mean("statement", "empty", 3)
print(f"- **bound, session with 100 answers ÷ without** if it did nothing more than a session without "
      f"answers and the least it adds: {plain:.0f} / ({plain:.0f} + {added:.0f}) = "
      f"**{plain / (plain + added):.2f}** ({'below' if plain / (plain + added) < 0.3 else 'not below'} "
      f"the goal's 0.3)")
PY
{
  echo "<!-- phrase-progress-floor:begin (deploy/bench/phrase-progress-floor.sh rewrites this section) -->"
  echo "## What bounds issue 32's goals 1 and 2: \`deploy/bench/phrase-progress-floor.sh\`"
  echo
  echo "- **Date**: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(cd "$root" && git rev-parse --short HEAD); $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores; release lingo-service and PostgreSQL $("$PSQL" --version | awk '{print $3}') (\`shared_buffers=512MB\`) on phrase-progress.sh's data; $CONNS connections (wrk 2 threads; pgbench 2 threads), ${STEP_SECS} s a step, $ROUNDS interleaved rounds; load average $load_start at start, $load_end at the end."
  echo "- CPU per request: lingo-service's, the cluster's (every PostgreSQL process, exited ones included), from /proc, and the client's (wrk's user and system time), over each step, divided by the requests (means over the rounds, range in parentheses). pgbench runs the statements the service sent, captured from PostgreSQL's log, with the same parameters; the 100-answer transaction runs for 1,000 learners with 100 states each (the script's own, removed afterwards), a random one each time."
  echo
  cat "$work/tables.md"
  echo "<!-- phrase-progress-floor:end -->"
} >"$section"
write_results_section phrase-progress-floor "$section"
