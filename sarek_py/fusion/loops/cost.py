"""The cost model of producer-consumer fusion (specs/loop-fusion.md, LF-13, LF-60..LF-69).

Two rules decide whether a proved fusion is made:

* the prediction (LF-62): with a backend named (``opt --backend``, default the default
  backend) that has a row in the cost table (:mod:`~sarek_py.fusion.loops.cost_table`,
  measured by ``benchmarks/calibrate.py``), the fused loop's predicted time
  (:mod:`~sarek_py.fusion.loops.predict`) must be below the producer's and the consumer's
  unfused; :class:`Prediction` holds both;
* the threshold (LF-13): without a backend, with a backend the table has no row for
  (said: "uncalibrated"), or when the user gives ``--fusion-threshold`` (LF-63), the
  extra operations -- the producer's expression, with the bodies of the helper functions
  it calls, times the consumer's reads beyond the first -- must be at most ``threshold``
  (default 64) per byte of memory traffic removed (a store and a load per element).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Binary,
    Call,
    Cast,
    Cond,
    Expr,
    HelperFunc,
    Intrinsic,
    Stmt,
    Unary,
)
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_exprs

#: operations per byte removed above which fusion does not pay (the seed's 64)
DEFAULT_THRESHOLD = 64.0


def operations(node: Expr | Stmt, helpers: Mapping[str, HelperFunc],
               _stack: tuple[str, ...] = ()) -> int:
    """Arithmetic operations in ``node``: operators, casts, conditionals, math intrinsics,
    and for each call the operations of the callee's body (LF-13)."""
    total = 0
    for e in iter_exprs(node):
        match e:
            case Binary() | Unary() | Cast() | Cond():
                total += 1
            case Intrinsic(name=n) if n not in THREAD_INTRINSICS:
                total += 1
            case Call(func=f):
                if f in helpers and f not in _stack:
                    total += operations(helpers[f].body, helpers, (*_stack, f))
    return total


@attrs.frozen
class CostItem:
    """One intermediate array: its producer expression's operations, the consumer's reads,
    its element type."""

    name: str
    ops: int
    reads: int
    elem: Scalar

    @property
    def extra_ops(self) -> int:
        return self.ops * max(self.reads - 1, 0)

    @property
    def bytes_removed(self) -> int:
        return 2 * self.elem.dtype.itemsize


#: the predicted gain below which fused and unfused are a tie and the pair is not fused
#: (LF-121): the sweep's smallest gap told apart (benchmarks/cost_sweep.py NOISE_FLOOR)
TIE = 0.02


@attrs.frozen
class Prediction:
    """The predicted time of one host iteration of the pair on ``backend`` (LF-62): per
    point of the consumer's domain (ns) and in launches; ``points`` is the domain's size
    when the bounds are literals or declared values no statement changes (then the totals
    decide), else None (the per-point times decide: the limit of a large domain);
    ``split``: a pair fused as the interior nest and the boundary strips (LF-85), the
    points of each piece, the interior first (LF-101), empty when they are not known
    (then ``fused_ns`` is the interior nest's per point); None for one fused loop."""

    backend: str
    fused_ns: float
    unfused_ns: float
    fused_launches: int
    unfused_launches: int
    launch_ns: float
    points: int | None = None
    split: tuple[int, ...] | None = None

    def total(self, fused: bool) -> float:
        """ns per host iteration when ``points`` is known, else ns per point."""
        if self.points is None:
            return self.fused_ns if fused else self.unfused_ns
        n = self.fused_launches if fused else self.unfused_launches
        return n * self.launch_ns + self.points * (self.fused_ns if fused else self.unfused_ns)

    @property
    def faster(self) -> bool:
        """Fused predicted faster by more than :data:`TIE` of the unfused time (LF-62,
        LF-121): a smaller predicted gain is a tie, and a tie keeps the program as written."""
        return self.total(True) < (1.0 - TIE) * self.total(False)

    @property
    def tie(self) -> bool:
        """Fused predicted faster, but by no more than :data:`TIE` (LF-121)."""
        return not self.faster and self.total(True) < self.total(False)

    @property
    def ratio(self) -> float:
        u = self.total(False)
        return self.total(True) / u if u > 0 else float("inf")

    def __str__(self) -> str:
        if self.points is None:
            what = (f"fused {self.fused_ns:.3g} ns per point against {self.unfused_ns:.3g} "
                    f"ns unfused")
        else:
            what = (f"fused {self.total(True) / 1e3:.4g} µs against "
                    f"{self.total(False) / 1e3:.4g} µs unfused per iteration of "
                    f"{self.points} points")
        launches = "launch" if self.fused_launches == 1 else "launches"
        pieces = ""
        if self.split:  # LF-103: what the split's figure is made of
            pieces = (f"; interior {self.split[0]} points, strips "
                      + " + ".join(str(n) for n in self.split[1:]))
        elif self.split is not None:
            pieces = "; per point of the interior nest"
        return (f"predicted on {self.backend}: {what} ({self.ratio:.2f}x; "
                f"{self.fused_launches} {launches} against {self.unfused_launches}{pieces})")


@attrs.frozen
class CostDecision:
    """Whether the fusion pays: the prediction on the backend when there is one and the
    user gave no threshold (LF-62), else extra operations against bytes removed, per
    element (LF-13); ``uncalibrated`` names a backend the cost table has no row for
    (LF-64)."""

    extra_ops: int
    bytes_removed: int
    threshold: float
    prediction: Prediction | None = None
    uncalibrated: str | None = None
    threshold_given: bool = True

    @property
    def ratio(self) -> float:
        return self.extra_ops / self.bytes_removed if self.bytes_removed else float("inf")

    @property
    def by_prediction(self) -> bool:
        return self.prediction is not None and not self.threshold_given

    @property
    def pays(self) -> bool:
        if self.prediction is not None and not self.threshold_given:
            return self.prediction.faster
        return self.extra_ops <= self.threshold * self.bytes_removed

    def refusal(self) -> str:
        """The LF-13 refusal's text (LF-65)."""
        if self.prediction is not None and not self.threshold_given:
            p = self.prediction
            tie = (f"; a gain under {TIE:.0%} is a tie, the loops kept as written"
                   if p.tie else "")
            return (f"fusion does not pay: {p}{tie}; --fusion-threshold OPS decides by "
                    "operations per byte instead")
        return f"fusion does not pay: {self}"

    def __str__(self) -> str:
        ops = (f"{self.extra_ops} extra operations for {self.bytes_removed} bytes removed "
               f"({self.ratio:.2f} per byte, threshold {self.threshold:g})")
        if self.prediction is not None:
            if not self.threshold_given:
                return str(self.prediction)
            return f"{ops}, decided by --fusion-threshold; {self.prediction}"
        if self.uncalibrated is not None:
            return (f"{ops}; backend {self.uncalibrated} uncalibrated (no row in the cost "
                    f"table: benchmarks/calibrate.py --backend {self.uncalibrated} --write), "
                    "decided by the threshold")
        return ops


def decide(items: Iterable[CostItem], threshold: float | None = None) -> CostDecision:
    """The LF-13 decision for all intermediate arrays of one fusion together; ``None``:
    the default threshold, not given by the user."""
    its = list(items)
    return CostDecision(sum(i.extra_ops for i in its), sum(i.bytes_removed for i in its),
                        DEFAULT_THRESHOLD if threshold is None else threshold,
                        threshold_given=threshold is not None)
