#!/usr/bin/env python3
"""Fails when modules of a crate import each other in a cycle.

For each crate under host/, every file is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`).
A path `crate::a::b::Item`, `super::x` or `self::x` in a file is an edge to the longest module
that names. Two graphs are checked:

- files: an edge to an ancestor module is not counted (a child may use what its parent
  declares; the parent owns it), so a cycle here is between siblings or cousins;
- top-level modules: any edge between two different top-level modules of the crate.

Usage: scripts/module-cycles.py [CRATE_SRC_DIR...] (default: every host/*/src).
"""

import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


def module_of(src: Path, file: Path) -> tuple:
    rel = file.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_comments(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def targets(module: tuple, is_dir_module: bool, text: str):
    """Module paths (tuples) that `text` refers to."""
    # `super` of a file module is its parent; of a mod.rs it is the grandparent.
    here = module if is_dir_module else module
    found = []

    def resolve(root: str, segs: list) -> tuple:
        if root == "crate":
            base = []
        elif root == "self":
            base = list(here)
        else:  # super
            base = list(here[:-1])
        return tuple(base + segs)

    for m in USE_GROUP.finditer(text):
        root, prefix, group = m.group(1), m.group(2), m.group(3)
        segs = [s for s in prefix.split("::") if s]
        for item in re.split(r"[,{}\s]+", group):
            item = item.strip()
            if item and item not in ("self",) and re.match(r"^[A-Za-z_]\w*$", item):
                found.append(resolve(root, segs + [item]))
            elif item == "self":
                found.append(resolve(root, segs))
    for m in PATH.finditer(text):
        segs = [s for s in m.group(2).split("::") if s]
        found.append(resolve(m.group(1), segs))
    return found


def longest_module(path: tuple, modules: set) -> tuple:
    for n in range(len(path), -1, -1):
        if path[:n] in modules:
            return path[:n]
    return ()


def find_cycle(graph: dict):
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def check(src: Path) -> list:
    files = sorted(src.rglob("*.rs"))
    modules = {module_of(src, f): f for f in files}
    names = set(modules)
    file_graph = {m: set() for m in names}
    top_graph = {}
    for module, file in modules.items():
        text = strip_comments(file.read_text())
        is_dir = file.name == "mod.rs"
        for target in targets(module, is_dir, text):
            t = longest_module(target, names)
            if t == module or t == ():
                continue
            if module[: len(t)] != t:  # not an ancestor
                file_graph[module].add(t)
            if module and t and module[0] != t[0]:
                top_graph.setdefault(module[0], set()).add(t[0])
    problems = []
    for label, graph in (("files", file_graph), ("top-level modules", top_graph)):
        cycle = find_cycle(graph)
        if cycle:
            shown = " -> ".join("::".join(c) if isinstance(c, tuple) else c for c in cycle)
            problems.append(f"{src}: import cycle between {label}: {shown}")
    return problems


def main():
    root = Path(__file__).resolve().parent.parent
    dirs = [Path(a) for a in sys.argv[1:]] or sorted(root.glob("host/*/src"))
    problems = [p for d in dirs for p in check(d)]
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"no import cycles in {len(dirs)} crates")


if __name__ == "__main__":
    main()
