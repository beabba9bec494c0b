#!/usr/bin/env bash
# The API reference page: /docs rendered by headless Chromium (Debian's package) from the running
# stack, offline, with the operations of both services listed. Saves a screenshot next to the log.
set -euo pipefail
port=${GATEWAY_PORT:-8080}
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || { echo "cannot install chromium"; exit 1; }
fi
out=${DOCS_SCREENSHOT_DIR:-${TMPDIR:-/tmp}}
profile=$(mktemp -d)
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$profile" --virtual-time-budget=15000
       --window-size=1280,2400)
chromium "${flags[@]}" --dump-dom "http://127.0.0.1:$port/docs" >"$out/docs-dom.html" 2>/dev/null
chromium "${flags[@]}" --screenshot="$out/docs.png" "http://127.0.0.1:$port/docs" >/dev/null 2>&1 || true
rm -rf "$profile"
python3 - "$out/docs-dom.html" <<'PY'
import re, sys
html = open(sys.argv[1], encoding="utf-8").read()
# Swagger UI breaks the visible path with <wbr>; each operation also carries it whole in data-path.
paths = set(re.findall(r'class="opblock-summary-path" data-path="([^"]+)"', html))
needed = ["/v1/lingo/languages", "/v1/lingo/me/study-sessions", "/v1/news/articles", "/v1/news/comments"]
missing = [path for path in needed if path not in paths]
operations = len(re.findall(r'class="opblock opblock-', html))
print(f"/docs rendered {operations} operations over {len(paths)} paths")
assert not missing, f"operations missing from the rendered page: {missing}"
assert operations >= 20, "too few operations rendered"
print("docs page: ok")
PY
echo "screenshot: $out/docs.png"
