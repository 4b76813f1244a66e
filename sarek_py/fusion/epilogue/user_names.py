"""The user's names in refusals about fused kernels (specs/fusion-legality.md, LEG-10, LEG-17).

A fused launch is tried again as the producer of the next launch (LEG-10), so a refusal
of that pair is found on the fused kernel, whose names the fusion made: ``p_x`` for the
first producer's ``x``, ``c_y`` for the consumer's ``y``, ``p_c_y`` after two fusions
(EF-5). The user wrote ``x`` and ``y``: :func:`fused_names` keeps, along a chain, the name
each fused variable had in the user's kernels, and :func:`in_user_names` rewrites a
refusal's message with them. The names the fusion adds (``ep_tc``, ``ep_t`` …) are the
fused kernel's own, documented in EF-5, and stay. :func:`user_terms` does the same for a
fused kernel's run-time errors (an out-of-bounds access, a launch refused, FE-90), from the
kernel alone: its steps say whose each ``p_``/``c_`` name is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.requires import FusionRequires
from sarek_py.ir.visit import var_names

_WORD = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def fused_names(producer: Kernel, consumer: Kernel,
                prior: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's name of each variable of ``fuse(producer, consumer)``: ``p_n`` is the
    producer's ``n`` (itself named ``prior[n]`` when the producer is a fused kernel),
    ``c_n`` the consumer's ``n``."""
    prior = prior or {}
    out: dict[str, str] = {}
    for n in var_names(producer):
        out["p_" + n] = prior.get(n, n)
    for n in var_names(consumer):
        out.setdefault("c_" + n, n)
    return out


def in_user_names(r: FusionRefused, names: Mapping[str, str],
                  keep: frozenset[str] = frozenset()) -> FusionRefused:
    """``r`` with every fused name of ``names`` in its message replaced by the user's
    name; the words of ``keep`` (the other kernel's own names) are left alone."""
    if not names:
        return r

    def sub(m: re.Match[str]) -> str:
        w = m.group(0)
        return w if w in keep else names.get(w, w)

    message = _WORD.sub(sub, r.reason)
    if message == r.reason:
        return r
    out = type(r)(r.rule, message, r.loc, options=r.options)
    out.source = r.source
    return out


def origin(name: str, requires: FusionRequires | None) -> tuple[str, str] | None:
    """The user's kernel and variable that the fused kernel's variable ``name`` is
    (specs/frontend.md FE-90): ``c_n`` is the outermost step's consumer's ``n``, ``p_n``
    the producer's ``n`` — found again in the producer's own steps when the producer is
    itself fused (a chain is fused left to right: a consumer is never a fused kernel,
    EF-15). ``None`` for a name the fusion made (``ep_tc`` …) or a kernel not fused."""
    steps = () if requires is None else requires.steps
    for i, step in enumerate(steps):
        if name.startswith("c_") and len(name) > 2:
            return step.consumer, name[2:]
        if not name.startswith("p_") or len(name) <= 2:
            return None
        name = name[2:]
        if i + 1 == len(steps):
            return step.producer, name
    return None


def chain(requires: FusionRequires) -> tuple[str, ...]:
    """The user's kernels a fused kernel runs, in order (``scale``, ``shift``, ``relu``)."""
    steps = requires.steps
    return (steps[-1].producer, *(s.consumer for s in reversed(steps))) if steps else ()


_NAMED = re.compile(r"(?:\b(?:array|parameter|argument|scalar) )?'?\b([pc]_[A-Za-z0-9_]+)\b'?")


def user_terms(message: str, kernel: Kernel,
               arrays: Mapping[str, str] | None = None) -> str:
    """``message``, an error of a launch of ``kernel``, in the user's terms when
    ``kernel`` is a fused kernel (FE-90): ``kernel scale_shift`` becomes ``fused kernel
    scale_shift (scale -> shift)``, a fused variable ``c_w`` (``array 'c_w'``) becomes
    ``shift's parameter w``, followed by ``(the array y)`` when ``arrays`` names the
    user's array bound to it. Other kernels' messages are returned as they are."""
    req = kernel.requires
    if req is None or not req.steps:
        return message
    arrays = arrays or {}
    params = {p.name for p in kernel.params}
    own = var_names(kernel)  # a host variable named c_w is not the kernel's

    def sub(m: re.Match[str]) -> str:
        fused = m.group(1)
        where = origin(fused, req) if fused in own else None
        if where is None:
            return m.group(0)
        k, n = where
        role = "parameter" if fused in params else "variable"
        held = arrays.get(fused)
        return f"{k}'s {role} {n}" + (f" (the array {held})" if held else "")

    text = _NAMED.sub(sub, message)
    return re.sub(rf"\bkernel '?{re.escape(kernel.name)}'?(?![A-Za-z0-9_])",
                  f"fused kernel {kernel.name} ({' -> '.join(chain(req))})", text)
