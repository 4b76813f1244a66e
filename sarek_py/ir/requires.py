"""What a fused kernel requires of its launch (specs/fusion-legality.md LEG-13 … LEG-16).

A kernel made by epilogue fusion is equal to its producer's launch followed by its
consumer's launch only for some launches: the producer must store every element of the
consumer's domain exactly once, and the buffers bound must be those the fusion was proved
for. :class:`FusionRequires` is that contract, attached to the fused kernel
(``Kernel.requires``), printed in its text form (``requires fused(...) same(...)``, TXT)
and checked by every launch path through :func:`check_requires` against the actual
arguments before the kernel runs.

The checker itself needs the fusion's legality analysis, a floor above this one: the
fusion package registers it (:func:`register_checker`) when it is imported, which
importing any part of ``sarek_py`` does. A kernel that carries conditions while no
checker is registered is refused, never run unchecked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from sarek_py.ir.nodes import Kernel

Count = int | str
"""A declared thread count: a number, or the name of an integer scalar parameter of the
fused kernel whose argument gives it."""


def _counts(v: tuple[Count, Count] | None) -> tuple[Count, Count] | None:
    return None if v is None else (v[0], v[1])


@attrs.frozen
class FusionStep:
    """One epilogue fusion the kernel results from (LEG-13).

    ``producer``/``consumer``: the kernels' names, for messages; ``array``: the
    intermediate, as a parameter of the fused kernel (``p_y``); ``count``: the scalar
    parameter that receives the consumer's thread count (``ep_tc``); ``threads``: the
    thread counts of the producer and of the consumer the fusion was proved for, when they
    were given to ``fuse(..., threads=(tp, tc))`` (the launch must use them), else
    ``None`` (the launch's own counts are checked, LEG-14)."""

    producer: str
    consumer: str
    array: str
    count: str
    threads: tuple[Count, Count] | None = attrs.field(default=None, converter=_counts)

    def renamed(self, prefix: str) -> FusionStep:
        """The step seen from a kernel that renamed every parameter with ``prefix``."""
        th = None if self.threads is None else tuple(
            prefix + t if isinstance(t, str) else t for t in self.threads)
        return FusionStep(self.producer, self.consumer, prefix + self.array,
                          prefix + self.count, th)  # type: ignore[arg-type]


def _classes(v: Any) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(c) for c in v)


@attrs.frozen
class FusionRequires:
    """The launch conditions of a fused kernel (LEG-13).

    ``steps``: the fusions it results from, outermost first (a chain has several);
    ``same``: groups of array parameters that must be bound to one buffer (the same
    memory range, shape, strides and dtype). Every two array parameters that are not in
    one group must be bound to buffers that do not overlap at all."""

    steps: tuple[FusionStep, ...]
    same: tuple[tuple[str, ...], ...] = attrs.field(default=(), converter=_classes)

    def group_of(self, name: str) -> tuple[str, ...]:
        """The group of array parameter ``name`` (itself alone when in none)."""
        return next((g for g in self.same if name in g), (name,))

    def renamed(self, prefix: str) -> FusionRequires:
        return FusionRequires(tuple(s.renamed(prefix) for s in self.steps),
                              tuple(tuple(prefix + n for n in g) for g in self.same))


Checker = Callable[["Kernel", Mapping[str, Any], int, int], None]
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
    from sarek_py.ir.diagnostics import SarekError  # diagnostics imports the nodes

    if shaped is not None:
        raise SarekError(f"[LEG-14] kernel {kernel.name} is a fused kernel with launch "
                         "conditions: launch it in one dimension (threads and block), "
                         f"not with the grid or block shape {shaped}")
    if not _CHECKERS:
        raise SarekError(f"kernel {kernel.name} is a fused kernel with launch conditions, "
                         "and no checker of them is loaded (import sarek_py.fusion)")
    _CHECKERS[0](kernel, args, threads, block)


# ----------------------------------------------------------------------------- text form


def format_requires(req: FusionRequires) -> str:
    """The ``requires`` clause of a fused kernel's header (TXT, LEG-13)::

        requires fused(scale, relu, p_y, ep_tc) same(p_x, p_w)

    ``fused(P, C, array, count[, tp, tc])`` per step, outermost first; ``same(a, b, …)``
    per group of parameters bound to one buffer."""
    items = []
    for s in req.steps:
        fields = [s.producer, s.consumer, s.array, s.count]
        if s.threads is not None:
            fields += [str(t) for t in s.threads]
        items.append(f"fused({', '.join(fields)})")
    items += [f"same({', '.join(g)})" for g in req.same]
    return "requires " + " ".join(items)


def parse_requires(p: Any, params: tuple[Any, ...]) -> FusionRequires:
    """Read a ``requires`` clause (the word ``requires`` is the next token) with parser
    ``p`` of :mod:`sarek_py.ir.parser`, checking every name against ``params``."""
    from sarek_py.ir.lexer import INT, NAME
    from sarek_py.ir.types import ArrayType, Scalar

    by_name = {v.name: v for v in params}
    p.advance()

    def param(kind: str, context: str) -> str:
        tok = p.expect_name(context)
        v = by_name.get(tok.text)
        ok = v is not None and (isinstance(v.type, ArrayType) if kind == "array"
                                else v.type in (Scalar.I32, Scalar.I64))
        if not ok:
            what = "an array parameter" if kind == "array" else "an integer scalar parameter"
            raise p.error(f"'{tok.text}' is not {what} of this kernel", tok)
        return str(tok.text)

    def count() -> Count:
        if p.at(INT):
            return int(p.advance().value)
        return param("int", "(a thread count: a number or an integer parameter)")

    steps: list[FusionStep] = []
    same: list[tuple[str, ...]] = []
    while p.at(NAME) and p.peek().text in ("fused", "same"):
        word = p.advance()
        p.expect("(", f"after '{word.text}'")
        if word.text == "fused":
            prod = str(p.expect_name("(the producer's name)").text)
            p.expect(",", "after the producer's name")
            cons = str(p.expect_name("(the consumer's name)").text)
            p.expect(",", "after the consumer's name")
            arr = param("array", "(the intermediate array)")
            p.expect(",", "after the intermediate array")
            cnt = param("int", "(the parameter of the consumer's thread count)")
            threads: tuple[Count, Count] | None = None
            if p.accept(","):
                tp = count()
                p.expect(",", "between the two thread counts")
                threads = (tp, count())
            steps.append(FusionStep(prod, cons, arr, cnt, threads))
        else:
            group = [param("array", "(a parameter bound to the same buffer)")]
            while p.accept(","):
                group.append(param("array", "(a parameter bound to the same buffer)"))
            if len(group) < 2 or len(set(group)) != len(group):
                raise p.error("same(...) needs two or more different array parameters", word)
            same.append(tuple(group))
        p.expect(")", f"to close '{word.text}('")
    if not steps:
        raise p.unexpected("'fused(producer, consumer, array, count)' after 'requires'")
    seen = [n for g in same for n in g]
    if len(seen) != len(set(seen)):
        raise p.error("an array parameter is in two same(...) groups")
    return FusionRequires(tuple(steps), tuple(same))
