"""The rows kernel on a grid of two or three dimensions, end to end (specs/tiling.md
TIL-14, TIL-11, TIL-12; specs/offload.md OFF-11): programs of 2, 3 and 4 parallel
dimensions offloaded and run on the interpreter's device and OpenCL give the sequential
program's bytes; a next extent or a product of the others' over 65535 runs flat."""

from __future__ import annotations

from typing import Any

import pytest

from sarek_py.host.interp import HostInterp, run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.host.program import iter_host
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.nodes import Kernel
from sarek_py.runtime import get_backend
from sarek_py.runtime.interp import InterpBackend


def devices() -> list[Any]:
    out: list[Any] = [InterpBackend()]
    try:
        out.append(get_backend("opencl"))
    except BackendUnavailable:
        pass
    return out


def counting(dev: Any) -> tuple[Any, list[tuple[str, Any]]]:
    """``dev`` whose launches are recorded as (kernel name, grid)."""
    seen: list[tuple[str, Any]] = []
    real = dev.launch

    def launch(kernel: Kernel, *args: Any, **kw: Any) -> None:
        seen.append((kernel.name, kw.get("grid")))
        real(kernel, *args, **kw)

    dev.launch = launch
    return dev, seen


P2 = """
program p
  var n : i32 = 300; var m : i32 = 3;
  var w : f64[0:, 0:] allocatable;
begin
  allocate w[0:m - 1, 0:n - 1];
  parallel for (j = 0 to m - 1, i = 0 to n - 1) do w[j, i] <- f64(j * 7 - i) * 0.5 done
end
"""

P3 = """
program p
  var a : i32 = 3; var b : i32 = 5; var c : i32 = 70;
  var w : f64[0:, 0:, 0:] allocatable;
begin
  allocate w[0:a - 1, 0:b - 1, 0:c - 1];
  parallel for (k = 0 to a - 1, j = 0 to b - 1, i = 0 to c - 1) do
    w[k, j, i] <- f64(k * 100000 + j * 1000 + i)
  done
end
"""

P4 = """
program p
  var a : i32 = 2; var b : i32 = 3; var c : i32 = 4; var d : i32 = 33;
  var w : f64[0:, 0:, 0:, 0:] allocatable;
begin
  allocate w[0:a - 1, 0:b - 1, 0:c - 1, 0:d - 1];
  parallel for (l = 0 to a - 1, k = 0 to b - 1, j = 0 to c - 1, i = 0 to d - 1) do
    w[l, k, j, i] <- f64(l * 1000000 + k * 10000 + j * 100 + i)
  done
end
"""


@pytest.mark.parametrize(("source", "sizes", "grid"), [
    (P2, {"n": 300, "m": 3}, (2, 3)),
    (P2, {"n": 256, "m": 1}, (1, 1)),
    (P3, {"a": 3, "b": 5, "c": 300}, (2, 5, 3)),
    (P3, {"a": 7, "b": 1, "c": 257}, (2, 1, 7)),
    (P4, {"a": 2, "b": 3, "c": 4, "d": 256}, (1, 4, 6)),
    (P4, {"a": 3, "b": 5, "c": 2, "d": 200}, (1, 2, 15)),
])
def test_til14_offloaded_rows_run_on_their_grid(source: str, sizes: dict[str, int],
                                                grid: tuple[int, ...]) -> None:
    """TIL-14: the host launches the rows kernel on (blocks per row, next extent[,
    product of the others]) and every device writes the sequential program's bytes (the
    4-D nest's z place is divided among two loops, TIL-12)."""
    p = parse_program(source)
    q = offload(p)
    ref = run_program(p, sizes).array("w").tobytes()
    for dev in devices():
        dev, seen = counting(dev)
        got = HostInterp(q, device=dev, check_races=False).run(sizes)
        assert got.array("w").tobytes() == ref, dev.name
        assert seen == [("p_loop_rows", grid)], (dev.name, seen)


def test_til14_tall_nests_run_flat() -> None:
    """TIL-14, TIL-11: a next extent over 65535 (CUDA's grid y limit) runs the flat
    kernel, with the sequential program's bytes; 65535 rows still run in rows."""
    p = parse_program(P2)
    q = offload(p, block_size=32)  # (small arrays: 65536 x 32)
    for m, kernel in ((65536, "p_loop"), (65535, "p_loop_rows")):
        sizes = {"n": 32, "m": m}
        ref = run_program(p, sizes).array("w").tobytes()
        dev, seen = counting(get_backend("opencl") if _has_opencl() else InterpBackend())
        got = HostInterp(q, device=dev, check_races=False).run(sizes)
        assert got.array("w").tobytes() == ref
        assert [name for name, _ in seen] == [kernel], seen


def test_til14_others_over_the_z_limit_run_flat() -> None:
    """TIL-14: the product of the other extents over 65535 runs flat (3-D nest)."""
    p = parse_program(P3)
    q = offload(p, block_size=32)
    for a, kernel in ((65536, "p_loop"), (65535, "p_loop_rows")):
        sizes = {"a": a, "b": 1, "c": 32}
        ref = run_program(p, sizes).array("w").tobytes()
        dev, seen = counting(get_backend("opencl") if _has_opencl() else InterpBackend())
        got = HostInterp(q, device=dev, check_races=False).run(sizes)
        assert got.array("w").tobytes() == ref
        assert [name for name, _ in seen] == [kernel], seen


def test_til14_the_rows_launch_is_printed_with_its_grid() -> None:
    """TIL-14, LCH-28: the printed program launches the rows kernel with `grid (...)
    block (256)`; the flat one by thread count."""
    q = offload(parse_program(P3))
    launches = [s for s in iter_host(q.body) if isinstance(s, Launch)]
    rows = [s for s in launches if s.kernel.name.endswith("_rows")]
    flat = [s for s in launches if not s.kernel.name.endswith("_rows")]
    assert len(rows) == 1 and len(rows[0].grid) == 3 and len(rows[0].block_shape) == 1
    assert len(flat) == 1 and not flat[0].shaped


def _has_opencl() -> bool:
    try:
        get_backend("opencl")
    except BackendUnavailable:
        return False
    return True


def test_leg32_a_launch_missing_an_axis_is_not_fused() -> None:
    """LEG-32: a consumer reading global_idx_y on a 1-D launch is refused by
    fuse_launches with the rule and the intrinsic (red-team C6: it used to fuse, and the
    fused kernel was refused at its launch); in a pipeline the run then meets LCH-26."""
    import numpy as np

    from sarek_py.fusion.epilogue.sequence import fuse_launches
    from sarek_py.ir.diagnostics import SarekError
    from sarek_py.ir.host.launch import KernelLaunch
    from sarek_py.ir.parser import parse_module

    m = parse_module("""
kernel p(x : f32[], t : f32[], n : i32) =
  let i = global_thread_id in if i < n then t[i] <- x[i] * 2.0f
kernel c(t : f32[], y : f32[], n : i32) =
  let i = global_idx_y in if i < n then y[i] <- t[i] + 1.0f
""")
    p, c = m.kernels
    x, t, y = (np.zeros(64, np.float32) for _ in range(3))
    launches = [KernelLaunch(p, 64, 32, {"x": x, "t": t, "n": 64}),
                KernelLaunch(c, 64, 32, {"t": t, "y": y, "n": 64})]
    out, decisions = fuse_launches(launches)
    assert len(out) == 2 and not decisions[0].fused
    assert decisions[0].rule == "LEG-32" and "global_idx_y" in decisions[0].reason
    assert "2 extents" in decisions[0].reason
    with pytest.raises(SarekError, match="LCH-26"):
        get_backend("interp").run_kernel(c, {"t": t, "y": y, "n": 64}, 64, 32)
    # on a 2-D launch it is only a question of shapes (LEG-14/LEG-30), not LEG-32
    shaped = [KernelLaunch(p, 64, 32, {"x": x, "t": t, "n": 64}),
              KernelLaunch(c, (2, 2), (32, 1), {"t": t, "y": y, "n": 64})]
    _, decisions = fuse_launches(shaped)
    assert decisions[0].rule != "LEG-32"
