"""The example kernels under ``oclgrind --data-races`` (specs/codegen.md, CG-17).

A small script runs every example kernel (and the barrier and stop test kernels) on the
OpenCL backend; run under oclgrind, every OpenCL call goes to its simulator, which reports
out-of-bounds accesses, data races and barrier divergence on stderr. A deliberately racy
kernel runs last in the same script, so the test also shows that reports are seen.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_codegen_exact import CASES, EXAMPLE_BLOCK_SUM, ROOT, RUNS, example_modules

OCLGRIND = shutil.which("oclgrind")

SCRIPT = r"""
import json, sys
from sarek_py.cli.inputs import make_inputs
from sarek_py.ir.parser import parse_file, parse_module
from sarek_py.runtime import get_backend

be = get_backend("opencl")
print("device:", be.device_name, flush=True)
for path, name, threads, block, sizes in json.loads(sys.argv[1]):
    k = parse_file(path).kernel(name)
    sizes = {n: tuple(v) for n, v in sizes.items()}
    be.run_kernel(k, make_inputs(k, sizes, threads, 1), threads, block)
    print("ran", name, flush=True)
racy = parse_module('''
kernel racy(x : f32[], n : i32) =
  let i = global_thread_id in
  if i < n - 1 then x[i + 1] <- x[i] + 1.0f
''').kernel("racy")
import numpy as np
be.run_kernel(racy, {"x": np.zeros(64, np.float32), "n": 64}, 64, 64)
print("ran racy", flush=True)
"""

#: how oclgrind reports a problem
PROBLEM = re.compile(r"Invalid (read|write)|data race|divergence|FATAL", re.I)


def _runs() -> list[tuple[str, str, int, int, dict[str, tuple[int, ...]]]]:
    runs = []
    for path, m in example_modules():
        for k in m.kernels:
            threads, block, sizes = (EXAMPLE_BLOCK_SUM if k.name == "block_sum"
                                     else RUNS[k.name])
            # small launches: the simulator runs every work-item in software
            runs.append((str(path), k.name, threads, block, sizes))
    for name in ("block_sum", "stopper", "grid2d"):
        threads, block, sizes = RUNS[name]
        runs.append((str(CASES), name, threads, block, sizes))
    return runs


@pytest.mark.skipif(OCLGRIND is None, reason="oclgrind is not installed (Debian: oclgrind)")
def test_cg17_examples_race_free_and_in_bounds(tmp_path: Path) -> None:
    runs = _runs()
    script = tmp_path / "under_oclgrind.py"
    script.write_text(SCRIPT)
    assert OCLGRIND is not None
    proc = subprocess.run(
        [OCLGRIND, "--data-races", sys.executable, str(script),
         json.dumps(runs)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Oclgrind" in proc.stdout, "the script did not run on oclgrind's device"
    for _, name, *_ in runs:
        assert f"ran {name}" in proc.stdout
    assert "ran racy" in proc.stdout
    # split stderr into reports, each naming its kernel
    reports = [r for r in re.split(r"\n\s*\n", proc.stderr) if PROBLEM.search(r)]
    kernels = {m.group(1) for r in reports for m in [re.search(r"Kernel: (\w+)", r)] if m}
    assert kernels == {"racy"}, proc.stderr[-3000:]


LOOP_ENDS_SCRIPT = r"""
import json, sys
import numpy as np
from sarek_py.ir.parser import parse_file
from sarek_py.runtime import get_backend

k = parse_file(sys.argv[1]).kernel("loop_ends")
args = {"hi": np.int32(2**31 - 1), "lo": np.int32(-(2**31)), "hi64": np.int64(2**63 - 1),
        "lo64": np.int64(-(2**63)), "lim": np.array([2**31 - 1], np.int32),
        "out": np.zeros(7, np.int32), "last": np.zeros(5, np.int64)}
r = get_backend("opencl").run_kernel(k, args, 1, 1)
print(json.dumps([args["out"].tolist(), args["last"].tolist(), r.stop_codes.tolist()]))
"""


@pytest.mark.skipif(OCLGRIND is None, reason="oclgrind is not installed (Debian: oclgrind)")
def test_cg19_loops_at_type_ends_under_oclgrind(tmp_path: Path) -> None:
    """CG-19 on a second OpenCL compiler: oclgrind's unoptimised build runs `j <= INT_MAX;
    j++` past the end (the kernel stops itself with code 9 after 100 iterations), where
    PoCL's optimiser happens to compute the trip count. The emitted loops run exactly the
    interpreter's iterations on both."""
    script = tmp_path / "loop_ends.py"
    script.write_text(LOOP_ENDS_SCRIPT)
    assert OCLGRIND is not None
    proc = subprocess.run([OCLGRIND, sys.executable, str(script), str(CASES)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out, last, stops = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == [3, 3, 3, 3, 4, 0, 4]
    assert last == [2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 2**31 - 1]
    assert stops == [0]
