"""One parameter for the scalars a fused launch binds to one value (specs/frontend.md
FE-97 .. FE-99).

A chain ``scale -> shift -> relu`` launched with the user's ``n`` three times fuses into a
kernel with three parameters ``p_p_n``, ``p_c_n`` and ``c_n`` and three nested tests
``if i < p_p_n … if i2 < p_c_n … if i3 < c_n``: the C compilers cannot see that they are
one test, and a vectorized loop then carries three masks. At a launch whose arguments are
concrete, :func:`merge_equal_scalars` makes the integer and bool parameters of one type
bound to one value a single parameter (named as the user named them, ``n``, when they all
had that name and it is free): the kernel then tests ``i < n`` three times, which the
compilers fold into one. Floats are left alone. The parameters the fusion's launch
conditions name (``ep_tc``, declared thread counts, EF-23's ``within``) are never merged:
the launch check finds the inserted consumer bodies by them (LEG-14). Which arguments may
merge is the caller's (the plan cache merges only scalars its key holds by value, FE-98).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from sarek_py.fusion.epilogue.user_names import origin
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.nodes import Kernel, Var
from sarek_py.ir.requires import FusionRequires, FusionStep
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import map_node, var_names


@attrs.frozen
class MergeNote:
    """Which parameters of ``kernel`` became one (``merged``: the fused kernel's names
    before, ``users``: whose each was, ``name``: the parameter now, ``value``)."""

    kernel: str
    name: str
    merged: tuple[str, ...]
    users: tuple[str, ...]
    value: str

    def __str__(self) -> str:
        return (f"{self.kernel}: {', '.join(self.users)} are one parameter {self.name} "
                f"(all bound to {self.value}; FE-97)")


def _int_value(a: Any) -> int | bool | None:
    """The value of a concrete integer or bool argument, else ``None``."""
    if isinstance(a, bool | np.bool_):
        return bool(a)
    if isinstance(a, int | np.integer):
        return int(a)
    return None


def _fixed_names(k: Kernel) -> set[str]:
    """The parameters the kernel's launch conditions name that are never merged: EF-23's
    ``within``, declared thread counts, and the count of a step whose own names' prefix
    is not known (LEG-13, LEG-14)."""
    req = k.requires
    if req is None:
        return set()
    out = set(req.within)
    for s in req.steps:
        if isinstance(s, FusionStep):
            if s.own_prefix() is None:
                out.add(s.count)
            out.update(t for t in (s.threads or ()) if isinstance(t, str))
    return out


def _counts(k: Kernel) -> set[str]:
    req = k.requires
    return set() if req is None else {s.count for s in req.steps if isinstance(s, FusionStep)}


def _user(name: str, k: Kernel) -> str:
    """Whose ``name`` is, in the user's words (``shift's n``, ``relu's thread count``)."""
    for s in () if k.requires is None else k.requires.steps:
        if isinstance(s, FusionStep) and s.count == name:
            return f"{s.consumer}'s thread count"
    where = origin(name, k.requires)
    return name if where is None else f"{where[0]}'s {where[1]}"


def _base(name: str) -> str:
    while name[:2] in ("p_", "c_") and len(name) > 2:
        name = name[2:]
    return name


def merge_equal_scalars(lc: Launch, mergeable: Callable[[Any], bool]
                        ) -> tuple[Launch, list[MergeNote]]:
    """``lc`` with each group of its integer or bool scalar parameters of one type bound to
    one value (arguments for which ``mergeable`` says yes) made one parameter (FE-97);
    and what was merged. A launch of a kernel that is not fused, or with a stop or
    scratch buffers, is returned as it is."""
    k = lc.kernel
    if k.requires is None or lc.scratch or lc.stop_status is not None \
            or len(lc.args) != len(k.params):
        return lc, []
    fixed = _fixed_names(k)
    counts = _counts(k)
    groups: dict[tuple[Any, int | bool], list[int]] = {}
    for j, (p, a) in enumerate(zip(k.params, lc.args, strict=True)):
        if p.is_array or p.name in fixed or not isinstance(p.type, Scalar) \
                or not (p.type.is_int or p.type is Scalar.BOOL):
            continue
        v = _int_value(a)
        if v is None or not mergeable(a):
            continue
        groups.setdefault((p.type, v), []).append(j)
    merged = [g for g in groups.values() if len(g) > 1]
    if not merged:
        return lc, []
    taken = var_names(k)
    into: dict[int, Var] = {}
    renamed: dict[str, str] = {}
    drop: set[int] = set()
    notes = []
    for g in merged:
        # the user's parameter first (``n`` rather than the fusion's ``ep_tc``)
        g = sorted(g, key=lambda j: k.params[j].name in counts)
        first = k.params[g[0]]
        names = [k.params[j].name for j in g]
        bases = {_base(n) for n in names if n not in counts}
        base = bases.pop() if len(bases) == 1 else None
        name = base if base is not None and base not in taken else first.name
        taken.add(name)
        keep = attrs.evolve(first, name=name)
        for j in g:
            into[k.params[j].id] = keep
            renamed[k.params[j].name] = name
        drop.update(g[1:])
        notes.append(MergeNote(k.name, name, tuple(names),
                               tuple(_user(n, k) for n in names),
                               str(_int_value(lc.args[g[0]]))))

    def var(v: Var) -> Var:
        return into.get(v.id, v)

    params = tuple(var(p) for j, p in enumerate(k.params) if j not in drop)
    body = map_node(k.body, var=var)
    ranges = tuple(map_node(r, var=var) for r in k.ranges)
    new = attrs.evolve(k, params=params, body=body, ranges=ranges,
                       requires=_requires(k.requires, renamed))
    args = tuple(a for j, a in enumerate(lc.args) if j not in drop)
    return attrs.evolve(lc, kernel=new, args=args), notes


def _requires(req: FusionRequires | None, renamed: dict[str, str]
              ) -> FusionRequires | None:
    """The launch conditions with each merged step count renamed; the step keeps the
    prefix of its own names (``ep_t``), which its count no longer says (LEG-14)."""
    if req is None:
        return None
    steps = []
    for s in req.steps:
        if isinstance(s, FusionStep) and s.count in renamed:
            own = s.own_prefix()
            s = attrs.evolve(s, count=renamed[s.count], prefix=None)
            if s.own_prefix() != own:  # the count's name no longer says it
                s = attrs.evolve(s, prefix=own)
        steps.append(s)
    return attrs.evolve(req, steps=tuple(steps))


def merge_launches(launches: Sequence[Launch], mergeable: Callable[[Any], bool]
                   ) -> tuple[list[Launch], list[MergeNote]]:
    """:func:`merge_equal_scalars` of each launch."""
    out: list[Launch] = []
    notes: list[MergeNote] = []
    for lc in launches:
        new, n = merge_equal_scalars(lc, mergeable)
        out.append(new)
        notes.extend(n)
    return out, notes


__all__ = ["MergeNote", "merge_equal_scalars", "merge_launches"]
