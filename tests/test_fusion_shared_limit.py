"""A fused kernel's shared memory against the device's (specs/fusion-legality.md LEG-34;
red-team W5): the fused kernel holds the producer's and the consumer's shared arrays
together, so a pair whose arrays fit a block one at a time but not together is not fused
— the unfused launches run where the fused one would be refused (LCH-52)."""

from __future__ import annotations

import numpy as np
import pytest

from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.policy import target
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.dynamic_shared import static_shared_bytes
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import get_backend

SOURCE = """
kernel p(x : f32[], t : f32[], n : i32)
  shared s : f32[{m}] =
  let i = global_thread_id in
  if i < n then
    s[thread_idx_x] <- x[i] * 2.0f;
    t[i] <- s[thread_idx_x] + 1.0f

kernel c(t : f32[], y : f32[], n : i32)
  shared r : f32[{m}] =
  let i = global_thread_id in
  if i < n then
    r[thread_idx_x] <- t[i] - 3.0f;
    y[i] <- r[thread_idx_x] * r[thread_idx_x]
"""


def pair(m: int) -> tuple[list[KernelLaunch], dict[str, np.ndarray]]:
    mod = parse_module(SOURCE.format(m=m))
    p, c = mod.kernels
    rng = np.random.default_rng(4)
    bufs = {k: rng.standard_normal(300).astype(np.float32) for k in "xty"}
    return [KernelLaunch(p, 300, 64, {"x": bufs["x"], "t": bufs["t"], "n": 300}),
            KernelLaunch(c, 300, 64, {"t": bufs["t"], "y": bufs["y"], "n": 300})], bufs


def test_leg34_fused_shared_arrays_past_the_limit_are_not_fused() -> None:
    """LEG-34: 2 x 4 KB of shared arrays on a device of 6 KB per block: refused, naming
    the bytes of each kernel and the limit; with 8 KB (or no limit known) it fuses."""
    ls, _ = pair(1024)
    assert static_shared_bytes(ls[0].kernel) == 4096
    out, rep = fuse_launches(ls, target=target("opencl", shared_bytes=6144))
    assert len(out) == 2 and not rep[0].fused and rep[0].rule == "LEG-34"
    assert "8192 bytes" in rep[0].reason and "p: 4096" in rep[0].reason
    assert "c: 4096" in rep[0].reason and "6144 bytes" in rep[0].reason
    out, rep = fuse_launches(ls, target=target("opencl", shared_bytes=8192))
    assert rep[0].fused and static_shared_bytes(out[0].kernel) == 8192
    out, rep = fuse_launches(ls, target=target("opencl"))
    assert rep[0].fused


@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_leg34_the_device_limit_reaches_fusion(backend: str) -> None:
    """LEG-34 with the backend's own limit (a pipeline gives it): arrays that fit the
    device one at a time and not together are not fused, and the unfused launches run;
    the fused kernel, launched anyway, is refused by LCH-52."""
    try:
        be = get_backend(backend)
    except SarekError as exc:
        pytest.skip(str(exc))
    limits = be.device_limits()
    if limits is None:
        pytest.skip(f"{backend} knows no shared memory limit")
    m = limits.shared_bytes // 4 // 2 + 16  # each half of the limit, and a bit more
    ls, bufs = pair(m)
    out, rep = fuse_launches(ls, target=target(backend, shared_bytes=limits.shared_bytes))
    assert not rep[0].fused and rep[0].rule == "LEG-34"
    for lc in out:
        be.run_kernel(lc.kernel, lc.by_name, *lc.counts())
    forced, rep2 = fuse_launches(ls, target=target(backend))
    assert rep2[0].fused
    with pytest.raises(SarekError, match="shared memory"):
        be.run_kernel(forced[0].kernel, forced[0].by_name, *forced[0].counts())


def test_leg34_a_pipeline_gives_its_backend_limit() -> None:
    """LEG-34 through a pipeline: the pair whose shared arrays pass the OpenCL device's
    limit together is not fused, and the pipeline runs the two launches with the
    interpreter's bytes."""
    import sarek_py

    try:
        be = get_backend("opencl")
    except SarekError as exc:
        pytest.skip(str(exc))
    limits = be.device_limits()
    assert limits is not None
    ls, bufs = pair(limits.shared_bytes // 4 // 2 + 16)
    ref = {k: v.copy() for k, v in bufs.items()}
    for lc in ls:
        get_backend("interp").run_kernel(lc.kernel, {n: ref[n] if n in ref else v
                                                     for n, v in lc.by_name.items()},
                                         *lc.counts())
    p = sarek_py.pipeline("opencl")
    p.recorded.extend(ls)
    p.run()
    assert [d.rule for d in p.decisions] == ["LEG-34"]
    for k in "xty":
        assert bufs[k].tobytes() == ref[k].tobytes(), k
