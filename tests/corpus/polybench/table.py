"""The PolyBench stencil programs' section of docs/corpus.md (LF-50..LF-53): for each
program under tests/corpus/polybench/, its source and what `fuse_program` does with each
adjacent pair of parallel loops (fused, or the rule of its refusal). tests/corpus/table.py
appends it; tests/test_corpus.py checks the generated file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sarek_py.fusion.loops.fusion import fuse_program
from sarek_py.ir.host.text import parse_program

HERE = Path(__file__).resolve().parent
#: benchmarks/polybench.py --write's measurements
RATIOS = HERE / "ratios.json"


def _source(text: str) -> str:
    m = re.search(r"// Source: (\S+) .*?commit\s*//\s*(\w+),\s*(\S+),", text, re.S)
    assert m is not None
    return f"{m.group(1)} `{m.group(3)}` @{m.group(2)[:7]}"


def _measured(ratios: dict[str, Any], program: str) -> str:
    """Each backend's measured whole-program ratio and the model's decision."""
    out = []
    for backend in sorted(ratios):
        got = ratios[backend]["programs"].get(program)
        if got is not None:
            sizes = ", ".join(f"{k} = {v}" for k, v in got["sizes"].items())
            out.append(f"{backend}: {got['whole']:.2f} ({sizes}; {ratios[backend]['when']}), "
                       f"model {got['model']}")
    return "; ".join(out) or "not measured"


def section() -> list[str]:
    lines = ["", "## PolyBench/C 4.2 stencils as host programs (loop fusion)", "",
             "Each program under `tests/corpus/polybench/` is a statement-by-statement "
             "translation of the published kernel (its header names the source and every "
             "change); `tests/test_polybench_stencils.py` runs the unfused and the fused "
             "program on the interpreter and offloaded on OpenCL, bitwise equal, at the "
             "published MINI sizes and at sizes with an empty interior. A pair is two "
             "adjacent parallel loops; *fused* pairs read the producer's "
             "untouched boundary as stored (LF-50) with the interior split off (LF-52), "
             "since LF-85 as loops of their own: the interior nest without a test, then "
             "the boundary strips with the selects. "
             "The decisions are LF-13's operations-per-byte rule (`fuse_program` without "
             "a backend); *measured* is `benchmarks/polybench.py --repeat 5 --backend B "
             "--write` (tests/corpus/polybench/ratios.json): the whole program fused "
             "(forced) over unfused, offloaded on B, at the sizes given (larger than the "
             "tests'), bitwise equal; *model* is the cost model's decision on B at those "
             "sizes (LF-62, LF-100: the interior nest and the strips priced as they run). "
             "Every fused program is slower than the unfused one on both backends, and the "
             "model declines every one.", "",
             "| program | source | pair (lines) | decision | rule | reason | measured "
             "fused/unfused, model |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    ratios = json.loads(RATIOS.read_text()) if RATIOS.exists() else {}
    for path in sorted(HERE.glob("*.sk")):
        text = path.read_text()
        _, reports = fuse_program(parse_program(text, path.name))
        for r in reports:
            where = f"{r.producer.loc.line if r.producer.loc else '?'}-" \
                    f"{r.consumer.loc.line if r.consumer.loc else '?'}"
            if r.plan is not None:
                edges = ", ".join(sorted(v.name for v in r.plan.edges)) or "none"
                row = f"fused | | boundary read as stored: {edges}"
                if r.plan.split is not None:
                    row += (f"; interior nest and {r.plan.split.loops - 1} boundary strips "
                            "as loops of their own (LF-85)")
            else:
                assert r.refusal is not None
                reason = " ".join(r.refusal.reason.split()).replace("|", "\\|")
                row = f"not fused | {r.refusal.rule} | {reason}"
            lines.append(f"| `{path.stem}` | {_source(text)} | {where} | {row} | "
                         f"{_measured(ratios, path.stem) if r.plan is not None else ''} |")
    return lines
