"""AFF-16: soundness of the Fourier-Motzkin analysis against isl (exact integer sets).

Whenever our analysis says "empty", "implies" or gives a bound, isl must agree: zero
disagreements. The completeness rate (facts isl proves that we prove too) is measured and
must stay above 95 % on constant-offset stencil systems. ``SAREK_FUZZ=1`` runs ten times
more systems (``make fuzz``).
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence

import islpy as isl
import pytest

from sarek_py.analysis.affine.queries import (
    AffineForm,
    Constraint,
    Dnf,
    bounds_of,
    ge0,
    implies,
    is_empty,
)
from sarek_py.ir.nodes import Ref, var
from sarek_py.ir.types import Scalar

ATOMS = [Ref(var(f"x{k}", Scalar.I32)) for k in range(4)]
NAMES = {a: f"x{k}" for k, a in enumerate(ATOMS)}


def isl_form(f: AffineForm) -> str:
    parts = [f"{int(c)}*{NAMES[a]}" for a, c in f.terms]
    parts.append(str(int(f.const)))
    return " + ".join(parts)


def isl_conj(alt: Sequence[Constraint]) -> str:
    return " and ".join(f"{isl_form(c.form)} >= 0" for c in alt) or "0 = 0"


def isl_set(d: Dnf, nvars: int) -> isl.Set:
    dims = ", ".join(f"x{k}" for k in range(nvars))
    if d.is_false:
        return isl.Set(f"{{ [{dims}] : 1 = 0 }}")
    body = " or ".join(f"({isl_conj(sorted(alt, key=str))})" for alt in d.alts)
    return isl.Set(f"{{ [{dims}] : {body} }}")


def rand_form(rng: random.Random, nvars: int, coef: int = 3, const: int = 6) -> AffineForm:
    return AffineForm.make({ATOMS[k]: rng.randint(-coef, coef) for k in range(nvars)},
                           rng.randint(-const, const))


def rand_conj(rng: random.Random, nvars: int, lo: int, hi: int) -> frozenset[Constraint]:
    out: set[Constraint] = set()
    for _ in range(rng.randint(lo, hi)):
        c = ge0(rand_form(rng, nvars))
        if isinstance(c, Constraint):
            out.add(c)
    return frozenset(out)


def rand_dnf(rng: random.Random, nvars: int) -> Dnf:
    alts = [rand_conj(rng, nvars, 1, 2) for _ in range(rng.randint(1, 2))]
    return Dnf(frozenset(alts)) if all(alts) else Dnf.true()


class Tally:
    def __init__(self) -> None:
        self.isl_proved = 0
        self.we_proved = 0
        self.disagreements: list[str] = []

    def see(self, ours: bool, theirs: bool, what: str) -> None:
        if ours and not theirs:
            self.disagreements.append(what)
        self.isl_proved += theirs
        self.we_proved += ours and theirs

    @property
    def rate(self) -> float:
        return self.we_proved / self.isl_proved if self.isl_proved else 1.0


def check_random(seed: int, count: int) -> tuple[Tally, Tally, Tally]:
    rng = random.Random(seed)
    empt, impl, bnds = Tally(), Tally(), Tally()
    for _ in range(count):
        nvars = rng.randint(2, 3)
        kind = rng.random()
        a = rand_conj(rng, nvars, 2, 5)
        da = Dnf(frozenset({a}))
        if kind < 0.4:
            empt.see(is_empty(a), isl_set(da, nvars).is_empty(), f"empty {da}")
        elif kind < 0.8:
            b = rand_dnf(rng, nvars)
            if rng.random() < 0.4:  # a disjunctive assumption
                more = da.or_(Dnf(frozenset({rand_conj(rng, nvars, 2, 4)})))
                assert more is not None
                da = more
            impl.see(implies(da, b), isl_set(da, nvars).is_subset(isl_set(b, nvars)),
                     f"{da} => {b}")
        else:
            f = rand_form(rng, nvars)
            lo, hi = bounds_of(f, da)
            for bound, cons in ((lo, None if lo is None else f - lo),
                                (hi, None if hi is None else hi - f)):
                if cons is None:
                    continue
                g = ge0(cons)
                goal = Dnf.of(g)
                bnds.see(True, isl_set(da, nvars).is_subset(isl_set(goal, nvars)),
                         f"{da} => {f} bound {bound}")
    return empt, impl, bnds


def check_stencils(seed: int, count: int) -> Tally:
    """Consumer path a <= x0 <= x2 - b, c <= x1 <= x3 - d (indices x0, x1, extents x2, x3);
    goal: the producer's domain p <= x0 + di <= x2 - q, r <= x1 + dj <= x3 - s."""
    rng = random.Random(seed)
    tally = Tally()
    i, j, n, m = (AffineForm.of_atom(a) for a in ATOMS)
    for _ in range(count):
        path_cs: list[Constraint | bool] = []
        goal_cs: list[Constraint | bool] = []
        for x, ext in ((i, n), (j, m)):
            # producer p <= x + off <= ext - q; consumer a <= x <= ext - b, near the edge
            p, q, off = rng.randint(0, 2), rng.randint(0, 2), rng.randint(-2, 2)
            a = max(0, p - off + rng.randint(-1, 1))
            b = max(0, q + off + rng.randint(-1, 1))
            path_cs += [ge0(x - a), ge0(ext - b - x)]
            goal_cs += [ge0(x + off - p), ge0(ext - q - (x + off))]
        if rng.random() < 0.3:  # an extra test of the consumer
            path_cs.append(ge0(i - j - rng.randint(-2, 2)))
        path, goal = Dnf.of(*path_cs), Dnf.of(*goal_cs)
        tally.see(implies(path, goal), isl_set(path, 4).is_subset(isl_set(goal, 4)),
                  f"{path} => {goal}")
    return tally


FUZZ = 10 if os.environ.get("SAREK_FUZZ") else 1


def _report(name: str, t: Tally) -> None:
    print(f"{name}: isl proved {t.isl_proved}, we proved {t.we_proved} "
          f"({100 * t.rate:.1f} %), disagreements {len(t.disagreements)}")


def test_aff16_soundness_random_systems() -> None:
    """AFF-16: 1,600 random systems (emptiness, implication, bounds): zero disagreements."""
    empt, impl, bnds = check_random(seed=16, count=1600)
    for name, t in (("emptiness", empt), ("implication", impl), ("bounds", bnds)):
        _report(name, t)
        assert t.disagreements == [], t.disagreements[:3]
    assert empt.isl_proved > 50 and impl.isl_proved > 50  # the generator makes real cases
    assert bnds.we_proved > 50


def test_aff16_stencil_completeness() -> None:
    """AFF-16: 400 constant-offset stencil systems: sound, and > 95 % complete."""
    t = check_stencils(seed=17, count=400)
    _report("stencil", t)
    assert t.disagreements == []
    assert t.isl_proved > 40
    assert t.rate > 0.95


@pytest.mark.slow
def test_aff16_soundness_fuzz() -> None:
    """AFF-16 at scale (make fuzz): 20,000 random and 4,000 stencil systems per 10x."""
    for seed in range(FUZZ):
        empt, impl, bnds = check_random(seed=1000 + seed, count=2000)
        for t in (empt, impl, bnds):
            assert t.disagreements == [], t.disagreements[:3]
        st = check_stencils(seed=2000 + seed, count=400)
        assert st.disagreements == [] and st.rate > 0.95
