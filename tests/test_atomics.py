"""Atomics through the kernel language (issue 13, item 6): the IR node and where it may
stand (IR-33, IR-34), the text form and the dump (TXT-38), the checker, the reference
interpreter's order and race detection (INT-27, INT-28), the effect summary (EFF-12),
host programs (HP-20), fusion refusals (LEG-20), the C of CUDA and OpenCL (CG-30, CG-31)
and the Python front end (FE-25).

The device runs (OpenCL on PoCL, oclgrind, the differential generator) are in
tests/test_atomics_device.py.
"""

from __future__ import annotations

import re
import textwrap
import zlib
from pathlib import Path

import attrs
import numpy as np
import pytest

from sarek_py.codegen import emit_cuda, emit_opencl
from sarek_py.codegen.atomics import BASE64, EXTENDED64, missing_extensions
from sarek_py.codegen.cstyle import emit
from sarek_py.codegen.nvcc import compile_ptx, find_nvcc
from sarek_py.codegen.opencl import OPENCL
from sarek_py.fusion.epilogue.fuse_kernels import fuse
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.loops.fusion import fuse_program
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.host.check import check_program
from sarek_py.ir.diagnostics import CheckError, InterpError, ParseError
from sarek_py.ir.effects import helper_effects, kernel_effects, kernel_writes
from sarek_py.ir.host import program as hp
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Atomic, AtomicOp, Kernel, Module
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_module
from sarek_py.ir.sexp import from_sexp, to_sexp
from sarek_py.ir.typecheck import check_module
from sarek_py.ir.visit import canonical_ids

ALL = """kernel every(h : i32[], l : i64[], f : f32[], d : f64[], g : f32[,], n : i32)
  shared s : i32[8] =
  let i = global_thread_id in
  s[thread_idx_x] <- 0;
  barrier;
  if i < n then (
    let a = atomic_add(h[i % 4], 1) in
    let b = atomic_min(l[0], i64(i)) in
    let c = atomic_max(f[1], f32(i)) in
    let e = atomic_exch(d[2], 2.5) in
    let mut k = atomic_cas(h[3], 7, a) in
    k := atomic_add(s[i % 8], k);
    let m = atomic_cas(g[1, i % 2], 0.0f, -1.5f) in
    let o = atomic_add(d[0], -0.25) in
    ()
  )
"""


def one(text: str, file: str = "t.sk") -> Kernel:
    m = parse_module(text, file)
    check_module(m)
    return m.kernels[0]


def atomics_of(k: Kernel) -> list[Atomic]:
    from sarek_py.ir.atomics import iter_atomics

    return iter_atomics(k)


# ------------------------------------------------------------------------- IR-33, TXT-38


def test_ir33_nodes_are_frozen_and_compared_by_value() -> None:
    k = one(ALL)
    found = atomics_of(k)
    assert [a.op for a in found] == [AtomicOp.ADD, AtomicOp.MIN, AtomicOp.MAX, AtomicOp.EXCH,
                                     AtomicOp.CAS, AtomicOp.ADD, AtomicOp.CAS, AtomicOp.ADD]
    a = found[4]
    assert a.compare is not None and found[0].compare is None
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        a.value = a.compare  # type: ignore[misc]
    assert attrs.evolve(a, loc=None) == a


def test_txt38_print_parse_round_trip_and_sexp() -> None:
    k = one(ALL)
    text = print_module(Module(kernels=(k,)))
    assert "atomic_cas(g[1, i % 2], 0.0f, -1.5f)" in text
    assert "k := atomic_add(s[i % 8], k)" in text
    again = one(text, "again.sk")
    assert canonical_ids(again) == canonical_ids(k)
    assert print_module(Module(kernels=(again,))) == text
    assert from_sexp(to_sexp(k)) == k
    assert ":atomic_cas" in to_sexp(k)


def test_txt38_literals_take_the_element_type() -> None:
    k = one("""kernel k(f : f32[], l : i64[]) =
      let a = atomic_add(f[0], 1.5) in
      let b = atomic_cas(l[0], 1, 2) in ()""")
    a, b = atomics_of(k)
    assert a.value.type.value == "f32"  # type: ignore[union-attr]
    assert b.compare.type.value == "i64" and b.value.type.value == "i64"  # type: ignore[union-attr]


@pytest.mark.parametrize(("body", "msg"), [
    ("let a = atomic_add(x, 1) in ()", "the first argument of 'atomic_add' is an array element"),
    ("let a = atomic_add(h[0]) in ()", "expected ','"),
    ("let a = atomic_cas(h[0], 1) in ()", "'atomic_cas(a[i], expected, desired)'"),
    ("let a = atomic_add(h[0], 1, 2) in ()", "'atomic_add' takes 2 arguments"),
    ("let a = atomic_add(3, 1) in ()", "is an array element"),
])
def test_txt38_malformed_atomics_are_located_parse_errors(body: str, msg: str) -> None:
    text = f"kernel k(h : i32[], x : i32) =\n  {body}\n"
    with pytest.raises(ParseError) as ei:
        parse_module(text, "bad.sk")
    assert msg in ei.value.message, ei.value.message
    assert ei.value.loc is not None and ei.value.loc.line == 2


def test_txt38_a_helper_named_like_an_atomic_hides_it() -> None:
    m = parse_module("""fun atomic_add(a : i32, b : i32) : i32 = return a + b
    kernel k(h : i32[]) = let a = atomic_add(1, 2) in h[0] <- a""", "t.sk")
    check_module(m)
    assert not atomics_of(m.kernels[0])


# ------------------------------------------------------------------- IR-33 checker errors


def _check_error(text: str) -> CheckError:
    m = parse_module(text, "bad.sk")
    with pytest.raises(CheckError) as ei:
        check_module(m)
    return ei.value


def _caret(text: str, err: CheckError, word: str) -> None:
    """The error is located, its caret under ``word`` on its line."""
    assert err.loc is not None
    shown = str(err.with_source(text)).splitlines()
    assert shown[-1] == " " * (err.loc.col - 1) + "^", shown
    assert shown[-2][err.loc.col - 1:].startswith(word), shown


@pytest.mark.parametrize(("decl", "body", "msg", "at"), [
    ("h : i32[], x : i32", "let a = atomic_add(x[0], 1) in ()",
     "atomic_add of an element of 'x', which is a i32 scalar, not an array", "atomic_add"),
    ("b : bool[]", "let a = atomic_exch(b[0], true) in ()",
     "atomic_exch on 'b' of element type bool: atomics take i32, i64, f32 or f64", "atomic_exch"),
    ("h : i32[]", "let a = atomic_add(h[0], 1.5) in ()",
     "atomic_add value has type f64, 'h' has element type i32 (no implicit conversion: cast "
     "it, i32(...))", "1.5"),
    ("h : f32[], v : f64", "let a = atomic_max(h[0], v) in ()",
     "atomic_max value has type f64, 'h' has element type f32", "v"),
    ("h : i32[]", "let a = atomic_cas(h[0], 1L, 2) in ()",
     "atomic_cas expected value has type i64", "1L"),
    ("h : i32[]", "let a = atomic_add(h[0, 1], 1) in ()",
     "'h' has 1 dimension but is indexed with 2 indexes", "atomic_add"),
    ("h : i32[]", "let a = atomic_add(h[1.0], 1) in ()",
     "index 1 of 'h' has type f64, not an integer type", "1.0"),
    ("h : i32[]", "let a : i64 = atomic_add(h[0], 1) in ()",
     "'let a : i64' is given a value of type i32", "let"),
])
def test_ir33_ill_typed_atomics_are_located_errors(decl: str, body: str, msg: str,
                                                   at: str) -> None:
    text = f"kernel k({decl}) =\n  {body}\n"
    err = _check_error(text)
    assert msg in err.message, err.message
    _caret(text, err, at)


def test_ir33_local_array_is_refused() -> None:
    text = "kernel k(h : i32[])\n  local t : i32[4] =\n  let a = atomic_add(t[0], 1) in ()\n"
    err = _check_error(text)
    assert "atomic_add on local array 't': atomics update global or shared arrays" in err.message
    _caret(text, err, "atomic_add")


def test_ir33_shared_array_is_accepted_and_pure_helper_is_refused() -> None:
    one("kernel k(h : i32[])\n  shared t : i32[4] =\n  t[thread_idx_x % 4] <- 0;\n"
        "  let a = atomic_add(t[0], 1) in ()\n")
    text = ("pure fun f(a : i32[]) : i32 =\n  let o = atomic_add(a[0], 1) in\n  return o\n"
            "kernel k(h : i32[]) = h[0] <- f(h)\n")
    err = _check_error(text)
    assert "pure helper 'f' updates array 'a' with atomic_add" in err.message
    _caret(text, err, "atomic_add")


def test_ir33_atomic_in_an_impure_helper_is_fine() -> None:
    m = parse_module("""fun bump(a : i32[], i : i32) : i32 =
      let o = atomic_add(a[i], 1) in return o
    kernel k(h : i32[], out : i32[]) =
      let i = global_thread_id in out[i] <- bump(h, 0)""", "t.sk")
    check_module(m)
    h, out = np.zeros(1, np.int32), np.zeros(8, np.int32)
    run_kernel(m.kernels[0], {"h": h, "out": out}, 8, 4)
    assert h.tolist() == [8] and out.tolist() == list(range(8))


# --------------------------------------------------------------------------------- IR-34


@pytest.mark.parametrize("body", [
    "let a = atomic_add(h[0], 1) + 1 in ()",
    "h[1] <- atomic_add(h[0], 1)",
    "if atomic_add(h[0], 1) > 0 then ()",
    "let a = h[atomic_add(h[0], 1)] in ()",
    "for j = 0 to atomic_add(h[0], 1) do () done",
    "while atomic_cas(h[0], 0, 1) != 0 do () done",
    "let a = max(atomic_max(h[0], 1), 2) in ()",
    "let a = true ? atomic_add(h[0], 1) : 0 in ()",
])
def test_ir34_atomic_inside_an_expression_is_refused(body: str) -> None:
    text = f"kernel k(h : i32[]) =\n  {body}\n"
    err = _check_error(text)
    assert "inside an expression: an atomic is the whole value of a let or an assignment" \
        in err.message, err.message
    _caret(text, err, "atomic_")


def test_ir34_atomic_as_a_helper_argument_or_return_value_is_refused() -> None:
    text = ("fun f(a : i32[]) : i32 =\n  return atomic_add(a[0], 1)\n"
            "kernel k(h : i32[]) = h[0] <- f(h)\n")
    err = _check_error(text)
    assert "an atomic is the whole value of a let or an assignment" in err.message
    _caret(text, err, "atomic_add")


# -------------------------------------------------------------------------------- INT-27


def test_int27_old_values_follow_thread_order() -> None:
    k = one("""kernel k(c : i32[], olds : i32[], n : i32) =
      let i = global_thread_id in
      if i < n then (let o = atomic_add(c[i % 3], i + 1) in olds[i] <- o)""")
    c, olds = np.zeros(3, np.int32), np.zeros(10, np.int32)
    run_kernel(k, {"c": c, "olds": olds, "n": 10}, 16, 4)
    want_c = [sum(t + 1 for t in range(10) if t % 3 == r) for r in range(3)]
    assert c.tolist() == want_c
    assert olds.tolist() == [sum(t + 1 for t in range(i) if t % 3 == i % 3) for i in range(10)]


@pytest.mark.parametrize(("op", "init", "want"), [
    ("atomic_min", 5, lambda vals, x: min([x, *vals])),
    ("atomic_max", -5, lambda vals, x: max([x, *vals])),
    ("atomic_exch", 99, lambda vals, x: vals[-1]),
])
def test_int27_min_max_exch_sequential_semantics(op: str, init: int, want: object) -> None:
    k = one(f"""kernel k(c : i64[], v : i64[], olds : i64[], n : i32) =
      let i = global_thread_id in
      if i < n then (let o = {op}(c[0], v[i]) in olds[i] <- o)""")
    rng = np.random.default_rng(3)
    v = rng.integers(-2**40, 2**40, 37).astype(np.int64)
    c, olds = np.array([init], np.int64), np.zeros(37, np.int64)
    run_kernel(k, {"c": c, "v": v, "olds": olds, "n": 37}, 37, 8)
    seq = [init]
    for x in v.tolist():
        seq.append(want(seq[1:] + [x], seq[0]) if op != "atomic_exch" else x)  # type: ignore[operator]
    assert c[0] == seq[-1] and olds.tolist() == seq[:-1]


def test_int27_integer_add_wraps_like_a_sequence_of_adds() -> None:
    k = one("""kernel k(c : i32[], olds : i32[]) =
      let i = global_thread_id in let o = atomic_add(c[i % 2], 2147483000) in olds[i] <- o""")
    c, olds = np.zeros(2, np.int32), np.zeros(9, np.int32)
    run_kernel(k, {"c": c, "olds": olds}, 9, 4)
    acc = [0, 0]
    want = []
    for i in range(9):
        want.append(acc[i % 2])
        acc[i % 2] = (acc[i % 2] + 2147483000 + 2**31) % 2**32 - 2**31
    assert olds.tolist() == want and c.tolist() == acc


def test_int27_float_add_rounds_after_each_addition_in_thread_order() -> None:
    k = one("""kernel k(c : f32[], v : f32[]) =
      let i = global_thread_id in let o = atomic_add(c[0], v[i]) in ()""")
    v = np.array([1e8, 1.0, -1e8, 1.0], np.float32)
    c = np.zeros(1, np.float32)
    run_kernel(k, {"c": c, "v": v}, 4, 4)
    acc = np.float32(0)
    for x in v:
        acc = np.float32(acc + x)
    assert c[0] == acc == np.float32(1.0)  # not 2.0: 1e8 + 1 rounds to 1e8


def test_int27_float_cas_compares_bit_patterns() -> None:
    k = one("""kernel k(c : f32[], olds : f32[]) =
      let i = global_thread_id in
      let o = atomic_cas(c[i], 0.0f, 7.0f) in olds[i] <- o""")
    nan = np.frombuffer(np.array([0x7FC00001], np.uint32).tobytes(), np.float32)[0]
    c = np.array([0.0, -0.0, nan, 1.0], np.float32)
    olds = np.zeros(4, np.float32)
    run_kernel(k, {"c": c, "olds": olds}, 4, 4)
    assert c[0] == 7.0 and c[1] == 0.0 and np.signbit(c[1]) and np.isnan(c[2])
    assert c[3] == 1.0 and olds.view(np.uint32)[1] == 0x80000000
    k2 = one("""kernel k(c : f32[], e : f32[]) =
      let i = global_thread_id in let o = atomic_cas(c[i], e[i], 7.0f) in ()""")
    c2, e2 = np.array([nan, -0.0], np.float32), np.array([nan, -0.0], np.float32)
    run_kernel(k2, {"c": c2, "e": e2}, 2, 2)
    assert c2.tolist() == [7.0, 7.0]  # the same NaN bits and the same zero match


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("op", list(AtomicOp))
def test_int27_vectorised_updates_equal_one_lane_at_a_time(dtype: type, op: AtomicOp) -> None:
    """The interpreter's fast paths (no shared element; integer prefix sums; running
    accumulations per element) give the bytes of applying each lane's update in thread
    order, NaNs and wrapping included."""
    from sarek_py.ir.interp_atomics import apply, new_value

    rng = np.random.default_rng(zlib.crc32(f"{dtype.__name__} {op.value}".encode()))
    is_float = bool(np.issubdtype(dtype, np.floating))
    for _ in range(25):
        n, m = int(rng.integers(1, 60)), int(rng.integers(1, 6))
        addr = rng.integers(0, m, n).astype(np.int64)
        if rng.integers(2):
            addr = rng.permutation(n).astype(np.int64)[:n]  # every lane its own element
            m = n
        if is_float:
            v = (rng.standard_normal(n) * 1e3).astype(dtype)
            v[rng.integers(0, n, 4)] = [0.0, -0.0, np.nan, -np.inf]  # the order's edges
            c = np.where(rng.integers(0, 2, n) == 1, v, 0).astype(dtype)
            data = rng.standard_normal(m).astype(dtype)
            data[rng.integers(0, m)] = [np.nan, 0.0, -0.0][int(rng.integers(3))]
        else:
            info = np.iinfo(dtype)
            v = rng.integers(info.min, info.max, n, dtype=dtype)
            c, data = rng.integers(-2, 2, n).astype(dtype), rng.integers(-2, 2, m).astype(dtype)
        ref, ref_old = data.copy(), np.empty(n, dtype)
        with np.errstate(all="ignore"):
            for k in range(n):
                ref_old[k] = ref[addr[k]]
                ref[addr[k]] = new_value(op, ref[addr[k]], v[k], c[k], is_float)
            got = data.copy()
            old = apply(op, got, addr, v, c)
        assert got.tobytes() == ref.tobytes() and old.tobytes() == ref_old.tobytes()


def test_int27_cas_loop_max_converges() -> None:
    k = one(CAS_MAX)
    rng = np.random.default_rng(5)
    v = rng.integers(-1000, 1000, 300).astype(np.int32)
    m = np.array([-2**31], np.int32)
    run_kernel(k, {"v": v, "m": m, "n": 300}, 320, 64)
    assert m[0] == v.max()


CAS_MAX = """kernel cas_max(v : i32[], m : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    let x = v[i] in
    let mut seen = atomic_add(m[0], 0) in
    let mut go = x > seen in
    while go do
      let got = atomic_cas(m[0], seen, x) in
      (if got == seen then go := false
       else (seen := got; go := x > seen))
    done
  )
"""


def test_int27_atomic_out_of_bounds_and_uninitialised_shared_are_located() -> None:
    text = "kernel k(h : i32[]) =\n  let i = global_thread_id in\n  let o = atomic_add(h[i + 2], 1) in ()\n"
    with pytest.raises(InterpError) as ei:
        run_kernel(one(text), {"h": np.zeros(4, np.int32)}, 4, 4)
    assert "thread 2: out-of-bounds atomic_add of array 'h' at index [4]" in ei.value.message
    assert ei.value.loc is not None and ei.value.loc.line == 3
    k = one("kernel k(h : i32[])\n  shared s : i32[4] =\n  let o = atomic_add(s[0], 1) in\n"
            "  h[thread_idx_x] <- o\n")
    with pytest.raises(InterpError) as ei:
        run_kernel(k, {"h": np.zeros(4, np.int32)}, 4, 4)
    assert "atomic_add of uninitialised element [0] of shared array 's'" in ei.value.message


def test_int27_shared_histogram_with_barriers() -> None:
    k = one(SHARED_HIST)
    data = (np.arange(256, dtype=np.int32) * 7) % 13
    h = np.zeros(8, np.int32)
    run_kernel(k, {"data": data, "h": h, "n": 256}, 256, 64)
    assert h.tolist() == np.bincount(data % 8, minlength=8).tolist()


SHARED_HIST = """kernel shist(data : i32[], h : i32[], n : i32)
  shared s : i32[8] =
  let i = global_thread_id in
  let t = thread_idx_x in
  if t < 8 then s[t] <- 0;
  barrier;
  (if i < n then let o = atomic_add(s[data[i] % 8], 1) in ());
  barrier;
  if t < 8 then let o2 = atomic_add(h[t], s[t]) in ()
"""


# -------------------------------------------------------------------------------- INT-28


def test_int28_atomics_on_one_element_are_not_races() -> None:
    k = one("""kernel k(h : i32[]) =
      let i = global_thread_id in
      let a = atomic_add(h[0], 1) in let b = atomic_max(h[0], i) in
      let c = atomic_cas(h[1], 0, i) in ()""")
    h = np.zeros(2, np.int32)
    run_kernel(k, {"h": h}, 64, 16)
    assert h.tolist() == [64, 1]  # thread 0 swaps 0 for 0, thread 1 then 0 for 1


@pytest.mark.parametrize(("body", "msg"), [
    ("let a = atomic_add(h[0], 1) in out[i] <- h[0]",
     "thread 0 reads it after it was updated atomically by several other threads"),
    ("(if i == 3 then h[0] <- 5); let a = atomic_add(h[0], 1) in ()",
     "thread 0 updates it with atomic_add after it was stored by thread 3"),
    ("let r = h[0] in let a = atomic_exch(h[0], i) in out[i] <- r",
     "updates it with atomic_exch after it was read by"),
    ("let a = atomic_add(h[i % 2], 1) in (if i == 5 then h[1] <- 0)",
     "thread 5 stores it after it was updated atomically by"),
])
def test_int28_atomic_and_plain_access_race(body: str, msg: str) -> None:
    k = one(f"kernel k(h : i32[], out : i32[]) =\n  let i = global_thread_id in\n  {body}\n")
    with pytest.raises(InterpError) as ei:
        run_kernel(k, {"h": np.zeros(2, np.int32), "out": np.zeros(8, np.int32)}, 8, 8)
    assert "data race on array 'h' element" in ei.value.message
    assert msg in ei.value.message, ei.value.message


def test_int28_same_thread_may_mix_and_barrier_forgets_shared() -> None:
    k = one("""kernel k(h : i32[], out : i32[]) =
      let i = global_thread_id in
      let a = atomic_add(h[i], 1) in out[i] <- h[i] + a""")
    h, out = np.zeros(8, np.int32), np.zeros(8, np.int32)
    run_kernel(k, {"h": h, "out": out}, 8, 8)
    assert out.tolist() == [1] * 8
    k2 = one("""kernel k(out : i32[])
      shared s : i32[1] =
      let t = thread_idx_x in
      if t == 0 then s[0] <- 0;
      barrier;
      let a = atomic_add(s[0], 1) in
      barrier;
      out[global_thread_id] <- s[0]""")
    out2 = np.zeros(16, np.int32)
    run_kernel(k2, {"out": out2}, 16, 8)
    assert out2.tolist() == [8] * 16


def test_int28_plain_store_histogram_is_a_race() -> None:
    k = one(PLAIN_HIST)
    with pytest.raises(InterpError) as ei:
        run_kernel(k, {"data": np.arange(64, dtype=np.int32) % 5, "h": np.zeros(8, np.int32),
                       "n": 64}, 64, 16)
    assert "data race on array 'h'" in ei.value.message


PLAIN_HIST = """kernel phist(data : i32[], h : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then h[data[i] % 8] <- h[data[i] % 8] + 1
"""


# -------------------------------------------------------------------------------- EFF-12


def test_eff12_atomic_reads_and_writes_its_array() -> None:
    m = parse_module("""fun bump(a : i32[], b : i32[]) : i32 =
      let o = atomic_add(a[0], b[0]) in return o
    kernel k(x : i32[], y : i32[], z : i32[]) =
      let o = atomic_max(z[0], 1) in x[0] <- bump(y, x)""", "t.sk")
    check_module(m)
    k = m.kernels[0]
    table = helper_effects(k.helpers)
    assert table["bump"].writes == {0} and table["bump"].reads == {0, 1}
    eff = kernel_effects(k.body, table)
    names = {v.name for v in eff.writes}
    assert names == {"x", "y", "z"} and {"z", "y", "x"} <= {v.name for v in eff.reads}
    assert kernel_writes(k) == frozenset({"x", "y", "z"})


# --------------------------------------------------------------------------------- HP-20


def test_hp20_atomic_in_a_host_parallel_loop_is_refused() -> None:
    text = """program p
  var n : i32 = 8;
  var a : i32[1:8];
begin
  parallel for (i = 1 to n) do
    let o = atomic_add(a[1], i) in
    ()
  done
end
"""
    p = parse_program(text, "p.sk")
    with pytest.raises(CheckError) as ei:
        check_program(p)
    assert "atomic_add in a host program's statements, parallel loops or helpers" \
        in ei.value.message
    assert ei.value.loc is not None and ei.value.loc.line == 6
    with pytest.raises(FusionRefused) as er:  # loop fusion refuses it too (LEG-20)
        fuse_program(p)
    assert er.value.rule == "LEG-20" and "atomic_add(a[1], i)" in er.value.reason


def test_hp20_a_launched_kernel_may_hold_atomics() -> None:
    p = hp.Program("p", (), hp.Block(()), kernels=(one(SHARED_HIST),))
    check_program(p)


LAUNCHING = """kernel hist(data : i32[], h : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then let o = atomic_add(h[data[i] % 4], 1) in ()

program p
  var n : i32 = 40;
  var d : i32[40];
  var h : i32[4];
  var c : i32[4];
begin
  parallel for (i = 0 to n - 1) do d[i] <- i * 3 done;
  launch hist(d, h, n) threads n block 16;
  sync;
  parallel for (j = 0 to 3) do c[j] <- h[j] * 2 done
end
"""


def test_hp20_leg20_a_program_launching_an_atomic_kernel_checks_runs_and_loop_fuses() -> None:
    """Regression: the host check and loop fusion looked for atomics inside the kernels
    the program's launches name, refusing a legal program."""
    from sarek_py.host.interp import run_program

    p = parse_program(LAUNCHING, "p.sk")
    check_program(p)
    res = run_program(p)
    assert res.array("h").tolist() == [10, 10, 10, 10]
    assert res.array("c").tolist() == [20, 20, 20, 20]
    fuse_program(p)  # no LEG-20: the atomics are in a launched kernel


# -------------------------------------------------------------------------------- LEG-20

PAIR = """kernel hist(data : i32[], h : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then let o = atomic_add(h[data[i] % 8], 1) in ()

kernel scale(h : i32[], out : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then out[i] <- h[i] * 2

kernel square(x : i32[], y : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- x[i] * x[i]

kernel count(y : i32[], c : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then let o = atomic_add(c[y[i] % 4], 1) in ()
"""


def test_leg20_producer_with_an_atomic_is_refused_by_name() -> None:
    m = parse_module(PAIR, "pair.sk")
    check_module(m)
    with pytest.raises(FusionRefused) as ei:
        fuse(m.kernel("hist"), m.kernel("scale"), shared={"h": "h"}, p_array="h")
    r = ei.value
    assert r.rule == "LEG-20" and "[LEG-20] producer hist" in str(r)
    assert "producer hist updates 'h' with atomic_add(h[data[i] % 8], 1)" in r.reason
    assert r.loc is not None and (r.loc.file, r.loc.line) == ("pair.sk", 3)


def test_leg20_consumer_with_an_atomic_is_refused_in_a_launch_sequence() -> None:
    m = parse_module(PAIR, "pair.sk")
    check_module(m)
    n = 64
    launches = [KernelLaunch(m.kernel("square"), n, 16, {"x": "X", "y": "Y", "n": n}),
                KernelLaunch(m.kernel("count"), n, 16, {"y": "Y", "c": "C", "n": n})]
    out, report = fuse_launches(launches)
    assert len(out) == 2 and len(report) == 1 and not report[0].fused
    assert report[0].rule == "LEG-20"
    assert "consumer count updates 'c' with atomic_add(c[y[i] % 4], 1)" in (report[0].reason or "")
    # and the pair without the atomic fuses (the refusal is the atomic's, not the pair's)
    plain = parse_module(PAIR.replace("let o = atomic_add(c[y[i] % 4], 1) in ()",
                                      "c[i] <- y[i] + 1"), "pair.sk")
    out2, report2 = fuse_launches([KernelLaunch(plain.kernel("square"), n, 16,
                                                {"x": "X", "y": "Y", "n": n}),
                                   KernelLaunch(plain.kernel("count"), n, 16,
                                                {"y": "Y", "c": "C", "n": n})])
    assert report2[0].fused, report2[0]


def test_leg20_atomic_in_a_helper_is_refused() -> None:
    m = parse_module("""fun bump(a : i32[], i : i32) : i32 =
      let o = atomic_add(a[i], 1) in return o
    kernel p(x : i32[], y : i32[], n : i32) =
      let i = global_thread_id in if i < n then y[i] <- x[i] + bump(x, 0)
    kernel c(y : i32[], z : i32[], n : i32) =
      let i = global_thread_id in if i < n then z[i] <- y[i]""", "h.sk")
    check_module(m)
    with pytest.raises(FusionRefused) as ei:
        fuse(m.kernel("p"), m.kernel("c"), shared={"y": "y"}, p_array="y")
    assert ei.value.rule == "LEG-20" and "producer p updates 'a'" in ei.value.reason


# ------------------------------------------------------------------------- CG-30, CG-31


def test_cg30_cuda_uses_native_atomics_and_bit_pattern_loops() -> None:
    src = emit_cuda(one(ALL))
    assert "atomicAdd(&h[" in src and "atomicMin(&l[0], (long long)i)" in src
    assert "sarek_atomic_max_f32(&f[1]" in src and "sarek_atomic_cas_f32(&g[" in src
    assert "__longlong_as_double((long long)atomicExch((unsigned long long*)&d[2]" in src
    assert "sarek_atomic_add_f64(&d[0]" in src and "#if __CUDA_ARCH__ >= 600" in src
    assert "atomicCAS(&h[3], 7, a)" in src
    # f32 add is a CAS loop, never the flushing atom.add.f32
    k = one("kernel k(f : f32[]) = let o = atomic_add(f[0], 1.0f) in ()")
    s2 = emit_cuda(k)
    assert "sarek_atomic_add_f32(&f[0], 1.0f)" in s2 and "atomicAdd(" not in s2


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_cg30_cuda_compiles_with_nvcc_without_fma() -> None:
    ptx = compile_ptx(emit_cuda(one(ALL)))
    assert "atom" in ptx and "fma.rn" not in ptx
    assert "atom.global.add.f32" not in ptx and "red.global.add.f32" not in ptx


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_cg30_cg31_one_unit_of_several_atomic_kernels_builds() -> None:
    """CG-16: the loop functions and extension pragmas of several kernels, each once."""
    from sarek_py.codegen.cstyle import emit_module
    from sarek_py.codegen.cuda import CUDA

    ks = [one(ALL), one(SHARED_HIST), one(CAS_MAX)]
    cu = emit_module(ks, CUDA)
    assert cu.count("float sarek_atomic_max_f32(") == 1
    assert "atom" in compile_ptx(cu)
    cl = emit_module(ks, OPENCL)
    assert cl.count(f"#pragma OPENCL EXTENSION {BASE64} : enable") == 1
    assert cl.index("sarek_atomic_max_f32_global(volatile") < cl.index("__kernel void every")


def test_cg30_two_discarded_old_values_get_distinct_c_names() -> None:
    """Regression: a second variable named ``_`` (the front end's name for a discarded
    atomic's old value, FE-25, and a helper's result called for its effect, FE-11) sent
    the C namer into an endless loop (``__2``, ``__3`` … are all reserved)."""
    import signal

    k = one("kernel k(h : i32[]) =\n  let _ = atomic_add(h[0], 1) in\n"
            "  let _ = atomic_add(h[1], 1) in\n  let _ = atomic_add(h[2], 1) in ()\n")

    def stuck(*_: object) -> None:
        raise TimeoutError("the C namer did not finish")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(10)
    try:
        src = emit_opencl(k)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    names = re.findall(r"int (\w+) = (?:\(sarek_in1\(sarek_oob, \d, \d, \w+\) \? )?atomic_add", src)
    assert len(set(names)) == 3, src


def test_cg30_operands_that_read_memory_are_computed_first() -> None:
    k = one("""kernel k(h : i32[], v : i32[], idx : i32[]) =
      let i = global_thread_id in let o = atomic_cas(h[idx[i]], v[i], v[i + 1]) in ()""")
    src = emit_opencl(k)
    lines = [ln.strip() for ln in src.splitlines()]
    at = next(n for n, ln in enumerate(lines) if ln.startswith("const int h_at0"))
    assert lines[at + 1].startswith("const int h_expected") and \
        lines[at + 2].startswith("const int h_value")
    assert "atomic_cmpxchg(&h[h_at0], h_expected, h_value)" in src
    assert "sarek_in1(sarek_oob" in src  # checked: an out-of-bounds atomic touches nothing


def test_cg31_opencl_records_int64_extensions() -> None:
    k = one(ALL)
    em = emit(k, OPENCL)
    exts = dict(em.extensions)
    assert set(exts) == {BASE64, EXTENDED64}
    assert exts[EXTENDED64] == "atomic_min on i64 array 'l'"
    assert f"#pragma OPENCL EXTENSION {BASE64} : enable" in em.source
    assert "sarek_atomic_add_f32_local" not in em.source
    assert "atomic_add(&s[" in em.source and "sarek_atomic_cas_f32_global(&g[" in em.source
    k32 = one(SHARED_HIST)
    assert emit(k32, OPENCL).extensions == ()


def test_cg31_missing_extension_is_named() -> None:
    needed = emit(one(ALL), OPENCL).extensions
    assert missing_extensions(needed, f"cl_khr_fp64 {BASE64} {EXTENDED64}") == []
    missing = missing_extensions(needed, "cl_khr_fp64 " + BASE64)
    assert missing == [(EXTENDED64, "atomic_min on i64 array 'l'")]


@pytest.mark.opencl
def test_cg31_runtime_refuses_a_device_without_the_extension() -> None:
    from sarek_py.ir.diagnostics import BackendUnavailable, LaunchError
    from sarek_py.runtime import get_backend

    try:
        be = get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(f"no OpenCL here: {exc.message}")

    class Lacking:  # the device as a driver without 64-bit atomics reports it
        def __init__(self, real: object) -> None:
            self.real = real
            self.extensions = "cl_khr_fp64 cl_khr_global_int32_base_atomics"

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

    k = one("kernel k(l : i64[]) = let o = atomic_max(l[0], 3L) in ()")
    real = be.device  # type: ignore[attr-defined]
    be.device = Lacking(real)  # type: ignore[attr-defined]
    try:
        with pytest.raises(LaunchError) as ei:
            be.run_kernel(k, {"l": np.zeros(1, np.int64)}, 1, 1)
    finally:
        be.device = real  # type: ignore[attr-defined]
    msg = ei.value.message
    assert f"atomic_max on i64 array 'l' needs the OpenCL extension {BASE64}" in msg
    assert "lacks" in msg


# --------------------------------------------------------------------------------- FE-25

FRONT = '''
from sarek_py.frontend import (Vec, Vec2, atomic, atomic_add, atomic_cas, barrier, f32,
                               global_thread_id, i32, kernel, shared, thread_idx_x)


@kernel
def shist(data: Vec[i32], h: Vec[i32], n: i32):
    s = shared(i32, 8)
    t = thread_idx_x()
    i = global_thread_id()
    if t < 8:
        s[t] = 0
    barrier()
    if i < n:
        atomic.add(s, data[i] % 8, 1)
    barrier()
    if t < 8:
        atomic_add(h, t, s[t])


@kernel
def hist(data: Vec[i32], h: Vec[i32], n: i32):
    i = global_thread_id()
    if i < n:
        atomic_add(h, data[i] % 8, 1)


@kernel
def fsum(x: Vec[f32], s: Vec2[f32], olds: Vec[f32], n: i32):
    i = global_thread_id()
    if i < n:
        old = atomic.add(s, (0, i % 2), x[i])
        olds[i] = old


@kernel
def cas_max(v: Vec[i32], m: Vec[i32], n: i32):
    i = global_thread_id()
    if i < n:
        x = v[i]
        seen = atomic_add(m, 0, 0)
        while x > seen:
            got = atomic_cas(m, 0, seen, x)
            if got == seen:
                break
            seen = got


@kernel
def square(x: Vec[i32], y: Vec[i32], n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = x[i] * x[i]


@kernel
def nested(h: Vec[i32]):
    x = atomic_add(h, 0, 1) + 1
    h[1] = x
'''


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> object:
    import importlib.util

    d = tmp_path_factory.mktemp("fe25")
    path = d / "fe25_kernels.py"
    path.write_text(FRONT)
    spec = importlib.util.spec_from_file_location("fe25_kernels", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fe25_statement_and_value_forms(front: object) -> None:
    hist, fsum = front.hist, front.fsum  # type: ignore[attr-defined]
    text = print_module(Module(kernels=(hist.ir,)))
    assert "let _ = atomic_add(h[data[i] % 8], 1) in" in text
    data = (np.arange(100, dtype=np.int32) * 3) % 11
    h = np.zeros(8, np.int32)
    hist[100, 32](data, h, 100, backend="interp")
    assert h.tolist() == np.bincount(data % 8, minlength=8).tolist()
    assert "atomic_add(s[0, i % 2], x[i])" in print_module(Module(kernels=(fsum.ir,)))
    x, s, olds = np.ones(10, np.float32), np.zeros((1, 2), np.float32), np.zeros(10, np.float32)
    # the old values follow the interpreter's thread order (INT-27); a device orders the
    # atomics as it schedules the threads, so the backend is named, not the default
    fsum[10, 8](x, s, olds, 10, backend="interp")
    assert s.tolist() == [[5.0, 5.0]] and olds.tolist() == [i // 2 for i in range(10)]


def test_fe25_leg20_pipeline_runs_an_atomic_pair_unfused(front: object) -> None:
    from sarek_py.frontend import pipeline

    x = np.arange(40, dtype=np.int32)
    y, h = np.zeros(40, np.int32), np.zeros(8, np.int32)
    with pipeline() as p:
        front.square[40, 16](x, y, 40)  # type: ignore[attr-defined]
        front.hist[40, 16](y, h, 40)  # type: ignore[attr-defined]
    assert [d.rule for d in p.decisions] == ["LEG-20"]
    assert "consumer hist updates 'h' with atomic_add(h[data[i] % 8], 1)" in \
        (p.decisions[0].reason or "")
    assert h.tolist() == np.bincount((x * x) % 8, minlength=8).tolist()


def test_fe25_shared_array_histogram(front: object) -> None:
    data = (np.arange(96, dtype=np.int32) * 5) % 13
    h = np.zeros(8, np.int32)
    front.shist[96, 32](data, h, 96)  # type: ignore[attr-defined]
    assert h.tolist() == np.bincount(data % 8, minlength=8).tolist()


def test_fe25_cas_loop_runs(front: object) -> None:
    v = np.array([3, -7, 12, 5, 12, 0], np.int32)
    m = np.array([-100], np.int32)
    front.cas_max[6, 4](v, m, 6)  # type: ignore[attr-defined]
    assert m[0] == 12


def test_fe25_atomic_inside_an_expression_is_a_located_error(front: object) -> None:
    from sarek_py.ir.diagnostics import SarekError

    with pytest.raises(SarekError) as ei:
        front.nested.ir  # type: ignore[attr-defined]  # noqa: B018
    err = ei.value
    assert "atomic_add inside an expression" in err.message
    assert err.loc is not None and err.loc.file.endswith("fe25_kernels.py")
    assert err.loc.line == FRONT.splitlines().index("    x = atomic_add(h, 0, 1) + 1") + 1


@pytest.mark.parametrize(("line", "msg"), [
    ("atomic_add(h, 0)", "atomic_add(array, index, value) takes 3 arguments, not 2"),
    ("atomic_add(h, (0, 1), 1)", "'h' has rank 1 but atomic_add gives 2 indexes"),
    ("atomic_add(h, 0, 1.5)", "the operand of atomic_add on 'h' must be i32, not f64"),
    ("atomic.cas(h, 0, 1)", "atomic_cas(array, index, expected, new) takes 4 arguments"),
    ("atomic_add(n, 0, 1)", "'n' is not an array"),
])
def test_fe25_bad_calls_are_located(tmp_path: Path, line: str, msg: str) -> None:
    import importlib.util

    from sarek_py.ir.diagnostics import SarekError

    src = textwrap.dedent(f'''
        from sarek_py.frontend import Vec, atomic, atomic_add, i32, kernel


        @kernel
        def bad(h: Vec[i32], n: i32):
            {line}
        ''')
    path = tmp_path / "fe25_bad.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("fe25_bad", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(SarekError) as ei:
        mod.bad.ir  # noqa: B018
    assert msg in ei.value.message, ei.value.message
    assert ei.value.loc is not None and ei.value.loc.line == 7


def test_fe25_stubs_refuse_to_run_in_python() -> None:
    from sarek_py.frontend import atomic, atomic_add
    from sarek_py.frontend.intrinsics import KernelOnly

    with pytest.raises(KernelOnly):
        atomic_add(np.zeros(1), 0, 1)
    assert atomic.cas.name == "atomic_cas"


def test_atomics_module_rows_in_architecture_doc() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()
    for mod in ("ir/atomics.py", "ir/interp_atomics.py", "codegen/atomics.py",
                "fusion/atomics.py"):
        assert re.search(re.escape(mod), doc), mod

