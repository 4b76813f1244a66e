"""What a fused kernel requires of its launch (specs/fusion-legality.md LEG-13 … LEG-16).

A kernel made by epilogue fusion is equal to its producer's launch followed by its
consumer's launch only for some launches: the producer must store every element of the
consumer's domain exactly once, and the buffers bound must be those the fusion was proved
for. :class:`FusionRequires` is that contract, attached to the fused kernel
(``Kernel.requires``), printed in its text form (``requires fused(...) same(...)``, TXT)
and checked by every launch path through :func:`check_requires` against the actual
arguments before the kernel runs.

This module holds the records only; :mod:`sarek_py.ir.requires_check` checks a launch
against them, and the parser and printer read and write the ``requires`` clause.
"""

from __future__ import annotations

from typing import Any

import attrs

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
    #: the intermediate's stores were dropped (specs/epilogue-fusion.md EF-30 .. EF-34):
    #: ``array`` is no longer a parameter; each launch proves the step again with a ghost
    #: array stored where the dropped stores were (``fused(P, C, dead p_t, ep_tc)``)
    dead: bool = attrs.field(default=False, kw_only=True)
    #: the prefix of the fusion's own names of this step (``p_`` of ``p_ep_t``), given
    #: when ``count`` is not named ``<prefix>ep_tc``: a pipeline made the count one
    #: parameter with the user's equal ``n`` (specs/frontend.md FE-97)
    prefix: str | None = attrs.field(default=None, kw_only=True)

    def own_prefix(self) -> str | None:
        """The prefix of the step's own names (``ep_t``, ``ep_v``, ``ep_tc``), ``None``
        when it is not known (a hand-written record)."""
        if self.prefix is not None:
            return self.prefix
        return self.count[: -len("ep_tc")] if self.count.endswith("ep_tc") else None

    def renamed(self, prefix: str) -> FusionStep:
        """The step seen from a kernel that renamed every parameter with ``prefix``."""
        th = None if self.threads is None else tuple(
            prefix + t if isinstance(t, str) else t for t in self.threads)
        return FusionStep(self.producer, self.consumer, prefix + self.array,
                          prefix + self.count, th, dead=self.dead,  # type: ignore[arg-type]
                          prefix=None if self.prefix is None else prefix + self.prefix)


@attrs.frozen
class ThreadStep:
    """One thread-wise fusion the kernel results from (LEG-30): each thread runs the
    producer's body, then the consumer's, on the launch shape both had. Proved for every
    launch shape (with the kernel's ``range(...)`` conditions over its scalar arguments),
    so a launch only checks its buffers (LEG-15), those conditions (LCH-25) and that it
    has no more dimensions than ``dims`` (the proof's)."""

    producer: str
    consumer: str
    #: the launch dimensions the proof took: axes from ``dims`` on have one thread
    dims: int = 3

    def renamed(self, prefix: str) -> ThreadStep:
        return self


Step = FusionStep | ThreadStep


def _classes(v: Any) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(c) for c in v)


@attrs.frozen
class FusionRequires:
    """The launch conditions of a fused kernel (LEG-13).

    ``steps``: the fusions it results from, outermost first (a chain has several);
    ``same``: groups of array parameters that must be bound to one buffer (the same
    memory range, shape, strides and dtype). Every two array parameters that are not in
    one group must be bound to buffers that do not overlap at all."""

    steps: tuple[Step, ...]
    same: tuple[tuple[str, ...], ...] = attrs.field(default=(), converter=_classes)
    #: the block size every launch must have: a consumer's element was read for it
    #: (``block_idx_x * 256 + thread_idx_x``, or ``thread_idx_x`` on one block, EF-23)
    block: int | None = None
    #: integer parameters (consumers' thread counts) that must be at most ``block``: a
    #: consumer's element ``thread_idx_x`` was read for a launch of one block (EF-23)
    within: tuple[str, ...] = ()

    def group_of(self, name: str) -> tuple[str, ...]:
        """The group of array parameter ``name`` (itself alone when in none)."""
        return next((g for g in self.same if name in g), (name,))

    def renamed(self, prefix: str) -> FusionRequires:
        return FusionRequires(tuple(s.renamed(prefix) for s in self.steps),
                              tuple(tuple(prefix + n for n in g) for g in self.same),
                              self.block, tuple(prefix + n for n in self.within))


    @property
    def threadwise(self) -> bool:
        """Whether every step is thread-wise (LEG-30): such a kernel may be launched with
        a grid and block shape."""
        return all(isinstance(s, ThreadStep) for s in self.steps)


__all__ = ["Count", "FusionRequires", "FusionStep", "Step", "ThreadStep"]
