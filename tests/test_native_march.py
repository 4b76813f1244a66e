"""``-march=native`` keeps the c backend's bytes on this machine, or not (specs/native.md
NAT-54): the same kernels, compiled with the default flags and with ``$SAREK_CFLAGS=
-march=native`` (each in its own process, with its own cache), must write the same bytes.

The kernels: every test kernel of tests/test_codegen_cases.sk (integer and float
arithmetic, conversions, wrap-around, ``transcendental``'s f32 and f64 calls), the example
kernels, and :data:`MATH`, one thread per element over 100,003 arguments spread over every
binade of f32 and f64 (vectorised loops: the AVX-512 paths ``-march=native`` opens), each
float intrinsic and the four operations. The integers on the default flags are also the
interpreter's (NAT-50); this test compares the two builds with each other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from native_diff import c_backend

HERE = Path(__file__).resolve().parent

MATH = """
kernel math32(x : f32[], y : f32[], o : f32[,], n : i32) =
  let i = global_thread_id in
  if i < n then (
    let a = x[i] in
    let b = y[i] in
    o[i, 0] <- exp(a); o[i, 1] <- log(abs(a)); o[i, 2] <- sin(a); o[i, 3] <- cos(a);
    o[i, 4] <- tanh(a); o[i, 5] <- sqrt(abs(a)); o[i, 6] <- pow(abs(a), b);
    o[i, 7] <- a * b + a; o[i, 8] <- a / b - b; o[i, 9] <- min(a, b) * max(a, b);
    o[i, 10] <- floor(a) + ceil(b); o[i, 11] <- f32(i32(min(max(a * 0.001f, -1e9f), 1e9f))) * b
  )

kernel math64(x : f64[], y : f64[], o : f64[,], n : i32) =
  let i = global_thread_id in
  if i < n then (
    let a = x[i] in
    let b = y[i] in
    o[i, 0] <- exp(a); o[i, 1] <- log(abs(a)); o[i, 2] <- sin(a); o[i, 3] <- cos(a);
    o[i, 4] <- tanh(a); o[i, 5] <- sqrt(abs(a)); o[i, 6] <- pow(abs(a), b);
    o[i, 7] <- a * b + a; o[i, 8] <- a / b - b; o[i, 9] <- min(a, b) * max(a, b);
    o[i, 10] <- floor(a) + ceil(b); o[i, 11] <- f64(i64(min(max(a * 0.001, -1e18), 1e18))) * b
  )
"""

#: run in a child process: every kernel's outputs into an .npz (argv: the file)
CHILD = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from test_codegen_exact import case_kernels, example_kernels, run_config
from test_native_march import MATH, math_inputs
from sarek_py.cli.inputs import make_inputs
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.ccompiler import CompileCounter

be = get_backend("c")
out = {}
items = [(k, False) for k in case_kernels()] + [(k, True) for _, k in example_kernels()]
for k, example in items:
    threads, block, sizes = run_config(k, example)
    args = make_inputs(k, sizes, threads, 3)
    try:
        be.run_kernel(k, args, threads, block)
    except Exception as exc:  # refused (a barrier): the same refusal in both builds
        out[f"{k.name}:{example}:refused"] = np.frombuffer(str(exc).encode(), np.uint8)
        continue
    for p in k.params:
        if p.is_array:
            out[f"{k.name}:{example}:{p.name}"] = args[p.name]
m = parse_module(MATH, "math.sk")
check_module(m)
for k in m.kernels:
    args = math_inputs(k.name)
    be.run_kernel(k, args, args["n"], 128)
    out[k.name] = args["o"]
out["compiles"] = np.array([CompileCounter.runs])
np.savez(sys.argv[1], **out)
"""


def math_inputs(name: str) -> dict[str, object]:
    """Arguments over every binade (both signs, zeros, subnormals, infinities, NaN)."""
    rng = np.random.default_rng(7)
    n = 100_003
    t = np.float32 if name == "math32" else np.float64
    top = 127 if t is np.float32 else 1023
    x = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-top - 20, top, n)).astype(t)
    x *= np.where(rng.random(n) < 0.5, -1, 1).astype(t)
    x[:8] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-40], t)
    y = rng.uniform(-3, 3, n).astype(t)
    return {"x": x, "y": y, "o": np.zeros((n, 12), t), "n": n}


def build(tmp: Path, cflags: str, native: str = "0") -> dict[str, np.ndarray]:
    env = {**os.environ, "SAREK_CFLAGS": cflags, "SAREK_CACHE": str(tmp / "cache"),
           "SAREK_NATIVE": native}  # "0": the portable build, "1": NAT-38's default
    out = tmp / "out.npz"
    done = subprocess.run([sys.executable, "-c", CHILD, str(out), str(HERE)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.slow
def test_nat54_march_native_keeps_the_bytes(tmp_path: Path) -> None:
    """NAT-54: the portable build ($SAREK_NATIVE=0) and the default build for this CPU
    (``-march=native``, NAT-38) write the same bytes (each compiled afresh: two caches)."""
    c_backend()
    plain = build(tmp_path / "plain", "")
    native = build(tmp_path / "native", "", "1")
    assert plain.pop("compiles")[0] > 0 and native.pop("compiles")[0] > 0
    assert plain.keys() == native.keys()
    differ = {k: int(np.count_nonzero(plain[k].view(np.uint8) != native[k].view(np.uint8)))
              for k in plain if plain[k].tobytes() != native[k].tobytes()}
    assert not differ, f"-march=native changes bytes: {differ}"
    assert {"math32", "math64"} <= plain.keys()
