#!/usr/bin/env bash
# The gateway's cache of public answers (issue 34): the anonymous front page
# (`GET /v1/news/articles?limit=20`) through the gateway with its cache, through a gateway without
# it (GATEWAY_CACHE_MAX_BYTES=0), through HAProxy 2.6's own cache, and from news-service directly,
# at 64 connections, measured INTERLEAVED round after round (each round starting with the next
# contender) so that other work on the machine hits every contender alike; then the gateway with
# its cache at 1,024 connections (a spike: it should be absorbed, not shed).
# Prints a Markdown section (paste it into RESULTS.md) and keeps raw results in $BENCH_STATE.
#
# HAProxy runs only when it is installed (HAPROXY=1 installs it with apt): a `cache` section with
# `cache-use` / `cache-store`, and the answer's `Vary` removed in front of it, since HAProxy 2.6
# stores no answer that varies on `Authorization`.
#
# Environment: STEP_SECS (5), ROUNDS (5), ARTICLES (2000), BENCH_PORT_BASE (19600), PG_PORT
# (55490), BENCH_STATE (.local/bench-cache), BUILD=0 (use the release binaries as built), HAPROXY.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STEP_SECS=${STEP_SECS:-5}
ROUNDS=${ROUNDS:-5}
ARTICLES=${ARTICLES:-2000}
PG_PORT=${PG_PORT:-55490}
base=${BENCH_PORT_BASE:-19600}
GW=$base GW_NOCACHE=$((base + 1)) HA=$((base + 2)) NEWS=$((base + 3))
require_free_ports "$GW" "$GW_NOCACHE" "$HA" "$NEWS" "$PG_PORT"
bench_folders "$root/.local/bench-cache" lingonews-cachebench
results="$state/results.tsv"
page="/v1/news/articles?limit=20"

need_apt wrk:wrk
[ "${HAPROXY:-0}" = 1 ] && need_apt haproxy:haproxy
have_haproxy=0; command -v haproxy >/dev/null 2>&1 && have_haproxy=1
say "building release binaries"
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked --release -p gateway -p news-service)
bin="$(target_dir)/release"

say "PostgreSQL on 127.0.0.1:$PG_PORT ($pg_data)"
[ "$(id -u)" = 0 ] && chown postgres "$state"
pg_start "$pg_data" "$PG_PORT" shared_buffers=128MB max_connections=100
db_bootstrap "$PG_PORT"
export_db_env
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$bin/news-service" migrate >>"$logs/setup.log" 2>&1
if [ "$(admin_psql -c "SELECT count(*) FROM news.articles")" -lt "$ARTICLES" ]; then
  say "seeding $ARTICLES articles (once)"
  "$bin/news-service" seed --articles "$ARTICLES" >>"$logs/setup.log" 2>&1
fi
admin_psql -c "VACUUM ANALYZE" >/dev/null

export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256
export AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')

say "starting news :$NEWS, gateway :$GW (cache) and :$GW_NOCACHE (no cache)"
spawn news "$logs" env NEWS_LISTEN_ADDR="127.0.0.1:$NEWS" "$bin/news-service" serve
news_pid=$last_pid; wait_ready news-service "$NEWS" "$news_pid"
upstreams=(LINGO_UPSTREAMS="http://127.0.0.1:$NEWS" NEWS_UPSTREAMS="http://127.0.0.1:$NEWS" RATE_LIMIT_ENABLED=false)
spawn gateway "$logs" env "${upstreams[@]}" GATEWAY_LISTEN_ADDR="127.0.0.1:$GW" "$bin/gateway" serve
gw_pid=$last_pid; wait_ready gateway "$GW" "$gw_pid"
spawn gateway-nocache "$logs" env "${upstreams[@]}" GATEWAY_CACHE_MAX_BYTES=0 GATEWAY_LISTEN_ADDR="127.0.0.1:$GW_NOCACHE" "$bin/gateway" serve
gwn_pid=$last_pid; wait_ready gateway-nocache "$GW_NOCACHE" "$gwn_pid"
contenders=(gateway gateway-nocache direct)
if [ "$have_haproxy" = 1 ]; then
  say "starting HAProxy :$HA with its cache"
  cat >"$work/haproxy.cfg" <<EOF
global
    maxconn 8000

defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 10s

# The same job as the gateway's cache: 64 MiB, answers kept for their max-age (30 s).
cache pages
    total-max-size 64
    max-object-size 2097152
    max-age 30

frontend cached
    bind 127.0.0.1:$HA
    http-request return status 200 content-type text/plain string ok if { path /healthz }
    http-request cache-use pages
    # HAProxy 2.6 stores no answer that varies on Authorization: Vary goes, in front of the cache.
    http-response del-header vary
    http-response cache-store pages
    default_backend news

backend news
    server news1 127.0.0.1:$NEWS
EOF
  spawn haproxy "$logs" haproxy -db -f "$work/haproxy.cfg"
  ha_pid=$last_pid; wait_ready haproxy "$HA" "$ha_pid" /healthz
  contenders+=(haproxy)
fi

port_of() {
  case $1 in gateway) echo "$GW" ;; gateway-nocache) echo "$GW_NOCACHE" ;; haproxy) echo "$HA" ;; *) echo "$NEWS" ;; esac
}
for who in "${contenders[@]}"; do
  got=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(port_of "$who")$page")
  [ "$got" = 200 ] || die "$who answered $got"
done
# The cache is used: a second read carries Age.
curl -s -D - -o /dev/null "http://127.0.0.1:$GW$page" | grep -qi '^age:' || die "the gateway's answer has no Age"

# one CONTENDER CONNS: one wrk run, one TSV line (contender conns rps p50 p99 errors non2xx round load).
one() {
  local who=$1 conns=$2 out result
  out=$(wrk -t2 -c"$conns" -d"${STEP_SECS}s" --timeout 10s -s "$bench_dir/bench.lua" "http://127.0.0.1:$(port_of "$who")$page" 2>&1) || true
  result=$(sed -n 's/^RESULT //p' <<<"$out")
  [ -n "$result" ] || { printf '%s\n' "$out" >&2; die "wrk failed on $who"; }
  python3 - "$who" "$conns" "$result" "$round" "$(cut -d' ' -f1 /proc/loadavg)" >>"$results" <<'EOF'
import json, sys
who, conns, raw, round_, load = sys.argv[1:]
r = json.loads(raw)
errors = r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]
print("\t".join([who, conns, "%.1f" % r["rps"], "%.3f" % r["p50_ms"], "%.3f" % r["p99_ms"], str(errors), str(r["non_2xx_3xx"]), round_, load]))
EOF
  tail -n 1 "$results" >&2
}

rotated() {
  local by=$(( $1 % ($# - 1) )); shift
  local all=("$@")
  printf '%s\n' "${all[@]:by}" "${all[@]:0:by}"
}

: >"$results"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "interleaved rounds: $ROUNDS x ${#contenders[@]} contenders, 64 connections, $STEP_SECS s per step"
for round in $(seq 1 "$ROUNDS"); do
  for who in $(rotated "$round" "${contenders[@]}"); do one "$who" 64; done
  one gateway 1024
done

say "summary"
python3 - "$results" "$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import collections, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(list)
in_round = {}
for who, conns, rps, p50, p99, errors, non2xx, round_, load in rows:
    by[(who, int(conns))].append((float(rps), float(p50), float(p99), int(errors), int(non2xx)))
    in_round[(who, int(conns), round_)] = float(rps)
med = statistics.median
def paired(a, b, conns_a=64, conns_b=64):
    ratios = [rps / in_round[(b, conns_b, n)] for (w, c, n), rps in in_round.items()
              if (w, c) == (a, conns_a) and (b, conns_b, n) in in_round]
    return med(ratios)
print(f"Load average at start {sys.argv[2]}, at end {sys.argv[3]}.\n")
print("Anonymous front page (`GET /v1/news/articles?limit=20`), req/s (median over the rounds), p50 / p99 ms, errors (connect/read/write/timeouts) and non-2xx/3xx answers:\n")
print("| contender | connections | req/s | p50 ms | p99 ms | errors | non-2xx |")
print("|---|---|---|---|---|---|---|")
for (who, conns), runs in by.items():
    print(f"| {who} | {conns} | {med([r[0] for r in runs]):,.0f} | {med([r[1] for r in runs]):.3f} | {med([r[2] for r in runs]):.3f} | {sum(r[3] for r in runs)} | {sum(r[4] for r in runs)} |")
print("\nRatios (median of the ratios within a round, the steps seconds apart):\n")
print(f"- gateway with cache ÷ without, 64 connections: {paired('gateway', 'gateway-nocache'):.1f}× (goal ≥ 10×)")
if any(w == "haproxy" for w, _ in by):
    print(f"- gateway with cache ÷ HAProxy's cache, 64 connections: {paired('gateway', 'haproxy'):.2f}× (goal ≥ 0.5×)")
else:
    print("- HAProxy's cache: not measured (haproxy is not installed; HAPROXY=1 installs it)")
print(f"- gateway with cache, 1,024 ÷ 64 connections: {paired('gateway', 'gateway', 1024, 64):.2f}× (goal ≥ 0.9×)")
EOF
