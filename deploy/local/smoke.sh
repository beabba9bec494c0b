#!/usr/bin/env bash
# Smoke test of a running local stack (deploy/local/run.sh): the first path through the gateway
# answers as docs/ says. GATEWAY_PORT selects the gateway (default 8080).
set -euo pipefail
port=${GATEWAY_PORT:-8080}
body=$(curl -fsS "http://127.0.0.1:$port/v1/lingo/languages")
echo "GET /v1/lingo/languages through the gateway: $body"
python3 - "$body" <<'PY'
import json, sys
doc = json.loads(sys.argv[1])
assert set(doc) == {"data", "count"}, doc
assert doc["count"] == len(doc["data"]) >= 5, doc
codes = [language["code"] for language in doc["data"]]
assert codes == sorted(codes), "ordered by code"
assert all(set(language) == {"code", "name"} for language in doc["data"]), doc
print("smoke: ok")
PY
