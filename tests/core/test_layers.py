"""dpkit/ is layers you can see: each folder is one layer, each layer imports only those below it,
and no module imports itself back through others (TYPE_CHECKING and function-level imports count).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dpkit"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),                         # errors, JSON helpers, caches
    ("accounting", "text", "ml"),      # the ledger; the embedding toolkit; training and metrics
    ("evidence", "release"),           # claims and statistics; the wire and the server's view
    ("contract",),                     # what a plug-in implements and receives
    ("data", "models", "spec", "boundary"),  # data, models, specs, the process boundary
    ("budget",),                       # the budget store: spends keyed to the records they read
    ("audit", "report"),               # empirical audits; tables, files and plots of a run
    ("runner",),                       # a cell's lifecycle, executors, the result store
    ("testing",),                      # contract suites and strategies for plug-in authors
    ("cli",),                          # one module per command
)
"""Bottom to top. Folders on one row are peers: neither imports the other."""

RANK = {folder: rank for rank, row in enumerate(LAYERS) for folder in row}
PUBLIC_API_RANK = RANK["audit"] + 0.5  # dpkit/__init__.py: the contract and what plug-ins build on


def modules() -> dict[str, Path]:
    """Every module under dpkit/ by dotted name (a package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


def imports(path: Path) -> set[str]:
    """The dpkit modules ``path`` imports, anywhere in the file (``from pkg import sub`` -> sub)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "dpkit")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "dpkit":
            subs = [f"{node.module}.{a.name}" for a in node.names]
            out.update(s for s in subs if s in MODULES)
            if any(s not in MODULES for s in subs):
                out.add(node.module)
    return out


def folder(module: str) -> str | None:
    """The layer folder of a module (None for dpkit's own __init__/__main__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None


def test_root_holds_only_init_main_and_folders():
    loose = sorted(p.name for p in PACKAGE.iterdir()
                   if p.is_file() and p.name not in ("__init__.py", "__main__.py"))
    assert not loose, f"modules at dpkit/'s root (put each in its layer's folder): {loose}"


def test_every_folder_has_a_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(RANK), ("place new folders in LAYERS, remove gone ones: "
                                  f"{sorted(folders ^ set(RANK))}")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_go_down(module):
    here = folder(module)
    rank: float = RANK[here] if here else (PUBLIC_API_RANK if module == "dpkit" else len(LAYERS))
    wrong = []
    for target in sorted(imports(MODULES[module])):
        there = folder(target)
        if there == here:
            continue
        if there is None:  # the public API package itself
            if here is None or RANK[here] < RANK["cli"]:
                wrong.append(f"{target} (only the command line imports the public API package)")
        elif RANK[there] >= rank:
            wrong.append(f"{target} (layer {there!r} is not below {here or module!r})")
    assert not wrong, f"{module} imports upward or sideways: {wrong}"


def test_no_import_cycles():
    graph = {m: sorted(t for t in imports(p) if t in MODULES and t != m) for m, p in MODULES.items()}
    cycles = strongly_connected(graph)
    assert not cycles, f"import circles in dpkit/: {cycles}"


def strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Components of more than one module (Tarjan)."""
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                out.append(sorted(members))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    graph = defaultdict(list, {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]})
    assert strongly_connected(dict(graph)) == [["a", "b", "c"]]
