#!/usr/bin/env python3
"""Fails when a crate's modules import each other in a circle.

For every crate of the workspace it reads src/, builds the graph "module A uses module B" from
`use` declarations and qualified paths (`crate::a::b`, `super::x`, `self::x`, a child module's
name), and prints every cycle it finds. Items re-exported with `pub use` are followed to the
module that defines them, so `use crate::Error` counts as an edge to `error`, not to the root.
Inline `mod tests { ... }` blocks belong to their file's module.

The crate root (lib.rs or main.rs) is the composition root: it declares and wires the modules,
so its own uses are not edges and it closes no circle. With --strict-root they count, and a
type defined in lib.rs that a module it calls uses (`crate::AppState`) is reported.

With --leaf-routes it also fails when a module under `routes/` imports another one (route
modules are leaves: what two of them share lives in a store or domain module).

Usage: check-acyclic.py [--leaf-routes] [--strict-root] [crate_dir ...]   (default: the workspace members)
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MOD_DECL = re.compile(rf"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*;", re.M)
INLINE_MOD = re.compile(rf"\bmod\s+({IDENT})\s*\{{")
USE_DECL = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.S)
QUALIFIED = re.compile(rf"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::{IDENT})+)")


def strip_comments_and_strings(text: str) -> str:
    """Blanks comments, string and char literals, keeping offsets and newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not text[i - 1].isalnum()):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree: str) -> list[tuple[list[str], str | None]]:
    """`a::{b, c::{d, e as f}}` -> [(path, alias)]; a glob ends in "*"."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree)

    def split_top(s: str) -> list[str]:
        parts, depth, start = [], 0, 0
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        return [p for p in parts if p]

    def walk(s: str, prefix: list[str]) -> list[tuple[list[str], str | None]]:
        brace = s.find("{")
        if brace >= 0 and s.endswith("}"):
            head = [p for p in s[:brace].split("::") if p]
            found = []
            for part in split_top(s[brace + 1 : -1]):
                found.extend(walk(part, prefix + head))
            return found
        s, _, alias = s.partition("@")
        path = [p for p in s.split("::") if p]
        return [(prefix + path, alias)]

    return [(path, alias or None) for path, alias in walk(tree, [])]


class Crate:
    def __init__(self, root: Path):
        self.root = root
        self.src = root / "src"
        self.files: dict[tuple[str, ...], Path] = {}
        for entry in ("lib.rs", "main.rs"):
            if (self.src / entry).exists():
                self.discover((), self.src / entry, self.src)
                break
        self.texts = {m: strip_comments_and_strings(p.read_text()) for m, p in self.files.items()}
        self.reexports = {m: self.find_reexports(m) for m in self.files}

    def discover(self, module: tuple[str, ...], path: Path, child_dir: Path) -> None:
        self.files[module] = path
        text = strip_comments_and_strings(path.read_text())
        for name in MOD_DECL.findall(text):
            for candidate, sub_dir in (
                (child_dir / f"{name}.rs", child_dir / name),
                (child_dir / name / "mod.rs", child_dir / name),
            ):
                if candidate.exists():
                    self.discover(module + (name,), candidate, sub_dir)
                    break

    def is_module(self, module: tuple[str, ...]) -> bool:
        return module in self.files

    def inline_depth_at(self, module: tuple[str, ...], offset: int) -> int:
        """How many inline `mod x { }` blocks enclose `offset` in the module's file."""
        text = self.texts[module]
        depth = 0
        for m in INLINE_MOD.finditer(text):
            if m.start() > offset:
                break
            level, k = 1, m.end()
            while k < len(text) and level:
                level += {"{": 1, "}": -1}.get(text[k], 0)
                k += 1
            if k > offset:
                depth += 1
        return depth

    def absolute(self, module: tuple[str, ...], path: list[str], offset: int) -> list[str] | None:
        """The path from the crate root, or None when it leaves the crate."""
        if not path:
            return None
        head, rest = path[0], path[1:]
        if head == "crate":
            return rest
        if head in ("self", "super"):
            current = list(module)
            inline = self.inline_depth_at(module, offset)
            while path and path[0] in ("self", "super"):
                if path[0] == "super":
                    if inline:
                        inline -= 1
                    elif current:
                        current.pop()
                path = path[1:]
            return current + path
        if self.is_module(module + (head,)):
            return list(module) + path
        return None

    def find_reexports(self, module: tuple[str, ...]) -> dict[str, list[str]]:
        found = {}
        for m in USE_DECL.finditer(self.texts[module]):
            if not m.group(1):
                continue
            for path, alias in expand_use_tree(m.group(2)):
                absolute = self.absolute(module, path, m.start())
                if absolute and path[-1] not in ("*", "self"):
                    found[alias or path[-1]] = absolute
        return found

    def resolve(self, path: list[str], seen: int = 0) -> tuple[str, ...] | None:
        """The module a crate-absolute path points into, following `pub use` re-exports."""
        module: tuple[str, ...] = ()
        for k, segment in enumerate(path):
            if segment in ("*", "self"):
                return module
            if self.is_module(module + (segment,)):
                module = module + (segment,)
                continue
            target = self.reexports.get(module, {}).get(segment)
            if target and seen < 8 and target != path[: k + 1]:
                return self.resolve(target + path[k + 1 :], seen + 1)
            return module
        return module

    def edges(self, strict_root: bool) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
        graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in self.files}
        for module, text in self.texts.items():
            if module == () and not strict_root:
                continue
            paths: list[tuple[list[str], int]] = []
            for m in USE_DECL.finditer(text):
                paths.extend((p, m.start()) for p, _ in expand_use_tree(m.group(2)))
            for m in QUALIFIED.finditer(text):
                paths.append((m.group(1).split("::"), m.start()))
            children = [c[-1] for c in self.files if c[:-1] == module and len(c) == len(module) + 1]
            if children:
                child_path = re.compile(rf"(?<![A-Za-z0-9_:])((?:{'|'.join(children)})(?:::{IDENT})+)")
                for m in child_path.finditer(text):
                    paths.append((m.group(1).split("::"), m.start()))
            for path, offset in paths:
                absolute = self.absolute(module, path, offset)
                if absolute is None:
                    continue
                target = self.resolve(absolute)
                if target is None or target == module:
                    continue
                # A module naming its own descendants, or the path down to them, is ownership,
                # not a dependency that can close a circle by itself.
                if target[: len(module)] == module:
                    graph[module].add(target)
                elif module[: len(target)] == target:
                    # Naming an ancestor module itself (not an item in it) is how paths start.
                    if absolute and self.is_module(tuple(absolute)) and tuple(absolute) == target:
                        continue
                    graph[module].add(target)
                else:
                    graph[module].add(target)
        return graph


def cycles(graph: dict[tuple[str, ...], set[tuple[str, ...]]]) -> list[list[tuple[str, ...]]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    components = []
    counter = [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [one_cycle(graph, sorted(c)) for c in components]


def one_cycle(graph, component):
    """A concrete circle through the component's first module, for the message."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    return paths[v] + [start]
                if w in members and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    return component


def name(module: tuple[str, ...]) -> str:
    return "::".join(("crate",) + module)


def route_violations(graph) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    def route(m):
        return "routes" in m and m.index("routes") < len(m) - 1

    return [
        (a, b)
        for a in sorted(graph)
        for b in sorted(graph[a])
        if route(a) and route(b) and a[: a.index("routes") + 2] != b[: b.index("routes") + 2]
    ]


def workspace_members(root: Path) -> list[Path]:
    manifest = tomllib.loads((root / "Cargo.toml").read_text())
    return [root / member for member in manifest["workspace"]["members"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaf-routes", action="store_true", help="route modules import no other")
    parser.add_argument("--strict-root", action="store_true", help="lib.rs's uses count too")
    parser.add_argument("crates", nargs="*", type=Path)
    args = parser.parse_args()
    crates = args.crates or workspace_members(Path(__file__).resolve().parent.parent)
    failed = False
    for crate_dir in crates:
        crate = Crate(crate_dir)
        graph = crate.edges(args.strict_root)
        for cycle in cycles(graph):
            failed = True
            print(f"{crate_dir.name}: import circle: " + " -> ".join(map(name, cycle)))
        if args.leaf_routes:
            for a, b in route_violations(graph):
                failed = True
                print(f"{crate_dir.name}: route module {name(a)} imports {name(b)}")
    if not failed:
        print(f"no import circles in {len(crates)} crates")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
