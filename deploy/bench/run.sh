#!/usr/bin/env bash
# The benchmark (issue 9), one command: builds release binaries, starts PostgreSQL with a large
# dataset (1,000,000 articles; 100,000 learners with 5 study sessions each; seeded once and kept
# in .local/bench/pgdata), lingo-service, news-service, two gateways (token cache on and off) and
# HAProxy 2.6 doing the same JWT-verify-and-proxy job, then measures with wrk, over loopback:
#   1. gateway vs HAProxy vs the service direct (HS256 and RS256), 64 connections and 1 connection;
#   2. news reads: page 1 anonymous and with a token, page 500 by offset and by cursor;
#   3. writes (study sessions, likes) at 64 connections, then the database totals are checked;
#   4. 256 connections, and the peak RSS of every process over the run.
# Writes deploy/bench/RESULTS.md and deploy/bench/results.png. Every step is time-bounded; all
# processes it starts are stopped on exit (PostgreSQL included).
#
# Environment: STEP_SECS (10), LAT_SECS (5), ARTICLES (1000000), LEARNERS (100000),
# BENCH_PORT_BASE (19400: six ports from it), PG_PORT (55470), PERF (1: profile the gateway with
# perf when available), OUT_DIR (deploy/bench), BENCH_STATE (.local/bench: cluster, logs),
# BUILD=0 (use the release binaries as built).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STEP_SECS=${STEP_SECS:-10}
LAT_SECS=${LAT_SECS:-5}
ARTICLES=${ARTICLES:-1000000}
LEARNERS=${LEARNERS:-100000}
SESSIONS_PER_LEARNER=5
PG_PORT=${PG_PORT:-55470}
base=${BENCH_PORT_BASE:-19400}
GW=$base GW_NOCACHE=$((base + 1)) HA_HS=$((base + 2)) HA_RS=$((base + 3))
LINGO=$((base + 4)) NEWS=$((base + 5))
OUT_DIR=${OUT_DIR:-$bench_dir}
command_line="deploy/bench/run.sh${*:+ $*}"

require_free_ports "$GW" "$GW_NOCACHE" "$HA_HS" "$HA_RS" "$LINGO" "$NEWS" "$PG_PORT"
bench_folders "$root/.local/bench" lingonews-bench
results="$work/results.jsonl"

# --- tools, build, database ------------------------------------------------------------------------
need_apt wrk:wrk haproxy:haproxy openssl:openssl perf:linux-perf
need_venv aiohttp:aiohttp==3.14.5 matplotlib:matplotlib==3.11.2
say "building release binaries"
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked --release -p gateway -p lingo-service -p news-service)
bin="$(target_dir)/release"

start_bench_postgres shared_buffers=512MB max_connections=200
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$bin/lingo-service" migrate >>"$logs/setup.log" 2>&1
"$bin/news-service" migrate >>"$logs/setup.log" 2>&1
"$bin/lingo-service" seed >>"$logs/setup.log" 2>&1

have_articles=$(admin_psql -c "SELECT count(*) FROM news.articles")
if [ "$have_articles" -lt "$ARTICLES" ]; then
  say "seeding $ARTICLES articles (once; kept in $pg_data)"
  time "$bin/news-service" seed --articles "$ARTICLES" >>"$logs/setup.log" 2>&1
fi
have_learners=$(admin_psql -c "SELECT count(*) FROM lingo.learners WHERE learner_id LIKE 'bench-learner-%'")
if [ "$have_learners" = 0 ]; then
  say "seeding $LEARNERS learners x $SESSIONS_PER_LEARNER study sessions (once)"
  time "$PSQL" -X -q "$LINGO_OWNER_DATABASE_URL" -v learners="$LEARNERS" -v per="$SESSIONS_PER_LEARNER" \
    -f "$bench_dir/seed-sessions.sql"
fi
articles=$(admin_psql -c "SELECT count(*) FROM news.articles")
learners=$(admin_psql -c "SELECT count(*) FROM lingo.learners")
sessions=$(admin_psql -c "SELECT count(*) FROM lingo.study_sessions")
admin_psql -c "VACUUM ANALYZE" >/dev/null

# --- keys and tokens -----------------------------------------------------------------------------
run_id=$(date +%s)
export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256,RS256
export AUTH_HS256_SECRET AUTH_JWKS_FILE="$work/jwks.json"
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')
openssl genrsa -out "$work/rs256.pem" 2048 2>/dev/null
openssl rsa -in "$work/rs256.pem" -pubout -out "$work/rs256.pub.pem" 2>/dev/null
py="$venv/bin/python"
"$py" "$bench_dir/bench.py" jwks --pem "$work/rs256.pub.pem" --kid bench-1 --out "$AUTH_JWKS_FILE"
HS_TOKEN=$("$bin/gateway" mint-token --sub bench-reader --alg HS256 --ttl-secs 7200)
RS_TOKEN=$("$bin/gateway" mint-token --sub bench-reader --alg RS256 --private-key-file "$work/rs256.pem" --kid bench-1 --ttl-secs 7200)
"$py" "$bench_dir/bench.py" tokens --secret "$AUTH_HS256_SECRET" --prefix "bench-$run_id" --count 1000 --out "$work/tokens.txt"

# --- processes -----------------------------------------------------------------------------------
say "starting lingo :$LINGO, news :$NEWS, gateway :$GW (cache) and :$GW_NOCACHE (no cache), HAProxy :$HA_HS (HS256) :$HA_RS (RS256)"
spawn lingo "$logs" env LINGO_LISTEN_ADDR="127.0.0.1:$LINGO" "$bin/lingo-service" serve
lingo_pid=$last_pid; wait_ready lingo-service "$LINGO" "$lingo_pid"
spawn news "$logs" env NEWS_LISTEN_ADDR="127.0.0.1:$NEWS" "$bin/news-service" serve
news_pid=$last_pid; wait_ready news-service "$NEWS" "$news_pid"
upstreams=(LINGO_UPSTREAMS="http://127.0.0.1:$LINGO" NEWS_UPSTREAMS="http://127.0.0.1:$NEWS" RATE_LIMIT_ENABLED=false)
spawn gateway "$logs" env "${upstreams[@]}" GATEWAY_LISTEN_ADDR="127.0.0.1:$GW" "$bin/gateway" serve
gw_pid=$last_pid; wait_ready gateway "$GW" "$gw_pid"
spawn gateway-nocache "$logs" env "${upstreams[@]}" TOKEN_CACHE_CAPACITY=0 GATEWAY_LISTEN_ADDR="127.0.0.1:$GW_NOCACHE" "$bin/gateway" serve
gwn_pid=$last_pid; wait_ready gateway-nocache "$GW_NOCACHE" "$gwn_pid"
sed -e "s#@HA_HS@#$HA_HS#; s#@HA_RS@#$HA_RS#; s#@LINGO@#$LINGO#; s#@SECRET@#$AUTH_HS256_SECRET#" \
    -e "s#@PUBKEY@#$work/rs256.pub.pem#; s#@ISSUER@#$AUTH_ISSUER#; s#@AUDIENCE@#$AUTH_AUDIENCE#" \
    "$bench_dir/haproxy.cfg.in" >"$work/haproxy.cfg"
haproxy -c -q -f "$work/haproxy.cfg" || die "HAProxy rejects its configuration"
spawn haproxy "$logs" haproxy -db -f "$work/haproxy.cfg"
ha_pid=$last_pid; wait_ready haproxy "$HA_HS" "$ha_pid" /healthz

# Every path must accept the good token and HAProxy must refuse bad ones, or the comparison is moot.
route=/v1/lingo/languages
expect() {
  local want=$1 url=$2 token=$3 got
  got=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "$url")
  [ "$got" = "$want" ] || die "$url answered $got, expected $want"
}
for port in "$LINGO" "$GW" "$GW_NOCACHE" "$HA_HS"; do expect 200 "http://127.0.0.1:$port$route" "$HS_TOKEN"; done
for port in "$LINGO" "$GW" "$GW_NOCACHE" "$HA_RS"; do expect 200 "http://127.0.0.1:$port$route" "$RS_TOKEN"; done
expect 401 "http://127.0.0.1:$HA_HS$route" "${HS_TOKEN%?}x"
expect 401 "http://127.0.0.1:$HA_RS$route" "${RS_TOKEN%?}x"
expect 401 "http://127.0.0.1:$HA_HS$route" "$RS_TOKEN"
expect 401 "http://127.0.0.1:$HA_HS$route" "$("$py" "$bench_dir/bench.py" tokens --secret "$AUTH_HS256_SECRET" --prefix x --count 1 --ttl -120 --out /dev/stdout)"
expect 401 "http://127.0.0.1:$HA_HS$route" "$("$py" "$bench_dir/bench.py" tokens --secret "$AUTH_HS256_SECRET" --prefix x --count 1 --audience other --out /dev/stdout)"
expect 401 "http://127.0.0.1:$HA_HS$route" "$("$py" "$bench_dir/bench.py" tokens --secret "$AUTH_HS256_SECRET" --prefix x --count 1 --issuer other --out /dev/stdout)"

# --- measuring -----------------------------------------------------------------------------------
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
cat >"$results" <<EOF
{"group":"meta","date":"$(date -u +%Y-%m-%dT%H:%M:%SZ)","cpu":"$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)","cores":$(nproc),"mem":"$(free -g | awk '/^Mem:/ {print $2}') GiB","kernel":"$(uname -sr)","command":"$command_line","commit":"$(cd "$root" && git rev-parse --short HEAD)","dirty":"$(cd "$root" && git diff --quiet HEAD -- gateway lingo-service news-service shared-auth || echo ', with uncommitted changes in the crates')","wrk":"$(wrk -v 2>&1 | head -n 1 | cut -d' ' -f1-2)","haproxy":"$(haproxy -v | head -n 1 | cut -d' ' -f1-3)","pg":"$("$PSQL" --version | awk '{print $3}')","articles":$articles,"learners":$learners,"sessions":$sessions,"step_secs":$STEP_SECS,"latency_secs":$LAT_SECS,"load_start":"$load_start","other_work":"${OTHER_WORK:-}"}
EOF

# step NAME LABEL CONNECTIONS SECONDS URL [VAR=value ...]: one wrk run, appended to the results.
step() {
  local name=$1 label=$2 conns=$3 secs=$4 url=$5; shift 5
  local threads=2 load out result
  [ "$conns" -lt 2 ] && threads=1
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  out=$(env "$@" wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout 10s -s "$bench_dir/bench.lua" "$url" 2>&1) || true
  result=$(sed -n 's/^RESULT //p' <<<"$out")
  [ -n "$result" ] || { printf '%s\n' "$out" >&2; die "wrk failed on $name"; }
  printf '{"group":"step","name":"%s","label":"%s","conc":%d,"load":"%s","wrk":%s}\n' \
    "$name" "$label" "$conns" "$load" "$result" >>"$results"
  "$py" "$bench_dir/bench.py" show "$label" "$result" "$load" >&2
}
warm() { wrk -t2 -c16 -d2s -s "$bench_dir/bench.lua" "$1" >/dev/null 2>&1 || true; }

say "1. gateway vs HAProxy vs direct on $route"
for alg in hs rs; do
  if [ $alg = hs ]; then token=$HS_TOKEN; ha=$HA_HS; A=HS256; else token=$RS_TOKEN; ha=$HA_RS; A=RS256; fi
  for port in "$LINGO" "$GW" "$GW_NOCACHE" "$ha"; do TOKEN=$token warm "http://127.0.0.1:$port$route"; done
  step direct-$alg "$A direct (lingo-service)" 64 "$STEP_SECS" "http://127.0.0.1:$LINGO$route" TOKEN="$token"
  step gateway-$alg "$A gateway" 64 "$STEP_SECS" "http://127.0.0.1:$GW$route" TOKEN="$token"
  step gateway-nocache-$alg "$A gateway, no token cache" 64 "$STEP_SECS" "http://127.0.0.1:$GW_NOCACHE$route" TOKEN="$token"
  step haproxy-$alg "$A HAProxy" 64 "$STEP_SECS" "http://127.0.0.1:$ha$route" TOKEN="$token"
  step lat-direct-$alg "$A direct (lingo-service)" 1 "$LAT_SECS" "http://127.0.0.1:$LINGO$route" TOKEN="$token"
  step lat-gateway-$alg "$A gateway" 1 "$LAT_SECS" "http://127.0.0.1:$GW$route" TOKEN="$token"
  step lat-gateway-nocache-$alg "$A gateway, no token cache" 1 "$LAT_SECS" "http://127.0.0.1:$GW_NOCACHE$route" TOKEN="$token"
  step lat-haproxy-$alg "$A HAProxy" 1 "$LAT_SECS" "http://127.0.0.1:$ha$route" TOKEN="$token"
done

say "2. news reads"
list="/v1/news/articles?limit=20"
cursor=$("$py" "$bench_dir/bench.py" cursor --url "http://127.0.0.1:$NEWS$list" --pages 500)
[ -n "$cursor" ] && [ "$cursor" != None ] || die "no cursor for page 500"
warm "http://127.0.0.1:$GW$list"
step news-anon "page 1, anonymous" 64 "$STEP_SECS" "http://127.0.0.1:$GW$list"
step news-token "page 1, with a token" 64 "$STEP_SECS" "http://127.0.0.1:$GW$list" TOKEN="$HS_TOKEN"
step news-page500-offset "page 500 by offset" 64 "$STEP_SECS" "http://127.0.0.1:$GW$list&offset=9980"
step news-page500-cursor "page 500 by cursor" 64 "$STEP_SECS" "http://127.0.0.1:$GW$list&cursor=$cursor"
step news-page1-direct "page 1, anonymous, direct" 64 "$STEP_SECS" "http://127.0.0.1:$NEWS$list"
step news-page500-cursor-direct "page 500 by cursor, direct" 64 "$STEP_SECS" "http://127.0.0.1:$NEWS$list&cursor=$cursor"

say "3. writes at 64 connections"
prefix="bench-$run_id-%"
step write-sessions "study sessions" 64 "$STEP_SECS" "http://127.0.0.1:$GW/" MODE=session TOKENS_FILE="$work/tokens.txt"
step write-likes "likes" 64 "$STEP_SECS" "http://127.0.0.1:$GW/" MODE=like TOKENS_FILE="$work/tokens.txt" ARTICLES="$articles"
sleep 1   # requests wrk abandoned at its deadline finish server-side
ok_of() { "$py" -c 'import json,sys; print([json.loads(l)["wrk"]["ok_2xx"] for l in open(sys.argv[1]) if "\"name\":\""+sys.argv[2]+"\"" in l][0])' "$results" "$1"; }
check() {
  printf '{"group":"check","name":"%s","ok":%d,"rows":%d,"in_flight":%d}\n' "$1" "$2" "$3" 64 >>"$results"
  echo "  $1: $2 responses 2xx, $3 in the database" >&2
}
check "study sessions (wrk): rows" "$(ok_of write-sessions)" "$(admin_psql -c "SELECT count(*) FROM lingo.study_sessions WHERE learner_id LIKE '$prefix'")"
check "study sessions (wrk): learners.sessions" "$(ok_of write-sessions)" "$(admin_psql -c "SELECT coalesce(sum(sessions), 0) FROM lingo.learners WHERE learner_id LIKE '$prefix'")"
check "likes (wrk): rows" "$(ok_of write-likes)" "$(admin_psql -c "SELECT count(*) FROM news.likes WHERE user_id LIKE '$prefix'")"
# wrk abandons the requests in flight at its deadline, so its 2xx count can be short of the rows by
# up to the connection count. An exact count: a fixed number of writes, each awaited.
"$py" "$bench_dir/bench.py" writes --gateway "http://127.0.0.1:$GW" \
  --secret "$AUTH_HS256_SECRET" --prefix "bench-$run_id-x" --articles "$articles" --count 4000 \
  --connections 64 --results "$results" --psql "$PSQL" --db-url "postgres://postgres@127.0.0.1:$PG_PORT/$database"

say "4. 256 connections"
step c256-gateway-news "gateway, news page 1" 256 "$STEP_SECS" "http://127.0.0.1:$GW$list"
step c256-gateway-lingo "gateway, lingo languages, token" 256 "$STEP_SECS" "http://127.0.0.1:$GW$route" TOKEN="$HS_TOKEN"
step c256-direct-news "news-service direct, page 1" 256 "$STEP_SECS" "http://127.0.0.1:$NEWS$list"
step c256-direct-lingo "lingo-service direct, languages, token" 256 "$STEP_SECS" "http://127.0.0.1:$LINGO$route" TOKEN="$HS_TOKEN"

hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
for pair in "gateway:$gw_pid" "gateway (no token cache):$gwn_pid" "lingo-service:$lingo_pid" "news-service:$news_pid" "haproxy:$ha_pid"; do
  printf '{"group":"memory","name":"%s","vmhwm_kib":%d}\n' "${pair%%:*}" "$(hwm "${pair##*:}")" >>"$results"
done

profile_arg=()
if [ "${PERF:-1}" = 1 ] && command -v perf >/dev/null 2>&1; then
  say "profiling the gateway (perf, HS256, 64 connections)"
  (TOKEN=$HS_TOKEN wrk -t2 -c64 -d10s -s "$bench_dir/bench.lua" "http://127.0.0.1:$GW$route" >/dev/null 2>&1 &
   perf record -F 999 -g -o "$work/perf.data" -p "$gw_pid" -- sleep 8 >/dev/null 2>&1; wait) || true
  if [ -s "$work/perf.data" ]; then
    perf report -i "$work/perf.data" --stdio --no-children --sort dso,symbol --percent-limit 1.2 2>/dev/null \
      | grep -E '^ +[0-9]' | head -n 40 >"$work/profile.txt" || true
    [ -s "$work/profile.txt" ] && cp "$work/profile.txt" "$state/profile.txt" && profile_arg=(--profile "$state/profile.txt")
  fi
fi

say "report"
cp "$results" "$state/results.jsonl"
"$py" "$bench_dir/bench.py" report --results "$results" --out "$OUT_DIR/RESULTS.md" --png "$OUT_DIR/results.png" "${profile_arg[@]}"
say "wrote $OUT_DIR/RESULTS.md and $OUT_DIR/results.png (raw results: $state/results.jsonl)"
