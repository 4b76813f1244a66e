"""Inlining of pure helpers, rule by rule (specs/inlining.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sarek_py.fusion.loops.inline import (
    NotInlined,
    helper_refusal,
    inline_calls,
    inline_report,
    inline_stmt,
    is_self_contained,
    self_contained,
)
from sarek_py.fusion.loops.inline_returns import tail_returns
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Call,
    Const,
    HelperFunc,
    Kernel,
    Length,
    Module,
    Read,
    Ref,
    Return,
    Store,
    var,
)
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel
from sarek_py.ir.typecheck import check_kernel
from sarek_py.ir.types import ArrayType, MemSpace, Scalar
from sarek_py.ir.visit import iter_exprs, iter_nodes


def kernel(src: str, name: str = "k") -> Kernel:
    k = parse_module(src).kernel(name)
    check_kernel(k)
    return k


def calls(k: Kernel) -> list[str]:
    return [e.func for e in iter_exprs(k.body) if isinstance(e, Call)]


def run(k: Kernel, n: int = 16) -> np.ndarray:
    a = np.arange(n, dtype=np.float32) - 5.0
    out = np.zeros(n, np.float32)
    run_kernel(k, {"a": a, "out": out, "n": n}, n, 8)
    return out


def same_result(src: str) -> tuple[Kernel, list[NotInlined]]:
    k = kernel(src)
    ki, report = inline_report(k)
    check_kernel(ki)
    assert run(k).tobytes() == run(ki).tobytes()
    return ki, report


HEAD = "kernel k(a : f32[], out : f32[], n : i32) =\n  let i = global_thread_id in\n"


def test_inl1_positions_inlined() -> None:
    """INL-1: let values, stores, if tests, for bounds, assignment values, nested args."""
    src = """
pure fun sq(x : f32) : f32 = return x * x
pure fun two(k : i32) : i32 = return k * 2
""" + HEAD + """  if i < n then (
    let t = sq(a[i]) in
    let mut s = 0.0f in
    s := sq(t);
    for j = 0 to two(1) do s := s + 1.0f done;
    if sq(s) > 1.0f then out[i] <- sq(sq(t)) + s
  )
"""
    ki, report = same_result(src)
    assert calls(ki) == [] and report == []
    assert ki.helpers == ()  # INL-10: no helper is called any more


def test_inl2_block_and_fresh_names() -> None:
    """INL-2: straight-line bodies give immutable lets; locals get fresh ids and names,
    so a helper local named like a kernel variable captures nothing."""
    src = """
pure fun f(x : f32) : f32 =
  let i = x * 2.0f in
  return i + 1.0f
""" + HEAD + "  if i < n then out[i] <- f(a[i]) + f(a[i])\n"
    ki, _ = same_result(src)
    lets = [n for n in iter_nodes(ki.body) if type(n).__name__ == "Let"]
    names = [n.var.name for n in lets]  # type: ignore[union-attr]
    assert len(set(names)) == len(names)
    assert all(not n.var.mutable for n in lets)  # type: ignore[union-attr]
    assert "f_res" in names and "f_res_2" in names and "f_i" in names
    ids = [n.var.id for n in lets]  # type: ignore[union-attr]
    assert len(set(ids)) == len(ids)
    # printing and parsing the result gives the same kernel (no capture by name)
    text = print_kernel(ki)
    again = parse_module(text).kernel("k")
    assert run(again).tobytes() == run(ki).tobytes()


def test_inl2_general_body_uses_mutable_result() -> None:
    """INL-2: a body with a loop gives `let mut f_res = 0` assigned by the return."""
    src = """
pure fun f(x : f32) : f32 =
  let mut s = x in
  for j = 1 to 3 do s := s * 0.5f done;
  return s
""" + HEAD + "  if i < n then out[i] <- f(a[i])\n"
    ki, _ = same_result(src)
    text = print_kernel(ki)
    assert "let mut f_res = 0.0f" in text and "f_res := f_s" in text


def test_inl3_scalar_arguments() -> None:
    """INL-3: variables and constants are substituted; other actuals bound once."""
    src = """
pure fun f(x : f32, y : f32) : f32 = return x * y + x
""" + HEAD + "  if i < n then (let t = a[i] in out[i] <- f(t, 2.0f) + f(a[i] + 1.0f, t))\n"
    ki, _ = same_result(src)
    text = print_kernel(ki)
    assert "t * 2.0f + t" in text
    assert "let f_x = a[i] + 1.0f in" in text  # evaluated once, then used twice
    assert text.count("a[i] + 1.0f") == 1


def test_inl4_array_dummy_and_shift() -> None:
    """INL-4: array dummy replaced by the actual; lengths follow; subscripts shifted by the
    difference of lower bounds; a constant extent the actual lacks is refused."""
    src = """
pure fun at(v : f32[], k : i32) : f32 = return v[k] + f32(length(v))
""" + HEAD + "  if i < n then out[i] <- at(a, i)\n"
    ki, _ = same_result(src)
    reads = [e for e in iter_exprs(ki.body) if isinstance(e, Read)]
    assert all(r.array.name == "a" for r in reads)
    assert any(isinstance(e, Length) and e.array.name == "a" for e in iter_exprs(ki.body))
    # lower bounds differ (built by hand: the checker asks for equal types): shift by 1 - 3
    dummy = var("v", ArrayType(Scalar.F32, MemSpace.GLOBAL, (3,), (None,)))
    k = var("k", Scalar.I32)
    h = HelperFunc("at", (dummy, k), Scalar.F32, Return(Read(dummy, (Ref(k),))), pure=True)
    actual = var("b", ArrayType(Scalar.F32, MemSpace.GLOBAL, (1,), (None,)))
    out = var("out", ArrayType(Scalar.F32))
    st = Store(out, (Const(0, Scalar.I32),),
               Call("at", (Ref(actual), Const(5, Scalar.I32)), Scalar.F32))
    new, report = inline_stmt(st, [h])
    assert report == []
    (rd,) = [e for e in iter_exprs(new) if isinstance(e, Read)]
    assert rd.array == actual
    assert rd.index == (Binary(BinaryOp.SUB, Const(5, Scalar.I32), Const(2, Scalar.I32)),)
    # a dummy with a constant extent the actual does not have
    fixed = var("v", ArrayType(Scalar.F32, MemSpace.GLOBAL, (0,), (4,)))
    h4 = HelperFunc("at", (fixed, k), Scalar.F32, Return(Read(fixed, (Ref(k),))), pure=True)
    st4 = Store(out, (Const(0, Scalar.I32),),
                Call("at", (Ref(out), Const(1, Scalar.I32)), Scalar.F32))
    same, report4 = inline_stmt(st4, [h4])
    assert same == st4 and [r.rule for r in report4] == ["INL-4"]


def test_inl5_returns() -> None:
    """INL-5: early returns rewritten exactly; returns in a loop refused."""
    src = """
pure fun sgn(x : f32) : f32 =
  if x < 0.0f then return -1.0f;
  if x == 0.0f then return 0.0f else (let y = x in ());
  return 1.0f
pure fun pick(x : f32) : f32 =
  if x > 1.0f then return x else return -x
""" + HEAD + "  if i < n then out[i] <- sgn(a[i]) + pick(a[i])\n"
    ki, report = same_result(src)
    assert calls(ki) == [] and report == []
    loop = parse_module("""
pure fun first(x : f32) : f32 =
  for j = 0 to 3 do
    if x > f32(j) then return f32(j)
  done;
  return x
""").helpers[0]
    assert tail_returns(loop.body) is None
    r = helper_refusal("first", [loop])
    assert r is not None and r.rule == "INL-5"


def test_inl6_helpers_refused() -> None:
    """INL-6: impure, unit, unknown, thread intrinsics, stores (rechecked), cycles."""
    m = parse_module("""
fun impure(x : f32) : f32 = return x
pure fun ok(x : f32) : f32 = return x
""")
    assert helper_refusal("impure", m.helpers) == NotInlined("impure", "INL-6",
                                                              "the helper is not pure")
    assert helper_refusal("ok", m.helpers) is None
    assert helper_refusal("nope", m.helpers) is not None
    x = var("x", Scalar.F32)
    unit = HelperFunc("u", (x,), Scalar.UNIT, Return(), pure=True)
    assert "no result" in str(helper_refusal("u", [unit]))
    tid = HelperFunc("t", (x,), Scalar.I32,
                     Return(Binary(BinaryOp.ADD, Ref(var("q", Scalar.I32)), Const(1, Scalar.I32))),
                     pure=True)
    assert helper_refusal("t", [tid]) is None
    from sarek_py.ir.nodes import Intrinsic

    uses_id = HelperFunc("t", (x,), Scalar.I32, Return(Intrinsic("global_thread_id")),
                         pure=True)
    assert "thread intrinsic" in str(helper_refusal("t", [uses_id]))
    arr = var("v", ArrayType(Scalar.F32))
    stores = HelperFunc("s", (arr,), Scalar.F32,
                        Store(arr, (Const(0, Scalar.I32),), Const(1.0, Scalar.F32)), pure=True)
    assert "store" in str(helper_refusal("s", [stores]))
    a_ = HelperFunc("a", (x,), Scalar.F32, Return(Call("b", (Ref(x),), Scalar.F32)), pure=True)
    b_ = HelperFunc("b", (x,), Scalar.F32, Return(Call("a", (Ref(x),), Scalar.F32)), pure=True)
    assert "cycle" in str(helper_refusal("a", [a_, b_]))
    src = """
fun impure(x : f32) : f32 = return x + 1.0f
""" + HEAD + "  if i < n then out[i] <- impure(a[i])\n"
    ki, report = same_result(src)
    assert calls(ki) == ["impure"] and [r.rule for r in report] == ["INL-6"]


def test_inl7_positions_refused() -> None:
    """INL-7: rhs of && / ||, arms of ?:, while conditions keep their calls."""
    src = """
pure fun f(x : f32) : f32 = return x * 2.0f
""" + HEAD + """  if i < n then (
    let mut s = a[i] in
    while s < 0.0f && f(s) < 100.0f do s := s + 4.0f done;
    if i > 2 || f(s) > 0.0f then s := s + 1.0f;
    out[i] <- s > 1.0f ? f(s) : s
  )
"""
    ki, report = same_result(src)
    assert calls(ki) == ["f", "f", "f"]
    assert {r.rule for r in report} == {"INL-7"}
    msgs = " ".join(r.message for r in report)
    assert "while condition" in msgs and "right operand of ||" in msgs
    assert "arm of a conditional" in msgs
    # the left operand is evaluated unconditionally: inlined
    src2 = """
pure fun f(x : f32) : f32 = return x * 2.0f
""" + HEAD + "  if f(a[i]) > 0.0f && i < n then out[i] <- 1.0f\n"
    ki2, report2 = same_result(src2)
    assert calls(ki2) == [] and report2 == []


def test_inl8_nested_calls() -> None:
    """INL-8: calls inside helpers and inside arguments are inlined in turn."""
    src = """
pure fun sq(x : f32) : f32 = return x * x
pure fun quad(x : f32) : f32 = return sq(sq(x))
""" + HEAD + "  if i < n then out[i] <- quad(sq(a[i]) + 1.0f)\n"
    ki, report = same_result(src)
    assert calls(ki) == [] and report == []


def test_inl8_select() -> None:
    """INL-8/INL-10: `select` restricts the inlined calls; the others stay, unreported."""
    src = """
pure fun f(x : f32) : f32 = return x + 1.0f
pure fun g(x : f32) : f32 = return x * 3.0f
""" + HEAD + "  if i < n then out[i] <- f(a[i]) + g(a[i])\n"
    k = kernel(src)
    ki, report = inline_report(k, select=lambda c: c.func == "g")
    assert calls(ki) == ["f"] and report == []
    assert [h.name for h in ki.helpers] == ["f"]
    assert run(k).tobytes() == run(ki).tobytes()
    assert calls(inline_calls(k)) == []


def test_inl9_self_contained() -> None:
    """INL-9: names only its own variables, no thread intrinsic, calls self-contained."""
    m = parse_module("""
pure fun leaf(x : f32) : f32 = return x + 1.0f
pure fun mid(x : f32) : f32 = return leaf(x) * 2.0f
fun tid_user(x : f32) : f32 = return x + f32(global_thread_id)
fun top(x : f32) : f32 = return tid_user(x)
""")
    hs = m.helpers
    assert self_contained(hs) == frozenset({"leaf", "mid"})
    assert is_self_contained(hs[1], hs)
    assert not is_self_contained(hs[2], hs) and not is_self_contained(hs[3], hs)
    # naming a variable that is not its own
    x, q = var("x", Scalar.F32), var("q", Scalar.F32)
    free = HelperFunc("free", (x,), Scalar.F32, Return(Binary(BinaryOp.ADD, Ref(x), Ref(q))))
    assert not is_self_contained(free, [])
    # a call of an unknown helper
    unk = HelperFunc("unk", (x,), Scalar.F32, Return(Call("nothere", (Ref(x),), Scalar.F32)))
    assert not is_self_contained(unk, [])


def test_inl10_reasons_are_reported() -> None:
    """INL-10: every call left in place has a rule and a location."""
    src = """
fun impure(x : f32) : f32 = return x
pure fun f(x : f32) : f32 = return x
""" + HEAD + "  if i < n then out[i] <- (a[i] > 0.0f ? f(a[i]) : impure(a[i]))\n"
    _, report = same_result(src)
    assert {r.func for r in report} == {"f", "impure"}
    assert all(r.loc is not None and r.loc.line == 6 for r in report)
    assert all(str(r).startswith("<string>:6:") for r in report)


def test_inl12_opt_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """INL-12: `sarek-py opt FILE -p inline` prints the inlined module; notes on stderr;
    unknown passes are errors (1), a missing -p a usage error (2)."""
    from sarek_py.cli.main import main

    src = """pure fun sq(x : f32) : f32 = return x * x
""" + HEAD + "  if i < n then out[i] <- sq(a[i]) + (i > 2 ? sq(1.0f) : 0.0f)\n"
    f = tmp_path / "k.sk"
    f.write_text(src)
    assert main(["opt", str(f), "-p", "inline", "--notes"]) == 0
    out, err = capsys.readouterr()
    printed = parse_module(out)
    assert calls(printed.kernel("k")) == ["sq"]  # the one in a ?: arm stays (INL-7)
    assert "let sq_res = sq_x * sq_x in" in out
    assert "[INL-7]" in err and "k.sk:4:47:" in err
    again = printed.kernel("k")
    check_kernel(again)
    assert run(again).tobytes() == run(kernel(src)).tobytes()
    assert main(["opt", str(f), "-p", "nope"]) == 1
    assert "unknown pass 'nope'" in capsys.readouterr().err
    assert main(["opt", str(f)]) == 2


def test_inl12_pipeline_registry() -> None:
    """INL-12: passes run in order by name; comma lists split; registering twice fails."""
    from sarek_py.cli.opt import pipeline_names
    from sarek_py.fusion.passes import PASSES, register_pass, run_pipeline

    assert pipeline_names(["inline", "a, b"]) == ["inline", "a", "b"]
    m = parse_module("""pure fun sq(x : f32) : f32 = return x * x
""" + HEAD + "  if i < n then out[i] <- sq(a[i])\n")
    seen: list[str] = []

    @register_pass("test-count-calls", "record the number of calls")
    def _count(mod: Module, notes: list[str]) -> Module:
        seen.append(str(sum(len(calls(k)) for k in mod.kernels)))
        notes.append("counted")
        return mod

    try:
        notes: list[str] = []
        out = run_pipeline(m, ["test-count-calls", "inline", "test-count-calls"], notes)
        assert seen == ["1", "0"] and notes == ["counted", "counted"]
        assert out.helpers == () and calls(out.kernel("k")) == []
        with pytest.raises(ValueError):
            register_pass("test-count-calls")(lambda mod, notes: mod)
    finally:
        del PASSES["test-count-calls"]


def test_inl12_example_helper_sk(capsys: pytest.CaptureFixture[str]) -> None:
    """INL-12: `opt -p inline` on examples/helper.sk: no call left, same bytes."""
    from sarek_py.cli.main import main

    path = Path(__file__).parent.parent / "examples" / "helper.sk"
    assert main(["opt", str(path), "-p", "inline"]) == 0
    out = parse_module(capsys.readouterr().out)
    orig = parse_module(path.read_text())
    for k in orig.kernels:
        ki = out.kernel(k.name)
        check_kernel(ki)
        assert calls(ki) == []
        n = 40
        args = {p.name: (np.linspace(-2, 2, n).astype(np.float32) if p.is_array
                         else (n if p.scalar is Scalar.I32 else 0.75)) for p in k.params}
        args2 = {a: (v.copy() if isinstance(v, np.ndarray) else v) for a, v in args.items()}
        run_kernel(k, args, n, 8)
        run_kernel(ki, args2, n, 8)
        assert all(np.asarray(args[a]).tobytes() == np.asarray(args2[a]).tobytes()
                   for a in args)


def test_inl1_pragma_stays_on_its_loop() -> None:
    """INL-1/INL-2: a call in the bounds of a loop under a pragma is inlined before the
    pragma, which still applies to the loop."""
    src = """
pure fun two(k : i32) : i32 = return k * 2
""" + HEAD + """  if i < n then (
    let mut s = 0.0f in
    pragma "unroll" for j = 0 to two(2) do s := s + a[i] done;
    out[i] <- s
  )
"""
    ki, report = same_result(src)
    assert calls(ki) == [] and report == []
    from sarek_py.ir.nodes import For, Pragma

    pragmas = [x for x in iter_nodes(ki.body) if isinstance(x, Pragma)]
    assert len(pragmas) == 1 and isinstance(pragmas[0].body, For)


def test_inl10_inline_one_call() -> None:
    """INL-1/INL-10: the per-call API inlines exactly the call given, or says why not."""
    from sarek_py.fusion.loops.inline import inline_call

    src = """
pure fun f(x : f32) : f32 = return x + 1.0f
""" + HEAD + "  if i < n then out[i] <- f(a[i]) * (i > 0 ? f(2.0f) : 1.0f) + f(3.0f)\n"
    k = kernel(src)
    st = k.body.body.then  # type: ignore[union-attr]
    first, in_arm, last = [e for e in iter_exprs(st) if isinstance(e, Call)]
    new, why = inline_call(st, first, k.helpers)
    assert why is None
    assert [e.func for e in iter_exprs(new) if isinstance(e, Call)] == ["f", "f"]
    same, why2 = inline_call(st, in_arm, k.helpers)
    assert same is st and why2 is not None and why2.rule == "INL-7"
    new3, why3 = inline_call(st, last, k.helpers)
    assert why3 is None and "f_res" in print_kernel(attrs_evolve_body(k, new3))
    stranger = Call("f", (Const(1.0, Scalar.F32),), Scalar.F32)
    _, why4 = inline_call(st, stranger, k.helpers)
    assert why4 is not None and why4.rule == "INL-1"


def attrs_evolve_body(k: Kernel, then: object) -> Kernel:
    import attrs

    let = k.body
    return attrs.evolve(k, body=attrs.evolve(let, body=attrs.evolve(let.body, then=then)))  # type: ignore[union-attr, arg-type]
