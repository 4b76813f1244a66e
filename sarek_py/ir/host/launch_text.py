"""The text form of host programs: launches and syncs (specs/launch.md, LCH-16).

::

    host    := 'host' decl (',' decl)*            decl := NAME ':' type
    stmt    := 'launch' NAME '(' [expr (',' expr)*] ')' counts clause*
             | 'sync'
    counts  := 'threads' expr 'block' expr
             | 'grid' extents 'block' extents      extents := '(' expr [',' expr [',' expr]] ')'
    clause  := 'shared' expr                       (elements of the dynamic shared array)
             | 'scratch' NAME 'size' expr ['read_back' expr]
             | 'status' NAME ['replay' '(' 'stop' INT (';' 'stop' INT)* ')']
             | 'overwritten' NAME ['if' expr]
    program := [host] stmt*

Expressions are the kernel language's, over the host variables. A launch names a kernel
of the module it is parsed against; ``scratch`` and ``overwritten`` name the host array
passed as the argument. ``print_host`` prints what ``parse_host`` reads back unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from sarek_py.ir.diagnostics import LaunchError, ParseError
from sarek_py.ir.host.launch import (
    HostStmt,
    Launch,
    ScratchBuffer,
    Sync,
    check_launch,
    is_symbolic,
    shape_counts,
)
from sarek_py.ir.lexer import EOF, INT, NAME, Token
from sarek_py.ir.nodes import Const, Expr, Module, Ref, Stop, Unary, UnaryOp, Var
from sarek_py.ir.parser import Parser
from sarek_py.ir.printer import format_type, print_expr
from sarek_py.ir.types import Scalar, Type
from sarek_py.ir.visit import iter_exprs


class HostParser(Parser):
    """The kernel language's parser, extended with host declarations and statements."""

    def __init__(self, text: str, module: Module, filename: str = "<string>") -> None:
        super().__init__(text, filename)
        self.module = module
        self.host_vars: list[Var] = []
        self.push_scope()

    def word(self, text: str) -> bool:
        """Accept the context keyword ``text`` (a name token)."""
        tok = self.peek()
        if tok.kind == NAME and tok.text == text:
            self.advance()
            return True
        return False

    def expect_word(self, text: str) -> None:
        if not self.word(text):
            raise self.unexpected(f"'{text}'")

    def parse_host_decls(self) -> None:
        if not self.word("host"):
            return
        while True:
            tok = self.expect_name("of a host variable")
            self.expect(":")
            t: Type = self.parse_type()
            self.host_vars.append(self.bind(tok, t, distinct=True))
            if not self.accept(","):
                return

    def host_var(self) -> Var:
        return self.lookup(self.expect_name("of a host variable"))

    def parse_launch(self) -> Launch:
        start = self.peek()
        name_tok = self.expect_name("of a kernel")
        try:
            kernel = self.module.kernel(name_tok.text)
        except KeyError:
            raise self.error(f"unknown kernel '{name_tok.text}'", name_tok) from None
        self.expect("(")
        args: list[Expr] = []
        params = kernel.params
        while not self.at(")"):
            p = params[len(args)] if len(args) < len(params) else None
            expected = p.type if p is not None and isinstance(p.type, Scalar) else None
            args.append(self.parse_expr(expected))
            if not self.accept(","):
                break
        self.expect(")", "after the launch's arguments")
        grid: tuple[Expr, ...] = ()
        bshape: tuple[Expr, ...] = ()
        if self.word("grid"):  # a launch of 1 to 3 dimensions (LCH-28)
            grid = self._extents("grid")
            self.expect_word("block")
            bshape = self._extents("block")
            threads, block = shape_counts(grid, bshape)
            assert not isinstance(threads, int) and not isinstance(block, int)
        else:
            if not self.word("threads"):
                raise self.unexpected("'threads' or 'grid'")
            threads_tok = self.peek()
            threads = self.parse_expr(Scalar.I64)
            self._count_in_range(threads, threads_tok, "thread count", 0, 2 ** 63 - 1)
            self.expect_word("block")
            block_tok = self.peek()
            block = self.parse_expr(Scalar.I32)
            self._count_in_range(block, block_tok, "block size", 1, 2 ** 31 - 1)
        scratch: list[ScratchBuffer] = []
        status: Var | None = None
        replay: list[Stop] = []
        over: list[Var] = []
        over_if: list[Expr] = []
        shared: Expr | None = None
        while True:
            shared_tok = self.peek()
            if self.accept("shared"):  # the dynamic shared extent, in elements (LCH-51)
                if shared is not None:
                    raise self.error("a launch gives its shared extent once", shared_tok)
                count_tok = self.peek()
                shared = self.parse_expr(Scalar.I32)
                self._count_in_range(shared, count_tok, "shared extent", 0, 2 ** 31 - 1)
            elif self.word("scratch"):
                v = self.host_var()
                index = self._arg_index(args, v)
                self.expect_word("size")
                size = self.parse_expr(Scalar.I32)
                back = self.parse_expr(Scalar.I32) if self.word("read_back") else None
                scratch.append(ScratchBuffer(index, size, back))
            elif self.word("status"):
                status = self.host_var()
                if self.word("replay"):
                    self.expect("(")
                    while True:
                        stop_tok = self.expect("stop")
                        code = self.expect(INT, "after 'stop'")
                        replay.append(Stop(int(code.value),  # type: ignore[arg-type]
                                           loc=self.loc(stop_tok)))
                        if not self.accept(";"):
                            break
                    self.expect(")")
            elif self.word("overwritten"):
                over.append(self.host_var())
                over_if.append(self.parse_expr(Scalar.BOOL) if self.accept("if")
                               else Const(True, Scalar.BOOL))
            else:
                break
        node = Launch(kernel, threads, block, tuple(args), tuple(scratch), status,
                      tuple(replay), tuple(over), tuple(over_if), grid=grid,
                      block_shape=bshape, shared=shared, loc=self.loc(start))
        check_launch(node)
        return node

    def _extents(self, what: str) -> tuple[Expr, ...]:
        """``(e0 [, e1 [, e2]])``: the 1 to 3 ``i32`` extents of a grid or block (LCH-28)."""
        self.expect("(", f"to open the {what}'s extents")
        out: list[Expr] = []
        while True:
            tok = self.peek()
            e = self.parse_expr(Scalar.I32)
            self._count_in_range(e, tok, f"{what} extent", 1, 2 ** 31 - 1)
            out.append(e)
            if len(out) == 3 or not self.accept(","):
                break
        self.expect(")", f"to close the {what}'s extents (1 to 3 of them)")
        return tuple(out)

    def _count_in_range(self, e: Expr, tok: Token, what: str, lo: int, hi: int) -> None:
        """A constant thread count or block size out of ``lo..hi`` is an error (LCH-22)."""
        value = _constant(e)
        if value is not None and not lo <= value <= hi:
            raise self.error(f"the {what} {value} is not in {lo}..{hi}", tok)

    def _arg_index(self, args: list[Expr], v: Var) -> int:
        for i, a in enumerate(args):
            if isinstance(a, Ref) and a.var == v:
                return i
        raise self.error(f"'{v.name}' is not an argument of this launch")

    def parse_host(self) -> tuple[tuple[Var, ...], tuple[HostStmt, ...]]:
        self.parse_host_decls()
        stmts: list[HostStmt] = []
        while not self.at(EOF):
            tok = self.peek()
            if self.word("launch"):
                stmts.append(self.parse_launch())
            elif self.word("sync"):
                stmts.append(Sync(loc=self.loc(tok)))
            else:
                raise self.unexpected("'launch' or 'sync'")
            self.accept(";")
        return tuple(self.host_vars), tuple(stmts)


def _constant(e: Expr) -> int | None:
    """The value of an integer constant, negated or not (else None)."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, Unary) and e.op is UnaryOp.NEG:
        inner = _constant(e.arg)
        return None if inner is None else -inner
    return None


def parse_host(text: str, module: Module,
               filename: str = "<string>") -> tuple[tuple[Var, ...], tuple[HostStmt, ...]]:
    """The host variables and statements of ``text``, launches checked (LCH-1)."""
    return HostParser(text, module, filename).parse_host()


def print_launch(node: Launch) -> str:
    """One launch as text (one line, clauses on continuation lines)."""
    threads, block, exprs = node.host_exprs()
    args = ", ".join(print_expr(a) for a in exprs)
    if node.shaped:  # LCH-28: the counts are the extents' products, not printed
        grid, bshape = node.host_shape()
        head = (f"launch {node.kernel.name}({args}) grid ({_list(grid)}) "
                f"block ({_list(bshape)})")
    else:
        head = (f"launch {node.kernel.name}({args}) threads {print_expr(threads)} "
                f"block {print_expr(block)}")
    clauses: list[str] = []
    if node.shared is not None:  # LCH-51
        if not is_symbolic(node.shared):
            raise LaunchError(f"launch of {node.kernel.name}: the shared extent "
                              f"{node.shared!r} is a bound value, not a host expression",
                              node.loc)
        clauses.append(f"shared {print_expr(node.shared)}")
    for s in node.scratch:
        c = f"scratch {node.arg_name(s.argument)} size {print_expr(s.size)}"
        if s.read_back is not None:
            c += f" read_back {print_expr(s.read_back)}"
        clauses.append(c)
    if node.stop_status is not None:
        c = f"status {node.stop_status.name}"
        if node.stop_replay:
            c += " replay (" + "; ".join(f"stop {r.code}" for r in node.stop_replay) + ")"
        clauses.append(c)
    for v, cond in zip(node.overwritten, node.overwritten_if, strict=True):
        always = isinstance(cond, Const) and cond.value is True
        clauses.append(f"overwritten {v.name}" + ("" if always else f" if {print_expr(cond)}"))
    return "\n  ".join([head, *clauses])


def _list(exprs: tuple[Expr, ...]) -> str:
    return ", ".join(print_expr(e) for e in exprs)


def host_vars(stmts: Sequence[HostStmt]) -> list[Var]:
    """The host variables the statements use, in order of first use."""
    seen: dict[int, Var] = {}
    for s in stmts:
        if not isinstance(s, Launch):
            continue
        threads, block, args = s.host_exprs()
        exprs: list[Expr] = [*args, threads, block, *s.overwritten_if]
        if is_symbolic(s.shared):
            exprs.append(s.shared)
        for sc in s.scratch:
            exprs += [sc.size] + ([sc.read_back] if sc.read_back is not None else [])
        for e in exprs:
            for x in iter_exprs(e):
                if isinstance(x, Ref):
                    seen.setdefault(x.var.id, x.var)
        for v in (s.stop_status, *s.overwritten):
            if v is not None:
                seen.setdefault(v.id, v)
    return list(seen.values())


def print_host(stmts: Sequence[HostStmt], variables: Sequence[Var] | None = None) -> str:
    """A host program as text: the ``host`` declarations, then one statement a line."""
    vs = list(variables) if variables is not None else host_vars(stmts)
    lines = []
    if vs:
        lines.append("host " + ", ".join(f"{v.name} : {format_type(v.type)}" for v in vs))
    for s in stmts:
        lines.append(print_launch(s) if isinstance(s, Launch) else "sync")
    return "\n".join(lines) + "\n"


__all__ = ["HostParser", "ParseError", "host_vars", "parse_host", "print_host",
           "print_launch"]
