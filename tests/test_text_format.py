"""Tests of the ``.sk`` text form: lexer, parser, printer, errors, S-expressions
(specs/text-format.md; each test names the rule it checks)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from sarek_py.ir.diagnostics import ParseError
from sarek_py.ir.lexer import EOF, FLOAT, FLOAT32, INT, INT64, NAME, f32_from_decimal, tokenize
from sarek_py.ir.nodes import (
    Assign,
    Barrier,
    Binary,
    BinaryOp,
    Call,
    Cast,
    Cond,
    Const,
    Empty,
    For,
    If,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Pragma,
    Read,
    Ref,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Unary,
    UnaryOp,
    While,
    var,
)
from sarek_py.ir.parser import Parser, parse_file, parse_kernel, parse_module
from sarek_py.ir.printer import (
    format_const,
    print_expr,
    print_kernel,
    print_module,
    print_stmt,
)
from sarek_py.ir.sexp import from_sexp, to_sexp
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, array
from sarek_py.ir.visit import canonical_ids

I32, I64, F32, F64, BOOL = Scalar.I32, Scalar.I64, Scalar.F32, Scalar.F64, Scalar.BOOL
BAD = Path(__file__).parent / "bad_inputs"


def body_of(text: str, params: str = "a : f32[], x : i64, n : i32, f : f32, d : f64") -> Stmt:
    """The body of a kernel with the given parameters."""
    return parse_kernel(f"kernel k({params}) =\n{text}\n").body


def expr_of(text: str, params: str = "a : f32[], x : i64, n : i32, f : f32, d : f64",
            elem: str = "f32") -> object:
    """The value stored by ``r[0] <- text`` into an array of ``elem``."""
    body = body_of(f"r[0] <- {text}", f"r : {elem}[], {params}")
    assert isinstance(body, Store)
    return body.value


def same(a: object, b: object) -> bool:
    """Equal up to variable ids (trees from different parses have different ids)."""
    return bool(canonical_ids(a) == canonical_ids(b))


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_module(text, "t.sk")
    return info.value


def roundtrip_text(m_text: str) -> str:
    once = print_module(parse_module(m_text))
    assert print_module(parse_module(once)) == once
    return once


# ------------------------------------------------------------------------------ lexical


def test_txt1_tokens_have_positions_and_longest_match() -> None:
    toks = tokenize("let x<=y\n  a[i] <- b := c")
    kinds = [t.kind for t in toks]
    assert kinds == ["let", NAME, "<=", NAME, NAME, "[", NAME, "]", "<-", NAME, ":=", NAME,
                     EOF]
    assert (toks[2].line, toks[2].col) == (1, 6)
    assert (toks[4].line, toks[4].col) == (2, 3)
    assert (toks[8].line, toks[8].col) == (2, 8)


def test_txt1_tab_counts_one_column() -> None:
    toks = tokenize("\tx")
    assert (toks[0].line, toks[0].col) == (1, 2)


def test_txt1_non_utf8_file_is_a_located_error(tmp_path: Path) -> None:
    p = tmp_path / "bad.sk"
    p.write_bytes(b"kernel k(a : f32[]) =\n  a[0] <- \xc3\x281.0f\n")
    with pytest.raises(ParseError) as info:
        parse_file(p)
    err = info.value
    assert err.loc is not None and (err.loc.line, err.loc.col) == (2, 11)
    assert "invalid UTF-8 byte 0xc3" in str(err)
    assert str(err).startswith(f"{p}:2:11: error:")


def test_txt1_surrogate_escaped_bytes_in_a_str() -> None:
    text = b"kernel k() =\n  ()\xff".decode("utf-8", errors="surrogateescape")
    err = parse_error(text)
    assert err.loc is not None and (err.loc.line, err.loc.col) == (2, 5)
    assert "invalid UTF-8 byte 0xff" in err.message


def test_txt1_unexpected_character() -> None:
    err = parse_error("kernel k() =\n  () $")
    assert err.message == "unexpected character '$'"
    assert err.loc is not None and (err.loc.line, err.loc.col) == (2, 6)


def test_txt2_keywords_and_intrinsics_cannot_be_names() -> None:
    assert "found keyword 'done'" in parse_error("kernel k(done : i32) = ()").message
    assert "thread intrinsic" in parse_error("kernel k(block_dim_x : i32) = ()").message
    assert "math intrinsic" in parse_error("fun sqrt(x : f32) : f32 = return x").message
    # a math name is an ordinary variable name when not called
    k = parse_kernel("kernel k(min : i32, a : i32[]) = a[0] <- min")
    assert k.params[0].name == "min"


def test_txt3_comments_nest_and_line_comments() -> None:
    m = parse_module("(* a (* nested *) comment *)\n// line\nkernel k(a : i32[]) = "
                     "// trailing\n  a[0] <- 1 (* inline *) + 2")
    body = m.kernels[0].body
    assert isinstance(body, Store) and isinstance(body.value, Binary)


def test_txt3_unterminated_comment_located_at_its_start() -> None:
    err = parse_error("kernel k() = ()\n  (* never (* closed *)\n")
    assert err.loc is not None and (err.loc.line, err.loc.col) == (2, 3)
    assert "unterminated comment" in err.message


@pytest.mark.parametrize("text", ["1.", "1e", "1f", "12ab", "1.5x", "3Lx", "1e+"])
def test_txt4_malformed_numbers(text: str) -> None:
    err = parse_error(f"kernel k(a : f64[]) = a[0] <- {text}")
    assert "malformed number" in err.message


def test_txt4_number_forms() -> None:
    toks = tokenize("1 2L 1.5 1e3 2.5e-3 1.5f 1E+2f nan inf nanf inff")
    assert [t.kind for t in toks[:-1]] == [INT, INT64, FLOAT, FLOAT, FLOAT, FLOAT32, FLOAT32,
                                            FLOAT, FLOAT, FLOAT32, FLOAT32]
    assert toks[3].value == 1000.0 and toks[4].value == 0.0025 and toks[6].value == 100.0
    assert math.isnan(float(toks[7].value)) and toks[8].value == math.inf  # type: ignore


def test_txt4_f32_literals_round_once_exactly() -> None:
    # just above the midpoint between 1 and the next float32: through float64 it would
    # become the midpoint and round to even (1.0); rounded once it goes up
    text = "1.0000000596046447753906251"
    above = float(np.nextafter(np.float32(1), np.float32(2)))
    assert float(np.float32(float(text))) == 1.0
    assert f32_from_decimal(text) == above
    c = expr_of(text + "f")
    assert c == Const(above, F32)
    # the largest finite float32 and the overflow limit
    assert f32_from_decimal("3.4028235e38") == float(np.finfo(np.float32).max)
    assert "overflows f32" in parse_error("kernel k(a : f32[]) = a[0] <- 3.5e38f").message
    assert "overflows f64" in parse_error("kernel k(a : f64[]) = a[0] <- 1e309").message


def test_txt5_strings_and_escapes() -> None:
    s = body_of('pragma "un\\"roll" "a\\\\b\\n\\x41\\t" ()')
    assert s == Pragma(('un"roll', "a\\b\nA\t"), Empty())
    assert "unknown escape" in parse_error('kernel k() = pragma "\\q" ()').message
    err = parse_error('kernel k() = pragma "abc\n ()')
    assert err.message == "unterminated string literal"


# -------------------------------------------------------------------------------- syntax


def test_txt6_types() -> None:
    k = parse_kernel("kernel k(a : f32[], b : f64[,], c : i32[1:], d : bool[0:4, 2:], "
                     "e : shared f32[16], f : i64, g : i32[3, 5]) = ()")
    ts = [p.type for p in k.params]
    assert ts[0] == array(F32, 1)
    assert ts[1] == array(F64, 2)
    assert ts[2] == ArrayType(I32, MemSpace.GLOBAL, (1,), (None,))
    assert ts[3] == ArrayType(BOOL, MemSpace.GLOBAL, (0, 2), (4, None))
    assert ts[4] == ArrayType(F32, MemSpace.SHARED, (0,), (16,))
    assert ts[5] == I64
    assert ts[6] == ArrayType(I32, MemSpace.GLOBAL, (0, 0), (3, 5))
    k2 = parse_kernel("kernel k(a : f32[-2:4]) = ()")
    assert k2.params[0].type == ArrayType(F32, MemSpace.GLOBAL, (-2,), (4,))
    assert "cannot be negative" in parse_error("kernel k(a : f32[-3]) = ()").message
    assert "only arrays have a space" in parse_error("kernel k(a : shared f32) = ()").message


def test_txt7_let_body_extends_right() -> None:
    s = body_of("let mut y = 1 in y := 2; let z : i64 = 3 in a[0] <- f")
    assert isinstance(s, Let) and s.var.mutable and s.var.type == I32
    assert isinstance(s.body, Seq) and len(s.body.stmts) == 2
    inner = s.body.stmts[1]
    assert isinstance(inner, Let) and inner.var.type == I64 and inner.value == Const(3, I64)
    assert not inner.var.mutable
    # in parentheses the body stops at ')'
    s2 = body_of("(let y = 1 in a[0] <- f); a[1] <- f")
    assert isinstance(s2, Seq) and isinstance(s2.stmts[0], Let)


def test_txt7_let_type_is_the_value_type() -> None:
    s = body_of("let y = f * 2.0f in let z = x in let w = n < 3 in ()")
    assert isinstance(s, Let) and s.var.type == F32
    assert isinstance(s.body, Let) and s.body.var.type == I64
    assert isinstance(s.body.body, Let) and s.body.body.var.type == BOOL


def test_txt8_statement_forms() -> None:
    k = parse_kernel("""kernel k(a : f32[], n : i32)
  var c : i32 =
  for i = 0 to n - 1 do a[i] <- 0.0f done;
  for j = n downto 1 do () done;
  while c < n do c := c + 1 done;
  if c > 0 then barrier else stop 3;
  pragma "unroll" "4" for i = 0 to 3 do () done;
  return
""")
    s = k.body
    assert isinstance(s, Seq)
    f0, f1, w, i, p, r = s.stmts
    assert isinstance(f0, For) and not f0.down and f0.var.type == I32
    assert isinstance(f0.body, Store) and f0.body.index == (Ref(f0.var),)
    assert isinstance(f1, For) and f1.down and f1.body == Empty()
    assert isinstance(w, While) and isinstance(w.body, Assign) and w.body.var == k.locals[0]
    assert i == If(Binary(BinaryOp.GT, Ref(k.locals[0]), Const(0, I32)), Barrier(), Stop(3))
    assert isinstance(p, Pragma) and p.options == ("unroll", "4") and isinstance(p.body, For)
    assert r == Return()


def test_txt8_dangling_else_binds_to_nearest_if() -> None:
    s = body_of("if n > 0 then if n > 1 then a[0] <- f else a[1] <- f")
    assert isinstance(s, If) and s.else_ is None
    assert isinstance(s.then, If) and s.then.else_ is not None
    s2 = body_of("if n > 0 then (if n > 1 then a[0] <- f) else a[1] <- f")
    assert isinstance(s2, If) and s2.else_ is not None
    assert isinstance(s2.then, If) and s2.then.else_ is None


def test_txt8_if_branch_is_one_statement() -> None:
    s = body_of("if n > 0 then a[0] <- f; a[1] <- f")
    assert isinstance(s, Seq) and isinstance(s.stmts[0], If)


def test_txt8_return_value_in_helper() -> None:
    m = parse_module("fun g(x : f64) : f64 = if x > 0.0 then return x else return -x")
    h = m.helpers[0]
    assert isinstance(h.body, If)
    assert h.body.then == Return(Ref(h.params[0]))
    assert h.body.else_ == Return(Unary(UnaryOp.NEG, Ref(h.params[0])))


def test_txt9_literal_types() -> None:
    assert expr_of("3", elem="i32") == Const(3, I32)
    assert expr_of("3L", elem="i64") == Const(3, I64)
    assert expr_of("1.5", elem="f64") == Const(1.5, F64)
    assert expr_of("1.5f") == Const(1.5, F32)
    assert expr_of("true", elem="bool") == Const(True, BOOL)
    s = body_of("let u = () in ()")
    assert isinstance(s, Let) and s.value == Const(None, Scalar.UNIT)
    assert "does not fit in i32" in parse_error("kernel k(a : i32[]) = a[0] <- 2147483648").message
    assert expr_of("2147483648L", elem="i64") == Const(2**31, I64)
    assert "does not fit in i64" in parse_error(
        "kernel k(a : i64[]) = a[0] <- 9223372036854775808L").message


def test_txt10_negative_literals() -> None:
    assert expr_of("-1", elem="i32") == Const(-1, I32)
    assert expr_of("-(1)", elem="i32") == Unary(UnaryOp.NEG, Const(1, I32))
    assert expr_of("-2147483648", elem="i32") == Const(-(2**31), I32)
    assert expr_of("-9223372036854775808L", elem="i64") == Const(-(2**63), I64)
    z = expr_of("-0.0", elem="f64")
    assert isinstance(z, Const) and math.copysign(1.0, float(z.value)) == -1.0  # type: ignore
    assert same(expr_of("n - -1", elem="i32"),
                Binary(BinaryOp.SUB, Ref(var("n", I32)), Const(-1, I32)))
    assert expr_of("-inf", elem="f64") == Const(-math.inf, F64)


def test_txt11_sequences_keep_their_shape() -> None:
    s = body_of("a[0] <- f; (a[1] <- f; a[2] <- f); (); a[3] <- f;")
    assert isinstance(s, Seq) and len(s.stmts) == 4
    assert isinstance(s.stmts[1], Seq) and len(s.stmts[1].stmts) == 2
    assert s.stmts[2] == Empty()
    assert same(body_of("(a[0] <- f)"), body_of("a[0] <- f"))
    assert body_of("()") == Empty()


PRECEDENCE_CASES = [
    ("n + n * n", "(n + (n * n))"),
    ("n * n + n", "((n * n) + n)"),
    ("n - n - n", "((n - n) - n)"),
    ("n << n + n", "(n << (n + n))"),
    ("n < n << n", "(n < (n << n))"),
    ("n == n < n", "(n == (n < n))"),
    ("n & n == n", "(n & (n == n))"),
    ("n ^ n & n", "(n ^ (n & n))"),
    ("n | n ^ n", "(n | (n ^ n))"),
    ("n && n | n", "(n && (n | n))"),
    ("n || n && n", "(n || (n && n))"),
    ("n || n ? n : n", "((n || n) ? n : n)"),
    ("n ? n : n ? n : n", "(n ? n : (n ? n : n))"),
    ("-n * n", "((-n) * n)"),
    ("!n && n", "((!n) && n)"),
    ("~n + n", "((~n) + n)"),
    ("n / n % n", "((n / n) % n)"),
]


def _fully_parenthesized(e: object) -> str:
    match e:
        case Binary(op=op, lhs=lhs, rhs=rhs):
            return f"({_fully_parenthesized(lhs)} {op.value} {_fully_parenthesized(rhs)})"
        case Unary(op=op, arg=a):
            return f"({op.value}{_fully_parenthesized(a)})"
        case Cond(cond=c, if_true=t, if_false=f):
            return (f"({_fully_parenthesized(c)} ? {_fully_parenthesized(t)} : "
                    f"{_fully_parenthesized(f)})")
        case Ref(var=v):
            return v.name
    raise AssertionError(e)


@pytest.mark.parametrize(("text", "tree"), PRECEDENCE_CASES)
def test_txt12_precedence_and_associativity(text: str, tree: str) -> None:
    assert _fully_parenthesized(expr_of(text, elem="i32")) == tree


def test_txt13_literals_typed_by_context() -> None:
    x, n, f, d = Ref(var("x", I64)), Ref(var("n", I32)), Ref(var("f", F32)), Ref(var("d", F64))
    assert same(expr_of("x + 1", elem="i64"), Binary(BinaryOp.ADD, x, Const(1, I64)))
    assert same(expr_of("1 + x", elem="i64"), Binary(BinaryOp.ADD, Const(1, I64), x))
    assert expr_of("1 + 2", elem="i64") == Binary(BinaryOp.ADD, Const(1, I64), Const(2, I64))
    assert same(expr_of("2.5 * f"), Binary(BinaryOp.MUL, Const(2.5, F32), f))
    assert same(expr_of("x < 1 ? 1.5 : 2.5"), Cond(
        Binary(BinaryOp.LT, x, Const(1, I64)), Const(1.5, F32), Const(2.5, F32)))
    assert same(expr_of("min(d, 1.5)", elem="f64"), Intrinsic("min", (d, Const(1.5, F64))))
    assert same(expr_of("x << 1", elem="i64"), Binary(BinaryOp.SHL, x, Const(1, I64)))
    assert same(expr_of("n == 1 && 1 < 2"), Binary(
        BinaryOp.AND, Binary(BinaryOp.EQ, n, Const(1, I32)),
        Binary(BinaryOp.LT, Const(1, I32), Const(2, I32))))
    # no context: indices and cast operands take the defaults
    assert expr_of("f32(1)") == Cast(F32, Const(1, I32))
    e = expr_of("a[1]")
    assert isinstance(e, Read) and e.index == (Const(1, I32),)
    # an integer literal never becomes a float
    s = body_of("let z : f32 = 1 in ()")
    assert isinstance(s, Let) and s.var.type == F32 and s.value == Const(1, I32)
    # for bounds, calls, returns, assignments
    m = parse_module("""fun g(p : i64, q : f32) : f64 = return 1.5
kernel k(a : f64[])
  var v : i64 =
  for i = 0 to 10L do a[i] <- g(1, 2.0) done;
  v := 7""")
    h, k = m.helpers[0], m.kernels[0]
    assert h.body == Return(Const(1.5, F64))
    assert isinstance(k.body, Seq)
    loop, assign = k.body.stmts
    assert isinstance(loop, For) and loop.var.type == I64 and loop.start == Const(0, I64)
    assert isinstance(loop.body, Store)
    assert loop.body.value == Call("g", (Const(1, I64), Const(2.0, F32)), F64)
    assert assign == Assign(k.locals[0], Const(7, I64))


def test_txt13_unsuffixed_float_next_to_f32_is_rounded_exactly() -> None:
    text = "1.0000000596046447753906251"
    above = float(np.nextafter(np.float32(1), np.float32(2)))
    f = Ref(var("f", F32))
    assert same(expr_of(f"f + {text}"), Binary(BinaryOp.ADD, f, Const(above, F32)))
    assert same(expr_of("f + -inf"), Binary(BinaryOp.ADD, f, Const(-math.inf, F32)))


def test_txt14_scopes_and_shadowing() -> None:
    s = body_of("let y = 1 in let y = y + 1 in a[y] <- f")
    assert isinstance(s, Let) and isinstance(s.body, Let)
    outer, inner = s.var, s.body.var
    assert outer.name == inner.name and outer != inner
    assert s.body.value == Binary(BinaryOp.ADD, Ref(outer), Const(1, I32))
    assert isinstance(s.body.body, Store) and s.body.body.index == (Ref(inner),)
    # a let may hide a parameter
    s2 = body_of("let n = 2.0f in a[0] <- n")
    assert isinstance(s2, Let) and isinstance(s2.body, Store)
    assert s2.body.value == Ref(s2.var)


def test_txt14_unknown_names_and_duplicates() -> None:
    err = parse_error("kernel k(a : f32[]) =\n  for i = 0 to 3 do () done;\n  a[i] <- 1.0f")
    assert err.message == "unknown name 'i'"
    assert err.loc is not None and (err.loc.line, err.loc.col) == (3, 5)
    err2 = parse_error("kernel k(a : f32[])\n  var a : i32 = ()")
    assert err2.message == "'a' is declared twice"
    assert err2.loc is not None and (err2.loc.line, err2.loc.col) == (2, 7)


def test_txt15_calls_intrinsics_casts_length() -> None:
    m = parse_module("""pure fun sq(x : f32) : f32 = return x * x
kernel k(a : f32[,], n : i32) =
  a[0, 0] <- sq(f32(length(a, 1)) + sqrt(a[0, 1])) + f32(global_thread_id + block_dim_x)""")
    k = m.kernels[0]
    assert k.helpers == m.helpers
    assert isinstance(k.body, Store) and isinstance(k.body.value, Binary)
    call, cast = k.body.value.lhs, k.body.value.rhs
    assert isinstance(call, Call) and call.func == "sq" and call.result == F32
    arg = call.args[0]
    assert isinstance(arg, Binary)
    assert arg.lhs == Cast(F32, Length(k.params[0], 1))
    assert isinstance(arg.rhs, Intrinsic) and arg.rhs.name == "sqrt"
    assert cast == Cast(F32, Binary(BinaryOp.ADD, Intrinsic("global_thread_id"),
                                    Intrinsic("block_dim_x")))
    assert "'min' takes 2 arguments, given 1" in parse_error(
        "kernel k(a : f32[]) = a[0] <- min(1.0f)").message
    assert "unknown function 'later'" in parse_error(
        "kernel k(a : f32[]) = a[0] <- later(1.0f)\nfun later(x : f32) : f32 = return x"
    ).message
    assert "takes no arguments" in parse_error(
        "kernel k(a : i32[]) = a[0] <- global_thread_id()").message
    assert "takes 1 argument, given 2" in parse_error(
        "fun g(x : f32) : f32 = return x\nkernel k(a : f32[]) = a[0] <- g(1.0f, 2.0f)").message
    assert "cast to f32 takes 1 argument" in parse_error(
        "kernel k(a : f32[]) = a[0] <- f32(1, 2)").message


def test_txt16_items_and_transitive_helpers() -> None:
    m = parse_module("""fun a1(x : i32) : i32 = return x
fun b2(x : i32) : i32 = return a1(x) + 1
fun c3(x : i32) : i32 = return x * 2
kernel k(r : i32[])
  shared t : f32[4, 8]
  local l : i64[3]
  var v : bool =
  r[0] <- b2(1)
kernel k2(r : i32[]) = r[0] <- c3(1) + a1(2)
""")
    assert [h.name for h in m.helpers] == ["a1", "b2", "c3"]
    k, k2 = m.kernels
    assert [h.name for h in k.helpers] == ["a1", "b2"]
    assert [h.name for h in k2.helpers] == ["a1", "c3"]
    t, l_, v = k.locals
    assert t.type == ArrayType(F32, MemSpace.SHARED, (0, 0), (4, 8)) and t.mutable
    assert l_.type == ArrayType(I64, MemSpace.LOCAL, (0,), (3,))
    assert v.type == BOOL and v.mutable
    assert "already defined at line 1" in parse_error(
        "kernel k() = ()\nkernel k() = ()").message
    assert "a shared declaration is an array" in parse_error(
        "kernel k()\n  shared t : f32 = ()").message


def test_txt17_locations() -> None:
    k = parse_kernel("kernel k(a : f32[], n : i32) =\n  let i = n in\n  a[i] <- 1.0f + -2.0f",
                     "f.sk")
    assert k.loc is not None and (k.loc.file, k.loc.line, k.loc.col) == ("f.sk", 1, 1)
    s = k.body
    assert isinstance(s, Let) and s.loc is not None and (s.loc.line, s.loc.col) == (2, 3)
    assert s.value.loc is not None and (s.value.loc.line, s.value.loc.col) == (2, 11)
    st = s.body
    assert isinstance(st, Store) and st.loc is not None and (st.loc.line, st.loc.col) == (3, 3)
    v = st.value
    assert isinstance(v, Binary) and v.loc is not None and v.loc.col == 16
    assert v.rhs.loc is not None and v.rhs.loc.col == 18  # the '-' of '-2.0f'


# ------------------------------------------------------------------------------ printing

SAXPY = """\
kernel saxpy(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then
    y[i] <- a * x[i] + y[i]
"""


def test_txt18_layout() -> None:
    assert print_module(parse_module(SAXPY)) == SAXPY
    text = """\
pure fun sign(x : f64) : i32 =
  if x > 0.0 then
    return 1
  else if x < 0.0 then
    return -1
  else
    return 0

kernel k(a : i32[, ], d : f64[], n : i32)
  shared t : f32[2:8]
  var c : i64 =
  for i = 0 to n do
    a[i, 0] <- sign(d[i])
  done;
  while c < 3L do
    c := c + 1L
  done
"""
    out = print_module(parse_module(text))
    assert out == text.replace("i32[, ]", "i32[,]")
    k = parse_module(text).kernels[0]
    assert print_kernel(k) == out


def _reparses(s: Stmt) -> str:
    k = Kernel("k", (), (), s)
    text = print_kernel(k)
    back = parse_kernel(text)
    assert canonical_ids(back.body) == canonical_ids(s), text
    return text


def test_txt19_statement_parentheses() -> None:
    v = var("v", I32)
    arr = var("a", array(I32))
    k = Kernel("k", (arr,), (), Empty())
    st = [Store(arr, (Const(i, I32),), Const(i, I32)) for i in range(4)]
    c = Binary(BinaryOp.LT, Const(1, I32), Const(2, I32))
    cases = [
        If(c, Seq((st[0], st[1])), st[2]),                  # sequence in a branch
        If(c, Let(v, Const(1, I32), st[0]), st[1]),         # let in a branch
        If(c, st[0], Let(v, Const(1, I32), st[1])),         # let in the else branch
        Seq((If(c, st[0], Let(v, Const(1, I32), st[1])), st[2])),
        If(c, If(c, st[0]), st[1]),                         # dangling else
        If(c, Pragma(("unroll",), If(c, st[0])), st[1]),    # dangling else via pragma
        Seq((Let(v, Const(1, I32), st[0]), st[1])),         # let not last in a sequence
        Seq((Seq((st[0], st[1])), st[2])),                  # nested sequence
        Pragma(("a",), Seq((st[0], st[1]))),
        Pragma(("a",), Let(v, Const(1, I32), st[0])),
    ]
    for s in cases:
        text = print_kernel(Kernel("k", k.params, (), s))
        assert "(" in text.split("=", 1)[1].replace("a[", "")
        back = parse_kernel(text)
        assert canonical_ids(back.body) == canonical_ids(s), text
    # no parentheses where none are needed
    plain = print_stmt(Seq((If(c, st[0], st[1]), st[2])))
    assert "(" not in plain.replace("a[", "")
    # annotation only where the value's type differs
    w = var("w", I64)
    assert print_stmt(Let(w, Const(1, I64), Empty())) == "let w = 1L in\n()"
    assert print_stmt(Let(w, Const(1, I32), Empty())) == "let w : i64 = 1 in\n()"


EXPR_PRINT_CASES = [
    (Binary(BinaryOp.MUL, Var_n := Ref(var("n", I32)),
            Binary(BinaryOp.ADD, Var_n, Var_n)), "n * (n + n)"),
    (Binary(BinaryOp.SUB, Binary(BinaryOp.SUB, Var_n, Var_n), Var_n), "n - n - n"),
    (Binary(BinaryOp.SUB, Var_n, Binary(BinaryOp.SUB, Var_n, Var_n)), "n - (n - n)"),
    (Unary(UnaryOp.NEG, Const(1, I32)), "-(1)"),
    (Unary(UnaryOp.NEG, Const(-1, I32)), "-(-1)"),
    (Unary(UnaryOp.NEG, Unary(UnaryOp.NEG, Var_n)), "-(-n)"),
    (Binary(BinaryOp.SUB, Var_n, Const(-1, I32)), "n - -1"),
    (Unary(UnaryOp.BNOT, Binary(BinaryOp.ADD, Var_n, Var_n)), "~(n + n)"),
    (Cond(Cond(Const(True, BOOL), Const(True, BOOL), Const(False, BOOL)), Var_n, Var_n),
     "(true ? true : false) ? n : n"),
    (Cond(Const(True, BOOL), Var_n, Cond(Const(False, BOOL), Var_n, Var_n)),
     "true ? n : false ? n : n"),
    (Binary(BinaryOp.ADD, Cond(Const(True, BOOL), Var_n, Var_n), Var_n),
     "(true ? n : n) + n"),
    (Binary(BinaryOp.SHL, Binary(BinaryOp.ADD, Var_n, Var_n), Var_n), "n + n << n"),
    (Binary(BinaryOp.EQ, Binary(BinaryOp.LT, Var_n, Var_n), Const(True, BOOL)),
     "n < n == true"),
    (Cast(F32, Binary(BinaryOp.ADD, Var_n, Var_n)), "f32(n + n)"),
]


@pytest.mark.parametrize(("e", "text"), EXPR_PRINT_CASES)
def test_txt20_expression_parentheses(e: object, text: str) -> None:
    assert print_expr(e) == text  # type: ignore[arg-type]
    p = Parser(text)
    p.add_var(Var_n.var)
    assert p.parse_expr() == e and p.at_end()


@pytest.mark.parametrize(("c", "text"), [
    (Const(3, I32), "3"), (Const(-3, I64), "-3L"), (Const(True, BOOL), "true"),
    (Const(None, Scalar.UNIT), "()"),
    (Const(0.1, F64), "0.1"), (Const(1e300, F64), "1e+300"), (Const(2.0, F64), "2.0"),
    (Const(float(np.float32(0.1)), F32), "0.1f"), (Const(16777216.0, F32), "1.6777216e+07f"),
    (Const(float(np.finfo(np.float32).max), F32), "3.4028235e+38f"),
    (Const(math.inf, F64), "inf"), (Const(-math.inf, F32), "-inff"),
    (Const(math.nan, F32), "nanf"), (Const(-0.0, F64), "-0.0"), (Const(5e-324, F64), "5e-324"),
    (Const(float(np.float32(1e-45)), F32), "1e-45f"),
])
def test_txt21_literal_printing(c: Const, text: str) -> None:
    assert format_const(c) == text
    p = Parser(text)
    back = p.parse_expr(c.type)
    assert isinstance(back, Const) and back.type == c.type
    if isinstance(c.value, float) and math.isnan(c.value):
        assert isinstance(back.value, float) and math.isnan(back.value)
    else:
        assert back.value == c.value
        if isinstance(c.value, float):
            assert math.copysign(1.0, float(back.value)) == math.copysign(1.0, c.value)  # type: ignore[arg-type]


def test_txt21_pragma_strings_are_escaped() -> None:
    s = Pragma(('a"b\\c\nd\x01é',), Barrier())
    text = print_stmt(s)
    assert text.splitlines()[0] == 'pragma "a\\"b\\\\c\\nd\\x01é"'
    assert _reparses(s)


# ------------------------------------------------------------------------------- errors


def test_txt23_error_format_with_caret() -> None:
    text = "kernel k(x : f32[]) =\n  let i = global_thread_id x\n  x[i] <- 0.0f\n"
    err = parse_error(text)
    lines = str(err).splitlines()
    assert lines[0] == "t.sk:2:28: error: expected 'in' after let binding, found 'x'"
    assert lines[1] == "  let i = global_thread_id x"
    assert lines[2] == " " * 27 + "^"


def test_txt23_end_of_file_is_located_after_the_last_token() -> None:
    err = parse_error("kernel k(x : f32[]) =\n  for i = 0 to 3 do\n    x[i] <- 0.0f\n\n\n")
    assert err.message.startswith("unexpected end of file: expected 'done'")
    assert err.loc is not None and (err.loc.line, err.loc.col) == (3, 17)
    assert str(err).splitlines()[-1] == " " * 16 + "^"


def test_txt23_deep_nesting_is_an_error_not_a_crash() -> None:
    """Past the nesting bound of TXT-32 (5000 brackets), a located error."""
    err = parse_error("kernel k(a : i32[]) = a[0] <- " + "(" * 6000 + "1" + ")" * 6000)
    assert "nested more than" in err.message and err.loc is not None


BAD_FILES = sorted(BAD.glob("*.sk"))


@pytest.mark.parametrize("path", BAD_FILES, ids=[p.name for p in BAD_FILES])
def test_txt23_bad_input_corpus(path: Path) -> None:
    """Each file of tests/bad_inputs says on its first line where its error is and what
    the message contains; the error is located there and shown with a caret (TXT-23)."""
    header = path.read_bytes().split(b"\n", 1)[0].decode()
    m = re.fullmatch(r"// error: (\d+):(\d+): (.*)", header)
    assert m is not None, header
    line, col, fragment = int(m.group(1)), int(m.group(2)), m.group(3)
    with pytest.raises(ParseError) as info:
        parse_file(path)
    err = info.value
    text = str(err)
    assert text.startswith(f"{path}:{line}:{col}: error: "), text
    assert fragment in err.message
    shown = text.splitlines()
    assert len(shown) == 3 and shown[2] == " " * (col - 1) + "^", text


def test_txt23_corpus_covers_the_listed_kinds() -> None:
    names = {p.stem for p in BAD_FILES}
    for kind in ("truncated_for", "truncated_let", "unknown_name", "wrong_token",
                 "unterminated_comment", "non_utf8", "bad_literal", "missing_done"):
        assert kind in names


# ---------------------------------------------------------------------- S-expressions


def test_txt24_sexp_format() -> None:
    assert to_sexp(Const(1, I32)) == "(Const :value 1 :type :i32)"
    assert to_sexp(Const(1.0, F32)) == "(Const :value 1.0 :type :f32)"
    assert to_sexp(Const(-math.inf, F64)) == "(Const :value -inf :type :f64)"
    v = var("x", I32, True)
    assert to_sexp(v) == f'(Var :name "x" :id {v.id} :type :i32 :mutable true)'
    t = ArrayType(F32, MemSpace.SHARED, (1,), (None,))
    assert to_sexp(t) == "(ArrayType :elem :f32 :space :shared :lower [1] :shape [nil])"
    a = var("a_long_array_name", array(F32, 2))
    assert to_sexp(a) == (f'(Var\n  :name "a_long_array_name"\n  :id {a.id}\n'
                          "  :type (ArrayType :elem :f32 :space :global :lower [0 0] "
                          ":shape [nil nil])\n  :mutable false\n)")
    assert to_sexp(Return()) == "(Return :value nil)"
    assert to_sexp(Binary(BinaryOp.ADD, Const(1, I32), Const(2, I32))) == (
        "(Binary :op :ADD :lhs (Const :value 1 :type :i32) :rhs (Const :value 2 :type :i32))")
    k = parse_kernel(SAXPY)
    text = to_sexp(k)
    assert text.startswith('(Kernel\n  :name "saxpy"\n  :params [\n    (Var\n')
    assert text.endswith("\n  :helpers []\n)")
    assert all(len(line) <= 100 for line in text.splitlines())


def test_txt25_sexp_reads_back_with_ids() -> None:
    m = parse_module(print_module(parse_module(SAXPY)))
    k = m.kernels[0]
    back = from_sexp(to_sexp(k))
    assert back == k
    assert [p.id for p in back.params] == [p.id for p in k.params]
    assert to_sexp(back) == to_sexp(k)
    assert from_sexp(to_sexp(m)) == m
    # ids read are reserved: a fresh variable does not collide with them
    dump = to_sexp(Ref(var("big", I32))).replace(":id ", ":id 9", 1)
    ref = from_sexp(dump)
    assert isinstance(ref, Ref) and var("fresh", I32).id > ref.var.id


@pytest.mark.parametrize("text", ["(Const :value 1", "(Nope :x 1)", "(Const :value 1 :tpe :i32)",
                                  "(Const :value 1 :type :q32)", "(Const value)",
                                  "(Const :value 1 :type :i32) x"])
def test_txt25_malformed_sexp_is_a_located_error(text: str) -> None:
    with pytest.raises(ParseError) as info:
        from_sexp(text)
    assert info.value.loc is not None
    assert str(info.value).startswith("<sexp>:1:")


# ---------------------------------------------------------------------- parser reuse


def test_txt14_parser_is_reusable_for_other_syntax() -> None:
    """A subclass can parse its own statement form with the shared helpers (TXT-14
    scopes, TXT-13 literal typing)."""

    class LaunchParser(Parser):
        def parse_launch(self) -> tuple[str, object]:
            self.expect("kernel", "at the start of a launch")
            name = self.expect_name("(the kernel)").text
            self.expect("(")
            count = self.parse_expr(I64)
            self.expect(")")
            return name, count

    x = var("x", I64)
    p = LaunchParser("kernel saxpy(x * 2 + 1)")
    p.push_scope()
    p.add_var(x)
    name, count = p.parse_launch()
    assert name == "saxpy" and p.at_end()
    assert count == Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, Ref(x), Const(2, I64)),
                           Const(1, I64))
    p.pop_scope()
    q = Parser("y + 1")
    q.push_scope()
    with pytest.raises(ParseError, match="unknown name 'y'"):
        q.parse_expr()
    r = Parser("f32[,] i64")
    assert r.parse_type() == array(F32, 2) and r.parse_type() == I64
