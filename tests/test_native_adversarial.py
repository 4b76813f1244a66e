"""Hand-written attacks on the c backend (specs/native.md NAT-51, NAT-56): what the
generators do not reach — launches from several Python threads at once (the ctypes call
releases the GIL), special float values, the same device array twice.
"""

from __future__ import annotations

import threading

import numpy as np
from native_diff import c_backend

import sarek_py
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import get_backend

M = parse_module("""
kernel twice(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- x[i] * 2.0f + 1.0f

kernel oob(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  y[i] <- x[i - n] * 0.5f + x[i] * 0.25f

kernel addto(a : f32[], b : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then a[i] <- a[i] + b[i]
""", "adversarial.sk")
TWICE, OOB, ADDTO = M.kernels


def test_nat56_concurrent_launches_from_threads_are_exact() -> None:
    """NAT-56: four Python threads launching at once (the launches overlap: the GIL is
    released while the OpenMP threads run) each get the interpreter's bytes."""
    be = c_backend()
    n = 1 << 18
    x = np.random.default_rng(0).random(n).astype(np.float32)
    want = x * np.float32(2) + np.float32(1)
    bad: list[int] = []

    def work() -> None:
        for _ in range(10):
            y = np.zeros_like(x)
            be.run_kernel(TWICE, {"x": x, "y": y, "n": n}, n, 256)
            if y.tobytes() != want.tobytes():
                bad.append(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_nat56_a_fault_is_reported_to_the_launch_that_made_it() -> None:
    """NAT-56 (regression: the backend's one fault list was shared by the threads, and a
    correct launch raised another thread's fault): while one thread runs a long launch
    whose first thread reads out of bounds,
    two others launch a short correct kernel: every correct launch succeeds and every
    faulty one raises its own fault."""
    be = c_backend()
    n = 1 << 21
    x = np.random.default_rng(0).random(n).astype(np.float32)
    wrong: list[str] = []

    def faulty() -> None:
        for _ in range(15):
            try:
                be.run_kernel(OOB, {"x": x, "y": np.zeros_like(x), "n": 1}, n, 256)
                wrong.append("the faulty launch did not raise")
            except SarekError:
                pass

    def good() -> None:
        for _ in range(300):
            try:
                be.run_kernel(TWICE, {"x": x[:1000], "y": np.zeros(1000, np.float32),
                                      "n": 1000}, 1000, 256)
            except SarekError as exc:
                wrong.append(f"a correct launch raised: {exc}")

    threads = [threading.Thread(target=f) for f in (faulty, good, good)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, wrong[:2]


LANE = parse_module("""
fun lane() : i32 =
  return global_thread_id

kernel k(out : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then out[i] <- lane() * 2
""", "lane.sk").kernels[0]


def test_nat50_a_helper_reading_the_thread_id() -> None:
    """NAT-50 (regression, found by test_nat50_nat51_runnable_generated_kernels_bitwise_on_c
    _fuzz: the helper was emitted reading ``sarek_id``, which only the kernel's thread
    function had, and cc refused the C): a helper returning ``global_thread_id`` runs on
    ``c`` as on the interpreter."""
    be = c_backend()
    ref, got = np.zeros(10, np.int32), np.zeros(10, np.int32)
    get_backend("interp").run_kernel(LANE, {"out": ref, "n": 10}, 10, 4)
    be.run_kernel(LANE, {"out": got, "n": 10}, 10, 4)
    assert got.tobytes() == ref.tobytes() == (np.arange(10, dtype=np.int32) * 2).tobytes()


def test_nat51_the_same_device_array_twice_and_a_numpy_alias() -> None:
    """NAT-51: ``a[i] <- a[i] + b[i]`` with one device array for ``a`` and ``b`` doubles
    it, as on the interpreter; with one numpy array, likewise."""
    be = c_backend()
    n = 1001
    base = np.random.default_rng(1).random(n).astype(np.float32)
    ref = base.copy()
    get_backend("interp").run_kernel(ADDTO, {"a": ref, "b": ref, "n": n}, n, 64)
    assert ref.tobytes() == (base + base).tobytes()
    host = base.copy()
    be.run_kernel(ADDTO, {"a": host, "b": host, "n": n}, n, 64)
    assert host.tobytes() == ref.tobytes()
    d = sarek_py.to_device(base, backend="c")
    be.run_kernel(ADDTO, {"a": d, "b": d, "n": n}, n, 64)
    assert d.get().tobytes() == ref.tobytes()
