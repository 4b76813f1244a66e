"""The PolyBench stencil programs' section of docs/corpus.md (LF-50..LF-53): for each
program under tests/corpus/polybench/, its source and what `fuse_program` does with each
adjacent pair of parallel loops (fused, or the rule of its refusal). tests/corpus/table.py
appends it; tests/test_corpus.py checks the generated file."""

from __future__ import annotations

import re
from pathlib import Path

from sarek_py.fusion.loops.fusion import fuse_program
from sarek_py.ir.host.text import parse_program

HERE = Path(__file__).resolve().parent


def _source(text: str) -> str:
    m = re.search(r"// Source: (\S+) .*?commit\s*//\s*(\w+),\s*(\S+),", text, re.S)
    assert m is not None
    return f"{m.group(1)} `{m.group(3)}` @{m.group(2)[:7]}"


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
             "The fused/unfused time ratios on PoCL are in docs/performance.md "
             "(`benchmarks/polybench.py`): every fused program here is slower there "
             "(step ratios 3.8 to 6.8 in the quiet run of 05:34 UTC, with LF-52's test "
             "inside the loop; `--compare-split` times both forms), and `opt`'s cost "
             "model (LF-60..LF-69) now declines all three with the copy back (predicted "
             "1.20x, 1.85x, 3.24x on opencl); with `--swap` it still fuses jacobi-1d "
             "(predicted 0.81x, measured 6.0x slower). The decisions below are LF-13's "
             "operations-per-byte rule (`fuse_program` without a backend).", "",
             "| program | source | pair (lines) | decision | rule | reason |",
             "| --- | --- | --- | --- | --- | --- |"]
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
            lines.append(f"| `{path.stem}` | {_source(text)} | {where} | {row} |")
    return lines
