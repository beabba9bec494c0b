#!/usr/bin/env python3
"""The documentation stays inside the repository.

1. Every link in README.md, deploy/README.md, .ci/README.md and docs/**/*.md resolves: a relative link names a file or folder of
   the repository, and a `#fragment` names a heading of the target Markdown file (GitHub's
   slugs). A link that leaves the repository (`../` above the root, an absolute file path, a
   `file:` URL) fails. http(s) and mailto links are allowed and not fetched.
2. No tracked source file, and no tracked Markdown file, mentions the contract or design files
   that live outside the repository (the names in FORBIDDEN): the contract is docs/. Applied
   migrations are exempt (see `is_applied_migration`).
3. docs/ agrees with openapi.json: every operation is documented, and every error `code` an
   operation declares is in the table of codes in docs/conventions.md.

Python 3.11 standard library only. Run from anywhere: `python3 .ci/check-links.py`.
Exit status 0 when everything resolves, 1 with one line per problem otherwise.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

FORBIDDEN = ("API.md", "DESIGN.md", "../shared")
SOURCE_SUFFIXES = {".rs", ".sh", ".py", ".sql", ".toml", ".yaml", ".yml", ".md"}
EXTERNAL = re.compile(r"^(https?:|mailto:)", re.IGNORECASE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_HREF = re.compile(r"""<a\s[^>]*href=["']([^"']+)["']""", re.IGNORECASE)
INLINE_CODE = re.compile(r"(`+)(.+?)\1")


def tracked_files() -> list[str]:
    """Files git tracks (with not-yet-committed additions), or every file when git is absent."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
        return [line for line in out.splitlines() if (ROOT / line).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", "target", ".local"}
        return [
            p.relative_to(ROOT).as_posix()
            for p in ROOT.rglob("*")
            if p.is_file() and not skip.intersection(p.relative_to(ROOT).parts)
        ]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their 1-based numbers."""
    lines, fenced = [], None
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            if fenced is None:
                fenced = fence.group(1)
            elif fence.group(1) == fenced:
                fenced = None
            continue
        if fenced is None:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower-cased, punctuation dropped,
    spaces turned into hyphens."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("*", "")
    text = text.strip().lower()
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char in "-_ " or category[0] in "LN" or category == "Mn":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


_anchor_cache: dict[Path, set[str]] = {}


def anchors_of(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 suffixes for repeats."""
    if path not in _anchor_cache:
        seen: dict[str, int] = {}
        anchors = set()
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            anchors.add(base if count == 0 else f"{base}-{count}")
        # Explicit HTML anchors count too.
        anchors.update(re.findall(r"""<a\s[^>]*(?:name|id)=["']([^"']+)["']""", path.read_text(encoding="utf-8")))
        _anchor_cache[path] = anchors
    return _anchor_cache[path]


def links_in(text: str) -> list[tuple[int, str]]:
    found = []
    for number, line in prose_lines(text):
        code_free = INLINE_CODE.sub("", line)
        for pattern in (INLINE_LINK, HTML_HREF):
            found.extend((number, m.group(1)) for m in pattern.finditer(code_free))
        definition = REFERENCE_DEF.match(code_free)
        if definition:
            found.append((number, definition.group(1)))
    return found


def check_link(source: str, target: str) -> str | None:
    """Why `target`, written in the Markdown file `source`, does not resolve; None when it does."""
    if not target or EXTERNAL.match(target):
        return None
    if SCHEME.match(target):
        return "leaves the repository (only http(s) and mailto URLs may point elsewhere)"
    path_part, _, fragment = target.partition("#")
    path_part = unquote(path_part.split("?", 1)[0])
    if path_part.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path_part):
        return "is an absolute path; use a path relative to the file"
    if path_part:
        joined = PurePosixPath(source).parent / path_part
        parts: list[str] = []
        for part in joined.parts:
            if part == "..":
                if not parts:
                    return "leaves the repository"
                parts.pop()
            elif part not in (".", ""):
                parts.append(part)
        resolved = ROOT.joinpath(*parts)
        if not resolved.exists():
            return "names no file of the repository"
    else:
        resolved = ROOT / source
    if fragment:
        if resolved.is_dir() or resolved.suffix.lower() != ".md":
            return None  # line anchors and the like of non-Markdown files are not checked
        if unquote(fragment).lower() not in anchors_of(resolved):
            return f"names no heading #{fragment} in {resolved.relative_to(ROOT).as_posix()}"
    return None


# The newcomer's page, the operations runbook, the CI page, and the contract.
TOP_PAGES = {"README.md", "deploy/README.md", ".ci/README.md"}


def markdown_to_check(files: list[str]) -> list[str]:
    return [f for f in files if f in TOP_PAGES or (f.startswith("docs/") and f.endswith(".md"))]


def is_source(path: str) -> bool:
    name = PurePosixPath(path).name
    return PurePosixPath(path).suffix in SOURCE_SUFFIXES or name.startswith("Dockerfile")


def is_applied_migration(path: str) -> bool:
    """A committed migration is never edited: sqlx checksums the whole file, comments included,
    so changing one breaks every database that already ran it."""
    return "/migrations/" in f"/{path}" and path.endswith(".sql")


def link_problems(files: list[str]) -> tuple[int, list[str]]:
    problems, checked = [], 0
    for source in markdown_to_check(files):
        text = (ROOT / source).read_text(encoding="utf-8")
        for number, target in links_in(text):
            checked += 1
            why = check_link(source, target)
            if why:
                problems.append(f"{source}:{number}: link {target!r} {why}")
    return checked, problems


def mention_problems(files: list[str]) -> list[str]:
    problems = []
    for path in files:
        if path == SELF or not is_source(path) or is_applied_migration(path):
            continue
        try:
            lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(lines, 1):
            for name in FORBIDDEN:
                if name in line:
                    problems.append(
                        f"{path}:{number}: mentions {name}, a file outside the repository; "
                        "cite docs/ instead"
                    )
    return problems


def field_names(document: dict) -> set[str]:
    """Every parameter, header and schema property name of the OpenAPI document: the backticked
    words of a response description that are not error codes."""
    names: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("properties"), dict):
                names.update(node["properties"])
            if isinstance(node.get("name"), str) and "in" in node:
                names.add(node["name"])
            if isinstance(node.get("headers"), dict):
                names.update(h.lower() for h in node["headers"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    return names


def openapi_problems() -> list[str]:
    """docs/ agrees with openapi.json: every operation is documented (a line of docs/ names its
    method and path), and every error `code` an operation declares is in the table of codes."""
    spec_path, conventions = ROOT / "openapi.json", ROOT / "docs" / "conventions.md"
    if not spec_path.exists() or not conventions.exists():
        return [f"{p.relative_to(ROOT)}: missing" for p in (spec_path, conventions) if not p.exists()]
    document = json.loads(spec_path.read_text(encoding="utf-8"))
    docs_lines = [
        line
        for page in sorted((ROOT / "docs").rglob("*.md"))
        for line in page.read_text(encoding="utf-8").splitlines()
    ]
    table = conventions.read_text(encoding="utf-8").split("### Error codes", 1)[-1]
    table_codes = set(re.findall(r"^\|\s*\d{3}\s*\|\s*`([a-z_]+)`", table, re.MULTILINE))
    not_codes = field_names(document)
    problems = []
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            verb = method.upper()
            if not any(path in line and re.search(rf"\b{verb}\b", line) for line in docs_lines):
                problems.append(f"openapi.json: {verb} {path} is documented nowhere in docs/")
            for status, response in operation["responses"].items():
                if not status.startswith(("4", "5")):
                    continue
                for word in re.findall(r"`([a-z][a-z_]*)`", response.get("description", "")):
                    if word not in not_codes and word.lower() not in not_codes and word not in table_codes:
                        problems.append(
                            f"openapi.json: {verb} {path} {status} declares `{word}`, "
                            "which is not in the error-code table of docs/conventions.md"
                        )
    return sorted(set(problems))


def main() -> int:
    files = tracked_files()
    checked, problems = link_problems(files)
    problems += mention_problems(files)
    problems += openapi_problems()
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-links: {len(problems)} problem(s)")
        return 1
    print(
        f"check-links: {checked} links resolve, no file names a document outside the repository, "
        "and docs/ covers every operation and error code of openapi.json"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
