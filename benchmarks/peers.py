"""Peers side by side, in one run (docs/cli.md CLI-24): sarek_py against numpy, numexpr,
numba and JAX on two workloads, each row saying whether its result is bitwise sarek_py's.

    .venv/bin/python benchmarks/peers.py                      # the issue's sizes, best of 5
    .venv/bin/python benchmarks/peers.py --write              # ... and docs/performance.md
    .venv/bin/python benchmarks/peers.py --quick              # small sizes, a few seconds
    .venv/bin/python benchmarks/peers.py --backend opencl,c   # sarek_py rows of both backends

* chain: ``y = max(a * x + b, 0)`` as three kernels scale -> shift -> relu on ``--log2``
  (default 24) f32 elements: sarek_py fused (one pipeline) and unfused (three launches),
  on device arrays (fused also with the intermediates as pipeline temporaries, whose
  stores are dropped) and on numpy arrays; numpy, numexpr, numba
  ``@njit(parallel=True)`` and ``jax.jit`` (CPU) computing the same expression.
* advection: examples/advection_diffusion.sk at ``--size`` (512) squared, ``--steps`` (40):
  sarek_py unfused and fused + swap (offloaded, the whole program as a user runs it);
  numpy, numba parallel (the two loops per stage, and the stage hand-fused into one loop
  with a ping-pong of ``u``) and ``jax.jit`` with ``lax.fori_loop``, written with the
  program's operation order. The peers start from sarek_py's initial field (``exp`` is a
  libm call whose last bit differs between libraries) and set-up scalars (``dt`` …), and
  time the time loop only.

With several backends (``--backend opencl,c``, specs/native.md NAT-55) each gets its
sarek_py rows (the chain's named ``[backend]``), each compared with its own backend's
unfused run, and the unfused rows of the later backends say whether they are bitwise the
first's; the peers run once and are compared with the first backend's; the run ends with
whether ``c`` meets issue 16's targets (advection fused + swap within 1.2x of numba
parallel hand-fused; the fused chain faster than numexpr).

Every implementation runs once first (compilation), then ``--repeat`` times; the fastest
run counts. Results are compared with sarek_py's by their bytes (NaN and infinity by
their bits); a row that differs gives its largest absolute difference. A peer that is
not installed is skipped with a line saying so (``pip install .[peers]``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from advection_diffusion import variants  # noqa: E402
from chain_kernels import relu, scale, shift  # noqa: E402

import sarek_py  # noqa: E402
from sarek_py import pipeline  # noqa: E402
from sarek_py.host.interp import run_program  # noqa: E402
from sarek_py.runtime import get_backend  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PERFORMANCE = ROOT / "docs" / "performance.md"
CHART = ROOT / "docs" / "peers.png"
SECTION = "## Peers, side by side"
#: the chain's row the others are compared with
TEMPS = "sarek_py fused, device arrays, temporaries"

Array = np.ndarray[Any, Any]


@dataclass
class Row:
    """One implementation's best time and how its result compares with sarek_py's."""

    name: str
    seconds: float | None  # None: skipped
    bitwise: bool | None = None
    max_abs_diff: float | None = None
    note: str = ""
    #: the reference rows' result (each backend's unfused run), for ``--backend opencl,c``
    result: Array | None = field(default=None, repr=False)


def best_of(run: Callable[[], object], repeat: int) -> float:
    run()  # compile / warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def compare(row: Row, got: Array, ref: Array) -> Row:
    """Fill in ``row.bitwise`` (bytes, NaN and infinity by their bits) and, when the bytes
    differ, the largest absolute difference over the elements finite in both (and the
    count of non-finite elements whose bits differ)."""
    got = np.ascontiguousarray(got)
    row.bitwise = got.dtype == ref.dtype and got.shape == ref.shape \
        and got.tobytes() == ref.tobytes()
    if not row.bitwise and got.shape == ref.shape:
        g, r = got.astype(np.float64), ref.astype(np.float64)
        finite = np.isfinite(g) & np.isfinite(r)
        with np.errstate(all="ignore"):
            row.max_abs_diff = float(np.max(np.abs(g - r), where=finite, initial=0.0))
        differ = g.view(np.uint64) != r.view(np.uint64)  # float64: both widened exactly
        odd = int(np.count_nonzero(differ & ~finite))
        if odd:
            row.note = (row.note + "; " if row.note else "") + f"{odd} non-finite differ"
    return row


def skipped(name: str, why: str) -> Row:
    print(f"  skipped {name}: {why}")
    return Row(name, None, note=f"skipped: {why}")


# ------------------------------------------------------------------------------ chain


def chain_rows(n: int, repeat: int, backend_name: str
               ) -> tuple[list[Row], str, Callable[[], list[Row]]]:
    """The chain's sarek_py rows, what the fused pipeline ran, and a function giving the
    peers' rows; the reference is sarek_py's unfused run on numpy arrays."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    a, b = np.float32(2.0), np.float32(-0.5)
    backend = get_backend(backend_name)
    rows: list[Row] = []

    t, u, y_ref = (np.zeros_like(x) for _ in range(3))

    def host_unfused() -> None:
        scale[n, 256](x, t, a, n, backend=backend_name)
        shift[n, 256](t, u, b, n, backend=backend_name)
        relu[n, 256](u, y_ref, n, backend=backend_name)

    host_unfused()
    ref = y_ref.copy()
    d_x = sarek_py.to_device(x, backend=backend_name)
    d_t, d_u, d_y = (sarek_py.empty_like(d_x, backend=backend_name) for _ in range(3))

    def dev_unfused() -> None:
        scale[n, 256](d_x, d_t, a, n, backend=backend_name)
        shift[n, 256](d_t, d_u, b, n, backend=backend_name)
        relu[n, 256](d_u, d_y, n, backend=backend_name)
        backend.sync()

    def dev_fused() -> None:  # t and u are the caller's arrays: their stores stay
        with pipeline(backend=backend_name):
            scale[n, 256](d_x, d_t, a, n)
            shift[n, 256](d_t, d_u, b, n)
            relu[n, 256](d_u, d_y, n)
        backend.sync()

    def dev_fused_temporaries() -> None:  # t and u live in the pipeline: never stored
        with pipeline(backend=backend_name) as p:
            t, u = p.empty_like(d_x), p.empty_like(d_x)
            scale[n, 256](d_x, t, a, n)
            shift[n, 256](t, u, b, n)
            relu[n, 256](u, d_y, n)
        backend.sync()

    for name, run, note in (
            (TEMPS, dev_fused_temporaries, "t, u: p.empty_like, stores dropped"),
            ("sarek_py fused, device arrays", dev_fused, "t, u stored"),
            ("sarek_py unfused, device arrays", dev_unfused, "3 launches")):
        d_y = sarek_py.empty_like(d_x, backend=backend_name)  # a fresh result each
        rows.append(compare(Row(name, best_of(run, repeat), note=note), d_y.get(), ref))

    t2, u2, y2 = (np.zeros_like(x) for _ in range(3))

    def host_fused() -> sarek_py.Pipeline:
        with pipeline(backend=backend_name) as p:
            scale[n, 256](x, t2, a, n)
            shift[n, 256](t2, u2, b, n)
            relu[n, 256](u2, y2, n)
        return p

    fused_names = [lc.kernel.name for lc in host_fused().launches]
    launches = f"{len(fused_names)} launch(es): {', '.join(fused_names)}"
    rows.append(compare(Row("sarek_py fused, numpy arrays", best_of(host_fused, repeat),
                            note=launches), y2, ref))
    y_ref[:] = 0
    rows.append(compare(Row("sarek_py unfused, numpy arrays", best_of(host_unfused, repeat),
                            note="3 launches"), y_ref, ref))
    rows[-1].result = ref

    def peer_rows() -> list[Row]:
        """The peers' rows (run after every sarek_py row: a peer's thread pool may spin)."""
        rows: list[Row] = []
        out = np.empty_like(x)
        rows.append(compare(Row("numpy", best_of(lambda: np.maximum(a * x + b, 0, out=out),
                                                 repeat)), out, ref))
        try:
            import numexpr as ne
        except ImportError as exc:
            rows.append(skipped("numexpr", str(exc)))
        else:
            zero = np.float32(0)
            rows.append(compare(Row(f"numexpr ({ne.detect_number_of_cores()} threads)", best_of(
                lambda: ne.evaluate("where(a * x + b > 0, a * x + b, zero)", out=out,
                                    local_dict={"a": a, "b": b, "x": x, "zero": zero}), repeat)),
                out, ref))
        try:
            import numba
        except ImportError as exc:
            rows.append(skipped("numba", str(exc)))
        else:
            @numba.njit(parallel=True, fastmath=False)
            def nb_chain(x: Array, a: np.float32, b: np.float32, y: Array) -> None:
                for i in numba.prange(x.size):
                    v = a * x[i] + b
                    y[i] = v if v > np.float32(0) else np.float32(0)

            rows.append(compare(Row(f"numba parallel ({numba.get_num_threads()} threads)",
                                    best_of(lambda: nb_chain(x, a, b, out), repeat)), out, ref))
        jax = _jax()
        if isinstance(jax, str):
            rows.append(skipped("JAX", jax))
        else:
            import jax.numpy as jnp

            f = jax.jit(lambda v: jnp.maximum(a * v + b, jnp.float32(0)))
            jx = jax.device_put(x)
            rows.append(compare(Row("JAX jit (CPU)",
                                    best_of(lambda: f(jx).block_until_ready(), repeat)),
                                np.asarray(f(jx)), ref))
        return rows

    return rows, launches, peer_rows


def _jax() -> Any:
    """The ``jax`` module on the CPU with float64 enabled, or why it cannot be used."""
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
    except ImportError as exc:
        return str(exc)
    jax.config.update("jax_enable_x64", True)
    return jax


# -------------------------------------------------------------------------- advection


@dataclass(frozen=True)
class Grid:
    """The program's scalars after its set-up (``h``, ``dt``, the flux coefficients, the
    Runge-Kutta coefficients), read from sarek_py's run of the program with ``nt = 0``:
    the peers compute the time loop, not the set-up (the example's ``dt`` rule may change;
    the bitwise comparison then still compares like with like)."""

    n: int
    steps: int
    dt: float
    kx: float
    ky: float
    rdx: float
    rdy: float
    cx: float
    cy: float
    ra: tuple[float, float, float]
    rb: tuple[float, float, float]

    @classmethod
    def of(cls, values: dict[str, Any], steps: int) -> Grid:
        def f(name: str) -> float:
            return float(values[name])

        ra, rb = (tuple(float(v) for v in values[k]) for k in ("ra", "rb"))
        assert len(ra) == len(rb) == 3
        return cls(int(values["nx"]), steps, f("dt"), f("kx"), f("ky"), f("rdx"), f("rdy"),
                   f("cx"), f("cy"), ra, rb)  # type: ignore[arg-type]


def adv4(a: Any, b: Any, c: Any, d: Any, vel: float) -> Any:
    return vel * (7.0 * (b + c) - (a + d)) / 12.0


def dif4(a: Any, b: Any, c: Any, d: Any, k: float) -> Any:
    return k * (15.0 * (c - b) - (d - a)) / 12.0


def numpy_advection(u0: Array, g: Grid) -> Array:
    """The program in numpy, same operations in the same order. ``u`` holds the program's
    ``u[-1:n+2, -1:n+2]`` (index ``j`` at row ``j + 1``), the fluxes ``f[0:n, 0:n]``."""
    n = g.n
    u = u0.copy()
    du = np.zeros((n, n))
    fxa, fxd, fya, fyd = (np.zeros((n + 1, n + 1)) for _ in range(4))
    rows, cols = slice(2, n + 2), slice(2, n + 2)
    for _ in range(g.steps):
        for s in range(3):
            ca, cb = g.ra[s], g.rb[s]
            # x faces: j = 1..n, i = 0..n: u[j, i-1 .. i+2] is u[j+1, i .. i+3]
            xa, xb, xc, xd = (u[rows, k:k + n + 1] for k in range(4))
            fxa[1:, :] = adv4(xa, xb, xc, xd, g.cx)
            fxd[1:, :] = dif4(xa, xb, xc, xd, g.kx)
            # y faces: j = 0..n, i = 1..n
            ya, yb, yc, yd = (u[k:k + n + 1, cols] for k in range(4))
            fya[:, 1:] = adv4(ya, yb, yc, yd, g.cy)
            fyd[:, 1:] = dif4(ya, yb, yc, yd, g.ky)
            div = (fxa[1:, 1:] - fxa[1:, :-1] - (fxd[1:, 1:] - fxd[1:, :-1])) * g.rdx \
                + (fya[1:, 1:] - fya[:-1, 1:] - (fyd[1:, 1:] - fyd[:-1, 1:])) * g.rdy
            d = ca * du - g.dt * div
            du[:] = d
            u[rows, cols] = u[rows, cols] + cb * d
    return u


def numba_advection(numba: Any) -> tuple[Callable[..., Any], Callable[..., Any],
                                         Callable[..., Any]]:
    """The program in numba, parallel over rows: the two loops of a stage as written
    (unfused), and hand-fused into one loop that reads ``u`` and writes ``v`` (ping-pong,
    as the fused + swap program does); and the whole program hand-fused (allocation and
    initial field too, as sarek_py's rows time it). Same operations, same order, fastmath
    off."""
    jit = numba.njit(parallel=True, fastmath=False)
    prange = numba.prange
    adv = numba.njit(fastmath=False, inline="always")(adv4)
    dif = numba.njit(fastmath=False, inline="always")(dif4)

    @jit
    def unfused(u: Array, steps: int, dt: float, cx: float, cy: float, kx: float,
                ky: float, rdx: float, rdy: float, ra: Array, rb: Array) -> Array:
        n = u.shape[0] - 4
        du = np.zeros((n, n))
        fxa, fxd = np.zeros((n + 1, n + 1)), np.zeros((n + 1, n + 1))
        fya, fyd = np.zeros((n + 1, n + 1)), np.zeros((n + 1, n + 1))
        for _ in range(steps):
            for s in range(3):
                ca, cb = ra[s], rb[s]
                for j in prange(n + 1):
                    for i in range(n + 1):
                        # program index (j, i) of u is u[j + 1, i + 1]
                        if j >= 1:
                            a, b, c, d = u[j + 1, i], u[j + 1, i + 1], u[j + 1, i + 2], \
                                u[j + 1, i + 3]
                            fxa[j, i] = adv(a, b, c, d, cx)
                            fxd[j, i] = dif(a, b, c, d, kx)
                        if i >= 1:
                            a, b, c, d = u[j, i + 1], u[j + 1, i + 1], u[j + 2, i + 1], \
                                u[j + 3, i + 1]
                            fya[j, i] = adv(a, b, c, d, cy)
                            fyd[j, i] = dif(a, b, c, d, ky)
                for j in prange(1, n + 1):
                    for i in range(1, n + 1):
                        div = (fxa[j, i] - fxa[j, i - 1] - (fxd[j, i] - fxd[j, i - 1])) * rdx \
                            + (fya[j, i] - fya[j - 1, i] - (fyd[j, i] - fyd[j - 1, i])) * rdy
                        dd = ca * du[j - 1, i - 1] - dt * div
                        du[j - 1, i - 1] = dd
                        u[j + 1, i + 1] = u[j + 1, i + 1] + cb * dd
        return u

    @jit
    def fused(u: Array, steps: int, dt: float, cx: float, cy: float, kx: float,
              ky: float, rdx: float, rdy: float, ra: Array, rb: Array) -> Array:
        n = u.shape[0] - 4
        du = np.zeros((n, n))
        v = u.copy()
        for _ in range(steps):
            for s in range(3):
                ca, cb = ra[s], rb[s]
                for j in prange(1, n + 1):
                    for i in range(1, n + 1):
                        r, q = j + 1, i + 1  # u's row and column of program (j, i)
                        xa1 = adv(u[r, q - 2], u[r, q - 1], u[r, q], u[r, q + 1], cx)
                        xd1 = dif(u[r, q - 2], u[r, q - 1], u[r, q], u[r, q + 1], kx)
                        xa = adv(u[r, q - 1], u[r, q], u[r, q + 1], u[r, q + 2], cx)
                        xd = dif(u[r, q - 1], u[r, q], u[r, q + 1], u[r, q + 2], kx)
                        ya1 = adv(u[r - 2, q], u[r - 1, q], u[r, q], u[r + 1, q], cy)
                        yd1 = dif(u[r - 2, q], u[r - 1, q], u[r, q], u[r + 1, q], ky)
                        ya = adv(u[r - 1, q], u[r, q], u[r + 1, q], u[r + 2, q], cy)
                        yd = dif(u[r - 1, q], u[r, q], u[r + 1, q], u[r + 2, q], ky)
                        div = (xa - xa1 - (xd - xd1)) * rdx + (ya - ya1 - (yd - yd1)) * rdy
                        dd = ca * du[j - 1, i - 1] - dt * div
                        du[j - 1, i - 1] = dd
                        v[r, q] = u[r, q] + cb * dd
                u, v = v, u
        return u

    @jit
    def whole(n: int, steps: int, dt: float, cx: float, cy: float, kx: float, ky: float,
              rdx: float, rdy: float, ra: Array, rb: Array) -> Array:
        # the whole program as sarek_py runs it: allocation, the initial field (the
        # program's expression, exp of the C library as sarek_py's c backend), time loop
        h = 1.0 / float(n)
        u = np.zeros((n + 4, n + 4))
        for j in prange(1, n + 1):
            for i in range(1, n + 1):
                x = (float(i) - 0.5) * h - 0.35
                y = (float(j) - 0.5) * h - 0.5
                u[j + 1, i + 1] = np.exp(-(x * x + y * y) * 100.0)
        return fused(u, steps, dt, cx, cy, kx, ky, rdx, rdy, ra, rb)

    return unfused, fused, whole


def jax_advection(jax: Any, g: Grid) -> Callable[[Any], Any]:
    """The program in JAX: one ``lax.fori_loop`` over the steps, the three stages inside,
    under ``jit`` (XLA is free to reassociate and contract: not bitwise)."""
    import jax.numpy as jnp

    n = g.n

    def stage(u: Any, du: Any, ca: float, cb: float) -> tuple[Any, Any]:
        xa, xb, xc, xd = (u[2:n + 2, k:k + n + 1] for k in range(4))
        fxa, fxd = adv4(xa, xb, xc, xd, g.cx), dif4(xa, xb, xc, xd, g.kx)
        ya, yb, yc, yd = (u[k:k + n + 1, 2:n + 2] for k in range(4))
        fya, fyd = adv4(ya, yb, yc, yd, g.cy), dif4(ya, yb, yc, yd, g.ky)
        div = (fxa[:, 1:] - fxa[:, :-1] - (fxd[:, 1:] - fxd[:, :-1])) * g.rdx \
            + (fya[1:, :] - fya[:-1, :] - (fyd[1:, :] - fyd[:-1, :])) * g.rdy
        d = ca * du - g.dt * div
        return u.at[2:n + 2, 2:n + 2].set(u[2:n + 2, 2:n + 2] + cb * d), d

    def step(_: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        u, du = state
        for s in range(3):
            u, du = stage(u, du, g.ra[s], g.rb[s])
        return u, du

    @jax.jit
    def run(u0: Any) -> Any:
        u, _ = jax.lax.fori_loop(0, g.steps, step, (u0, jnp.zeros((n, n))))
        return u

    return run


#: the numba row that times what sarek_py's rows time: the whole program
WHOLE = "numba parallel, hand-fused + ping-pong, whole program"

#: each backend's initial field of the advection (its ``exp`` is the backend's libm's)
INITIAL: dict[str, Array] = {}


def advection_rows(size: int, steps: int, repeat: int, backend_name: str
                   ) -> tuple[list[Row], str, Callable[[], list[Row]]]:
    """The advection's sarek_py rows, a line about the final field, and a function giving
    the peers' rows; the reference is sarek_py's unfused final ``u``."""
    backend = get_backend(backend_name)
    progs = variants(256)
    preset = {"nx": size, "ny": size, "nt": steps}
    for p in progs.values():  # compile the kernels
        run_program(p, {"nx": 8, "ny": 8, "nt": 1}, device=backend, check_races=False)
    setup = run_program(progs["unfused"], {**preset, "nt": 0}, device=backend,
                        check_races=False)
    u0, g = setup.array("u"), Grid.of(setup.values, steps)
    INITIAL[backend_name] = u0
    rows: list[Row] = []
    fields: dict[str, Array] = {}
    for name in ("unfused", "fused+swap"):
        def run(p: Any = progs[name], name: str = name) -> None:
            fields[name] = run_program(p, preset, device=backend, check_races=False).array("u")
        rows.append(Row(f"sarek_py {name} ({backend_name}, whole program)", best_of(run, repeat)))
    ref = fields["unfused"]
    compare(rows[0], ref, ref)
    rows[0].result = ref
    compare(rows[1], fields["fused+swap"], ref)
    with np.errstate(all="ignore"):
        top = float(np.max(np.abs(ref), where=~np.isnan(ref), initial=0.0))
    finite = ("finite" if np.isfinite(ref).all() else "NOT finite") \
        + f", max |u| = {top:.3g} (initially <= 1)"
    if not (np.isfinite(ref).all() and top <= 1.0):
        finite += ": the explicit scheme is not stable at this size (issue 15)"
    def peer_rows() -> list[Row]:
        """The peers' rows (run after every sarek_py row: a peer's thread pool may spin)."""
        rows: list[Row] = []
        out: dict[str, Array] = {}

        def keep(key: str, fn: Callable[[], Array]) -> Callable[[], None]:
            def run() -> None:
                out[key] = fn()
            return run

        rows.append(compare(Row("numpy", best_of(keep("numpy", lambda: numpy_advection(u0, g)),
                                                 repeat)), out["numpy"], ref))
        try:
            import numba
        except ImportError as exc:
            rows.append(skipped("numba", str(exc)))
        else:
            unfused, fused, whole = numba_advection(numba)
            ra, rb = np.array(g.ra), np.array(g.rb)
            for label, fn in (("numba parallel, two loops a stage", unfused),
                              ("numba parallel, hand-fused + ping-pong", fused)):
                run = keep(label, lambda fn=fn: fn(u0.copy(), steps, g.dt, g.cx, g.cy, g.kx, g.ky,
                                                   g.rdx, g.rdy, ra, rb))
                rows.append(compare(Row(label, best_of(run, repeat)), out[label], ref))
            label = WHOLE
            run = keep(label, lambda: whole(g.n, steps, g.dt, g.cx, g.cy, g.kx, g.ky, g.rdx,
                                            g.rdy, ra, rb))
            rows.append(compare(Row(label, best_of(run, repeat),
                                    note="allocation + initial field + time loop"),
                                out[label], ref))
        jax = _jax()
        if isinstance(jax, str):
            rows.append(skipped("JAX", jax))
        else:
            f = jax_advection(jax, g)
            ju = jax.device_put(u0)
            rows.append(compare(Row("JAX jit + lax.fori_loop (CPU)",
                                    best_of(lambda: f(ju).block_until_ready(), repeat),
                                    note="XLA reassociates/contracts"), np.asarray(f(ju)), ref))
        return rows

    return rows, finite, peer_rows


# ---------------------------------------------------------------------------- output


def table(rows: list[Row], base: str) -> list[str]:
    """A markdown table; ``base`` names the row the ratios are to."""
    ref = next((r.seconds for r in rows if r.name == base), None)
    out = ["| implementation | best ms | time / " + base.split(" (")[0]
           + " | bitwise equal to sarek_py | max abs diff | note |",
           "| --- | ---: | ---: | --- | ---: | --- |"]
    for r in rows:
        if r.seconds is None:
            out.append(f"| {r.name} | – | – | – | – | {r.note} |")
            continue
        ratio = f"{r.seconds / ref:.2f}" if ref else "–"
        diff = "0" if r.bitwise else (f"{r.max_abs_diff:.3g}"
                                      if r.max_abs_diff is not None else "–")
        out.append(f"| {r.name} | {r.seconds * 1e3:.2f} | {ratio} | "
                   f"{'yes' if r.bitwise else 'NO'} | {diff} | {r.note} |")
    return out


def chart(groups: list[tuple[str, list[Row]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 3.2 * len(groups)))
    for ax, (title, rows) in zip(np.atleast_1d(axes), groups, strict=True):
        shown = [r for r in rows if r.seconds is not None][::-1]
        colors = ["tab:blue" if r.name.startswith("sarek_py") else
                  ("tab:green" if r.bitwise else "tab:orange") for r in shown]
        ax.barh([r.name for r in shown], [r.seconds * 1e3 for r in shown], color=colors)
        for i, r in enumerate(shown):
            ax.text(r.seconds * 1e3, i, f" {r.seconds * 1e3:.1f} ms"
                    + ("" if r.bitwise else " (not bitwise)"), va="center", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.legend(handles=[Patch(color="tab:blue", label="sarek_py"),
                           Patch(color="tab:green", label="peer, bitwise equal"),
                           Patch(color="tab:orange", label="peer, not bitwise")],
                  fontsize=7, loc="lower right")
        ax.set_xlabel("best time, ms (shorter is faster)")
        ax.tick_params(axis="y", labelsize=8)
        ax.margins(x=0.25)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_section(text: str, path: Path = PERFORMANCE) -> None:
    """Replace (or append) this benchmark's section of docs/performance.md."""
    doc = path.read_text()
    pattern = re.compile(rf"^{re.escape(SECTION)}.*?(?=^## |\Z)", re.S | re.M)
    block = text.rstrip("\n") + "\n\n"
    if pattern.search(doc):  # the first one replaced, any other one dropped
        first = iter([block])
        doc = pattern.sub(lambda _: next(first, ""), doc)
    else:
        doc = doc.rstrip("\n") + "\n\n" + block
    path.write_text(doc.rstrip("\n") + "\n")


def on(name: str, backend: str, backends: list[str]) -> str:
    """A chain row's name, with its backend when several are measured."""
    return name if len(backends) == 1 else f"{name} [{backend}]"


def all_backends(backends: list[str], n: int, args: argparse.Namespace) -> tuple[
        list[Row], str, Callable[[], list[Row]], list[Row], str, Callable[[], list[Row]],
        list[str]]:
    """The sarek_py rows of every backend (``--backend opencl,c``), the peers' row
    functions of the first (whose unfused runs are the references), and the lines saying
    how the ``c`` rows meet issue 16's targets."""
    chain: list[Row] = []
    adv: list[Row] = []
    refs: dict[str, tuple[Array, Array]] = {}
    launches = finite = ""
    chain_peers = adv_peers = None
    for b in backends:
        c_rows, c_launches, c_peers = chain_rows(n, args.repeat, b)
        a_rows, a_finite, a_peers = advection_rows(args.size, args.steps, args.repeat, b)
        for r in c_rows:
            r.name = on(r.name, b, backends)
        c_ref, a_ref = c_rows[-1].result, a_rows[0].result  # each backend's unfused runs
        assert c_ref is not None and a_ref is not None
        refs[b] = (c_ref, a_ref)
        if chain_peers is None:
            launches, chain_peers, finite, adv_peers = c_launches, c_peers, a_finite, a_peers
        elif len(backends) > 1:
            for rows, k in ((c_rows, 0), (a_rows, 1)):
                first = compare(Row("", None), refs[b][k], refs[backends[0]][k])
                what = "yes" if first.bitwise else f"NO (max abs diff {first.max_abs_diff:.3g})"
                if k == 1 and not first.bitwise and \
                        INITIAL[b].tobytes() != INITIAL[backends[0]].tobytes():
                    # the initial field is exp(...), each backend's libm's (CG-13: within
                    # one unit in the last place): the runs start from different fields
                    what += "; the initial fields already differ (exp, CG-13)"
                row = rows[-1 if k == 0 else 0]
                row.note = "; ".join(x for x in (row.note, f"bitwise equal to {backends[0]}'s: "
                                                  f"{what}") if x)
        chain += c_rows
        adv += a_rows
    assert chain_peers is not None and adv_peers is not None
    return chain, launches, chain_peers, adv, finite, adv_peers, []


def verdict_lines(chain: list[Row], adv: list[Row], backends: tuple[str, ...] = ()
                  ) -> list[str]:
    """Issue 16's targets for the ``c`` rows, measured in this run: advection fused + swap
    within 1.2x of numba parallel (hand-fused), scale -> relu faster than numexpr."""
    def best(rows: list[Row], start: str, has: str = "") -> Row | None:
        got = [r for r in rows if r.name.startswith(start) and has in r.name
               and r.seconds is not None]
        return min(got, key=lambda r: r.seconds or 0.0) if got else None

    out = []
    c_adv = best(adv, "sarek_py fused+swap (c")
    loop = next((r for r in adv if r.name == "numba parallel, hand-fused + ping-pong"
                 and r.seconds), None)
    whole = next((r for r in adv if r.name == WHOLE and r.seconds), None)
    if c_adv and c_adv.seconds and (loop or whole):
        parts = []
        for r, what in ((whole, "the whole program, as sarek_py's row"),
                        (loop, "its time loop alone")):
            if r is not None and r.seconds:
                ratio = c_adv.seconds / r.seconds
                parts.append(f"{ratio:.2f}x numba parallel hand-fused, {what} "
                             f"({r.seconds * 1e3:.1f} ms): target <= 1.2x "
                             f"{'met' if ratio <= 1.2 else 'NOT met'}")
        out.append(f"- advection fused + swap on c (whole program): "
                   f"{c_adv.seconds * 1e3:.1f} ms; " + "; ".join(parts))
    # the chain's rows name their backend only when several ran (``on``)
    c_chain = best(chain, "sarek_py fused", "" if tuple(backends) == ("c",) else "[c]")
    ne = best(chain, "numexpr")
    if c_chain and ne and c_chain.seconds and ne.seconds:
        out.append(f"- scale -> shift -> relu fused on c (best row, {c_chain.name}): "
                   f"{c_chain.seconds * 1e3:.2f} ms, numexpr {ne.seconds * 1e3:.2f} ms: "
                   f"target faster {'met' if c_chain.seconds < ne.seconds else 'NOT met'}")
    return out + [""] if out else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2", type=int, default=24, help="chain length 2^N (default 24)")
    ap.add_argument("--size", type=int, default=512, help="advection grid (default 512)")
    ap.add_argument("--steps", type=int, default=40, help="advection steps (default 40)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs; best counts (>= 5)")
    ap.add_argument("--backend", default="opencl",
                    help="a backend, or several separated by commas (opencl,c): each gets "
                         "its sarek_py rows, the peers are compared with the first's")
    ap.add_argument("--unchecked", action="store_true",
                    help="sarek_py's kernels without bounds checks (CG-24; checked by default)")
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (2^16, 64^2, 4 steps, 2 repeats) for a smoke run")
    ap.add_argument("--write", action="store_true",
                    help="write the tables to docs/performance.md and the chart to "
                         "docs/peers.png")
    args = ap.parse_args(argv)
    if args.quick:
        args.log2, args.size, args.steps, args.repeat = 16, 64, 4, 2
    n = 1 << args.log2
    backends = args.backend.split(",")
    for b in backends:
        get_backend(b).checked = not args.unchecked
    checks = "unchecked" if args.unchecked else "bounds-checked"
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"peers: chain 2^{args.log2} f32, advection {args.size}^2 x {args.steps} steps, "
          f"backend {args.backend}, best of {args.repeat}; {os.cpu_count()} cpus, "
          f"load {load:.1f}")
    chain, launches, chain_peers, adv, finite, adv_peers, verdicts = all_backends(
        backends, n, args)
    chain += chain_peers()  # the peers after every sarek_py row (their threads may spin)
    adv += adv_peers()
    verdicts += verdict_lines(chain, adv, tuple(backends))
    chain_base = on(TEMPS, backends[0], backends)
    adv_base = adv[1].name
    lines = [f"{SECTION} (generated by benchmarks/peers.py)", "",
             "Command: `.venv/bin/python benchmarks/peers.py "
             + " ".join(a for a in (argv if argv is not None else sys.argv[1:]))
             + f"`, run {when} on a machine with {os.cpu_count()} CPUs (load average "
             f"{load:.1f} at the start; other jobs may share it), sarek_py on "
             f"{args.backend} ({checks} kernels, CG-22), best of {args.repeat} runs after one "
             "warm-up run, all "
             "in one process. \"bitwise\" compares the bytes of the result with "
             "sarek_py's (NaN and infinity by their bits).", "",
             f"### scale -> shift -> relu, 2^{args.log2} f32", "",
             f"sarek_py's fused pipeline: {launches}. The reference is sarek_py's unfused "
             "run.", "", *table(chain, chain_base), "",
             f"### advection-diffusion {args.size}x{args.size}, {args.steps} steps (f64)", "",
             "sarek_py runs examples/advection_diffusion.sk offloaded, the whole program "
             "(allocation, set-up, initial field, time loop, copies); the peers start from "
             "sarek_py's initial field (`exp` differs in the last bit between libraries) "
             "and set-up scalars (`dt` …) and time the time loop, but numba's whole-program row, "
             "which allocates and computes the initial field too, as sarek_py's rows. The "
             "reference is sarek_py unfused. Its final "
             f"field is {finite}; the comparison is of every element's bits.", "",
             *table(adv, adv_base), "", *verdicts,
             "![peers: best times](peers.png)", ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(text, PERFORMANCE)
        print(f"wrote {PERFORMANCE}")
        try:
            chart([(f"scale -> shift -> relu, 2^{args.log2} f32", chain),
                   (f"advection-diffusion {args.size}^2, {args.steps} steps (f64)", adv)],
                  CHART)
        except ImportError as exc:
            print(f"  skipped the chart: {exc}")
        else:
            print(f"wrote {CHART}")
    return 0 if all(r.bitwise for r in chain + adv if r.name.startswith("sarek_py")
                    and r.seconds is not None) else 1


if __name__ == "__main__":
    sys.exit(main())
