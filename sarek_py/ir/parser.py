"""Recursive-descent parser of the ``.sk`` text form (specs/text-format.md, TXT-5..TXT-17).

The parser builds the IR and resolves what the tree itself needs: names (to the
:class:`Var` in scope), the type of unsuffixed literals (from their context), the result
type of helper calls, casts, and the helpers each kernel calls. Everything else (types of
operators, mutability, ranks…) is the checker's job (:mod:`sarek_py.ir.typecheck`).

:class:`Parser` is meant to be reused: its token helpers (:meth:`Parser.peek`,
:meth:`Parser.accept`, :meth:`Parser.expect`), scopes (:meth:`Parser.push_scope`,
:meth:`Parser.pop_scope`, :meth:`Parser.bind`, :meth:`Parser.lookup`) and the
:meth:`Parser.parse_type`, :meth:`Parser.parse_expr`, :meth:`Parser.parse_stmt`,
:meth:`Parser.parse_seq` methods let a subclass parse more syntax (host programs,
launches) on top of the kernel language.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import attrs

from sarek_py.ir.atomics import ATOMIC_WORDS, arity
from sarek_py.ir.deep import MAX_DEPTH, MAX_NESTING, call_deep, depth_message, too_deep
from sarek_py.ir.diagnostics import ParseError
from sarek_py.ir.dynamic_shared import is_dynamic_shared, local_extent_problem
from sarek_py.ir.intrinsics import MATH, THREAD_INTRINSICS
from sarek_py.ir.lexer import (
    EOF,
    FLOAT,
    FLOAT32,
    INT,
    INT64,
    NAME,
    STRING,
    Token,
    decode_source,
    f32_from_decimal,
    short,
    tokenize,
)
from sarek_py.ir.nodes import (
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    Binary,
    BinaryOp,
    Break,
    Call,
    Cast,
    Cond,
    Const,
    Continue,
    Empty,
    Expr,
    For,
    HelperFunc,
    If,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Loc,
    Module,
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
    Var,
    While,
    var,
)
from sarek_py.ir.requires import FusionRequires
from sarek_py.ir.requires_check import range_problem
from sarek_py.ir.requires_text import parse_requires
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, Type

E = TypeVar("E", bound="Expr")

#: binary operators by precedence level, lowest first (TXT-12); all left-associative
BINARY_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="),
    ("<<", ">>"), ("+", "-"), ("*", "/", "%"),
)
_BINOPS = {op.value: op for op in BinaryOp}
_UNOPS = {op.value: op for op in UnaryOp}
_SCALARS = {s.value: s for s in Scalar}
_LITERALS = (INT, INT64, FLOAT, FLOAT32)

#: tokens that can start a statement / an expression
STMT_START = frozenset({"let", "if", "for", "while", "return", "barrier", "stop", "pragma",
                        "break", "continue",
                        NAME, "("})
EXPR_START = frozenset({INT, INT64, FLOAT, FLOAT32, NAME, "true", "false", "(", "-", "!",
                        "~", "length", *_SCALARS})
ITEM_START = frozenset({"kernel", "fun", "pure", EOF})

_RANGE = {Scalar.I32: (-(2**31), 2**31 - 1), Scalar.I64: (-(2**63), 2**63 - 1)}


@attrs.frozen
class _Lit(Const):
    """An unsuffixed literal whose type is not settled yet (TXT-13); ``text`` is its
    spelling (with a leading ``-`` when negated), so an ``f32`` can be rounded exactly."""

    text: str = attrs.field(default="", kw_only=True)


# ------------------------------------------------------------------------ literal typing


def natural_type(e: Expr) -> Type | None:
    """The type ``e`` has whatever its context, or None when an unsuffixed literal
    decides it (``1 + 2`` has none; ``x + 1`` has the type of ``x``)."""
    match e:
        case _Lit():
            return None
        case Const(type=t):
            return t
        case Ref(var=v):
            return v.type
        case Unary(op=UnaryOp.NOT):
            return Scalar.BOOL
        case Unary(arg=a):
            return natural_type(a)
        case Binary(op=op, lhs=lhs, rhs=rhs):
            if op.is_compare or op.is_logical:
                return Scalar.BOOL
            return natural_type(lhs) or natural_type(rhs)
        case Read(array=a):
            return a.scalar
        case Cast(to=t):
            return t
        case Cond(if_true=yes, if_false=no):
            return natural_type(yes) or natural_type(no)
        case Intrinsic(name=n, args=args):
            if n in THREAD_INTRINSICS:
                return Scalar.I32
            for a in args:
                at = natural_type(a)
                if at is not None:
                    return at
            return None
        case Call(result=r):
            return r
        case Length():
            return Scalar.I32
        case Atomic(array=a):
            return a.scalar
    raise TypeError(f"not an expression: {e!r}")


def _scalar_or_none(t: Type | None) -> Scalar | None:
    return t if isinstance(t, Scalar) else None


# ----------------------------------------------------------------------------- the parser


class Parser:
    """A recursive-descent parser over the tokens of one text.

    ``functions`` holds the helpers declared so far (calls resolve against it);
    ``scopes`` the variables in scope, innermost last.
    """

    def __init__(self, text: str, filename: str = "<string>"):
        self.text = text
        self.filename = filename
        self.tokens: list[Token] = tokenize(text, filename)
        self.pos = 0
        self.scopes: list[dict[str, Var]] = []
        self.functions: dict[str, HelperFunc] = {}
        #: helpers called directly by each helper (for kernels' transitive helper lists)
        self.callees: dict[str, set[str]] = {}
        #: helpers called by the item being parsed
        self.calls: set[str] = set()
        #: the result type ``return`` values take (None in a kernel)
        self.result_type: Scalar | None = None
        self._items: dict[str, Token] = {}
        #: levels of brackets, prefix operators and statements being parsed (TXT-32)
        self.nesting = 0
        #: statements being parsed, and the depth of each expression built (TXT-32)
        self.stmt_depth = 0
        self._depths: dict[int, int] = {}
        self._keep: list[Expr] = []  # keeps the ids of ``_depths`` alive

    # ------------------------------------------------------------------ token helpers
    def peek(self, k: int = 0) -> Token:
        """The token ``k`` places ahead (EOF past the end)."""
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def at(self, *kinds: str) -> bool:
        """Whether the next token is of one of ``kinds``."""
        return self.peek().kind in kinds

    def advance(self) -> Token:
        """Consume and return the next token."""
        tok = self.peek()
        if tok.kind != EOF:
            self.pos += 1
        return tok

    def accept(self, kind: str) -> Token | None:
        """Consume the next token if it is of ``kind``."""
        if self.peek().kind == kind:
            return self.advance()
        return None

    def expect(self, kind: str, context: str = "") -> Token:
        """Consume a token of ``kind`` or fail with ``expected 'kind' context, found …``."""
        tok = self.peek()
        if tok.kind == kind:
            return self.advance()
        what = {NAME: "a name", INT: "an integer", STRING: "a string"}.get(kind, f"'{kind}'")
        raise self.unexpected(what + (f" {context}" if context else ""))

    def expect_name(self, context: str = "") -> Token:
        """A name token; a keyword there is named as such in the error."""
        tok = self.peek()
        if tok.kind == NAME:
            return self.advance()
        if tok.text.isidentifier() and tok.kind not in (EOF,):
            raise self.error(
                f"expected a name {context}, found keyword '{tok.text}'".replace("  ", " "), tok)
        return self.expect(NAME, context)

    def loc(self, tok: Token) -> Loc:
        return tok.loc(self.filename)

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        """A ParseError at ``tok`` (default: the next token), showing the source line."""
        tok = tok if tok is not None else self.peek()
        return ParseError(message, self.loc(tok), self.text)

    def unexpected(self, expected: str) -> ParseError:
        """``expected X, found Y`` at the next token (``unexpected end of file`` at EOF)."""
        tok = self.peek()
        if tok.kind == EOF:
            return self.error(f"unexpected end of file: expected {expected}", tok)
        return self.error(f"expected {expected}, found {tok.describe()}", tok)

    # ------------------------------------------------------------------------ scopes
    def push_scope(self) -> None:
        self.scopes.append({})

    def pop_scope(self) -> None:
        self.scopes.pop()

    @contextmanager
    def scope(self) -> Iterator[None]:
        """A nested scope for the duration of a ``with`` block."""
        self.push_scope()
        try:
            yield
        finally:
            self.pop_scope()

    def bind(self, tok: Token, type: Type, mutable: bool = False,
             distinct: bool = False) -> Var:
        """A fresh variable named by ``tok`` in the innermost scope. ``distinct``: the
        scope holds declarations (parameters, locals) whose names must differ (TXT-14)."""
        name = tok.text
        if name in THREAD_INTRINSICS:
            raise self.error(f"'{name}' is a thread intrinsic and cannot name a variable", tok)
        if distinct and name in self.scopes[-1]:
            raise self.error(f"'{name}' is declared twice", tok)
        v = var(name, type, mutable)
        self.scopes[-1][name] = v
        return v

    def add_var(self, v: Var) -> None:
        """Put an existing variable in the innermost scope (a caller that parses an
        expression over variables it already has)."""
        if not self.scopes:
            self.push_scope()
        self.scopes[-1][v.name] = v

    def at_end(self) -> bool:
        """Whether every token has been consumed."""
        return self.peek().kind == EOF

    def lookup(self, tok: Token) -> Var:
        """The innermost variable named by ``tok``; an unknown name is an error (TXT-14)."""
        for sc in reversed(self.scopes):
            if tok.text in sc:
                return sc[tok.text]
        raise self.error(f"unknown name '{tok.text}'", tok)

    # ------------------------------------------------------------------------- types
    def parse_scalar(self, context: str = "") -> Scalar:
        tok = self.peek()
        if tok.kind in _SCALARS:
            self.advance()
            return _SCALARS[tok.kind]
        raise self.unexpected("a scalar type (i32, i64, f32, f64, bool, unit)"
                              + (f" {context}" if context else ""))

    def parse_dims(self, space: MemSpace, elem: Scalar, start: Token) -> ArrayType:
        """``'[' dim (',' dim)* ']'`` after the element type (TXT-6)."""
        self.expect("[")
        lower: list[int] = []
        shape: list[int | None] = []
        while True:
            lo, ext = 0, None
            neg = self.accept("-")
            if neg is not None or self.at(INT):
                first = self.expect(INT, "in an array dimension")
                n = int(first.value) * (-1 if neg else 1)  # type: ignore[arg-type]
                if self.accept(":"):
                    lo = n
                    if self.at(INT):
                        ext = int(self.advance().value)  # type: ignore[arg-type]
                elif neg is not None:
                    raise self.error("an array extent cannot be negative", neg)
                else:
                    ext = n
            lower.append(lo)
            shape.append(ext)
            if not self.accept(","):
                break
        self.expect("]", "to close the array dimensions")
        try:
            return ArrayType(elem, space, tuple(lower), tuple(shape))
        except ValueError as exc:
            raise self.error(str(exc), start) from None

    def parse_type(self) -> Type:
        """``['shared'|'local'] scalar ['[' dims ']']`` (TXT-6)."""
        start = self.peek()
        space = MemSpace.GLOBAL
        if self.accept("shared"):
            space = MemSpace.SHARED
        elif self.accept("local"):
            space = MemSpace.LOCAL
        elem = self.parse_scalar()
        if self.at("["):
            return self.parse_dims(space, elem, start)
        if space is not MemSpace.GLOBAL:
            raise self.unexpected(f"'[' after '{space} {elem}' (only arrays have a space)")
        return elem

    # ------------------------------------------------------------------- expressions
    def parse_expr(self, expected: Scalar | None = None) -> Expr:
        """An expression, its unsuffixed literals typed by context and ``expected``."""
        return self.coerce(self.parse_raw_expr(), expected)

    def nested(self) -> ParseError | None:
        """Enter one more level of brackets, prefix operators or statements: the error to
        raise past :data:`~sarek_py.ir.deep.MAX_NESTING` levels (TXT-32), else None. The
        caller leaves the level with ``self.nesting -= 1``."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            return self.error(f"the program is nested more than {MAX_NESTING} levels deep "
                              "here (brackets, prefix operators and statements all count)")
        return None

    def deeper(self, node: E, tok: Token, *kids: Expr) -> E:
        """``node`` (built from ``kids`` at ``tok``), its expression depth recorded; an
        expression that, with the statements around it, nests past
        :data:`~sarek_py.ir.deep.MAX_DEPTH` levels is a located error at once (TXT-32),
        before anything walks the tree (a long chain of operators is left-nested)."""
        d = 1 + max((self._depths.get(id(k), 1) for k in kids), default=0)
        if d + self.stmt_depth > MAX_DEPTH:
            raise self.error(depth_message("this expression"), tok)
        self._depths[id(node)] = d
        self._keep.append(node)
        return node

    def parse_raw_expr(self) -> Expr:
        """An expression whose unsuffixed literals are not typed yet (see :meth:`coerce`)."""
        err = self.nested()
        try:
            if err is not None:
                raise err
            return self._parse_raw_expr()
        finally:
            self.nesting -= 1

    def _parse_raw_expr(self) -> Expr:
        cond = self.parse_binary(0)
        q = self.accept("?")
        if q is None:
            return cond
        if_true = self.parse_raw_expr()
        self.expect(":", "in a conditional expression 'c ? a : b'")
        if_false = self.parse_raw_expr()
        return self.deeper(Cond(cond, if_true, if_false, loc=self.loc(q)), q,
                           cond, if_true, if_false)

    def parse_binary(self, level: int) -> Expr:
        if level == len(BINARY_LEVELS):
            return self.parse_unary()
        lhs = self.parse_binary(level + 1)
        while self.peek().kind in BINARY_LEVELS[level]:
            op = self.advance()
            rhs = self.parse_binary(level + 1)
            lhs = self.deeper(Binary(_BINOPS[op.kind], lhs, rhs, loc=self.loc(op)), op,
                              lhs, rhs)
        return lhs

    def parse_unary(self) -> Expr:
        tok = self.peek()
        if tok.kind == "-" and self.peek(1).kind in _LITERALS:
            # a minus sign directly before a number is part of the literal (TXT-10)
            self.advance()
            return self.literal(self.advance(), negate=True, start=tok)
        if tok.kind in ("-", "!", "~"):
            err = self.nested()
            try:
                if err is not None:
                    raise err
                self.advance()
                arg = self.parse_unary()
                return self.deeper(Unary(_UNOPS[tok.kind], arg, loc=self.loc(tok)), tok, arg)
            finally:
                self.nesting -= 1
        return self.parse_primary()

    def literal(self, tok: Token, negate: bool = False, start: Token | None = None) -> Expr:
        """The constant of a numeric literal token (TXT-9, TXT-10)."""
        loc = self.loc(start if start is not None else tok)
        assert isinstance(tok.value, (int, float))
        value = -tok.value if negate else tok.value
        sign = "-" if negate else ""
        if tok.kind == INT:
            return _Lit(value, Scalar.I32, loc=loc, text=sign + tok.text)
        if tok.kind == FLOAT:
            return _Lit(value, Scalar.F64, loc=loc, text=sign + tok.text)
        if tok.kind == INT64:
            lo, hi = _RANGE[Scalar.I64]
            if not lo <= value <= hi:
                raise self.error(f"integer literal {short(sign + tok.text)} does not fit in i64",
                                 start or tok)
            return Const(value, Scalar.I64, loc=loc)
        return Const(value, Scalar.F32, loc=loc)

    def parse_args(self, context: str) -> tuple[Expr, ...]:
        """``'(' [expr (',' expr)*] ')'``, raw (untyped literals)."""
        self.expect("(", context)
        args: list[Expr] = []
        if not self.at(")"):
            args.append(self.parse_raw_expr())
            while self.accept(","):
                args.append(self.parse_raw_expr())
        self.expect(")", f"to close the arguments {context}".rstrip())
        return tuple(args)

    def parse_index(self, array: Token) -> tuple[Expr, ...]:
        """``'[' expr (',' expr)* ']'`` after an array name."""
        self.expect("[")
        idx = [self.parse_raw_expr()]
        while self.accept(","):
            idx.append(self.parse_raw_expr())
        self.expect("]", f"to close the index of '{array.text}'")
        return tuple(idx)

    def parse_primary(self) -> Expr:
        tok = self.peek()
        loc = self.loc(tok)
        kind = tok.kind
        if kind in _LITERALS:
            return self.literal(self.advance())
        if kind in ("true", "false"):
            self.advance()
            return Const(kind == "true", Scalar.BOOL, loc=loc)
        if kind == "(":
            self.advance()
            if self.accept(")"):
                return Const(None, Scalar.UNIT, loc=loc)
            e = self.parse_raw_expr()
            self.expect(")", f"to close the '(' at line {tok.line}, column {tok.col}")
            return e
        if kind in _SCALARS:
            self.advance()
            args = self.parse_args(f"of the cast to {kind}")
            if len(args) != 1:
                raise self.error(f"a cast to {kind} takes 1 argument, given {len(args)}", tok)
            return self.deeper(Cast(_SCALARS[kind], args[0], loc=loc), tok, *args)
        if kind == "length":
            self.advance()
            self.expect("(", "after 'length'")
            arr = self.lookup(self.expect_name("in 'length(…)'"))
            dim = 0
            if self.accept(","):
                dim = int(self.expect(INT, "(the dimension) in 'length(a, d)'").value)  # type: ignore[arg-type]
            self.expect(")", "to close 'length('")
            return Length(arr, dim, loc=loc)
        if kind == NAME:
            self.advance()
            name = tok.text
            if self.at("("):
                return self.parse_call(tok)
            if self.at("["):
                arr = self.lookup(tok)
                index = self.parse_index(tok)
                return self.deeper(Read(arr, index, loc=loc), tok, *index)
            if name in THREAD_INTRINSICS:
                return Intrinsic(name, (), loc=loc)
            return Ref(self.lookup(tok), loc=loc)
        raise self.unexpected("an expression")

    def parse_call(self, tok: Token) -> Expr:
        """``NAME '(' args ')'``: a math intrinsic or a helper declared above (TXT-15)."""
        name, loc = tok.text, self.loc(tok)
        if name in THREAD_INTRINSICS:
            raise self.error(f"thread intrinsic '{name}' takes no arguments: write '{name}'",
                             tok)
        if name in ATOMIC_WORDS and name not in self.functions:
            return self.parse_atomic(tok, ATOMIC_WORDS[name])
        if name not in MATH and name not in self.functions:
            raise self.error(f"unknown function '{name}' (helpers are declared before use)",
                             tok)
        args = self.parse_args(f"of '{name}'")
        if name in MATH:
            arity = MATH[name][0]
            if len(args) != arity:
                raise self.error(f"'{name}' takes {arity} argument{'s' * (arity > 1)}, "
                                 f"given {len(args)}", tok)
            return self.deeper(Intrinsic(name, args, loc=loc), tok, *args)
        h = self.functions[name]
        if len(args) != len(h.params):
            raise self.error(f"'{name}' takes {len(h.params)} argument"
                             f"{'s' * (len(h.params) != 1)}, given {len(args)}", tok)
        self.calls.add(name)
        return self.deeper(Call(name, args, h.result, loc=loc), tok, *args)

    def parse_atomic(self, tok: Token, op: AtomicOp) -> Expr:
        """``atomic_add(a[i], v)`` … ``atomic_cas(a[i], expected, desired)`` (TXT-38)."""
        name, loc = tok.text, self.loc(tok)
        self.expect("(", f"after '{name}'")
        shape = (f"'{name}(a[i], expected, desired)'" if op is AtomicOp.CAS
                 else f"'{name}(a[i], v)'")
        if not (self.at(NAME) and self.peek(1).kind == "["):
            raise self.error(f"the first argument of '{name}' is an array element, as in "
                             f"{shape}")
        arr_tok = self.advance()
        arr = self.lookup(arr_tok)
        index = self.parse_index(arr_tok)
        operands: list[Expr] = []
        for _ in range(arity(op)):
            self.expect(",", f"in {shape}")
            operands.append(self.parse_raw_expr())
        if self.at(","):
            raise self.error(f"'{name}' takes {1 + arity(op)} arguments: {shape}")
        self.expect(")", f"to close the arguments of '{name}'")
        value = operands[-1]
        compare = operands[0] if op is AtomicOp.CAS else None
        kids = (*index, *operands)
        return self.deeper(Atomic(op, arr, index, value, compare, loc=loc), tok, *kids)

    # ----------------------------------------------------------------- literal typing
    def coerce(self, e: Expr, expected: Scalar | None) -> Expr:
        """``e`` with every unsuffixed literal typed (TXT-13): by the other operand, the
        arguments of the same intrinsic, the parameter of a call, or ``expected``."""
        match e:
            case _Lit():
                return self._settle(e, expected)
            case Const() | Ref() | Length():
                return e
            case Unary(op=UnaryOp.NOT, arg=a):
                return attrs.evolve(e, arg=self.coerce(a, Scalar.BOOL))
            case Unary(arg=a):
                return attrs.evolve(e, arg=self.coerce(a, expected))
            case Binary(op=op, lhs=lhs, rhs=rhs):
                if op.is_logical:
                    t: Scalar | None = Scalar.BOOL
                else:
                    t = _scalar_or_none(natural_type(lhs) or natural_type(rhs))
                    if t is None and not op.is_compare:
                        t = expected
                return attrs.evolve(e, lhs=self.coerce(lhs, t), rhs=self.coerce(rhs, t))
            case Read(index=idx):
                return attrs.evolve(e, index=tuple(self.coerce(i, None) for i in idx))
            case Cast(arg=a):
                return attrs.evolve(e, arg=self.coerce(a, None))
            case Cond(cond=c, if_true=a, if_false=b):
                t = _scalar_or_none(natural_type(a) or natural_type(b)) or expected
                return attrs.evolve(e, cond=self.coerce(c, Scalar.BOOL),
                                    if_true=self.coerce(a, t), if_false=self.coerce(b, t))
            case Intrinsic(args=args):
                if not args:
                    return e
                t = _scalar_or_none(natural_type(e)) or expected
                return attrs.evolve(e, args=tuple(self.coerce(a, t) for a in args))
            case Atomic(array=a, index=idx, value=v, compare=c):
                elem = a.scalar if a.scalar is not Scalar.UNIT else None
                return attrs.evolve(
                    e, index=tuple(self.coerce(i, None) for i in idx),
                    value=self.coerce(v, elem),
                    compare=None if c is None else self.coerce(c, elem))
            case Call(func=f, args=args):
                params = self.functions[f].params if f in self.functions else ()
                types = [_scalar_or_none(p.type) for p in params]
                types += [None] * (len(args) - len(types))
                return attrs.evolve(e, args=tuple(
                    self.coerce(a, t) for a, t in zip(args, types, strict=True)))
        raise TypeError(f"not an expression: {e!r}")

    def _settle(self, lit: _Lit, expected: Scalar | None) -> Const:
        """The typed constant of an unsuffixed literal: ``expected`` when it is of the
        literal's kind (integer or float), else the default ``i32`` / ``f64``."""
        loc = lit.loc
        assert loc is not None
        if lit.type is Scalar.I32:
            t = expected if expected is not None and expected.is_int else Scalar.I32
            lo, hi = _RANGE[t]
            assert isinstance(lit.value, int)
            if not lo <= lit.value <= hi:
                raise ParseError(f"integer literal {short(lit.text)} does not fit in {t} "
                                 "(write an L suffix for i64)", loc, self.text)
            return Const(lit.value, t, loc=loc)
        if expected is Scalar.F32:
            body = lit.text.lstrip("-")
            if body in ("nan", "inf"):
                value = math.nan if body == "nan" else math.inf
            else:
                value = f32_from_decimal(body)
                if math.isinf(value):
                    raise ParseError(f"float literal {short(lit.text)} overflows f32", loc, self.text)
            return Const(-value if lit.text.startswith("-") else value, Scalar.F32, loc=loc)
        return Const(lit.value, Scalar.F64, loc=loc)

    def expr_type(self, e: Expr) -> Type:
        """The type of a parsed (typed) expression, as far as the tree tells it."""
        t = natural_type(e)
        return t if t is not None else Scalar.UNIT

    # -------------------------------------------------------------------- statements
    def parse_seq(self) -> Stmt:
        """``stmt (';' stmt)* [';']``; a single statement is itself, more a ``Seq``."""
        first = self.parse_stmt()
        stmts = [first]
        while self.accept(";"):
            if self.peek().kind not in STMT_START:
                break
            stmts.append(self.parse_stmt())
        if len(stmts) == 1:
            return first
        return Seq(tuple(stmts), loc=first.loc)

    def parse_stmt(self) -> Stmt:
        """One statement (TXT-6, TXT-7)."""
        err = self.nested()
        self.stmt_depth += 1
        try:
            if err is not None:
                raise err
            return self._parse_stmt()
        finally:
            self.nesting -= 1
            self.stmt_depth -= 1

    def _parse_stmt(self) -> Stmt:
        tok = self.peek()
        loc = self.loc(tok)
        match tok.kind:
            case "let":
                return self.parse_let()
            case "if":
                self.advance()
                cond = self.parse_expr(Scalar.BOOL)
                self.expect("then", "after the condition of 'if'")
                then = self.parse_stmt()
                else_ = self.parse_stmt() if self.accept("else") else None
                return If(cond, then, else_, loc=loc)
            case "for":
                return self.parse_for()
            case "while":
                self.advance()
                cond = self.parse_expr(Scalar.BOOL)
                self.expect("do", "after the condition of 'while'")
                body = self.parse_seq()
                self.expect("done", f"to close the 'while' at line {tok.line}")
                return While(cond, body, loc=loc)
            case "return":
                self.advance()
                value = None
                if self.peek().kind in EXPR_START:
                    value = self.parse_expr(self.result_type)
                return Return(value, loc=loc)
            case "barrier":
                self.advance()
                return Barrier(loc=loc)
            case "break":
                self.advance()
                return Break(loc=loc)
            case "continue":
                self.advance()
                return Continue(loc=loc)
            case "stop":
                self.advance()
                neg = self.accept("-")
                code_tok = self.expect(INT, "after 'stop'")
                code = int(code_tok.value)  # type: ignore[arg-type]
                if code >= 2 ** 31:
                    raise self.error(f"stop code {code_tok.text} does not fit in i32",
                                     code_tok)
                return Stop(-code if neg else code, loc=loc)
            case "pragma":
                self.advance()
                options = [str(self.expect(STRING, "after 'pragma'").value)]
                while self.at(STRING):
                    options.append(str(self.advance().value))
                return Pragma(tuple(options), self.parse_stmt(), loc=loc)
            case "(":
                self.advance()
                if self.accept(")"):
                    return Empty(loc=loc)
                inner = self.parse_seq()
                self.expect(")", f"to close the '(' at line {tok.line}, column {tok.col}")
                return inner
            case "name":
                return self.parse_assign_or_store()
        raise self.unexpected("a statement")

    def parse_let(self) -> Stmt:
        """``let [mut] x [: scalar] = e in seq`` (TXT-7)."""
        tok = self.expect("let")
        mutable = self.accept("mut") is not None
        name = self.expect_name("after 'let'")
        annot = None
        if self.accept(":"):
            annot = self.parse_scalar(f"for '{name.text}'")
        self.expect("=", f"after '{name.text}' in a let binding")
        value = self.parse_expr(annot)
        self.expect("in", "after let binding")
        with self.scope():
            v = self.bind(name, annot or self.expr_type(value), mutable)
            body = self.parse_seq()
        return Let(v, value, body, loc=self.loc(tok))

    def parse_for(self) -> Stmt:
        """``for i = a to|downto b do seq done`` (TXT-8)."""
        tok = self.expect("for")
        name = self.expect_name("after 'for'")
        self.expect("=", f"after the loop variable '{name.text}'")
        start = self.parse_raw_expr()
        down = self.at("downto")
        if not down and not self.at("to"):
            raise self.unexpected("'to' or 'downto' in the 'for' loop")
        self.advance()
        stop = self.parse_raw_expr()
        t = _scalar_or_none(natural_type(start) or natural_type(stop)) or Scalar.I32
        start, stop = self.coerce(start, t), self.coerce(stop, t)
        self.expect("do", "after the bounds of the 'for' loop")
        with self.scope():
            v = self.bind(name, t)
            body = self.parse_seq()
        self.expect("done", f"to close the 'for' at line {tok.line}")
        return For(v, start, stop, body, down, loc=self.loc(tok))

    def parse_assign_or_store(self) -> Stmt:
        """``x := e`` or ``a[i, …] <- e`` (TXT-8)."""
        tok = self.expect(NAME)
        loc = self.loc(tok)
        if self.at(":="):
            v = self.lookup(tok)
            self.advance()
            return Assign(v, self.parse_expr(_scalar_or_none(v.type)), loc=loc)
        if self.at("["):
            v = self.lookup(tok)
            idx = tuple(self.coerce(i, None) for i in self.parse_index(tok))
            self.expect("<-", f"after '{tok.text}[…]' in a store")
            return Store(v, idx, self.parse_expr(v.scalar), loc=loc)
        raise self.unexpected(f"':=' or '[' after '{tok.text}' (a statement that starts with "
                              "a name is an assignment or a store)")

    # --------------------------------------------------------------------- items
    def parse_params(self, owner: Token) -> tuple[Var, ...]:
        """``'(' [NAME ':' type (',' NAME ':' type)*] ')'`` bound in the current scope."""
        self.expect("(", f"after '{owner.text}'")
        params: list[Var] = []
        if not self.at(")"):
            while True:
                name = self.expect_name("(a parameter)")
                self.expect(":", f"after parameter '{name.text}'")
                params.append(self.bind(name, self.parse_type(), distinct=True))
                if not self.accept(","):
                    break
        self.expect(")", f"to close the parameters of '{owner.text}'")
        return tuple(params)

    def _declare_item(self, name: Token) -> None:
        if name.text in MATH:
            raise self.error(f"'{name.text}' is a math intrinsic and cannot be redefined", name)
        if name.text in THREAD_INTRINSICS:
            raise self.error(f"'{name.text}' is a thread intrinsic", name)
        if name.text in self._items:
            first = self._items[name.text]
            raise self.error(f"'{name.text}' is already defined at line {first.line}", name)
        self._items[name.text] = name

    def check_depth(self, item: object, what: str) -> None:
        """Refuse an item whose IR tree nests past :data:`~sarek_py.ir.deep.MAX_DEPTH`
        levels (TXT-32), at its deepest located node."""
        self._depths.clear()
        self._keep.clear()
        deep = too_deep(item)
        if deep is not None:
            raise ParseError(depth_message(what), deep[1], self.text)

    def _end_of_item(self, what: str) -> None:
        if self.peek().kind not in ITEM_START:
            raise self.unexpected(f"';' or a new item after the body of {what}")

    def parse_helper(self) -> HelperFunc:
        """``['pure'] 'fun' NAME '(' params ')' ':' scalar '=' seq`` (TXT-16)."""
        start = self.peek()
        pure = self.accept("pure") is not None
        self.expect("fun", "after 'pure'")
        name = self.expect_name("after 'fun'")
        self._declare_item(name)
        self.calls = set()
        with self.scope():
            params = self.parse_params(name)
            self.expect(":", f"before the result type of '{name.text}'")
            result = self.parse_scalar(f"as the result of '{name.text}'")
            self.expect("=", f"before the body of '{name.text}'")
            self.result_type = result
            body = self.parse_seq()
        self._end_of_item(f"'{name.text}'")
        h = HelperFunc(name.text, params, result, body, pure, loc=self.loc(start))
        self.check_depth(h, f"helper '{name.text}'")
        self.functions[name.text] = h
        self.callees[name.text] = self.calls
        return h

    def parse_decl(self) -> Var:
        """``shared|local NAME ':' scalar '[' dims ']'`` or ``var NAME ':' scalar``."""
        tok = self.advance()
        name = self.expect_name(f"after '{tok.kind}'")
        self.expect(":", f"after '{name.text}'")
        elem = self.parse_scalar(f"for '{name.text}'")
        if tok.kind == "var":
            return self.bind(name, elem, mutable=True, distinct=True)
        space = MemSpace.SHARED if tok.kind == "shared" else MemSpace.LOCAL
        if not self.at("["):
            raise self.unexpected(f"'[' (a {tok.kind} declaration is an array)")
        t = self.parse_dims(space, elem, tok)
        why = local_extent_problem(name.text, t)  # IR-50
        if why is not None:
            raise self.error(why, name)
        return self.bind(name, t, mutable=True, distinct=True)

    def parse_kernel(self) -> Kernel:
        """``'kernel' NAME '(' params ')' decl* '=' seq`` (TXT-16)."""
        start = self.expect("kernel")
        name = self.expect_name("after 'kernel'")
        self._declare_item(name)
        self.calls = set()
        self.result_type = None
        with self.scope():
            params = self.parse_params(name)
            requires: FusionRequires | None = None
            ranges: tuple[Expr, ...] = ()
            if self.at(NAME) and self.peek().text == "requires":  # LEG-13, LCH-25
                requires, ranges = parse_requires(
                    self, params, lambda: self.parse_range_condition(params))
            decls: list[Var] = []
            while self.at("shared", "local", "var"):
                at = self.peek()
                decls.append(self.parse_decl())
                first = next((v for v in decls if is_dynamic_shared(v.type)), None)
                if first is not None and first is not decls[-1] \
                        and is_dynamic_shared(decls[-1].type):  # IR-51
                    raise self.error(
                        f"shared arrays '{first.name}' and '{decls[-1].name}' are both sized "
                        "at launch: a kernel has at most one dynamic shared array", at)
            if not self.at("="):
                raise self.unexpected(f"'=' or a declaration (shared, local, var) before the "
                                      f"body of kernel '{name.text}'")
            self.advance()
            body = self.parse_seq()
        self._end_of_item(f"kernel '{name.text}'")
        k = Kernel(name.text, params, tuple(decls), body, self.helpers_of(self.calls),
                   requires=requires, ranges=ranges, loc=self.loc(start))
        self.check_depth(k.body, f"kernel '{name.text}'")
        return k

    def parse_range_condition(self, params: tuple[Var, ...]) -> Expr:
        """One condition of a kernel's ``requires range(...)`` (TXT-35): a ``bool``
        expression over its integer and ``bool`` scalar parameters (LCH-25), a located
        error otherwise."""
        start = self.peek()
        e = self.parse_expr(Scalar.BOOL)
        bad = range_problem(e, params)
        if bad is not None:
            what, at = bad
            msg = f"range(...) takes conditions over the launch's scalar arguments: {what}"
            if at.loc is not None:
                raise ParseError(msg, at.loc, self.text)
            raise self.error(msg, start)
        return e

    def helpers_of(self, calls: set[str]) -> tuple[HelperFunc, ...]:
        """The helpers ``calls`` name and those they call, transitively, in file order."""
        seen: set[str] = set()
        todo = list(calls)
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(self.callees.get(n, ()))
        return tuple(h for n, h in self.functions.items() if n in seen)

    def parse_module(self) -> Module:
        """``item*`` up to the end of the file (TXT-16)."""
        helpers: list[HelperFunc] = []
        kernels: list[Kernel] = []
        while not self.at(EOF):
            if self.at("pure", "fun"):
                helpers.append(self.parse_helper())
            elif self.at("kernel"):
                kernels.append(self.parse_kernel())
            else:
                raise self.unexpected("'kernel', 'fun' or 'pure fun' at the top level")
        return Module(tuple(helpers), tuple(kernels), loc=Loc(self.filename, 1, 1))


def parse_module(text: str, filename: str = "<string>") -> Module:
    """The module of a ``.sk`` text; a ``ParseError`` (located, with the source) if it is
    not one. Runs on a deep stack (TXT-32): nesting up to the bounds of
    :mod:`sarek_py.ir.deep` parses, deeper nesting is a located error."""
    return call_deep(_parse_module, text, filename)


def _parse_module(text: str, filename: str) -> Module:
    parser = Parser(text, filename)
    try:
        return parser.parse_module()
    except RecursionError:  # a bug: the bounds of TXT-32 should stop any program first
        raise parser.error("the program is nested too deeply to parse") from None


def parse_file(path: str | Path) -> Module:
    """The module of a ``.sk`` file, read as bytes and decoded strictly as UTF-8."""
    data = Path(path).read_bytes()
    text = decode_source(data, str(path))
    return parse_module(text, str(path))


def parse_kernel(text: str, filename: str = "<string>", name: str | None = None) -> Kernel:
    """The kernel ``name`` of a text (or its only kernel)."""
    m = parse_module(text, filename)
    if name is not None:
        return m.kernel(name)
    if len(m.kernels) != 1:
        raise ParseError(f"expected exactly one kernel in {filename}, found {len(m.kernels)}")
    return m.kernels[0]


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a kernel or a helper in ``.sk`` text (TXT-34), or None
    when it can: it must be a string that reads as one name token (letters, digits and
    underscores, not starting with a digit), and not a keyword or an intrinsic."""
    if not isinstance(name, str):
        return f"a name is a string, not {type(name).__name__} {name!r}"
    shown = repr(name) if len(name) <= 40 else repr(name[:40]) + "…"
    try:
        toks = tokenize(name)
    except ParseError:
        toks = []
    if len(toks) != 2 or toks[0].kind != NAME or toks[0].text != name:
        if len(toks) == 2 and toks[0].text == name:
            return f"{shown} is a keyword of the .sk language"
        return (f"{shown} is not a name (letters, digits and '_', not starting with a "
                "digit)")
    if name in MATH:
        return f"{shown} is a math intrinsic"
    if name in THREAD_INTRINSICS:
        return f"{shown} is a thread intrinsic"
    return None
