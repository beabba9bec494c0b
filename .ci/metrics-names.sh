#!/usr/bin/env bash
# The metric names that alerts, runbooks and docs use, against what the running binaries export.
# promtool's unit tests (deploy/k8s/test-alerts.sh) run the alert rules on synthetic series, so a
# misspelt metric or label there never fires and the tests still pass; this reads the real
# /metrics instead.
#
# Sends a few requests through the gateway first (200s, 404s, 401s, writes) so the series that
# appear on first use exist, and scrapes /metrics of the gateway and both services. The series
# that only failures create come from a second gateway whose lingo upstream refuses connections
# and a second news-service whose read replica is unreachable (the same binaries, started here on
# free ports, stopped after one request and one scrape). Then checks:
#   - every metric in every `expr` of deploy/k8s/base/70-alerts.yaml, and every series of
#     deploy/k8s/alerts-test.yaml, is exported, with every label name its selectors, `by (...)`,
#     `without`, `on (...)` and `ignoring (...)` use;
#   - every metric that README.md, deploy/README.md, docs/*.md and 70-alerts.yaml's comments name
#     (in code: `name`, `name{label,...}` or a PromQL expression) is exported, with those labels.
# Labels that Prometheus adds when it scrapes (the PodMonitor's target labels) count as present.
# Metrics of exporters this stack does not run (CloudNativePG's, kube-state-metrics) are listed in
# EXTERNAL below, each with its reason; any other name the binaries do not export is a miss.
#
# Runs against a running stack (deploy/local/run.sh); by hand:
#   GATEWAY_PORT=8080 LINGO_PORT=8081 NEWS_PORT=8082 PG_PORT=55432 .ci/metrics-names.sh
# The token is $TOKEN, else .local/dev-token (run.sh writes it); the second news-service's primary
# is NEWS_DATABASE_URL, else run.sh's (news_app on PG_PORT); the binaries are in BIN_DIR, else the
# cargo target directory's debug/. Python 3 standard library only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gateway=${GATEWAY_PORT:-8080} lingo=${LINGO_PORT:-8081} news=${NEWS_PORT:-8082}
token=${TOKEN:-$(cat "$root/.local/dev-token" 2>/dev/null || true)}
[ -n "$token" ] || { echo "metrics-names: no token (set TOKEN, or run deploy/local/run.sh first)"; exit 1; }
news_primary=${NEWS_DATABASE_URL:-postgres://news_app@127.0.0.1:${PG_PORT:-55432}/lingonews}
if [ -z "${BIN_DIR:-}" ]; then
  BIN_DIR="$(cd "$root" && cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/${PROFILE:-debug}"
fi

# --- traffic that makes the lazily created series appear -----------------------------------------
failed=0
expect() { # expect STATUS[|STATUS] METHOD PATH [curl args...], to port $to (the gateway unless set)
  local want=$1 method=$2 path=$3 got
  shift 3
  got=$(curl -s -o /dev/null -w '%{http_code}' -X "$method" "$@" "http://127.0.0.1:${to:-$gateway}$path")
  if ! [[ $got =~ ^($want)$ ]]; then
    echo "traffic: $method $path answered $got, expected $want"
    failed=1
  fi
}
auth=(-H "Authorization: Bearer $token")
json=(-H 'Content-Type: application/json')
expect 200 GET /v1/lingo/languages
expect 200 GET /v1/lingo/languages # the answer cache's hit
expect 200 GET '/v1/news/articles?limit=1'
expect 404 GET /v1/lingo/phrases/ph-none
expect 404 GET /v1/news/articles/art-none
expect 404 GET /v1/nowhere # the gateway's own 404
expect 401 GET /v1/lingo/me/xp -H 'Authorization: Bearer not-a-jwt'
expect 401 GET /v1/news/me/feed -H 'Authorization: Bearer not-a-jwt'
expect 200 GET /v1/lingo/me/xp "${auth[@]}"
expect 200 GET /v1/lingo/me/xp "${auth[@]}" # the token cache's hit
# Writes that leave the demo data as they found it: an invalid study session, a like taken back.
expect 422 POST /v1/lingo/me/study-sessions "${auth[@]}" "${json[@]}" -d '{}'
expect 200 POST /v1/news/articles/art-000001/like "${auth[@]}"
expect 200 DELETE /v1/news/articles/art-000001/like "${auth[@]}"
[ "$failed" = 0 ] || { echo "metrics-names: the traffic did not answer as expected (is the stack running?)"; exit 1; }

scrapes=$(mktemp -d)
started=()
trap '[ "${#started[@]}" = 0 ] || kill "${started[@]}" 2>/dev/null; rm -rf "$scrapes"' EXIT
scrape() { # scrape NAME PORT
  curl -fsS "http://127.0.0.1:$2/metrics" >"$scrapes/$1" || { echo "metrics-names: cannot scrape $1 on port $2"; exit 1; }
}
scrape gateway "$gateway"
scrape lingo-service "$lingo"
scrape news-service "$news"

# --- the series of failures: second instances that fail on purpose -------------------------------
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start() { # start NAME PORT ENV... : the binary NAME serving on PORT, with only the ENV given
  local name=$1 port=$2
  shift 2
  env -i PATH="$PATH" AUTH_HS256_SECRET="$(head -c 32 /dev/urandom | base64)" "$@" \
    "$BIN_DIR/$name" serve >"$scrapes/$name.log" 2>&1 &
  started+=($!)
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "metrics-names: a second $name is not ready on port $port:"; cat "$scrapes/$name.log"; exit 1
}
refusing=$(free_port) # nothing listens there
second=$(free_port)
while [ "$second" = "$refusing" ]; do second=$(free_port); done
start gateway "$second" GATEWAY_LISTEN_ADDR="127.0.0.1:$second" \
  LINGO_UPSTREAMS="http://127.0.0.1:$refusing" NEWS_UPSTREAMS="http://127.0.0.1:$news"
# Every replica refuses: 502, or 503 once the probe has marked it down; upstream_errors{kind="connect"}.
to=$second expect '502|503' GET /v1/lingo/languages
scrape gateway.failing "$second"
second=$(free_port)
while [ "$second" = "$refusing" ]; do second=$(free_port); done
start news-service "$second" NEWS_LISTEN_ADDR="127.0.0.1:$second" NEWS_DATABASE_URL="$news_primary" \
  NEWS_DATABASE_READ_URL="postgres://news_app@127.0.0.1:$refusing/lingonews"
to=$second expect 200 GET '/v1/news/articles?limit=1' # answered by the primary: db_read_fallback
scrape news-service.failing "$second"
[ "$failed" = 0 ] || { echo "metrics-names: the failing instances did not answer as expected"; exit 1; }
kill "${started[@]}" 2>/dev/null
wait "${started[@]}" 2>/dev/null || true
started=()

python3 - "$root" "$scrapes" <<'PY'
import os
import re
import sys

root, scrapes = sys.argv[1:]

# Metrics of exporters the local stack does not run: named here, each with why it exists. A name
# with one of their prefixes that is not listed is a miss.
EXTERNAL = {
    "cnpg_pg_replication_lag":
        "CloudNativePG's instance exporter, default query pg_replication (replay lag, seconds)",
    "cnpg_pg_stat_archiver_last_archived_time":
        "CloudNativePG's instance exporter, default query pg_stat_archiver (epoch seconds)",
    "cnpg_pg_stat_archiver_last_failed_time":
        "CloudNativePG's instance exporter, default query pg_stat_archiver (epoch seconds)",
    "barman_cloud_cloudnative_pg_io_last_available_backup_timestamp":
        "the Barman Cloud plugin, through CloudNativePG's instance exporter (its documented metrics)",
}
EXTERNAL_PREFIXES = ("cnpg_", "barman_cloud_", "kube_", "kubelet_", "container_", "node_")
OUR_PREFIXES = ("gateway_", "lingo_", "news_")
# The services' metrics are often written without their prefix (`db_pool_up`): such a name must be
# exported by both services.
SERVICE_PREFIXES = ("lingo_", "news_")
BARE_SERVICE_PREFIXES = ("http_", "db_")
# Labels Prometheus adds to every series a PodMonitor scrapes (the Prometheus Operator's
# relabelling), besides the PodMonitor's podTargetLabels (read from 60-monitoring.yaml).
TARGET_LABELS = {"namespace", "pod", "container", "endpoint", "job", "instance"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                "unless", "bool", "offset", "inf", "nan"}
AGGREGATORS = {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk",
               "quantile", "count_values", "group", "limitk", "limit_ratio"}
CLAUSES = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def read(path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


# --- what the binaries export --------------------------------------------------------------------
series = {}    # sample name -> label names seen on it
values = {}    # (sample name, label) -> values seen
helps = {}     # sample name -> its family's HELP text (which lists some labels' values)
declared = {}  # sample name -> binary, for families declared (# TYPE) whether or not they have samples
families = {}  # histogram family name -> its sample names
for scrape in sorted(f for f in os.listdir(scrapes) if not f.endswith(".log")):
    binary = scrape.split(".")[0]  # gateway.failing: the second gateway
    help_name = help_text = ""
    for line in open(os.path.join(scrapes, scrape), encoding="utf-8"):
        if line.startswith("# HELP "):
            help_name, help_text = line.split(None, 3)[2:]
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            kind = kind.strip()
            names = {"counter": [name + "_total"],
                     "histogram": [name + s for s in ("_bucket", "_sum", "_count")]}.get(kind, [name])
            for n in names:
                declared[n] = binary
                helps[n] = help_text if help_name == name else ""
            if kind == "histogram":
                families[name] = names
        elif line.strip() and not line.startswith("#"):
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s", line)
            pairs = re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or "")
            series.setdefault(m.group(1), set()).update(label for label, _ in pairs)
            for label, value in pairs:
                values.setdefault((m.group(1), label), set()).add(value)

monitoring = read("deploy/k8s/base/60-monitoring.yaml")
pod_target_labels = {re.sub(r"[^a-zA-Z0-9_]", "_", label)
                     for labels in re.findall(r"podTargetLabels:\s*\[([^\]]*)\]", monitoring)
                     for label in re.findall(r'"([^"]+)"', labels)}
scraped_labels = TARGET_LABELS | pod_target_labels
# Database roles (lingo_app, ...) look like metric names to the prose scan.
roles = set(re.findall(r"ALTER ROLE (\w+)", read("deploy/postgres/bootstrap.sql"), re.I))

misses, unverified, externals, checked = [], set(), set(), []


def check(where, name, labels, prose, matchers=()):
    """One use of a metric: `labels` are the label names it relies on, `matchers` its
    (label, value) equality matchers (= and !=: a value no series has never matches)."""
    checked.append(name)
    if name in EXTERNAL:
        externals.add(name)
        return
    if name.startswith(EXTERNAL_PREFIXES):
        misses.append(f"{where}: {name} is not exported by the binaries and not listed in EXTERNAL "
                      "(.ci/metrics-names.sh) with the exporter that has it")
        return
    if name in series:
        known = series[name] | ({"le"} if name.endswith("_bucket") else set())
    elif prose and name in families:  # the docs name a histogram by its family: labels of its _count
        known = series.get(name + "_count")
        if known is None:
            unverified.add(name)
            return
    elif name in declared:  # declared, but no series yet: the name is right, its labels unknown
        if labels - scraped_labels:
            unverified.add(name)
        return
    else:
        misses.append(f"{where}: {name} is exported by none of the binaries")
        return
    unknown = labels - known - scraped_labels
    if unknown:
        misses.append(f"{where}: {name} has no label {', '.join(sorted(unknown))} "
                      f"(it has {', '.join(sorted(known)) or 'none'})")
    for label, value in matchers:
        seen = values.get((name, label))
        # A value no series shows yet but the metric's HELP names (an outcome that has not
        # happened) is right too.
        if seen is not None and value not in seen and not re.search(rf"\b{re.escape(value)}\b", helps.get(name, "")):
            misses.append(f"{where}: {name}{{{label}=\"{value}\"}} matches no series "
                          f"({label} is one of {', '.join(sorted(seen))}; nor does its HELP name it)")


# --- PromQL: metric selectors and the label names they and the clauses around them use ------------
TOKEN = re.compile(r'''\s+|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`|\[[^\]]*\]|[A-Za-z_:][A-Za-z0-9_:]*'''
                   r'''|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|=~|!~|!=|==|>=|<=|.''')


def tokens(expr):
    return [t for t in TOKEN.findall(expr) if not t.isspace()]


def group_end(toks, i):
    """Index of the parenthesis closing the one at toks[i]."""
    depth = 0
    for j in range(i, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[j], 0)
        if depth == 0:
            return j
    return len(toks) - 1


def group_start(toks, i):
    depth = 0
    for j in range(i, -1, -1):
        depth += {")": 1, "(": -1}.get(toks[j], 0)
        if depth == 0:
            return j
    return 0


def promql_uses(expr, is_metric):
    """[(metric, label names, [(label, value) of its = and != matchers])] for each selector of a
    PromQL expression (or of the docs' notation `name{label,label}`), with the labels of
    `by`/`without` added to the metrics they aggregate and those of `on`/`ignoring`/`group_*` to
    every metric of the expression."""
    toks = tokens(expr)
    clauses = {}  # index of a clause word -> index of the parenthesis closing its label list
    for i, t in enumerate(toks):
        if t in CLAUSES and toks[i + 1:i + 2] == ["("]:
            clauses[i] = group_end(toks, i + 1)
    in_clause = {j for i, close in clauses.items() for j in range(i, close + 1)}
    metrics = []  # [token index, name, labels, matchers]
    i = 0
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        function = nxt == "(" or (t in AGGREGATORS and nxt in CLAUSES)
        if (re.match(r"[A-Za-z_:]", t) and i not in in_clause and t not in PROMQL_WORDS
                and not function and is_metric(t)):
            labels, matchers = set(), []
            if nxt == "{":
                end = toks.index("}", i + 1) if "}" in toks[i + 1:] else len(toks)
                inside = toks[i + 2:end]
                labels = {x for x in inside if re.match(r"[A-Za-z_]", x)}
                matchers = [(inside[k], inside[k + 2][1:-1]) for k in range(len(inside) - 2)
                            if inside[k + 1] in ("=", "!=") and inside[k + 2][:1] in "\"'"]
                metrics.append([i, t, labels, matchers])
                i = end + 1
                continue
            metrics.append([i, t, labels, matchers])
        i += 1
    for i, close in clauses.items():
        names = {x for x in toks[i + 2:close] if re.match(r"[A-Za-z_]", x)}
        if toks[i] in {"by", "without"}:  # `agg by (l) (arg)` or `agg (arg) by (l)`
            if toks[i - 1].lower() in AGGREGATORS and toks[close + 1:close + 2] == ["("]:
                span = (close + 1, group_end(toks, close + 1))
            else:
                span = (group_start(toks, i - 1), i - 1)
        else:  # on, ignoring, group_left/right: both sides of the operation
            span = (0, len(toks))
        for m in metrics:
            if span[0] <= m[0] <= span[1]:
                m[2] |= names
    return [(name, labels, matchers) for _, name, labels, matchers in metrics]


def expand(text):
    """`<service>_x` stands for lingo_x and news_x."""
    if "<service>_" not in text:
        return [text]
    return [text.replace("<service>_", prefix) for prefix in SERVICE_PREFIXES]


def is_metric_name(t):
    return (t.startswith(OUR_PREFIXES + EXTERNAL_PREFIXES + BARE_SERVICE_PREFIXES)
            and not t.endswith("_") and t not in roles)


def check_use(where, name, labels, prose, matchers=()):
    if name.startswith(BARE_SERVICE_PREFIXES):
        for prefix in SERVICE_PREFIXES:
            check(where, prefix + name, labels, prose, matchers)
    else:
        check(where, name, labels, prose, matchers)


# --- the alert rules and their unit tests ---------------------------------------------------------
def yaml_blocks(text, key):
    """(line, value) of every `key: value` or `key: |` block in a YAML file (standard library
    only: a scalar or a block scalar, which is all the rules and tests use)."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        m = re.match(rf"^(\s*)(?:- )?{key}:\s*(.*)$", line)
        if not m:
            continue
        value = m.group(2)
        if value in ("|", ">", "|-", ">-"):
            indent, body = len(m.group(1)), []
            for more in lines[n + 1:]:
                if more.strip() and len(more) - len(more.lstrip()) <= indent:
                    break
                body.append(more)
            value = "\n".join(body)
        yield n + 1, value.strip().strip("'\"") if value[:1] in "'\"" else value


alerts = read("deploy/k8s/base/70-alerts.yaml")
alert_names = {n: name for n, name in yaml_blocks(alerts, "alert")}
exprs = 0
for n, expr in yaml_blocks(alerts, "expr"):
    alert = alert_names.get(max((k for k in alert_names if k < n), default=0), "?")
    exprs += 1
    for name, labels, matchers in promql_uses(expr, lambda t: True):
        check(f"70-alerts.yaml:{n} ({alert})", name, labels, prose=False, matchers=matchers)

tests = read("deploy/k8s/alerts-test.yaml")
test_series = 0
for n, selector in yaml_blocks(tests, "series"):
    test_series += 1
    # The values are the test's own (pods, statuses that did not happen here): names only.
    for name, labels, _ in promql_uses(selector, lambda t: True):
        check(f"alerts-test.yaml:{n}", name, labels, prose=False)

# --- the prose: README.md, deploy/README.md, docs/*.md, and the comments of 70-alerts.yaml --------
pages = ["README.md", "deploy/README.md"] + sorted(
    "docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
mentions = 0


def prose_uses(where, code):
    global mentions
    for variant in expand(code):
        for name, labels, matchers in promql_uses(variant, is_metric_name):
            mentions += 1
            check_use(where, name, labels, prose=True, matchers=matchers)


for page in pages:
    in_fence = False
    for n, line in enumerate(read(page).splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            prose_uses(f"{page}:{n}", line)
            continue
        for span in re.findall(r"`([^`]+)`", line):
            prose_uses(f"{page}:{n}", span)
        # A name outside code: the name only.
        for word in re.findall(r"(?<![\w`/.-])(<service>_\w+|[a-z][a-z0-9_]*_[a-z0-9_]+)(?![\w`])",
                               re.sub(r"`[^`]+`", "", line)):
            for name in expand(word):
                if name.startswith(OUR_PREFIXES + EXTERNAL_PREFIXES) and is_metric_name(name):
                    mentions += 1
                    check_use(f"{page}:{n}", name, set(), prose=True)
for n, line in enumerate(alerts.splitlines(), 1):
    if line.lstrip().startswith("#"):
        prose_uses(f"70-alerts.yaml:{n} (comment)", line.lstrip("# "))

# --- report -----------------------------------------------------------------------------------------
ours = sorted(n for n in set(checked) if n in declared)
print(f"exported: {len(declared)} series names by the three binaries (# TYPE), {len(series)} with samples")
print(f"checked: {exprs} alert expressions, {test_series} alerts-test.yaml series, {mentions} mentions in "
      f"{len(pages)} pages and 70-alerts.yaml's comments")
print(f"  the binaries' metrics used: {', '.join(ours)}")
print("  external (not run by this stack, not checked):")
for name in sorted(externals):
    print(f"    {name}: {EXTERNAL[name]}")
if unverified:
    print("  exported without a series yet, so their labels are not checked: " + ", ".join(sorted(unverified)))
documented = set(checked)
undocumented = sorted(n for n in declared if n not in documented
                      and not any(n in names for f, names in families.items() if f in documented)
                      and not n.endswith(("_sum", "_count")))
if undocumented:
    print("  note, exported but named nowhere: " + ", ".join(undocumented))
if misses:
    print(f"\n{len(misses)} miss(es):")
    for miss in dict.fromkeys(misses):
        print(f"  {miss}")
    sys.exit(1)
print("metrics-names: ok")
PY
