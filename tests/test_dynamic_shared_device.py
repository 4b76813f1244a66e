"""Dynamic shared memory under the OpenCL simulator (CG-50, INT-50): the tree reduction of
``tests/test_dynamic_shared.py`` runs clean under ``oclgrind --data-races`` for several
block sizes and shared extents, and a kernel racing on its dynamic shared array is caught
(the check can fail)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from sarek_py.ir.parser import parse_module
    from sarek_py.runtime import get_backend
    import test_dynamic_shared as T
    be = get_backend("opencl")
    for block, ext in ((8, 16), (16, 8), (4, 32)):
        args, threads, want = T.chunk_case(block, ext, 100, seed=block)
        be.run_kernel(T.CHUNK, args, threads, block, shared=ext, check_races=False)
        assert args["out"].tolist() == want.tolist(), (block, ext)
    print("CLEAN-END", file=sys.stderr, flush=True)
    # the positive control: every thread stores s[0], no barrier
    racy = parse_module('''kernel r(out : i32[])
      shared s : i32[] =
      s[0] <- thread_idx_x;
      out[global_thread_id] <- s[0]''', "racy.sk").kernels[0]
    be.run_kernel(racy, {"out": np.zeros(8, np.int32)}, 8, 8, shared=4, check_races=False)
    print("done")
""")


@pytest.mark.opencl
@pytest.mark.skipif(shutil.which("oclgrind") is None, reason="oclgrind is not installed")
def test_cg50_int50_oclgrind_data_races_clean(tmp_path: Path) -> None:
    """CG-50: the ``__local`` parameter bound to a local buffer of the launch's size is
    race-free and in bounds under oclgrind; a racy kernel on it is reported."""
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT)

    res = subprocess.run(["oclgrind", "--data-races", sys.executable, str(script),
                          str(ROOT / "tests")], capture_output=True, text=True,
                         timeout=300, check=False, cwd=ROOT)
    assert res.returncode == 0 and "done" in res.stdout, res.stdout + res.stderr
    # one run: the reductions first (stderr up to the marker), then the racy control
    clean, _, racy = res.stderr.partition("CLEAN-END")
    assert racy, res.stderr
    assert "race" not in clean.lower() and "invalid" not in clean.lower(), clean
    assert "data race" in racy.lower(), racy
