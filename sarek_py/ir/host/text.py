"""The text form of host programs: parser and printer (specs/host-program.md, HP-10, HP-11,
HP-40, HP-42, HP-44).

A host file holds kernel-language items (``fun``, ``pure fun``, ``kernel``) followed by one
``program``::

    program NAME
      var n : i32 = 64;                         // declarations, each ended by ';'
      var u : f64[1:, 1:] allocatable target;
      proc fill(a : f64[1:, 1:] inout, v : f64 in) pure = ( … ) end
    begin
      host statements separated by ';'
    end

Host statements: ``x := e``, ``a[i, j] <- e``, ``p => a``, ``if e then s [else s]``,
``for i = a to b [step s] do … done``, ``while e do … done``, ``break``, ``continue``, ``return``, ``stop N``,
``parallel for (j = a to b, i = c to d) [local …|var …]* do KERNEL-SEQ done`` (where a
kernel statement may also be ``call p(args)``, the procedure inlined, HP-42),
``call p(args)``, ``print [(k = v, …)] items``, ``write (k = v, …) items``,
``read x, y``, ``allocate a[lo:hi, n]``, ``deallocate a``, ``launch k(args) threads e
block e [clauses]`` and ``sync`` (the launch syntax of :mod:`sarek_py.ir.host.launch_text`),
``( … )``. The :class:`HostParser` reuses the kernel parser for types, expressions and the
bodies of parallel loops.
"""

from __future__ import annotations

from pathlib import Path

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import Launch, Sync
from sarek_py.ir.host.launch_text import HostParser as LaunchParser
from sarek_py.ir.host.launch_text import print_launch
from sarek_py.ir.host.names import printable_program
from sarek_py.ir.host.proc_inline import InlineRefused, inline_call
from sarek_py.ir.host.program import (
    Allocate,
    Attr,
    Block,
    Bound,
    Break,
    CallProc,
    Continue,
    Deallocate,
    Decl,
    HAssign,
    HFor,
    HIf,
    HostStmt,
    HReturn,
    HStop,
    HStore,
    HWhile,
    Input,
    Intent,
    LoopIndex,
    Output,
    Param,
    ParFor,
    PointerAssoc,
    Procedure,
    Program,
)
from sarek_py.ir.lexer import EOF, INT, NAME, STRING, Token, decode_source
from sarek_py.ir.nodes import (
    Expr,
    HelperFunc,
    Kernel,
    Module,
    Stmt,
    Var,
)
from sarek_py.ir.printer import (
    format_string,
    format_type,
    print_expr,
    print_helper,
    print_kernel,
    print_stmt,
)
from sarek_py.ir.types import ArrayType, MemSpace, Scalar

#: words that start a host statement when not followed by ':=', '[' or '=>'
HOST_WORDS = frozenset({"break", "continue", "parallel", "call", "print", "write", "read",
                        "allocate", "deallocate", "launch", "sync"})
_ATTRS = {a.value: a for a in Attr}
_INTENTS = {i.value: i for i in Intent}
_INTENTS["in"] = Intent.IN


class HostParser(LaunchParser):
    """The kernel parser, extended with launches and syncs (:mod:`sarek_py.ir.host.launch_text`,
    whose launch syntax host programs share) and with host programs (HP-10)."""

    def __init__(self, text: str, filename: str = "<string>"):
        super().__init__(text, Module(), filename)
        self.kernels: dict[str, Kernel] = {}
        self.procs: dict[str, Procedure] = {}
        #: inside the body of a parallel loop (where ``call`` is inlined, HP-42)
        self.in_parfor = 0

    def _parse_stmt(self) -> Stmt:
        if self.in_parfor and self.at_word("call") and self.peek(1).kind == NAME \
                and self.peek(2).kind == "(":
            return self.parse_parfor_call()
        return super()._parse_stmt()

    def parse_parfor_call(self) -> Stmt:
        """HP-42: ``call p(args)`` in a parallel loop's body, inlined (HP-43 refusals are
        located ``ParseError``s at the call)."""
        tok = self.advance()
        name = self.expect_name("after 'call'")
        proc = self.procs.get(name.text)
        if proc is None:
            raise self.error(f"unknown procedure '{name.text}'", name)
        args = self.parse_args(f"of '{name.text}'")
        if len(args) != len(proc.params):
            raise self.error(f"'{name.text}' takes {len(proc.params)} arguments, "
                             f"given {len(args)}", name)
        typed = tuple(self.coerce(a, p.var.scalar if not p.var.is_array else None)
                      for a, p in zip(args, proc.params, strict=True))
        try:
            return inline_call(proc, typed, self.procs, self.loc(tok), self.expr_type)
        except InlineRefused as exc:
            raise self.error(f"cannot call '{name.text}' in a parallel loop: {exc.message}",
                             tok) from None

    def _end_of_item(self, what: str) -> None:
        if self.peek().kind == NAME and self.peek().text == "program":
            return
        super()._end_of_item(what)

    def at_word(self, word: str) -> bool:
        return self.peek().kind == NAME and self.peek().text == word

    def expect_word(self, word: str, context: str = "") -> None:
        if not self.at_word(word):
            raise self.unexpected(f"'{word}'" + (f" {context}" if context else ""))
        self.advance()

    # --------------------------------------------------------------------- file
    def parse_program_file(self) -> Program:
        helpers: list[HelperFunc] = []
        while not self.at_word("program"):
            if self.at("pure", "fun"):
                helpers.append(self.parse_helper())
            elif self.at("kernel"):
                k = self.parse_kernel()
                self.kernels[k.name] = k
            elif self.at(EOF):
                raise self.unexpected("'program'")
            else:
                raise self.unexpected("'kernel', 'fun', 'pure fun' or 'program'")
        start = self.advance()
        name = self.expect_name("after 'program'")
        self.module = Module(tuple(helpers), tuple(self.kernels.values()))
        self.push_scope()
        decls: list[Decl] = []
        procs: list[Procedure] = []
        while not self.at_word("begin"):
            if self.at("var"):
                decls.append(self.parse_host_decl())
            elif self.at_word("proc"):
                procs.append(self.parse_proc())
            else:
                raise self.unexpected("'var', 'proc' or 'begin' in the program header")
        self.advance()
        body = self.parse_hseq(("end",))
        self.expect_word("end", f"to close program '{name.text}'")
        if not self.at(EOF):
            raise self.unexpected("end of file after the program")
        return Program(name.text, tuple(decls), body, tuple(procs), tuple(helpers),
                       tuple(self.kernels.values()), loc=self.loc(start))

    def parse_host_decl(self) -> Decl:
        """``var NAME : type attr* [= expr] ;`` (HP-2)."""
        tok = self.expect("var")
        name = self.expect_name("after 'var'")
        self.expect(":", f"after '{name.text}'")
        first = self.pos
        t = self.parse_type()
        written = _spelling(self.tokens[first:self.pos])
        attrs_: set[Attr] = set()
        while self.peek().kind == NAME and self.peek().text in _ATTRS:
            attrs_.add(_ATTRS[self.advance().text])
        init = None
        if self.accept("="):
            if isinstance(t, ArrayType):
                raise self.error("an array cannot have an initial value", name)
            init = self.parse_expr(t)
        if isinstance(t, ArrayType) and not t.is_constant_shape and not (
                attrs_ & {Attr.ALLOCATABLE, Attr.POINTER}):
            raise self.error(f"array '{name.text}' has run-time extents: declare it "
                             "allocatable or pointer", name)
        self.expect(";", f"after the declaration of '{name.text}'")
        v = self.bind(name, t, mutable=True, distinct=True)
        return Decl(v, frozenset(attrs_), init, loc=self.loc(tok), written=written)

    def parse_proc(self) -> Procedure:
        """``proc NAME '(' NAME ':' type intent, … ')' ['pure'] decl* '=' hseq 'end'``."""
        start = self.advance()
        name = self.expect_name("after 'proc'")
        if name.text in self.procs:
            raise self.error(f"procedure '{name.text}' is defined twice", name)
        self.push_scope()
        self.expect("(", f"after '{name.text}'")
        params: list[Param] = []
        while not self.at(")"):
            pn = self.expect_name("(a dummy argument)")
            self.expect(":", f"after '{pn.text}'")
            t = self.parse_type()
            intent = Intent.INOUT
            tok = self.peek()
            if tok.kind == "in" or (tok.kind == NAME and tok.text in _INTENTS):
                intent = _INTENTS[self.advance().text]
            params.append(Param(self.bind(pn, t, mutable=True, distinct=True), intent))
            if not self.accept(","):
                break
        self.expect(")", f"to close the dummies of '{name.text}'")
        pure = self.accept("pure") is not None
        decls: list[Decl] = []
        while self.at("var"):
            decls.append(self.parse_host_decl())
        self.expect("=", f"before the body of procedure '{name.text}'")
        body = self.parse_hseq(("end",))
        self.expect_word("end", f"to close procedure '{name.text}'")
        self.pop_scope()
        p = Procedure(name.text, tuple(params), tuple(decls), body, pure, loc=self.loc(start))
        self.procs[name.text] = p
        return p

    # --------------------------------------------------------------- statements
    def parse_hseq(self, closers: tuple[str, ...]) -> HostStmt:
        stmts = [self.parse_hstmt()]
        while self.accept(";"):
            if self.at(")", EOF, "done") or any(self.at_word(c) for c in closers):
                break
            stmts.append(self.parse_hstmt())
        return stmts[0] if len(stmts) == 1 else Block(tuple(stmts), loc=stmts[0].loc)

    def _is_host_word(self) -> bool:
        tok = self.peek()
        if tok.kind in ("break", "continue"):  # keywords of the kernel language too (TXT-2)
            return True
        return (tok.kind == NAME and tok.text in HOST_WORDS
                and self.peek(1).kind not in (":=", "[", "="))

    def parse_hstmt(self) -> HostStmt:
        tok = self.peek()
        loc = self.loc(tok)
        if tok.kind == "if":
            self.advance()
            cond = self.parse_expr(Scalar.BOOL)
            self.expect("then", "after the condition of 'if'")
            then = self.parse_hstmt()
            else_ = self.parse_hstmt() if self.accept("else") else None
            return HIf(cond, then, else_, loc=loc)
        if tok.kind == "for":
            return self.parse_hfor()
        if tok.kind == "while":  # HP-40
            self.advance()
            cond = self.parse_expr(Scalar.BOOL)
            self.expect("do", "after the condition of 'while'")
            body = self.parse_hseq(())
            self.expect("done", f"to close the 'while' at line {tok.line}")
            return HWhile(cond, body, loc=loc)
        if tok.kind == "return":
            self.advance()
            return HReturn(loc=loc)
        if tok.kind == "stop":
            self.advance()
            neg = self.accept("-")
            code = int(self.expect(INT, "after 'stop'").value)  # type: ignore[arg-type]
            return HStop(-code if neg else code, loc=loc)
        if tok.kind == "(":
            self.advance()
            if self.accept(")"):
                return Block((), loc=loc)
            inner = self.parse_hseq(())
            self.expect(")", f"to close the '(' at line {tok.line}, column {tok.col}")
            return inner if isinstance(inner, Block) else Block((inner,), loc=loc)
        if self._is_host_word():
            return self.parse_host_word()
        if tok.kind == NAME:
            return self.parse_host_assign()
        raise self.unexpected("a host statement")

    def parse_hfor(self) -> HostStmt:
        tok = self.expect("for")
        name = self.expect_name("after 'for'")
        self.expect("=", f"after the loop variable '{name.text}'")
        start = self.parse_expr(Scalar.I32)
        self.expect("to", "in the 'for' loop (host loops count up; use a negative step)")
        stop = self.parse_expr(Scalar.I32)
        step = None
        if self.at_word("step"):
            self.advance()
            step = self.parse_expr(Scalar.I32)
        self.expect("do", "after the bounds of the 'for' loop")
        with self.scope():
            v = self.bind(name, Scalar.I32)
            body = self.parse_hseq(())
        self.expect("done", f"to close the 'for' at line {tok.line}")
        return HFor(v, start, stop, step, body, loc=self.loc(tok))

    def parse_host_assign(self) -> HostStmt:
        tok = self.expect(NAME)
        loc = self.loc(tok)
        v = self.lookup(tok)
        if self.accept(":="):
            if isinstance(v.type, ArrayType):
                raise self.error(f"'{v.name}' is an array: assign its elements", tok)
            return HAssign(v, self.parse_expr(v.type), loc=loc)
        if self.at("["):
            idx = tuple(self.coerce(i, None) for i in self.parse_index(tok))
            self.expect("<-", f"after '{tok.text}[…]'")
            return HStore(v, idx, self.parse_expr(v.scalar), loc=loc)
        if self.at("=") and self.peek(1).kind == ">":
            self.advance()
            self.advance()
            target = self.lookup(self.expect_name("after '=>'"))
            return PointerAssoc(v, target, loc=loc)
        raise self.unexpected(f"':=', '[' or '=>' after '{tok.text}'")

    def parse_host_word(self) -> HostStmt:
        tok = self.advance()
        loc = self.loc(tok)
        match tok.text:
            case "break":
                return Break(loc=loc)
            case "continue":
                return Continue(loc=loc)
            case "sync":
                return Sync(loc=loc)
            case "parallel":
                return self.parse_parfor(tok)
            case "call":
                name = self.expect_name("after 'call'")
                if name.text not in self.procs:
                    raise self.error(f"unknown procedure '{name.text}'", name)
                proc = self.procs[name.text]
                args = self.parse_args(f"of '{name.text}'")
                if len(args) != len(proc.params):
                    raise self.error(f"'{name.text}' takes {len(proc.params)} arguments, "
                                     f"given {len(args)}", name)
                typed = tuple(self.coerce(a, p.var.scalar if not p.var.is_array else None)
                              for a, p in zip(args, proc.params, strict=True))
                return CallProc(name.text, typed, loc=loc)
            case "print" | "write":
                specs: list[tuple[str, Expr | str]] = []
                if self.accept("("):
                    while not self.at(")"):
                        key = self.advance() if self.peek().text.isidentifier() \
                            else self.expect_name("(a specifier)")
                        self.expect("=", f"after specifier '{key.text}'")
                        if self.at(STRING):
                            specs.append((key.text, str(self.advance().value)))
                        else:
                            specs.append((key.text, self.parse_expr()))
                        if not self.accept(","):
                            break
                    self.expect(")", "to close the specifiers")
                elif tok.text == "write":
                    raise self.unexpected("'(' after 'write'")
                items: list[Expr] = []
                if self.peek().kind not in (";", ")", EOF, "done", "else") and not \
                        self.at_word("end"):
                    items.append(self.parse_expr())
                    while self.accept(","):
                        items.append(self.parse_expr())
                return Output(tok.text, tuple(specs), tuple(items), loc=loc)
            case "read":
                vs = [self.lookup(self.expect_name("after 'read'"))]
                while self.accept(","):
                    vs.append(self.lookup(self.expect_name("in 'read'")))
                return Input(tuple(vs), loc=loc)
            case "allocate":
                arr = self.lookup(self.expect_name("after 'allocate'"))
                self.expect("[", f"after 'allocate {arr.name}'")
                dims: list[Bound] = []
                while True:
                    first = self.parse_expr(Scalar.I32)
                    if self.accept(":"):
                        dims.append(Bound(first, self.parse_expr(Scalar.I32)))
                    else:
                        dims.append(Bound(None, first))
                    if not self.accept(","):
                        break
                self.expect("]", "to close the bounds")
                return Allocate(arr, tuple(dims), loc=loc)
            case "deallocate":
                return Deallocate(self.lookup(self.expect_name("after 'deallocate'")), loc=loc)
            case "launch":
                return self.parse_launch()
        raise self.error(f"unknown host statement '{tok.text}'", tok)  # pragma: no cover

    def parse_parfor(self, tok: object) -> HostStmt:
        start = self.peek()
        self.expect("for", "after 'parallel'")
        self.expect("(", "after 'parallel for'")
        self.push_scope()
        pending: list[tuple[Token, Expr, Expr]] = []
        while True:
            name = self.expect_name("(a loop index)")
            self.expect("=", f"after '{name.text}'")
            a = self.parse_expr(Scalar.I32)
            self.expect("to", "(parallel loops count up)")
            b = self.parse_expr(Scalar.I32)
            pending.append((name, a, b))
            if not self.accept(","):
                break
        self.expect(")", "to close the indices of 'parallel for'")
        indices = []
        for name, a, b in pending:
            v = self.bind(name, Scalar.I32, distinct=True)
            indices.append(LoopIndex(v, a, b))
        locals_: list[Var] = []
        while self.at("local", "var"):
            locals_.append(self.parse_decl())
        self.expect("do", "before the body of 'parallel for'")
        self.result_type = None
        self.in_parfor += 1
        try:
            body = self.parse_seq()
        finally:
            self.in_parfor -= 1
        self.expect("done", f"to close the 'parallel for' at line {start.line}")
        self.pop_scope()
        return ParFor(tuple(indices), body, tuple(locals_), loc=self.loc(start))


def parse_program(text: str, filename: str = "<string>") -> Program:
    """The program of a host-program text (HP-10); a located ``ParseError`` otherwise."""
    return HostParser(text, filename).parse_program_file()


def parse_program_file(path: str | Path) -> Program:
    data = Path(path).read_bytes()
    return parse_program(decode_source(data, str(path)), str(path))


# ------------------------------------------------------------------------- printer

IND = "  "


def _type_text(t: ArrayType | Scalar) -> str:
    """A declared type as the kernel language writes it (HP-44): ``f64[,]`` for two
    zero-based run-time extents (no space), ``f64[-1:, 1:]``, ``f64[1:3]``, ``f64[10]``."""
    return format_type(t)


def _spelling(tokens: list[Token]) -> str:
    """The text of a type's tokens: a space after a comma between dimensions only."""
    out: list[str] = []
    for k, tok in enumerate(tokens):
        out.append(tok.text)
        nxt = tokens[k + 1].kind if k + 1 < len(tokens) else "]"
        if tok.kind == "," and nxt not in (",", "]"):
            out.append(" ")
        elif tok.kind == NAME and tok.text in ("shared", "local"):
            out.append(" ")
    return "".join(out)


def _written_type(d: Decl) -> str:
    """HP-44: the declared type as the source spelled it, while that still spells the
    variable's type (a pass may have declared it anew); else its canonical text."""
    if d.written is not None:
        try:
            if HostParser(d.written).parse_type() == d.var.type:
                return d.written
        except SarekError:  # pragma: no cover - the spelling came from the parser
            pass
    return _type_text(d.var.type)


def _decl_text(d: Decl) -> str:
    attrs_ = "".join(f" {a}" for a in sorted(d.attrs, key=lambda a: a.value))
    init = f" = {print_expr(d.init)}" if d.init is not None else ""
    return f"var {d.var.name} : {_written_type(d)}{attrs_}{init};"


def _local_text(v: Var) -> str:
    t = v.type
    if isinstance(t, ArrayType):
        dims = str(ArrayType(t.elem, MemSpace.GLOBAL, t.lower, t.shape))[len(str(t.elem)):]
        return f"{t.space} {v.name} : {t.elem}{dims}"
    return f"var {v.name} : {t}"


def _seq_lines(stmts: tuple[HostStmt, ...], ind: str) -> list[str]:
    lines: list[str] = []
    for k, s in enumerate(stmts):
        part = _hstmt(s, ind)
        if k < len(stmts) - 1:
            part[-1] += ";"
        lines.extend(part)
    return lines


def _body_lines(s: HostStmt, ind: str) -> list[str]:
    if isinstance(s, Block):
        return _seq_lines(s.stmts, ind) if s.stmts else [ind + "()"]
    return _hstmt(s, ind)


def _spec_text(k: str, v: Expr | str) -> str:
    return f"{k} = {format_string(v) if isinstance(v, str) else print_expr(v)}"


def _hstmt(s: HostStmt, ind: str) -> list[str]:
    match s:
        case HAssign(var=v, value=e):
            return [f"{ind}{v.name} := {print_expr(e)}"]
        case HStore(array=a, index=idx, value=e):
            return [f"{ind}{a.name}[{', '.join(print_expr(i) for i in idx)}] <- {print_expr(e)}"]
        case Block(stmts=ss):
            if not ss:
                return [f"{ind}()"]
            return [f"{ind}(", *_seq_lines(ss, ind + IND), f"{ind})"]
        case HIf(cond=c, then=t, else_=e):
            then = _hstmt(t if isinstance(t, Block) or e is None or not _open(t)
                          else Block((t,)), ind + IND)
            lines = [f"{ind}if {print_expr(c)} then", *then]
            if e is not None:
                lines += [f"{ind}else", *_hstmt(e, ind + IND)]
            return lines
        case HFor(var=v, start=a, stop=b, step=st, body=body):
            step = f" step {print_expr(st)}" if st is not None else ""
            return [f"{ind}for {v.name} = {print_expr(a)} to {print_expr(b)}{step} do",
                    *_body_lines(body, ind + IND), f"{ind}done"]
        case HWhile(cond=c, body=body):
            return [f"{ind}while {print_expr(c)} do", *_body_lines(body, ind + IND),
                    f"{ind}done"]
        case Break():
            return [f"{ind}break"]
        case Continue():
            return [f"{ind}continue"]
        case HReturn():
            return [f"{ind}return"]
        case HStop(code=c):
            return [f"{ind}stop {c}"]
        case ParFor(indices=ixs, body=body, locals=locs):
            heads = ", ".join(f"{ix.var.name} = {print_expr(ix.start)} to {print_expr(ix.stop)}"
                              for ix in ixs)
            decls = "".join(f" {_local_text(v)}" for v in locs)
            inner = [ind + IND + line for line in print_stmt(body, rename=False).split("\n")]
            return [f"{ind}parallel for ({heads}){decls} do", *inner, f"{ind}done"]
        case CallProc(proc=p, args=args):
            return [f"{ind}call {p}({', '.join(print_expr(a) for a in args)})"]
        case Output(kind=k, specifiers=specs, items=items):
            sp = f" ({', '.join(_spec_text(a, b) for a, b in specs)})" if specs or \
                k == "write" else ""
            it = (" " + ", ".join(print_expr(x) for x in items)) if items else ""
            return [f"{ind}{k}{sp}{it}"]
        case Input(vars=vs):
            return [f"{ind}read {', '.join(v.name for v in vs)}"]
        case Allocate(array=a, dims=dims):
            ds = ", ".join(print_expr(d.upper) if d.lower is None
                           else f"{print_expr(d.lower)}:{print_expr(d.upper)}" for d in dims)
            return [f"{ind}allocate {a.name}[{ds}]"]
        case Deallocate(array=a):
            return [f"{ind}deallocate {a.name}"]
        case PointerAssoc(pointer=p, target=t):
            return [f"{ind}{p.name} => {t.name}"]
        case Sync():
            return [f"{ind}sync"]
        case Launch():
            return [ind + line for line in print_launch(s).split("\n")]
    raise TypeError(f"not a host statement: {s!r}")


def _open(s: HostStmt) -> bool:
    """Whether an ``else`` after ``s`` would attach to an ``if`` inside it."""
    return isinstance(s, HIf) and (s.else_ is None or _open(s.else_))


def print_host_stmt(s: HostStmt, indent: int = 0) -> str:
    """The text of host statement ``s`` as it stands (its variables named as they are;
    :func:`print_program` first renames capturing binders, TXT-31)."""
    return "\n".join(_body_lines(s, IND * indent))


def _proc_text(p: Procedure) -> list[str]:
    params = ", ".join(f"{q.var.name} : {_type_text(q.var.type)} {q.intent}" for q in p.params)
    head = f"{IND}proc {p.name}({params}){' pure' if p.pure else ''}"
    lines = [head, *(IND * 2 + _decl_text(d) for d in p.decls), f"{IND}="]
    return [*lines, *_body_lines(p.body, IND * 2), f"{IND}end"]


def print_program(p: Program) -> str:
    """The text of a program; ``parse_program(print_program(p))`` prints the same (HP-11)
    and means the same: a binder that would capture another variable of its name is
    renamed (TXT-31, :mod:`sarek_py.ir.host.names`)."""
    p = printable_program(p)
    parts: list[str] = []
    emitted: set[str] = set()
    for h in p.helpers:
        parts.append(print_helper(h))
        emitted.add(h.name)
    for k in p.kernels:
        extra = [h for h in k.helpers if h.name not in emitted]
        for h in extra:
            parts.append(print_helper(h))
            emitted.add(h.name)
        text = print_kernel(k)
        for h in k.helpers:
            text = text.replace(print_helper(h), "", 1)
        parts.append(text.strip() + "\n")
    lines = [f"program {p.name}"]
    lines += [IND + _decl_text(d) for d in p.decls]
    for proc in p.procedures:
        lines += _proc_text(proc)
    lines += ["begin", *_body_lines(p.body, IND), "end"]
    return "\n".join([*(x.strip() + "\n" for x in parts if x.strip()), "\n".join(lines) + "\n"])


__all__ = ["HostParser", "parse_program", "parse_program_file", "print_host_stmt",
           "print_program"]
