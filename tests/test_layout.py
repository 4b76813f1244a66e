"""The package's floors: every module imports only from its own floor or the floors below,
and no two modules import each other, directly or around a circle (specs/layout.md,
LAY-1, LAY-2, LAY-3; docs/architecture.md).

Imports are read from the source (every ``import`` and ``from … import``, lazy ones inside
functions and ``TYPE_CHECKING`` blocks included), so a circle that Python tolerates at run
time still fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "sarek_py"

#: The floors, lowest first (LAY-1). A module belongs to the longest prefix that names it.
FLOORS: tuple[str, ...] = (
    "sarek_py.ir",
    "sarek_py.ir.host",
    "sarek_py.analysis",
    "sarek_py.fusion",
    "sarek_py.codegen",
    "sarek_py.runtime",
    "sarek_py.host",
    "sarek_py.frontend",
    "sarek_py.cli",
    "sarek_py",
)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out: dict[str, Path] = {}
    for f in root.rglob("*.py"):
        parts = f.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def imports(path: Path, known: set[str]) -> set[str]:
    """The package's modules ``path`` imports (``from m import x`` counts ``m`` and, when
    ``m.x`` is a module, ``m.x``); imports of a module's own packages do not count."""
    me = next(n for n, p in modules().items() if p == path)
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for t in names:
            if t in known and t != me and not me.startswith(t + "."):
                out.add(t)
    return out


def floor_of(module: str) -> int:
    """The index in :data:`FLOORS` of the longest floor prefix of ``module``."""
    best = -1
    for i, f in enumerate(FLOORS):
        if (module == f or module.startswith(f + ".")) and (
                best < 0 or len(f) > len(FLOORS[best])):
            best = i
    assert best >= 0, module
    return best


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = modules(root)
    known = set(mods)
    return {m: imports(p, known) - {"sarek_py"} for m, p in mods.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a floor above its own (LAY-1)."""
    return sorted(f"{m} imports {t} ({FLOORS[floor_of(t)]} is above {FLOORS[floor_of(m)]})"
                  for m, ts in edges.items() for t in ts if floor_of(t) > floor_of(m))


def test_lay1_every_import_goes_to_the_same_floor_or_below() -> None:
    assert upward(graph()) == []


def test_lay2_no_import_circles() -> None:
    assert circles(graph()) == []


def test_lay3_domain_packages_never_import_the_cli() -> None:
    bad = sorted(f"{m} imports {t}" for m, ts in graph().items() for t in ts
                 if t.startswith("sarek_py.cli") and not m.startswith("sarek_py.cli")
                 and m != "sarek_py")
    assert bad == []


def test_lay1_every_module_has_a_floor() -> None:
    for m in modules():
        assert 0 <= floor_of(m) < len(FLOORS)


@pytest.mark.parametrize("edges, found", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_lay2_the_circle_finder_finds_circles(edges: dict[str, set[str]],
                                             found: list[list[str]]) -> None:
    """The check can fail: a two- and a three-module circle are found, a chain is not."""
    assert circles(edges) == found


def test_lay1_the_floor_check_finds_an_upward_import() -> None:
    assert upward({"sarek_py.ir.nodes": {"sarek_py.fusion.refusal"}}) == [
        "sarek_py.ir.nodes imports sarek_py.fusion.refusal (sarek_py.fusion is above "
        "sarek_py.ir)"]
    assert upward({"sarek_py.ir.host.launch": {"sarek_py.ir.nodes"}}) == []
