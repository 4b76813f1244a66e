"""What ``run`` prints after a run (docs/cli.md, CLI-7, CLI-11): scalars by value, arrays
by digest and first values, stop codes."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import ArrayType

if TYPE_CHECKING:
    from sarek_py.ir.host.program import Program

SHOWN_VALUES = 4


def array_line(name: str, array: np.ndarray[Any, Any]) -> str:
    """``NAME: sha256=<hex> [v0, v1, v2, v3, ...]`` (CLI-7)."""
    a = np.ascontiguousarray(array)
    digest = hashlib.sha256(a.tobytes()).hexdigest()
    flat = a.reshape(-1)
    shown = [str(v) for v in flat[:SHOWN_VALUES]]
    if flat.size > SHOWN_VALUES:
        shown.append("...")
    return f"{name}: sha256={digest} [{', '.join(shown)}]"


def describe_run(k: Kernel, args: dict[str, Any], result: Any) -> list[str]:
    """The report of a run: each scalar's value, then one line per array parameter
    (``name: sha256=<hex> [first values …]``), then the stop codes if a thread stopped."""
    lines = [f"{p.name} = {args[p.name]!s}" for p in k.params if not p.is_array]
    lines += [array_line(p.name, args[p.name]) for p in k.params if p.is_array]
    codes = getattr(result, "stop_codes", None)
    if codes is not None and np.any(codes != 0):
        stopped = np.asarray(codes)[np.asarray(codes) != 0]
        distinct = ", ".join(str(int(c)) for c in np.unique(stopped))
        lines.append(f"stop: {stopped.size} of {np.asarray(codes).size} threads stopped "
                     f"(codes {distinct})")
    return lines


def describe_program_run(p: Program, result: Any) -> list[str]:
    """The report of a program run (CLI-11): the program's output lines, then one line per
    declared variable in declaration order (``NAME = VALUE`` for a scalar, the array line
    of CLI-7 for an array, ``NAME: not allocated`` for an array without storage), then
    ``stop: program stopped with code C`` when it executed ``stop``."""
    lines = list(result.output)
    for d in p.decls:
        name = d.var.name
        value = result.values.get(name)
        if isinstance(d.var.type, ArrayType):
            lines.append(array_line(name, value) if isinstance(value, np.ndarray)
                         else f"{name}: not allocated")
        else:
            lines.append(f"{name} = {value!s}")
    if result.stop_code is not None:
        lines.append(f"stop: program stopped with code {result.stop_code}")
    return lines


__all__ = ["SHOWN_VALUES", "array_line", "describe_program_run", "describe_run"]
