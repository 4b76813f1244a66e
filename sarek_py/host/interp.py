"""The host interpreter: runs a :class:`~sarek_py.ir.host.program.Program` on numpy arrays
(specs/host-program.md, HP-8, HP-9, HP-13..HP-15).

Host statements run one after another. A parallel loop runs as a kernel on the reference
interpreter (:func:`sarek_py.ir.interp.run_kernel`, one thread per iteration, races
checked), so its iterations are independent exactly as the kernel semantics say; launches
and syncs run on a backend (default: the interpreter backend) with device-resident arrays
(:class:`Residency`). Scalars are numpy scalars of their type; arrays are numpy arrays
(``None`` while an allocatable array is not allocated).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import numpy as np

from sarek_py.fusion.refusal import FusionRefused
from sarek_py.host.check import check_program, check_program_once
from sarek_py.host.compiled_expr import Fn, HostExpr, array_of, element_index, host_expr
from sarek_py.host.endless import host_never_ends
from sarek_py.host.expr_memo import memo_key
from sarek_py.host.frame import Frame
from sarek_py.host.input_values import InputValue, convert_value
from sarek_py.host.parfor import parfor_kernel
from sarek_py.host.residency import Residency, StopRequest
from sarek_py.ir import interp_ops
from sarek_py.ir.alloc import check_bytes
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import Launch, Sync
from sarek_py.ir.host.program import (
    Allocate,
    Block,
    Break,
    CallProc,
    Continue,
    Deallocate,
    Decl,
    HAssign,
    HFor,
    HIf,
    HostError,
    HostStmt,
    HReturn,
    HStop,
    HStore,
    HWhile,
    Input,
    Intent,
    Output,
    ParFor,
    PointerAssoc,
    Procedure,
    Program,
)
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.interp_ops import LaneFault
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Kernel,
    Length,
    Loc,
    Read,
    Ref,
    Unary,
    Var,
)
from sarek_py.ir.requires_check import RangeRefused
from sarek_py.ir.types import ArrayType
from sarek_py.runtime.base import Backend
from sarek_py.runtime.fused_errors import in_user_terms
from sarek_py.runtime.limits import MAX_THREADS


@attrs.frozen(eq=False)
class HostResult:
    """What a run leaves: the program's variables by name, the output lines, and the stop
    code (``None`` when the program ran to its end or returned)."""

    values: dict[str, Any]
    output: list[str]
    stop_code: int | None = None
    #: what ran it (:class:`sarek_py.host.backend.Executor`), when known
    executor: Any = None

    def array(self, name: str) -> np.ndarray[Any, Any]:
        v = self.values[name]
        assert isinstance(v, np.ndarray)
        return v


#: a variable not in a frame's dict
_ABSENT = object()


class _Leave(Exception):
    """Break, continue, return or stop unwinding the host statements."""

    def __init__(self, kind: str, code: int = 0) -> None:
        self.kind = kind
        self.code = code


# -------------------------------------------------------------------------- frames


def _zero(v: Var) -> Any:
    t = v.type
    if isinstance(t, ArrayType):
        if t.is_constant_shape:
            shape = tuple(n for n in t.shape if n is not None)
            check_bytes(math.prod(shape) * t.elem.dtype.itemsize,
                        f"array '{v.name}' ({'x'.join(map(str, shape))} elements)")
            return np.zeros(shape, t.elem.dtype)
        return None
    return t.dtype.type(0)


# ------------------------------------------------------------------------- interpreter


class HostInterp:
    """Runs one program (HP-13). ``inputs`` feed ``read``; ``echo`` prints output lines."""

    def __init__(self, program: Program, *, inputs: Iterable[Any] = (),
                 backend: Backend | None = None, check_races: bool = True,
                 echo: bool = False, device: Backend | None = None) -> None:
        self.program = program
        self.inputs = iter(inputs)
        #: the input file's name (HP-45), and how many values the program has read
        self.input_source: str | None = getattr(inputs, "source", None)
        self.inputs_read = 0
        self.output: list[str] = []
        self.echo = echo
        self.check_races = check_races
        backend = device or backend
        if backend is None:
            from sarek_py.runtime.interp import InterpBackend

            backend = InterpBackend()
        self.backend = backend
        self.kernels: dict[int, tuple[Kernel, tuple[Var, ...]]] = {}
        self.procs = {p.name: p for p in program.procedures}
        #: HP-56's verdict on each ``while`` loop run so far (by ``id``: the program outlives us)
        self.endless: dict[int, str | None] = {}
        self.globals = Frame({})
        self.device = Residency(backend, check_races, program)
        #: per expression (by id): its closure and memo (HP-51, HP-53)
        self._exprs: dict[int, HostExpr] = {}
        #: the statements (by id) that name no array for :meth:`Residency.before` (HP-54)
        self._bare: dict[int, HostStmt] = {}
        #: whether numpy's floating-point warnings are off already (inside :meth:`run`)
        self._quiet = False

    # ----------------------------------------------------------------- entry
    def run(self, preset: Mapping[str, Any] | None = None) -> HostResult:
        """Run the program; ``preset`` gives initial values to declared variables by name
        (an array value is copied)."""
        try:
            with np.errstate(all="ignore"):  # host arithmetic wraps, as in kernels
                self._quiet = True
                try:
                    return self._run(preset)
                finally:
                    self._quiet = False
        except SarekError as err:  # a fused kernel's error in the user's names (FE-90)
            in_user_terms(err, self.program.kernels)
            raise

    def _run(self, preset: Mapping[str, Any] | None) -> HostResult:
        check_program_once(self.program)
        frame = self.globals
        self._declare(self.program.decls, frame)
        for name, value in (preset or {}).items():
            d = self.program.decl(name)
            frame.set_var(d.var, self._convert(d.var, value))
        stop: int | None = None
        try:
            try:
                self.stmt(self.program.body, frame)
            finally:
                if self.device.stops:
                    self.stmt(Sync(), frame)
        except _Leave as leave:
            if leave.kind == "stop":
                stop = leave.code
            elif leave.kind != "return":
                raise HostError(f"'{leave.kind}' outside a loop") from None
        finally:
            self.device.finish()
        values = {v.name: x for v, x in frame.own.items()}
        return HostResult(values, self.output, stop)

    def _convert(self, v: Var, value: Any) -> Any:
        if isinstance(v.type, ArrayType):
            arr = np.array(value, dtype=v.type.elem.dtype, copy=True)
            if arr.ndim != v.type.rank:
                raise HostError(f"preset of '{v.name}' has rank {arr.ndim}, not {v.type.rank}")
            return arr
        return v.type.dtype.type(value)

    def _declare(self, decls: Iterable[Decl], frame: Frame) -> None:
        for d in decls:
            frame.own[d.var] = _zero(d.var)
            if d.init is not None:
                frame.own[d.var] = self.eval(d.init, frame)
            else:
                self.device.fresh_zero(frame.own[d.var])

    # ------------------------------------------------------------- expressions
    def eval(self, e: Expr, frame: Frame) -> Any:
        """The value of ``e`` in ``frame`` (a numpy scalar, or an array for a bare array
        reference), computed by its compiled closure (HP-51). Evaluation is pure, so an
        integer expression large enough to be worth it (:class:`HostExpr`, HP-53) whose
        inputs are those of its previous evaluation gives the previous value without
        running it again; a launch in a host loop evaluates the same thread counts,
        extents and write-discard conditions at every iteration (LCH-2)."""
        if type(e) is Ref:
            assert isinstance(e, Ref)
            return frame.get_var(e.var)
        c = self._exprs.get(id(e))
        if c is None or c.expr is not e:
            c = host_expr(e)
            self._exprs[id(e)] = c
        inputs = c.inputs
        if inputs is not None:
            key = memo_key(inputs, frame)
            last = c.last
            if last is not None and key == last[0]:
                return last[1]
        if self._quiet:  # inside run(), which ignores numpy's warnings once
            try:
                value = c.fn(frame)
            except LaneFault as exc:
                raise HostError(exc.message, e.loc) from None
        else:
            value = self._run_checked(c.fn, e, frame)
        if inputs is not None:
            c.last = (key, value)
        return value

    def _run_checked(self, fn: Fn, e: Expr, frame: Frame) -> Any:
        try:
            if self._quiet:  # inside run(), which ignores numpy's warnings once
                return fn(frame)
            with np.errstate(all="ignore"):
                return fn(frame)
        except LaneFault as exc:
            raise HostError(exc.message, e.loc) from None

    def _eval_checked(self, e: Expr, frame: Frame) -> Any:
        """The tree walk :meth:`_eval`, located as :meth:`eval` locates its errors: the
        reference the compiled closures are checked against (HP-51)."""
        try:
            with np.errstate(all="ignore"):
                return self._eval(e, frame)
        except LaneFault as exc:
            raise HostError(exc.message, e.loc) from None

    def _eval(self, e: Expr, f: Frame) -> Any:
        match e:
            case Const(value=v, type=t):
                return t.dtype.type(v)
            case Ref(var=v):
                return f.get_var(v)
            case Length(array=a, dim=d):
                return np.int32(self._array(a, f, e.loc).shape[d])
            case Read(array=a, index=idx):
                arr = self._array(a, f, e.loc)
                return arr[self._index(a, arr, [self._eval(i, f) for i in idx], e.loc)]
            case Unary(op=op, arg=x):
                return _scalar(interp_ops.unary(op, self._eval(x, f)))
            case Binary(op=BinaryOp.AND, lhs=x, rhs=y):
                return np.bool_(bool(self._eval(x, f)) and bool(self._eval(y, f)))
            case Binary(op=BinaryOp.OR, lhs=x, rhs=y):
                return np.bool_(bool(self._eval(x, f)) or bool(self._eval(y, f)))
            case Binary(op=op, lhs=x, rhs=y):
                return _scalar(interp_ops.binary(op, self._eval(x, f), self._eval(y, f), None))
            case Cast(to=t, arg=x):
                return _scalar(interp_ops.cast(self._eval(x, f), t, None))
            case Cond(cond=c, if_true=x, if_false=y):
                return self._eval(x, f) if bool(self._eval(c, f)) else self._eval(y, f)
            case Intrinsic(name=n, args=args) if args:
                return _scalar(interp_ops.math(n, [self._eval(a, f) for a in args]))
        raise HostError(f"the host cannot evaluate {type(e).__name__} (helper calls and "
                        "thread intrinsics belong in parallel loops)", e.loc)

    def _array(self, a: Var, f: Frame, loc: Loc | None) -> np.ndarray[Any, Any]:
        return array_of(a, f, loc)

    def _index(self, a: Var, arr: np.ndarray[Any, Any], idx: list[Any],
               loc: Loc | None) -> tuple[int, ...]:
        return element_index(a, arr, idx, loc)

    # --------------------------------------------------------------- statements
    def stmt(self, s: HostStmt, f: Frame) -> None:
        """Run ``s``: by the statement's kind, one look-up in :data:`_STATEMENTS` (HP-54);
        every statement but a launch and a sync first brings back from the device the
        arrays it may name (:meth:`Residency.before`)."""
        run = _STATEMENTS.get(type(s))
        if run is None:
            self.device.before(s, f)
            raise HostError(f"not a host statement: {type(s).__name__}")
        run(self, s, f)

    def _before(self, s: HostStmt, f: Frame) -> None:
        """Bring back the arrays ``s`` may name (:meth:`Residency.before`); a statement that
        names none is remembered, and not asked again in this run (HP-54)."""
        self.device.before(s, f)
        if not self.device.names_arrays(s):
            self._bare[id(s)] = s

    def _launch(self, s: Launch | Sync, f: Frame) -> None:
        try:
            if isinstance(s, Launch):
                self.device.launch(self.eval, s, f)
            else:
                self.device.sync(f)
        except StopRequest as stop:
            raise _Leave("stop", stop.code) from None
        except FusionRefused as refusal:  # a fused kernel's launch conditions (LEG-14)
            refusal.loc = refusal.loc or s.loc
            raise
        except RangeRefused as refusal:  # conditions over its arguments: here (LCH-25)
            refusal.loc = s.loc or refusal.loc
            raise

    def _assign(self, s: HAssign, f: Frame) -> None:
        if self._bare.get(id(s)) is not s:
            self._before(s, f)
        f.set_var(s.var, self.eval(s.value, f))

    def _store(self, s: HStore, f: Frame) -> None:
        if self._bare.get(id(s)) is not s:
            self._before(s, f)
        a = s.array
        arr = self._array(a, f, s.loc)
        arr[self._index(a, arr, [self.eval(i, f) for i in s.index], s.loc)] = \
            self.eval(s.value, f)

    def _block(self, s: Block, f: Frame) -> None:
        if self._bare.get(id(s)) is not s:
            self._before(s, f)
        for x in s.stmts:
            run = _STATEMENTS.get(type(x))
            if run is None:
                self.stmt(x, f)
            else:
                run(self, x, f)

    def _if(self, s: HIf, f: Frame) -> None:
        if self._bare.get(id(s)) is not s:
            self._before(s, f)
        branch: HostStmt | None = s.then if bool(self.eval(s.cond, f)) else s.else_
        if branch is None:  # (a then-branch is always a statement)
            return
        run = _STATEMENTS.get(type(branch))
        if run is None:
            self.stmt(branch, f)
        else:
            run(self, branch, f)

    def _leave(self, s: HostStmt, f: Frame) -> None:
        if self._bare.get(id(s)) is not s:
            self._before(s, f)
        if isinstance(s, Break):
            raise _Leave("break")
        if isinstance(s, Continue):
            raise _Leave("continue")
        if isinstance(s, HReturn):
            raise _Leave("return")
        assert isinstance(s, HStop)
        raise _Leave("stop", s.code)

    def _input(self, s: Input, f: Frame) -> None:
        if self._bare.get(id(s)) is not s:
            self._before(s, f)
        for v in s.vars:
            try:
                x = next(self.inputs)
            except StopIteration:
                src = f" ({self.input_source} holds {self.inputs_read} value" \
                    f"{'' if self.inputs_read == 1 else 's'})" \
                    if self.input_source else ""
                raise HostError(f"read past the end of the input, for '{v.name}'{src}",
                                s.loc) from None
            self.inputs_read += 1
            if isinstance(x, InputValue) and not v.is_array:  # HP-45
                f.set_var(v, convert_value(v, str(x), x.where, s.loc))
            else:
                f.set_var(v, self._convert(v, x))

    def _deallocate(self, s: Deallocate, f: Frame) -> None:
        if self._bare.get(id(s)) is not s:
            self._before(s, f)
        a = s.array
        old = f.get_var(a)
        if old is None:
            raise HostError(f"array '{a.name}' is not allocated", s.loc)
        self.device.forget(old)
        f.set_var(a, None)

    def _associate(self, s: PointerAssoc, f: Frame) -> None:
        if self._bare.get(id(s)) is not s:
            self._before(s, f)
        f.set_var(s.pointer, f.get_var(s.target))

    def _for(self, s: HFor, f: Frame) -> None:
        if self._bare.get(id(s)) is not s:
            self._before(s, f)
        start = int(self.eval(s.start, f))
        stop = int(self.eval(s.stop, f))
        step = 1 if s.step is None else int(self.eval(s.step, f))
        if step == 0:
            raise HostError("a loop step of zero", s.loc)
        # the loop variable lives in the frame running the loop while the loop runs (a
        # variable of its own, seen by its body only): a body's look-ups of the program's
        # variables then search one dict, not one more per enclosing loop
        own = f.own
        var = s.var
        outer = own.get(var, _ABSENT)  # (only a recursive run of this loop could set it)
        i = start
        body = s.body
        run = _STATEMENTS.get(type(body)) or HostInterp.stmt
        int32 = np.int32
        try:
            while (i <= stop) if step > 0 else (i >= stop):
                own[var] = int32(i)
                try:
                    run(self, body, f)
                except _Leave as leave:
                    if leave.kind == "break":
                        break
                    if leave.kind != "continue":
                        raise
                i += step
        finally:
            if outer is _ABSENT:
                own.pop(var, None)
            else:
                own[var] = outer

    def _while(self, s: HWhile, f: Frame) -> None:
        """HP-40: the condition before each iteration (its arrays brought back from the
        device first, as for an ``if``), ``break``/``continue`` as in a ``for`` (HP-3)."""
        first = True
        while True:
            if not first:
                self.device.before(s, f)
            if not bool(self.eval(s.cond, f)):
                return
            try:
                self.stmt(s.body, f)
            except _Leave as leave:
                if leave.kind == "break":
                    return
                if leave.kind != "continue":
                    raise
            if first:  # HP-56: a loop that provably never ends is an error, not a hang
                first = False
                if id(s) not in self.endless:
                    self.endless[id(s)] = host_never_ends(s, self.procs)
                why = self.endless[id(s)]
                if why is not None:
                    raise HostError(why, s.loc)

    def _parfor(self, s: ParFor, f: Frame) -> None:
        key = id(s)
        if key not in self.kernels:
            self.kernels[key] = parfor_kernel(s, self.program.helpers)
        k, host = self.kernels[key]
        starts = [int(self.eval(ix.start, f)) for ix in s.indices]
        extents = [int(self.eval(ix.stop, f)) - a + 1 for ix, a in
                   zip(s.indices, starts, strict=True)]
        if min(extents) <= 0:
            return
        total = math.prod(extents)
        if total > MAX_THREADS:  # HP-55: the reference runs what a launch can number
            raise HostError(f"parallel loop of {total} iterations: more than {MAX_THREADS} "
                            "(2^31 - 1), the most threads a launch can number "
                            "(global_thread_id is an i32)", s.loc)
        args: dict[str, Any] = {}
        for p, v in zip(k.params, host, strict=False):
            val = f.get_var(v)
            if p.is_array and not isinstance(val, np.ndarray):
                raise HostError(f"array '{v.name}' is not allocated", s.loc)
            args[p.name] = val
        rank = len(s.indices)
        for p, x in zip(k.params[len(host):], [*starts, *extents], strict=True):
            args[p.name] = np.int32(x)
        assert len(k.params) == len(host) + 2 * rank
        result = run_kernel(k, args, total, check_races=self.check_races)
        if result.stopped:
            t = int(np.flatnonzero(result.stop_codes)[0])
            raise _Leave("stop", int(result.stop_codes[t]))

    def _call(self, s: CallProc, f: Frame) -> None:
        proc: Procedure = self.procs[s.proc]
        own: dict[Var, Any] = {}
        back: list[tuple[Var, Var]] = []
        for p, a in zip(proc.params, s.args, strict=True):
            if p.var.is_array:
                if not (isinstance(a, Ref) and a.var.is_array):
                    raise HostError(f"argument for '{p.var.name}' must be an array", s.loc)
                own[p.var] = f.get_var(a.var)
            elif p.intent in (Intent.IN, Intent.VALUE):
                own[p.var] = p.var.scalar.dtype.type(self.eval(a, f))
            else:
                if not isinstance(a, Ref):
                    raise HostError(f"argument for {p.intent} dummy '{p.var.name}' must be "
                                    "a variable", s.loc)
                own[p.var] = f.get_var(a.var) if p.intent is Intent.INOUT else _zero(p.var)
                back.append((p.var, a.var))
        frame = Frame(own, self.globals)
        self._declare(proc.decls, frame)
        try:
            self.stmt(proc.body, frame)
        except _Leave as leave:
            if leave.kind != "return":
                raise
        for dummy, actual in back:
            f.set_var(actual, own[dummy])

    def _output(self, s: Output, f: Frame) -> None:
        for key, value in s.specifiers:
            if key in ("iostat",) and isinstance(value, Ref):
                f.set_var(value.var, value.var.scalar.dtype.type(0))
        line = " ".join(_format(self.eval(x, f)) for x in s.items)
        self.output.append(line)
        if self.echo:
            print(line)

    def _allocate(self, s: Allocate, f: Frame) -> None:
        a = s.array
        assert isinstance(a.type, ArrayType)
        if isinstance(f.get_var(a), np.ndarray):
            raise HostError(f"array '{a.name}' is already allocated", s.loc)
        shape = []
        for d, (b, lo) in enumerate(zip(s.dims, a.type.lower, strict=True)):
            if b.lower is None:
                n = int(self.eval(b.upper, f))
            else:
                lo_given = int(self.eval(b.lower, f))
                if lo_given != lo:
                    raise HostError(f"'{a.name}' is declared with lower bound {lo} in "
                                    f"dimension {d}, allocated from {lo_given}", s.loc)
                n = int(self.eval(b.upper, f)) - lo + 1
            shape.append(max(n, 0))
        check_bytes(math.prod(shape) * a.type.elem.dtype.itemsize,
                    f"allocating '{a.name}' ({'x'.join(map(str, shape))} elements)", s.loc)
        arr = self.device.backend.host_zeros(tuple(shape), a.type.elem.dtype)
        self.device.fresh_zero(arr)
        f.set_var(a, arr)


def _after_before(method: Callable[[HostInterp, Any, Frame], None]) \
        -> Callable[[HostInterp, Any, Frame], None]:
    """``method`` run after the statement's arrays are brought back (Residency.before)."""
    def run(interp: HostInterp, s: Any, f: Frame) -> None:
        if interp._bare.get(id(s)) is not s:
            interp._before(s, f)
        method(interp, s, f)
    return run


#: how each kind of host statement runs (HP-54): exactly these classes (the statement
#: classes have no subclasses; another class is "not a host statement")
_STATEMENTS: dict[type, Callable[[HostInterp, Any, Frame], None]] = {
    Launch: HostInterp._launch,
    Sync: HostInterp._launch,
    HAssign: HostInterp._assign,
    HStore: HostInterp._store,
    Block: HostInterp._block,
    HIf: HostInterp._if,
    HFor: HostInterp._for,
    HWhile: _after_before(HostInterp._while),
    Break: HostInterp._leave,
    Continue: HostInterp._leave,
    HReturn: HostInterp._leave,
    HStop: HostInterp._leave,
    ParFor: _after_before(HostInterp._parfor),
    CallProc: _after_before(HostInterp._call),
    Output: _after_before(HostInterp._output),
    Input: HostInterp._input,
    Allocate: _after_before(HostInterp._allocate),
    Deallocate: HostInterp._deallocate,
    PointerAssoc: HostInterp._associate,
}


def _scalar(v: Any) -> Any:
    return v[()] if isinstance(v, np.ndarray) else v


def _format(x: Any) -> str:
    if isinstance(x, (np.floating, float)):
        return repr(float(x)) if isinstance(x, np.float64) else str(x)
    if isinstance(x, np.ndarray):
        return " ".join(_format(y) for y in x.ravel())
    return str(x.item() if isinstance(x, np.generic) else x)


def run_program(program: Program, preset: Mapping[str, Any] | None = None, *,
                inputs: Iterable[Any] = (), backend: Backend | None = None,
                check_races: bool = True, echo: bool = False,
                device: Backend | None = None) -> HostResult:
    """Run ``program`` on the host (HP-13); parallel loops on the reference interpreter.
    With ``device``, launches run on that backend with device-resident arrays (OFF-3)."""
    return HostInterp(program, inputs=inputs, backend=backend, check_races=check_races,
                      echo=echo, device=device).run(preset)


__all__ = ["HostError", "HostInterp", "HostResult", "check_program", "parfor_kernel",
           "run_program"]
