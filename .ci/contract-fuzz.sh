#!/usr/bin/env bash
# Contract fuzzing: schemathesis against the gateway's merged /openapi.json, every check on, with a
# valid token, a fixed seed and a bounded number of examples per operation. Any failure fails CI.
# One worker: hypothesis (under schemathesis) can fail with an internal SystemError when it
# describes strategies from several threads at once.
# Expects the local stack running (see .ci/stack-checks.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
port=${GATEWAY_PORT:-8080}
venv=${XDG_CACHE_HOME:-$HOME/.cache}/lingonews-ci-venv
version=4.32.5
if ! "$venv/bin/st" --version 2>/dev/null | grep -q "$version"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version"
fi
token=$(cat "$root/.local/dev-token")
report=$(mktemp -d)
set +e
timeout 1200 "$venv/bin/st" --config-file "$root/.ci/schemathesis.toml" run "http://127.0.0.1:$port/openapi.json" \
  --checks all \
  --header "Authorization: Bearer $token" \
  --seed 20261122 \
  --max-examples "${FUZZ_EXAMPLES:-40}" \
  --request-timeout 10 \
  --workers 1 \
  --no-color >"$report/out.txt" 2>&1
status=$?
set -e
# The whole report when something failed; otherwise just the summary lines.
if [ "$status" -ne 0 ]; then cat "$report/out.txt"; else tail -n 25 "$report/out.txt"; fi
rm -rf "$report"
exit "$status"
