"""Implication queries per second on stencil-shaped systems (specs/affine.md, AFF-9).

Each query asks whether a consumer read at a constant offset stays in the producer's
domain: ``path ⇒ domain[indices := subscripts]`` with the consumer's path
``lo <= i <= n - 1 - hi`` (and ``j`` likewise over ``m``, in 2-D) and the producer's domain
``0 <= i + di <= n - 1`` (…). The stencils: 3-point 1-D, 5-point and 9-point 2-D, and a 2-D
one with an extra consumer test ``i != j``. ``cold`` clears the emptiness cache before every
query (every query does its whole Fourier-Motzkin work); ``warm`` repeats queries already
seen (what a pass asking the same question at several reads pays). Rates are given per CPU
second (stable on a shared machine) and per wall-clock second.

    .venv/bin/python benchmarks/affine_queries.py [--seconds S]
"""

from __future__ import annotations

import argparse
import time

from sarek_py.analysis.affine.fm import is_empty
from sarek_py.analysis.affine.queries import AffineForm, Dnf, ge0, implies, reads_within
from sarek_py.ir.nodes import Ref, var
from sarek_py.ir.types import Scalar

I32 = Scalar.I32
AI, AJ, AN, AM = (Ref(var(x, I32)) for x in "ijnm")
P, Q = Ref(var("p", I32)), Ref(var("q", I32))  # the producer's indices
fi, fj, fn, fm = (AffineForm.of_atom(a) for a in (AI, AJ, AN, AM))
fp, fq = AffineForm.of_atom(P), AffineForm.of_atom(Q)


def box(x: AffineForm, ext: AffineForm, lo: int, hi: int) -> list[object]:
    return [ge0(x - lo), ge0(ext - 1 - hi - x)]


def queries() -> list[tuple[str, Dnf, list[AffineForm], list[Ref], Dnf, bool]]:
    out: list[tuple[str, Dnf, list[AffineForm], list[Ref], Dnf, bool]] = []
    dom1 = Dnf.of(*box(fp, fn, 0, 0))  # type: ignore[arg-type]
    path1 = Dnf.of(*box(fi, fn, 1, 1))  # type: ignore[arg-type]
    for d in (-1, 0, 1):
        out.append(("1-D 3-point", path1, [fi + d], [P], dom1, True))
    out.append(("1-D 3-point (out)", path1, [fi + 2], [P], dom1, False))
    dom2 = Dnf.of(*box(fp, fn, 0, 0), *box(fq, fm, 0, 0))  # type: ignore[arg-type]
    path2 = Dnf.of(*box(fi, fn, 1, 1), *box(fj, fm, 1, 1))  # type: ignore[arg-type]
    five = [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]
    nine = [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)]
    for name, offs in (("2-D 5-point", five), ("2-D 9-point", nine)):
        for a, b in offs:
            out.append((name, path2, [fi + a, fj + b], [P, Q], dom2, True))
    ne = Dnf.of(ge0(fi - fj - 1)).or_(Dnf.of(ge0(fj - fi - 1)))
    assert ne is not None
    path_ne = path2.and_(ne)
    assert path_ne is not None
    for a, b in five:
        out.append(("2-D 5-point, i != j", path_ne, [fi + a, fj + b], [P, Q], dom2, True))
    return out


def run(seconds: float, cold: bool) -> tuple[int, float, float]:
    """Queries done, wall-clock and CPU seconds."""
    qs = queries()
    done = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _name, path, subs, idx, dom, expect in qs:
            if cold:
                is_empty.cache_clear()
            assert reads_within(subs, path, idx, dom) is expect
            done += 1
    return done, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    args = ap.parse_args()
    # sanity: the queries mean what they say
    assert implies(Dnf.of(ge0(fi - 1)), Dnf.of(ge0(fi)))
    print(f"{len(queries())} stencil queries (1-D 3-point, 2-D 5/9-point, 2-D with i != j)")
    for label, cold in (("cold (cache cleared per query)", True), ("warm (cached)", False)):
        n, dt, cpu = run(args.seconds, cold)
        print(f"{label:32s} {n / cpu:8.0f} queries per CPU second "
              f"({n / dt:.0f} per wall second; {n} in {dt:.2f} s)")


if __name__ == "__main__":
    main()
