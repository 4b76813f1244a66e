"""The epilogue fusion floor, sarek_py/fusion/epilogue/, in one direction (specs/layout.md
LAY-2; docs/architecture.md): each module has one job and imports only the modules below
it, lazy imports inside functions included, so no circle can form again.

Lowest first: the launch record lives below the whole floor (sarek_py/ir/host/launch.py).
"""

from __future__ import annotations

import subprocess
import sys

from test_layout import circles, graph

PKG = "sarek_py.fusion.epilogue"

#: the modules of the floor, lowest first, with their one job
ORDER: tuple[tuple[str, str], ...] = (
    ("well_formed", "the kernels are checked IR (EF-1)"),
    ("user_names", "refusals in the user's names of a fused kernel's variables"),
    ("accesses", "array accesses of kernel code, through helpers (EF-3)"),
    ("traffic", "a bound on the bytes a list of launches moves (EF-35)"),
    ("buffers", "which buffer a launch argument names; one buffer or overlap (LEG-1)"),
    ("consumer", "the element-wise consumer and the window check (EF-1..EF-4, EF-9)"),
    ("domain", "the elements an element-wise consumer acts on (LEG-18)"),
    ("grid_stride", "grid-stride loops around a producer's stores (LEG-21..LEG-23)"),
    ("legality", "Index_slice and Launch_window on two launches (LEG-1..LEG-12, LEG-16)"),
    ("conditions", "the launch conditions checked at every launch (LEG-13..LEG-15)"),
    ("fuse_kernels", "the kernel rewrite (EF-5..EF-17)"),
    ("grid_stride_consumer", "a grid-stride consumer as the element-wise one (EF-25)"),
    ("threadwise", "thread-wise fusion of launches of one shape (LEG-30, LEG-31)"),
    ("sequence", "fuse_launches and the runs of launches of host programs (LEG-10)"),
    ("dead_stores", "the stores of an intermediate nobody can see dropped (EF-30..EF-35)"),
    ("merge_scalars", "a fused launch's equal scalar parameters made one (FE-97)"),
)


def test_lay2_epilogue_modules_import_only_modules_below_them() -> None:
    edges = graph()
    rank = {f"{PKG}.{m}": i for i, (m, _) in enumerate(ORDER)}
    mods = {m for m in edges if m.startswith(PKG + ".")}
    assert mods == set(rank), "every module of the floor has a place in ORDER"
    bad = sorted(f"{m} imports {t}" for m in mods for t in edges[m]
                 if t in rank and rank[t] >= rank[m])
    assert bad == []


def test_lay2_the_direction_check_can_fail() -> None:
    """An edge from a lower module to a higher one is found (and is a circle once the
    higher one imports it back, as legality <-> sequence did)."""
    edges = {f"{PKG}.legality": {f"{PKG}.sequence"}, f"{PKG}.sequence": {f"{PKG}.legality"}}
    assert circles(edges) == [[f"{PKG}.legality", f"{PKG}.sequence"]]


def test_lay2_no_module_of_the_floor_imports_above_it() -> None:
    """The floor imports nothing of codegen, runtime, host, frontend or the CLI."""
    edges = graph()
    above = ("sarek_py.codegen", "sarek_py.runtime", "sarek_py.host", "sarek_py.frontend",
             "sarek_py.cli")
    bad = sorted(f"{m} imports {t}" for m, ts in edges.items() if m.startswith(PKG)
                 for t in ts if t.startswith(above))
    assert bad == []


def test_leg14_checker_registered_by_the_lowest_import() -> None:
    """LEG-14: importing only the launch record (below the whole fusion floor) registers
    the launch check of fused kernels, as sarek_py/fusion/__init__.py does for any import
    of the package."""
    code = ("from sarek_py.ir.host.launch import Launch\n"
            "from sarek_py.ir.requires_check import _CHECKERS\n"
            "print(len(_CHECKERS), _CHECKERS[0].__module__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["1", "sarek_py.fusion.epilogue.conditions"], done.stderr
