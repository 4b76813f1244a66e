"""The kernel of a parallel loop: one thread per iteration (specs/host-program.md, HP-14;
specs/offload.md, OFF-1, OFF-2).

:func:`parfor_kernel` is shared by the host interpreter (which runs the kernel on the
reference interpreter) and the offload (which launches it).
"""

from __future__ import annotations

from collections.abc import Iterable

from sarek_py.ir.host.program import HostError, ParFor
from sarek_py.ir.nodes import (
    Assign,
    Binary,
    BinaryOp,
    Expr,
    HelperFunc,
    Intrinsic,
    Kernel,
    Let,
    Ref,
    Stmt,
    Var,
    iter_stmts,
    var,
)
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import free_vars, helper_closure, map_node


def parfor_kernel(loop: ParFor, helpers: Iterable[HelperFunc], name: str = "parfor"
                  ) -> tuple[Kernel, tuple[Var, ...]]:
    """The kernel that runs one iteration of ``loop`` per thread, and the host variables
    its parameters take (in order), followed by ``2·rank`` i32 parameters: each index's
    start and extent (HP-14). The last index varies fastest."""
    body_vars = free_vars(loop.body) - set(loop.vars) - set(loop.locals)
    for ix in loop.indices:
        body_vars -= {ix.var}
    host = tuple(sorted(body_vars, key=lambda v: (not v.is_array, v.name, v.id)))
    assigned = {s.var for s in iter_stmts(loop.body) if isinstance(s, Assign)}
    for v in host:
        if not v.is_array and v in assigned:
            raise HostError(f"parallel loop assigns host scalar '{v.name}' (a reduction is "
                            "not a parallel loop)", loop.loc)
    params = tuple(Var(v.name, v.id, v.type, False) for v in host)
    taken = {v.name for v in host}
    los: list[Var] = []
    ns: list[Var] = []
    for k in range(len(loop.indices)):
        lo_name, n_name = f"lo_{k}", f"n_{k}"
        while lo_name in taken or n_name in taken:
            lo_name, n_name = "_" + lo_name, "_" + n_name
        los.append(var(lo_name, Scalar.I32))
        ns.append(var(n_name, Scalar.I32))
    tid = var("t_", Scalar.I32)
    lets: list[tuple[Var, Expr]] = []
    rest: Expr = Ref(tid)
    for k in reversed(range(len(loop.indices))):
        here = rest if k == 0 else Binary(BinaryOp.MOD, rest, Ref(ns[k]))
        lets.append((loop.indices[k].var, Binary(BinaryOp.ADD, Ref(los[k]), here)))
        if k > 0:
            rest = Binary(BinaryOp.DIV, rest, Ref(ns[k]))
    pmap = {v: p for v, p in zip(host, params, strict=True)}
    body: Stmt = map_node(loop.body, var=lambda v: pmap.get(v, v))
    for v, e in lets:
        body = Let(v, e, body)
    body = Let(tid, Intrinsic("global_thread_id"), body)
    hs = helper_closure((loop.body,), tuple(helpers))
    kern = Kernel(name, (*params, *los, *ns), loop.locals, body, hs, loc=loop.loc)
    return kern, host


