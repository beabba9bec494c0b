#!/usr/bin/env bash
# The names that README.md, deploy/README.md, .ci/README.md and docs/*.md give a reader to type, against the
# binaries and the repository (deploy/check_manifests.py checks the manifests; nothing else checks
# the prose):
#   - every environment variable they name is one a binary accepts (`<binary> <subcommand> --help`
#     lists them; RUST_LOG and OTEL_* are read outside clap), or one that a script, test, params
#     file or build of this repository reads, or a tool's own (TOOL_VARS below, with the reason);
#   - README.md's configuration table: each variable is accepted by the binaries its row names, its
#     default is the one --help shows, and every variable a binary accepts has a row;
#   - every `deploy/...`, `.ci/...` or `docs/...` path they name exists (and `base/...`,
#     `overlays/...`, `k8s/...` in deploy/README.md, relative to deploy/ or deploy/k8s/), and each
#     `--flag` given to one of those scripts appears in it;
#   - every `gateway|lingo-service|news-service <subcommand> --flag` is a subcommand and flag of
#     that binary, and every `cargo test|nextest ... -p <crate> --test <target>` names a test target.
# Needs the built binaries (BIN_DIR, default the cargo target directory's debug/, where
# deploy/local/run.sh builds them), no running stack; by hand: .ci/docs-names.sh
# Python 3 standard library only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${BIN_DIR:-}" ]; then
  target_dir=$(cd "$root" && cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  BIN_DIR="$target_dir/${PROFILE:-debug}"
fi
for binary in gateway lingo-service news-service; do
  [ -x "$BIN_DIR/$binary" ] || { echo "docs-names: no $BIN_DIR/$binary (cargo build first, or set BIN_DIR)"; exit 1; }
done

python3 - "$root" "$BIN_DIR" <<'PY'
import glob
import os
import re
import subprocess
import sys

root, bin_dir = sys.argv[1:]
BINARIES = ("gateway", "lingo-service", "news-service")
PAGES = ["README.md", "deploy/README.md", ".ci/README.md"] + sorted(
    "docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
# Read outside clap, so absent from --help (as in deploy/check_manifests.py).
OUTSIDE_CLAP, OUTSIDE_CLAP_PREFIX = {"RUST_LOG"}, "OTEL_"
# Variables of tools, not of this repository: named here with why.
TOOL_VARS = {
    "CARGO_TARGET_DIR": "cargo's build directory",
    "LC_CTYPE": "PostgreSQL's locale setting of a database (docs/news.md, text search)",
}
ENV = re.compile(r"(?<![\w$-])\*?_?[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")


def read(path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def run_help(*argv):
    # A clean environment: clap prints `[env: NAME=value]` for variables that are set.
    return subprocess.run([os.path.join(bin_dir, argv[0]), *argv[1:], "--help"], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"}, timeout=30, check=True).stdout


def flags_of(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][\w-]*|-[a-zA-Z])\b", text))


# --- what the binaries accept ----------------------------------------------------------------------
accepts = {}      # variable -> binaries
defaults = {}     # variable -> the defaults its --help shows (None: none)
subcommands = {}  # binary -> {subcommand: flags}
for binary in BINARIES:
    top = run_help(binary)
    commands = re.search(r"Commands:\n(.*?)\n\n", top, re.S).group(1)
    subcommands[binary] = {}
    for sub in re.findall(r"^  ([a-z][\w-]*)", commands, re.M):
        if sub == "help":
            continue
        text = run_help(binary, sub)
        subcommands[binary][sub] = flags_of(text) | flags_of(top) | {"-h", "--help"}
        for var in re.findall(r"\[env: (\w+)", text + top):
            accepts.setdefault(var, set()).add(binary)
        for option in re.split(r"\n(?=\s+(?:-\w, )?--)", text):  # one option's block at a time
            env, default = re.search(r"\[env: (\w+)", option), re.search(r"\[default: ([^\]]*)\]", option)
            if env:
                defaults.setdefault(env.group(1), set()).add(default.group(1) if default else None)

# --- what else reads a variable: scripts, tests, params files, the Dockerfile ------------------------
read_elsewhere = {}  # variable -> where
def files_under(top):
    """Every file of the repository (hidden folders such as .ci/ included), without the build
    output, git's own files and the local stack's data."""
    for folder, subfolders, names in os.walk(top):
        subfolders[:] = [d for d in subfolders if d not in ("target", ".git", ".local")]
        yield from (os.path.join(folder, name) for name in names)
sources = [p for p in files_under(root)
           if p.endswith((".sh", ".py", ".rs", ".env", ".yml", ".example")) or "/.ci/" in p
           or os.path.basename(p) == "Dockerfile"]
for path in sources:
    rel = os.path.relpath(path, root)
    try:
        text = open(path, encoding="utf-8").read()
    except UnicodeDecodeError:
        continue
    found = set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", text))                        # shell, compose
    found |= set(re.findall(r"""environ(?:\.get)?[\[(]\s*["']([A-Z][A-Z0-9_]*)""", text))  # python
    found |= set(re.findall(r"""env::var(?:_os)?\(\s*"([A-Z][A-Z0-9_]*)""", text))   # rust
    found |= set(re.findall(r"^(?:ARG |export )?([A-Z][A-Z0-9_]*)=", text, re.M))   # params, ARG
    for var in found:
        read_elsewhere.setdefault(var, rel)

misses = []
checked = {"variables": set(), "paths": set(), "commands": set()}


def known_variable(var):
    return (var in accepts or var in OUTSIDE_CLAP or var.startswith(OUTSIDE_CLAP_PREFIX)
            or var in read_elsewhere or var in TOOL_VARS)


def check_variable(where, token):
    token = token.lstrip("_") if not token.startswith("*") else token
    if token.startswith("*"):  # `*_MAX_IN_FLIGHT`: some accepted variable ends so
        suffix = token.lstrip("*")
        if not any(var.endswith(suffix) for var in accepts):
            misses.append(f"{where}: no variable a binary accepts matches {token}")
        checked["variables"].add(token)
        return
    checked["variables"].add(token)
    if not known_variable(token):
        misses.append(f"{where}: {token} is accepted by no binary (--help) and read by nothing in "
                      "the repository")


# --- paths, script flags, binary subcommands, test targets --------------------------------------------
PATH = re.compile(r"(?<![\w/.~$<-])((?:\.ci|deploy|docs|base|overlays|k8s)/[\w./{},*-]*[\w*}])")


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in expand_braces(path[:m.start()] + alt + path[m.end():])]


def check_path(where, page, path, rest):
    bases = [""]
    if page == "deploy/README.md" and path.startswith(("base/", "overlays/")):
        bases = ["deploy/k8s/"]
    elif page == "deploy/README.md" and path.startswith("k8s/"):
        bases = ["deploy/"]
    elif path.startswith(("base/", "overlays/", "k8s/")):
        return  # another page's relative path: not one of ours to resolve
    checked["paths"].add(path)
    for candidate in expand_braces(path):
        hits = [p for base in bases for p in glob.glob(os.path.join(root, base + candidate))]
        if not hits:
            misses.append(f"{where}: {path} does not exist")
            return
    target = os.path.join(root, bases[0] + path)
    if os.path.isfile(target) and re.search(r"\.(sh|py)$|^\.ci/[\w-]+$", path):
        script = open(target, encoding="utf-8").read()
        # Flags given to the script on the same command (up to a pipe, a ; or a comment).
        command = re.split(r"\s[|;#]|&&|\)", rest)[0]
        for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", command):
            if flag not in script:
                misses.append(f"{where}: {path} has no option {flag}")


BINARY_COMMAND = re.compile(r"(?<![\w<-])(gateway|lingo-service|news-service)\s+([a-z][\w-]*)((?:\s+-[^|;&#]*)?)")


def check_binary_command(where, binary, sub, rest):
    if sub not in subcommands[binary]:
        return  # "the gateway answers...": a word after the name, not a subcommand, unless a flag follows
    checked["commands"].add(f"{binary} {sub}")
    for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rest):
        if flag not in subcommands[binary][sub]:
            misses.append(f"{where}: `{binary} {sub}` has no option {flag}")


CARGO_TEST = re.compile(r"cargo (?:test|nextest run)\b([^|;&#`]*)")


def check_cargo_test(where, args):
    crate = re.search(r"-p\s+([\w-]+)", args)
    target = re.search(r"--test\s+([\w-]+)", args)
    if not (crate and target):
        return
    checked["commands"].add(f"cargo test -p {crate.group(1)} --test {target.group(1)}")
    tests = os.path.join(root, crate.group(1), "tests")
    if not (os.path.isfile(f"{tests}/{target.group(1)}.rs") or os.path.isfile(f"{tests}/{target.group(1)}/main.rs")):
        misses.append(f"{where}: {crate.group(1)} has no test target {target.group(1)}")
        return
    # A test-name filter after the target must match a test of that crate.
    after = args[target.end():].split()
    name = next((a for a in after if not a.startswith("-")), None)
    if name:
        sources = "".join(open(p, encoding="utf-8").read()
                          for p in glob.glob(f"{tests}/**/*.rs", recursive=True))
        if not re.search(rf"fn \w*{re.escape(name)}\w*\s*\(", sources):
            misses.append(f"{where}: no test of {crate.group(1)} --test {target.group(1)} matches {name}")


def code_of(page):
    """(line number, code text) of the page's code: fenced blocks and inline spans."""
    in_fence = False
    for n, line in enumerate(read(page).splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            yield n, line, line
        else:
            for span in re.findall(r"`([^`]+)`", line):
                yield n, span, line


for page in PAGES:
    text = read(page)
    # Variables anywhere on the page (prose names them too), outside links' targets and URLs.
    for n, line in enumerate(text.splitlines(), 1):
        line = re.sub(r"\]\([^)]*\)|https?://\S+", "", line)
        for token in ENV.findall(line):
            check_variable(f"{page}:{n}", token)
    for n, code, line in code_of(page):
        for m in PATH.finditer(code):
            check_path(f"{page}:{n}", page, m.group(1), code[m.end():])
        for m in BINARY_COMMAND.finditer(code):
            check_binary_command(f"{page}:{n}", m.group(1), m.group(2), m.group(3))
        for m in CARGO_TEST.finditer(code):
            check_cargo_test(f"{page}:{n}", m.group(1))

# --- README.md's configuration table, both ways ------------------------------------------------------
COLUMN = {"all": set(BINARIES), "services": {"lingo-service", "news-service"}}
table = {}
for n, line in enumerate(read("README.md").splitlines(), 1):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) < 3 or not cells[0].startswith("`"):
        continue
    variables = [v for v in re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0])]
    if not variables or not re.fullmatch(r"[\w, -]+", cells[1]):
        continue
    binaries = COLUMN.get(cells[1], {b.strip() for b in cells[1].split(",")})
    if not binaries <= set(BINARIES):
        misses.append(f"README.md:{n}: binaries column {cells[1]!r} names no binary")
        continue
    shown = re.findall(r"`([^`]*)`", cells[2]) or [cells[2]]
    for i, var in enumerate(variables):
        table[var] = n
        # The default column: one per variable, or one for all; `–` is none (or empty), a
        # variable's name is "that variable's value".
        default = shown[i] if len(shown) == len(variables) else shown[0]
        for real in defaults.get(var, set()):
            if default in ("–", "-") and real in (None, '""'):
                continue
            if real is None and default in accepts:
                continue
            if real != default:
                misses.append(f"README.md:{n}: {var}'s default is {default!r} there, {real!r} in --help")
        if var in OUTSIDE_CLAP or var.startswith(OUTSIDE_CLAP_PREFIX):
            continue
        have = accepts.get(var, set())
        # One variable for several binaries: each accepts it. A row of per-binary variables
        # (`LINGO_X`, `NEWS_X`): each is accepted by one of them.
        wanted = binaries if len(variables) == 1 or not have else binaries & have
        if not have or not wanted <= have or not (have & binaries):
            misses.append(f"README.md:{n}: {var} is for {cells[1]}, but accepted by "
                          f"{', '.join(sorted(have)) or 'no binary'}")
    clap = [v for v in variables if not (v in OUTSIDE_CLAP or v.startswith(OUTSIDE_CLAP_PREFIX))]
    if len(clap) > 1:
        covered = set().union(*(accepts.get(v, set()) for v in clap))
        if not binaries <= covered:
            misses.append(f"README.md:{n}: the row is for {cells[1]}, but {', '.join(sorted(binaries - covered))} "
                          f"accepts none of {', '.join(variables)}")
for var in sorted(set(accepts) - set(table)):
    misses.append(f"README.md (Configuration): {var}, accepted by {', '.join(sorted(accepts[var]))}, has no row")

print(f"binaries: {len(accepts)} variables accepted over "
      f"{sum(len(s) for s in subcommands.values())} subcommands ({bin_dir})")
print(f"checked in {len(PAGES)} pages: {len(checked['variables'])} variables, {len(checked['paths'])} paths, "
      f"commands: {', '.join(sorted(checked['commands']))}; README's table: {len(table)} variables")
if misses:
    print(f"\n{len(misses)} miss(es):")
    for miss in dict.fromkeys(misses):
        print(f"  {miss}")
    sys.exit(1)
print("docs-names: ok")
PY
