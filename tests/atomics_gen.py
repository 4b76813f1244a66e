"""Random kernels with atomics whose outputs do not depend on the order of the updates
(specs/interpreter.md INT-27): the differential test of tests/test_atomics_device.py runs
each on the interpreter and on OpenCL and compares the bytes.

Each target array takes one operation only (integer add wraps and is associative and
commutative; min and max are; a compare-and-swap loop computing a maximum ends with the
maximum; an exchange of one value per element leaves that value), so every order a device
may choose leaves the same arrays. Float targets add small integers, so every partial sum
is exact; float min/max also meet -0.0, +0.0 and NaNs. Old values are not stored (they
depend on the order); each thread also stores its own element of ``out`` from the data,
beside the atomics. A shared-memory variant
counts per block and adds the counts to the global array after a barrier.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

BLOCKS = (1, 4, 16, 32, 64)


@attrs.frozen
class Case:
    sk: str
    threads: int
    block: int
    args: dict[str, Any]
    #: the operation of each target array the kernel updates
    ops: dict[str, str]


def _index(rng: np.random.Generator, m: int, loop: bool) -> str:
    base = ["i", "a[i]", "a[i] * 3 + i", "i / 2", "a[(i + 1) % n]", "a[i] ^ i"]
    if loop:
        base += ["a[i] + t", "t * 5 + i"]
    e = base[int(rng.integers(len(base)))]
    return f"(({e}) % {m} + {m}) % {m}"


def _value(rng: np.random.Generator, elem: str, loop: bool, op: str = "add") -> str:
    ints = ["a[i]", "i", "a[i] * 7 - i", "-a[i]", "a[i] ^ 12345", "2147483000"]
    if loop:
        ints += ["a[i] - t", "t"]
    e = ints[int(rng.integers(len(ints)))]
    if elem == "i32":
        return e
    if elem == "i64":
        return f"i64({e}) * 1000003L"
    if op in ("min", "max") and rng.integers(2):
        # signed zeros and NaNs (IR-33's order: -0.0 below +0.0, a NaN never wins)
        return (f"(({e}) % 4 == 0 ? -0.0f : (({e}) % 4 == 1 ? 0.0f / f32(({e}) % 1) : "
                f"(({e}) % 4 == 2 ? 0.0f : f32(({e}) % 3))))")
    return f"f32(({e}) % 100)"  # small integers: exact partial sums


def _update(rng: np.random.Generator, k: int, arr: str, elem: str, op: str, m: int,
            loop: bool) -> str:
    idx = _index(rng, m, loop)
    if op == "cas_max":
        v = _value(rng, elem, loop)
        return (f"let x{k} = {v} in\n"
                f"let mut seen{k} = atomic_add({arr}[{idx}], 0) in\n"
                f"let mut go{k} = x{k} > seen{k} in\n"
                f"while go{k} do\n"
                f"  let got{k} = atomic_cas({arr}[{idx}], seen{k}, x{k}) in\n"
                f"  (if got{k} == seen{k} then go{k} := false\n"
                f"   else (seen{k} := got{k}; go{k} := x{k} > seen{k}))\n"
                f"done")
    if op == "exch":
        return f"let o{k} = atomic_exch({arr}[{idx}], 42) in ()"
    return f"let o{k} = atomic_{op}({arr}[{idx}], {_value(rng, elem, loop, op)}) in ()"


def case(seed: int) -> Case:
    """The generated kernel of ``seed`` and its arguments."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 160))
    block = BLOCKS[int(rng.integers(len(BLOCKS)))]
    threads = n + int(rng.integers(0, 40))
    m = int(rng.integers(1, 9))
    ops = {"h": ["add", "min", "max", "cas_max", "exch"][int(rng.integers(5))],
           "l": ["add", "min", "max"][int(rng.integers(3))],
           "f": ["add", "min", "max"][int(rng.integers(3))]}
    elems = {"h": "i32", "l": "i64", "f": "f32"}
    parts: list[str] = []
    used: set[str] = set()
    for k in range(int(rng.integers(1, 5))):
        arr = ["h", "l", "f"][int(rng.integers(3))]
        used.add(arr)
        shape = int(rng.integers(3))
        if shape == 1:
            upd = _update(rng, k, arr, elems[arr], ops[arr], m, loop=True)
            trips = int(rng.integers(0, 4))
            parts.append(f"for t = 0 to {trips} do\n{_indent(upd)}\ndone")
        elif shape == 2:
            upd = _update(rng, k, arr, elems[arr], ops[arr], m, loop=False)
            parts.append(f"if a[i] % 3 != 0 then (\n{_indent(upd)}\n)")
        else:
            parts.append("(" + _update(rng, k, arr, elems[arr], ops[arr], m, loop=False) + ")")
    parts.append("out[i] <- a[i] * 2 + 1")
    body = ";\n".join(parts)
    sk = (f"kernel gen{seed}(a : i32[], h : i32[], l : i64[], f : f32[], out : i32[], "
          f"n : i32) =\n  let i = global_thread_id in\n  if i < n then (\n"
          f"{_indent(body, 4)}\n  )\n")
    a = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    if rng.integers(2):
        a = (a % 50).astype(np.int32)
    args = {"a": a,
            "h": rng.integers(-1000, 1000, m).astype(np.int32),
            "l": rng.integers(-2**40, 2**40, m).astype(np.int64),
            "f": (rng.integers(-50, 50, m).astype(np.float32) if rng.integers(2) else
                  rng.choice(np.array([0.0, -0.0, 1.0, -1.0], np.float32), m)),
            "out": np.zeros(n, np.int32), "n": n}
    return Case(sk, threads, block, args, {a: op for a, op in ops.items() if a in used})


def shared_case(seed: int) -> Case:
    """A per-block histogram in shared memory added to the global one after a barrier."""
    rng = np.random.default_rng(10_000 + seed)
    block = (8, 16, 32, 64)[int(rng.integers(4))]
    n = int(rng.integers(1, 300))
    bins = int(rng.integers(1, 9))
    threads = -(-n // block) * block
    sk = f"""kernel shist{seed}(a : i32[], h : i32[], n : i32)
  shared s : i32[{bins}] =
  let i = global_thread_id in
  let t = thread_idx_x in
  if t < {bins} then s[t] <- 0;
  barrier;
  (if i < n then let o = atomic_add(s[(a[i] % {bins} + {bins}) % {bins}], a[i]) in ());
  barrier;
  if t < {bins} then let o2 = atomic_add(h[t], s[t]) in ()
"""
    args = {"a": rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32),
            "h": rng.integers(-5, 5, bins).astype(np.int32), "n": n}
    return Case(sk, threads, block, args, {"h": "add", "s": "add"})


def _indent(text: str, by: int = 2) -> str:
    return "\n".join(" " * by + ln for ln in text.splitlines())


__all__ = ["Case", "case", "shared_case"]
