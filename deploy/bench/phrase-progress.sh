#!/usr/bin/env bash
# Phrase progress (issue 32's bench goals 1-3), release, one run, direct at lingo-service over
# loopback, every ratio measured within the run with the steps interleaved over ROUNDS rounds:
#  1. 1,000,000 (learner, phrase) states over 10,000 learners, one learner with 20,000 phrases and
#     200,000 answers: GET /me/reviews?limit=20 and GET /me/phrases?limit=20 of that learner
#     >= 0.5x the req/s of GET /me/xp (same learner, 16 connections);
#  2. POST /me/study-sessions with 100 answers >= 0.3x the req/s of a session without answers
#     (16 connections; no Idempotency-Key, so every request writes a new session, and the callers
#     rotate over 1,000 learners so no two requests in flight share one);
#  3. a late session (studied_at 10 days ago, 100 phrases with 50 earlier answers each) <= 5x the
#     time of an in-order one (the same history, another learner), requests one at a time, p50.
#
# The data is consistent with what the service writes: a template learner posts a few dozen
# sessions through the service (the template histories), and bulk SQL as lingo_owner copies each
# template's review log and FSRS state, shifted in time, to the bench learners, with their study
# sessions and totals (FSRS states depend only on the answers' relative times, so a shifted copy is
# exactly the state the service would have computed). The 1,000,000 states are written once (kept
# in $BENCH_STATE); the template, the learners of goal 3 and the writers of goal 2 are rebuilt or
# removed on every run. Writes its section between the phrase-progress markers in
# deploy/bench/RESULTS.md. All processes it starts are stopped on exit (PostgreSQL included).
#
# Environment: STEP_SECS (10), ROUNDS (2), SAMPLES (40 late/in-order pairs per round), CONNS (16),
# BENCH_PORT_BASE (19460: one port), PG_PORT (55486), BENCH_STATE (.local/bench-phrase-progress),
# BUILD=0, OTHER_WORK (a note), PROFILE (release; debug only to try the script).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STEP_SECS=${STEP_SECS:-10}
ROUNDS=${ROUNDS:-2}
SAMPLES=${SAMPLES:-40}
CONNS=${CONNS:-16}
WARM=4
PG_PORT=${PG_PORT:-55486}
LINGO=${BENCH_PORT_BASE:-19460}
require_free_ports "$LINGO" "$PG_PORT"
bench_folders "$root/.local/bench-phrase-progress" lingonews-phrase-progress

need_apt wrk:wrk
PROFILE=${PROFILE:-release}
say "building $PROFILE lingo-service"
build_flags=(); [ "$PROFILE" = release ] && build_flags+=(--release)
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked "${build_flags[@]}" -p lingo-service)
# A copy: the shared target folder may be rebuilt by another checkout while this runs.
cp "$(target_dir)/$PROFILE/lingo-service" "$work/lingo-service"
lingo_bin="$work/lingo-service"
py() { python3 "$bench_dir/phrase_progress.py" "$@"; }

start_bench_postgres shared_buffers=512MB
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$lingo_bin" migrate >>"$logs/setup.log" 2>&1
pipeline_sql() { "$PSQL" -X -q -v ON_ERROR_STOP=1 -tA "$LINGO_PIPELINE_DATABASE_URL" "$@"; }
owner_sql() { "$PSQL" -X -q -v ON_ERROR_STOP=1 -tA "$LINGO_OWNER_DATABASE_URL" "$@"; }

if [ "$(admin_psql -c "SELECT count(*) FROM lingo.phrases WHERE id LIKE 'bench-es-%'")" -lt 20000 ]; then
  say "writing 20,000 Spanish phrases with 2 translations each as the pipeline (once)"
  pipeline_sql <<'SQL'
INSERT INTO languages (code, name) VALUES ('en', 'English'), ('es', 'Spanish'), ('fr', 'French')
  ON CONFLICT DO NOTHING;
INSERT INTO phrases (id, text, language_code)
  SELECT format('bench-es-%s', lpad(i::text, 6, '0')), format('Frase número %s', i), 'es'
  FROM generate_series(1, 20000) i ON CONFLICT (id) DO NOTHING;
INSERT INTO phrase_translations (phrase_id, language_code, text)
  SELECT format('bench-es-%s', lpad(i::text, 6, '0')), l.code,
         CASE l.code WHEN 'en' THEN 'Phrase number ' ELSE 'Phrase numéro ' END || i
  FROM generate_series(1, 20000) i, (VALUES ('en'), ('fr')) l (code) ON CONFLICT DO NOTHING;
SQL
fi

# copy_histories PLAN-SQL: PLAN-SQL fills the temporary table bench_plan (learner_id, phrase_id,
# tmpl_phrase, shift): each row a (learner, phrase) whose history is the template learner's on
# tmpl_phrase moved by `shift`. Writes those answers (one session per learner and time, its
# answers by phrase, each phrase's in the template's order), the states, and the learners'
# totals, as the service would have after those sessions.
template=bench-template-00000
copy_histories() {
  owner_sql -v template="$template" <<SQL
BEGIN;
CREATE TEMP TABLE bench_plan (learner_id text, phrase_id text, tmpl_phrase text, shift interval)
  ON COMMIT DROP;
$1
CREATE TEMP TABLE bench_answers ON COMMIT DROP AS
  SELECT p.learner_id, p.phrase_id, r.studied_at + p.shift AS studied_at, r.grade, r.position
  FROM bench_plan p
  JOIN (SELECT t.studied_at, a.phrase_id, a.grade, a.position
        FROM phrase_review_sessions t,
             UNNEST(t.phrase_ids, t.grades) WITH ORDINALITY AS a (phrase_id, grade, position)
        WHERE t.learner_id = :'template') r ON r.phrase_id = p.tmpl_phrase;
CREATE TEMP TABLE bench_sessions ON COMMIT DROP AS
  SELECT gen_random_uuid() AS id, learner_id, studied_at, seen, correct,
         10 + correct + CASE WHEN seen >= 5 AND correct = seen THEN 5 ELSE 0 END AS xp
  FROM (SELECT learner_id, studied_at, count(*)::int AS seen,
               (count(*) FILTER (WHERE grade > 1))::int AS correct
        FROM bench_answers GROUP BY learner_id, studied_at) s;
INSERT INTO study_sessions (id, learner_id, language_code, duration_seconds, phrases_seen,
                            phrases_correct, xp_awarded, created_at, studied_at, answer_count)
  SELECT id, learner_id, 'es', 60 + 6 * seen, seen, correct, xp, studied_at, studied_at, seen
  FROM bench_sessions;
INSERT INTO phrase_review_sessions (learner_id, studied_at, session_id, phrase_ids, grades)
  SELECT a.learner_id, a.studied_at, s.id, array_agg(a.phrase_id ORDER BY a.phrase_id, a.position),
         array_agg(a.grade ORDER BY a.phrase_id, a.position)
  FROM bench_answers a JOIN bench_sessions s USING (learner_id, studied_at)
  GROUP BY a.learner_id, a.studied_at, s.id;
INSERT INTO phrase_states (learner_id, phrase_id, language_code, stability, difficulty, due_at,
                           reviews, correct, lapses, first_reviewed_at, last_reviewed_at,
                           last_grade, updated_at)
  SELECT p.learner_id, p.phrase_id, 'es', t.stability, t.difficulty, t.due_at + p.shift, t.reviews,
         t.correct, t.lapses, t.first_reviewed_at + p.shift, t.last_reviewed_at + p.shift,
         t.last_grade, t.last_reviewed_at + p.shift
  FROM bench_plan p JOIN phrase_states t ON t.learner_id = :'template' AND t.phrase_id = p.tmpl_phrase;
INSERT INTO learners (learner_id, total_xp, sessions, updated_at)
  SELECT learner_id, sum(xp), count(*), max(studied_at) FROM bench_sessions GROUP BY learner_id;
INSERT INTO learner_language_totals (learner_id, language_code, sessions, total_duration_seconds,
                                     phrases_seen, phrases_correct, xp, first_studied_at,
                                     last_studied_at, updated_at, phrases_started)
  SELECT s.learner_id, 'es', count(*), sum(60 + 6 * seen), sum(seen), sum(correct), sum(xp),
         min(studied_at), max(studied_at), max(studied_at), max(p.started)
  FROM bench_sessions s
  JOIN (SELECT learner_id, count(*) AS started FROM bench_plan GROUP BY learner_id) p USING (learner_id)
  GROUP BY s.learner_id;
COMMIT;
SQL
}

# --- the service, tokens, the template histories ------------------------------------------------
export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256 AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')
say "starting lingo-service :$LINGO"
spawn lingo "$logs" env LINGO_LISTEN_ADDR="127.0.0.1:$LINGO" "$lingo_bin" serve
lingo_pid=$last_pid; wait_ready lingo-service "$LINGO" "$lingo_pid"
url="http://127.0.0.1:$LINGO"

tokens() { # tokens PREFIX COUNT: a file of tokens for PREFIX-00000 ... (bench.py, as run.sh mints)
  python3 "$bench_dir/bench.py" tokens --secret "$AUTH_HS256_SECRET" --prefix "$1" --count "$2" \
    --ttl 7200 --out "$work/$1.tokens"
  echo "$work/$1.tokens"
}
replay_count=$((ROUNDS * SAMPLES + WARM))
heavy_tokens=$(tokens bench-heavy 1)
template_tokens=$(tokens bench-template 1)
plain_tokens=$(tokens bench-writer-plain 1000)
answers_tokens=$(tokens bench-writer-answers 1000)
late_tokens=$(tokens bench-late "$replay_count")
inorder_tokens=$(tokens bench-inorder "$replay_count")

say "removing what an earlier run left (template, writers, goal 3's learners)"
for pattern in 'bench-template-%' 'bench-writer-%' 'bench-late-%' 'bench-inorder-%'; do
  remove_learners "$pattern"
done
say "posting the template histories through the service"
posted=$(py templates --url "$url" --token "$template_tokens")
echo "  $posted template sessions" >&2

if [ "$(admin_psql -c "SELECT count(*) FROM lingo.learners WHERE learner_id = 'bench-heavy-00000'")" = 0 ]; then
  say "bulk SQL (once): bench-heavy-00000 with 20,000 phrases and 200,000 answers, 9,999 learners with 98 phrases"
  bulk_start=$(date +%s.%N)
  # The heavy learner: phrase i follows heavy template (i-1) % 20 (10 answers over 28 days), in
  # 20 groups of 1,000 phrases moved back 3 days (and 7 minutes) more each: 200 sessions of 1,000.
  copy_histories "INSERT INTO bench_plan
    SELECT 'bench-heavy-00000', format('bench-es-%s', lpad(i::text, 6, '0')),
           format('bench-es-%s', lpad((1 + (i - 1) % 20)::text, 6, '0')),
           - make_interval(days => 3 * ((i - 1) / 1000), mins => 7 * ((i - 1) / 1000))
    FROM generate_series(1, 20000) i;"
  # 9,999 others: 98 phrases each (the first 98 learners one more: 980,000 in all) following the
  # 8 short templates (1 to 3 answers), each learner moved back 0..59 days and some minutes.
  copy_histories "INSERT INTO bench_plan
    SELECT format('bench-learner-%s', lpad(l::text, 5, '0')),
           format('bench-es-%s', lpad((1 + (l * 37 + m * 101) % 20000)::text, 6, '0')),
           format('bench-es-%s', lpad((21 + (l + m) % 8)::text, 6, '0')),
           - make_interval(days => l % 60, mins => l % 1440)
    FROM generate_series(1, 9999) l, generate_series(0, 98) m
    WHERE m < 98 OR l <= 98;"
  admin_psql -c "VACUUM ANALYZE lingo.phrase_states" -c "VACUUM ANALYZE lingo.phrase_review_sessions" \
    -c "VACUUM ANALYZE lingo.study_sessions" -c "VACUUM ANALYZE lingo.learners" \
    -c "VACUUM ANALYZE lingo.learner_language_totals" >/dev/null
  bulk_secs=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.0f}')" "$bulk_start")
  echo "bulk load of the 1,000,000 states in $bulk_secs s" | tee -a "$logs/setup.log" >&2
fi

say "goal 3's learners: $replay_count late and $replay_count in-order, 100 phrases with 50 answers each"
plan_replay() { # the replay templates (4 of 50 answers over the last 29 days), unshifted
  echo "INSERT INTO bench_plan
    SELECT format('$1-%s', lpad(n::text, 5, '0')), format('bench-es-%s', lpad(i::text, 6, '0')),
           format('bench-es-%s', lpad((29 + (i - 1) % 4)::text, 6, '0')), interval '0'
    FROM generate_series(0, $replay_count - 1) n, generate_series(1, 100) i;"
}
copy_histories "$(plan_replay bench-late)"
copy_histories "$(plan_replay bench-inorder)"
admin_psql -c "VACUUM ANALYZE lingo.phrase_states" -c "VACUUM ANALYZE lingo.phrase_review_sessions" >/dev/null

# --- the data, checked ------------------------------------------------------------------------------
states=$(admin_psql -c "SELECT count(*) FROM lingo.phrase_states WHERE learner_id LIKE 'bench-learner-%' OR learner_id = 'bench-heavy-00000'")
state_learners=$(admin_psql -c "SELECT count(DISTINCT learner_id) FROM lingo.phrase_states WHERE learner_id LIKE 'bench-learner-%' OR learner_id = 'bench-heavy-00000'")
heavy=$(admin_psql -c "SELECT (SELECT count(*) FROM lingo.phrase_states WHERE learner_id = 'bench-heavy-00000') || ' phrases, ' || (SELECT sum(cardinality(phrase_ids)) FROM lingo.phrase_review_sessions WHERE learner_id = 'bench-heavy-00000') || ' answers in ' || (SELECT count(*) FROM lingo.study_sessions WHERE learner_id = 'bench-heavy-00000') || ' sessions, ' || (SELECT count(*) FROM lingo.phrase_states WHERE learner_id = 'bench-heavy-00000' AND due_at <= now()) || ' due now'")
# `due_total` counts the days before today from `phrase_due_days` and today's phrases from
# `phrase_states` (on one side of now, docs/lingo.md), so where now falls among the heavy learner's
# hours of today moves the reviews step's cost a little: say which hours they are. The bulk load
# sets them to the hour it ran.
today_due=$(admin_psql -c "SELECT count(*) || ' of them due today (UTC)' || coalesce(', ' || to_char(min(due_at) AT TIME ZONE 'UTC', 'HH24:MI') || '-' || to_char(max(due_at) AT TIME ZONE 'UTC', 'HH24:MI'), '') || ', measured from ' || to_char(now() AT TIME ZONE 'UTC', 'HH24:MI') FROM lingo.phrase_states WHERE learner_id = 'bench-heavy-00000' AND due_at >= date_trunc('day', now(), 'UTC') AND due_at < date_trunc('day', now(), 'UTC') + interval '1 day'")
reviews_total=$(admin_psql -c "SELECT sum(cardinality(phrase_ids)) || ' answers in ' || count(*) || ' review-log rows (one per session with answers)' FROM lingo.phrase_review_sessions")
replay_check=$(admin_psql -c "SELECT min(reviews) || '-' || max(reviews) || ' answers a phrase, ' || count(*) FILTER (WHERE last_reviewed_at > now() - interval '10 days') || ' of ' || count(*) || ' states answered after 10 days ago' FROM lingo.phrase_states WHERE learner_id LIKE 'bench-late-%'")
echo "  $states states of $state_learners learners; bench-heavy-00000: $heavy; $reviews_total in all" >&2
echo "  goal 3's learners: $replay_check" >&2
heavy_token=$(cat "$heavy_tokens")
# The answers the service gives the heavy learner (and that each is 200).
probe() { curl -fsS -H "Authorization: Bearer $heavy_token" "$url/v1/lingo/me/$1"; }
due_total=$(probe "reviews?limit=20" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["count"] == 20, d; print(d["due_total"])')
probe "phrases?limit=20" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["count"] == 20 and d["next_cursor"], d' \
  || die "GET /me/phrases did not give a full page"
total_xp=$(probe xp | python3 -c 'import json,sys; print(json.load(sys.stdin)["total_xp"])')

# --- measuring --------------------------------------------------------------------------------------
rows_md="$work/rows.md"
: >"$rows_md"
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
measure() { # measure NAME URL [ENV=VALUE...]: one wrk run; sets $rps and $result
  local name=$1 target=$2 load out; shift 2
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  out=$(env "$@" wrk -t2 -c"$CONNS" -d"${STEP_SECS}s" --timeout 10s -s "$bench_dir/bench.lua" "$target" 2>&1) || true
  result=$(sed -n 's/^RESULT //p' <<<"$out")
  [ -n "$result" ] || { printf '%s\n' "$out" >&2; die "wrk failed on $name"; }
  rps=$(field "$result" rps)
  [ "$(field "$result" non_2xx_3xx)" = 0 ] || die "$name: $(field "$result" non_2xx_3xx) answers were not 2xx"
  printf '| %s | %s | %.0f | %.3f | %.3f | %s | %s |\n' "$name" "$CONNS" "$rps" \
    "$(field "$result" p50_ms)" "$(field "$result" p99_ms)" "$(field "$result" non_2xx_3xx)" "$load" >>"$rows_md"
  printf '  %-44s %8.0f req/s  p50 %7.3f ms  (load %s)\n' "$name" "$rps" "$(field "$result" p50_ms)" "$load" >&2
}
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }
sum() { python3 -c "import sys; print(float(sys.argv[1]) + float(sys.argv[2]))" "$1" "$2"; }
at_least() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$1" "$2"; }

plain_body='{"duration_seconds":300,"phrases_seen":12,"phrases_correct":10,"language_code":"es"}'
answers_body=$(python3 -c '
import json, random
rng = random.Random(3)
grades = [rng.choices(["again", "hard", "good", "easy"], weights=[15, 15, 55, 15])[0] for _ in range(100)]
answers = [{"phrase_id": f"bench-es-{n:06d}", "correct": g != "again", "grade": g} for n, g in zip(range(101, 201), grades)]
print(json.dumps({"duration_seconds": 600, "phrases_seen": 100, "language_code": "es",
                  "phrases_correct": sum(a["correct"] for a in answers), "answers": answers}, separators=(",", ":")))')

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "warming up"
for path in xp "reviews?limit=20" "phrases?limit=20"; do
  TOKEN=$heavy_token wrk -t2 -c"$CONNS" -d2s -s "$bench_dir/bench.lua" "$url/v1/lingo/me/$path" >/dev/null 2>&1 || true
done
sum_xp=0 sum_reviews=0 sum_phrases=0 sum_plain=0 sum_answers=0
goal1_rounds=() goal2_rounds=()
for round in $(seq "$ROUNDS"); do
  say "round $round of $ROUNDS: reads of bench-heavy-00000, then writes"
  measure "GET /me/xp, round $round" "$url/v1/lingo/me/xp" TOKEN="$heavy_token"; r_xp=$rps
  measure "GET /me/reviews?limit=20, round $round" "$url/v1/lingo/me/reviews?limit=20" TOKEN="$heavy_token"; r_reviews=$rps
  measure "GET /me/phrases?limit=20, round $round" "$url/v1/lingo/me/phrases?limit=20" TOKEN="$heavy_token"; r_phrases=$rps
  measure "POST session without answers, round $round" "$url/" MODE=post-session TOKENS_FILE="$plain_tokens" SESSION_BODY="$plain_body"; r_plain=$rps
  measure "POST session with 100 answers, round $round" "$url/" MODE=post-session TOKENS_FILE="$answers_tokens" SESSION_BODY="$answers_body"; r_answers=$rps
  sum_xp=$(sum "$sum_xp" "$r_xp"); sum_reviews=$(sum "$sum_reviews" "$r_reviews"); sum_phrases=$(sum "$sum_phrases" "$r_phrases")
  sum_plain=$(sum "$sum_plain" "$r_plain"); sum_answers=$(sum "$sum_answers" "$r_answers")
  goal1_rounds+=("$(ratio "$r_reviews" "$r_xp")/$(ratio "$r_phrases" "$r_xp")")
  goal2_rounds+=("$(ratio "$r_answers" "$r_plain")")
done
reviews_ratio=$(ratio "$sum_reviews" "$sum_xp"); phrases_ratio=$(ratio "$sum_phrases" "$sum_xp")
answers_ratio=$(ratio "$sum_answers" "$sum_plain")
written=$(admin_psql -c "SELECT (SELECT count(*) FROM lingo.study_sessions WHERE learner_id LIKE 'bench-writer-plain-%') || ' sessions without answers; ' || (SELECT count(*) FROM lingo.study_sessions WHERE learner_id LIKE 'bench-writer-answers-%') || ' sessions with answers, ' || (SELECT sum(cardinality(phrase_ids)) FROM lingo.phrase_review_sessions WHERE learner_id LIKE 'bench-writer-answers-%') || ' answers in the review log, ' || (SELECT count(*) FROM lingo.phrase_states WHERE learner_id LIKE 'bench-writer-answers-%') || ' states of ' || (SELECT count(DISTINCT learner_id) FROM lingo.phrase_states WHERE learner_id LIKE 'bench-writer-answers-%') || ' learners'")
echo "  written: $written" >&2

say "goal 3: $ROUNDS rounds of $SAMPLES late / in-order pairs, one request at a time"
load_late=$(cut -d' ' -f1-3 /proc/loadavg)
py replay --url "$url" --late-tokens "$late_tokens" --inorder-tokens "$inorder_tokens" \
  --rounds "$ROUNDS" --samples "$SAMPLES" --warm "$WARM" >"$work/replay.json"
late=$(py summary "$work/replay.json")
late_ratio=$(python3 -c "import json,sys; print(f'{json.loads(sys.argv[1])[\"ratio\"]:.2f}')" "$late")
late_check=$(admin_psql -c "SELECT count(*) FILTER (WHERE reviews = 51) || ' of ' || count(*) FROM lingo.phrase_states WHERE learner_id LIKE 'bench-late-%'")
echo "  late ÷ in-order p50: $late_ratio ($late); states with 51 answers after the late sessions: $late_check" >&2

say "removing the writers, goal 3's learners and the template"
for pattern in 'bench-template-%' 'bench-writer-%' 'bench-late-%' 'bench-inorder-%'; do
  remove_learners "$pattern"
done

# --- report ------------------------------------------------------------------------------------------
verdict() { if python3 -c "import sys; sys.exit(0 if $1 else 1)"; then echo met; else echo missed; fi; }
late_rows=$(python3 - "$late" <<'PY'
import json, sys
s = json.loads(sys.argv[1])
for n, r in enumerate(s["rounds"], 1):
    print(f"| round {n} | {r['late_p50']:.2f} | {r['late_p90']:.2f} | {r['inorder_p50']:.2f} | "
          f"{r['inorder_p90']:.2f} | {r['ratio']:.2f} |")
print(f"| all {s['samples']} pairs | {s['late_p50']:.2f} | | {s['inorder_p50']:.2f} | | {s['ratio']:.2f} |")
PY
)
section="$work/section.md"
{
  echo "<!-- phrase-progress:begin (deploy/bench/phrase-progress.sh rewrites this section) -->"
  echo "## Phrase progress (issue 32): \`deploy/bench/phrase-progress.sh\`"
  echo
  echo "- **Date**: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(cd "$root" && git rev-parse --short HEAD)$(cd "$root" && git diff --quiet HEAD -- lingo-service shared-auth || echo ', with uncommitted changes in the crates')"
  echo "- **Machine**: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores; wrk, lingo-service and PostgreSQL $("$PSQL" --version | awk '{print $3}') on it, over loopback; $PROFILE binary; direct at the service; wrk 2 threads, $CONNS connections, ${STEP_SECS} s per step, $ROUNDS interleaved rounds."
  echo "- **Other work on the machine**: ${OTHER_WORK:-none noted}. Load average at start: $load_start, before each step in the table, and $load_late before goal 3. Absolute numbers are lower bounds; the ratios, measured within this one run, are the result."
  echo "- **Data**: $states (learner, phrase) states of $state_learners learners; \`bench-heavy-00000\`: $heavy ($due_total in \`due_total\`, $total_xp XP; $today_due); $reviews_total in all. Written by bulk SQL as \`lingo_owner\`: copies, moved in time, of template histories that a template learner posted through the service (states, review log, sessions and totals as the service wrote them)."
  echo "- **Writes (goal 2)**: no \`Idempotency-Key\`, so every request is a new session; callers rotate over 1,000 learners per kind, the next one each request across both wrk threads, so no two requests in flight share a learner's row lock. The answers are the same 100 Spanish phrases (grades mixed): a learner's first session creates 100 states, later ones advance them. Rows written: $written."
  echo "- **Late sessions (goal 3)**: $((2 * replay_count)) learners with the same history (100 phrases, 50 answers each 14 h apart over the last 29 days, the last ~17 after 10 days ago: $replay_check). Sessions with the same 100 answers posted one at a time over one keep-alive connection, alternating late (\`studied_at\` 10 days ago: every phrase replayed from its 51 answers) and in-order (no \`studied_at\`: advanced from the stored state), each to a learner of its own; $WARM pairs of warm-up first; time is the client's, request to full answer. After the run: $late_check late states have 51 answers."
  echo
  echo "| step | conc. | req/s | p50 ms | p99 ms | non-2xx | load avg before |"
  echo "|---|---|---|---|---|---|---|"
  cat "$rows_md"
  echo
  echo "| goal 3 | late p50 ms | late p90 ms | in-order p50 ms | in-order p90 ms | late ÷ in-order (p50) |"
  echo "|---|---|---|---|---|---|"
  echo "$late_rows"
  echo
  echo "| goal | measured | target | verdict |"
  echo "|---|---|---|---|"
  echo "| \`GET /me/reviews?limit=20\` ÷ \`GET /me/xp\` (req/s, sums over the rounds; per round: ${goal1_rounds[*]%%/*}) | $reviews_ratio | >= 0.5 | $(verdict "$reviews_ratio >= 0.5") |"
  echo "| \`GET /me/phrases?limit=20\` ÷ \`GET /me/xp\` (per round: $(printf '%s ' "${goal1_rounds[@]#*/}")) | $phrases_ratio | >= 0.5 | $(verdict "$phrases_ratio >= 0.5") |"
  echo "| session with 100 answers ÷ without (req/s; per round: ${goal2_rounds[*]}) | $answers_ratio | >= 0.3 | $(verdict "$answers_ratio >= 0.3") |"
  echo "| late ÷ in-order session (p50 time) | $late_ratio | <= 5 | $(verdict "$late_ratio <= 5") |"
  echo "<!-- phrase-progress:end -->"
} >"$section"
write_results_section phrase-progress "$section"
