#!/usr/bin/env bash
# Runs the curl examples of README.md and docs/*.md against the running stack, as a reader would
# paste them (localhost:8080 is the gateway, 8081 lingo-service, 8082 news-service; $TOKEN is the
# development token), and checks that each answers what the page shows:
#   - every curl gets an answer, none a 5xx, and none a 4xx unless the answer shown is that 4xx;
#     a `# HTTP/1.1 304 ...` comment under a curl is the status it must answer;
#   - where the page shows the answer (a ```json or ```http block right after the example, for its
#     last curl): the same status (```http), the headers it lists, and a body of the same shape
#     (the same keys, recursively, lists by their first item; a "..." key or a [ ... ] list stands
#     for more, and values are examples).
# A curl whose URL holds "..." (an elided cursor) is shown, not run. Examples write to the demo
# data as the pages say (a study session, a like, a comment).
#
# Runs against a running stack (deploy/local/run.sh); by hand:
#   GATEWAY_PORT=8080 LINGO_PORT=8081 NEWS_PORT=8082 .ci/docs-examples.sh
# The token is $TOKEN, else .local/dev-token. Python 3 standard library only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export GATEWAY_PORT=${GATEWAY_PORT:-8080} LINGO_PORT=${LINGO_PORT:-8081} NEWS_PORT=${NEWS_PORT:-8082}
TOKEN=${TOKEN:-$(cat "$root/.local/dev-token" 2>/dev/null || true)}
[ -n "$TOKEN" ] || { echo "docs-examples: no token (set TOKEN, or run deploy/local/run.sh first)"; exit 1; }
export TOKEN

python3 - "$root" <<'PY'
import json
import os
import re
import subprocess
import sys
import tempfile

root = sys.argv[1]
PORTS = {"8080": os.environ["GATEWAY_PORT"], "8081": os.environ["LINGO_PORT"], "8082": os.environ["NEWS_PORT"]}
PAGES = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
# Every curl of an example records its answer's head (-D) and its output (tee) under $EXAMPLE_DIR,
# numbered in the order they ran (command substitutions run in subshells: the count is a file).
WRAPPER = r'''
curl() {
  local n; n=$(( $(cat "$EXAMPLE_DIR/n") + 1 )); echo "$n" >"$EXAMPLE_DIR/n"
  printf '%s\n' "$*" >"$EXAMPLE_DIR/$n.args"
  command curl -sS --max-time 30 -D "$EXAMPLE_DIR/$n.head" "$@" | tee "$EXAMPLE_DIR/$n.out"
}
'''


def examples(page):
    """(line, script, shown) for each ```sh block with a curl, `shown` the ```json/```http block
    right after it (its language and text) or None."""
    text = open(os.path.join(root, page), encoding="utf-8").read()
    blocks = [(text[:m.start()].count("\n") + 1, m.group(1), m.group(2))
              for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]
    for i, (line, lang, body) in enumerate(blocks):
        if lang != "sh" or not re.search(r"^\s*[^#\n]*\bcurl\b", body, re.M):
            continue
        after = blocks[i + 1] if i + 1 < len(blocks) else None
        between = text.split("\n")[line + body.count("\n") + 1:after[0] - 1] if after else []
        shown = after[1:] if after and after[1] in ("json", "http") and not "".join(between).strip() else None
        yield line, body, shown


def loose_json(text):
    """The page's JSON, where `[ ... ]` stands for more items; None when it is not JSON."""
    try:
        return json.loads(re.sub(r"\[\s*\.\.\.\s*\]", '["..."]', text))
    except ValueError:
        return None


def shape_misses(shown, got, path="$"):
    if isinstance(shown, dict):
        if not isinstance(got, dict):
            return [f"{path}: shown an object, got {type(got).__name__}"]
        misses = []
        keys = set(shown) - {"..."}
        missing, extra = keys - set(got), set(got) - keys
        if missing:
            misses.append(f"{path}: shown {', '.join(sorted(missing))}, absent from the answer")
        if extra and "..." not in shown:
            misses.append(f"{path}: the answer also has {', '.join(sorted(extra))}, not shown")
        for key in keys & set(got):
            misses += shape_misses(shown[key], got[key], f"{path}.{key}")
        return misses
    if isinstance(shown, list) and shown and shown[0] != "...":
        if not isinstance(got, list):
            return [f"{path}: shown a list, got {type(got).__name__}"]
        return shape_misses(shown[0], got[0], f"{path}[0]") if got else []
    return []


def head_of(path):
    """(status, header names) of the last response in a -D file (after any 100 Continue)."""
    text = open(path, encoding="latin-1").read().replace("\r", "")
    last = [h for h in text.split("\n\n") if h.startswith("HTTP/")][-1]
    lines = last.split("\n")
    return int(lines[0].split()[1]), {l.split(":", 1)[0].lower() for l in lines[1:] if ":" in l}


def body_of(path):
    text = open(path, encoding="utf-8", errors="replace").read().replace("\r", "")
    if text.startswith("HTTP/"):  # curl -i: the head, a blank line, the body
        text = text.split("\n\n", 1)[1] if "\n\n" in text else ""
    return text


misses, ran, compared = [], 0, 0
for page in PAGES:
    for line, script, shown in examples(page):
        where = f"{page}:{line}"
        script = re.sub(r"\blocalhost:(808[012])\b", lambda m: "localhost:" + PORTS[m.group(1)], script)
        # An elided cursor (`cursor=eyJ...`) is for reading only.
        lines = [l for l in script.split("\n") if not ("curl" in l and "..." in l)]
        # `# HTTP/1.1 304 Not Modified` under a curl: the status that curl answers.
        said, curls = {}, 0
        for l in lines:
            if re.search(r"^\s*[^#]*\bcurl\b", l):
                curls += 1
            m = re.match(r"\s*#\s*HTTP/\S+ (\d{3})", l)
            if m and curls:
                said[curls] = int(m.group(1))
        with tempfile.TemporaryDirectory() as work:
            open(os.path.join(work, "n"), "w").write("0")
            result = subprocess.run(["bash", "-c", WRAPPER + "\n".join(lines)], capture_output=True, text=True,
                                    env=dict(os.environ, EXAMPLE_DIR=work), cwd=root, timeout=120)
            count = int(open(os.path.join(work, "n")).read())
            # A block bash cannot parse (an unbalanced quote) runs nothing: that is a miss, not a
            # pass; so is one that stops before its last curl.
            if count < curls:
                misses.append(f"{where}: {count} of its {curls} curls ran (bash exit {result.returncode}: "
                              f"{result.stderr.strip()[:200]})")
            if count == 0:
                continue
            ran += count
            answers = []
            for n in range(1, count + 1):
                args = open(os.path.join(work, f"{n}.args")).read().strip()
                if not os.path.exists(os.path.join(work, f"{n}.head")) or not os.path.getsize(os.path.join(work, f"{n}.head")):
                    misses.append(f"{where}: no answer to curl {args[:100]} ({result.stderr.strip()[:200]})")
                    continue
                status, headers = head_of(os.path.join(work, f"{n}.head"))
                answers.append((n, args, status, headers, body_of(os.path.join(work, f"{n}.out"))))
        if not answers:
            continue
        shown_status = None
        if shown and shown[0] == "http":
            shown_status = int(re.match(r"HTTP/\S+ (\d+)", shown[1]).group(1))
        for n, args, status, headers, body in answers:
            last = n == count
            expected_4xx = last and shown_status is not None and 400 <= shown_status < 500
            if n in said:
                if status != said[n]:
                    misses.append(f"{where}: curl {args[:120]} answered {status}, the page says {said[n]}")
            elif status >= 500 or (status >= 400 and not expected_4xx):
                misses.append(f"{where}: curl {args[:120]} answered {status}: {body.strip()[:200]}")
        n, args, status, headers, body = answers[-1]
        if shown is None or n != count:
            continue
        compared += 1
        lang, text = shown
        if lang == "http":
            head, _, text = text.partition("\n\n")
            if status != shown_status:
                misses.append(f"{where}: shown {shown_status}, answered {status}: {body.strip()[:200]}")
            for name in (l.split(":", 1)[0].lower() for l in head.split("\n")[1:] if ":" in l):
                if name not in headers:
                    misses.append(f"{where}: shows the header {name}, the answer has none")
        want = loose_json(text) if text.strip() else None
        if want is None:
            continue
        try:
            got = json.loads(body)
        except ValueError:
            misses.append(f"{where}: shown JSON, answered {body.strip()[:200]!r}")
            continue
        misses += [f"{where}: {m}" for m in shape_misses(want, got)]

print(f"docs-examples: {ran} curls run from {len(PAGES)} pages, {compared} answers compared with the one shown")
if misses:
    print(f"\n{len(misses)} miss(es):")
    for miss in misses:
        print(f"  {miss}")
    sys.exit(1)
print("docs-examples: ok")
PY
