"""``sarek-py check FILE`` (docs/cli.md, CLI-5, CLI-10): parse and check a file, and say
what it holds."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from sarek_py.cli.loading import check_any, file_arg, load_any
from sarek_py.cli.registry import command
from sarek_py.ir.nodes import Module

if TYPE_CHECKING:
    from sarek_py.ir.host.program import Program


@command("check", "parse and check a .sk (or .py) file (types, scopes, barriers, purity)",
         file_arg)
def check_command(args: argparse.Namespace) -> int:
    m = load_any(args.file)
    check_any(m)
    kernels = ", ".join(k.name for k in m.kernels) or "none"
    counts = f"{len(m.kernels)} kernel(s): {kernels}; {len(m.helpers)} helper(s)"
    if isinstance(m, Module):
        print(f"{args.file}: ok ({counts})")
    else:
        loops = _count_parfors(m)
        print(f"{args.file}: ok (program {m.name}: {counts}; {len(m.procedures)} "
              f"procedure(s); {loops} parallel loop(s))")
    return 0


def _count_parfors(p: Program) -> int:
    """The parallel loops of a program's body and procedures."""
    from sarek_py.ir.host.program import ParFor, iter_host

    bodies = [p.body, *(proc.body for proc in p.procedures)]
    return sum(isinstance(s, ParFor) for b in bodies for s in iter_host(b))


__all__ = ["check_command"]
