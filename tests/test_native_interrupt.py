"""Ctrl-C ends a launch on the c backend (specs/native.md, NAT-45): a kernel whose
``while`` loop never ends is interrupted, the process lives on; kernels without a
``while`` loop are called directly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
from native_diff import c_backend as c_or_skip

from sarek_py.codegen import emit_c
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import get_backend

ROOT = Path(__file__).parent.parent

SPIN = textwrap.dedent("""
    import sys
    import numpy as np
    from sarek_py.frontend import Vec, global_thread_id, i32, kernel

    @kernel
    def spin(o: Vec[i32], lim: i32):  # type: ignore[no-untyped-def]
        i = global_thread_id()
        c = 0
        while c < lim:
            c = (c + 1) % 1000
        o[i] = c

    o = np.zeros(4, np.int32)
    spin[4, 4](o, 1, backend="c")  # compiled and loaded before the long launch
    print("ready", flush=True)
    try:
        spin[4, 4](o, 5000, backend="c")
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    spin[4, 4](o, 7, backend="c")
    print("then", o.tolist(), flush=True)
""")


def test_nat45_ctrl_c_ends_a_kernel_that_never_ends(tmp_path: Path) -> None:
    """NAT-45: SIGINT during a launch whose while loop never ends raises
    KeyboardInterrupt in the launching code within seconds (before: the process ignored
    it until killed), and the backend runs the next launch normally."""
    c_or_skip()
    env = {**os.environ, "SAREK_CACHE": str(tmp_path / "cache")}
    script = tmp_path / "spin.py"  # the front end reads the kernel's source file
    script.write_text(SPIN)
    p = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert out.split("\n")[:2] == ["interrupted", "then [7, 7, 7, 7]"], (out, err)


def test_nat45_every_while_loop_tests_the_cancel_word() -> None:
    """NAT-45: in the C, a while loop of the kernel and of a helper tests sarek_cancel
    first; the GPU dialects have no such test."""
    m = parse_module(textwrap.dedent("""
        pure fun h(n : i32) : i32 =
          let mut k = 0 in
          while k < n do k := k + 1 done;
          return k

        kernel w(o : i32[], n : i32) =
          let i = global_thread_id in
          let mut c = 0 in
          while c < n do c := c + h(2) done;
          if i < length(o) then o[i] <- c
        """), "w.sk")
    src = emit_c(m.kernels[0])
    assert src.count("while (!sarek_cancel && (") == 2, src
    from sarek_py.codegen import emit_opencl

    assert "sarek_cancel" not in emit_opencl(m.kernels[0])


def test_nat45_kernels_without_while_are_called_directly() -> None:
    """NAT-45: only a kernel with a while loop gets the cancel word (and the worker
    thread); its results are the interpreter's either way."""
    c = c_or_skip()
    m = parse_module(textwrap.dedent("""
        kernel plain(o : i32[]) =
          let i = global_thread_id in
          if i < length(o) then o[i] <- i * 2

        kernel loop(o : i32[], n : i32) =
          let i = global_thread_id in
          let mut k = 0 in
          while k < n + i do k := k + 1 done;
          if i < length(o) then o[i] <- k
        """), "p.sk")
    plain, loop = m.kernels
    assert c.compiled(plain).cancel is None  # type: ignore[attr-defined]
    assert c.compiled(loop).cancel is not None  # type: ignore[attr-defined]
    interp = get_backend("interp")
    for k, args in ((plain, {}), (loop, {"n": 5})):
        a, b = np.zeros(37, np.int32), np.zeros(37, np.int32)
        c.run_kernel(k, {"o": a, **args}, 37, 8)
        interp.run_kernel(k, {"o": b, **args}, 37, 8)
        assert a.tobytes() == b.tobytes()
