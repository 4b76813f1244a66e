"""Thread-wise fusion of launches of one grid and block shape (specs/fusion-legality.md
LEG-30, LEG-31; specs/text-format.md TXT-40).

Each thread of the fused kernel runs the producer's body, then the consumer's. Generated
2-D and 3-D pairs are decided against an oracle that enumerates every thread's accesses;
every fusion is checked bitwise against the unfused launches on the interpreter and
OpenCL."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import numpy as np
import pytest

from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel, Module
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel, print_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.base import Backend

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
#: every subscript is offset by this much, so that neighbours of the border stay in bounds
OFF = 64

STENCIL = """
kernel blur(ni : i32, nj : i32, A : f32[], B : f32[]) =
  let j = block_idx_x * block_dim_x + thread_idx_x in
  let i = block_idx_y * block_dim_y + thread_idx_y in
  if i < ni - 1 && j < nj - 1 && i > 0 && j > 0 then
    B[i * nj + j] <- 0.25f * (A[(i - 1) * nj + j] + A[(i + 1) * nj + j]
                             + A[i * nj + (j - 1)] + A[i * nj + (j + 1)])

kernel cut(ni : i32, nj : i32, B : f32[], T : f32[], level : f32) =
  let j = block_idx_x * block_dim_x + thread_idx_x in
  let i = block_idx_y * block_dim_y + thread_idx_y in
  if i < ni && j < nj then
    T[i * nj + j] <- B[i * nj + j] > level ? 1.0f : 0.0f

kernel shift(ni : i32, nj : i32, B : f32[], T : f32[], level : f32) =
  let j = block_idx_x * block_dim_x + thread_idx_x in
  let i = block_idx_y * block_dim_y + thread_idx_y in
  if i < ni && j < nj - 1 then
    T[i * nj + j] <- B[i * nj + (j + 1)] + level

kernel back(ni : i32, nj : i32, B : f32[], A : f32[], level : f32) =
  let j = block_idx_x * block_dim_x + thread_idx_x in
  let i = block_idx_y * block_dim_y + thread_idx_y in
  if i < ni && j < nj then
    A[i * nj + j] <- B[i * nj + j] + level

kernel grid2(A : f32[,], B : f32[,]) =
  let j = global_idx_x in
  let i = global_idx_y in
  if i < length(A, 0) && j < length(A, 1) then B[i, j] <- A[i, j] * 2.0f

kernel cut2(B : f32[,], T : f32[,]) =
  let j = global_idx_x in
  let i = global_idx_y in
  if i < length(B, 0) && j < length(B, 1) then T[i, j] <- B[i, j] + 1.0f

kernel ret(ni : i32, nj : i32, A : f32[], B : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  if i >= ni || j >= nj then return;
  B[i * nj + j] <- A[i * nj + j]

kernel bar(ni : i32, nj : i32, A : f32[], B : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  barrier;
  if i < ni && j < nj then B[i * nj + j] <- A[i * nj + j]
"""


def module() -> dict[str, Kernel]:
    m = parse_module(STENCIL, "stencil.sk")
    check_module(m)
    return {k.name: k for k in m.kernels}


K = module()
NI, NJ = 13, 21
GRID, BLOCK = (3, 2), (8, 8)


def opencl() -> Backend:
    try:
        return get_backend("opencl")
    except SarekError as exc:
        pytest.skip(f"no OpenCL: {exc}")


def launch(k: Kernel, args: dict[str, object], grid: tuple[int, ...] = GRID,
           block: tuple[int, ...] = BLOCK) -> Launch:
    return Launch(k, 0, 1, tuple(args[p.name] for p in k.params),  # type: ignore[arg-type]
                  grid=grid, block_shape=block)


def run(ls: list[Launch], bufs: dict[str, np.ndarray], be: Backend | None) -> None:
    for lc in ls:
        args = {k: bufs[v] if isinstance(v, str) else v for k, v in lc.by_name.items()}
        shape = lc.shape()
        assert shape is not None
        grid, block = shape
        threads = int(np.prod(grid)) * int(np.prod(block))
        if be is None:
            run_kernel(lc.kernel, args, threads, int(np.prod(block)), grid=grid,
                       block_shape=block)
        else:
            be.run_kernel(lc.kernel, args, threads, grid=grid, block_shape=block)


def bufs(names: str, size: int, seed: int = 3, shape: tuple[int, ...] | None = None
         ) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(shape or size).astype(np.float32) for n in names}


def same_after(before: list[Launch], after: list[Launch], b: Callable[[], dict[str, np.ndarray]],
               be: Backend | None) -> None:
    x, y = b(), b()
    run(before, x, be)
    run(after, y, be)
    for n in x:
        assert x[n].tobytes() == y[n].tobytes(), n


def stencil_pair(consumer: str = "cut") -> list[Launch]:
    return [launch(K["blur"], {"ni": NI, "nj": NJ, "A": "A", "B": "B"}),
            launch(K[consumer], {"ni": NI, "nj": NJ, "B": "B", "T": "T", "A": "A",
                                 "level": np.float32(0.1)})]


@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_leg30_stencil_then_threshold_fuses_bitwise(backend: str) -> None:
    """LEG-30: a 2-D stencil (interior only) then a threshold of the whole image (border
    included, read where no thread wrote) fuse, and equal the unfused launches bitwise.
    ``i * nj + j`` is proved not to wrap only with ni and nj as numbers, so the fused
    kernel is pinned to them."""
    ls = stencil_pair()
    new, rep = fuse_launches(ls)
    assert rep[0].fused, rep[0]
    k = new[0].kernel
    text = print_module(Module(kernels=(k,)))
    assert "requires threadwise(blur, cut, 2)" in text, text
    assert "range(p_ni == 13, c_ni == 13, p_nj == 21, c_nj == 21)" in text, text
    be = None if backend == "interp" else opencl()
    same_after(ls, new, lambda: bufs("ABT", NI * NJ), be)


def test_tx40_threadwise_requires_reads_back() -> None:
    """TXT-40: a thread-wise fused kernel prints ``requires threadwise(P, C, dims)
    same(...) range(...)`` and reads back to the same kernel; a bad dims is located."""
    new, _ = fuse_launches(stencil_pair())
    k = new[0].kernel
    m = Module(kernels=(k,))
    text = print_module(m)
    again = parse_module(text, "again.sk")
    check_module(again)
    assert again.kernels[0].requires == k.requires
    assert print_module(again) == text
    bad = text.replace("threadwise(blur, cut, 2)", "threadwise(blur, cut, 4)")
    with pytest.raises(SarekError, match=r"again.sk:\d+:\d+: error: threadwise\(\.\.\.\) ends"):
        parse_module(bad, "again.sk")


@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_leg30_fused_kernel_checks_its_launches(backend: str) -> None:
    """LEG-30: the fused kernel refuses a launch with another nj (its range conditions,
    LCH-25) and a launch in three dimensions (its proof took two)."""
    new, _ = fuse_launches(stencil_pair())
    fused = new[0]
    be = None if backend == "interp" else opencl()
    b = bufs("ABT", NI * NJ)
    names = [q.name for q in fused.kernel.params]
    for changed in (("p_nj",), ("p_nj", "c_nj")):
        other = Launch(fused.kernel, 0, 1, tuple(
            NJ - 1 if n in changed else a for n, a in zip(names, fused.args, strict=True)),
            grid=GRID, block_shape=BLOCK)
        with pytest.raises(SarekError, match="range|p_nj"):
            run([other], b, be)
    deep = Launch(fused.kernel, 0, 1, fused.args, grid=(3, 2, 2), block_shape=(8, 8, 1))
    with pytest.raises(SarekError, match="LEG-30"):
        run([deep], b, be)


@pytest.mark.parametrize("consumer,access", [("shift", "B[i * nj + (j + 1)]"),
                                             ("back", "A[i * nj + j]")])
def test_leg30_consumer_meeting_another_thread_is_refused(consumer: str, access: str) -> None:
    """LEG-30: a consumer reading its neighbour's element of the stencil's output (a), or
    writing the stencil's input that neighbours read (b), is refused, naming both
    accesses."""
    _, rep = fuse_launches(stencil_pair(consumer))
    d = rep[0]
    assert not d.fused and d.rule == "LEG-30", d
    assert access in (d.reason or "") and "blur" in (d.reason or ""), d.reason


def test_leg30_different_shapes_are_refused() -> None:
    """LEG-30: launches of two shapes are refused, naming both."""
    ls = stencil_pair()
    ls[1] = launch(K["cut"], {"ni": NI, "nj": NJ, "B": "B", "T": "T",
                              "level": np.float32(0.1)}, grid=(2, 2), block=(16, 8))
    _, rep = fuse_launches(ls)
    assert rep[0].rule == "LEG-30" and "<<<3x2, 8x8>>>" in (rep[0].reason or ""), rep[0]


@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_leg30_rank2_arrays_fuse_for_every_size(backend: str) -> None:
    """LEG-30: with rank-2 arrays the subscripts are affine for every size: the fusion
    needs no range condition."""
    shape = (9, 14)
    ls = [launch(K["grid2"], {"A": "A", "B": "B"}), launch(K["cut2"], {"B": "B", "T": "T"})]
    new, rep = fuse_launches(ls)
    assert rep[0].fused, rep[0]
    assert not new[0].kernel.ranges
    be = None if backend == "interp" else opencl()
    same_after(ls, new, lambda: bufs("ABT", 0, shape=shape), be)


@pytest.mark.parametrize("producer,what", [("ret", "a return"), ("bar", "a barrier")])
def test_leg31_producer_constructs_are_refused(producer: str, what: str) -> None:
    """LEG-31: a producer's return or barrier is refused, naming it."""
    ls = [launch(K[producer], {"ni": NI, "nj": NJ, "A": "A", "B": "B"}),
          launch(K["cut"], {"ni": NI, "nj": NJ, "B": "B", "T": "T",
                            "level": np.float32(0.1)})]
    _, rep = fuse_launches(ls)
    assert rep[0].rule == "LEG-31" and what in (rep[0].reason or ""), rep[0]


# ------------------------------------------------------------------ generated, with an oracle

GEN = """
kernel p(ni : i32, nj : i32, A : f32[], B : f32[]) =
  let {cx} = block_idx_x * block_dim_x + thread_idx_x in
  let {cy} = block_idx_y * block_dim_y + thread_idx_y in
  if {pguard} then
    B[{pidx} + {off}] <- A[{aidx} + {off}] + 1.0f

kernel c(ni : i32, nj : i32, A : f32[], B : f32[], T : f32[]) =
  let {cx} = block_idx_x * block_dim_x + thread_idx_x in
  let {cy} = block_idx_y * block_dim_y + thread_idx_y in
  if {cguard} then
    {cstore}[{cwidx} + {off}] <- B[{cidx} + {off}] * 2.0f
"""


def _idx(rng: random.Random) -> tuple[str, Callable[[int, int, int], int]]:
    """A subscript over (i, j) and the row length nj, with its Python value."""
    di, dj = rng.choice([0, 0, 0, 1, -1]), rng.choice([0, 0, 0, 1, -1])
    kind = rng.choice(["row", "row", "col", "flat_j"])
    if kind == "row":
        return (f"(i + {di}) * nj + (j + {dj})",
                lambda i, j, nj: (i + di) * nj + (j + dj))
    if kind == "col":
        return (f"(j + {dj}) * ni + (i + {di})",
                lambda i, j, nj: (j + dj) * NI_G + (i + di))
    return f"j + {dj}", lambda i, j, nj: j + dj


NI_G = 7


def _guard(rng: random.Random) -> tuple[str, Callable[[int, int, int], bool]]:
    lo_i, lo_j = rng.choice([0, 1]), rng.choice([0, 1])
    hi_i, hi_j = rng.choice([0, 1]), rng.choice([0, 1])
    text = f"i >= {lo_i} && j >= {lo_j} && i < ni - {hi_i} && j < nj - {hi_j}"
    edge = rng.choice(["", "", "", "first", "last"])  # one column: where rows wrap
    if edge == "first":
        return (text + " && j < 1", lambda i, j, nj: lo_i <= i < NI_G - hi_i
                and lo_j <= j < min(1, nj - hi_j))
    if edge == "last":
        return (text + " && j >= nj - 1", lambda i, j, nj: lo_i <= i < NI_G - hi_i
                and max(lo_j, nj - 1) <= j < nj - hi_j)
    return text, lambda i, j, nj: lo_i <= i < NI_G - hi_i and lo_j <= j < nj - hi_j


def gen_case(seed: int) -> tuple[list[Launch], bool, int]:
    """A generated pair, the oracle's verdict and the buffer size."""
    rng = random.Random(seed)
    nj = rng.choice([5, 8, 11])
    pidx, pf = _idx(rng)
    aidx, af = _idx(rng)
    cidx, cf = _idx(rng)
    pguard, pg = _guard(rng)
    cguard, cg = _guard(rng)
    cstore = rng.choice(["T", "T", "A"])
    cwidx, cwf = _idx(rng) if cstore == "A" else ("(i * nj + j)", lambda i, j, nj: i * nj + j)
    text = GEN.format(cx="j", cy="i", pguard=pguard, pidx=pidx, aidx=aidx, off=OFF,
                      cguard=cguard, cstore=cstore, cwidx=cwidx, cidx=cidx)
    m = parse_module(text, f"gen{seed}.sk")
    check_module(m)
    p, c = m.kernels
    block = rng.choice([(4, 2), (3, 3), (8, 1)])
    grid = (-(-nj // block[0]) + rng.choice([0, 1]), -(-NI_G // block[1]))
    threads = [(x, y) for x in range(grid[0] * block[0]) for y in range(grid[1] * block[1])]
    # the oracle: every thread's accesses, then the two conditions of LEG-30
    p_write: dict[int, set[tuple[int, int]]] = {}
    p_read_a: dict[int, set[tuple[int, int]]] = {}
    for (j, i) in threads:
        if pg(i, j, nj):
            p_write.setdefault(pf(i, j, nj), set()).add((j, i))
            p_read_a.setdefault(af(i, j, nj), set()).add((j, i))
    legal = True
    for (j, i) in threads:
        if not cg(i, j, nj):
            continue
        if not p_write.get(cf(i, j, nj), set()) <= {(j, i)}:
            legal = False
        if cstore == "A" and not p_read_a.get(cwf(i, j, nj), set()) <= {(j, i)}:
            legal = False
    size = 2 * OFF + (NI_G + 2) * (max(nj, NI_G) + 2)
    args = {"ni": NI_G, "nj": nj, "A": "A", "B": "B", "T": "T"}
    return [launch(p, args, grid, block), launch(c, args, grid, block)], legal, size


def gen_mismatches(count: int, cl: Backend | None,
                   case: Callable[[int], tuple[list[Launch], bool, int]] | None = None
                   ) -> tuple[list[str], int, int]:
    """Fuse ``count`` generated pairs (``case``: this file's 2-D ones by default); the
    fusions of pairs the oracle finds illegal and the fusions not bitwise the unfused
    launches, the number fused and the number legal."""
    bad: list[str] = []
    fused = legal_n = 0
    for seed in range(count):
        ls, legal, size = (case or gen_case)(seed)
        legal_n += legal
        new, rep = fuse_launches(ls)
        if not rep[0].fused:
            continue
        fused += 1
        if not legal:
            bad.append(f"seed {seed}: fused an illegal pair: {print_kernel(new[0].kernel)}")
            continue
        for be in [None] if cl is None or seed % 3 else [None, cl]:
            x, y = bufs("ABT", size, seed), bufs("ABT", size, seed)
            try:
                run(ls, x, be)
            except SarekError as err:  # the unfused pair itself races: no meaning to keep
                assert "data race" in str(err), err
                break
            run(new, y, be)
            for n in x:
                if x[n].tobytes() != y[n].tobytes():
                    bad.append(f"seed {seed}: {n} differs on {be.name if be else 'interp'}")
    return bad, fused, legal_n


def test_leg30_generated_pairs_against_the_oracle() -> None:
    """LEG-30: generated 2-D pairs (subscripts row-major, column-major, shifted; guards
    with borders; consumers writing the producer's input) never fuse where the oracle
    finds a thread meeting another, and every fusion is bitwise the unfused launches on
    the interpreter (each) and OpenCL (every third)."""
    bad, fused, legal = gen_mismatches(400 if FUZZ else 100, opencl())
    assert not bad, bad[:3]
    assert fused > 0 and legal > 0


@pytest.mark.slow
@pytest.mark.skipif(not FUZZ, reason="full size in make fuzz (SAREK_FUZZ=1)")
def test_leg30_generated_pairs_fuzz() -> None:
    """LEG-30 at fuzz size: 3,000 generated pairs."""
    bad, fused, legal = gen_mismatches(3000, opencl())
    assert not bad, bad[:3]
    print(f"fused {fused} of {legal} legal pairs")


# ------------------------------------------------------------ launches of one dimension

REVERSE = """
kernel scale(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- 2.0f * x[i]

kernel reverse(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then z[n - 1 - i] <- y[i] + 1.0f
"""


@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_leg30_one_dimension_falls_back_to_threadwise(backend: str) -> None:
    """LEG-30: a consumer storing away from its element (EF-3, no epilogue fusion) that
    reads only what its own thread's producer part wrote fuses thread-wise on launches of
    one thread count and block size, bitwise equal; with different block sizes the
    epilogue fusion's refusal is reported."""
    m = parse_module(REVERSE, "rev.sk")
    check_module(m)
    scale, rev = m.kernels
    n = 1000
    from sarek_py.ir.host.launch import KernelLaunch
    ls = [KernelLaunch(scale, 1024, 128, {"x": "X", "y": "Y", "n": n}),
          KernelLaunch(rev, 1024, 128, {"y": "Y", "z": "Z", "n": n})]
    new, rep = fuse_launches(ls)
    assert rep[0].fused, rep[0]
    be = None if backend == "interp" else opencl()
    for lc in (*ls, *new):
        assert not lc.shaped
    x, y = bufs("XYZ", 1024), bufs("XYZ", 1024)
    for lcs, b in ((ls, x), (new, y)):
        for lc in lcs:
            args = {k: b[v] if isinstance(v, str) else v for k, v in lc.by_name.items()}
            if be is None:
                run_kernel(lc.kernel, args, 1024, 128)
            else:
                be.run_kernel(lc.kernel, args, 1024, 128)
    assert all(x[k].tobytes() == y[k].tobytes() for k in x)
    other = [ls[0], KernelLaunch(rev, 1024, 256, {"y": "Y", "z": "Z", "n": n})]
    _, rep2 = fuse_launches(other)
    assert not rep2[0].fused and rep2[0].rule == "EF-3", rep2[0]


def test_lch28_one_dimensional_shapes_are_launches_by_counts() -> None:
    """LCH-28: ``<<<(g,), (b,)>>>`` is the launch of ``g * b`` threads in blocks of ``b``,
    so two such launches of different blocks still fuse by the epilogue fusion."""
    m = parse_module(REVERSE, "rev.sk")
    check_module(m)
    scale = m.kernels[0]
    relu = parse_module("kernel relu(y : f32[], z : f32[], n : i32) =\n"
                        "  let i = block_idx_x * block_dim_x + thread_idx_x in\n"
                        "  if i < n then z[i] <- y[i] > 0.0f ? y[i] : 0.0f\n", "r.sk").kernels[0]
    ls = [Launch(scale, 0, 1, ("X", "Y", 1000), grid=(4,), block_shape=(256,)),
          Launch(relu, 0, 1, ("Y", "Z", 1000), grid=(8,), block_shape=(128,))]
    new, rep = fuse_launches(ls)
    assert rep[0].fused, rep[0]
    assert not new[0].shaped and new[0].counts() == (1024, 256)


def test_leg30_numpy_integer_arguments_are_numbers() -> None:
    """LEG-30: arguments given as numpy integers (as pipelines record them) are numbers for
    the proof, like Python ints (a regression: ``np.int32(nj)`` was left symbolic and the
    stencil pair was refused)."""
    ls = [launch(K["blur"], {"ni": np.int32(NI), "nj": np.int32(NJ), "A": "A", "B": "B"}),
          launch(K["cut"], {"ni": np.int32(NI), "nj": np.int32(NJ), "B": "B", "T": "T",
                            "level": np.float32(0.1)})]
    _, rep = fuse_launches(ls)
    assert rep[0].fused, rep[0]


SAME = """
kernel shifted(s : i32, x : f32[], y : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  if i < 4 && j < 8 then y[i * 16 + j + s] <- x[i * 16 + j + s] + 1.0f
"""


@pytest.mark.parametrize("s_p,s_c,legal", [(0, 0, True), (0, 1, False), (1, 0, False)])
def test_leg30_one_kernel_twice_with_other_arguments(s_p: int, s_c: int, legal: bool) -> None:
    """LEG-30: the same kernel as producer and consumer has one set of variables, but each
    launch its own arguments: ``s`` of the producer is not ``s`` of the consumer (a
    regression: the proof took them for one value and fused the shifted pair, whose
    consumer reads the element its neighbour's producer part writes)."""
    m = parse_module(SAME, "same.sk")
    check_module(m)
    k = m.kernels[0]
    ls = [launch(k, {"s": s_p, "x": "A", "y": "B"}, (1, 1), (8, 4)),
          launch(k, {"s": s_c, "x": "B", "y": "T"}, (1, 1), (8, 4))]
    new, rep = fuse_launches(ls)
    assert rep[0].fused == legal, rep[0]
    if legal:
        same_after(ls, new, lambda: bufs("ABT", 80), None)


# --------------------------------------------------------------------- the Python front end

from sarek_py.frontend import (  # noqa: E402
    Vec2,
    f32,
    global_idx_x,
    global_idx_y,
    kernel,
    pipeline,
)


@kernel
def scale2(x: Vec2[f32], y: Vec2[f32], a: f32):  # type: ignore[no-untyped-def]
    j = global_idx_x()
    i = global_idx_y()
    if i < len(x) and j < 12:
        y[i, j] = a * x[i, j]


@kernel
def relu2(y: Vec2[f32], z: Vec2[f32]):  # type: ignore[no-untyped-def]
    j = global_idx_x()
    i = global_idx_y()
    if i < len(y) and j < 12:
        z[i, j] = max(y[i, j], 0.0)


@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_leg30_vec2_kernels_fuse_in_a_pipeline(backend: str) -> None:
    """LEG-30 with FE-24: two ``Vec2`` kernels element-wise in 2-D, launched
    ``k[(2, 3), (8, 4)]``, fuse in a pipeline and equal the unfused launches bitwise."""
    if backend == "opencl":
        opencl()
    x = np.random.default_rng(0).standard_normal((9, 12)).astype(np.float32)
    outs = []
    for fused in (False, True):
        y, z = np.zeros_like(x), np.zeros_like(x)
        if fused:
            with pipeline(backend=backend) as p:
                scale2[(2, 3), (8, 4)](x, y, np.float32(2.0))
                relu2[(2, 3), (8, 4)](y, z)
            assert [lc.kernel.name for lc in p.launches] == ["scale2_relu2"], p.report()
        else:
            scale2[(2, 3), (8, 4)](x, y, np.float32(2.0), backend=backend)
            relu2[(2, 3), (8, 4)](y, z, backend=backend)
        outs.append((y, z))
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs[0], outs[1], strict=True))


def test_leg14_leg30_both_refusals_are_reported() -> None:
    """LEG-14, LEG-30: launches of one thread count whose consumer is not element-wise
    (EF-3) and reads its neighbour's element are refused by the epilogue fusion (its rule
    reported) and then by the thread-wise fusion, whose reason follows; a 2-D launch
    paired with a 1-D one is refused naming both launches."""
    from sarek_py.ir.host.launch import KernelLaunch
    m = parse_module(REVERSE + """
kernel shift(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n - 1 then z[n - 2 - i] <- y[i + 1]
""", "rev.sk")
    check_module(m)
    scale, _, shift = m.kernels
    ls = [KernelLaunch(scale, 256, 64, {"x": "X", "y": "Y", "n": 200}),
          KernelLaunch(shift, 256, 64, {"y": "Y", "z": "Z", "n": 200})]
    _, rep = fuse_launches(ls)
    d = rep[0]
    assert not d.fused and d.rule == "EF-3", d
    assert "; nor thread-wise (LEG-30): consumer shift reads y[i + 1]" in (d.reason or ""), d
    mixed = [KernelLaunch(scale, (4, 2), (32, 1), {"x": "X", "y": "Y", "n": 200}),
             KernelLaunch(shift, 256, 64, {"y": "Y", "z": "Z", "n": 200})]
    _, rep = fuse_launches(mixed)
    assert rep[0].rule == "LEG-14" and "the launch of shift has not" in (rep[0].reason or "")


# ---------------------------------------------------------------- red-team regressions

WRAP = """
kernel p(A : f32[], B : f32[]) =
  let t = global_idx_x in
  if t == 4 then B[t * 1073741824 + 5] <- 7.0f

kernel c(B : f32[], T : f32[]) =
  let t = global_idx_x in
  if t == 0 then T[0] <- B[t * 1073741824 + 5]

kernel p2(ni : i32, nj : i32, A : f32[], B : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  if i < ni && j < nj && i >= 4 then B[i * nj + j] <- 7.0f

kernel c2(ni : i32, nj : i32, B : f32[], T : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  if i < 1 && j < nj then T[j] <- B[i * nj + j]

fun halt(v : f32) : f32 =
  if v > 100.0f then stop 3;
  return v

kernel ph(A : f32[], B : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  if i < 4 && j < 16 then B[i * 16 + j] <- halt(A[i * 16 + j]) + 1.0f

kernel ch(B : f32[], T : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  if i < 4 && j < 16 then T[i * 16 + j] <- B[i * 16 + j] * 2.0f
"""


def _wrap_kernels() -> dict[str, Kernel]:
    m = parse_module(WRAP, "wrap.sk")
    check_module(m)
    return {k.name: k for k in m.kernels}


W = _wrap_kernels()


def test_leg30_subscripts_that_wrap_are_refused() -> None:
    """LEG-30: the proof takes integers to be exact; a subscript whose i32 value wraps
    (``4 * 2^30 + 5`` is 5 on the device: thread 4 writes what thread 0 reads) is refused
    naming it, on 1-D launches of one count (after EF-3) and on 2-D launches (a row length
    2^30: ``4 * nj`` wraps) (a regression: both fused and differed on OpenCL)."""
    from sarek_py.ir.host.launch import KernelLaunch
    ls = [KernelLaunch(W["p"], 8, 8, {"A": "A", "B": "B"}),
          KernelLaunch(W["c"], 8, 8, {"B": "B", "T": "T"})]
    _, rep = fuse_launches(ls)
    assert not rep[0].fused, rep[0]
    a = {"ni": 5, "nj": 1073741824, "A": "A", "B": "B", "T": "T"}
    ls2 = [launch(W["p2"], a, (1, 5), (8, 1)), launch(W["c2"], a, (1, 5), (8, 1))]
    _, rep = fuse_launches(ls2)
    assert not rep[0].fused and rep[0].rule == "LEG-30", rep[0]
    assert "i32" in (rep[0].reason or "") or "wrap" in (rep[0].reason or ""), rep[0]


def test_leg31_stop_in_a_helper_is_refused() -> None:
    """LEG-31: a producer that may stop through a helper function is refused (a
    regression: only the kernel body was looked at, the pair fused and differed)."""
    ls = [launch(W["ph"], {"A": "A", "B": "B"}, (2, 1), (8, 4)),
          launch(W["ch"], {"B": "B", "T": "T"}, (2, 1), (8, 4))]
    _, rep = fuse_launches(ls)
    assert not rep[0].fused and rep[0].rule == "LEG-31" and "halt" in (rep[0].reason or "")


def test_leg30_unbound_scalar_is_a_refusal_not_a_crash() -> None:
    """LEG-30: a launch that leaves a scalar argument unbound is decided (fused, the
    argument still unbound in the fused launch, or refused with a reason), not a KeyError
    (a regression)."""
    from sarek_py.ir.host.launch import KernelLaunch
    m = parse_module(REVERSE, "rev.sk")
    check_module(m)
    scale, rev = m.kernels
    from sarek_py.ir.host.launch import UNBOUND
    new, rep = fuse_launches([KernelLaunch(scale, 128, 32, {"x": "X", "y": "Y"}),
                              KernelLaunch(rev, 128, 32, {"y": "Y", "z": "Z", "n": 100})])
    if rep[0].fused:
        args = dict(zip((q.name for q in new[0].kernel.params), new[0].args, strict=True))
        assert args["p_n"] is UNBOUND and args["c_n"] == 100
    else:
        assert rep[0].rule and rep[0].reason


def test_leg7_overlapping_views_are_refused_thread_wise() -> None:
    """LEG-7: launches binding overlapping views of one array are refused before the
    thread-wise proof (a regression: the pair fused and its launch raised LEG-15)."""
    mem = np.zeros(NI * NJ + 1, np.float32)
    a, bb = mem[0:NI * NJ], mem[1:NI * NJ + 1]
    t = np.zeros(NI * NJ, np.float32)
    ls = [launch(K["blur"], {"ni": NI, "nj": NJ, "A": a, "B": t}),
          launch(K["cut"], {"ni": NI, "nj": NJ, "B": t, "T": bb, "level": np.float32(0.1)})]
    _, rep = fuse_launches(ls)
    assert not rep[0].fused and rep[0].rule == "LEG-7", rep[0]


@pytest.mark.parametrize("grid,block", [((3, 2, 1), (8, 8, 1)), ((3, 2, 1), (8, 8))])
def test_leg30_trailing_axes_of_extent_one_are_not_dimensions(
        grid: tuple[int, ...], block: tuple[int, ...]) -> None:
    """LEG-30: CUDA's ``dim3(3, 2, 1)`` is a 2-D launch: axes of extent 1 at the end do not
    count, so the stencil pair fuses (a regression: it was refused as a 3-D launch whose z
    coordinate was unconstrained, naming a conflict that cannot happen)."""
    ls = stencil_pair()
    ls = [Launch(lc.kernel, 0, 1, lc.args, grid=grid, block_shape=block) for lc in ls]
    new, rep = fuse_launches(ls)
    assert rep[0].fused, rep[0]
    same_after(ls, new, lambda: bufs("ABT", NI * NJ), None)
