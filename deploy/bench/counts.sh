#!/usr/bin/env bash
# Engagement counters (issue 13), a bounded step of its own (about 5 minutes after the first run,
# which also builds release binaries and seeds the articles): starts PostgreSQL, news-service and
# the gateway on 127.0.0.1, then measures with wrk:
#   1. hot front page: page 1 anonymous through the gateway with no engagement, then with 50,000
#      likes, 20,000 bookmarks and 2,000 comments on each of its 20 articles, once news-service's
#      background folder has folded their counter slots into one row (issue 34: goal hot/idle
#      >= 0.95); the journalists list likewise with 50,000 followers per journalist on it (>= 0.9);
#   2. hot article writes: likes from distinct readers on ONE article against likes spread over
#      many articles, 64 connections, direct at the service (goal >= 0.7x), then the totals:
#      the API count against count(*) and `news-service recount` (no drift);
#   3. read path: page 1 direct at the service against pgbench running the service's own list
#      statement (taken from pg_stat_activity) at the same concurrency (goal >= 0.5x);
#   4. the backfill: counters emptied, then `news-service recount` (the backfill migration's
#      statement) over every engagement row, timed; and a perf profile of news-service on page 1.
# Writes its section between the counts markers in deploy/bench/RESULTS.md (under the notes
# marker, so run.sh keeps it). Every step is time-bounded; all processes it starts are stopped
# on exit (PostgreSQL included), and the engagement it adds is removed again.
#
# Environment: STEP_SECS (10), ARTICLES (100000), CONNS (64), BENCH_PORT_BASE (19420: two ports),
# PG_PORT (55472), PERF (1), BENCH_STATE (.local/bench-counts), BUILD=0, OTHER_WORK (a note),
# PROFILE (release; debug only to try the script: its numbers are not the service's).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STEP_SECS=${STEP_SECS:-10}
ARTICLES=${ARTICLES:-100000}
CONNS=${CONNS:-64}
PG_PORT=${PG_PORT:-55472}
base=${BENCH_PORT_BASE:-19420}
GW=$base NEWS=$((base + 1))
require_free_ports "$GW" "$NEWS" "$PG_PORT"
bench_folders "$root/.local/bench-counts" lingonews-counts

need_apt wrk:wrk perf:linux-perf
PROFILE=${PROFILE:-release}
say "building $PROFILE binaries"
build_flags=(); [ "$PROFILE" = release ] && build_flags+=(--release)
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked "${build_flags[@]}" -p gateway -p news-service)
bin="$(target_dir)/$PROFILE"
PGBENCH=$(find_pg_bin pgbench)

start_bench_postgres shared_buffers=512MB max_connections=200
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$bin/news-service" migrate >>"$logs/setup.log" 2>&1
have=$(admin_psql -c "SELECT count(*) FROM news.articles")
if [ "$have" -lt "$ARTICLES" ]; then
  say "seeding $ARTICLES articles (once; kept in $pg_data)"
  "$bin/news-service" seed --articles "$ARTICLES" >>"$logs/setup.log" 2>&1
fi
articles=$(admin_psql -c "SELECT count(*) FROM news.articles")
# A previous run that was interrupted may have left its engagement: start from none.
owner_sql() { "$PSQL" -X -q -v ON_ERROR_STOP=1 -tA "$NEWS_OWNER_DATABASE_URL" "$@"; }
owner_sql -c "TRUNCATE likes, bookmarks, comments, journalist_follows, organization_follows"
admin_psql -c "VACUUM ANALYZE" >/dev/null

export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256
export AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')
run_id=$(date +%s)
python3 "$bench_dir/bench.py" tokens --secret "$AUTH_HS256_SECRET" --prefix "hot-$run_id" --count 40000 --out "$work/tokens.txt"

say "starting news :$NEWS and gateway :$GW"
spawn news "$logs" env NEWS_LISTEN_ADDR="127.0.0.1:$NEWS" "$bin/news-service" serve
news_pid=$last_pid; wait_ready news-service "$NEWS" "$news_pid"
# The gateway's cache of public answers is off: page 1 and the journalists list are public
# (max-age=30), and with the cache on these steps would time the cache instead of the counters.
spawn gateway "$logs" env NEWS_UPSTREAMS="http://127.0.0.1:$NEWS" LINGO_UPSTREAMS="http://127.0.0.1:9" \
  RATE_LIMIT_ENABLED=false GATEWAY_CACHE_MAX_BYTES=0 GATEWAY_LISTEN_ADDR="127.0.0.1:$GW" "$bin/gateway" serve
gw_pid=$last_pid; wait_ready gateway "$GW" "$gw_pid" /healthz

# --- measuring -------------------------------------------------------------------------------------
rows_md="$work/rows.md"
: >"$rows_md"
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
ratio() { python3 -c 'import sys; print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")' "$1" "$2"; }
# measure NAME CONNS URL [VAR=value ...]: one wrk run; sets $result (the JSON line) and prints it.
measure() {
  local name=$1 conns=$2 url=$3 load out; shift 3
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  out=$(env "$@" wrk -t2 -c"$conns" -d"${STEP_SECS}s" --timeout 10s -s "$bench_dir/bench.lua" "$url" 2>&1) || true
  result=$(sed -n 's/^RESULT //p' <<<"$out")
  [ -n "$result" ] || { printf '%s\n' "$out" >&2; die "wrk failed on $name"; }
  printf '| %s | %s | %.0f | %.3f | %.3f | %s | %s |\n' "$name" "$conns" "$(field "$result" rps)" \
    "$(field "$result" p50_ms)" "$(field "$result" p99_ms)" "$(field "$result" non_2xx_3xx)" "$load" >>"$rows_md"
  printf '  %-52s %8.0f req/s  p50 %7.3f ms  (load %s)\n' "$name" "$(field "$result" rps)" "$(field "$result" p50_ms)" "$load" >&2
}
warm() { wrk -t2 -c16 -d2s -s "$bench_dir/bench.lua" "$1" >/dev/null 2>&1 || true; }
# Waits (at most 60 s) until the CPUs are idle again (90% over one second): seeding or a bulk
# insert leaves PostgreSQL writing for a while (checkpoint, autovacuum), which would be charged
# to the next step.
settle() {
  local before after idle total i
  for _ in $(seq 60); do
    read -ra before < /proc/stat; sleep 1; read -ra after < /proc/stat
    idle=$(( after[4] + after[5] - before[4] - before[5] )); total=0
    for i in 1 2 3 4 5 6 7 8; do total=$(( total + after[i] - before[i] )); done
    [ $(( idle * 100 )) -ge $(( total * 90 )) ] && return
  done
  # Other work keeps the machine busy: measure anyway (the load average is in every row).
  echo "  CPUs still busy after 60 s; measuring anyway" >&2
}
verdicts=()
verdict() { # verdict WHAT VALUE GOAL
  local ok=missed
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$2" "$3" && ok=met
  verdicts+=("| $1 | $2 | >= $3 | $ok |")
}

list="/v1/news/articles?limit=20"
journalists="/v1/news/journalists?limit=20"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

say "1. hot front page and journalists list (idle first)"
admin_psql -c "CHECKPOINT" >/dev/null; settle
warm "http://127.0.0.1:$GW$list"; warm "http://127.0.0.1:$GW$journalists"
measure "page 1, anonymous, gateway: idle" "$CONNS" "http://127.0.0.1:$GW$list"; idle_list=$(field "$result" rps)
measure "journalists page 1, gateway: idle" "$CONNS" "http://127.0.0.1:$GW$journalists"; idle_jrn=$(field "$result" rps)

say "adding 50,000 likes, 20,000 bookmarks, 2,000 comments to each article on page 1, 50,000 followers to each journalist on page 1 (bulk SQL as the owner)"
bulk_start=$(date +%s.%N)
owner_sql <<'SQL'
CREATE TEMP TABLE page AS SELECT id FROM articles ORDER BY published_at DESC, id DESC LIMIT 20;
CREATE TEMP TABLE jpage AS SELECT id FROM journalists ORDER BY name, id LIMIT 20;
INSERT INTO likes (article_id, user_id) SELECT p.id, 'hot-' || i FROM page p, generate_series(1, 50000) i;
INSERT INTO bookmarks (article_id, user_id) SELECT p.id, 'hot-' || i FROM page p, generate_series(1, 20000) i;
INSERT INTO comments (id, article_id, author_id, text, depth, path, created_at)
  SELECT c.id, c.article_id, 'hot-reader', 'A comment.', 0, replace(c.id::text, '-', ''), now()
  FROM (SELECT gen_random_uuid() AS id, p.id AS article_id FROM page p, generate_series(1, 2000)) c;
INSERT INTO journalist_follows (journalist_id, user_id) SELECT j.id, 'hot-' || i FROM jpage j, generate_series(1, 50000) i;
SQL
bulk_secs=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$bulk_start")
# The bulk statements leave each target's counts in random slots; news-service folds them into
# slot 0 in the background (NEWS_COUNTER_FOLD_INTERVAL_MS, default 1 s). Wait for that.
fold_start=$(date +%s.%N)
for _ in $(seq 120); do
  unfolded=$(admin_psql -c "SELECT (SELECT count(*) FROM news.article_stats WHERE slot <> 0) + (SELECT count(*) FROM news.journalist_stats WHERE slot <> 0)")
  [ "$unfolded" = 0 ] && break
  sleep 0.5
done
[ "$unfolded" = 0 ] || die "news-service left $unfolded counter rows outside slot 0 after 60 s"
fold_secs=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$fold_start")
engagement=$(admin_psql -c "SELECT (SELECT count(*) FROM news.likes) + (SELECT count(*) FROM news.bookmarks) + (SELECT count(*) FROM news.comments) + (SELECT count(*) FROM news.journalist_follows)")
admin_psql -c "VACUUM ANALYZE" >/dev/null
admin_psql -c "CHECKPOINT" >/dev/null; settle
shown=$(curl -fsS "http://127.0.0.1:$GW$list" | python3 -c 'import json,sys; d=json.load(sys.stdin)["data"]; print(min(i["like_count"] for i in d), min(i["bookmark_count"] for i in d), min(i["comment_count"] for i in d))')
[ "$shown" = "50000 20000 2000" ] || die "page 1 shows $shown, expected 50000 20000 2000"
warm "http://127.0.0.1:$GW$list"; warm "http://127.0.0.1:$GW$journalists"
measure "page 1, anonymous, gateway: hot" "$CONNS" "http://127.0.0.1:$GW$list"; hot_list=$(field "$result" rps)
measure "journalists page 1, gateway: hot" "$CONNS" "http://127.0.0.1:$GW$journalists"; hot_jrn=$(field "$result" rps)
verdict "hot / idle, page 1 through the gateway" "$(ratio "$hot_list" "$idle_list")" 0.95
verdict "hot / idle, journalists list through the gateway" "$(ratio "$hot_jrn" "$idle_jrn")" 0.9

say "2. likes at $CONNS connections: spread over many articles, then all on one article"
hot_article=$(owner_sql -c "SELECT id FROM articles ORDER BY published_at DESC, id DESC OFFSET 20 LIMIT 1")
measure "likes spread over $articles articles, direct" "$CONNS" "http://127.0.0.1:$NEWS/" \
  MODE=like TOKENS_FILE="$work/tokens.txt" ARTICLES="$articles"
spread_rps=$(field "$result" rps)
measure "likes on ONE article, distinct readers, direct" "$CONNS" "http://127.0.0.1:$NEWS/" \
  MODE=hot TOKENS_FILE="$work/tokens.txt" HOT_ARTICLE="$hot_article"
hot_rps=$(field "$result" rps); hot_ok=$(field "$result" ok_2xx)
verdict "hot article / spread likes (req/s)" "$(ratio "$hot_rps" "$spread_rps")" 0.7
sleep 1   # requests wrk abandoned at its deadline finish server-side
hot_rows=$(owner_sql -c "SELECT count(*) FROM likes WHERE article_id = '$hot_article'")
hot_api=$(curl -fsS "http://127.0.0.1:$NEWS/v1/news/articles/$hot_article" | python3 -c 'import json,sys; print(json.load(sys.stdin)["like_count"])')
recount_out=$("$bin/news-service" recount 2>>"$logs/recount.log")
drift=$(sed -n 's/^total drift fixed: //p' <<<"$recount_out")
echo "  hot article: $hot_ok responses 2xx, $hot_rows rows, like_count $hot_api, recount drift $drift" >&2
[ "$hot_rows" = "$hot_api" ] || die "like_count $hot_api differs from the rows ($hot_rows)"
[ "$drift" = 0 ] || die "recount found drift: $recount_out"

say "3. read path: page 1 direct against pgbench running the same statement"
warm "http://127.0.0.1:$NEWS$list"
( sleep 3; admin_psql -c "SELECT query FROM pg_stat_activity WHERE usename = 'news_app' AND query LIKE 'SELECT a.id, a.title%' LIMIT 1" >"$work/statement.sql" ) &
grab=$!
measure "page 1, anonymous, direct at the service" "$CONNS" "http://127.0.0.1:$NEWS$list"; direct_rps=$(field "$result" rps)
wait "$grab"
grep -q 'LIMIT \$1 OFFSET \$2' "$work/statement.sql" || die "the list statement was not captured: $(cat "$work/statement.sql")"
{ echo '\set limit 21'; echo '\set offset 0'; sed -e 's/\$1/:limit/; s/\$2/:offset/' "$work/statement.sql"; echo ';'; } >"$work/list.pgbench"
load=$(cut -d' ' -f1-3 /proc/loadavg)
pgb=$("$PGBENCH" -n -M prepared -c "$CONNS" -j 2 -T "$STEP_SECS" -f "$work/list.pgbench" "$NEWS_DATABASE_URL" 2>&1) \
  || { printf '%s\n' "$pgb" >&2; die "pgbench failed"; }
pgb_tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$pgb")
pgb_lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$pgb")
printf '| pgbench, the same statement (prepared, news_app) | %s | %.0f | %s (average) | | 0 | %s |\n' "$CONNS" "$pgb_tps" "$pgb_lat" "$load" >>"$rows_md"
echo "  pgbench: $pgb_tps tps" >&2
verdict "service / pgbench, page 1" "$(ratio "$direct_rps" "$pgb_tps")" 0.5

profile=""
if [ "${PERF:-1}" = 1 ] && command -v perf >/dev/null 2>&1; then
  say "profiling news-service on page 1 (perf)"
  (wrk -t2 -c"$CONNS" -d10s -s "$bench_dir/bench.lua" "http://127.0.0.1:$NEWS$list" >/dev/null 2>&1 &
   perf record -F 999 -g -o "$work/perf.data" -p "$news_pid" -- sleep 8 >/dev/null 2>&1; wait) || true
  if [ -s "$work/perf.data" ]; then
    profile=$(perf report -i "$work/perf.data" --stdio --no-children --sort dso,symbol --percent-limit 1.5 2>/dev/null \
      | grep -E '^ +[0-9]' | sed -e 's/[ -]*$//' | head -n 25 || true)
  fi
fi

say "4. backfill: counters emptied, then recount over $engagement rows"
admin_psql -c "TRUNCATE news.article_stats, news.journalist_stats, news.organization_stats"
backfill_start=$(date +%s.%N)
backfill_out=$("$bin/news-service" recount 2>>"$logs/recount.log")
backfill_secs=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$backfill_start")
echo "$backfill_out" >&2
[ "$("$bin/news-service" recount | sed -n 's/^total drift fixed: //p')" = 0 ] || die "drift after the backfill"

say "removing the engagement added"
owner_sql -c "TRUNCATE likes, bookmarks, comments, journalist_follows, organization_follows"

# --- report ------------------------------------------------------------------------------------------
section="$work/section.md"
{
  echo "<!-- counts:begin (deploy/bench/counts.sh rewrites this section) -->"
  echo "## Engagement counters (issue 13): \`deploy/bench/counts.sh\`"
  echo
  echo "- **Date**: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(cd "$root" && git rev-parse --short HEAD)$(cd "$root" && git diff --quiet HEAD -- news-service gateway shared-auth || echo ', with uncommitted changes in the crates')"
  echo "- **Machine**: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores; every process (wrk, pgbench, gateway, news-service, PostgreSQL $("$PSQL" --version | awk '{print $3}')) on it, over loopback; $PROFILE binaries; wrk 2 threads, ${STEP_SECS} s per step."
  echo "- **Other work on the machine**: ${OTHER_WORK:-none noted}. Load average at start: $load_start, and before each step in the table. Absolute numbers are lower bounds; the ratios, measured within this one run, are the result."
  echo "- **Data**: $articles articles; page 1's 20 articles with 50,000 likes, 20,000 bookmarks and 2,000 comments each, page 1's 20 journalists with 50,000 followers each ($engagement engagement rows, inserted in ${bulk_secs} s by four bulk statements through the counter triggers; their counter slots folded into one row per target by news-service's background folder ${fold_secs} s later, before the hot steps)."
  echo
  echo "| step | conc. | req/s | p50 ms | p99 ms | non-2xx | load avg before |"
  echo "|---|---|---|---|---|---|---|"
  cat "$rows_md"
  echo
  echo "| goal | measured | target | verdict |"
  echo "|---|---|---|---|"
  printf '%s\n' "${verdicts[@]}"
  echo
  echo "Hot article totals: $hot_ok responses 2xx (wrk abandons up to $CONNS in flight at its deadline), $hot_rows like rows, \`like_count\` $hot_api, \`news-service recount\` drift $drift."
  echo
  echo "Backfill (\`recount\` over empty counters, the statement of the backfill migration): $engagement rows in ${backfill_secs} s."
  echo
  echo '```'
  echo "$backfill_out"
  echo '```'
  if [ -n "$profile" ]; then
    echo
    echo "perf profile of news-service serving page 1 (self time, by DSO and symbol, over 1.5%):"
    echo
    echo '```'
    echo "$profile"
    echo '```'
  fi
  echo "<!-- counts:end -->"
} >"$section"
write_results_section counts "$section"
