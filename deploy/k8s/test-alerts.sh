#!/usr/bin/env bash
# Unit tests of the alerts. Extracts the rule groups of base/70-alerts.yaml (a PrometheusRule)
# into a plain Prometheus rule file; checks that every runbook_url names a heading of
# deploy/README.md and that alerts-test.yaml has a case where each alert fires and one where it
# stays silent; then `promtool check rules --lint-fatal` and `promtool test rules alerts-test.yaml`
# (input series, the alerts expected at given times, labels and annotations).
#
# promtool comes from Debian's `prometheus` package. When it is not on PATH, the package is
# downloaded (apt-get download: nothing installed, no daemon started) and promtool is taken out of
# it into $PROMTOOL_DIR (default ~/.cache/lingonews-promtool).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
  dir=${PROMTOOL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lingonews-promtool}
  promtool="$dir/usr/bin/promtool"
  if [ ! -x "$promtool" ]; then
    echo "test-alerts: promtool not found; taking it from Debian's prometheus package into $dir"
    mkdir -p "$dir"
    (cd "$dir" && { apt-get download prometheus >/dev/null 2>&1 ||
                    { apt-get update -qq && apt-get download prometheus; }; } &&
       dpkg-deb -x prometheus_*.deb . && rm -f prometheus_*.deb)
  fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$here/base/70-alerts.yaml" "$root/deploy/README.md" "$here/alerts-test.yaml" \
  "$work/lingonews.rules.yaml" <<'PY'
import re
import sys

import yaml

rule_file, readme, tests, out = sys.argv[1:]
rule = yaml.safe_load(open(rule_file))
assert rule["kind"] == "PrometheusRule", f"{rule_file} is not a PrometheusRule"
# GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes.
anchors = {re.sub(r"[^a-z0-9 _-]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
           for line in open(readme) if line.startswith("#")}
missing = []
for group in rule["spec"]["groups"]:
    for r in group["rules"]:
        url = r.get("annotations", {}).get("runbook_url", "")
        page, _, anchor = url.partition("#")
        if page != "deploy/README.md" or anchor not in anchors:
            missing.append(f"{r.get('alert')}: runbook_url {url!r} is no heading of deploy/README.md")
# Every alert is tested both ways: some evaluation expects it, some expects it silent.
cases = [case for test in yaml.safe_load(open(tests))["tests"] for case in test.get("alert_rule_test", [])]
for name in sorted({r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}):
    outcomes = {bool(c.get("exp_alerts")) for c in cases if c["alertname"] == name}
    if outcomes != {True, False}:
        missing.append(f"{name}: alerts-test.yaml needs a case where it fires and one where it stays silent")
if missing:
    sys.exit("\n".join(missing))
yaml.safe_dump({"groups": rule["spec"]["groups"]}, open(out, "w"), sort_keys=False)
PY

cp "$here/alerts-test.yaml" "$work/"
"$promtool" check rules --lint-fatal "$work/lingonews.rules.yaml"
"$promtool" test rules "$work/alerts-test.yaml"
