"""The corpus's launch sequences, written as the published programs launch their kernels.

Each :class:`Scenario` is a run of launches a user writes (producer then consumer), with the
launch shape of the original host code -- grid and block as the original computes them,
rounded up where the original rounds up, 2-D where the original is 2-D -- its buffers (numpy
arrays, named) and, for every kernel, a numpy reference of the original's semantics.
Adjacent launches of a scenario are the pairs whose fusion decision ``expected.py`` records.

Nothing here is rewritten into an idiom the fusion happens to accept: a refusal of the
faithful launch is the finding (docs/corpus.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import attrs
import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.host.launch import KernelLaunch, Launch
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_file

HERE = Path(__file__).resolve().parent
F32 = np.float32
Arrays = dict[str, NDArray[np.generic]]


@cache
def kernel(file: str, name: str) -> Kernel:
    """Kernel ``name`` of ``tests/corpus/<file>``."""
    return parse_file(str(HERE / file)).kernel(name)


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


@dataclass(frozen=True)
class Step:
    """One launch as the original writes it: ``kernel<<<grid, block>>>(args)``.

    ``args`` maps each parameter to a buffer name (``str``) or a scalar value."""

    file: str
    name: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: Mapping[str, object]
    #: the dynamic shared extent in elements (CUDA's third launch parameter, in bytes
    #: there, divided by the element size; LCH-50); None when the launch gives none
    shared: int | None = None

    @property
    def kernel(self) -> Kernel:
        return kernel(self.file, self.name)

    @property
    def threads(self) -> int:
        """Every thread the grid starts (CUDA starts whole blocks)."""
        return math.prod(self.grid) * math.prod(self.block)

    @property
    def one_d(self) -> bool:
        return len(self.grid) == 1 and len(self.block) == 1

    def shape_text(self) -> str:
        g = "x".join(map(str, self.grid))
        b = "x".join(map(str, self.block))
        sh = "" if self.shared is None else f", {self.shared} * sizeof(float)"
        return f"<<<{g}, {b}{sh}>>>"

    def bind(self, bufs: Mapping[str, NDArray[np.generic]]) -> dict[str, object]:
        return {k: (bufs[v] if isinstance(v, str) else v) for k, v in self.args.items()}


def launch_record_has_shape() -> bool:
    """Whether the launch record (LCH-1, LCH-24) can carry a grid and block of several
    dimensions today."""
    return "grid" in attrs.fields_dict(Launch)


def as_launch(step: Step) -> Launch | str:
    """The step as the one launch record, or why the record cannot express it (a finding,
    never a changed launch)."""
    if step.one_d:
        return KernelLaunch(step.kernel, step.threads, step.block[0], dict(step.args),
                            shared=step.shared)
    if launch_record_has_shape():
        lc = KernelLaunch(step.kernel, step.threads, math.prod(step.block), dict(step.args),
                          shared=step.shared)
        return attrs.evolve(lc, grid=step.grid, block_shape=step.block)
    return (f"the launch record (LCH-1) has a thread count and a block size only: "
            f"{step.name}{step.shape_text()} cannot be written")


@dataclass(frozen=True)
class Scenario:
    """A user's launch sequence over named buffers, with references of each kernel."""

    name: str
    steps: tuple[Step, ...]
    make_buffers: Callable[[int], Arrays]
    #: reference of each step, in order: updates the buffers as the original would
    refs: tuple[Callable[[Arrays], None], ...]
    #: per step, the buffer holding a transcendental result and the ULP bound story
    #: (None: the reference is bitwise)
    transcendental: tuple[str | None, ...] = field(default=())

    def buffers(self, seed: int = 0) -> Arrays:
        return self.make_buffers(seed)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _randf(rng: np.random.Generator, n: int, lo: float = -2.0, hi: float = 2.0) -> NDArray[np.float32]:
    return rng.uniform(lo, hi, n).astype(F32)


# ------------------------------------------------------------------ references (numpy)
# Each reference computes in the original's types, one rounding per C operation, in the
# original's order; float32 numpy arithmetic rounds each operation as C does with
# contraction off.


def ref_vector_add(b: Arrays, n: int) -> None:
    b["C"][:n] = (b["A"][:n] + b["B"][:n]) + F32(0.0)


def ref_bias_relu(b: Arrays, n: int, bias: float, c: str = "C", d: str = "D") -> None:
    v = b[c][:n] + F32(bias)
    b[d][:n] = np.where(v > F32(0.0), v, F32(0.0))


def ref_matrix_mul(b: Arrays, h_a: int, w_a: int, w_b: int, bs: int) -> None:
    a = b["MA"].reshape(h_a, w_a)
    bm = b["MB"].reshape(w_a, w_b)
    c = np.zeros((h_a, w_b), F32)
    for kt in range(0, w_a, bs):  # tile by tile, k in order, as the kernel accumulates
        for k in range(kt, kt + bs):
            c = c + a[:, k:k + 1] * bm[k:k + 1, :]
    b["MC"][:] = c.reshape(-1)


def ref_add_bias(b: Arrays, out: str, bias: str, n: int, oc: int) -> None:
    idx = np.arange(n)
    b[out][:n] = b[out][:n] + b[bias][idx % oc]


def gelu_tanh_arg(x: NDArray[np.float32]) -> NDArray[np.float32]:
    s = np.sqrt(F32(2.0 / 3.141592653589793))
    cube = F32(0.044715) * x * x * x
    return s * (x + cube)


def gelu_from_tanh(x: NDArray[np.float32], t: NDArray[np.float32]) -> NDArray[np.float32]:
    return F32(0.5) * x * (F32(1.0) + t)


def ref_gelu(b: Arrays, out: str, inp: str, n: int) -> None:
    x = b[inp][:n]
    b[out][:n] = gelu_from_tanh(x, np.tanh(gelu_tanh_arg(x)))


def ref_residual(b: Arrays, out: str, i1: str, i2: str, n: int) -> None:
    b[out][:n] = b[i1][:n] + b[i2][:n]


def softmax_rows(inp: NDArray[np.float32], rows: int, c: int,
                 exp: Callable[[NDArray[np.float32]], NDArray[np.float32]]) -> NDArray[np.float32]:
    x = inp[:rows * c].reshape(rows, c)
    maxval = np.full(rows, -np.inf, F32)
    for j in range(c):
        maxval = np.where(x[:, j] > maxval, x[:, j], maxval)
    e = exp(x - maxval[:, None])
    s = np.zeros(rows, np.float64)
    for j in range(c):
        s = s + e[:, j].astype(np.float64)
    return (e / s.astype(F32)[:, None]).reshape(-1)


def ref_softmax(b: Arrays, out: str, inp: str, rows: int, c: int) -> None:
    b[out][:rows * c] = softmax_rows(b[inp], rows, c, np.exp)


ExpF = Callable[[NDArray[np.float32]], NDArray[np.float32]]


def softmax2_rows(inp: NDArray[np.float32], rows: int, c: int, bs: int, num_exp: ExpF,
                  sum_exp: ExpF) -> NDArray[np.float32]:
    """softmax_forward_kernel2 block by block: per-thread strided partials, then the shared
    tree reduction (stride bs/2 .. 1). The quotient's numerator takes ``num_exp``, the sum
    ``sum_exp`` (the same exps in the kernel; the two differ for CG-15's bound only)."""
    x = inp[:rows * c].reshape(rows, c)
    part = np.full((rows, bs), -np.inf, F32)
    for i in range(c):
        part[:, i % bs] = np.maximum(part[:, i % bs], x[:, i])
    offset = part.max(axis=1)  # max is exact: its order does not matter
    d = x - offset[:, None]
    sums = np.zeros((rows, bs), F32)
    e_sum = sum_exp(d)
    for i in range(c):
        sums[:, i % bs] = sums[:, i % bs] + e_sum[:, i]
    stride = bs // 2
    while stride >= 1:
        sums[:, :stride] = sums[:, :stride] + sums[:, stride:2 * stride]
        stride //= 2
    return (num_exp(d) / sums[:, :1]).reshape(-1)


def ref_softmax2(b: Arrays, out: str, inp: str, rows: int, c: int, bs: int) -> None:
    b[out][:rows * c] = softmax2_rows(b[inp], rows, c, bs, np.exp, np.exp)


def softmax_online_rows(inp: NDArray[np.float32], rows: int, c: int, num_exp: ExpF,
                        sum_exp: ExpF) -> NDArray[np.float32]:
    """softmax_forward_online_kernel1: the running max and a double sum rescaled by
    ``expf(maxval_prev - maxval)`` when the max grows (``sum_exp`` in the sum, ``num_exp``
    in the final quotient)."""
    x = inp[:rows * c].reshape(rows, c)
    maxval = np.full(rows, -np.inf, F32)
    s = np.zeros(rows, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(c):
            prev, cur = maxval, x[:, j]
            bigger = cur > maxval
            new_max = np.where(bigger, cur, maxval)
            grow = (s * sum_exp(prev - new_max).astype(np.float64)
                    + sum_exp(cur - new_max).astype(np.float64))
            keep = s + sum_exp(cur - maxval).astype(np.float64)
            s = np.where(bigger, grow, keep)
            maxval = new_max
    return (num_exp(x - maxval[:, None]).astype(np.float64) / s[:, None]).astype(F32).reshape(-1)


def ref_softmax_online(b: Arrays, out: str, inp: str, rows: int, c: int) -> None:
    b[out][:rows * c] = softmax_online_rows(b[inp], rows, c, np.exp, np.exp)


def ref_matmul_forward(b: Arrays, bt: int, c: int, oc: int, has_bias: bool) -> None:
    inp = b["inp"].reshape(bt, c)
    w = b["weight"].reshape(oc, c)
    val = np.broadcast_to(b["bias"] if has_bias else np.zeros(oc, F32), (bt, oc)).astype(F32)
    for i in range(c):
        val = val + inp[:, i:i + 1] * w[:, i][None, :]
    b["out"][:bt * oc] = val.reshape(-1)


CONV = [F32(v) for v in (0.2, 0.5, -0.8, -0.3, 0.6, -0.9, 0.4, 0.7, 0.10)]


def ref_conv2d(b: Arrays, ni: int, nj: int) -> None:
    a = b["A"].reshape(ni, nj)
    out = b["B"].reshape(ni, nj)
    c11, c21, c31, c12, c22, c32, c13, c23, c33 = CONV

    def at(di: int, dj: int) -> NDArray[np.float32]:
        return a[1 + di:ni - 1 + di, 1 + dj:nj - 1 + dj]

    out[1:ni - 1, 1:nj - 1] = (c11 * at(-1, -1) + c21 * at(-1, 0) + c31 * at(-1, 1)
                               + c12 * at(0, -1) + c22 * at(0, 0) + c32 * at(0, 1)
                               + c13 * at(1, -1) + c23 * at(1, 0) + c33 * at(1, 1))


CONV3 = dict(c11=F32(2), c21=F32(5), c31=F32(-8), c12=F32(-3), c22=F32(6), c32=F32(-9),
             c13=F32(4), c23=F32(7), c33=F32(10))


def ref_conv3d_plane(b: Arrays, ni: int, nj: int, nk: int, i: int) -> None:
    """convolution3D_kernel's plane i (a no-op outside 0 < i < ni - 1)."""
    if not 0 < i < ni - 1 or nj < 3 or nk < 3:
        return
    a = b["A"].reshape(ni, nj, nk)
    out = b["B"].reshape(ni, nj, nk)
    c = CONV3

    def at(di: int, dj: int, dk: int) -> NDArray[np.float32]:
        return a[i + di, 1 + dj:nj - 1 + dj, 1 + dk:nk - 1 + dk]

    out[i, 1:nj - 1, 1:nk - 1] = (
        c["c11"] * at(-1, -1, -1) + c["c13"] * at(1, -1, -1) + c["c21"] * at(-1, -1, -1)
        + c["c23"] * at(1, -1, -1) + c["c31"] * at(-1, -1, -1) + c["c33"] * at(1, -1, -1)
        + c["c12"] * at(0, -1, 0) + c["c22"] * at(0, 0, 0) + c["c32"] * at(0, 1, 0)
        + c["c11"] * at(-1, -1, 1) + c["c13"] * at(1, -1, 1) + c["c21"] * at(-1, 0, 1)
        + c["c23"] * at(1, 0, 1) + c["c31"] * at(-1, 1, 1) + c["c33"] * at(1, 1, 1))


def ref_threshold(b: Arrays, ni: int, nj: int, level: float) -> None:
    n = ni * nj
    b["T"][:n] = np.where(b["B"][:n] > F32(level), F32(1.0), F32(0.0))


def ref_fdtd1(b: Arrays, nx: int, ny: int, t: int) -> None:
    ey, hz = b["ey"].reshape(nx, ny), b["hz"].reshape(nx, ny)
    new = ey.copy()
    new[0, :] = b["fict"][t]
    new[1:, :] = ey[1:, :] - F32(0.5) * (hz[1:, :] - hz[:-1, :])
    ey[...] = new


def ref_fdtd2(b: Arrays, nx: int, ny: int) -> None:
    ex, hz = b["ex"].reshape(nx, ny), b["hz"].reshape(nx, ny)
    ex[:, 1:] = ex[:, 1:] - F32(0.5) * (hz[:, 1:] - hz[:, :-1])


def ref_fdtd3(b: Arrays, nx: int, ny: int) -> None:
    ex, ey, hz = (b[k].reshape(nx, ny) for k in ("ex", "ey", "hz"))
    hz[:-1, :-1] = hz[:-1, :-1] - F32(0.7) * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1]
                                              - ey[:-1, :-1])


def ref_jacobi1(b: Arrays, n: int) -> None:
    a, bm = b["A"].reshape(n, n), b["B"].reshape(n, n)
    bm[1:n - 1, 1:n - 1] = F32(0.2) * (a[1:n - 1, 1:n - 1] + a[1:n - 1, 0:n - 2]
                                       + a[1:n - 1, 2:n] + a[2:n, 1:n - 1]
                                       + a[0:n - 2, 1:n - 1])


def ref_jacobi2(b: Arrays, n: int) -> None:
    a, bm = b["A"].reshape(n, n), b["B"].reshape(n, n)
    a[1:n - 1, 1:n - 1] = bm[1:n - 1, 1:n - 1]


def srad_rc(ne: int, nr: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    ei = np.arange(ne)
    row = (ei + 1) % nr - 1
    col = (ei + 1) // nr + 1 - 1
    wrap = (ei + 1) % nr == 0
    return np.where(wrap, nr - 1, row), np.where(wrap, col - 1, col)


def ref_srad(b: Arrays, nr: int, ne: int, q0sqr: float) -> None:
    row, col = srad_rc(ne, nr)
    img = b["I"].copy()
    jc = img[:ne]
    dn = img[b["iN"][row] + nr * col] - jc
    ds = img[b["iS"][row] + nr * col] - jc
    dw = img[row + nr * b["jW"][col]] - jc
    de = img[row + nr * b["jE"][col]] - jc
    g2 = (dn * dn + ds * ds + dw * dw + de * de) / (jc * jc)
    lap = (dn + ds + dw + de) / jc
    num = (0.5 * g2.astype(np.float64) - (1.0 / 16.0) * (lap * lap).astype(np.float64)).astype(F32)
    den = (1.0 + 0.25 * lap.astype(np.float64)).astype(F32)
    qsqr = num / (den * den)
    q0 = F32(q0sqr)
    den2 = (qsqr - q0) / (q0 * (F32(1.0) + q0))
    c = (1.0 / (1.0 + den2.astype(np.float64))).astype(F32)
    c = np.where(c < F32(0.0), F32(0.0), np.where(c > F32(1.0), F32(1.0), c))
    for k, v in (("dN", dn), ("dS", ds), ("dW", dw), ("dE", de), ("c", c)):
        b[k][:ne] = v


def ref_srad2(b: Arrays, nr: int, ne: int, lam: float) -> None:
    row, col = srad_rc(ne, nr)
    c = b["c"]
    cn = c[:ne]
    cs = c[b["iS"][row] + nr * col]
    cw = c[:ne]
    ce = c[row + nr * b["jE"][col]]
    d = cn * b["dN"][:ne] + cs * b["dS"][:ne] + cw * b["dW"][:ne] + ce * b["dE"][:ne]
    b["I"][:ne] = b["I"][:ne] + F32(0.25) * F32(lam) * d


def _clamped(a: NDArray[np.float32]) -> tuple[NDArray[np.float32], ...]:
    """a's north, south, west and east neighbours, the border repeating itself (what
    srad_v2's tiles and border loads amount to)."""
    rows, cols = a.shape
    r, c = np.arange(rows), np.arange(cols)
    return (a[np.maximum(r - 1, 0), :], a[np.minimum(r + 1, rows - 1), :],
            a[:, np.maximum(c - 1, 0)], a[:, np.minimum(c + 1, cols - 1)])


def ref_srad_v2_1(b: Arrays, rows: int, cols: int, q0sqr: float) -> None:
    jc = b["J"].reshape(rows, cols)
    north, south, west, east = _clamped(jc)
    n, s, w, e = north - jc, south - jc, west - jc, east - jc
    g2 = (n * n + s * s + w * w + e * e) / (jc * jc)
    lap = (n + s + w + e) / jc
    num = (0.5 * g2.astype(np.float64) - (1.0 / 16.0) * (lap * lap).astype(np.float64)).astype(F32)
    den = (1.0 + 0.25 * lap.astype(np.float64)).astype(F32)
    qsqr = num / (den * den)
    q0 = F32(q0sqr)
    den2 = (qsqr - q0) / (q0 * (F32(1.0) + q0))
    c = (1.0 / (1.0 + den2.astype(np.float64))).astype(F32)
    c = np.where(c < F32(0.0), F32(0.0), np.where(c > F32(1.0), F32(1.0), c))
    for k, v in (("C", c), ("E", e), ("W", w), ("S", s), ("N", n)):
        b[k][:] = v.reshape(-1)


def ref_srad_v2_2(b: Arrays, rows: int, cols: int, lam: float) -> None:
    c = b["C"].reshape(rows, cols)
    _, cs, _, ce = _clamped(c)
    grid = {k: b[k].reshape(rows, cols) for k in ("N", "S", "W", "E")}
    d = c * grid["N"] + cs * grid["S"] + c * grid["W"] + ce * grid["E"]
    j = b["J"].reshape(rows, cols)
    b["J"][:] = (j.astype(np.float64) + 0.25 * np.float64(F32(lam)) * d.astype(np.float64)
                 ).astype(F32).reshape(-1)


def ref_extract(b: Arrays, ne: int) -> None:
    b["I"][:ne] = np.exp(b["I"][:ne] / F32(255.0))


def ref_hotspot(b: Arrays, src: str, dst: str, rows: int, cols: int, iteration: int,
                border: int, cap: float, rx: float, ry: float, rz: float, step: float) -> None:
    """The pyramid kernel block by block, as the original computes it (BLOCK_SIZE 16)."""
    bs = 16
    temp, power, out = (b[src].reshape(rows, cols), b["power"].reshape(rows, cols),
                        b[dst].reshape(rows, cols))
    small = bs - iteration * 2
    bcols = cols // small + (0 if cols % small == 0 else 1)
    brows = rows // small + (0 if rows % small == 0 else 1)
    amb = F32(80.0)
    sdc = F32(step) / F32(cap)
    rx1, ry1, rz1 = F32(1) / F32(rx), F32(1) / F32(ry), F32(1) / F32(rz)
    for by in range(brows):
        for bx in range(bcols):
            blk_y, blk_x = small * by - border, small * bx - border
            t_on = np.zeros((bs, bs), F32)
            p_on = np.zeros((bs, bs), F32)
            for ty in range(bs):
                for tx in range(bs):
                    y, x = blk_y + ty, blk_x + tx
                    if 0 <= y <= rows - 1 and 0 <= x <= cols - 1:
                        t_on[ty, tx], p_on[ty, tx] = temp[y, x], power[y, x]
            vymin = -blk_y if blk_y < 0 else 0
            vymax = bs - 1 - (blk_y + bs - 1 - rows + 1) if blk_y + bs - 1 > rows - 1 else bs - 1
            vxmin = -blk_x if blk_x < 0 else 0
            vxmax = bs - 1 - (blk_x + bs - 1 - cols + 1) if blk_x + bs - 1 > cols - 1 else bs - 1
            t_t = np.zeros((bs, bs), F32)
            computed = np.zeros((bs, bs), bool)
            for i in range(iteration):
                computed[:] = False
                for ty in range(bs):
                    for tx in range(bs):
                        if (i + 1 <= tx <= bs - i - 2 and i + 1 <= ty <= bs - i - 2
                                and vxmin <= tx <= vxmax and vymin <= ty <= vymax):
                            n_, s_ = max(ty - 1, vymin), min(ty + 1, vymax)
                            w_, e_ = max(tx - 1, vxmin), min(tx + 1, vxmax)
                            c = np.float64(t_on[ty, tx])
                            val = c + np.float64(sdc) * (
                                np.float64(p_on[ty, tx])
                                + (np.float64(t_on[s_, tx] + t_on[n_, tx]) - 2.0 * c)
                                * np.float64(ry1)
                                + (np.float64(t_on[ty, e_] + t_on[ty, w_]) - 2.0 * c)
                                * np.float64(rx1)
                                + np.float64((amb - t_on[ty, tx]) * rz1))
                            t_t[ty, tx] = F32(val)
                            computed[ty, tx] = True
                if i == iteration - 1:
                    break
                t_on = np.where(computed, t_t, t_on)
            for ty in range(bs):
                for tx in range(bs):
                    if computed[ty, tx]:
                        out[blk_y + ty, blk_x + tx] = t_t[ty, tx]


def ref_mean(b: Arrays, m: int, n: int, cols: int) -> None:
    """mean_kernel over the columns its (truncated) grid covers."""
    data = b["data"].reshape(n, m)
    acc = np.zeros(cols, F32)
    for i in range(n):
        acc = acc + data[i, :cols]
    b["mean"][:cols] = acc / F32(3214212.01)


def ref_reduce(b: Arrays, m: int, n: int, rows: int, cols: int) -> None:
    """reduce_kernel over the rows and columns its grid covers."""
    data = b["data"].reshape(n, m)
    data[:rows, :cols] = data[:rows, :cols] - b["mean"][:cols]


def ref_covar(b: Arrays, m: int, n: int, cols: int) -> None:
    data = b["data"].reshape(n, m)
    sym = b["symmat"].reshape(m, m)
    for j1 in range(cols):
        acc = np.zeros(m - j1, F32)  # symmat[j1, j2] for j2 = j1 .. m-1, i in order
        for i in range(n):
            acc = acc + data[i, j1] * data[i, j1:]
        sym[j1, j1:] = acc
        sym[j1:, j1] = acc


def ref_mm2_1(b: Arrays, ni: int, nj: int, nk: int, alpha: float) -> None:
    a, bm = b["A"].reshape(ni, nk), b["B"].reshape(nk, nj)
    acc = np.zeros((ni, nj), F32)
    for k in range(nk):
        acc = acc + (F32(alpha) * a[:, k:k + 1]) * bm[k:k + 1, :]
    b["tmp"][:] = acc.reshape(-1)


def ref_mm2_2(b: Arrays, ni: int, nj: int, nl: int, beta: float) -> None:
    tmp, c = b["tmp"].reshape(ni, nj), b["C"].reshape(nj, nl)
    d = b["D"].reshape(ni, nl) * F32(beta)
    for k in range(nj):
        d = d + tmp[:, k:k + 1] * c[k:k + 1, :]
    b["D"][:] = d.reshape(-1)


def ref_layernorm(b: Arrays, rows: int, c: int) -> None:
    x = b["Y"][:rows * c].reshape(rows, c)
    m = np.zeros(rows, F32)
    for i in range(c):
        m = m + x[:, i]
    m = m / F32(c)
    v = np.zeros(rows, F32)
    for i in range(c):
        xs = x[:, i] - m
        v = v + xs * xs
    v = v / F32(c)
    s = F32(1.0) / np.sqrt(v + F32(1e-5))
    n = s[:, None] * (x - m[:, None])
    b["LN"][:rows * c] = (n * b["lw"][None, :c] + b["lb"][None, :c]).reshape(-1)
    b["lmean"][:rows] = m
    b["lrstd"][:rows] = s


def tree_row_sums(terms: NDArray[np.float32], bs: int) -> NDArray[np.float32]:
    """Each row's sum as mean_kernel/rstd_kernel form it: thread t adds the terms t, t+bs,
    ... in order from 0.0f, then the shared tree (stride bs/2 .. 1)."""
    rows, c = terms.shape
    part = np.zeros((rows, bs), F32)
    for i in range(c):
        part[:, i % bs] = part[:, i % bs] + terms[:, i]
    stride = bs // 2
    while stride >= 1:
        part[:, :stride] = part[:, :stride] + part[:, stride:2 * stride]
        stride //= 2
    return part[:, 0]


def ref_ln_mean(b: Arrays, rows: int, c: int, bs: int) -> None:
    x = b["Y"][:rows * c].reshape(rows, c)
    b["lmean"][:rows] = tree_row_sums(x, bs) / F32(c)


def ref_ln_rstd(b: Arrays, rows: int, c: int, bs: int) -> None:
    x = b["Y"][:rows * c].reshape(rows, c)
    diff = x - b["lmean"][:rows, None]
    b["lrstd"][:rows] = F32(1.0) / np.sqrt(tree_row_sums(diff * diff, bs) / F32(c)
                                           + F32(1e-5))


def ref_ln_normalize(b: Arrays, n: int, c: int) -> None:
    idx = np.arange(n)
    bt, col = idx // c, idx % c
    nv = b["lrstd"][bt] * (b["Y"][:n] - b["lmean"][bt])
    b["LN"][:n] = nv * b["lw"][col] + b["lb"][col]


def ref_stage(b: Arrays, out: str, inp: str, op: Callable[[NDArray[np.int32]], NDArray[np.int32]]) -> None:
    b[out][:] = op(b[inp])


# ------------------------------------------------------------------------ the scenarios


def _vector_add(v: int) -> Scenario:
    n, tpb = (1000, 512, 1)[v], 256
    grid = ((n + tpb - 1) // tpb,)

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"A": _randf(r, n), "B": _randf(r, n), "C": np.full(n, np.nan, F32),
                "D": np.full(n, np.nan, F32)}

    return Scenario(
        "vectorAdd -> biasRelu",
        (Step("vectorAdd.sk", "vectorAdd", grid, (tpb,),
              {"A": "A", "B": "B", "C": "C", "numElements": n}),
         Step("biasRelu.sk", "biasRelu", grid, (tpb,),
              {"C": "C", "bias": F32(0.25), "D": "D", "numElements": n})),
        bufs,
        (lambda b: ref_vector_add(b, n), lambda b: ref_bias_relu(b, n, 0.25)))


def _matrix_mul(v: int) -> Scenario:
    bs, h_a, w_a, w_b = ((16, 32, 48, 32), (16, 16, 16, 48), (16, 48, 32, 16))[v]
    oc_block = 256

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"MA": _randf(r, h_a * w_a), "MB": _randf(r, w_a * w_b),
                "MC": np.full(h_a * w_b, np.nan, F32), "bias": _randf(r, w_b),
                "MD": np.full(h_a * w_b, np.nan, F32)}

    n = h_a * w_b
    return Scenario(
        "MatrixMulCUDA -> add_bias -> biasRelu",
        (Step("matrixMul.sk", "MatrixMulCUDA", (w_b // bs, h_a // bs), (bs, bs),
              {"C": "MC", "A": "MA", "B": "MB", "wA": w_a, "wB": w_b}),
         Step("add_bias.sk", "add_bias", (ceil_div(w_b * 1 * h_a, oc_block),), (oc_block,),
              {"out": "MC", "bias": "bias", "B": 1, "T": h_a, "OC": w_b}),
         # the ReLU: the corpus's biasRelu with a zero bias, launched as vectorAdd's idiom is
         Step("biasRelu.sk", "biasRelu", (ceil_div(n, 256),), (256,),
              {"C": "MC", "bias": F32(0.0), "D": "MD", "numElements": n})),
        bufs,
        (lambda b: ref_matrix_mul(b, h_a, w_a, w_b, bs),
         lambda b: ref_add_bias(b, "MC", "bias", n, w_b),
         lambda b: ref_bias_relu(b, n, 0.0, "MC", "MD")))


def _llm_mlp(v: int) -> Scenario:
    bb, t, c, oc, sq = ((2, 5, 12, 20, 16), (1, 3, 7, 33, 16), (4, 4, 1, 16, 16))[v]
    bt, n = bb * t, bb * t * oc
    blk = sq * sq

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"inp": _randf(r, bt * c), "weight": _randf(r, oc * c, -0.5, 0.5),
                "bias": _randf(r, oc), "out": np.full(n, np.nan, F32),
                "G": np.full(n, np.nan, F32), "X": _randf(r, n), "R": np.full(n, np.nan, F32)}

    return Scenario(
        "matmul_forward_kernel1 -> add_bias -> gelu_forward_kernel1 -> residual_forward_kernel1",
        (Step("matmul_forward.sk", "matmul_forward_kernel1",
              (ceil_div(bt, sq), ceil_div(oc, sq)), (sq, sq),
              {"out": "out", "inp": "inp", "weight": "weight", "bias": "bias",
               "has_bias": False, "BT": bt, "C": c, "OC": oc}),
         Step("add_bias.sk", "add_bias", (ceil_div(oc * bb * t, blk),), (blk,),
              {"out": "out", "bias": "bias", "B": bb, "T": t, "OC": oc}),
         Step("gelu_forward.sk", "gelu_forward_kernel1", (ceil_div(n, 128),), (128,),
              {"out": "G", "inp": "out", "N": n}),
         Step("residual_forward.sk", "residual_forward_kernel1", (ceil_div(n, 128),), (128,),
              {"out": "R", "inp1": "G", "inp2": "X", "N": n})),
        bufs,
        (lambda b: ref_matmul_forward(b, bt, c, oc, False),
         lambda b: ref_add_bias(b, "out", "bias", n, oc),
         lambda b: ref_gelu(b, "G", "out", n),
         lambda b: ref_residual(b, "R", "G", "X", n)),
        (None, None, "G", None))


def _softmax(v: int) -> Scenario:
    rows, c = ((37, 24), (1, 1), (64, 3))[v]
    n = rows * c

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"S": _randf(r, n), "M": _randf(r, n), "Z": np.full(n, np.nan, F32),
                "P": np.full(n, np.nan, F32)}

    return Scenario(
        "residual_forward_kernel1 -> softmax_forward_kernel1",
        (Step("residual_forward.sk", "residual_forward_kernel1", (ceil_div(n, 256),), (256,),
              {"out": "Z", "inp1": "S", "inp2": "M", "N": n}),
         Step("softmax_forward.sk", "softmax_forward_kernel1", (ceil_div(rows, 32),), (32,),
              {"out": "P", "inp": "Z", "N": rows, "C": c})),
        bufs,
        (lambda b: ref_residual(b, "Z", "S", "M", n),
         lambda b: ref_softmax(b, "P", "Z", rows, c)),
        (None, "P"))


def _softmax2(v: int) -> Scenario:
    rows, c, bs = ((6, 100, 32), (1, 1, 32), (3, 64, 64))[v]
    n = rows * c

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"S": _randf(r, n), "M": _randf(r, n), "Z": np.full(n, np.nan, F32),
                "P": np.full(n, np.nan, F32)}

    return Scenario(
        "residual_forward_kernel1 -> softmax_forward_kernel2",
        (Step("residual_forward.sk", "residual_forward_kernel1", (ceil_div(n, 256),), (256,),
              {"out": "Z", "inp1": "S", "inp2": "M", "N": n}),
         Step("softmax_forward.sk", "softmax_forward_kernel2", (rows,), (bs,),
              {"out": "P", "inp": "Z", "N": rows, "C": c}, shared=bs)),
        bufs,
        (lambda b: ref_residual(b, "Z", "S", "M", n),
         lambda b: ref_softmax2(b, "P", "Z", rows, c, bs)),
        (None, "P"))


def _softmax_online(v: int) -> Scenario:
    rows, c = ((37, 24), (1, 1), (64, 3))[v]
    n = rows * c

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"S": _randf(r, n), "M": _randf(r, n), "Z": np.full(n, np.nan, F32),
                "P": np.full(n, np.nan, F32)}

    return Scenario(
        "residual_forward_kernel1 -> softmax_forward_online_kernel1",
        (Step("residual_forward.sk", "residual_forward_kernel1", (ceil_div(n, 256),), (256,),
              {"out": "Z", "inp1": "S", "inp2": "M", "N": n}),
         Step("softmax_forward.sk", "softmax_forward_online_kernel1", (ceil_div(rows, 32),),
              (32,), {"out": "P", "inp": "Z", "N": rows, "C": c})),
        bufs,
        (lambda b: ref_residual(b, "Z", "S", "M", n),
         lambda b: ref_softmax_online(b, "P", "Z", rows, c)),
        (None, "P"))


def _conv(v: int) -> Scenario:
    ni = nj = (20, 9, 3)[v]

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"A": r.uniform(0, 1, ni * nj).astype(F32), "B": _randf(r, ni * nj),
                "T": np.full(ni * nj, np.nan, F32)}

    grid = (math.ceil(ni / 32), math.ceil(nj / 8))
    return Scenario(
        "convolution2D_kernel -> threshold2D",
        (Step("convolution2D.sk", "convolution2D_kernel", grid, (32, 8),
              {"ni": ni, "nj": nj, "A": "A", "B": "B"}),
         Step("threshold2D.sk", "threshold2D", grid, (32, 8),
              {"ni": ni, "nj": nj, "B": "B", "T": "T", "level": F32(0.5)})),
        bufs,
        (lambda b: ref_conv2d(b, ni, nj), lambda b: ref_threshold(b, ni, nj, 0.5)))


def _conv3d(v: int) -> Scenario:
    ni, nj, nk = ((5, 10, 40), (4, 9, 33), (4, 3, 3))[v]

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"A": _randf(r, ni * nj * nk), "B": _randf(r, ni * nj * nk)}

    grid = (math.ceil(nk / 32), math.ceil(nj / 8))
    dims = {"ni": ni, "nj": nj, "nk": nk, "A": "A", "B": "B"}
    # the first two iterations of the original's plane loop: i = 1, then i = 2
    return Scenario(
        "convolution3D_kernel(i = 1) -> convolution3D_kernel(i = 2)",
        (Step("convolution3D.sk", "convolution3D_kernel", grid, (32, 8), {**dims, "i": 1}),
         Step("convolution3D.sk", "convolution3D_kernel", grid, (32, 8), {**dims, "i": 2})),
        bufs,
        (lambda b: ref_conv3d_plane(b, ni, nj, nk, 1),
         lambda b: ref_conv3d_plane(b, ni, nj, nk, 2)))


def _fdtd(v: int) -> Scenario:
    nx, ny, tmax, t = ((12, 40, 4, 2), (9, 33, 3, 0), (1, 1, 1, 0))[v]

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"fict": np.arange(tmax, dtype=F32), "ex": _randf(r, nx * ny),
                "ey": _randf(r, nx * ny), "hz": _randf(r, nx * ny)}

    grid = (math.ceil(ny / 32), math.ceil(nx / 8))
    common = {"nx": nx, "ny": ny, "ex": "ex", "ey": "ey", "hz": "hz", "t": t}
    return Scenario(
        "fdtd_step1_kernel -> fdtd_step2_kernel -> fdtd_step3_kernel",
        (Step("fdtd2d.sk", "fdtd_step1_kernel", grid, (32, 8), {**common, "_fict_": "fict"}),
         Step("fdtd2d.sk", "fdtd_step2_kernel", grid, (32, 8), common),
         Step("fdtd2d.sk", "fdtd_step3_kernel", grid, (32, 8), common)),
        bufs,
        (lambda b: ref_fdtd1(b, nx, ny, t), lambda b: ref_fdtd2(b, nx, ny),
         lambda b: ref_fdtd3(b, nx, ny)))


def _jacobi(v: int) -> Scenario:
    n = (40, 33, 3)[v]

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"A": _randf(r, n * n), "B": _randf(r, n * n)}

    grid = (math.ceil(n / 32), math.ceil(n / 8))
    args = {"n": n, "A": "A", "B": "B"}
    # two time steps of the original's loop: kernel1, kernel2, kernel1 (the third launch
    # is the next step's kernel1, so both adjacent pairs of the loop are decided)
    return Scenario(
        "runJacobiCUDA_kernel1 -> runJacobiCUDA_kernel2 -> runJacobiCUDA_kernel1",
        (Step("jacobi2D.sk", "runJacobiCUDA_kernel1", grid, (32, 8), args),
         Step("jacobi2D.sk", "runJacobiCUDA_kernel2", grid, (32, 8), args),
         Step("jacobi2D.sk", "runJacobiCUDA_kernel1", grid, (32, 8), args)),
        bufs,
        (lambda b: ref_jacobi1(b, n), lambda b: ref_jacobi2(b, n), lambda b: ref_jacobi1(b, n)))


def _srad(v: int) -> Scenario:
    nr, nc, nt = ((20, 30, 256), (16, 16, 256), (3, 2, 256))[v]
    ne = nr * nc
    q0sqr, lam = 0.05, 0.5

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        i_n = np.arange(nr, dtype=np.int32) - 1
        i_s = np.arange(nr, dtype=np.int32) + 1
        j_w = np.arange(nc, dtype=np.int32) - 1
        j_e = np.arange(nc, dtype=np.int32) + 1
        i_n[0], i_s[nr - 1], j_w[0], j_e[nc - 1] = 0, nr - 1, 0, nc - 1  # as main.cu
        out: Arrays = {"I": r.uniform(0.5, 1.5, ne).astype(F32), "iN": i_n, "iS": i_s,
                       "jW": j_w, "jE": j_e}
        for k in ("dN", "dS", "dW", "dE", "c"):
            out[k] = np.full(ne, np.nan, F32)
        return out

    grid = (ne // nt + (1 if ne % nt else 0),)
    common = {"d_lambda": F32(lam), "d_Nr": nr, "d_Nc": nc, "d_Ne": np.int64(ne),
              "d_iN": "iN", "d_iS": "iS", "d_jE": "jE", "d_jW": "jW", "d_dN": "dN",
              "d_dS": "dS", "d_dE": "dE", "d_dW": "dW", "d_c": "c", "d_I": "I"}
    return Scenario(
        "srad -> srad2",
        (Step("srad.sk", "srad", grid, (nt,), {**common, "d_q0sqr": F32(q0sqr)}),
         Step("srad.sk", "srad2", grid, (nt,), common)),
        bufs,
        (lambda b: ref_srad(b, nr, ne, q0sqr), lambda b: ref_srad2(b, nr, ne, lam)))


def _srad_v2(v: int) -> Scenario:
    # multiples of 16, at least 2 x 2 blocks (see srad_v2.sk: the original needs both)
    rows, cols = ((32, 48), (32, 32), (48, 32))[v]
    q0sqr, lam = 0.05, 0.5

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        out: Arrays = {"J": r.uniform(0.5, 1.5, rows * cols).astype(F32)}
        for k in ("C", "E", "W", "S", "N"):
            out[k] = np.full(rows * cols, np.nan, F32)
        return out

    grid = (cols // 16, rows // 16)
    common = {"E_C": "E", "W_C": "W", "N_C": "N", "S_C": "S", "J_cuda": "J", "C_cuda": "C",
              "cols": cols, "rows": rows, "q0sqr": F32(q0sqr)}
    return Scenario(
        "srad_cuda_1 -> srad_cuda_2",
        (Step("srad_v2.sk", "srad_cuda_1", grid, (16, 16), common),
         Step("srad_v2.sk", "srad_cuda_2", grid, (16, 16), {**common, "lambda": F32(lam)})),
        bufs,
        (lambda b: ref_srad_v2_1(b, rows, cols, q0sqr),
         lambda b: ref_srad_v2_2(b, rows, cols, lam)))


def _extract(v: int) -> Scenario:
    ne, nt = (600, 256, 1)[v], 256

    def bufs(seed: int) -> Arrays:
        return {"I": _rng(seed).uniform(0, 255, ne).astype(F32)}

    return Scenario(
        "extract",
        (Step("srad_extract.sk", "extract", (ne // nt + (1 if ne % nt else 0),), (nt,),
              {"d_Ne": np.int64(ne), "d_I": "I"}),),
        bufs, (lambda b: ref_extract(b, ne),), ("I",))


def _hotspot(v: int) -> Scenario:
    rows, cols, it = ((20, 20, 1), (13, 13, 2), (30, 30, 3))[v]
    border = it * 2 // 2
    small = 16 - it * 2
    grid = (cols // small + (0 if cols % small == 0 else 1),
            rows // small + (0 if rows % small == 0 else 1))
    # the chip constants of compute_tran_temp (chip 0.016 x 0.016, t_chip 0.0005)
    gh, gw, t_chip = F32(0.016) / F32(rows), F32(0.016) / F32(cols), F32(0.0005)
    cap = F32(0.5 * 1.75e6 * float(t_chip) * float(gw) * float(gh))
    rx = F32(float(gw) / (2.0 * 100 * float(t_chip) * float(gh)))
    ry = F32(float(gh) / (2.0 * 100 * float(t_chip) * float(gw)))
    rz = F32(float(t_chip) / (100 * float(gh) * float(gw)))
    step = F32(0.001 / (3.0e6 / (0.5 * float(t_chip) * 1.75e6)))
    n = rows * cols

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"power": r.uniform(0, 1e-3, n).astype(F32),
                "T0": r.uniform(320, 340, n).astype(F32), "T1": np.zeros(n, F32)}

    def args(src: str, dst: str) -> dict[str, object]:
        return {"iteration": it, "power": "power", "temp_src": src, "temp_dst": dst,
                "grid_cols": cols, "grid_rows": rows, "border_cols": border,
                "border_rows": border, "Cap": cap, "Rx": rx, "Ry": ry, "Rz": rz, "step": step}

    scal = (float(cap), float(rx), float(ry), float(rz), float(step))
    return Scenario(
        "calculate_temp -> calculate_temp",
        (Step("hotspot.sk", "calculate_temp", grid, (16, 16), args("T0", "T1")),
         Step("hotspot.sk", "calculate_temp", grid, (16, 16), args("T1", "T0"))),
        bufs,
        (lambda b: ref_hotspot(b, "T0", "T1", rows, cols, it, border, *scal),
         lambda b: ref_hotspot(b, "T1", "T0", rows, cols, it, border, *scal)))


def _covariance(v: int) -> Scenario:
    m, n = ((256, 32), (512, 32), (256, 64))[v]
    g1 = int(math.ceil(float(np.float32(m))) / float(np.float32(256.0)))  # (size_t)(ceil(M) / 256)
    g2 = (int(math.ceil(float(m)) / 32.0), int(math.ceil(float(n)) / 32.0))
    rows, cols = g2[1] * 8, min(m, g2[0] * 32)

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"data": _randf(r, n * m), "mean": np.full(m, np.nan, F32),
                "symmat": np.full(m * m, np.nan, F32)}

    return Scenario(
        "mean_kernel -> reduce_kernel -> covar_kernel",
        (Step("covariance.sk", "mean_kernel", (g1, 1), (256, 1),
              {"m": m, "n": n, "mean": "mean", "data": "data"}),
         Step("covariance.sk", "reduce_kernel", g2, (32, 8),
              {"m": m, "n": n, "mean": "mean", "data": "data"}),
         Step("covariance.sk", "covar_kernel", (g1, 1), (256, 1),
              {"m": m, "n": n, "symmat": "symmat", "data": "data"})),
        bufs,
        (lambda b: ref_mean(b, m, n, min(m, g1 * 256)),
         lambda b: ref_reduce(b, m, n, rows, cols),
         lambda b: ref_covar(b, m, n, min(m, g1 * 256))))


def _mm2(v: int) -> Scenario:
    ni, nj, nk, nl = ((20, 40, 12, 36), (8, 32, 1, 32), (3, 5, 7, 2))[v]
    alpha, beta = F32(1.5), F32(-0.75)
    block = (32, 8)
    g1 = (math.ceil(nj / 32), math.ceil(ni / 8))
    g2 = (math.ceil(nl / 32), math.ceil(ni / 8))

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"A": _randf(r, ni * nk), "B": _randf(r, nk * nj), "C": _randf(r, nj * nl),
                "D": _randf(r, ni * nl), "tmp": np.full(ni * nj, np.nan, F32)}

    dims = {"ni": ni, "nj": nj, "nk": nk, "nl": nl, "alpha": alpha, "beta": beta}
    return Scenario(
        "mm2_kernel1 -> mm2_kernel2",
        (Step("mm2.sk", "mm2_kernel1", g1, block, {**dims, "tmp": "tmp", "A": "A", "B": "B"}),
         Step("mm2.sk", "mm2_kernel2", g2, block, {**dims, "tmp": "tmp", "C": "C", "D": "D"})),
        bufs,
        (lambda b: ref_mm2_1(b, ni, nj, nk, float(alpha)),
         lambda b: ref_mm2_2(b, ni, nj, nl, float(beta))))


def _layernorm(v: int) -> Scenario:
    bb, t, c = ((2, 9, 16), (1, 1, 1), (4, 64, 3))[v]
    rows, n = bb * t, bb * t * c

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"R1": _randf(r, n), "R2": _randf(r, n), "Y": np.full(n, np.nan, F32),
                "LN": np.full(n, np.nan, F32), "lmean": np.full(rows, np.nan, F32),
                "lrstd": np.full(rows, np.nan, F32), "lw": _randf(r, c), "lb": _randf(r, c)}

    return Scenario(
        "residual_forward_kernel1 -> layernorm_forward_kernel1",
        (Step("residual_forward.sk", "residual_forward_kernel1", (ceil_div(n, 256),), (256,),
              {"out": "Y", "inp1": "R1", "inp2": "R2", "N": n}),
         Step("layernorm_forward.sk", "layernorm_forward_kernel1", (ceil_div(rows, 128),),
              (128,), {"out": "LN", "mean": "lmean", "rstd": "lrstd", "inp": "Y",
                       "weight": "lw", "bias": "lb", "N": rows, "C": c})),
        bufs,
        (lambda b: ref_residual(b, "Y", "R1", "R2", n), lambda b: ref_layernorm(b, rows, c)))


def _layernorm2(v: int) -> Scenario:
    # B * T * C a multiple of 256 at every size: normalization_kernel has no guard
    bb, t, c, bs = ((2, 8, 48, 32), (1, 1, 256, 32), (4, 16, 4, 64))[v]
    rows, n = bb * t, bb * t * c
    assert n % 256 == 0

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"R1": _randf(r, n), "R2": _randf(r, n), "Y": np.full(n, np.nan, F32),
                "LN": np.full(n, np.nan, F32), "lmean": np.full(rows, np.nan, F32),
                "lrstd": np.full(rows, np.nan, F32), "lw": _randf(r, c), "lb": _randf(r, c)}

    return Scenario(
        "residual_forward_kernel1 -> mean_kernel -> rstd_kernel -> normalization_kernel",
        (Step("residual_forward.sk", "residual_forward_kernel1", (ceil_div(n, 256),), (256,),
              {"out": "Y", "inp1": "R1", "inp2": "R2", "N": n}),
         Step("layernorm_forward.sk", "mean_kernel", (rows,), (bs,),
              {"mean": "lmean", "inp": "Y", "N": rows, "C": c, "block_size": bs}, shared=bs),
         Step("layernorm_forward.sk", "rstd_kernel", (rows,), (bs,),
              {"rstd": "lrstd", "inp": "Y", "mean": "lmean", "N": rows, "C": c,
               "block_size": bs}, shared=bs),
         Step("layernorm_forward.sk", "normalization_kernel", (ceil_div(n, 256),), (256,),
              {"out": "LN", "inp": "Y", "mean": "lmean", "rstd": "lrstd", "weight": "lw",
               "bias": "lb", "B": bb, "T": t, "C": c})),
        bufs,
        (lambda b: ref_residual(b, "Y", "R1", "R2", n), lambda b: ref_ln_mean(b, rows, c, bs),
         lambda b: ref_ln_rstd(b, rows, c, bs), lambda b: ref_ln_normalize(b, n, c)))


def _sarek(v: int) -> Scenario:
    n = (64, 1024, 1)[v]

    def bufs(seed: int) -> Arrays:
        r = _rng(seed)
        return {"input": r.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32),
                "a": np.zeros(n, np.int32), "b": np.zeros(n, np.int32),
                "output": np.zeros(n, np.int32)}

    return Scenario(
        "stage1 -> stage2 -> stage3",
        (Step("sarek_fusion_chain.sk", "stage1", (1,), (n,), {"a": "a", "input": "input"}),
         Step("sarek_fusion_chain.sk", "stage2", (1,), (n,), {"b": "b", "a": "a"}),
         Step("sarek_fusion_chain.sk", "stage3", (1,), (n,), {"output": "output", "b": "b"})),
        bufs,
        (lambda b: ref_stage(b, "a", "input", lambda x: x * np.int32(2)),
         lambda b: ref_stage(b, "b", "a", lambda x: x + np.int32(1)),
         lambda b: ref_stage(b, "output", "b", lambda x: x * np.int32(3))))


#: how many size variants each scenario has: 0 is the one whose decisions the table
#: records; the others are edge sizes (a whole number of blocks, one element, one block
#: row, a thin matrix) that the kernel tests run too
VARIANTS = 3


def scenarios(v: int = 0) -> list[Scenario]:
    """The scenarios at size variant ``v`` (same names and kernels, other sizes)."""
    return [f(v) for f in (_vector_add, _matrix_mul, _llm_mlp, _softmax, _conv, _fdtd, _srad,
                           _extract, _hotspot, _covariance, _mm2, _layernorm, _sarek, _jacobi,
                           _softmax2, _softmax_online, _layernorm2,
                           _srad_v2, _conv3d)]
