"""The arithmetic of atomics in the reference interpreter (specs/interpreter.md INT-27).

The lanes that run an atomic together update memory one after the other, in increasing
thread number, each update indivisible: a lane's old value is the element as the lanes
before it left it. Where no two active lanes name the same element the order is not
visible and the update is one vectorised step. Otherwise an integer ``atomic_add`` is a
segmented prefix sum (two's complement addition is associative, so the result is the
sequential one bit for bit); a float add, a min, a max or an exchange is a running
accumulation per element in the element's own type (numpy's ``accumulate`` is
sequential, so a float sum is rounded after each addition, in thread order); a
compare-and-swap runs lane by lane.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.nodes import AtomicOp

_UINT: dict[int, type[np.unsignedinteger[Any]]] = {4: np.uint32, 8: np.uint64}


def _same_bits(a: Any, b: Any, is_float: bool) -> Any:
    """``a == b`` on integers, bit-pattern equality on floats (IR-33: ``atomic_cas`` on a
    float compares bits, so ``-0.0`` is not ``0.0`` and a NaN can match itself)."""
    if not is_float:
        return a == b
    x, y = np.asarray(a), np.asarray(b)
    u = _UINT[x.dtype.itemsize]
    return x.view(u) == y.view(u)


def float_takes(op: AtomicOp, old: Any, value: Any) -> Any:
    """IR-33: whether a float ``atomic_min``/``atomic_max`` replaces ``old`` by
    ``value``: when it is strictly below (above) it, when ``old`` is a NaN and ``value``
    is not, or when both are zeros and ``value``'s sign puts it below (above): -0.0 is
    below +0.0. A NaN operand never replaces; the result is always one operand's bits."""
    nan_old, nan_value = np.isnan(old), np.isnan(value)
    zero_order = (old == value) & (np.signbit(value) != np.signbit(old))
    if op is AtomicOp.MIN:
        return (value < old) | (nan_old & ~nan_value) | (zero_order & np.signbit(value))
    return (value > old) | (nan_old & ~nan_value) | (zero_order & np.signbit(old))


def new_value(op: AtomicOp, old: Any, value: Any, compare: Any, is_float: bool) -> Any:
    """What the element becomes when an atomic finds ``old`` there (elementwise)."""
    if op is AtomicOp.ADD:
        return old + value
    if op in (AtomicOp.MIN, AtomicOp.MAX):
        if is_float:
            return np.where(float_takes(op, old, value), value, old)
        return np.minimum(old, value) if op is AtomicOp.MIN else np.maximum(old, value)
    if op is AtomicOp.EXCH:
        return value
    return np.where(_same_bits(old, compare, is_float), value, old)


def _order_keys(x: NDArray[Any], nan_key: int) -> NDArray[Any]:
    """Unsigned keys of floats in IR-33's order (-0.0 below +0.0), NaNs as ``nan_key``."""
    u = _UINT[x.dtype.itemsize]
    bits = x.view(u)
    top = u(1) << u(8 * x.dtype.itemsize - 1)
    keys = np.where(bits & top, ~bits, bits | top).astype(u)
    keys[np.isnan(x)] = u(nan_key)
    return keys


def _from_keys(keys: NDArray[Any], dtype: np.dtype[Any]) -> NDArray[Any]:
    u = _UINT[dtype.itemsize]
    top = u(1) << u(8 * dtype.itemsize - 1)
    bits = np.where(keys & top, keys ^ top, ~keys).astype(u)
    return bits.view(dtype)


def _float_running(op: AtomicOp, seq: NDArray[Any]) -> NDArray[Any]:
    """The running float min/max of ``seq`` (its first entry the element's old value),
    IR-33's order: a running min/max of order keys (NaNs never win), read back as the
    bits of the operand that holds it (the old NaN while every entry is a NaN)."""
    u = _UINT[seq.dtype.itemsize]
    most = int(np.iinfo(u).max)
    nan_key = most if op is AtomicOp.MIN else 0
    keys = _order_keys(seq, nan_key)
    run = (np.minimum if op is AtomicOp.MIN else np.maximum).accumulate(keys)
    out = _from_keys(run, seq.dtype)
    all_nan = run == u(nan_key)
    out[all_nan] = seq[0]
    return out


def _lanes(x: Any, n: int, dtype: np.dtype[Any]) -> NDArray[Any]:
    return np.broadcast_to(np.asarray(x, dtype=dtype), (n,))


def apply(op: AtomicOp, data: NDArray[Any], addr: NDArray[np.int64], value: Any,
          compare: Any) -> NDArray[Any]:
    """Run the atomic of every active lane on ``data`` in lane order: ``addr[k]``,
    ``value[k]``, ``compare[k]`` are lane ``k``'s (the active lanes, in increasing thread
    number); the old value each lane sees."""
    n = addr.size
    dt = data.dtype
    is_float = bool(np.issubdtype(dt, np.floating))
    v = _lanes(value, n, dt)
    c = _lanes(compare if compare is not None else 0, n, dt)
    if n == 0:
        return np.zeros(0, dtype=dt)
    order = np.argsort(addr, kind="stable")
    sorted_addr = addr[order]
    starts = np.empty(n, dtype=np.bool_)
    starts[0] = True
    np.not_equal(sorted_addr[1:], sorted_addr[:-1], out=starts[1:])
    if starts.all():  # every lane its own element: the order is not visible
        old = data[addr].copy()
        data[addr] = new_value(op, old, v, c, is_float)
        return old
    if op is AtomicOp.ADD and not is_float:
        vs = v[order]
        inclusive = np.cumsum(vs, dtype=dt)
        first = np.flatnonzero(starts)
        group = np.cumsum(starts) - 1
        before = (inclusive[first] - vs[first])[group]  # the sum of the earlier groups
        old_sorted = data[sorted_addr] + (inclusive - vs - before)
        old = np.empty(n, dtype=dt)
        old[order] = old_sorted
        last = np.append(first[1:] - 1, n - 1)
        data[sorted_addr[last]] = old_sorted[last] + vs[last]
        return old
    old = np.empty(n, dtype=dt)
    if op is AtomicOp.CAS:
        for k in range(n):  # lane by lane, in thread order, in the element's own type
            a = int(addr[k])
            o = data[a]
            old[k] = o
            data[a] = new_value(op, o, v[k], c[k], is_float)
        return old
    # one element at a time, its lanes in thread order: a running sum (rounded after
    # each addition: ufunc accumulation is sequential), minimum or maximum, or the
    # previous lane's value for an exchange
    acc = {AtomicOp.ADD: np.add, AtomicOp.MIN: np.minimum, AtomicOp.MAX: np.maximum}.get(op)
    ordered = is_float and op in (AtomicOp.MIN, AtomicOp.MAX)
    bounds = np.append(np.flatnonzero(starts), n)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        lanes = order[lo:hi]
        a = int(sorted_addr[lo])
        seq = np.empty(hi - lo + 1, dtype=dt)
        seq[0] = data[a]
        seq[1:] = v[lanes]
        if ordered:
            run = _float_running(op, seq)
        else:
            run = seq if acc is None else acc.accumulate(seq, dtype=dt)
        old[lanes] = run[:-1]
        data[a] = run[-1]
    return old


__all__ = ["apply", "new_value"]
