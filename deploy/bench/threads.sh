#!/usr/bin/env bash
# Cursor paging of a long comment thread (issue 35), a bounded step of its own (a few minutes after
# the first run, which also builds the release binary and seeds the articles): starts PostgreSQL and
# news-service on 127.0.0.1, puts 50,000 comments (replies included, depth up to 10) on one
# article by bulk SQL, walks the thread by cursor to page 2,000 (limit 20), then measures with wrk,
# anonymous and direct at the service, page 1 against page 2,000 by cursor, interleaved
# (page 1, page 2,000, page 1, page 2,000) so other work on the machine hits both alike.
# Goal: page 2,000 >= 0.8x the req/s of page 1 (each ratio of one round, and of the sums).
# Writes its section between the threads markers in deploy/bench/RESULTS.md (under the notes
# marker, so run.sh keeps it). All processes it starts are stopped on exit (PostgreSQL included),
# and the comments it adds are removed again.
#
# Environment: STEP_SECS (10), ROUNDS (2), ARTICLES (1000), CONNS (64), BENCH_PORT_BASE (19430),
# PG_PORT (55474), BENCH_STATE (.local/bench-threads), BUILD=0, OTHER_WORK (a note),
# PROFILE (release; debug only to try the script: its numbers are not the service's).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STEP_SECS=${STEP_SECS:-10}
ROUNDS=${ROUNDS:-2}
ARTICLES=${ARTICLES:-1000}
CONNS=${CONNS:-64}
PG_PORT=${PG_PORT:-55474}
NEWS=${BENCH_PORT_BASE:-19430}
require_free_ports "$NEWS" "$PG_PORT"
bench_folders "$root/.local/bench-threads" lingonews-threads

need_apt wrk:wrk
PROFILE=${PROFILE:-release}
say "building $PROFILE news-service"
build_flags=(); [ "$PROFILE" = release ] && build_flags+=(--release)
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked "${build_flags[@]}" -p news-service)
# A copy: the shared target folder may be rebuilt by another checkout while this runs.
cp "$(target_dir)/$PROFILE/news-service" "$work/news-service"
news_bin="$work/news-service"

start_bench_postgres shared_buffers=256MB max_connections=200
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$news_bin" migrate >>"$logs/setup.log" 2>&1
have=$(admin_psql -c "SELECT count(*) FROM news.articles")
if [ "$have" -lt "$ARTICLES" ]; then
  say "seeding $ARTICLES articles (once; kept in $pg_data)"
  "$news_bin" seed --articles "$ARTICLES" >>"$logs/setup.log" 2>&1
fi
owner_sql() { "$PSQL" -X -q -v ON_ERROR_STOP=1 -tA "$NEWS_OWNER_DATABASE_URL" "$@"; }
article=$(owner_sql -c "SELECT id FROM articles ORDER BY published_at DESC, id DESC LIMIT 1")

say "50,000 comments on $article: 10,000 top-level, 4,000 replies at each depth 1..10 (bulk SQL as the owner)"
owner_sql -c "TRUNCATE comments"
bulk_start=$(date +%s.%N)
# Ids are UUIDv7-like (time first) and created_at comes from them, as the service writes them.
owner_sql -v article="$article" <<'SQL'
SELECT set_config('bench.article', :'article', false) \g /dev/null
CREATE FUNCTION pg_temp.v7(ms bigint, salt text) RETURNS text LANGUAGE sql AS $$
  SELECT lpad(to_hex(ms), 12, '0') || '7' || substr(md5(ms::text || salt), 1, 3) || '8'
         || substr(md5(ms::text || salt), 4, 15) $$;
INSERT INTO comments (id, article_id, author_id, text, depth, path, created_at)
  SELECT pg_temp.v7(ms, 'r')::uuid, :'article', 'bench', 'A comment.', 0, pg_temp.v7(ms, 'r'),
         to_timestamp(ms / 1000.0)
  FROM (SELECT 1780000000000 + i AS ms FROM generate_series(0, 9999) i) g;
DO $$
DECLARE d int;
BEGIN
  FOR d IN 1..10 LOOP
    WITH p AS (SELECT id, path, row_number() OVER (ORDER BY path) - 1 AS n
               FROM comments WHERE article_id = current_setting('bench.article') AND depth = d - 1),
         g AS (SELECT pg_temp.v7(1780000000000 + d * 10000000 + i, d::text) AS hex,
                      1780000000000 + d * 10000000 + i AS ms,
                      (i * 7919) % (SELECT count(*) FROM p) AS n
               FROM generate_series(0, 3999) i)
    INSERT INTO comments (id, article_id, parent_id, author_id, text, depth, path, created_at)
      SELECT g.hex::uuid, current_setting('bench.article'), p.id, 'bench', 'A reply.', d,
             p.path || '.' || g.hex, to_timestamp(g.ms / 1000.0)
      FROM g JOIN p ON p.n = g.n;
  END LOOP;
END $$;
SQL
bulk_secs=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$bulk_start")
admin_psql -c "VACUUM ANALYZE news.comments" >/dev/null

# The service needs token settings to start; the bench's requests are anonymous.
export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256
export AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')
say "starting news :$NEWS"
spawn news "$logs" env NEWS_LISTEN_ADDR="127.0.0.1:$NEWS" "$news_bin" serve
news_pid=$last_pid; wait_ready news-service "$NEWS" "$news_pid"

# --- the thread, walked by cursor -------------------------------------------------------------------
page1="/v1/news/articles/$article/comments?limit=20"
say "walking the thread by cursor to page 2,000"
walk=$(python3 - "http://127.0.0.1:$NEWS$page1" <<'PY'
import json, sys, time, urllib.request
base = sys.argv[1]
def get(url):
    with urllib.request.urlopen(url) as r:
        return json.load(r)
page, n, total, start = get(base), 1, 0, time.time()
total += page["count"]
while n < 1999 and page["next_cursor"]:
    page = get(base + "&cursor=" + page["next_cursor"])
    n, total = n + 1, total + page["count"]
# Page 2,000 is asked with the cursor of page 1,999; the rest of the walk counts the thread.
cursor = page["next_cursor"]
last, rest = None, get(base + "&cursor=" + cursor)
page2000 = rest
while True:
    total += rest["count"]
    last = rest["data"][-1] if rest["data"] else last
    if not rest["next_cursor"]:
        break
    rest = get(base.replace("limit=20", "limit=100") + "&cursor=" + rest["next_cursor"])
print(json.dumps({"cursor": cursor, "pages": n, "total": total, "first": page2000["data"][0]["id"],
                  "last_depth": last["depth"], "secs": round(time.time() - start, 1)}))
PY
)
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
cursor=$(field "$walk" cursor)
[ "$(field "$walk" pages)" = 1999 ] || die "the walk stopped early: $walk"
[ "$(field "$walk" total)" = 50000 ] || die "the walk did not read 50,000 comments: $walk"
expected=$(owner_sql -c "SELECT id FROM comments WHERE article_id = '$article' ORDER BY path OFFSET 39980 LIMIT 1")
[ "$(field "$walk" first)" = "$expected" ] || die "page 2,000 starts at $(field "$walk" first), not $expected"
echo "  walked 1,999 pages of 20 and the rest in $(field "$walk" secs) s: 50,000 comments, the last at depth $(field "$walk" last_depth)" >&2
page2000="$page1&cursor=$cursor"

# --- measuring -------------------------------------------------------------------------------------
rows_md="$work/rows.md"
: >"$rows_md"
measure() { # measure NAME URL: one wrk run; sets $rps
  local name=$1 url=$2 load out result
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  out=$(wrk -t2 -c"$CONNS" -d"${STEP_SECS}s" --timeout 10s -s "$bench_dir/bench.lua" "$url" 2>&1) || true
  result=$(sed -n 's/^RESULT //p' <<<"$out")
  [ -n "$result" ] || { printf '%s\n' "$out" >&2; die "wrk failed on $name"; }
  rps=$(field "$result" rps)
  printf '| %s | %s | %.0f | %.3f | %.3f | %s | %s |\n' "$name" "$CONNS" "$rps" \
    "$(field "$result" p50_ms)" "$(field "$result" p99_ms)" "$(field "$result" non_2xx_3xx)" "$load" >>"$rows_md"
  printf '  %-40s %8.0f req/s  p50 %7.3f ms  (load %s)\n' "$name" "$rps" "$(field "$result" p50_ms)" "$load" >&2
}
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
wrk -t2 -c16 -d2s -s "$bench_dir/bench.lua" "http://127.0.0.1:$NEWS$page1" >/dev/null 2>&1 || true
wrk -t2 -c16 -d2s -s "$bench_dir/bench.lua" "http://127.0.0.1:$NEWS$page2000" >/dev/null 2>&1 || true
sum1=0 sum2000=0 round_ratios=()
for round in $(seq "$ROUNDS"); do
  say "round $round of $ROUNDS"
  measure "page 1, round $round" "http://127.0.0.1:$NEWS$page1"; r1=$rps
  measure "page 2,000 by cursor, round $round" "http://127.0.0.1:$NEWS$page2000"; r2=$rps
  sum1=$(python3 -c "print($sum1 + $r1)"); sum2000=$(python3 -c "print($sum2000 + $r2)")
  round_ratios+=("$(python3 -c "print(f'{$r2 / $r1:.2f}')")")
done
ratio=$(python3 -c "print(f'{$sum2000 / $sum1:.2f}')")
verdict=missed
python3 -c "import sys; sys.exit(0 if $ratio >= 0.8 else 1)" && verdict=met

say "removing the comments added"
owner_sql -c "TRUNCATE comments"

# --- report ------------------------------------------------------------------------------------------
section="$work/section.md"
{
  echo "<!-- threads:begin (deploy/bench/threads.sh rewrites this section) -->"
  echo "## Cursor paging of a long thread (issue 35): \`deploy/bench/threads.sh\`"
  echo
  echo "- **Date**: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(cd "$root" && git rev-parse --short HEAD)$(cd "$root" && git diff --quiet HEAD -- news-service shared-auth || echo ', with uncommitted changes in the crates')"
  echo "- **Machine**: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores; wrk, news-service and PostgreSQL $("$PSQL" --version | awk '{print $3}') on it, over loopback; $PROFILE binary; anonymous GETs direct at the service; wrk 2 threads, $CONNS connections, ${STEP_SECS} s per step, $ROUNDS interleaved rounds."
  echo "- **Other work on the machine**: ${OTHER_WORK:-none noted}. Load average at start: $load_start, and before each step in the table. Absolute numbers are lower bounds; the ratios, measured within this one run, are the result."
  echo "- **Data**: article \`$article\` with 50,000 comments (10,000 top-level, 4,000 replies at each depth 1..10; inserted in ${bulk_secs} s by bulk SQL). Page 2,000 (limit 20: comments 39,981..40,000) is asked with the \`next_cursor\` of page 1,999, found by walking the thread; the walk read all 50,000 comments to the last reply."
  echo
  echo "| step | conc. | req/s | p50 ms | p99 ms | non-2xx | load avg before |"
  echo "|---|---|---|---|---|---|---|"
  cat "$rows_md"
  echo
  echo "| goal | measured | target | verdict |"
  echo "|---|---|---|---|"
  echo "| page 2,000 by cursor / page 1 (req/s, sums over the rounds; per round: ${round_ratios[*]}) | $ratio | >= 0.8 | $verdict |"
  echo "<!-- threads:end -->"
} >"$section"
write_results_section threads "$section"
