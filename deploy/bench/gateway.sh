#!/usr/bin/env bash
# The gateway's own benchmark (issue 15): the gateway against HAProxy 2.6 doing the same
# JWT-verify-and-proxy job, in front of the same lingo-service replica, measured INTERLEAVED
# (gateway, HAProxy, gateway without token cache, direct, then again, each round starting with the
# next contender) so that other work on a shared machine hits every contender alike. Also the p50
# added over the direct call at 2 connections, the gateway's peak RSS at 256 connections, and a
# perf profile of the gateway.
# Prints a Markdown section (paste it into RESULTS.md) and keeps raw results in $BENCH_STATE.
#
# Smaller than run.sh: it needs only lingo data (LEARNERS learners with study sessions, default
# 2000), and every step is time-bounded. Everything stays on 127.0.0.1; every process it starts
# is stopped on exit (PostgreSQL included).
#
# Environment: STEP_SECS (2), ROUNDS (16), LEARNERS (2000), BENCH_PORT_BASE (19500), PG_PORT
# (55480), PERF (1), INSTRUCTIONS (1: count instructions per request under valgrind), BENCH_STATE
# (.local/bench-gateway), BUILD=0 (use the release binaries as built), ROUTES / ALGS
# (space-separated subsets, to iterate on one case), CALLGRIND_PATH (/v1/lingo/languages: the
# route whose instructions are counted), OTLP=1 (also count the gateway exporting every span to an
# OTLP/HTTP sink on port base + 6).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# Many short rounds rather than a few long ones: the VM's speed drifts in plateaus of a few
# seconds (the direct call alone goes from 9,800 to 12,500 req/s and back within a minute), so
# steps close together in time compare fairly, and more rounds steady the medians. Sixteen rounds
# (about 20 minutes): with eight, a slow plateau that falls on two or three steps of one contender
# (every process on the VM then needs 15-40% more CPU per request, the direct call included) moved
# that contender's median by up to 8%, more than the gap the goals ask about.
STEP_SECS=${STEP_SECS:-2}
ROUNDS=${ROUNDS:-16}
CALLGRIND_PATH=${CALLGRIND_PATH:-/v1/lingo/languages}
LEARNERS=${LEARNERS:-2000}
PG_PORT=${PG_PORT:-55480}
base=${BENCH_PORT_BASE:-19500}
GW=$base GW_NOCACHE=$((base + 1)) HA_HS=$((base + 2)) HA_RS=$((base + 3)) LINGO=$((base + 4))
COUNTED=$((base + 5))   # the contender whose instructions are being counted (one at a time)
SINK=$((base + 6))      # OTLP=1: the span sink of the exporting gateway
require_free_ports "$GW" "$GW_NOCACHE" "$HA_HS" "$HA_RS" "$LINGO" "$COUNTED" "$PG_PORT"
[ "${OTLP:-0}" = 0 ] || require_free_ports "$SINK"
bench_folders "$root/.local/bench-gateway" lingonews-gwbench
results="$state/results.tsv"

need_apt wrk:wrk haproxy:haproxy openssl:openssl perf:linux-perf
[ "${INSTRUCTIONS:-1}" = 0 ] || need_apt valgrind:valgrind
say "building release binaries"
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked --release -p gateway -p lingo-service)
bin="$(target_dir)/release"

start_bench_postgres shared_buffers=128MB max_connections=100
export LOG_FORMAT=json RUST_LOG=${RUST_LOG:-warn}
"$bin/lingo-service" migrate >>"$logs/setup.log" 2>&1
"$bin/lingo-service" seed >>"$logs/setup.log" 2>&1
if [ "$(admin_psql -c "SELECT count(*) FROM lingo.learners WHERE learner_id LIKE 'bench-learner-%'")" = 0 ]; then
  say "seeding $LEARNERS learners x 5 study sessions (once)"
  "$PSQL" -X -q "$LINGO_OWNER_DATABASE_URL" -v learners="$LEARNERS" -v per=5 -f "$bench_dir/seed-sessions.sql"
fi
admin_psql -c "VACUUM ANALYZE" >/dev/null

export AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news AUTH_ALGORITHMS=HS256,RS256
export AUTH_HS256_SECRET AUTH_JWKS_FILE="$work/jwks.json"
AUTH_HS256_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n=+/')
openssl genrsa -out "$work/rs256.pem" 2048 2>/dev/null
openssl rsa -in "$work/rs256.pem" -pubout -out "$work/rs256.pub.pem" 2>/dev/null
python3 "$bench_dir/bench.py" jwks --pem "$work/rs256.pub.pem" --kid bench-1 --out "$AUTH_JWKS_FILE"
# A learner of the seeded data, so /me/xp reads real rows.
HS_TOKEN=$("$bin/gateway" mint-token --sub bench-learner-1 --alg HS256 --ttl-secs 7200)
RS_TOKEN=$("$bin/gateway" mint-token --sub bench-learner-1 --alg RS256 --private-key-file "$work/rs256.pem" --kid bench-1 --ttl-secs 7200)

say "starting lingo :$LINGO, gateway :$GW (cache) and :$GW_NOCACHE (no cache), HAProxy :$HA_HS / :$HA_RS"
spawn lingo "$logs" env LINGO_LISTEN_ADDR="127.0.0.1:$LINGO" "$bin/lingo-service" serve
lingo_pid=$last_pid; wait_ready lingo-service "$LINGO" "$lingo_pid"
upstreams=(LINGO_UPSTREAMS="http://127.0.0.1:$LINGO" NEWS_UPSTREAMS="http://127.0.0.1:$LINGO" RATE_LIMIT_ENABLED=false)
spawn gateway "$logs" env "${upstreams[@]}" GATEWAY_LISTEN_ADDR="127.0.0.1:$GW" "$bin/gateway" serve
gw_pid=$last_pid; wait_ready gateway "$GW" "$gw_pid"
spawn gateway-nocache "$logs" env "${upstreams[@]}" TOKEN_CACHE_CAPACITY=0 GATEWAY_LISTEN_ADDR="127.0.0.1:$GW_NOCACHE" "$bin/gateway" serve
gwn_pid=$last_pid; wait_ready gateway-nocache "$GW_NOCACHE" "$gwn_pid"
sed -e "s#@HA_HS@#$HA_HS#; s#@HA_RS@#$HA_RS#; s#@LINGO@#$LINGO#; s#@SECRET@#$AUTH_HS256_SECRET#" \
    -e "s#@PUBKEY@#$work/rs256.pub.pem#; s#@ISSUER@#$AUTH_ISSUER#; s#@AUDIENCE@#$AUTH_AUDIENCE#" \
    "$bench_dir/haproxy.cfg.in" >"$work/haproxy.cfg"
spawn haproxy "$logs" haproxy -db -f "$work/haproxy.cfg"
ha_pid=$last_pid; wait_ready haproxy "$HA_HS" "$ha_pid" /healthz

for route in /v1/lingo/me/xp /v1/lingo/languages; do
  for port in "$LINGO" "$GW" "$GW_NOCACHE" "$HA_HS"; do
    got=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $HS_TOKEN" "http://127.0.0.1:$port$route")
    [ "$got" = 200 ] || die "$port$route answered $got"
  done
  got=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $RS_TOKEN" "http://127.0.0.1:$HA_RS$route")
  [ "$got" = 200 ] || die "HAProxy RS256 $route answered $got"
done

# CPU time (user + system, clock ticks) a process has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# one CONTENDER ROUTE ALG CONNS SECS URL: one wrk run, one TSV line (contender route alg conns rps
# p50 p99 errors load cpu_us_per_request lingo_cpu_us_per_request round; $round is 0 outside the
# interleaved rounds). CPU per request is the
# contender's own CPU time over the requests it answered: unlike req/s, it hardly moves with what
# else the machine is doing. lingo-service's CPU per request behind each contender shows whether a
# proxy changes the work of the service behind it (the same requests, in principle the same work).
one() {
  local who=$1 route=$2 alg=$3 conns=$4 secs=$5 url=$6 token threads=2 out result pid before lingo_before
  [ "$alg" = HS256 ] && token=$HS_TOKEN || token=$RS_TOKEN
  [ "$conns" -lt 2 ] && threads=1
  pid=$(pid_of "$who")
  before=$(cpu_ticks "$pid") lingo_before=$(cpu_ticks "$lingo_pid")
  out=$(TOKEN=$token wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout 10s -s "$bench_dir/bench.lua" "$url" 2>&1) || true
  result=$(sed -n 's/^RESULT //p' <<<"$out")
  [ -n "$result" ] || { printf '%s\n' "$out" >&2; die "wrk failed on $who $route"; }
  python3 - "$who" "$route" "$alg" "$conns" "$result" "$(cut -d' ' -f1 /proc/loadavg)" \
    "$(( $(cpu_ticks "$pid") - before ))" "$(( $(cpu_ticks "$lingo_pid") - lingo_before ))" \
    "$(getconf CLK_TCK)" "$round" >>"$results" <<'EOF'
import json, sys
who, route, alg, conns, raw, load, ticks, lingo_ticks, hz, round_ = sys.argv[1:]
r = json.loads(raw)
errors = r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"] + r["non_2xx_3xx"]
per_request = lambda t: int(t) / int(hz) * 1e6 / max(r["requests"], 1)
print("\t".join([who, route, alg, conns, "%.1f" % r["rps"], "%.3f" % r["p50_ms"], "%.3f" % r["p99_ms"], str(errors), load,
                 "%.1f" % per_request(ticks), "%.1f" % per_request(lingo_ticks), round_]))
EOF
  tail -n 1 "$results" >&2
}

# rotated N A B C...: the contenders in the order of round N, each round starting one later, so
# that no contender always runs first (after the light 2-connection steps) or last.
rotated() {
  local by=$(( $1 % ($# - 1) )); shift
  local all=("$@")
  printf '%s\n' "${all[@]:by}" "${all[@]:0:by}"
}
# port_of / pid_of CONTENDER: where it listens (HAProxy's port is the one of the current
# algorithm, $ha) and its process; "direct" is lingo-service itself.
port_of() {
  case $1 in
    gateway) echo "$GW" ;; gateway-nocache) echo "$GW_NOCACHE" ;; haproxy) echo "$ha" ;; *) echo "$LINGO" ;;
  esac
}
pid_of() {
  case $1 in
    gateway) echo "$gw_pid" ;; gateway-nocache) echo "$gwn_pid" ;; haproxy) echo "$ha_pid" ;; *) echo "$lingo_pid" ;;
  esac
}

: >"$results"
round=0
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "interleaved rounds: $ROUNDS x (routes x algorithms x contenders), $STEP_SECS s per step"
for round in $(seq 1 "$ROUNDS"); do
  for route in ${ROUTES:-/v1/lingo/me/xp /v1/lingo/languages}; do
    for alg in ${ALGS:-HS256 RS256}; do
      [ $alg = HS256 ] && ha=$HA_HS || ha=$HA_RS
      for who in $(rotated "$round" gateway haproxy gateway-nocache direct); do
        one "$who" "$route" $alg 64 "$STEP_SECS" "http://127.0.0.1:$(port_of "$who")$route"
      done
      for who in $(rotated "$round" direct gateway haproxy); do
        one "$who" "$route" $alg 2 "$STEP_SECS" "http://127.0.0.1:$(port_of "$who")$route"
      done
    done
  done
done

round=0
say "256 connections (peak RSS)"
one gateway /v1/lingo/languages HS256 256 "$STEP_SECS" "http://127.0.0.1:$GW/v1/lingo/languages"
one gateway /v1/lingo/me/xp HS256 256 "$STEP_SECS" "http://127.0.0.1:$GW/v1/lingo/me/xp"
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
printf 'rss\tgateway\t%s\nrss\tgateway-nocache\t%s\nrss\thaproxy\t%s\nrss\tlingo\t%s\n' \
  "$(hwm "$gw_pid")" "$(hwm "$gwn_pid")" "$(hwm "$ha_pid")" "$(hwm "$lingo_pid")" >"$state/rss.tsv"

if [ "${PERF:-1}" = 1 ] && command -v perf >/dev/null 2>&1; then
  say "profiling the gateway (perf, HS256, /v1/lingo/languages, 64 connections)"
  (TOKEN=$HS_TOKEN wrk -t2 -c64 -d10s -s "$bench_dir/bench.lua" "http://127.0.0.1:$GW/v1/lingo/languages" >/dev/null 2>&1 &
   perf record -F 999 --call-graph "${PERF_CALLGRAPH:-fp}" -o "$work/perf.data" -p "$gw_pid" -- sleep 8 >/dev/null 2>&1; wait) || true
  # Only the lines with a share (not the call-chain fragments perf prints under them); perf pads
  # each line to the terminal width and appends two "-" columns: drop them.
  tidy() { grep -E '^ +[0-9.]+%' | sed -e 's/ *-  *- *$//' -e 's/ *$//' | head -n "$1"; }
  perf report -i "$work/perf.data" --stdio --no-children --sort dso,symbol --percent-limit 1 2>/dev/null \
    | tidy 40 >"$state/profile.txt" || true
  # Inclusive time by function, to see which stage of a request costs what.
  perf report -i "$work/perf.data" --stdio --children --sort symbol --percent-limit 2 -g none 2>/dev/null \
    | tidy 60 >"$state/profile-children.txt" || true
fi

# quiet LOG: waits until LOG (the OTLP sink's) has not changed for 6 s. spans_in LOG: the spans
# the sink has received (its last line ends "N in all").
quiet() { while [ $(( $(date +%s) - $(stat -c %Y "$1") )) -lt 6 ]; do sleep 1; done; }
spans_in() { sed -n 's/.*, \([0-9]*\) in all$/\1/p' "$1" | tail -n 1 | grep . || echo 0; }

# counted NAME CMD...: the instructions per request CMD (a contender listening on $COUNTED) executes in
# user space, counted by valgrind's callgrind over STEP_SECS of HS256 load on $CALLGRIND_PATH at
# 4 connections, after a warm-up that is not counted. Unlike req/s and CPU time this count does not
# move with whatever else the machine does, so small differences show. The kernel's work is not in
# it; both proxies make the same system calls per request (a read and a write on each side).
counted() {
  local name=$1 out="$work/callgrind-$1" url="http://127.0.0.1:$COUNTED$CALLGRIND_PATH" requests total
  shift
  spawn "callgrind-$name" "$logs" valgrind --tool=callgrind --trace-children=yes --instr-atstart=no --callgrind-out-file="$out.%p" "$@"
  local pid=$last_pid
  wait_ready "$name under valgrind" "$COUNTED" "$pid" /healthz
  TOKEN=$HS_TOKEN wrk -t1 -c4 -d2s -s "$bench_dir/bench.lua" "$url" >/dev/null 2>&1 || true
  # An exporting gateway sends its spans in batches (every OTEL_BSP_SCHEDULE_DELAY, 1 s here, or
  # at 512 spans): wait until the sink has had nothing for 6 s after the warm-up and after the
  # load, so that the count holds the export of exactly the counted requests' spans.
  local spans_before=0
  [ -z "${sink:-}" ] || { quiet "$sink"; spans_before=$(spans_in "$sink"); }
  callgrind_control --instr=on "$pid" >/dev/null
  requests=$(TOKEN=$HS_TOKEN wrk -t1 -c4 -d"${STEP_SECS}s" -s "$bench_dir/bench.lua" "$url" 2>&1 \
    | sed -n 's/^RESULT //p' | python3 -c 'import json, sys; r = json.load(sys.stdin); assert r["non_2xx_3xx"] == 0; print(r["requests"])') \
    || die "the counted load on $name failed"
  [ -z "${sink:-}" ] || quiet "$sink"
  callgrind_control --instr=off "$pid" >/dev/null
  [ -z "${sink:-}" ] || say "$name: $(( $(spans_in "$sink") - spans_before )) spans reached the sink for $requests requests"
  callgrind_control --dump "$pid" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true
  total=$(cat "$out".* | sed -n 's/^totals: //p' | paste -sd+ | bc)
  [ -n "$total" ] || die "callgrind counted nothing for $name (see $logs/callgrind-$name.log)"
  printf '%s\t%s\t%s\n' "$name" "$requests" "$total" >>"$state/instructions.tsv"
  tail -n 1 "$state/instructions.tsv" >&2
}

: >"$state/instructions.tsv"
if [ "${INSTRUCTIONS:-1}" = 1 ]; then
  say "instructions per request (callgrind; one worker thread each)"
  one_worker=(env "${upstreams[@]}" GATEWAY_WORKERS=1 GATEWAY_LISTEN_ADDR="127.0.0.1:$COUNTED")
  counted gateway "${one_worker[@]}" "$bin/gateway" serve
  counted gateway-nocache "${one_worker[@]}" TOKEN_CACHE_CAPACITY=0 "$bin/gateway" serve
  if [ "${OTLP:-0}" = 1 ]; then
    spawn otlp-sink "$logs" python3 "$bench_dir/otlp_sink.py" "$SINK"
    sink="$logs/otlp-sink.log" counted gateway-otlp "${one_worker[@]}" OTEL_BSP_SCHEDULE_DELAY=1000 OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$SINK" "$bin/gateway" serve
  fi
  # HAProxy's HS256 frontend alone, on the counted port, with one thread.
  sed -n '1,/^frontend jwt_rs256/p' "$work/haproxy.cfg" | sed -e '$d' -e "s#127.0.0.1:$HA_HS#127.0.0.1:$COUNTED#" \
    -e 's/^global$/global\n    nbthread 1/' >"$work/haproxy-counted.cfg"
  sed -n '/^backend lingo/,$p' "$work/haproxy.cfg" >>"$work/haproxy-counted.cfg"
  counted haproxy haproxy -db -f "$work/haproxy-counted.cfg"
fi

say "summary"
python3 - "$results" "$state/rss.tsv" "$state/profile.txt" "$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" "$state/instructions.tsv" "$CALLGRIND_PATH" <<'EOF'
import collections, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
rss = dict((l.split("\t")[1], int(l.split("\t")[2])) for l in open(sys.argv[2]) if l.strip())
by = collections.defaultdict(list)
rps_in_round = {}
for who, route, alg, conns, rps, p50, p99, errors, load, cpu_us, lingo_cpu_us, round_ in rows:
    by[(who, route, alg, int(conns))].append((float(rps), float(p50), float(p99), int(errors), load, float(cpu_us), float(lingo_cpu_us)))
    rps_in_round[(who, route, alg, int(conns), round_)] = float(rps)
med = lambda xs: statistics.median(xs)
def paired(who, route, alg):
    """Median over the rounds of who's req/s divided by HAProxy's in the same round (seconds apart)."""
    ratios = [rps / rps_in_round[("haproxy", r, a, c, n)] for (w, r, a, c, n), rps in rps_in_round.items()
              if (w, r, a, c) == (who, route, alg, 64) and n != "0" and ("haproxy", r, a, c, n) in rps_in_round]
    return med(ratios)
def measured(conns):
    """The (route, alg) steps the gateway ran at `conns` connections (ROUTES / ALGS may skip some)."""
    for route in ("/v1/lingo/me/xp", "/v1/lingo/languages"):
        for alg in ("HS256", "RS256"):
            if by[("gateway", route, alg, conns)]:
                yield route, alg
print(f"Load average at start {sys.argv[4]}, at end {sys.argv[5]}.\n")
print("req/s at 64 connections: medians over the rounds, their ratios, and the median of the ratios within a round (paired: the two steps seconds apart, so the VM's drift mostly cancels):\n")
print("| route | alg | gateway req/s | gateway, no cache req/s | HAProxy req/s | direct req/s | gateway ÷ HAProxy | no cache ÷ HAProxy | gateway ÷ HAProxy, paired | no cache ÷ HAProxy, paired | errors |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for route, alg in measured(64):
    g, n, h, d = (med([r[0] for r in by[(w, route, alg, 64)]]) for w in ("gateway", "gateway-nocache", "haproxy", "direct"))
    errs = sum(r[3] for w in ("gateway", "gateway-nocache", "haproxy", "direct") for r in by[(w, route, alg, 64)])
    pg, pn = paired("gateway", route, alg), paired("gateway-nocache", route, alg)
    print(f"| `{route}` | {alg} | {g:,.0f} | {n:,.0f} | {h:,.0f} | {d:,.0f} | {g/h:.2f}× | {n/h:.2f}× | {pg:.2f}× | {pn:.2f}× | {errs} |")
print("\nCPU time per request at 64 connections (the contender's own user + system time over the requests it answered; median over the rounds):\n")
print("| route | alg | gateway µs | gateway, no cache µs | HAProxy µs | HAProxy ÷ gateway | HAProxy ÷ no cache |")
print("|---|---|---|---|---|---|---|")
for route, alg in measured(64):
    g, n, h = (med([r[5] for r in by[(w, route, alg, 64)]]) for w in ("gateway", "gateway-nocache", "haproxy"))
    print(f"| `{route}` | {alg} | {g:.0f} | {n:.0f} | {h:.0f} | {h/g:.2f}× | {h/n:.2f}× |")
print("\nlingo-service's CPU time per request at 64 connections, behind each contender (median over the rounds):\n")
print("| route | alg | behind gateway µs | behind gateway, no cache µs | behind HAProxy µs | direct µs |")
print("|---|---|---|---|---|---|")
for route, alg in measured(64):
    g, n, h, d = (med([r[6] for r in by[(w, route, alg, 64)]]) for w in ("gateway", "gateway-nocache", "haproxy", "direct"))
    print(f"| `{route}` | {alg} | {g:.0f} | {n:.0f} | {h:.0f} | {d:.0f} |")
print("\nEach proxy's CPU per request divided by lingo-service's in the same step (median over the rounds; the VM's drift, which moves both, cancels out):\n")
print("| route | alg | gateway | gateway, no cache | HAProxy |")
print("|---|---|---|---|---|")
for route, alg in measured(64):
    g, n, h = (med([r[5] / max(r[6], 0.1) for r in by[(w, route, alg, 64)]]) for w in ("gateway", "gateway-nocache", "haproxy"))
    print(f"| `{route}` | {alg} | {g:.2f} | {n:.2f} | {h:.2f} |")
print("\np50 at 2 connections (median over the rounds), added over the direct call:\n")
print("| route | alg | direct p50 ms | gateway p50 ms | HAProxy p50 ms | gateway added ms | HAProxy added ms |")
print("|---|---|---|---|---|---|---|")
for route, alg in measured(2):
    d, g, h = (med([r[1] for r in by[(w, route, alg, 2)]]) for w in ("direct", "gateway", "haproxy"))
    print(f"| `{route}` | {alg} | {d:.3f} | {g:.3f} | {h:.3f} | {g-d:+.3f} | {h-d:+.3f} |")
c256 = [r for k, v in by.items() if k[3] == 256 for r in v]
print(f"\nPeak RSS (VmHWM) after the 256-connection steps: gateway {rss['gateway']/1024:.1f} MiB, gateway without cache {rss['gateway-nocache']/1024:.1f} MiB, HAProxy {rss['haproxy']/1024:.1f} MiB, lingo-service {rss['lingo']/1024:.1f} MiB; 256-connection errors: {sum(r[3] for r in c256)}.")
try:
    profile = open(sys.argv[3]).read().strip("\n")
except OSError:
    profile = ""
if profile:
    print("\nFlat profile of the gateway (perf, HS256, `/v1/lingo/languages`, 64 connections; self time by DSO and symbol, over 1%):\n")
    print("```\n" + profile + "\n```")
counts = {name: int(total) / int(requests) for name, requests, total in (l.split("\t") for l in open(sys.argv[6]) if l.strip())}
if counts:
    print(f"\nInstructions per request in user space (valgrind's callgrind; HS256, `{sys.argv[7]}`, 4 connections, one thread each):\n")
    print("| gateway | gateway, no cache | HAProxy | HAProxy ÷ gateway | HAProxy ÷ no cache |\n|---|---|---|---|---|")
    g, n, h = counts["gateway"], counts["gateway-nocache"], counts["haproxy"]
    print(f"| {g:,.0f} | {n:,.0f} | {h:,.0f} | {h / g:.2f}× | {h / n:.2f}× |")
    if "gateway-otlp" in counts:
        o = counts["gateway-otlp"]
        print(f"\nWith every span exported (OTLP=1): {o:,.0f} instructions per request, {o / g:.3f}× the gateway without an exporter.")
EOF
