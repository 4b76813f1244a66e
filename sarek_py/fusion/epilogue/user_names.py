"""The user's names in refusals about fused kernels (specs/fusion-legality.md, LEG-10, LEG-17).

A fused launch is tried again as the producer of the next launch (LEG-10), so a refusal
of that pair is found on the fused kernel, whose names the fusion made: ``p_x`` for the
first producer's ``x``, ``c_y`` for the consumer's ``y``, ``p_c_y`` after two fusions
(EF-5). The user wrote ``x`` and ``y``: :func:`fused_names` keeps, along a chain, the name
each fused variable had in the user's kernels, and :func:`in_user_names` rewrites a
refusal's message with them. The names the fusion adds (``ep_tc``, ``ep_t`` …) are the
fused kernel's own, documented in EF-5, and stay.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.nodes import Kernel
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
