"""Thread-wise fusion of 3-D row-major subscripts read as mixed-radix digits
(specs/fusion-legality.md LEG-33, with LEG-30).

``(k * ni + i) * nj + j`` with ``ni``, ``nj`` numbers (a pipeline's arguments, pinned by
the fused kernel's ``range`` conditions) names one element per ``(k, i, j)`` with ``0 <= i
< ni`` and ``0 <= j < nj``; Fourier-Motzkin over the rationals cannot see it from ``35 k +
7 i + j`` alone (red-team C2: every 3-D chain was refused). Generated 3-D pairs — nested,
expanded and literal spellings, shifted neighbours, guards with borders — are decided
against an oracle that enumerates every thread's accesses, and every fusion is checked
bitwise against the unfused launches on the interpreter and OpenCL."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest
from test_threadwise import bufs, gen_mismatches, launch, opencl, run, same_after

from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel
from sarek_py.ir.typecheck import check_module

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
OFF = 80

CHAIN = """
kernel p3(ni : i32, nj : i32, nk : i32, A : f32[], B : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  let k = global_idx_z in
  if i < ni && j < nj && k < nk then B[(k * ni + i) * nj + j] <- A[(k * ni + i) * nj + j] + 1.0f
kernel c3(ni : i32, nj : i32, nk : i32, B : f32[], T : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  let k = global_idx_z in
  if i < ni && j < nj && k < nk then T[(k * ni + i) * nj + j] <- B[(k * ni + i) * nj + j] * 2.0f
kernel e3(ni : i32, nj : i32, nk : i32, B : f32[], T : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  let k = global_idx_z in
  if i < ni && j < nj && k < nk && k > 0 then T[(k * ni + i) * nj + j] <- B[((k - 1) * ni + i) * nj + j]
kernel f3(ni : i32, nj : i32, nk : i32, B : f32[], T : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  let k = global_idx_z in
  if i < ni && j < nj && k < nk then T[k * ni * nj + i * nj + j] <- B[k * (ni * nj) + i * nj + j] - 3.0f
"""


def kernels() -> dict[str, object]:
    m = parse_module(CHAIN, "chain3.sk")
    check_module(m)
    return {k.name: k for k in m.kernels}


K = kernels()
ARGS = {"ni": 5, "nj": 7, "nk": 3, "A": "A", "B": "B", "T": "T"}
GRID, BLOCK = (2, 3, 2), (4, 2, 2)  # more threads than elements on every axis


def _l(name: str, args: dict[str, object] = ARGS) -> Launch:
    return launch(K[name], args, GRID, BLOCK)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["interp", "opencl"])
@pytest.mark.parametrize("consumer", ["c3", "f3"])
def test_leg33_3d_row_major_chain_fuses_bitwise(backend: str, consumer: str) -> None:
    """LEG-33: a 3-D row-major producer then consumer (nested or expanded spelling)
    fuse thread-wise and give the unfused bytes."""
    be = None if backend == "interp" else opencl()
    ls = [_l("p3"), _l(consumer)]
    new, rep = fuse_launches(ls)
    assert rep[0].fused, rep[0]
    assert len(new) == 1
    same_after(ls, new, lambda: bufs("ABT", 2 * OFF + 200, 9), be)


def test_leg33_neighbour_in_z_is_refused() -> None:
    """LEG-33 only reads digits: a consumer reading the element of k - 1 (another
    thread's) is still refused, naming both accesses."""
    _, rep = fuse_launches([_l("c3", dict(ARGS, T="B", B="A")), _l("e3")])
    assert not rep[0].fused and rep[0].rule == "LEG-30"
    assert "((k - 1) * ni + i) * nj + j" in rep[0].reason


def test_leg33_fused_kernel_pins_the_widths() -> None:
    """LEG-33: the digits are exact only for the widths proved: the fused kernel requires
    them (LCH-25), and a launch with another ni is refused."""
    new, rep = fuse_launches([_l("p3"), _l("c3")])
    assert rep[0].fused
    text = print_kernel(new[0].kernel)
    assert "p_ni == 5" in text and "p_nj == 7" in text
    other = Launch(new[0].kernel, 0, 1, tuple(6 if p.name in ("p_ni", "c_ni") else v
                                              for p, v in zip(new[0].kernel.params,
                                                              new[0].args, strict=True)),
                   grid=GRID, block_shape=BLOCK)
    with pytest.raises(SarekError, match="LCH-25"):
        run([other], bufs("ABT", 400, 1), None)


# ------------------------------------------------------------------------------ generator

GEN = """
kernel p(ni : i32, nj : i32, nk : i32, A : f32[], B : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  let k = global_idx_z in
  if {pguard} then
    B[{pidx} + {off}] <- A[{aidx} + {off}] + 1.0f

kernel c(ni : i32, nj : i32, nk : i32, B : f32[], T : f32[], A : f32[]) =
  let j = global_idx_x in
  let i = global_idx_y in
  let k = global_idx_z in
  if {cguard} then
    {cstore}[{cwidx} + {off}] <- B[{cidx} + {off}] * 2.0f
"""

NI, NK = 4, 3


def _idx(rng: random.Random, nj: int) -> tuple[str, Callable[[int, int, int], int]]:
    """A 3-D subscript over (k, i, j), spelled one of several ways, with its value."""
    dk, di, dj = (rng.choice([0, 0, 0, 1, -1]) for _ in range(3))
    kind = rng.choice(["nested", "expanded", "literal", "nested", "swapped"])
    val: Callable[[int, int, int], int] = \
        lambda k, i, j: ((k + dk) * NI + (i + di)) * nj + (j + dj)  # noqa: E731
    if kind == "nested":
        text = f"((k + {dk}) * ni + (i + {di})) * nj + (j + {dj})"
    elif kind == "expanded":
        text = f"(k + {dk}) * ni * nj + (i + {di}) * nj + (j + {dj})"
    elif kind == "literal":
        text = f"((k + {dk}) * {NI} + (i + {di})) * {nj} + (j + {dj})"
    else:  # i and k swapped in the layout: another array order, same bounds
        text = f"((i + {di}) * nk + (k + {dk})) * nj + (j + {dj})"
        val = lambda k, i, j: ((i + di) * NK + (k + dk)) * nj + (j + dj)  # noqa: E731
    return text, val


def _guard(rng: random.Random, nj: int) -> tuple[str, Callable[[int, int, int], bool]]:
    lo = [rng.choice([0, 1]) for _ in range(3)]
    hi = [rng.choice([0, 1]) for _ in range(3)]
    text = (f"k >= {lo[0]} && i >= {lo[1]} && j >= {lo[2]} && k < nk - {hi[0]} "
            f"&& i < ni - {hi[1]} && j < nj - {hi[2]}")
    return text, lambda k, i, j: (lo[0] <= k < NK - hi[0] and lo[1] <= i < NI - hi[1]
                                  and lo[2] <= j < nj - hi[2])


def gen_case(seed: int) -> tuple[list[Launch], bool, int]:
    """A generated 3-D pair, the oracle's verdict and the buffer size."""
    rng = random.Random(seed)
    nj = rng.choice([3, 5, 8])
    pidx, pf = _idx(rng, nj)
    aidx, af = _idx(rng, nj)
    # the consumer reads what its own thread wrote half of the time (legal pairs)
    cidx, cf = (pidx, pf) if rng.random() < 0.5 else _idx(rng, nj)
    pguard, pg = _guard(rng, nj)
    cguard, cg = _guard(rng, nj)
    cstore = rng.choice(["T", "T", "A"])
    cwidx, cwf = (_idx(rng, nj) if cstore == "A" else
                  ("(k * ni + i) * nj + j", lambda k, i, j: (k * NI + i) * nj + j))
    text = GEN.format(pguard=pguard, pidx=pidx, aidx=aidx, off=OFF, cguard=cguard,
                      cstore=cstore, cwidx=cwidx, cidx=cidx)
    m = parse_module(text, f"gen3_{seed}.sk")
    check_module(m)
    p, c = m.kernels
    block = rng.choice([(4, 2, 1), (2, 2, 2), (8, 1, 1)])
    grid = (-(-nj // block[0]) + rng.choice([0, 1]), -(-NI // block[1]), -(-NK // block[2]))
    threads = [(x, y, z) for x in range(grid[0] * block[0])
               for y in range(grid[1] * block[1]) for z in range(grid[2] * block[2])]
    p_write: dict[int, set[tuple[int, int, int]]] = {}
    p_read_a: dict[int, set[tuple[int, int, int]]] = {}
    for (j, i, k) in threads:
        if pg(k, i, j):
            p_write.setdefault(pf(k, i, j), set()).add((j, i, k))
            p_read_a.setdefault(af(k, i, j), set()).add((j, i, k))
    legal = True
    for (j, i, k) in threads:
        if not cg(k, i, j):
            continue
        if not p_write.get(cf(k, i, j), set()) <= {(j, i, k)}:
            legal = False
        if cstore == "A" and not p_read_a.get(cwf(k, i, j), set()) <= {(j, i, k)}:
            legal = False
    size = 2 * OFF + (NK + 2) * (NI + 2) * (nj + 2)
    args = {"ni": NI, "nj": nj, "nk": NK, "A": "A", "B": "B", "T": "T"}
    return [launch(p, args, grid, block), launch(c, args, grid, block)], legal, size


def test_leg33_generated_3d_pairs_against_the_oracle() -> None:
    """LEG-33, LEG-30: generated 3-D pairs never fuse where the oracle finds a thread
    meeting another; every fusion is bitwise the unfused launches (interp; OpenCL every
    third); most legal pairs fuse."""
    bad, fused, legal = gen_mismatches(300 if FUZZ else 60, opencl(), gen_case)
    assert not bad, bad[:3]
    assert legal > 0 and fused >= legal // 2, (fused, legal)


@pytest.mark.slow
@pytest.mark.skipif(not FUZZ, reason="full size in make fuzz (SAREK_FUZZ=1)")
def test_leg33_generated_3d_pairs_fuzz() -> None:
    """LEG-33 at fuzz size: 1,500 generated 3-D pairs."""
    bad, fused, legal = gen_mismatches(1500, opencl(), gen_case)
    assert not bad, bad[:3]
    print(f"fused {fused} of {legal} legal pairs")
