"""What the native C backend's differential tests share (tests/test_native_*.py): the backend
or a skip saying why, which kernels it may refuse, and one generated kernel run on the
interpreter and on ``c`` (specs/native.md NAT-50 ... NAT-52).

A case's outcome is one of :data:`OUTCOMES`; the tests count them, so a generator that
stops reaching the backend (everything refused, everything undefined) fails instead of
passing vacuously.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import numpy as np
import pytest
from test_codegen_exact import TRANSCENDENTAL_ULP, ulp_distance
from test_codegen_fuzz import LOOP_BUDGET, inputs, same_bytes_nan_aside

from sarek_py.ir.diagnostics import BackendUnavailable, InterpError, LaunchError, SarekError
from sarek_py.ir.dynamic_shared import dynamic_shared
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.intrinsics import TRANSCENDENTAL
from sarek_py.ir.nodes import Atomic, Barrier, For, Intrinsic, Kernel, While
from sarek_py.ir.types import ArrayType, MemSpace
from sarek_py.ir.visit import iter_nodes
from sarek_py.runtime import Backend, get_backend

OUTCOMES = ("compared", "refused", "undefined", "loose loop")


def c_backend() -> Backend:
    """The ``c`` backend, or a skip with the reason it cannot run here."""
    try:
        return get_backend("c")
    except BackendUnavailable as exc:
        pytest.skip(f"no C compiler with OpenMP here: {exc.message}")


def bodies(k: Kernel) -> list[Any]:
    return [k.body, *(h.body for h in k.helpers)]


def needs_gpu(k: Kernel) -> bool:
    """Whether ``k`` has what the C backend refuses by design (NAT-50): a barrier, shared
    memory (a shared array, the dynamic shared array) or an atomic."""
    if any(isinstance(n, (Barrier, Atomic)) for b in bodies(k) for n in iter_nodes(b)):
        return True
    if dynamic_shared(k) is not None:
        return True
    return any(isinstance(v.type, ArrayType) and v.type.space is MemSpace.SHARED
               for v in (*k.params, *k.locals))


def transcendental(k: Kernel) -> bool:
    return any(isinstance(n, Intrinsic) and n.name in TRANSCENDENTAL
               for b in bodies(k) for n in iter_nodes(b))


def loops(k: Kernel) -> bool:
    return any(isinstance(n, (For, While)) for b in bodies(k) for n in iter_nodes(b))


def check_refusal(k: Kernel, exc: SarekError, reasons: Counter[str]) -> None:
    """A refusal must say why, in one sentence, and only a kernel with a barrier, shared
    memory or an atomic (or one no C-family backend emits, CG-11) may be refused (NAT-50)."""
    msg = str(exc).strip()
    assert msg, f"{k.name}: refused with an empty message ({type(exc).__name__})"
    assert "Traceback" not in msg
    if needs_gpu(k):
        reasons["barrier, shared memory or atomic"] += 1
        return
    assert "CG-11" in msg, f"the C backend refused a kernel it can run: {msg}"
    reasons["CG-11 (stop in a helper)"] += 1


def assert_same(k: Kernel, ref: dict[str, Any], got: dict[str, Any], loose: bool,
                where: str = "") -> None:
    """Every array parameter bitwise equal, NaN payloads aside; a kernel calling a
    transcendental intrinsic is held to CG-15's ULP bound (CG-13) instead."""
    for p in k.params:
        if not isinstance(p.type, ArrayType):
            continue
        a, b = np.asarray(ref[p.name]), np.asarray(got[p.name])
        if same_bytes_nan_aside(a, b):
            continue
        assert loose and p.type.elem.is_float, f"{where}{p.name}: {a!r} != {b!r}"
        fin = np.isfinite(a) & np.isfinite(b)
        assert (np.isnan(a) == np.isnan(b)).all(), f"{where}{p.name}: NaNs differ"
        assert ulp_distance(a[fin], b[fin]).max(initial=0) <= TRANSCENDENTAL_ULP


#: float values where compilers' shortcuts show: NaN, infinities, signed zeros, subnormals
#: of both widths, the largest f32
SPECIAL = (np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-310, 3.4e38, 1.0, -2.5)


def special_inputs(k: Kernel, seed: int) -> dict[str, Any]:
    """tests/test_codegen_fuzz.py's inputs with about half of the float elements (and
    float scalars) replaced by a value of :data:`SPECIAL`."""
    args = inputs(k, seed)
    rng = np.random.default_rng(seed)
    for p in k.params:
        v = args[p.name]
        if isinstance(p.type, ArrayType) and p.type.elem.is_float and v.size:
            flat = v.reshape(-1)
            pick = rng.random(flat.size) < 0.5
            flat[pick] = rng.choice(np.array(SPECIAL), int(pick.sum())).astype(v.dtype)
        elif not isinstance(p.type, ArrayType) and p.type.is_float and rng.random() < 0.5:
            args[p.name] = p.type.dtype.type(rng.choice(np.array(SPECIAL)))
    return args


def one_thread(be: Backend, k: Kernel, seed: int, counts: Counter[str],
               reasons: Counter[str], special: bool = False) -> str:
    """Run ``k`` as one thread of a 3-D launch on the interpreter and on ``be`` from the
    same inputs (tests/test_codegen_fuzz.py's; ``special``: with special float values),
    compare; the outcome, counted."""
    args = special_inputs(k, seed) if special else inputs(k, seed)
    ref, dev = copy.deepcopy(args), copy.deepcopy(args)
    with np.errstate(all="ignore"):
        outcome = _one_thread(be, k, seed, ref, dev, reasons)
    counts[outcome] += 1
    return outcome


def _one_thread(be: Backend, k: Kernel, seed: int, ref: dict[str, Any], dev: dict[str, Any],
                reasons: Counter[str]) -> str:
    try:
        r_ref = run_kernel(k, ref, 1, 1, loop_budget=LOOP_BUDGET, grid=(1, 1, 1),
                           block_shape=(1, 1, 1))
    except InterpError:
        return "undefined"  # no defined meaning (INT-22 budget, division by zero ...)
    loose = transcendental(k)
    if loose and loops(k):
        return "loose loop"  # a trip count may depend on a value within the ULP bound
    try:
        r_dev = be.run_kernel(k, dev, 1, 1, grid=(1, 1, 1), block_shape=(1, 1, 1))
    except SarekError as exc:
        check_refusal(k, exc, reasons)
        return "refused"
    assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes), "stop codes differ"
    assert_same(k, ref, dev, loose)
    return "compared"


# ----------------------------------------------------------- argument shapes (NAT-51)


def views_of(args: dict[str, Any], k: Kernel, written: frozenset[str], seed: int
             ) -> dict[str, Any]:
    """``args`` with each array replaced by a view holding the same values: strided (every
    other element of a larger buffer, so not contiguous), offset (a slice starting past
    the buffer's start), or, for an array the kernel does not write, read-only."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for p in k.params:
        v = args[p.name]
        if not isinstance(p.type, ArrayType):
            out[p.name] = v
            continue
        kind = rng.integers(0, 3)
        if kind == 0:  # strided along the last axis
            big = np.zeros((*v.shape[:-1], 2 * v.shape[-1] + 1), v.dtype)
            view = big[..., 1::2]
        else:  # offset by one element in a flat buffer
            flat = np.zeros(v.size + 3, v.dtype)
            view = flat[1:1 + v.size].reshape(v.shape)
        view[...] = v
        if kind == 2 and p.name not in written:
            view.flags.writeable = False
        out[p.name] = view
    return out


def aliased(args: dict[str, Any], k: Kernel) -> tuple[dict[str, Any], tuple[str, str]] | None:
    """``args`` with one array passed for two parameters of the same type, if ``k`` has two
    such parameters; the names."""
    arrays = [p for p in k.params if isinstance(p.type, ArrayType)]
    for i, p in enumerate(arrays):
        for q in arrays[i + 1:]:
            if args[p.name].dtype == args[q.name].dtype and \
                    args[p.name].shape == args[q.name].shape:
                out = dict(args)
                out[q.name] = out[p.name]
                return out, (p.name, q.name)
    return None


def run_both(be: Backend, k: Kernel, ref: dict[str, Any], dev: dict[str, Any]) -> str | None:
    """``k`` as one thread on the interpreter backend and on ``be`` (both through
    :meth:`Backend.run_kernel`, which binds views and aliases). None when both ran and
    agree; the interpreter's refusal of the arguments (an overlap, LCH-62) when ``be``
    refuses them with the same sentence; ``"undefined"`` when the interpreter faults (then
    ``be`` is not run: the kernel has no meaning). A mismatch fails."""
    try:
        r_ref = get_backend("interp").run_kernel(k, ref, 1, 1, grid=(1, 1, 1),
                                                 block_shape=(1, 1, 1))
    except LaunchError as exc:
        if "overlaps" not in str(exc):
            return "undefined"
        with pytest.raises(LaunchError) as got:
            be.run_kernel(k, dev, 1, 1, grid=(1, 1, 1), block_shape=(1, 1, 1))
        assert str(got.value) == str(exc)
        return str(exc)
    except InterpError:
        return "undefined"
    r_dev = be.run_kernel(k, dev, 1, 1, grid=(1, 1, 1), block_shape=(1, 1, 1))
    assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes), "stop codes differ"
    return None
