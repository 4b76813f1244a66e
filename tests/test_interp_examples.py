"""The examples of examples/*.sk on the reference interpreter, against numpy written out by
hand with the same f32 operations in the same order (INT-7, INT-16, INT-21)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Module
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
F32 = np.float32


def example(name: str) -> Module:
    path = EXAMPLES / name
    m = parse_module(path.read_text(), str(path))
    check_module(m)
    return m


def rand(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(F32)


def test_int21_saxpy_example() -> None:
    k = example("saxpy.sk").kernel("saxpy")
    n = 1000
    x, y = rand(n, 1), rand(n, 2)
    want = F32(3.5) * x + y
    run_kernel(k, {"x": x, "y": y, "a": 3.5, "n": n}, 1024, 256)
    assert np.array_equal(y, want)


def test_int7_scale_relu_examples() -> None:
    m = example("scale_relu.sk")
    n = 777
    x = rand(n, 3)
    tmp = np.zeros(n, F32)
    y = np.zeros(n, F32)
    run_kernel(m.kernel("scale"), {"x": x, "tmp": tmp, "a": -1.25, "n": n}, 800, 64)
    run_kernel(m.kernel("relu"), {"tmp": tmp, "y": y, "n": n}, 800, 64)
    t = F32(-1.25) * x
    assert np.array_equal(tmp, t)
    assert np.array_equal(y, np.where(t > 0, t, F32(0)))


def test_int16_block_sum_example_whole_blocks() -> None:
    k = example("block_reduce.sk").kernel("block_sum")
    block, n = 128, 1000
    blocks = -(-n // block)
    x = rand(n, 4)
    out = np.zeros(blocks, F32)
    run_kernel(k, {"x": x, "out": out, "n": n}, blocks * block, block)
    tile = np.zeros(blocks * block, F32)
    tile[:n] = x
    tile = tile.reshape(blocks, block)
    w = block // 2
    while w > 0:
        tile[:, :w] = tile[:, :w] + tile[:, w: 2 * w]
        w //= 2
    assert np.array_equal(out, tile[:, 0])


def test_int14_block_sum_example_partial_block_reads_uninitialised_shared() -> None:
    """Threads past the count do not exist, so they fill no tile slot (INT-1, INT-14)."""
    k = example("block_reduce.sk").kernel("block_sum")
    x = rand(1000, 4)
    with pytest.raises(InterpError, match="uninitialised element .* of shared array 'tile'"):
        run_kernel(k, {"x": x, "out": np.zeros(8, F32), "n": 1000}, 1000, 128)


def test_int15_stencil_example() -> None:
    k = example("stencil2d.sk").kernel("stencil5")
    h, w = 13, 17
    src = rand(h * w, 5).reshape(h, w)
    dst = np.zeros((h, w), F32)
    run_kernel(k, {"src": src, "dst": dst, "h": h, "w": w}, h * w + 5, 32)
    want = src.copy()
    c = src[1:-1, 1:-1]
    s = (((c + src[:-2, 1:-1]) + src[2:, 1:-1]) + src[1:-1, :-2]) + src[1:-1, 2:]
    want[1:-1, 1:-1] = F32(0.2) * s
    assert np.array_equal(dst, want)


def test_int12_helper_example() -> None:
    k = example("helper.sk").kernel("blend")
    n = 300
    x, y = rand(n, 6), rand(n, 7)
    out = np.zeros(n, F32)
    t = F32(0.3)
    run_kernel(k, {"x": x, "y": y, "out": out, "t": t, "n": n}, n, 100)
    v = x + t * (y - x)
    assert np.array_equal(out, np.clip(v, F32(0), F32(1)))
