"""The launch check of a fused kernel's conditions (specs/fusion-legality.md LEG-14).

The checker itself needs the fusion's legality analysis, a floor above this one: the
fusion package registers it (:func:`register_checker`) when it is imported, which
importing any part of ``sarek_py`` does. A kernel that carries conditions while no
checker is registered is refused, never run unchecked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Kernel

Checker = Callable[[Kernel, Mapping[str, Any], int, int], None]
_CHECKERS: list[Checker] = []


def register_checker(check: Checker) -> None:
    """Install the function that checks a launch against ``Kernel.requires``."""
    _CHECKERS[:] = [check]


def check_requires(kernel: Kernel, args: Mapping[str, Any], threads: int, block: int,
                   shaped: object = None) -> None:
    """Refuse (raise a :class:`SarekError` naming the rule) a launch of ``kernel`` with
    ``threads`` threads in blocks of ``block`` and arguments ``args`` (numpy arrays or
    device buffers, scalars) that does not meet the kernel's launch conditions (LEG-14);
    ``shaped``: the grid or block shape of a launch in several dimensions, which a fused
    kernel with conditions is refused (the conditions are proved for 1-D launches)."""
    if kernel.requires is None:
        return
    if shaped is not None:
        raise SarekError(f"[LEG-14] kernel {kernel.name} is a fused kernel with launch "
                         "conditions: launch it in one dimension (threads and block), "
                         f"not with the grid or block shape {shaped}")
    if not _CHECKERS:
        raise SarekError(f"kernel {kernel.name} is a fused kernel with launch conditions, "
                         "and no checker of them is loaded (import sarek_py.fusion)")
    _CHECKERS[0](kernel, args, threads, block)


__all__ = ["Checker", "check_requires", "register_checker"]
