"""Check the loop-fusion cost model against measurements (specs/loop-fusion.md, LF-68).

    .venv/bin/python benchmarks/cost_sweep.py [--cases 40] [--seed 1] [--backend opencl]
        [--repeat 3] [--clock wall|cpu] [--twice]

Generates producer -> consumer stencil pairs inside a time loop -- 1-D and 2-D, f32 and
f64, the consumer reading the producer at 1 to 5 points, the producer's expression
mixing additions, multiplications, divisions and transcendentals for 1 to 300 operations
of recompute per point, the consumer writing a third array or (jacobi-like) the
producer's input, which the fusion renames and copies back -- and for each pair:

* the model's decision: ``fuse_program`` with the backend's cost table row (LF-62);
* the measured time of one step of the time loop, unfused and fused (the fusion forced
  with an unbounded threshold), each the difference of a run of T2 and of T1 steps, best
  of ``--repeat``, the runs interleaved; the final arrays must be bitwise equal;
  ``--twice`` measures again and says how often the machine agrees with itself.

The model agrees when it fuses exactly the pairs whose fused step is measured faster.
Prints one line per pair and the agreement (target: at least 90 %); pairs within 5 % of
a tie are listed apart (noise decides them). The domain is sized so that an unfused step
takes about ``--step-ms``. About 2 to 3 minutes at the defaults on 2 cores (``--twice``:
twice that).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable

import attrs

from sarek_py.fusion.loops.cost_table import TABLE
from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend

#: the clock runs are timed with: wall (``time.perf_counter``) or the process's CPU time,
#: PoCL's worker threads included (``--clock cpu``: steadier on a shared machine; the
#: table must then be calibrated with ``--clock cpu`` too)
CLOCK = [time.perf_counter]

OFFSETS = {1: (((0,),), ((0,), (1,)), ((-1,), (0,), (1,)), ((-2,), (-1,), (0,), (1,), (2,))),
           2: (((0, 0),), ((0, -1), (0, 0), (0, 1)),
               ((0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)))}


@attrs.frozen
class Case:
    dims: int
    elem: str
    reads: tuple[tuple[int, ...], ...]
    ops: int
    kinds: str
    jacobi: bool
    text: Callable[[int, int], str]

    def describe(self) -> str:
        return (f"{self.dims}-D {self.elem} reads {len(self.reads)} recompute {self.ops:>3} "
                f"({self.kinds}){' renamed' if self.jacobi else ''}")


def _sub(off: tuple[int, ...], names: tuple[str, ...]) -> str:
    return ", ".join(f"{v} + {d}" if d > 0 else f"{v} - {-d}" if d < 0 else v
                     for v, d in zip(names, off, strict=True))


def expression(rng: random.Random, ops: int, loads: list[str], mix: tuple[float, float]
               ) -> tuple[str, str]:
    """A sum of shallow terms over ``loads`` (each used) of about ``ops`` operations;
    ``mix``: the share of division terms and of transcendental terms."""
    terms: list[str] = []
    kinds = {"+*": 0, "/": 0, "t": 0}
    k = 0
    while k < ops or len(terms) < len(loads):
        x = loads[len(terms) % len(loads)]
        r = rng.random()
        if r < mix[1]:
            terms.append(f"{rng.choice(['sin', 'cos', 'exp'])}({x} * 0.001)")
            kinds["t"] += 1
            kinds["+*"] += 1
            k += 2
        elif r < mix[0] + mix[1]:
            terms.append(f"{x} / {rng.choice(['1.0001', '0.9999', '1.5'])}")
            kinds["/"] += 1
            k += 1
        else:
            terms.append(f"{x} * {rng.choice(['0.999', '1.001', '0.5'])}")
            kinds["+*"] += 1
            k += 1
        if len(terms) > 1:
            kinds["+*"] += 1
            k += 1
    desc = " ".join(f"{n}{v}" for n, v in kinds.items() if v)
    return " + ".join(terms), desc


def make_case(rng: random.Random) -> Case:
    dims = rng.choice((1, 2))
    elem = rng.choice(("f32", "f64"))
    reads = rng.choice(OFFSETS[dims])
    recompute = int(round(10 ** rng.uniform(0, 2.48)))  # 1 .. 300 per point
    ops = max(1, recompute // max(len(reads), 1))
    mix = rng.choice(((0.0, 0.0), (0.2, 0.0), (0.0, 0.05), (0.1, 0.03)))
    jacobi = rng.random() < 0.3
    names = ("i", "j")[:dims]
    src = [f"A[{_sub(o, names)}]" for o in OFFSETS[dims][min(2, rng.randrange(1, 3))]]
    value, kinds = expression(rng, ops, src, mix)
    cons = " + ".join(f"B[{_sub(o, names)}]" for o in reads)
    out = "A" if jacobi else "C"
    shape = ", ".join("0:" for _ in names)

    def text(n: int, steps: int) -> str:
        def rng_(lo: int) -> str:
            return ", ".join(f"{v} = {lo} to n - {lo + 1}" for v in names)
        alloc = ", ".join("0:n - 1" for _ in names)
        full = ", ".join(f"{v} = 0 to n - 1" for v in names)
        idx = ", ".join(names)
        fi = " + ".join(f"{elem}({v} % 13)" for v in names)
        return (f"program sweep\n  var n : i32 = {n};\n  var steps : i32 = {steps};\n"
                + "".join(f"  var {a} : {elem}[{shape}] allocatable;\n" for a in "ABC")
                + "begin\n" + "".join(f"  allocate {a}[{alloc}];\n" for a in "ABC")
                + f"  parallel for ({full}) do (A[{idx}] <- ({fi}) * 0.01; B[{idx}] <- 0.0; "
                f"C[{idx}] <- 0.0) done;\n"
                f"  for t = 1 to steps do\n"
                f"    parallel for ({rng_(2)}) do B[{idx}] <- {value} done;\n"
                f"    parallel for ({rng_(4)}) do {out}[{idx}] <- 0.2 * ({cons}) done\n"
                "  done\nend\n")
    return Case(dims, elem, reads, recompute, kinds, jacobi, text)


def step_s(progs: dict[tuple[bool, int], Program], be: object, t1: int, t2: int,
           repeat: int) -> tuple[float, float, bool]:
    """Seconds per step unfused and fused (the difference of T2 and T1 steps, best of
    ``repeat``, the four programs interleaved) and whether the final arrays are equal."""
    outs = {}
    for key, prog in progs.items():
        r = run_program(prog, device=be, check_races=False)
        outs[key] = b"".join(r.array(a).tobytes() for a in "ABC")
    best = dict.fromkeys(progs, float("inf"))
    for _ in range(repeat):
        for key, prog in progs.items():
            s = CLOCK[0]()
            run_program(prog, device=be, check_races=False)
            best[key] = min(best[key], CLOCK[0]() - s)
    tu, tf = ((best[f, t2] - best[f, t1]) / (t2 - t1) for f in (False, True))
    return tu, tf, outs[False, t2] == outs[True, t2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--step-ms", type=float, default=20.0)
    ap.add_argument("--twice", action="store_true",
                    help="measure each pair twice and say how often the two agree")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time runs by wall clock (default) or by the process's CPU time")
    args = ap.parse_args()
    CLOCK[0] = time.perf_counter if args.clock == "wall" else time.process_time
    be = get_backend(args.backend)
    if be.name not in TABLE:
        print(f"backend {be.name} is uncalibrated: run benchmarks/calibrate.py --backend "
              f"{be.name} --write first")
        return 1
    rng = random.Random(args.seed)
    agree, total, ties, ok = 0, 0, 0, True
    faster_n, faster_fused, slower_refused, self_agree, unmeasured = 0, 0, 0, 0, 0
    start = time.perf_counter()
    print(f"cost model against measurement on {be.name}, {args.cases} generated pairs")
    for k in range(args.cases):
        case = make_case(rng)
        probe = parse_program(case.text(64, 1), "sweep.sk")
        forced = fuse_program(probe, FusionOptions(threshold=1e300, backend=be.name))[1][-1]
        if forced.plan is None or forced.plan.cost.prediction is None:
            print(f"  {k:>3} {case.describe()}: not fusable ({forced})")
            continue
        per_point = forced.plan.cost.prediction.unfused_ns
        n = int((args.step_ms * 1e6 / max(per_point, 0.5)) ** (1 / case.dims))
        n = max(min(n, 1 << 20 if case.dims == 1 else 1024), 256 if case.dims == 1 else 48)
        # the model's decision on the program as run (its domain: n declared)
        probe = parse_program(case.text(n, 1), "sweep.sk")
        forced = fuse_program(probe, FusionOptions(threshold=1e300, backend=be.name))[1][-1]
        assert forced.plan is not None and forced.plan.cost.prediction is not None
        pred = forced.plan.cost.prediction
        model_fuses = fuse_program(probe, FusionOptions(backend=be.name))[1][-1].fused
        assert model_fuses == pred.faster, (model_fuses, pred)
        ratio_txt = str(pred)
        progs = {}
        for fused in (False, True):
            for t in (2, 6):
                p = parse_program(case.text(n, t), "sweep.sk")
                if fused:
                    p, reps = fuse_program(p, FusionOptions(threshold=1e300))
                    assert reps[-1].fused, reps[-1]
                progs[fused, t] = offload(p)
        tu, tf, same = step_s(progs, be, 2, 6, args.repeat)
        ok &= same
        if tu <= 0 or tf <= 0:  # more steps ran faster than fewer: noise, not a measure
            unmeasured += 1
            print(f"  {k:>3} {case.describe()} n={n}: not measurable (a step's time came "
                  f"out <= 0: noise){'' if same else '  NOT BITWISE'}")
            continue
        faster = tf < tu
        r = tf / tu
        again = ""
        if args.twice:  # a second measurement: how often the machine agrees with itself
            tu2, tf2, _ = step_s(progs, be, 2, 6, args.repeat)
            tu2, tf2 = max(tu2, 1e-12), max(tf2, 1e-12)
            self_agree += (tf2 < tu2) == faster
            again = f" (again: {tf2 / tu2:.2f})"
        tie = abs(r - 1) < 0.05
        total += 1
        ties += tie
        agree += faster == model_fuses
        faster_n += faster
        faster_fused += faster and model_fuses
        slower_refused += not faster and not model_fuses
        mark = "agrees" if faster == model_fuses else "DISAGREES"
        print(f"  {k:>3} {case.describe()} n={n}: measured fused/unfused {r:.2f}{again}, model "
              f"{'fuses' if model_fuses else 'refuses'}: {mark}{' (tie)' if tie else ''}"
              f"{'' if same else '  NOT BITWISE'}\n        {ratio_txt}")
    pct = 100.0 * agree / total if total else 0.0
    print(f"fused measured faster in {faster_n} pairs, {faster_fused} of them fused by the "
          f"model; fused measured slower in {total - faster_n}, {slower_refused} of them "
          f"refused (always refusing would agree in {total - faster_n}/{total})")
    if args.twice:
        print(f"the two measurements agree on the faster variant in {self_agree}/{total} "
              "pairs (the noise's bound on any model's agreement)")
    print(f"agreement: {agree}/{total} = {pct:.0f} % ({ties} within 5 % of a tie; "
          f"{unmeasured} not measurable); "
          f"bitwise identical {'every' if ok else 'NOT every'} pair; "
          f"{time.perf_counter() - start:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
