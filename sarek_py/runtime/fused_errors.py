"""A fused kernel's run-time errors in the user's names (specs/frontend.md FE-90 … FE-92).

A pipeline or ``fuse_launches`` runs kernels the user never wrote: ``scale_shift``, whose
parameters are ``p_x`` (scale's ``x``) and ``c_w`` (shift's ``w``). An out-of-bounds
access, a race, a launch refused or a stop found while such a kernel runs is reported by
the interpreter, the fault buffers or the launch checks with the fused kernel's names.
:func:`in_user_terms` rewrites the error, in place (its type, location and traceback
stay), with the user's kernels and parameters
(:func:`~sarek_py.fusion.epilogue.user_names.user_terms`) and, for an array argument, the
name of the user's variable that holds it, found among the locals of the first caller
outside sarek_py (the frame of the ``with pipeline()`` block, of ``p.replay()`` …).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from types import FrameType
from typing import Any

import numpy as np

from sarek_py.fusion.epilogue.user_names import user_terms
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Kernel

#: how many frames above the error are searched for the user's variables
_DEPTH = 40


def user_variables(args: Mapping[str, Any]) -> dict[str, str]:
    """For each array argument of ``args`` (a parameter name to its value), the name of a
    local variable that holds that very object in the first frame of the call stack that
    is not sarek_py's own; none when no such frame or variable exists."""
    wanted = {id(v): n for n, v in args.items()
              if not isinstance(v, np.generic | bool | int | float) and v is not None}
    if not wanted:
        return {}
    frame: FrameType | None = sys._getframe(1)
    for _ in range(_DEPTH):
        if frame is None:
            return {}
        module = frame.f_globals.get("__name__", "")
        if not (module == "sarek_py" or module.startswith("sarek_py.")):
            break
        frame = frame.f_back
    else:
        return {}
    if frame is None:
        return {}
    out: dict[str, str] = {}
    for var, value in frame.f_locals.items():
        param = wanted.get(id(value))
        if param is not None and not var.startswith("_"):
            out.setdefault(param, var)
    return out


def in_user_terms(err: SarekError, kernels: Iterable[Kernel],
                  args: Mapping[str, Any] | None = None) -> SarekError:
    """``err`` rewritten in place in the user's names when it is about one of ``kernels``
    that is a fused kernel (its name is in the message, FE-90); ``args``: that launch's
    arguments by parameter name, to name the user's arrays (FE-91)."""
    for k in kernels:
        if k.requires is None or not k.requires.steps:
            continue
        if not re.search(rf"(?<![A-Za-z0-9_]){re.escape(k.name)}(?![A-Za-z0-9_])",
                         err.message):
            continue
        message = user_terms(err.message, k, user_variables(args) if args else None)
        if message != err.message:
            err.message = message
            err.args = (message, *err.args[1:])
        break
    return err


def speaking_user_terms(run: Any) -> Any:
    """``run`` (a ``run_kernel(kernel, args, ...)``: the interpreter's) whose errors about
    a fused kernel are in the user's names (FE-90), as a backend's ``run_kernel`` is."""

    def run_kernel(kernel: Kernel, args: Mapping[str, Any], *rest: Any, **kw: Any) -> Any:
        try:
            return run(kernel, args, *rest, **kw)
        except SarekError as err:
            in_user_terms(err, (kernel,), args)
            raise

    return run_kernel


__all__ = ["in_user_terms", "speaking_user_terms", "user_variables"]
