"""Differential generator of n-D launches (LCH-26, LCH-27, INT-1): random kernels over the
thread intrinsics of 1 to 3 axes, random grid and block shapes of odd extents and partial
grids, run on the interpreter and on OpenCL (PoCL) and compared bitwise; a kernel reading
an axis its launch lacks must be refused by both with the same LCH-26 message.

``SAREK_FUZZ=1`` (``make fuzz``) runs the slow, larger version.
"""

from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest

from sarek_py.ir.diagnostics import LaunchError, SarekError
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.base import Backend

KINDS = ("thread_idx", "block_idx", "block_dim", "grid_dim", "global_idx")
SIZE = 23  # the length of the input array (indices are reduced modulo it)


def _intrinsics(axes: int) -> list[str]:
    return ["global_thread_id", *(f"{k}_{a}" for k in KINDS for a in "xyz"[:axes])]


def _expr(rng: random.Random, names: list[str], depth: int) -> str:
    """A random i32 expression over the intrinsics ``names``."""
    roll = rng.random()
    if depth == 0 or roll < 0.3:
        return rng.choice(names) if rng.random() < 0.8 else str(rng.randint(0, 9))
    a, b = _expr(rng, names, depth - 1), _expr(rng, names, depth - 1)
    if roll < 0.85:
        return f"({a} {rng.choice(['+', '-', '*'])} {b})"
    c = _expr(rng, names, depth - 1)
    return f"({a} < {b} ? {c} : {a})"


def case(seed: int) -> tuple[str, tuple[int, ...], tuple[int, ...], int, int]:
    """A kernel's text, its grid and block shapes, the thread count and the number of axes
    the kernel reads (sometimes more than the launch has)."""
    rng = random.Random(seed)
    grid = tuple(rng.choice((1, 2, 3, 5, 7)) for _ in range(rng.randint(1, 3)))
    block = tuple(rng.choice((1, 2, 3, 5)) for _ in range(rng.randint(1, 3)))
    dims = max(len(grid), len(block))
    axes = dims if rng.random() < 0.8 else rng.randint(1, 3)
    names = _intrinsics(axes)
    capacity = int(np.prod(grid)) * int(np.prod(block))
    threads = capacity - (rng.randint(0, capacity - 1) if rng.random() < 0.3 else 0)
    e1, e2 = _expr(rng, names, 3), _expr(rng, names, 2)
    e1 = f"{e1} + {rng.choice(KINDS)}_{'xyz'[axes - 1]}"  # the kernel reads its top axis
    text = f"""kernel g(x : f32[], out : f32[], iout : i32[]) =
  let t = global_thread_id in
  let e = {e1} in
  iout[t] <- e;
  out[t] <- x[(e % {SIZE} + {SIZE}) % {SIZE}] * 1.5f + f32({e2}) / 3.0f
"""
    return text, grid, block, threads, axes


def _kernel(text: str) -> Kernel:
    m = parse_module(text, "gen.sk")
    check_module(m)
    return m.kernels[-1]


def _run(be: Backend, k: Kernel, grid: tuple[int, ...], block: tuple[int, ...],
         threads: int) -> tuple[np.ndarray, np.ndarray] | str:
    x = (np.arange(SIZE, dtype=np.float32) * np.float32(0.37)) - np.float32(3.1)
    cap = int(np.prod(grid)) * int(np.prod(block))
    out = np.full(cap, -1.0, np.float32)
    iout = np.full(cap, -1, np.int32)
    try:
        be.run_kernel(k, {"x": x, "out": out, "iout": iout}, threads, grid=grid,
                      block_shape=block)
    except LaunchError as err:
        return str(err)
    return out, iout


def differences(count: int, start: int = 0) -> tuple[list[str], int, int]:
    """Run ``count`` cases; the mismatches, the number compared and the number refused."""
    try:
        cl = get_backend("opencl")
    except SarekError:
        pytest.skip("the OpenCL backend cannot run here")
    interp = get_backend("interp")
    bad: list[str] = []
    compared = refused = 0
    for seed in range(start, start + count):
        text, grid, block, threads, axes = case(seed)
        k = _kernel(text)
        want, got = _run(interp, k, grid, block, threads), _run(cl, k, grid, block, threads)
        dims = max(len(grid), len(block))
        if axes > dims:
            refused += 1
            if not (isinstance(want, str) and want == got and "[LCH-26]" in want):
                bad.append(f"seed {seed}: axis {axes} on a {dims}-D launch: {want!r} / {got!r}")
            continue
        if isinstance(want, str) or isinstance(got, str):
            bad.append(f"seed {seed}: refused: {want!r} / {got!r}")
            continue
        compared += 1
        if not (want[0].view(np.uint32) == got[0].view(np.uint32)).all() \
                or not (want[1] == got[1]).all():
            bad.append(f"seed {seed}: grid {grid} block {block} threads {threads}\n{text}")
    return bad, compared, refused


#: generated cases of the default run (``make test``; each compiles an OpenCL program);
#: the slow test runs these seeds at the sizes the default run had before (80, 40) and
#: the long run (docs/testing.md)
CASES, RECORDS = 30, 16


@pytest.mark.opencl
def test_lch27_generated_nd_launches_bitwise_equal() -> None:
    """LCH-26, LCH-27: generated kernels and launch shapes, interpreter == OpenCL."""
    bad, compared, refused = differences(CASES)
    assert not bad, "\n".join(bad[:3])
    assert compared > 20 and refused >= 1  # the generator reaches both outcomes


@pytest.mark.slow
@pytest.mark.opencl
def test_lch27_generated_nd_launches_fuzz() -> None:
    """The long run of the generator for ``make fuzz``."""
    bad, compared, refused = differences(80)
    assert not bad, "\n".join(bad[:3])
    assert compared > 50 and refused > 3
    bad, ran = record_differences(40)
    assert not bad, "\n".join(bad[:3])
    assert ran > 20
    count = 3000 if os.environ.get("SAREK_FUZZ") else 300
    t0 = time.perf_counter()
    bad, compared, refused = differences(count, 1000)
    print(f"nd-launch fuzz: {count} cases, {compared} compared, {refused} refused, "
          f"{len(bad)} mismatches, {time.perf_counter() - t0:.1f} s")
    assert not bad, "\n".join(bad[:3])
    t0 = time.perf_counter()
    bad, ran = record_differences(count, 1000)
    print(f"nd-launch record fuzz: {count} cases, {ran} run through the host, "
          f"{len(bad)} mismatches, {time.perf_counter() - t0:.1f} s")
    assert not bad, "\n".join(bad[:3])


def _spell(rng: random.Random, extents: tuple[int, ...], names: list[str]) -> str:
    """The extents as host expressions: constants, host variables, sums."""
    out = []
    for n in extents:
        roll = rng.random()
        if roll < 0.4:
            out.append(str(n))
        elif roll < 0.7:
            v = rng.choice(names)
            out.append(f"{v} * 0 + {n}")
        else:
            out.append(f"({n - 1} + 1)")
    return "(" + ", ".join(out) + ")"


def record_differences(count: int, start: int = 0) -> tuple[list[str], int]:
    """LCH-28 differentially: each generated case as a ``.launches`` launch with spelled
    extents, printed and read back identically, run through the host (``execute``) on
    the interpreter and OpenCL and compared with the direct interpreter run."""
    from sarek_py.host.execute import execute
    from sarek_py.ir.host.launch_text import parse_host, print_host

    try:
        cl = get_backend("opencl")
    except SarekError:
        pytest.skip("the OpenCL backend cannot run here")
    bad: list[str] = []
    ran = 0
    for seed in range(start, start + count):
        text, grid, block, threads, axes = case(seed)
        if axes > max(len(grid), len(block)) or threads != int(np.prod(grid) * np.prod(block)):
            continue  # the record's launches are whole grids of the axes they read
        rng = random.Random(seed * 7 + 1)
        m = parse_module(text, "gen.sk")
        check_module(m)
        host = (f"host x : f32[], out : f32[], iout : i32[], a : i32, b : i32\n"
                f"launch g(x, out, iout) grid {_spell(rng, grid, ['a', 'b'])} "
                f"block {_spell(rng, block, ['a', 'b'])}\n")
        vs, stmts = parse_host(host, m, "gen.launches")
        first = print_host(stmts, vs)
        vs2, stmts2 = parse_host(first, m, "printed.launches")
        if print_host(stmts2, vs2) != first or first.count("grid (") != 1:
            bad.append(f"seed {seed}: text round trip\n{host}{first}")
            continue
        want = _run(get_backend("interp"), m.kernels[-1], grid, block, threads)
        assert not isinstance(want, str)
        for be in (get_backend("interp"), cl):
            x = (np.arange(SIZE, dtype=np.float32) * np.float32(0.37)) - np.float32(3.1)
            env: dict[str, object] = {"x": x, "out": np.full(threads, -1.0, np.float32),
                                      "iout": np.full(threads, -1, np.int32),
                                      "a": np.int32(rng.randint(-5, 5)), "b": np.int32(3)}
            execute(stmts, env, be)
            got_f, got_i = env["out"], env["iout"]
            assert isinstance(got_f, np.ndarray) and isinstance(got_i, np.ndarray)
            if not ((got_f.view(np.uint32) == want[0].view(np.uint32)).all()
                    and (got_i == want[1]).all()):
                bad.append(f"seed {seed} on {be.name}: grid {grid} block {block}\n{host}")
        ran += 1
    return bad, ran


@pytest.mark.opencl
def test_lch28_generated_launch_records_run_like_direct_launches() -> None:
    """LCH-28, TXT-37: generated n-D launch statements round-trip their text and run
    through the host on the interpreter and OpenCL bitwise like the direct launch."""
    bad, ran = record_differences(RECORDS)
    assert not bad, "\n".join(bad[:3])
    assert ran > RECORDS // 2
