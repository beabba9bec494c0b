#!/usr/bin/env bash
# Phrase search (issue 32's bench): GET /v1/lingo/phrases?q=<3 letters> over 100,000 phrases with
# 5 translations each, p50 at the service (goal <= 5 ms). Starts PostgreSQL and lingo-service on
# 127.0.0.1, writes the catalogue once as the pipeline (kept in $BENCH_STATE between runs: words
# made of random syllables, a few accented, 3 to 7 words a text), then measures with wrk at low
# concurrency (latency, not throughput): the 3-letter prefix of a vocabulary word, then a
# two-word query, then the plain list for scale. Writes its section between the phrase-search
# markers in deploy/bench/RESULTS.md. All processes it starts are stopped on exit.
#
# Environment: STEP_SECS (10), PHRASES (100000), CONNS (1), BENCH_PORT_BASE (19450: one port),
# PG_PORT (55482), BENCH_STATE (.local/bench-phrase-search), BUILD=0, OTHER_WORK (a note),
# PROFILE (release; debug only to try the script: its numbers are not the service's).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STEP_SECS=${STEP_SECS:-10}
PHRASES=${PHRASES:-100000}
CONNS=${CONNS:-1}
PG_PORT=${PG_PORT:-55482}
LINGO=${BENCH_PORT_BASE:-19450}
require_free_ports "$LINGO" "$PG_PORT"
bench_folders "$root/.local/bench-phrase-search" lingonews-phrase-search

need_apt wrk:wrk
PROFILE=${PROFILE:-release}
say "building $PROFILE lingo-service"
build_flags=(); [ "$PROFILE" = release ] && build_flags+=(--release)
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked "${build_flags[@]}" -p lingo-service)
bin="$(target_dir)/$PROFILE"

start_bench_postgres shared_buffers=512MB
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$bin/lingo-service" migrate >>"$logs/setup.log" 2>&1
pipeline_sql() { "$PSQL" -X -q -v ON_ERROR_STOP=1 -tA "$LINGO_PIPELINE_DATABASE_URL" "$@"; }

have=$(admin_psql -c "SELECT count(*) FROM lingo.phrases WHERE id LIKE 'bench-%'")
if [ "$have" -lt "$PHRASES" ]; then
  say "writing $PHRASES phrases with 5 translations each as the pipeline (once; kept in $pg_data)"
  catalogue_start=$(date +%s.%N)
  # Bulk statements, as a pipeline import would: the search documents are refreshed by the
  # migration's statement-level triggers, once per statement.
  pipeline_sql -v phrases="$PHRASES" <<'SQL'
SELECT setseed(0.42);
INSERT INTO languages (code, name) VALUES ('de', 'German'), ('en', 'English'), ('es', 'Spanish'),
  ('fr', 'French'), ('it', 'Italian'), ('pt', 'Portuguese') ON CONFLICT DO NOTHING;
CREATE TEMP TABLE vocab (n int PRIMARY KEY, word text NOT NULL);
INSERT INTO vocab
  SELECT n, string_agg(s, '' ORDER BY k) FROM (
    SELECT n, k, (ARRAY['ka', 'lo', 'mé', 'ra', 'ti', 'su', 'an', 'el', 'or', 'ba', 'de', 'mi', 'no',
                        'pa', 'se', 'to', 've', 'ga', 'li', 'ur', 'ñe', 'có'])[1 + floor(random() * 22)::int] AS s
    FROM generate_series(1, 20000) n, generate_series(1, 2 + n % 3) k) syllables
  GROUP BY n;
ANALYZE vocab;
INSERT INTO phrases (id, text, language_code)
SELECT 'bench-' || lpad(g::text, 6, '0'),
       initcap((SELECT string_agg(w.word, ' ')
                  FROM (SELECT 1 + floor(random() * 20000)::int + 0 * k AS n
                          FROM generate_series(1, 3 + g % 5) k) r JOIN vocab w USING (n))),
       (ARRAY['de', 'en', 'es', 'fr', 'it', 'pt'])[1 + g % 6]
FROM generate_series(1, :phrases) g
ON CONFLICT (id) DO NOTHING;
INSERT INTO phrase_translations (phrase_id, language_code, text)
SELECT p.id, l.code,
       (SELECT string_agg(w.word, ' ')
          FROM (SELECT 1 + floor(random() * 20000)::int + 0 * k AS n
                  FROM generate_series(1, 3 + (hashtext(p.id || l.code) & 3)) k) r JOIN vocab w USING (n))
FROM phrases p JOIN languages l ON l.code <> p.language_code
WHERE p.id LIKE 'bench-%'
ON CONFLICT DO NOTHING;
SQL
  catalogue_secs=$(python3 -c "import time,sys; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$catalogue_start")
  echo "catalogue written in $catalogue_secs s" >>"$logs/setup.log"
fi
admin_psql -c "VACUUM ANALYZE" >/dev/null
phrases=$(admin_psql -c "SELECT count(*) FROM lingo.phrases")
translations=$(admin_psql -c "SELECT count(*) FROM lingo.phrase_translations")

# The 3-letter query: the start of the first word of a fixed phrase (a typical prefix, not a
# rare one), and a two-word query from another phrase.
q3=$(admin_psql -c "SELECT lower(left(text, 3)) FROM lingo.phrases WHERE id = 'bench-004242'")
q2=$(admin_psql -c "SELECT lower(split_part(text, ' ', 1) || ' ' || left(split_part(text, ' ', 2), 3)) FROM lingo.phrases WHERE id = 'bench-024680'")
matches() { admin_psql -c "SELECT count(*) FROM lingo.phrase_search WHERE everything @@ lingo.search_query('$1', true)"; }
m3=$(matches "$q3"); m2=$(matches "$q2")
urlq() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$1"; }

say "starting lingo-service :$LINGO"
spawn lingo "$logs" env LINGO_LISTEN_ADDR="127.0.0.1:$LINGO" AUTH_ISSUER=lingo-news-dev \
  AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256 AUTH_HS256_SECRET="$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')" \
  "$bin/lingo-service" serve
lingo_pid=$last_pid; wait_ready lingo-service "$LINGO" "$lingo_pid"

rows_md="$work/rows.md"
: >"$rows_md"
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
measure() { # measure NAME URL: one wrk run at $CONNS connections; sets $result
  local name=$1 url=$2 load out
  wrk -t1 -c"$CONNS" -d2s -s "$bench_dir/bench.lua" "$url" >/dev/null 2>&1 || true
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  out=$(wrk -t1 -c"$CONNS" -d"${STEP_SECS}s" --timeout 10s -s "$bench_dir/bench.lua" "$url" 2>&1) || true
  result=$(sed -n 's/^RESULT //p' <<<"$out")
  [ -n "$result" ] || { printf '%s\n' "$out" >&2; die "wrk failed on $name"; }
  printf '| %s | %s | %.0f | %.3f | %.3f | %s | %s |\n' "$name" "$CONNS" "$(field "$result" rps)" \
    "$(field "$result" p50_ms)" "$(field "$result" p99_ms)" "$(field "$result" non_2xx_3xx)" "$load" >>"$rows_md"
  printf '  %-52s %8.0f req/s  p50 %7.3f ms  (load %s)\n' "$name" "$(field "$result" rps)" "$(field "$result" p50_ms)" "$load" >&2
}
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
base="http://127.0.0.1:$LINGO/v1/lingo/phrases"
measure "q=$q3 ($m3 phrases match), limit 20" "$base?q=$(urlq "$q3")&limit=20"; p50=$(field "$result" p50_ms)
measure "q=$q2 ($m2 phrases match), limit 20" "$base?q=$(urlq "$q2")&limit=20"
measure "plain list, limit 20 (no q)" "$base?limit=20"
met=missed; python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 5 else 1)' "$p50" && met=met

section="$work/section.md"
{
  echo "<!-- phrase-search:begin (deploy/bench/phrase-search.sh rewrites this section) -->"
  echo "## Phrase search (issue 32): \`deploy/bench/phrase-search.sh\`"
  echo
  echo "- **Date**: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(cd "$root" && git rev-parse --short HEAD)"
  echo "- **Machine**: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores; wrk, lingo-service and PostgreSQL $("$PSQL" --version | awk '{print $3}') on it, over loopback; $PROFILE binary; wrk 1 thread, $CONNS connection(s), ${STEP_SECS} s per step, direct at the service."
  echo "- **Other work on the machine**: ${OTHER_WORK:-none noted}. Load average at start: $load_start."
  echo "- **Data**: $phrases phrases, $translations translations (words of random syllables, some accented)."
  echo
  echo "| step | conc. | req/s | p50 ms | p99 ms | non-2xx | load avg before |"
  echo "|---|---|---|---|---|---|---|"
  cat "$rows_md"
  echo
  echo "| goal | measured | target | verdict |"
  echo "|---|---|---|---|"
  echo "| p50 of \`q=<3 letters>\` at the service | $p50 ms | <= 5 ms | $met |"
  echo "<!-- phrase-search:end -->"
} >"$section"
write_results_section phrase-search "$section"
