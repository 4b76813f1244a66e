"""Checking host programs (specs/host-program.md, HP-9)."""

from __future__ import annotations

from sarek_py.host.parfor import parfor_kernel
from sarek_py.ir.atomics import first_atomic
from sarek_py.ir.diagnostics import CheckError
from sarek_py.ir.host.launch import Launch, check_launch
from sarek_py.ir.host.program import (
    Allocate,
    Block,
    Break,
    CallProc,
    Continue,
    HAssign,
    HFor,
    HIf,
    HostStmt,
    HStore,
    HWhile,
    Input,
    Output,
    ParFor,
    PointerAssoc,
    Program,
)
from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.jumps import jump_word, own_jumps
from sarek_py.ir.nodes import Call, Empty, Expr, Intrinsic, Kernel, Let, Loc, Ref, Var, var
from sarek_py.ir.typecheck import check_kernel
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import free_vars, iter_exprs, map_node
from sarek_py.runtime.cache import IdentityCache


def _check_expr(e: Expr, want: Scalar | None, what: str, loc: Loc | None) -> None:
    """HP-9: a host expression is well typed (the kernel checker on a one-statement
    kernel over its variables), calls no helper, uses no thread intrinsic, and has type
    ``want`` when given."""
    for x in iter_exprs(e):
        if isinstance(x, Call) or isinstance(x, Intrinsic) and x.name in THREAD_INTRINSICS:
            raise CheckError(f"{what}: helper calls and thread intrinsics belong in parallel "
                             "loops", x.loc or loc)
    vs = sorted(free_vars(e), key=lambda v: v.id)
    params = tuple(Var(v.name, v.id, v.type, False) for v in vs)
    pm = dict(zip(vs, params, strict=True))
    value = map_node(e, var=lambda v: pm.get(v, v))
    t = type_of(value)
    if t is Scalar.UNIT or isinstance(t, ArrayType):
        raise CheckError(f"{what} is not a scalar value", loc)
    body = Let(var("host_value_", t), value, Empty())
    check_kernel(Kernel("host", params, (), body))
    if want is not None and t != want:
        raise CheckError(f"{what} has type {t}, not {want}", loc)


def _spec_text(value: Expr | str) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Ref):
        return f"'{value.var.name}' of type {value.var.type}"
    return "an expression"


def check_program_once(program: Program) -> None:
    """:func:`check_program`, remembered per program object: a host that runs one program
    many times (a benchmark, a time loop in Python) checks it once."""
    _CHECKED.get(program)


def check_program(program: Program) -> None:
    """HP-9: raise ``CheckError`` unless every host statement and parallel loop of
    ``program`` is well formed: typed assignments, stores and conditions, ``i32`` loop
    bounds and allocation bounds, argument types of calls, loops' kernels checked by the
    kernel checker, ``break``/``continue`` only inside sequential loops."""
    procs = {p.name: p for p in program.procedures}
    held = first_atomic(program.body, program.procedures, program.helpers, into_kernels=False)
    if held is not None:  # HP-20
        raise CheckError(
            f"{held.op.value} in a host program's statements, parallel loops or helpers: "
            "atomics belong in the kernels the program launches", held.loc or program.loc)

    def go(s: HostStmt, in_loop: bool) -> None:
        match s:
            case HAssign(var=v, value=e):
                _check_expr(e, v.scalar, f"the value assigned to '{v.name}'", s.loc)
            case HStore(array=a, index=idx, value=e):
                if not isinstance(a.type, ArrayType) or len(idx) != a.type.rank:
                    raise CheckError(f"'{a.name}' takes {getattr(a.type, 'rank', 0)} "
                                     "subscripts", s.loc)
                for i in idx:
                    _check_expr(i, None, f"a subscript of '{a.name}'", s.loc)
                _check_expr(e, a.scalar, f"the value stored into '{a.name}'", s.loc)
            case Block(stmts=ss):
                for x in ss:
                    go(x, in_loop)
            case HIf(cond=c, then=then, else_=other):
                _check_expr(c, Scalar.BOOL, "the condition of 'if'", s.loc)
                go(then, in_loop)
                if other is not None:
                    go(other, in_loop)
            case HFor(start=lo, stop=hi, step=st, body=body):
                for bound in (lo, hi, st):
                    if bound is not None:
                        _check_expr(bound, Scalar.I32, "a bound of 'for'", s.loc)
                go(body, True)
            case HWhile(cond=c, body=body):  # HP-40
                _check_expr(c, Scalar.BOOL, "the condition of 'while'", s.loc)
                go(body, True)
            case Break() | Continue() if not in_loop:
                raise CheckError(f"'{type(s).__name__.lower()}' outside a loop", s.loc)
            case ParFor(indices=ixs):
                for ix in ixs:
                    _check_expr(ix.start, Scalar.I32, "a bound of 'parallel for'", s.loc)
                    _check_expr(ix.stop, Scalar.I32, "a bound of 'parallel for'", s.loc)
                jump = next(own_jumps(s.body), None)
                if jump is not None:  # HP-19: its iterations are independent
                    word = jump_word(jump)
                    raise CheckError(
                        f"'{word}' in the body of a parallel loop, outside a loop of its own: "
                        "the iterations of a parallel loop are independent, its body cannot "
                        f"{word} it (put the rest of the body under an 'if' instead)",
                        jump.loc or s.loc)
                k, _ = parfor_kernel(s, program.helpers)
                check_kernel(k)
            case CallProc(proc=name, args=args):
                proc = procs[name]
                for prm, arg in zip(proc.params, args, strict=True):
                    if prm.var.is_array:
                        if not (isinstance(arg, Ref) and arg.var.type == prm.var.type):
                            raise CheckError(f"argument for '{prm.var.name}' of '{name}' must "
                                             f"be an array of type {prm.var.type}", s.loc)
                    else:
                        _check_expr(arg, prm.var.scalar, f"argument '{prm.var.name}'", s.loc)
            case Output(items=items, specifiers=specs):
                for item in items:
                    _check_expr(item, None, "an output item", s.loc)
                for key, value in specs:
                    # HP-7: iostat names an integer scalar variable, which it sets to 0
                    if key == "iostat" and not (
                            isinstance(value, Ref) and value.var.mutable
                            and isinstance(value.var.type, Scalar) and value.var.type.is_int):
                        raise CheckError("iostat needs an integer scalar variable, not "
                                         f"{_spec_text(value)}",
                                         getattr(value, "loc", None) or s.loc)
            case Input(vars=vs):  # HP-45: read takes scalars
                for v in vs:
                    if v.is_array:
                        raise CheckError(f"read takes scalar variables; '{v.name}' is an "
                                         "array (read a scalar and store it, element by "
                                         "element)", s.loc)
            case Allocate(array=a, dims=dims):
                if not isinstance(a.type, ArrayType) or len(dims) != a.type.rank:
                    raise CheckError(f"allocate of '{a.name}' needs one bound per dimension",
                                     s.loc)
                for d in dims:
                    for bound in (d.lower, d.upper):
                        if bound is not None:
                            _check_expr(bound, Scalar.I32, "an allocation bound", s.loc)
            case PointerAssoc(pointer=ptr, target=tgt):
                if ptr.type != tgt.type:
                    raise CheckError(f"'{ptr.name}' and '{tgt.name}' have different types",
                                     s.loc)
            case Launch():
                check_launch(s)

    for d in program.decls:
        if d.init is not None:
            _check_expr(d.init, d.var.scalar, f"the initial value of '{d.var.name}'", d.loc)
    go(program.body, False)
    for proc in program.procedures:
        go(proc.body, False)


#: programs that passed :func:`check_program` (a failing one raises and is not kept)
_CHECKED: IdentityCache[Program, None] = IdentityCache(check_program, limit=64)
