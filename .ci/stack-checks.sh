#!/usr/bin/env bash
# Checks against the running system: brings the local stack up once (the README's run command, on
# spare ports), then runs the smoke test, contract fuzzing through the gateway, and the /docs page in
# headless Chromium; stops everything at the end, pass or fail.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export GATEWAY_PORT=18080 LINGO_PORT=18081 NEWS_PORT=18082 PG_PORT=25439 DETACH=1
# Fuzzing sends far more requests than a client would; the limits themselves are tested in
# gateway/tests.
export RATE_LIMIT_ENABLED=false
log=$(mktemp)
trap 'deploy/local/stop.sh >/dev/null; rm -f "$log"' EXIT

echo "--- starting the stack (deploy/local/run.sh)"
deploy/local/run.sh >"$log" 2>&1 || { cat "$log"; exit 1; }

echo "--- smoke test"
deploy/local/smoke.sh

for check in "$@"; do
  echo "--- $check"
  "$root/.ci/$check"
done
