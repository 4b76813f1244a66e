"""A launch checked once and run many times (specs/native.md NAT-60 … NAT-63).

``Backend.prepare_launch`` refuses exactly what ``Backend.launch`` refuses; a prepared run
gives the bytes and the counts of a launch; it holds only for the buffers and flags it was
prepared with; on ``c`` its C arguments are built once, with the backend's own conversions,
and each run arms its own fault buffer.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from native_diff import c_backend
from rule_citations import assert_rules_cited

from sarek_py.ir.diagnostics import InterpError, LaunchError
from sarek_py.ir.parser import parse_module
from sarek_py.ir.requires import FusionRequires
from sarek_py.ir.requires_check import RangeRefused
from sarek_py.runtime import Backend, get_backend
from sarek_py.runtime.native_launch import NativeLaunch
from sarek_py.runtime.prepared import PreparedLaunch, volatile_params

ROOT = Path(__file__).resolve().parent.parent

M = parse_module("""
kernel axpy(a : f64[], b : f64[], x : f64, y : f32, m : i32) requires range(m <= 100) =
  let i = global_thread_id in
  if i < m then b[i] <- a[i] * x + f64(y)

kernel shift(a : f64[], m : i32) =
  let i = global_thread_id in
  a[i + m] <- 2.0

kernel put32(a : f32[], y : f32) =
  let i = global_thread_id in
  a[i] <- y

kernel put64(a : f64[], y : f64) =
  let i = global_thread_id in
  a[i] <- y

kernel halt(a : i32[]) =
  let i = global_thread_id in
  if i == 3 then stop 7;
  a[i] <- 1
""")
AXPY, SHIFT, PUT32, PUT64, HALT = M.kernels


@pytest.fixture(params=["c", "interp"])
def dev(request: pytest.FixtureRequest) -> Backend:
    return c_backend() if request.param == "c" else get_backend("interp")


def buffers(dev: Backend, n: int = 16) -> tuple[Any, Any]:
    a = dev.allocate((n,), np.float64)
    dev.copy_in(a, np.arange(n, dtype=np.float64) / 3)
    b = dev.allocate((n,), np.float64)
    dev.fill(b, 0)
    return a, b


def read(dev: Backend, buf: Any) -> np.ndarray[Any, Any]:
    out = np.empty(buf.shape, buf.dtype)
    dev.copy_out(buf, out)
    return out


def test_nat60_prepared_runs_give_the_bytes_and_counts_of_launches(dev: Backend) -> None:
    """NAT-60: runs of one prepared launch with new float values give, byte for byte, what
    launches with those values give, and count as many launches."""
    a, b = buffers(dev)
    p = dev.prepare_launch(AXPY, {"a": a, "b": b, "x": np.float64(0.0),
                                  "y": np.float32(0.0), "m": np.int32(12)}, 16, 8)
    assert isinstance(p, PreparedLaunch) and p.volatile == ("x", "y")
    got, want = [], []
    for x, y in ((1.5, 0.25), (-0.0, -1.0), (np.inf, 3.0), (2.0 ** -1074, -0.0)):
        n0 = dev.stats.launches
        p.run([np.float64(x), np.float32(y)], None)
        dev.sync()
        assert dev.stats.launches == n0 + 1
        got.append(read(dev, b).tobytes())
        dev.fill(b, 0)
        dev.launch(AXPY, {"a": a, "b": b, "x": np.float64(x), "y": np.float32(y),
                          "m": np.int32(12)}, 16, 8)
        dev.sync()
        want.append(read(dev, b).tobytes())
        dev.fill(b, 0)
    assert got == want


@pytest.mark.parametrize("change, error", [
    ({"m": np.int32(101)}, RangeRefused),  # LCH-25
    ({"block": 0}, LaunchError),  # LCH-21
])
def test_nat60_prepare_refuses_what_launch_refuses(dev: Backend, change: dict[str, Any],
                                                   error: type) -> None:
    """NAT-60: ``prepare_launch`` makes the checks of ``launch``, with the same error."""
    a, b = buffers(dev)
    args: dict[str, Any] = {"a": a, "b": b, "x": np.float64(1.0), "y": np.float32(1.0),
                            "m": np.int32(12)}
    change = dict(change)  # the parameter's dict is shared by the backends' cases
    block = change.pop("block", 8)
    args.update(change)
    with pytest.raises(error) as by_launch:
        dev.launch(AXPY, args, 16, block)
    with pytest.raises(error) as by_prepare:
        dev.prepare_launch(AXPY, args, 16, block)
    assert str(by_prepare.value) == str(by_launch.value)


def test_nat60_no_thread_prepares_nothing(dev: Backend) -> None:
    a, b = buffers(dev)
    assert dev.prepare_launch(AXPY, {"a": a, "b": b, "x": np.float64(1.0),
                                     "y": np.float32(1.0), "m": np.int32(1)}, 0, 8) is None


def test_nat60_a_kernel_with_fusion_conditions_has_no_volatile_argument() -> None:
    """NAT-60: a fused kernel's checker may read any argument, floats too."""
    assert volatile_params(AXPY) == ("x", "y")
    assert volatile_params(attrs.evolve(AXPY, requires=FusionRequires(()))) == ()


def test_nat61_holds_only_for_its_buffers_and_flags(dev: Backend) -> None:
    """NAT-61: another buffer, a buffer whose memory, shape or type changed, or changed
    bounds-check flags: the prepared launch does not hold (its caller prepares again)."""
    a, b = buffers(dev)
    p = dev.prepare_launch(AXPY, {"a": a, "b": b, "x": np.float64(1.0),
                                  "y": np.float32(1.0), "m": np.int32(12)}, 16, 8)
    assert p is not None and p.holds([a, b])
    other, _ = buffers(dev)
    assert not p.holds([other, b]) and not p.holds([b, a]) and not p.holds([a])
    for field, value in (("shape", (8,)), ("dtype", np.dtype(np.int64)),
                         ("handle", np.empty_like(a.handle))):
        old = getattr(a, field)
        setattr(a, field, value)
        assert not p.holds([a, b]), field
        setattr(a, field, old)
        assert p.holds([a, b])
    for flag in ("checked", "prove_launches"):
        setattr(dev, flag, not getattr(dev, flag))
        assert not p.holds([a, b]), flag
        setattr(dev, flag, not getattr(dev, flag))
        assert p.holds([a, b])


def test_nat62_c_builds_arguments_once_and_arms_a_fault_buffer_per_run() -> None:
    """NAT-62: on ``c`` a launch not proved in bounds runs the checked build; each run arms
    its own fault buffer, so a faulting run is reported at the next sync, and a run after
    it starts clean."""
    dev = c_backend()
    a = dev.allocate((8,), np.float64)
    dev.fill(a, 0)
    bad = dev.prepare_launch(SHIFT, {"a": a, "m": np.int32(6)}, 4, 4)
    assert isinstance(bad, NativeLaunch) and not bad.proved
    good = dev.prepare_launch(SHIFT, {"a": a, "m": np.int32(0)}, 4, 4)
    assert isinstance(good, NativeLaunch) and good.proved
    proved = dev.stats.launches_proved
    good.run([], None)
    dev.sync()
    assert dev.stats.launches_proved == proved + 1
    bad.run([], None)
    with pytest.raises(InterpError, match="out-of-bounds"):
        dev.sync()
    good.run([], None)
    dev.sync()
    assert read(dev, a).tolist() == [2.0] * 4 + [0.0] * 2 + [2.0] * 2  # 8, 9 not written


def test_nat62_c_converts_floats_with_the_backends_conversions() -> None:
    """NAT-62: a run's f32 argument reaches the kernel with its bits (a signalling NaN
    stays one, NAT-72), as through ``launch``."""
    dev = c_backend()
    a = dev.allocate((4,), np.float32)
    p = dev.prepare_launch(PUT32, {"a": a, "y": np.float32(0)}, 4, 4)
    assert p is not None
    for bits in (0x7F800001, 0xFFC00123, 0x80000000, 0x00000001):
        y = np.array([bits], np.uint32).view(np.float32)[0]
        p.run([y], None)
        dev.sync()
        via_prepared = read(dev, a).tobytes()
        dev.launch(PUT32, {"a": a, "y": y}, 4, 4)
        dev.sync()
        assert via_prepared == read(dev, a).tobytes()


def test_nat62_c_passes_f64_arguments_with_their_bits() -> None:
    """NAT-62: a run's f64 argument (an ``np.float64``, which ctypes takes as it is, or
    another number, converted) reaches the kernel with the bits a launch gives it: NaN
    payloads, -0.0, the smallest subnormal."""
    dev = c_backend()
    a = dev.allocate((4,), np.float64)
    p = dev.prepare_launch(PUT64, {"a": a, "y": np.float64(0)}, 4, 4)
    assert p is not None
    for bits in (0x7FF0000000000123, 0xFFF8000000000456, 0x8000000000000000, 1):
        y = np.array([bits], np.uint64).view(np.float64)[0]
        for given in (y, np.float32(1.5), 2):
            p.run([given], None)
            dev.sync()
            via_prepared = read(dev, a).tobytes()
            dev.launch(PUT64, {"a": a, "y": given}, 4, 4)
            dev.sync()
            assert via_prepared == read(dev, a).tobytes(), (hex(bits), given)
            if given is y:
                assert np.frombuffer(via_prepared, np.uint64)[0] == bits, hex(bits)


def test_nat62_a_run_of_a_kernel_that_can_stop_needs_its_status() -> None:
    dev = c_backend()
    a = dev.allocate((8,), np.int32)
    p = dev.prepare_launch(HALT, {"a": a}, 8, 8)
    assert p is not None
    with pytest.raises(LaunchError, match="status buffer"):
        p.run([], None)
    status = dev.allocate((8,), np.int32)
    dev.fill(status, 0)
    p.run([], status)
    dev.sync()
    assert read(dev, status).tolist()[3] == 7
    with pytest.raises(LaunchError, match="takes 0 values"):
        p.run([1.0], status)


def test_nat63_the_host_cost_benchmark_runs() -> None:
    """NAT-63: benchmarks/host_cost.py measures the host's cost per launch (a tiny run)."""
    c_backend()
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_cost.py"),
                          "--size", "8", "--steps", "2", "--repeat", "1"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    # initial field, u's copy, 2 steps x 3 fused stages (no last-iteration branch: the
    # fluxes are deallocated, LF-110)
    assert "ms per launch" in out.stdout and "8 launches" in out.stdout, out.stdout


def test_nat60_every_rule_of_the_prepared_launch_is_cited() -> None:
    """Each rule NAT-60 … NAT-63 of specs/native.md exists and is cited by a test's
    docstring in this file."""
    assert_rules_cited(__file__, "native", "NAT", 60, 63)
