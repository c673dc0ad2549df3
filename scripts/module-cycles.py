#!/usr/bin/env python3
"""Fails when modules of a crate import each other in a cycle, or reach up a declared layering.

For each crate under host/, every file is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`).
A path `crate::a::b::Item`, `super::x` or `self::x` in a file is an edge to the longest module
that names. A name a `mod.rs` re-exports (`pub use b::Item;`) resolves to the child that
defines it. Four checks:

- files: an edge to an ancestor module is not counted (a child may use what its parent
  declares; the parent owns it), so a cycle here is between siblings or cousins;
- top-level modules: any edge between two different top-level modules of the crate;
- parent and child: a child `a/b` that uses an item `a/mod.rs` itself defines (not one it
  re-exports), while `a/mod.rs` uses `a/b` other than by re-exporting it (a `pub use b::..`
  is a facade, not a dependency of the parent's items). One of the two belongs in a sibling
  (`a/error.rs`, `a/registry.rs`, ...). Exemptions are listed in PARENT_CHILD_EXEMPT with
  their reason;
- layers: where LAYERS declares a crate's top-level modules bottom-up, a module may use only
  modules of lower layers (not its own layer, not above).

Across crates, CRATE_LAYERS declares every crate under host/ bottom-up (cli -> host ->
capability crates -> core): a crate's `seam-*` dependencies in its Cargo.toml must all sit in
lower layers, and a crate missing from it fails the check.

Usage: scripts/module-cycles.py [CRATE_SRC_DIR...] (default: every host/*/src).
"""

import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


# Top-level modules of a crate, bottom-up, by the name of the crate's folder under host/. A
# module may use only modules of the layers below its own.
LAYERS = {
    "core": [
        # What budgets count (tokens, cost, calls): the vocabulary's own usage is one of them.
        ["spend", "approval", "cassette"],
        # What a delegation narrows its subtree to: its tool patterns match as approvals' do.
        ["scope"],
        ["types", "sync", "live", "budget"],
        # Durable sessions: opaque JSON bodies, so that the bus can write before it delivers;
        # the trace hooks, which the runtime above calls.
        ["store", "trace"],
        # The live recorder and player of a tree's inputs: it writes entries to the store.
        ["tape"],
        # The accounts of budgets over the tree: they write spend to the store.
        ["events", "ledger"],
        # Asking a surface whether a call may go ahead: kept in the store, told on the bus.
        ["approvals"],
        ["subagent"],
        ["tool"],
    ],
    "agent": [
        # The agent runtime's own vocabulary: its session log and its models.
        ["session", "model"],
        ["agent"],
    ],
}

# Every crate under host/, by folder, bottom-up: a crate may depend only on crates of lower
# layers. The capability crates sit between the host, which composes them behind features, and
# core, which knows no WebAssembly.
CRATE_LAYERS = [
    ["core"],
    # The agent runtime, on core's services.
    ["agent"],
    # Backends of core's traits.
    ["store-sqlite", "model-openai"],
    ["process", "sandbox"],
    ["wasm", "acp", "mcp", "a2a", "console", "oci", "telemetry", "cluster"],
    ["host"],
    ["cli"],
]

SEAM_DEP = re.compile(r"^(seam-[a-z-]+)\s*(?:\.workspace\s*=|=)", re.M)


def check_crates(root: Path) -> list:
    """Each crate's `seam-*` dependencies point down CRATE_LAYERS."""
    rank = {name: i for i, layer in enumerate(CRATE_LAYERS) for name in layer}
    problems = []
    for manifest in sorted(root.glob("host/*/Cargo.toml")):
        crate = manifest.parent.name
        if crate not in rank:
            problems.append(f"{manifest}: crate folder `{crate}` has no layer in CRATE_LAYERS")
            continue
        text = manifest.read_text()
        deps = text.split("[dependencies]", 1)[-1].split("\n[", 1)[0]
        for dep in SEAM_DEP.findall(deps):
            folder = dep.removeprefix("seam-")
            if folder not in rank:
                problems.append(f"{manifest}: depends on `{dep}`, which has no layer")
            elif rank[folder] >= rank[crate]:
                problems.append(
                    f"{manifest}: `{crate}` depends on `{dep}`, which is not below it "
                    f"(layers, bottom-up: {' < '.join('/'.join(l) for l in CRATE_LAYERS)})"
                )
    return problems


# (crate folder, parent module, child module): why the two may use each other.
PARENT_CHILD_EXEMPT = {
    ("cli", "new", "new::templates"): "pending: `Lang` (new/mod.rs) is the templates' key and "
    "`new` renders them; moving `Lang` to its own file is left to the CLI's owner",
}

ITEM = re.compile(
    r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|unsafe\s+|const\s+)*"
    r"(?:struct|enum|fn|trait|const|static|type|union|mod)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
MACRO_DEF = re.compile(r"^\s*macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)", re.M)
REEXPORT = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", re.S)


def own_items(text: str) -> set:
    """Names a file defines at its top level (items the `events!` style macros declare
    inside are not seen; they are defined where the macro is called)."""
    return set(ITEM.findall(text)) | set(MACRO_DEF.findall(text))


def reexports(module: tuple, text: str, modules: set) -> dict:
    """Names a module re-exports from its own children: name -> child module."""
    out = {}
    for m in REEXPORT.finditer(text):
        body = m.group(1).strip()
        head = body.split("::")[0].strip()
        if head in ("crate", "super", "self") or not body:
            continue
        child = module + (head,)
        if child not in modules:
            continue
        rest = body[len(head):].lstrip(":")
        for word in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)(?:\s+as\s+([A-Za-z_][A-Za-z0-9_]*))?", rest):
            name = word.group(2) or word.group(1)
            if name not in ("self",):
                out[name] = child
    return out


def without_reexports(text: str) -> str:
    return REEXPORT.sub("", text)


def child_uses(text: str, module: tuple, modules: set) -> set:
    """Children of `module` that its file uses other than by re-exporting them: `use b::..`,
    `b::Item` in code, `self::b`."""
    text = without_reexports(text)
    text = re.sub(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*;", "", text, flags=re.M)
    used = set()
    for m in re.finditer(r"(?<![:\w])(?:self::)?([a-z_][a-z0-9_]*)::", text):
        child = module + (m.group(1),)
        if child in modules:
            used.add(child)
    return used


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
    texts = {m: strip_comments(f.read_text()) for m, f in modules.items()}
    exported = {m: reexports(m, texts[m], names) for m in names}
    defined = {m: own_items(texts[m]) for m in names}
    file_graph = {m: set() for m in names}
    top_graph = {}
    # child -> whether it uses an item its parent's own file defines
    uses_parent_item = {}
    for module, file in modules.items():
        text = texts[module]
        is_dir = file.name == "mod.rs"
        for target in targets(module, is_dir, text):
            t = longest_module(target, names)
            # A name the module re-exports from a child is that child's.
            if len(target) > len(t) and target[len(t)] in exported.get(t, {}):
                t = exported[t][target[len(t)]]
            elif len(target) > len(t) and t == module[:-1] and t and target[len(t)] in defined[t]:
                uses_parent_item[module] = target[len(t)]
            if t == module or t == ():
                continue
            if module[: len(t)] != t:  # not an ancestor
                file_graph[module].add(t)
            if module and t and module[0] != t[0]:
                top_graph.setdefault(module[0], set()).add(t[0])
    problems = []
    crate = src.parent.name
    for child, item in sorted(uses_parent_item.items()):
        parent = child[:-1]
        if child in child_uses(texts[parent], parent, names):
            if (crate, "::".join(parent), "::".join(child)) in PARENT_CHILD_EXEMPT:
                continue
            problems.append(
                f"{src}: parent and child use each other: `{'::'.join(child)}` uses "
                f"`{item}`, which `{'::'.join(parent)}` defines, and `{'::'.join(parent)}` "
                f"uses `{'::'.join(child)}`"
            )
    layers = LAYERS.get(crate)
    if layers:
        rank = {name: i for i, layer in enumerate(layers) for name in layer}
        for module in sorted(top_graph):
            for target in sorted(top_graph[module]):
                if module not in rank or target not in rank:
                    problems.append(
                        f"{src}: `{module}` or `{target}` has no layer in LAYERS[{crate!r}]"
                    )
                elif rank[target] >= rank[module]:
                    problems.append(
                        f"{src}: `{module}` reaches up to `{target}` (layers, bottom-up: "
                        f"{' < '.join('/'.join(l) for l in layers)})"
                    )
    for label, graph in (("files", file_graph), ("top-level modules", top_graph)):
        cycle = find_cycle(graph)
        if cycle:
            shown = " -> ".join("::".join(c) if isinstance(c, tuple) else c for c in cycle)
            problems.append(f"{src}: import cycle between {label}: {shown}")
    return problems


def main():
    root = Path(__file__).resolve().parent.parent
    dirs = [Path(a) for a in sys.argv[1:]] or sorted(root.glob("host/*/src"))
    problems = check_crates(root) + [p for d in dirs for p in check(d)]
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"no import cycles or upward reaches in {len(dirs)} crates")


if __name__ == "__main__":
    main()
