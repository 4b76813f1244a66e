"""Re-predict a recorded cost sweep with the checked-in model (specs/loop-fusion.md, LF-68).

    .venv/bin/python benchmarks/cost_repredict.py SWEEP.json [--row recorded|table]
        [--set KIND=NS ...]

``benchmarks/cost_sweep.py --json SWEEP.json`` records each pair's program and its
measurements. This script prices every recorded pair again with the model as it stands
now (``fuse_program``; by default on the row the sweep was run with, ``--row table``: the
checked-in row; ``--set`` overrides kinds of it) and prints, for each pair, the old and the
new predicted ratio against the measured ones, and the strict agreement with the first
measurement and with each measurement. It measures nothing: a model change can be tried on
the measurements of a quiet run, then checked by a new sweep (another ``--seed``) -- the
recorded pairs are the ones the change was made on.
"""

from __future__ import annotations

import argparse
import json
import sys
from unittest import mock

from sarek_py.fusion.loops import cost_table
from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.ir.host.text import parse_program


def predicted(text: str, backend: str) -> tuple[float, bool]:
    """The model's predicted ratio and decision for the pair ``text`` on ``backend``."""
    prog = parse_program(text, "sweep.sk")
    forced = fuse_program(prog, FusionOptions(threshold=1e300, backend=backend))[1][-1]
    assert forced.plan is not None and forced.plan.cost.prediction is not None
    fuses = fuse_program(prog, FusionOptions(backend=backend))[1][-1].fused
    return forced.plan.cost.prediction.ratio, fuses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep")
    ap.add_argument("--row", choices=("recorded", "table"), default="recorded")
    ap.add_argument("--set", action="append", default=[], metavar="KIND=NS")
    args = ap.parse_args()
    with open(args.sweep) as f:
        data = json.load(f)
    backend = data["backend"]
    row = dict(data["row"] if args.row == "recorded" else cost_table.TABLE[backend])
    for item in args.set:
        kind, _, value = item.partition("=")
        row[kind] = float(value)
    table = {**cost_table.TABLE, backend: row}
    agree = [0, 0]
    each = 0
    count = 0
    with mock.patch.dict(cost_table.TABLE, table):
        for p in data["pairs"]:
            ratio, fuses = predicted(p["text"], backend)
            ms = [m["fused"] / m["unfused"] for m in p["measured"]
                  if m["fused"] > 0 and m["unfused"] > 0]
            if not ms:
                continue
            count += 1
            agree[0] += (ms[0] < 1.0) == p["fuses"]
            agree[1] += (ms[0] < 1.0) == fuses
            each += all((x < 1.0) == fuses for x in ms)
            flag = "" if (ms[0] < 1.0) == fuses else "  MISS"
            print(f"{p['k']:>3} {p['case']:<48} predicted {p['predicted']:.2f} -> {ratio:.2f}"
                  f"  measured {' / '.join(f'{x:.2f}' for x in ms)}{flag}")
    print(f"{backend}: {count} pairs; strict agreement with the first measurement "
          f"{agree[0]} recorded, {agree[1]} now; with every measurement {each}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
