"""Pipeline temporaries: ``p.empty``/``p.empty_like``, ``p.keep``, host reads, dead reads,
replays, and the generated differential check (specs/frontend.md FE-70 .. FE-76)."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import pytest
from test_dead_stores import relu, scale, shift

import sarek_py
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel
from sarek_py.frontend.temporaries import DeadTemporaryError, Temporary, TemporaryError

BACKENDS = ["interp", "opencl"]
N = 200


@kernel
def add(a: Vec[f32], b: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        out[i] = a[i] + b[i]


@kernel
def mul_in_place(t: Vec[f32], c: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = t[i] * c


@kernel
def count(t: Vec[i32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = i


@kernel
def select(x: Vec[f32], t: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        if x[i] > 0.0:
            t[i] = x[i] * 3.0
        else:
            t[i] = 0.5 - x[i]


@kernel
def square(t: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        out[i] = t[i] * t[i] - t[i]


def _x(seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


# ------------------------------------------------------------------------- the API


def test_fe70_temporaries_have_a_shape_dtype_and_the_users_name() -> None:
    """FE-70: ``p.empty(shape, dtype)``, ``p.empty_like(x)``: shape, dtype, size, nbytes,
    ndim, backend; named by the variable assigned, by ``name=``, else numbered."""
    x = _x()
    with sarek_py.pipeline(backend="interp") as p:
        t = p.empty_like(x)
        u = p.empty((3, 4), np.int32, name="grid")
        v = p.empty(5)
        w: Temporary = p.empty(7, "float64")
        anon = [p.empty(2)]
    assert (t.shape, t.dtype, t.size, t.nbytes, t.ndim) == ((N,), np.float32, N, 4 * N, 1)
    assert (u.shape, u.dtype, u.name, len(u)) == ((3, 4), np.int32, "grid", 3)
    assert v.dtype == np.float32 and v.name == "v" and w.name == "w"
    assert anon[0].name.startswith("temporary #")
    assert t.backend == "interp" and "Temporary(t" in repr(t)
    assert t.where.startswith("test_temporaries.py:")


def test_fe70_misuse_is_a_clear_error() -> None:
    """FE-70: outside the block, a bad shape or dtype, indexing, a wrong dtype or rank at
    a launch, ``p.keep`` of something else or after the block: ``TemporaryError``s."""
    x = _x()
    p = sarek_py.pipeline(backend="interp")
    with pytest.raises(TemporaryError, match="inside the pipeline's with block"):
        p.empty(3)
    with p:
        with pytest.raises(TemporaryError, match="shape must be"):
            p.empty(-1)
        with pytest.raises(TemporaryError, match="shape must be"):
            p.empty(2.5)
        with pytest.raises(TemporaryError, match="is not a dtype"):
            p.empty(3, "no such dtype")
        with pytest.raises(TemporaryError, match="name=...\\) takes a string"):
            p.empty(3, name=3)  # type: ignore[arg-type]
        t = p.empty(N, np.int32)
        with pytest.raises(TemporaryError, match="cannot be indexed"):
            t[0]
        with pytest.raises(TemporaryError, match="dtype float32 and rank 1, not the "
                                                 "temporary t of dtype int32"):
            scale[N, 64](x, t, 2.0, N)
        with pytest.raises(TemporaryError, match="p.keep takes a temporary"):
            p.keep(x)  # type: ignore[arg-type]
        u = p.empty_like(x)
        scale[N, 64](x, u, 2.0, N)
    with pytest.raises(TemporaryError, match="must be called inside the with block"):
        p.keep(u)
    with sarek_py.pipeline(backend="interp") as q:
        with pytest.raises(TemporaryError, match="of this pipeline"):
            q.keep(u)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fe70_a_live_temporary_is_a_device_array_of_the_backend(backend: str) -> None:
    """FE-70: once its launches run, a kept temporary is a DeviceArray of the pipeline's
    backend; it can be passed to launches after the pipeline like one."""
    x = _x()
    with sarek_py.pipeline(backend=backend) as p:
        t = p.keep(p.empty_like(x))
        scale[N, 64](x, t, 3.0, N)
    assert isinstance(t.array, sarek_py.DeviceArray) and t.array.backend == backend
    y = np.zeros(N, np.float32)
    relu[N, 64](t, y, N, backend=backend)
    assert y.tobytes() == np.maximum(x * np.float32(3), np.float32(0)).tobytes()
    out = np.empty(N, np.float32)
    assert t.copy_to_host(out) is out and out.tobytes() == (x * np.float32(3)).tobytes()


def test_fe73_reading_a_dead_temporary_says_to_keep_it() -> None:
    """FE-73: after the pipeline, ``get``, ``np.asarray``, ``copy_to_host`` and a launch of
    a temporary whose stores were dropped raise ``DeadTemporaryError`` naming it, where it
    was made, the fused kernel, and ``p.keep(t)``."""
    x, y = _x(), np.zeros(N, np.float32)
    with sarek_py.pipeline(backend="interp") as p:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        relu[N, 64](t, y, N)
    for read in (lambda: t.get(), lambda: np.asarray(t),
                 lambda: t.copy_to_host(np.empty(N, np.float32)),
                 lambda: relu[N, 64](t, y, N, backend="interp")):
        with pytest.raises(DeadTemporaryError) as err:
            read()
        msg = str(err.value)
        assert "the temporary t (made at test_temporaries.py:" in msg
        assert "scale_relu dropped its stores" in msg and "call p.keep(t)" in msg


def test_fe73_temporaries_of_a_pipeline_that_raised() -> None:
    """FE-73: a temporary whose launches never ran (the block raised) refuses a read."""
    x = _x()
    with pytest.raises(RuntimeError), sarek_py.pipeline(backend="interp") as p:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        raise RuntimeError("boom")
    with pytest.raises(TemporaryError, match="never ran"):
        t.get()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fe72_a_host_read_runs_the_launches_recorded_so_far(backend: str) -> None:
    """FE-72: ``np.asarray(t)`` inside the block sees what the launches recorded before
    it wrote; a launch recorded after it changes t, and a second read sees that."""
    with sarek_py.pipeline(backend=backend) as p:
        t = p.empty(N, np.int32)
        count[N, 64](t, N)
        first = np.asarray(t)
        shifted = p.empty(N, np.float32)
        scale[N, 64](_x(), shifted, 1.0, N)
        mul_in_place[N, 64](shifted, 2.0, N)
        second = shifted.get()
    assert first.tobytes() == np.arange(N, dtype=np.int32).tobytes()
    assert second.tobytes() == (_x() * np.float32(2)).tobytes()
    assert len(p.launches) == 2  # count; then scale+mul fused at the second read


@pytest.mark.parametrize("backend", BACKENDS)
def test_fe76_a_replay_keeps_dead_temporaries_unallocated(backend: str) -> None:
    """FE-76: ``p.replay()`` runs the launches as they ran: the dead temporary stays
    unallocated, the output is recomputed from the current input."""
    x, y = _x(), np.zeros(N, np.float32)
    with sarek_py.pipeline(backend=backend) as p:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        relu[N, 64](t, y, N)
    x[:] = -x
    y[:] = 7
    p.replay()
    assert t.state == "dead" and t.array is None
    assert y.tobytes() == np.maximum(x * np.float32(2), np.float32(0)).tobytes()


def test_fe74_the_report_names_every_temporary() -> None:
    """FE-74: the report has a line per temporary offered or refused at the final run, in
    the user's names, and the traffic bound line."""
    x, y = _x(), np.zeros(N, np.float32)
    with sarek_py.pipeline(backend="interp") as p:
        t = p.empty_like(x)
        kept = p.keep(p.empty_like(x))
        scale[N, 64](x, t, 2.0, N)
        shift[N, 64](t, kept, 1.0, N)
        relu[N, 64](kept, y, N)
    report = p.report()
    assert "t: stores dropped from scale_shift_relu" in report
    assert "kept: stores kept in scale_shift_relu: it is kept (p.keep(kept))" in report
    assert "memory traffic bound: " in report and "of unfused)" in report


# --------------------------------------------------------------- differential (FE-75)


KERNELS = {"scale": (scale, 1, 2.0), "shift": (shift, 1, -0.5), "relu": (relu, 1, None),
           "add": (add, 2, None), "select": (select, 1, None), "square": (square, 1, None)}


def _chain(rng: random.Random) -> dict[str, Any]:
    """A random chain of element-wise launches over arrays: inputs (numpy), outputs each
    a temporary or a numpy array; random keeps and host reads; sizes and blocks."""
    n = rng.choice([1, 7, 64, 65, 130])
    block = rng.choice([32, 64, 128])
    steps = []
    made = ["x0"]
    kinds: dict[str, str] = {"x0": "numpy"}
    for k in range(rng.randint(2, 5)):
        name, (_, nin, _s) = rng.choice(list(KERNELS.items()))
        ins = [made[-1] if rng.random() < 0.7 else rng.choice(made) for _ in range(nin)]
        out = f"a{k}"
        kinds[out] = "temp" if rng.random() < 0.7 else "numpy"
        # a host read after it (of a temporary: a numpy array is the host's own memory,
        # which the pipeline writes at its runs only)
        steps.append((name, ins, out, kinds[out] == "temp" and rng.random() < 0.2))
        made.append(out)
    keeps = {a for a, kind in kinds.items() if kind == "temp" and rng.random() < 0.2}
    return {"n": n, "block": block, "steps": steps, "kinds": kinds, "keeps": keeps,
            "mid_run": rng.random() < 0.1}


def _args(name: str, ins: list[Any], out: Any, n: int) -> tuple[Any, ...]:
    _, _, scalar = KERNELS[name]
    return (*ins, out, *((scalar,) if scalar is not None else ()), n)


def _check_chain(case: dict[str, Any], backend: str, seed: int) -> tuple[int, int]:
    n, block = case["n"], case["block"]
    x0 = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    specials = np.array([np.nan, -0.0, np.inf, -np.inf, 3e38], np.float32)
    x0[: min(n, 5)] = specials[: min(n, 5)]  # through the forwarded local bit for bit
    ref: dict[str, np.ndarray[Any, Any]] = {"x0": x0.copy()}
    reads_ref: list[bytes] = []
    for name, ins, out, read in case["steps"]:
        ref.setdefault(out, np.zeros(n, np.float32))
        k = KERNELS[name][0]
        k[n, block](*_args(name, [ref[a] for a in ins], ref[out], n), backend=backend)
        if read:
            reads_ref.append(ref[out].tobytes())
    arrays: dict[str, Any] = {"x0": x0.copy()}
    reads: list[bytes] = []
    with sarek_py.pipeline(backend=backend) as p:
        for k_i, (name, ins, out, read) in enumerate(case["steps"]):
            if out not in arrays:
                if case["kinds"][out] == "temp":
                    arrays[out] = p.empty(n, np.float32, name=out)
                    if out in case["keeps"]:
                        p.keep(arrays[out])
                else:
                    arrays[out] = np.zeros(n, np.float32)
            k = KERNELS[name][0]
            k[n, block](*_args(name, [arrays[a] for a in ins], arrays[out], n))
            if read:
                reads.append(np.asarray(arrays[out]).tobytes())
            if case["mid_run"] and k_i == 0:
                p.run()
    assert reads == reads_ref
    for a, v in arrays.items():
        if isinstance(v, np.ndarray):
            assert v.tobytes() == ref[a].tobytes(), (a, case, p.report())
        elif v.state == "live":
            assert v.get().tobytes() == ref[a].tobytes(), (a, case, p.report())
        else:  # dead: nobody could see it (FE-71)
            assert a not in case["keeps"] and not any(
                read for _, _, out, read in case["steps"] if out == a), (a, case)
    dropped = sum(n.dropped for n in p.temporaries.notes)
    return dropped, len(p.temporaries.notes) - dropped


FUZZ = bool(os.environ.get("SAREK_FUZZ"))
CHAINS = 24


def _run_chains(backend: str, count: int, first: int = 0) -> None:
    dropped = kept = 0
    for seed in range(first, first + count):
        d, k = _check_chain(_chain(random.Random(seed)), backend, seed)
        dropped += d
        kept += k
    assert dropped > count // 6 and kept > count // 6, (dropped, kept)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fe75_generated_chains_equal_the_unfused_launches(backend: str) -> None:
    """FE-75, EF-30..EF-34: random chains of element-wise launches with random temporaries,
    keeps, host reads and mid-way runs give bitwise the unfused launches' bytes in every
    numpy array, host read and live temporary (0 mismatches), with stores both dropped
    and kept."""
    _run_chains(backend, CHAINS)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_fe75_generated_chains_fuzz(backend: str) -> None:
    """FE-75: the long run (``SAREK_FUZZ=1``: 1500 chains a backend, else 150)."""
    _run_chains(backend, 1500 if FUZZ else 150, first=CHAINS)
