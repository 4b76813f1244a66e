"""The modules of sarek_py that ``make test``'s first pass instruments with typeguard, as a
comma-separated list for ``--typeguard-packages`` (docs/testing.md): every module but the
hot loops of :data:`LEFT_OUT`, each written as the shortest package prefixes that cover the
rest. Run from the repository root: ``python3 tests/typeguard_packages.py``."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the reference interpreter's evaluation, the affine solver, the IR walkers: called in
#: the innermost loops of everything, typeguard's checks there were a third of the pass
LEFT_OUT = ("sarek_py.ir.interp", "sarek_py.analysis.affine", "sarek_py.ir.visit",
            "sarek_py.ir.memo")


def modules() -> list[str]:
    """Every module and package of sarek_py, found on disk (nothing is imported)."""
    out = []
    for path in sorted((ROOT / "sarek_py").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def left_out(name: str) -> bool:
    """``name`` is a left-out module (``sarek_py.ir.interp`` also names its siblings
    ``interp_exec``, ``interp_ops`` …) or inside a left-out package."""
    return name.startswith(LEFT_OUT)


def cover(prefix: str, names: list[str]) -> list[str]:
    """The shortest prefixes under ``prefix`` naming every module but the left-out ones."""
    sub = [m for m in names if m == prefix or m.startswith(prefix + ".")]
    if not any(left_out(m) for m in sub):
        return [prefix]
    depth = prefix.count(".") + 2
    children = sorted({".".join(m.split(".")[:depth]) for m in sub if m != prefix})
    return [p for c in children if not left_out(c) for p in cover(c, names)]


def packages() -> list[str]:
    names = modules()
    return [p for c in sorted({".".join(m.split(".")[:2]) for m in names if m != "sarek_py"})
            for p in cover(c, names)]


if __name__ == "__main__":
    sys.stdout.write(",".join(packages()) + "\n")
