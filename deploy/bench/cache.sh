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
# Every step also records the CPU time the contender and wrk used per answer (the contender's from
# /proc/PID/stat, wrk's from its rusage): unlike req/s it hardly moves with other work on the
# machine, so it tells a gateway that works harder per answer at 1,024 connections from a machine
# that has no CPU left. INSTRUCTIONS=1 (the default) then counts the instructions per cache hit in
# user space (valgrind's callgrind, one worker thread) of the gateway at 4 and 1,024 connections
# and of HAProxy's cache at 4: a number that does not move with the load at all.
#
# Environment: STEP_SECS (5), ROUNDS (5), ARTICLES (2000), BENCH_PORT_BASE (19600: five ports),
# PG_PORT (55490), BENCH_STATE (.local/bench-cache), BUILD=0 (use the release binaries as built),
# HAPROXY, INSTRUCTIONS.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STEP_SECS=${STEP_SECS:-5}
ROUNDS=${ROUNDS:-5}
ARTICLES=${ARTICLES:-2000}
PG_PORT=${PG_PORT:-55490}
base=${BENCH_PORT_BASE:-19600}
GW=$base GW_NOCACHE=$((base + 1)) HA=$((base + 2)) NEWS=$((base + 3)) COUNTED=$((base + 4))
require_free_ports "$GW" "$GW_NOCACHE" "$HA" "$NEWS" "$COUNTED" "$PG_PORT"
bench_folders "$root/.local/bench-cache" lingonews-cachebench
results="$state/results.tsv"
page="/v1/news/articles?limit=20"

need_apt wrk:wrk
[ "${HAPROXY:-0}" = 1 ] && need_apt haproxy:haproxy
have_haproxy=0; command -v haproxy >/dev/null 2>&1 && have_haproxy=1
[ "${INSTRUCTIONS:-1}" = 0 ] || need_apt valgrind:valgrind
say "building release binaries"
[ "${BUILD:-1}" = 0 ] || (cd "$root" && cargo build --locked --release -p gateway -p news-service)
bin="$(target_dir)/release"

start_bench_postgres shared_buffers=128MB max_connections=100
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

# haproxy_cfg PORT [GLOBAL-SETTING]: HAProxy with its cache in front of news-service, on PORT.
haproxy_cfg() {
  cat <<EOF
global
    maxconn 8000
    ${2:-}

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
    bind 127.0.0.1:$1
    http-request return status 200 content-type text/plain string ok if { path /healthz }
    http-request cache-use pages
    # HAProxy 2.6 stores no answer that varies on Authorization: Vary goes, in front of the cache.
    http-response del-header vary
    http-response cache-store pages
    default_backend news

backend news
    server news1 127.0.0.1:$NEWS
EOF
}
if [ "$have_haproxy" = 1 ]; then
  say "starting HAProxy $(haproxy -v | sed -n 's/^HAProxy version \([^ ]*\).*/\1/p') :$HA with its cache"
  haproxy_cfg "$HA" >"$work/haproxy.cfg"
  spawn haproxy "$logs" haproxy -db -f "$work/haproxy.cfg"
  ha_pid=$last_pid; wait_ready haproxy "$HA" "$ha_pid" /healthz
  contenders+=(haproxy)
fi

port_of() {
  case $1 in gateway) echo "$GW" ;; gateway-nocache) echo "$GW_NOCACHE" ;; haproxy) echo "$HA" ;; *) echo "$NEWS" ;; esac
}
pid_of() {
  case $1 in gateway) echo "$gw_pid" ;; gateway-nocache) echo "$gwn_pid" ;; haproxy) echo "$ha_pid" ;; *) echo "$news_pid" ;; esac
}
# CPU time (user and system, clock ticks) a process has used so far, all its threads.
cpu_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }
# Nanoseconds the process's threads have run and have waited, runnable, for a CPU (schedstat).
sched_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{run += $1; wait += $2} END {printf "%.0f %.0f\n", run, wait}'; }

for who in "${contenders[@]}"; do
  got=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(port_of "$who")$page")
  [ "$got" = 200 ] || die "$who answered $got"
done
# The caches are used: a second read carries Age.
curl -s -D - -o /dev/null "http://127.0.0.1:$GW$page" | grep -qi '^age:' || die "the gateway's answer has no Age"
if [ "$have_haproxy" = 1 ]; then
  curl -s -D - -o /dev/null "http://127.0.0.1:$HA$page" | grep -qi '^age:' || die "HAProxy's answer has no Age (not cached)"
fi

# one CONTENDER CONNS: one wrk run, one TSV line (contender conns rps p50 p99 errors non2xx round
# load good_rps cpu_us_per_answer wrk_cpu_us_per_answer sys_us_per_answer waiting). CPU per answer
# is the contender's CPU time (or wrk's) over the answers wrk got; sys is the contender's kernel
# part; waiting is how many of the contender's threads were, on average over the step, runnable
# but waiting for a CPU (the machine's share, not the contender's).
one() {
  local who=$1 conns=$2 out result pid before after sched_before sched_after
  pid=$(pid_of "$who")
  before=$(cpu_ticks "$pid") sched_before=$(sched_ns "$pid")
  out=$(/usr/bin/time -f 'WRKCPU %U %S' wrk -t2 -c"$conns" -d"${STEP_SECS}s" --timeout 10s -s "$bench_dir/bench.lua" "http://127.0.0.1:$(port_of "$who")$page" 2>&1) || true
  after=$(cpu_ticks "$pid") sched_after=$(sched_ns "$pid")
  result=$(sed -n 's/^RESULT //p' <<<"$out")
  [ -n "$result" ] || { printf '%s\n' "$out" >&2; die "wrk failed on $who"; }
  python3 - "$who" "$conns" "$result" "$round" "$(cut -d' ' -f1 /proc/loadavg)" "$before $after" \
    "$(getconf CLK_TCK)" "$(sed -n 's/^WRKCPU //p' <<<"$out")" "$sched_before $sched_after" >>"$results" <<'EOF'
import json, sys
who, conns, raw, round_, load, ticks, hz, wrk_cpu, sched = sys.argv[1:]
run0, wait0, run1, wait1 = (int(t) for t in sched.split())
user0, sys0, user1, sys1 = (int(t) for t in ticks.split())
r = json.loads(raw)
errors = r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]
answers = max(r["requests"], 1)
good = (r["requests"] - r["non_2xx_3xx"]) / r["duration_s"]
wrk_secs = sum(float(x) for x in wrk_cpu.split())
print("\t".join([who, conns, "%.1f" % r["rps"], "%.3f" % r["p50_ms"], "%.3f" % r["p99_ms"], str(errors),
                 str(r["non_2xx_3xx"]), round_, load, "%.1f" % good,
                 "%.1f" % ((user1 + sys1 - user0 - sys0) / int(hz) * 1e6 / answers), "%.1f" % (wrk_secs * 1e6 / answers),
                 "%.1f" % ((sys1 - sys0) / int(hz) * 1e6 / answers),
                 "%.3f" % ((wait1 - wait0) / 1e9 / r["duration_s"])]))
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
say "interleaved rounds: $ROUNDS x ${#contenders[@]} contenders, 64 connections, then the gateway at 1,024; $STEP_SECS s per step"
for round in $(seq 1 "$ROUNDS"); do
  for who in $(rotated "$round" "${contenders[@]}"); do one "$who" 64; done
  one gateway 1024
  [ "$have_haproxy" = 0 ] || one haproxy 1024
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# counted NAME CONNS CMD...: the instructions per answer CMD (a contender listening on $COUNTED)
# executes in user space, counted by callgrind over STEP_SECS of the front page at CONNS
# connections (wrk, one thread), after a warm-up that fills the cache and is not counted. The
# gateway is counted once wrk's connections are up (the steady state, without the cost of opening
# them), its answers by callgrind's count of calls to the function that replays a stored answer;
# HAProxy's by wrk, at 4 connections (their setup is too little to matter).
counted() {
  local name=$1 conns=$2 out="$work/callgrind-$1-$2" url="http://127.0.0.1:$COUNTED$page" requests total
  shift 2
  spawn "callgrind-$name" "$logs" valgrind --tool=callgrind --trace-children=yes --instr-atstart=no --callgrind-out-file="$out.%p" "$@"
  local pid=$last_pid
  wait_ready "$name under valgrind" "$COUNTED" "$pid" /healthz
  wrk -t1 -c4 -d2s -s "$bench_dir/bench.lua" "$url" >/dev/null 2>&1 || true
  if [ "$name" = gateway ]; then
    wrk -t1 -c"$conns" -d"$((STEP_SECS + 10))s" --timeout 30s -s "$bench_dir/bench.lua" "$url" >/dev/null 2>&1 &
    local load=$!
    sleep 5
    callgrind_control --instr=on "$pid" >/dev/null
    sleep "$STEP_SECS"
    callgrind_control --instr=off "$pid" >/dev/null
    wait "$load" || true
  else
    callgrind_control --instr=on "$pid" >/dev/null
    requests=$(wrk -t1 -c"$conns" -d"${STEP_SECS}s" --timeout 30s -s "$bench_dir/bench.lua" "$url" 2>&1 \
      | sed -n 's/^RESULT //p' | python3 -c 'import json, sys; r = json.load(sys.stdin); assert r["non_2xx_3xx"] == 0; print(r["requests"])') \
      || die "the counted load on $name failed"
    callgrind_control --instr=off "$pid" >/dev/null
  fi
  callgrind_control --dump "$pid" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true
  total=$(cat "$out".* | sed -n 's/^totals: //p' | paste -sd+ | bc)
  [ -n "$total" ] || die "callgrind counted nothing for $name (see $logs/callgrind-$name.log)"
  if [ "$name" = gateway ]; then
    requests=$(callgrind_annotate --tree=caller "$(ls -S "$out".* | head -n 1)" 2>/dev/null \
      | sed -n 's/.*< [^ ]*gateway::cache::Answer::reply (\([0-9,]*\)x).*/\1/p' | head -n 1 | tr -d ,)
    [ -n "$requests" ] || die "no calls of gateway::cache::Answer::reply counted (inlined?)"
  fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$conns" "$requests" "$total" >>"$state/instructions.tsv"
  tail -n 1 "$state/instructions.tsv" >&2
  cp "$(ls -S "$out".* | head -n 1)" "$state/callgrind-$name-$conns.out"
}

: >"$state/instructions.tsv"
if [ "${INSTRUCTIONS:-1}" = 1 ]; then
  say "instructions per cache hit (callgrind; one worker thread each)"
  one_worker=(env "${upstreams[@]}" GATEWAY_WORKERS=1 GATEWAY_LISTEN_ADDR="127.0.0.1:$COUNTED")
  counted gateway 4 "${one_worker[@]}" "$bin/gateway" serve
  counted gateway 1024 "${one_worker[@]}" "$bin/gateway" serve
  if [ "$have_haproxy" = 1 ]; then
    haproxy_cfg "$COUNTED" "nbthread 1" >"$work/haproxy-counted.cfg"
    counted haproxy 4 haproxy -db -f "$work/haproxy-counted.cfg"
  fi
fi

say "summary"
python3 - "$results" "$load_start" "$load_end" "$state/instructions.tsv" <<'EOF'
import collections, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(list)
in_round = collections.defaultdict(dict)  # column -> (who, conns, round) -> value
for who, conns, rps, p50, p99, errors, non2xx, round_, load, good, cpu, wrk_cpu, sys_cpu, waiting in rows:
    by[(who, int(conns))].append((float(rps), float(p50), float(p99), int(errors), int(non2xx), float(good), float(cpu), float(wrk_cpu), float(sys_cpu), float(waiting)))
    for column, value in (("rps", rps), ("good", good), ("cpu", cpu), ("wrk", wrk_cpu)):
        in_round[column][(who, int(conns), round_)] = float(value)
med = statistics.median
def paired(a, b, conns_a=64, conns_b=64, column="rps"):
    values = in_round[column]
    ratios = [v / values[(b, conns_b, n)] for (w, c, n), v in values.items()
              if (w, c) == (a, conns_a) and values.get((b, conns_b, n))]
    return med(ratios)
print(f"Load average at start {sys.argv[2]}, at end of the wrk rounds {sys.argv[3]}.\n")
print("Anonymous front page (`GET /v1/news/articles?limit=20`): req/s, good (2xx/3xx) answers/s, p50 / p99 ms (medians over the rounds), errors (connect/read/write/timeouts) and non-2xx/3xx answers (sums), and CPU time per answer of the contender (all its threads) and of wrk (medians):\n")
print("| contender | connections | req/s | good/s | p50 ms | p99 ms | errors | non-2xx | contender CPU µs/answer (kernel) | wrk CPU µs/answer |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (who, conns), runs in by.items():
    m = lambda i: med([r[i] for r in runs])
    print(f"| {who} | {conns} | {m(0):,.0f} | {m(5):,.0f} | {m(1):.3f} | {m(2):.3f} | {sum(r[3] for r in runs)} | {sum(r[4] for r in runs)} | {m(6):.1f} ({m(8):.1f}) | {m(7):.1f} |")
print("\nRatios (median of the ratios within a round, the steps seconds apart):\n")
print(f"- gateway with cache ÷ without, 64 connections: {paired('gateway', 'gateway-nocache'):.1f}× (goal ≥ 10×)")
if any(w == "haproxy" for w, _ in by):
    print(f"- gateway with cache ÷ HAProxy's cache, 64 connections: {paired('gateway', 'haproxy'):.2f}× (goal ≥ 0.5×); CPU per answer, gateway ÷ HAProxy: {paired('gateway', 'haproxy', column='cpu'):.2f}×")
else:
    print("- HAProxy's cache: not measured (haproxy is not installed; HAPROXY=1 installs it)")
print(f"- gateway with cache, good answers at 1,024 ÷ 64 connections: {paired('gateway', 'gateway', 1024, 64, 'good'):.2f}× (goal ≥ 0.9×)")
print(f"  - the gateway's CPU per answer, 1,024 ÷ 64 connections: {paired('gateway', 'gateway', 1024, 64, 'cpu'):.2f}×; wrk's: {paired('gateway', 'gateway', 1024, 64, 'wrk'):.2f}×")
if any(w == "haproxy" and c == 1024 for w, c in by):
    print(f"  - HAProxy's cache alike: good answers 1,024 ÷ 64 connections {paired('haproxy', 'haproxy', 1024, 64, 'good'):.2f}×, its CPU per answer {paired('haproxy', 'haproxy', 1024, 64, 'cpu'):.2f}×, wrk's {paired('haproxy', 'haproxy', 1024, 64, 'wrk'):.2f}×; gateway ÷ HAProxy at 1,024: {paired('gateway', 'haproxy', 1024, 1024):.2f}×")
def cores(who, conns):
    # CPU the contender and wrk got, in cores: answers/s times CPU per answer.
    runs = by[(who, conns)]
    return med([r[0] * r[6] / 1e6 for r in runs]), med([r[0] * r[7] / 1e6 for r in runs])
for who, conns in sorted(k for k in by if k[0] in ("gateway", "haproxy")):
    c, w = cores(who, conns)
    waiting = med([r[9] for r in by[(who, conns)]])
    print(f"  - {who} at {conns} connections (medians): CPU it got {c:.2f} cores of 2, wrk {w:.2f}; its threads runnable but waiting for a CPU: {waiting:.2f} on average")
counts = [l.rstrip("\n").split("\t") for l in open(sys.argv[4]) if l.strip()]
if counts:
    print("\nInstructions per answer in user space (valgrind's callgrind, one worker thread, the front page from the cache, wrk with one thread):\n")
    print("| contender | connections | answers counted | instructions per answer |")
    print("|---|---|---|---|")
    for name, conns, requests, total in counts:
        print(f"| {name} | {conns} | {int(requests):,} | {int(total) / max(int(requests), 1):,.0f} |")
EOF
