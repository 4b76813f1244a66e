"""Check the loop-fusion cost model against measurements (specs/loop-fusion.md, LF-68,
LF-78..LF-80).

    .venv/bin/python benchmarks/cost_sweep.py [--cases 40] [--seed 1] [--backend opencl]
        [--rounds 10] [--steps 16] [--run-ms 100] [--step-ms 10] [--clock wall|cpu]
        [--twice] [--json FILE]

Generates producer -> consumer stencil pairs inside a time loop -- 1-D and 2-D, f32 and
f64, the consumer reading the producer at 1 to 5 points, the producer's expression
mixing additions, multiplications, divisions and transcendentals for 1 to 300 operations
of recompute per point (log-uniform), the consumer writing a third array or (jacobi-like)
the producer's input, which the fusion renames and copies back -- and for each pair:

* the model's decision: ``fuse_program`` with the backend's cost table row (LF-62, LF-75);
* the measured time of one step of the time loop, unfused and fused (the fusion forced
  with an unbounded threshold): :func:`measure` (LF-78), runs of T1 = :data:`FIRST_STEPS`
  and T1 + ``--steps`` steps, more for a fast pair so that the timed steps take
  ``--run-ms`` (LF-117) (LF-81: T1 runs a fused step too) in ``--rounds`` (10, LF-120)
  interleaved rounds, the garbage collector off during each run (LF-120), the difference
  of the best runs, and each variant's noise; the
  final arrays must be bitwise equal; ``--twice`` measures again and says how often the
  machine agrees with itself.

The model agrees when it fuses exactly the pairs whose fused step is measured faster.
Prints one line per pair, the strict agreement (target: at least 90 %), the disagreements
within the measured noise apart, and the agreement outside the noise (LF-79). The domain
is sized so that an unfused step is predicted at ``--step-ms`` (LF-80). About 1 to 2
minutes at the defaults on 2 cores (``--twice``: twice that; LF-117's longer runs: 2 to
3 minutes with ``--twice``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
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


@attrs.frozen
class Measure:
    """One measurement of a pair: seconds per step unfused and fused, each variant's noise
    (relative: how far its median sample lies above its best), and whether the final arrays
    of the two variants are bitwise equal."""

    unfused: float
    fused: float
    noise_unfused: float
    noise_fused: float
    same: bool

    @property
    def ratio(self) -> float:
        return self.fused / self.unfused

    @property
    def valid(self) -> bool:
        return self.unfused > 0 and self.fused > 0

    @property
    def noise(self) -> float:
        """The relative gap below which the two times are not told apart: the two variants'
        noise together, at least :data:`NOISE_FLOOR`."""
        return max(self.noise_unfused + self.noise_fused, NOISE_FLOOR)

    @property
    def within_noise(self) -> bool:
        return abs(self.ratio - 1.0) <= self.noise


#: the smallest relative gap told apart (a clock's and a cache's jitter on a quiet machine)
NOISE_FLOOR = 0.02


def measure(progs: dict[tuple[bool, int], Program], be: object, t1: int, t2: int,
            rounds: int) -> Measure:
    """Time one step of each variant: every round runs the four programs (T1 and T2 steps,
    unfused and fused) interleaved, in an order that alternates between rounds so drift
    hits both variants alike; a step's time is the difference of the best T2 and the best T1
    run over T2 - T1 steps (build, transfers and the first steps cancel; a busy machine only
    adds time, so the best runs are the least disturbed). A variant's noise is how far its
    median T2 run lies above its best, relative to its steps' time."""
    outs = {}
    for key, prog in progs.items():
        r = run_program(prog, device=be, check_races=False)  # builds, and the result
        outs[key] = b"".join(r.array(a).tobytes() for a in "ABC")
    samples: dict[tuple[bool, int], list[float]] = {key: [] for key in progs}
    keys = list(progs)
    for k in range(rounds):
        for key in (keys if k % 2 == 0 else keys[::-1]):
            samples[key].append(timed_run(progs[key], be))
    steps: dict[bool, float] = {}
    noise: dict[bool, float] = {}
    for f in (False, True):
        big, small = sorted(samples[f, t2]), sorted(samples[f, t1])
        steps[f] = (big[0] - small[0]) / (t2 - t1)
        spread = (big[len(big) // 2] - big[0]) / (t2 - t1)
        noise[f] = spread / steps[f] if steps[f] > 0 else float("inf")
    return Measure(steps[False], steps[True], noise[False], noise[True],
                   outs[False, t2] == outs[True, t2])


def timed_run(prog: Program, be: object) -> float:
    """The time of one run of ``prog`` on ``be`` by :data:`CLOCK`, Python's garbage
    collector off during it, as ``timeit`` does (LF-120): a collection falls between
    runs, not on whichever run allocates past its threshold. (Not a full collection
    before each run: with the programs' IR alive that took longer than the runs.)"""
    was = gc.isenabled()
    gc.disable()
    try:
        s = CLOCK[0]()
        run_program(prog, device=be, check_races=False)
        return CLOCK[0]() - s
    finally:
        if was:
            gc.enable()


#: the steps of the shorter run T1 (LF-81): the fused program runs its last iteration as the
#: original loops (the intermediate is read after the time loop), so a run of one step
#: would never run the fused loop: the fused variant's costs per run (allocating and
#: zeroing the renamed array's copy, its transfers) would then fall on T2 alone and be
#: counted per step. Two steps run the fused loop once in T1 too, and they cancel.
FIRST_STEPS = 2


def timed_steps(unfused_ns: float, steps: int, run_ms: float) -> int:
    """The steps a pair's longer run times beyond the shorter one (LF-117): ``steps``, or
    as many as its predicted unfused steps take ``run_ms`` when that is more (a pair of
    fast loops is timed over as long a run as a slow one: the clock's and the scheduler's
    jitter per run then weighs as little), at most 4096."""
    need = math.ceil(run_ms * 1e6 / unfused_ns) if unfused_ns > 0 else steps
    return max(steps, min(need, 4096))


#: the most points of a pair's domain: the calibration's domain (benchmarks/calibrate.py
#: --points), so that the arrays stay in the last-level cache as they did there (LF-80)
MAX_POINTS = 1 << 19


def domain_size(per_point_ns: float, dims: int, step_ms: float) -> int:
    """The extent ``n`` of a pair's domain (``n`` or ``n x n`` points) whose unfused step is
    predicted at ``step_ms`` (LF-80): at most :data:`MAX_POINTS` points, at least 256 (1-D)
    or 48^2."""
    n = int((step_ms * 1e6 / max(per_point_ns, 0.5)) ** (1 / dims))
    cap = MAX_POINTS if dims == 1 else math.isqrt(MAX_POINTS)
    return max(min(n, cap), 256 if dims == 1 else 48)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--rounds", type=int, default=10,
                    help="interleaved rounds per measurement (best and median of them; "
                         "default 10, LF-120)")
    ap.add_argument("--steps", type=int, default=16,
                    help="steps of the time loop timed per run (beyond the first)")
    ap.add_argument("--step-ms", type=float, default=10.0)
    ap.add_argument("--run-ms", type=float, default=100.0,
                    help="time the steps of a pair for at least this long (its predicted "
                    "unfused steps): more steps than --steps for a fast pair (LF-117)")
    ap.add_argument("--twice", action="store_true",
                    help="measure each pair twice and say how often the two agree")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time runs by wall clock (default) or by the process's CPU time")
    ap.add_argument("--json", metavar="FILE",
                    help="also write each pair (its program, the model's prediction, the "
                    "measurements) to FILE, for benchmarks/cost_repredict.py")
    args = ap.parse_args()
    CLOCK[0] = time.perf_counter if args.clock == "wall" else time.process_time
    be = get_backend(args.backend)
    if be.name not in TABLE:
        print(f"backend {be.name} is uncalibrated: run benchmarks/calibrate.py --backend "
              f"{be.name} --write first")
        return 1
    rng = random.Random(args.seed)
    t1 = FIRST_STEPS
    tally = Tally()
    dump: list[dict[str, object]] = []
    ok = True
    start = time.perf_counter()
    print(f"cost model against measurement on {be.name}, {args.cases} generated pairs, "
          f"{args.rounds} rounds of at least {args.steps} steps and {args.run_ms:g} ms, clock "
          f"{args.clock}")
    for k in range(args.cases):
        case = make_case(rng)
        probe = parse_program(case.text(64, 1), "sweep.sk")
        forced = fuse_program(probe, FusionOptions(threshold=1e300, backend=be.name))[1][-1]
        if forced.plan is None or forced.plan.cost.prediction is None:
            print(f"  {k:>3} {case.describe()}: not fusable ({forced})")
            continue
        n = domain_size(forced.plan.cost.prediction.unfused_ns, case.dims, args.step_ms)
        # the model's decision on the program as run (its domain: n declared)
        probe = parse_program(case.text(n, 1), "sweep.sk")
        forced = fuse_program(probe, FusionOptions(threshold=1e300, backend=be.name))[1][-1]
        assert forced.plan is not None and forced.plan.cost.prediction is not None
        pred = forced.plan.cost.prediction
        model_fuses = fuse_program(probe, FusionOptions(backend=be.name))[1][-1].fused
        assert model_fuses == pred.faster, (model_fuses, pred)
        t2 = t1 + timed_steps(pred.total(False), args.steps, args.run_ms)
        progs = {}
        for fused in (False, True):
            for t in (t1, t2):
                p = parse_program(case.text(n, t), "sweep.sk")
                if fused:
                    p, reps = fuse_program(p, FusionOptions(threshold=1e300))
                    assert reps[-1].fused, reps[-1]
                progs[fused, t] = offload(p, rows_1d=be.rows_1d)
        m = measure(progs, be, t1, t2, args.rounds)
        ok &= m.same
        bitwise = "" if m.same else "  NOT BITWISE"
        if not m.valid:  # more steps ran faster than fewer: noise, not a measure
            tally.unmeasured += 1
            print(f"  {k:>3} {case.describe()} n={n}: not measurable (a step's time came "
                  f"out <= 0: noise){bitwise}")
            continue
        again = ""
        second = None
        if args.twice:  # a second measurement: how often the machine agrees with itself
            second = measure(progs, be, t1, t2, args.rounds)
            again = f" (again {second.ratio:.2f})" if second.valid else " (again: not valid)"
        mark = tally.add(m, model_fuses, second, pred.ratio)
        dump.append({"k": k, "case": case.describe(), "dims": case.dims, "elem": case.elem,
                     "n": n, "steps": t2 - t1, "text": case.text(n, 1), "predicted": pred.ratio,
                     "predicted_us": [pred.total(False) / 1e3, pred.total(True) / 1e3],
                     "fuses": model_fuses,
                     "measured": [attrs.asdict(x) for x in (m, second) if x is not None]})
        print(f"  {k:>3} {case.describe()} n={n} steps={t2 - t1}: measured fused/unfused "
              f"{m.ratio:.2f} "
              f"(noise {m.noise:.0%}){again}, model {'fuses' if model_fuses else 'refuses'}"
              f" ({pred.ratio:.2f}): {mark}{bitwise}\n        {pred}")
    for line in tally.summary(args.twice):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": be.name, "clock": args.clock, "seed": args.seed,
                       "rounds": args.rounds, "steps": args.steps, "row": TABLE[be.name],
                       "pairs": dump}, f, indent=1)
    print(f"bitwise identical {'every' if ok else 'NOT every'} pair; "
          f"{time.perf_counter() - start:.0f} s")
    return 0 if ok else 1


@attrs.define
class Tally:
    """The sweep's counts (LF-68, LF-78): strict agreement, the disagreements within the
    measured noise counted apart, and the second measurement's agreement with the first."""

    total: int = 0
    agree: int = 0
    within: int = 0              # cases whose two times lie within the measured noise
    disagree_within: int = 0     # disagreements among those
    faster: int = 0
    faster_fused: int = 0
    slower_refused: int = 0
    unmeasured: int = 0
    again: int = 0               # cases measured a second time (validly)
    self_agree: int = 0
    self_disagree_within: int = 0
    log_errors: list[float] = attrs.field(factory=list)  # log(predicted / measured), LF-83

    def add(self, m: Measure, model_fuses: bool, second: Measure | None,
            predicted: float | None = None) -> str:
        faster = m.fused < m.unfused
        self.total += 1
        if predicted is not None and predicted > 0 and m.valid:
            self.log_errors.append(math.log(predicted / m.ratio))
        self.within += m.within_noise
        self.faster += faster
        self.faster_fused += faster and model_fuses
        self.slower_refused += not faster and not model_fuses
        agrees = faster == model_fuses
        self.agree += agrees
        self.disagree_within += not agrees and m.within_noise
        if second is not None and second.valid:
            self.again += 1
            same = (second.fused < second.unfused) == faster
            self.self_agree += same
            self.self_disagree_within += not same and (m.within_noise or second.within_noise)
        if agrees:
            return "agrees"
        return "DISAGREES (within the noise)" if m.within_noise else "DISAGREES"

    def summary(self, twice: bool) -> list[str]:
        pct = 100.0 * self.agree / self.total if self.total else 0.0
        clear = self.total - self.within
        clear_agree = self.agree - (self.within - self.disagree_within)
        lines = [
            f"fused measured faster in {self.faster} pairs, {self.faster_fused} of them fused "
            f"by the model; fused measured slower in {self.total - self.faster}, "
            f"{self.slower_refused} of them refused (always refusing would agree in "
            f"{self.total - self.faster}/{self.total})",
            f"agreement: {self.agree}/{self.total} = {pct:.0f} % strict; "
            f"{self.total - self.agree} disagreements, {self.disagree_within} of them within "
            f"the measured noise; {self.within} pairs within the noise in all; outside it "
            f"{clear_agree}/{clear}; {self.unmeasured} not measurable"]
        if self.log_errors:  # LF-83: how close the predicted ratios are
            e = self.log_errors
            bias = math.exp(sum(e) / len(e))
            spread = math.exp(sum(abs(x) for x in e) / len(e))
            lines.append(f"predicted / measured ratio: geometric mean {bias:.2f}, "
                         f"off by a factor {spread:.2f} on average (either way)")
        if twice:
            spct = 100.0 * self.self_agree / self.again if self.again else 0.0
            lines.append(
                f"self-agreement: the two measurements agree on the faster variant in "
                f"{self.self_agree}/{self.again} = {spct:.0f} % of pairs "
                f"({self.again - self.self_agree - self.self_disagree_within} flips outside "
                "the noise)")
        return lines


if __name__ == "__main__":
    sys.exit(main())
