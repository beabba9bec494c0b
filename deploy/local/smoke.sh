#!/usr/bin/env bash
# CI smoke test of the README's run command: bring the stack up on spare ports, check that the
# first path through the gateway answers as API.md says, and stop everything again.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export GATEWAY_PORT=${GATEWAY_PORT:-18080} LINGO_PORT=${LINGO_PORT:-18081} NEWS_PORT=${NEWS_PORT:-18082}
export PG_PORT=${PG_PORT:-55439} DETACH=1
trap '"$root/deploy/local/stop.sh" >/dev/null' EXIT
"$root/deploy/local/run.sh" >"${TMPDIR:-/tmp}/lingonews-smoke.log" 2>&1 || { cat "${TMPDIR:-/tmp}/lingonews-smoke.log"; exit 1; }
body=$(curl -fsS "http://127.0.0.1:$GATEWAY_PORT/v1/lingo/languages")
echo "GET /v1/lingo/languages through the gateway: $body"
python3 - "$body" <<'PY'
import json, sys
doc = json.loads(sys.argv[1])
assert set(doc) == {"data", "count"}, doc
assert doc["count"] == len(doc["data"]) >= 5, doc
assert [l["code"] for l in doc["data"]] == sorted(l["code"] for l in doc["data"]), "ordered by code"
print("smoke: ok")
PY
