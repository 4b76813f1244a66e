"""PolyBench/C 4.2 stencils as published (tests/corpus/polybench/*.sk), fused by the loop
passes (LF-50: boundary reads) against unfused, offloaded on one backend, side by side in
one run (issue 15's acceptance: the PolyBench ratios).

    .venv/bin/python benchmarks/polybench.py [--repeat 5] [--backend opencl|c] [--swap]
        [--compare-split]

Each program runs once first (kernel builds), then ``--repeat`` times alternately fused
(forced: LF-13 with an unbounded threshold) and unfused; the fastest run of each counts.
The last column is the cost model's decision for the backend (LF-62: fused or refused,
with its prediction). The final arrays are compared bitwise (the
script fails otherwise). ``--compare-split`` also times the fused program with LF-52's
interior test inside the loop instead of the interior nest and boundary strips of LF-85
(``FusionOptions(split=False)``), in the same alternation: the last columns. The sizes are
larger than PolyBench's MINI so that the kernels,
not the host, dominate.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
from pathlib import Path

from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend

#: the key of the fused program with LF-52's test inside the loop (--compare-split)
LOOP_TEST = "loop-test"
ROOT = Path(__file__).resolve().parent.parent
#: what ``--write`` keeps: per backend, each program's ratios and the model's decision
RATIOS = ROOT / "tests" / "corpus" / "polybench" / "ratios.json"
PROGRAMS = (("jacobi-1d", {"n": 100000, "tsteps": 20}, "A"),
            ("jacobi-2d", {"n": 512, "tsteps": 20}, "A"),
            ("heat-3d", {"n": 64, "tsteps": 20}, "A"))


#: --small: sizes for a check that the script runs (tests/test_loop_fusion_split.py, LF-90)
SMALL = {"n": 6, "tsteps": 2}


def _ratio(x: float, y: float) -> str:
    """``x / y`` to two places, ``-`` when ``y`` is not positive (a step lost in noise)."""
    return f"{x / y:.2f}" if y > 0 else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--swap", action="store_true",
                    help="ping-pong the renamed arrays (PP-4) instead of copying them back")
    ap.add_argument("--compare-split", action="store_true",
                    help="also time the fused program with the interior test inside the "
                         "loop (LF-52) instead of separate loops (LF-85)")
    ap.add_argument("--small", action="store_true",
                    help=f"tiny sizes ({SMALL}): checks the script, measures nothing")
    ap.add_argument("--only", choices=[name for name, _, _ in PROGRAMS],
                    help="run one program (a quick check of the script)")
    ap.add_argument("--write", action="store_true",
                    help=f"keep the ratios and the model's decisions in {RATIOS.relative_to(ROOT)} "
                         "(docs/corpus.md's measured column, tests/corpus/table.py)")
    args = ap.parse_args(argv)
    be = get_backend(args.backend)
    print(f"PolyBench stencils, backend {be.name}, best of {args.repeat}: ms of the whole "
          "program, and µs of one time step (the difference of runs of tsteps and 2 tsteps "
          "steps, what the cost model predicts)")
    print(f"  {'program':<10} {'sizes':<28} {'unfused':>8} {'fused':>8} {'ratio':>6} "
          f"{'step u':>8} {'step f':>8} {'ratio':>6}  model")
    ok = True
    kept: dict[str, dict[str, object]] = {}
    for name, published, out in PROGRAMS:
        if args.only is not None and name != args.only:
            continue
        sizes = SMALL if args.small else published
        progs: dict[tuple[bool | str, int], Program] = {}
        for steps in (sizes["tsteps"], 2 * sizes["tsteps"]):
            text = (ROOT / "tests" / "corpus" / "polybench" / f"{name}.sk").read_text()
            for v, x in {**sizes, "tsteps": steps}.items():
                text = re.sub(rf"var {v} : i32 = \d+;", f"var {v} : i32 = {x};", text)
            p = parse_program(text)
            q, _ = fuse_program(p, FusionOptions(threshold=1e300, swap=args.swap,
                                                 backend=be.name))
            progs[False, steps] = offload(p, rows_1d=be.rows_1d)
            progs[True, steps] = offload(q, rows_1d=be.rows_1d)
            if args.compare_split:
                q, _ = fuse_program(p, FusionOptions(threshold=1e300, swap=args.swap,
                                                     backend=be.name, split=False))
                progs[LOOP_TEST, steps] = offload(q, rows_1d=be.rows_1d)
        _, model = fuse_program(p, FusionOptions(swap=args.swap, backend=be.name))
        costs = "; ".join(("fuses: " + str(r.plan.cost)) if r.plan is not None else
                          f"refuses: [{r.refusal.rule}] {r.refusal.reason}"
                          if r.refusal is not None else "" for r in model)
        t1 = sizes["tsteps"]
        ra = run_program(progs[False, t1], device=be, check_races=False)
        rb = run_program(progs[True, t1], device=be, check_races=False)
        same = ra.array(out).tobytes() == rb.array(out).tobytes()
        if args.compare_split:
            rc = run_program(progs[LOOP_TEST, t1], device=be, check_races=False)
            same &= ra.array(out).tobytes() == rc.array(out).tobytes()
        ok &= same
        best = dict.fromkeys(progs, float("inf"))
        for _ in range(args.repeat):
            for key, prog in progs.items():
                t = time.perf_counter()
                run_program(prog, device=be, check_races=False)
                best[key] = min(best[key], time.perf_counter() - t)
        a, b = best[False, t1], best[True, t1]
        sa, sb = ((best[f, 2 * t1] - best[f, t1]) / t1 for f in (False, True))
        extra = ""
        if args.compare_split:
            c = best[LOOP_TEST, t1]
            sc = (best[LOOP_TEST, 2 * t1] - c) / t1
            extra = (f"  test in the loop (LF-52): {c * 1e3:.1f} ms ({c / a:.2f}), step "
                     f"{sc * 1e6:.0f} µs ({_ratio(sc, sa)})")
        kept[name] = {"sizes": sizes, "whole": round(b / a, 2),
                      "step": round(sb / sa, 2) if sa > 0 else None,
                      "model": "fuses" if any(r.plan is not None for r in model) else
                      "refuses", "bitwise": same}
        print(f"  {name:<10} {str(sizes):<28} {a * 1e3:8.1f} {b * 1e3:8.1f} {b / a:6.2f} "
              f"{sa * 1e6:8.0f} {sb * 1e6:8.0f} {_ratio(sb, sa):>6}"
              f"  {costs or 'nothing fused'}{'' if same else '  NOT BITWISE'}{extra}")
    print(f"  bitwise identical {'every' if ok else 'NOT every'} final array")
    if args.write and not args.small and args.only is None and ok:
        data = json.loads(RATIOS.read_text()) if RATIOS.exists() else {}
        when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        data[be.name + (" --swap" if args.swap else "")] = {
            "when": when, "repeat": args.repeat, "programs": kept}
        RATIOS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {RATIOS.relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
