#!/usr/bin/env bash
# Search (issue 33; docs/news.md "GET /v1/news/search"); results in RESULTS.md. Starts PostgreSQL and news-service on
# 127.0.0.1 with ARTICLES seeded articles (every fifth in Spanish; news-service/src/seed/corpus.rs:
# a Zipf vocabulary with a long tail of rare words, names and places), then measures with wrk,
# anonymous and direct at the service, each step against the article list's page 1 in the same
# run:
#   1. a selective query (SELECTIVE_Q: a surname, a topic word and a place, as a reader remembers
#      a story; it must match at most 0.1% of articles), page 1 at CONNS connections (goal >= 0.8x
#      the list);
#   2. a frequent word (FREQUENT_Q, `officials`: it must match at least 10%), sort=relevance (goal
#      >= 0.2x) and sort=newest (goal >= 0.8x);
#   3. page 50 of the frequent-word relevance search by cursor against its page 1 (goal: page 50
#      costs at most 1.5x page 1, i.e. req/s ratio >= 0.67); page 50 lies past the ranked window,
#      so the last page inside it (LAST_RANKED_PAGE, 25) is held to the same bound;
#   4. the floor of step 1 (below): the selective query's GIN match alone, without the service,
#      which bounds what step 1 can reach on the design's index.
# Both queries' matches are counted with SQL every run and the shares checked (the "corpus" rows
# of the verdicts), so the claims above hold for the data measured.
# Prints the rows and verdicts, and writes them to $BENCH_STATE/search-section.md (it does not
# edit RESULTS.md). Every step is time-bounded; all processes it starts are stopped on exit.
#
# The cluster (a million articles: about 3 GB, half an hour to seed on a loaded 2-core machine) is
# kept in $BENCH_STATE between runs. Point BENCH_STATE at a folder outside the worktree to keep it
# when the worktree goes, e.g. BENCH_STATE=/work/bench-data/search (created if missing). A cluster
# seeded by an older seed (another corpus) is refused: remove its pgdata to seed again.
#
# Environment: STEP_SECS (10), ROUNDS (2), ARTICLES (1000000), CONNS (16), BENCH_PORT_BASE (19440),
# PG_PORT (55474), BENCH_STATE (.local/bench-search), BUILD=0, PROFILE (release), SELECTIVE_Q,
# FREQUENT_Q.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STEP_SECS=${STEP_SECS:-10}
ARTICLES=${ARTICLES:-1000000}
CONNS=${CONNS:-16}
ROUNDS=${ROUNDS:-2}
PG_PORT=${PG_PORT:-55474}
NEWS=${BENCH_PORT_BASE:-19440}
require_free_ports "$NEWS" "$PG_PORT"
bench_folders "$root/.local/bench-search" lingonews-search
# The seed's corpus version (news-service/src/seed/corpus.rs): bump it when the seed's text changes.
corpus_version=zipf-1
corpus_marker="$state/seed-corpus"

need_apt wrk:wrk
PROFILE=${PROFILE:-release}
say "building $PROFILE binaries"
build_flags=(); [ "$PROFILE" = release ] && build_flags+=(--release)
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked "${build_flags[@]}" -p news-service)
bin="$(target_dir)/$PROFILE"

start_bench_postgres shared_buffers=512MB max_connections=200 max_wal_size=4GB
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$bin/news-service" migrate >>"$logs/setup.log" 2>&1
have=$(admin_psql -c "SELECT count(*) FROM news.articles")
if [ "$have" -gt 0 ] && [ "$(cat "$corpus_marker" 2>/dev/null)" != "$corpus_version" ]; then
  die "$pg_data holds articles of another seed corpus than $corpus_version: remove it (or set BENCH_STATE) to seed again"
fi
# Bulk seeding: the GIN index is dropped while the rows are written (each insert statement computes
# its rows' search_vector through the trigger) and built once afterwards, which is much faster than
# merging a million rows into it batch by batch. Its definition is kept in $state so that a run
# interrupted in between rebuilds it.
index_sql="$state/articles_search_idx.sql"
index_def() {
  admin_psql -c "SELECT pg_get_indexdef(to_regclass('news.articles_search_idx'))"
}
if [ "$have" -lt "$ARTICLES" ]; then
  say "seeding $ARTICLES articles (once; kept in $pg_data)"
  seed_start=$(date +%s)
  if [ -n "$(index_def)" ]; then
    index_def >"$index_sql"
    admin_psql -c "DROP INDEX news.articles_search_idx"
  fi
  echo "$corpus_version" >"$corpus_marker"
  "$bin/news-service" seed --articles "$ARTICLES" >>"$logs/setup.log" 2>&1
  say "seeded in $(( $(date +%s) - seed_start )) s"
fi
if [ -z "$(index_def)" ]; then
  [ -s "$index_sql" ] || die "news.articles_search_idx is missing and $index_sql does not say how to build it"
  say "building the search index"
  index_start=$(date +%s)
  admin_psql -c "SET maintenance_work_mem = '1GB'" -c "$(cat "$index_sql")"
  say "index built in $(( $(date +%s) - index_start )) s"
fi
articles=$(admin_psql -c "SELECT count(*) FROM news.articles")
# Statistics, and the GIN index's pending list merged, as autovacuum leaves them.
admin_psql -c "VACUUM ANALYZE news.articles" >/dev/null

export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256
export AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')
say "starting news :$NEWS"
spawn news "$logs" env NEWS_LISTEN_ADDR="127.0.0.1:$NEWS" "$bin/news-service" serve
news_pid=$last_pid; wait_ready news-service "$NEWS" "$news_pid"

# --- measuring -------------------------------------------------------------------------------------
rows_md="$work/rows.md"
: >"$rows_md"
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
ratio() { python3 -c 'import sys; print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")' "$1" "$2"; }
# measure NAME URL: one wrk run at CONNS; sets $result (the JSON line) and prints it.
measure() {
  local name=$1 url=$2 load out
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  out=$(wrk -t2 -c"$CONNS" -d"${STEP_SECS}s" --timeout 10s -s "$bench_dir/bench.lua" "$url" 2>&1) || true
  result=$(sed -n 's/^RESULT //p' <<<"$out")
  [ -n "$result" ] || { printf '%s\n' "$out" >&2; die "wrk failed on $name"; }
  printf '| %s | %s | %.0f | %.3f | %.3f | %s | %s |\n' "$name" "$CONNS" "$(field "$result" rps)" \
    "$(field "$result" p50_ms)" "$(field "$result" p99_ms)" "$(field "$result" non_2xx_3xx)" "$load" >>"$rows_md"
  printf '  %-52s %8.0f req/s  p50 %7.3f ms  (load %s)\n' "$name" "$(field "$result" rps)" "$(field "$result" p50_ms)" "$load" >&2
}
warm() { wrk -t2 -c"$CONNS" -d2s -s "$bench_dir/bench.lua" "$1" >/dev/null 2>&1 || true; }
verdicts=()
verdict() { # verdict WHAT VALUE GOAL
  local ok=missed
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$2" "$3" && ok=met
  verdicts+=("| $1 | $2 | >= $3 | $ok |")
}
# matches Q: how many articles Q matches, by the service's matching rule (Q read in each article's
# language). One count per language, so that each uses the GIN index with a constant tsquery (a
# tsquery computed from each row's language cannot use it: minutes on a million articles).
matches() {
  admin_psql -v q="$1" <<'SQL'
SELECT coalesce(sum(n), 0) FROM news.search_languages l
 CROSS JOIN LATERAL (SELECT count(*) AS n FROM news.articles a
                      WHERE a.language = l.language
                        AND a.search_vector @@ websearch_to_tsquery(news.search_config(l.language), :'q')) c
SQL
}
percent() { python3 -c 'import sys; print(f"{100 * int(sys.argv[1]) / int(sys.argv[2]):.3f}")' "$1" "$2"; }
# corpus_check WHAT Q SHARE_PERCENT 'le'|'ge' LIMIT: counts Q's matches once and adds a verdict row.
corpus_check() {
  local count share ok=missed
  count=$(matches "$2"); share=$(percent "$count" "$articles")
  python3 -c 'import sys; a, op, b = float(sys.argv[1]), sys.argv[2], float(sys.argv[3]); sys.exit(0 if (a <= b if op == "le" else a >= b) else 1)' \
    "$share" "$3" "$4" && ok=met
  say "$1 '$2' matches $count of $articles articles ($share%)"
  verdicts+=("| corpus: $1 \`$2\` matches $count articles, % | $share | $([ "$3" = le ] && echo '<=' || echo '>=') $4 | $ok |")
}

service="http://127.0.0.1:$NEWS"
list="$service/v1/news/articles?limit=20"
# A surname, a topic word and a place, as a reader remembers a story: on the 1,000,000-article
# corpus (zipf-1) they match 0.87%, 1.2% and 5.5% of the articles alone and 19 (0.002%)
# together, the share of the old seed's selective query, whose words were each in 4-6%.
selective_q=${SELECTIVE_Q:-"Morales pension Kingsport"}
frequent_q=${FREQUENT_Q:-officials}
urlencode() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$1"; }
selective="$service/v1/news/search?q=$(urlencode "$selective_q")&limit=20"
frequent="$service/v1/news/search?q=$(urlencode "$frequent_q")&limit=20"
corpus_check "selective query" "$selective_q" le 0.1
corpus_check "frequent word" "$frequent_q" ge 10

# The cursors of page 50 of the frequent-word relevance search (49 pages read by cursor) and of
# the last page inside the ranked window (RANKED_MATCHES = 500 in news-service's domain/search.rs,
# 20 a page: page 25). Page 50 is past the window, an unranked newest-first page; the last ranked
# page is the dearest one, so it is measured too.
last_ranked_page=${LAST_RANKED_PAGE:-25}
cursor=""
for page in $(seq 2 50); do
  cursor=$(curl -fsS "$frequent${cursor:+&cursor=$cursor}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["next_cursor"] or "")')
  [ -n "$cursor" ] || die "the frequent-word search ended before page $page"
  [ "$page" != "$last_ranked_page" ] || last_ranked="$frequent&cursor=$cursor"
done
page50="$frequent&cursor=$cursor"

for url in "$list" "$selective" "$frequent" "$frequent&sort=newest" "$page50" "$last_ranked"; do warm "$url"; done
# The floor of the selective query under the design's index (docs/news.md, search: PostgreSQL
# full-text search with a GIN index): whatever else a search does, it must find the matches, which
# for these words means intersecting their GIN posting lists. `floor` runs only that, the English
# half (a lower bound: the Spanish articles are searched too), as a prepared statement at the same
# concurrency with pgbench, the way `measure` runs wrk. Its transactions per second bound the
# selective search's req/s from above: floor ÷ list is the best selective ÷ list any search on this
# index can reach on this data.
PGBENCH=$(find_pg_bin pgbench)
floor_sql="$work/floor.sql"
admin_psql -v q="$selective_q" >"$floor_sql" <<'SQL'
SELECT format('SELECT count(*) FROM news.articles WHERE search_vector @@ websearch_to_tsquery(%L, %L);',
              'english', :'q')
SQL
# measure_floor NAME: like `measure`, with pgbench; sets $result to the same JSON shape.
measure_floor() {
  local name=$1 load out tps p50
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  out=$("$PGBENCH" -n -M prepared -c "$CONNS" -j 2 -T "$STEP_SECS" -f "$floor_sql" \
    "postgres://postgres@127.0.0.1:$PG_PORT/$database" 2>&1) || { printf '%s\n' "$out" >&2; die "pgbench failed on $name"; }
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
  p50=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
  result="{\"rps\": $tps, \"p50_ms\": $p50}"
  printf '| %s | %s | %.0f | %.3f (mean) | | 0 | %s |\n' "$name" "$CONNS" "$tps" "$p50" "$load" >>"$rows_md"
  printf '  %-52s %8.0f tps    mean %6.3f ms  (load %s)\n' "$name" "$tps" "$p50" "$load" >&2
}

# ROUNDS interleaved rounds of the steps: on a shared machine the load moves within a
# minute, so each goal's ratio is taken from the sums over the rounds (each round's is shown too).
declare -A sums=() per_round=()
steps=(list selective floor frequent newest page50 lastranked)
declare -A names=([list]="article list, page 1" [selective]="selective query, page 1"
  [frequent]="frequent word, relevance, page 1" [newest]="frequent word, newest, page 1"
  [floor]="floor: the selective query's GIN match alone (English; pgbench, no service)"
  [page50]="frequent word, relevance, page 50 by cursor"
  [lastranked]="frequent word, relevance, page $last_ranked_page by cursor (last ranked page)")
declare -A urls=([list]="$list" [selective]="$selective" [frequent]="$frequent"
  [newest]="$frequent&sort=newest" [page50]="$page50" [lastranked]="$last_ranked")
for round in $(seq "$ROUNDS"); do
  for step in "${steps[@]}"; do
    if [ "$step" = floor ]; then
      measure_floor "${names[$step]}, round $round"
    else
      measure "${names[$step]}, round $round" "${urls[$step]}"
    fi
    rps=$(field "$result" rps)
    sums[$step]=$(python3 -c "print(${sums[$step]:-0} + $rps)")
    per_round[$step]="${per_round[$step]:-}$rps "
  done
done
# goal NAME STEP BASE TARGET
goal() {
  local each=() r a b
  read -ra a <<<"${per_round[$2]}"; read -ra b <<<"${per_round[$3]}"
  for r in $(seq 0 $((ROUNDS - 1))); do each+=("$(ratio "${a[$r]}" "${b[$r]}")"); done
  verdict "$1 (req/s, sums over the rounds; per round: ${each[*]})" "$(ratio "${sums[$2]}" "${sums[$3]}")" "$4"
}
goal "selective / list" selective list 0.8
goal "bound: floor / list (the most selective / list can reach on this index: missed means out of reach)" floor list 0.8
goal "frequent relevance / list" frequent list 0.2
goal "frequent newest / list" newest list 0.8
goal "page 50 / page 1 (cost <= 1.5x)" page50 frequent 0.67
goal "last ranked page / page 1 (cost <= 1.5x)" lastranked frequent 0.67

section="$state/search-section.md"
{
  echo "Search over $articles articles ($PROFILE, $CONNS connections, ${STEP_SECS} s per step, $ROUNDS interleaved rounds, anonymous, direct at news-service):"
  echo
  echo "| step | conns | req/s | p50 ms | p99 ms | non-2xx/3xx | load |"
  echo "|---|---|---|---|---|---|---|"
  cat "$rows_md"
  echo
  echo "| goal | measured | target | verdict |"
  echo "|---|---|---|---|"
  printf '%s\n' "${verdicts[@]}"
} >"$section"
cat "$section"
say "wrote $section"
