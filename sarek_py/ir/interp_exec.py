"""The vectorised evaluator of the reference interpreter (specs/interpreter.md).

Every thread of the launch is a *lane*; all lanes run each statement together (lock-step).
A value is a numpy array over the lanes or a uniform numpy scalar; divergent control flow
runs under a boolean *mask* of active lanes (``None`` = every lane). ``exec`` returns the
lanes that *fall through* a statement -- those that did not return or stop inside it --
so loops with a different trip count per lane, early returns and stops are masks too.
No Python loop ever runs over the threads.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.ir import interp_ops as ops
from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.interp_endless import never_ends
from sarek_py.ir.interp_geometry import Geometry
from sarek_py.ir.interp_memory import ArrayStore, Memory
from sarek_py.ir.interp_ops import LaneFault, Mask, Val
from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Assign,
    Atomic,
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
    Pragma,
    Read,
    Ref,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Unary,
    Var,
    While,
)
from sarek_py.ir.types import ArrayType, Scalar

_MAX_DEPTH = 64

#: loop iterations one launch may run, all loops and lanes' steps together (INT-22)
LOOP_BUDGET = 2**20


_ZEROS: list[NDArray[np.int32]] = [np.zeros(0, dtype=np.int32)]


def _no_stops(n: int) -> NDArray[np.int32]:
    """``n`` zero stop codes: a read-only view of one cached zero vector."""
    if _ZEROS[0].size < n:
        z = np.zeros(n, dtype=np.int32)
        z.flags.writeable = False
        _ZEROS[0] = z
    return _ZEROS[0][:n]


_IN_PLACE = {
    BinaryOp.ADD: np.add,
    BinaryOp.SUB: np.subtract,
    BinaryOp.MUL: np.multiply,
    BinaryOp.BAND: np.bitwise_and,
    BinaryOp.BOR: np.bitwise_or,
    BinaryOp.BXOR: np.bitwise_xor,
}


def _temporary(v: Any) -> bool:
    """An array that owns its (writeable) memory: a candidate to receive a result."""
    return isinstance(v, np.ndarray) and v.base is None and v.flags.writeable


def _own(v: Any) -> Any:
    """``v`` made safe to keep: a view of an array's memory (an identity read) is copied,
    so that a later store cannot change a variable's value."""
    if isinstance(v, np.ndarray) and v.base is not None and v.flags.writeable:
        return v.copy()
    return v


class Frame:
    """The variables of the kernel body or of one helper call."""

    def __init__(
        self,
        scalars: dict[Var, Val | None],
        arrays: dict[Var, ArrayStore],
        helper: HelperFunc | None = None,
        result: Val | None = None,
    ):
        self.scalars = scalars
        self.arrays = arrays
        self.helper = helper
        self.result = result


class LoopExits:
    """The lanes that left the body of one running loop by ``break`` or ``continue``
    (INT-25): set aside until the loop's current iteration ends."""

    __slots__ = ("broke", "cont")

    def __init__(self, none: Mask):
        self.broke: Mask = none
        self.cont: Mask = none


class Machine:
    """Runs one kernel over all lanes of a launch."""

    def __init__(
        self,
        kernel: Kernel,
        geo: Geometry,
        mem: Memory,
        frame: Frame,
        shared: list[ArrayStore],
        loop_budget: int = LOOP_BUDGET,
    ):
        self.kernel = kernel
        self.loop_budget = loop_budget
        self.helpers = {h.name: h for h in kernel.helpers}
        self.geo = geo
        self.mem = mem
        self.shared = shared
        self.frame = frame
        self.nlanes = geo.threads
        self._empty_mask: NDArray[np.bool_] | None = None
        self.stop_codes: NDArray[np.int32] | None = None
        self.stopped: NDArray[np.bool_] | None = None
        #: a helper stopped some lanes: masks in flight must drop them (see :meth:`live`)
        self.helper_stopped = False
        self.depth = 0
        #: the loops running in the current function, innermost last (INT-25)
        self.loops: list[LoopExits] = []
        #: INT-29's verdict on each ``while`` run so far (by ``id``; the kernel outlives us)
        self.endless_why: dict[int, str | None] = {}

    def run(self) -> NDArray[np.int32]:
        """Run the kernel body in every lane; the stop code of each lane."""
        if self.nlanes:
            self.exec(self.kernel.body, None)
        if self.stop_codes is None:
            return _no_stops(self.nlanes)
        return self.stop_codes

    @property
    def empty(self) -> NDArray[np.bool_]:
        """The mask of no lane (shared, never written)."""
        if self._empty_mask is None:
            self._empty_mask = np.zeros(self.nlanes, dtype=np.bool_)
            self._empty_mask.flags.writeable = False
        return self._empty_mask

    # ------------------------------------------------------------------ masks

    def alive(self, m: Mask) -> bool:
        return m is None or bool(m.any())

    def narrow(self, m: Mask, c: NDArray[np.bool_]) -> Mask:
        """The active lanes of ``m`` where ``c`` holds (``None`` when that is every lane)."""
        r = c if m is None else m & c
        return None if np.count_nonzero(r) == self.nlanes else r

    def union(self, a: Mask, b: Mask) -> Mask:
        if a is None or b is None:
            return None
        r = a | b
        return None if np.count_nonzero(r) == self.nlanes else r

    def live(self, m: Mask) -> Mask:
        """``m`` without the lanes a helper has stopped since the mask was made."""
        if not self.helper_stopped or self.stopped is None:
            return m
        return self.narrow(m, ~self.stopped)

    def error(self, message: str, loc: Loc | None, lane: int | None = None) -> InterpError:
        who = f"kernel {self.kernel.name}" + ("" if lane is None else f", thread {lane}")
        if self.frame.helper is not None:
            who += f" (in helper {self.frame.helper.name})"
        return InterpError(f"{who}: {message}", loc)

    # ------------------------------------------------------------------ expressions

    def ev(self, e: Expr, m: Mask) -> Any:
        """The value of ``e`` in every lane (meaningful in the active lanes of ``m``)."""
        try:
            return _EV[type(e)](self, e, m)
        except LaneFault as f:
            raise self.error(f.message, e.loc, f.lane) from None

    def _const(self, e: Const, m: Mask) -> Val | None:
        if e.type is Scalar.UNIT:
            return None
        try:
            v: Val = e.type.dtype.type(e.value)
        except OverflowError:
            raise self.error(f"constant {e.value} does not fit {e.type}", e.loc) from None
        return v

    def _ref(self, e: Ref, m: Mask) -> Val | None:
        try:
            return self.frame.scalars[e.var]
        except KeyError:
            raise self.error(f"unbound variable '{e.var.name}'", e.loc) from None

    def _unary(self, e: Unary, m: Mask) -> Val:
        return ops.unary(e.op, self.ev(e.arg, m))

    def _binary(self, e: Binary, m: Mask) -> Val:
        a = self.ev(e.lhs, m)
        if e.op.is_logical:
            return self._logical(e, a, m)
        b = self.ev(e.rhs, m)
        if e.op.is_compare and (a is self.geo.lane_ids or b is self.geo.lane_ids):
            u = self._uniform_compare(e.op, a, b)
            if u is not None:
                return u
        f = _IN_PLACE.get(e.op)
        if f is not None and a.dtype == b.dtype:
            # reuse a temporary operand nobody else holds (numpy's own elision trick):
            # ``sys.getrefcount`` counts this frame's variable and its own argument
            if _temporary(a) and sys.getrefcount(a) <= 2:
                out: Val = f(a, b, out=a)
                return out
            if _temporary(b) and sys.getrefcount(b) <= 2:
                out = f(a, b, out=b)
                return out
        return ops.binary(e.op, a, b, self.live(m))

    def _uniform_compare(self, op: BinaryOp, a: Any, b: Any) -> Val | None:
        """A comparison of the lane ids with a uniform value that has the same outcome in
        every lane (``i < n`` when ``n >= threads``), as a uniform bool; else ``None``."""
        ids = self.geo.lane_ids
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return None
        first, last = np.int32(0), np.int32(self.nlanes - 1)
        if op in (BinaryOp.EQ, BinaryOp.NE):
            other = b if a is ids else a
            if 0 <= int(other) < self.nlanes:
                return None
        lo = ops.binary(op, first, b, None) if a is ids else ops.binary(op, a, first, None)
        hi = ops.binary(op, last, b, None) if a is ids else ops.binary(op, a, last, None)
        return lo if bool(lo) == bool(hi) else None

    def _logical(self, e: Binary, a: Val, m: Mask) -> Val:
        """``&&``/``||``: the right operand only in the lanes it decides (INT-9)."""
        is_and = e.op is BinaryOp.AND
        if not isinstance(a, np.ndarray):
            if bool(a) != is_and:
                return a
            rhs: Val = self.ev(e.rhs, m)
            return rhs
        sub = self.narrow(m, a if is_and else ~a)
        if not self.alive(sub):
            return a
        b = self.ev(e.rhs, sub)
        out: Val = (a & b) if is_and else (a | b)
        return out

    def _cond(self, e: Cond, m: Mask) -> Val:
        """``c ? x : y``: each arm only in the lanes that choose it (INT-9)."""
        c = self.ev(e.cond, m)
        arm: Val
        if not isinstance(c, np.ndarray):
            arm = self.ev(e.if_true if bool(c) else e.if_false, m)
            return arm
        mt = self.narrow(m, c)
        mf = self.narrow(m, ~c)
        if not self.alive(mf):
            arm = self.ev(e.if_true, mt)
            return arm
        if not self.alive(mt):
            arm = self.ev(e.if_false, mf)
            return arm
        out: Val = np.where(c, self.ev(e.if_true, mt), self.ev(e.if_false, mf))
        return out

    def _read(self, e: Read, m: Mask) -> Val:
        st = self.array(e.array, e.loc)
        idx = [self.ev(i, m) for i in e.index]
        m = self.live(m)
        addr = self.mem.address(st, idx, m, "read")
        return self.mem.read(st, addr, m)

    def _atomic(self, e: Atomic, m: Mask) -> Val:
        """An atomic: indices, then the expected value, then the operand, then the update
        of every active lane in thread order (INT-27)."""
        st = self.array(e.array, e.loc)
        idx = [self.ev(i, m) for i in e.index]
        cmp = None if e.compare is None else _own(self.ev(e.compare, m))
        val = _own(self.ev(e.value, m))
        m = self.live(m)
        addr = self.mem.address(st, idx, m, e.op.value)
        return self.mem.atomic(st, addr, e.op, val, cmp, m)

    def _cast(self, e: Cast, m: Mask) -> Val:
        return ops.cast(self.ev(e.arg, m), e.to, self.live(m))

    def _intrinsic(self, e: Intrinsic, m: Mask) -> Val:
        if e.name in THREAD_INTRINSICS:
            return self.geo.intrinsic(e.name)
        try:
            return ops.math(e.name, [self.ev(a, m) for a in e.args])
        except ValueError:
            raise self.error(f"unknown intrinsic '{e.name}'", e.loc) from None

    def _length(self, e: Length, m: Mask) -> Val:
        st = self.array(e.array, e.loc)
        return np.int32(st.shape[e.dim])

    def _call(self, e: Call, m: Mask) -> Val | None:
        """A helper call: its body runs in the calling lanes; ``return`` anywhere (INT-12)."""
        h = self.helpers.get(e.func)
        if h is None:
            raise self.error(f"call of unknown helper function '{e.func}'", e.loc)
        if len(h.params) != len(e.args):
            raise self.error(f"helper '{h.name}' takes {len(h.params)} arguments", e.loc)
        if self.depth >= _MAX_DEPTH:
            raise self.error(f"helper calls nested deeper than {_MAX_DEPTH}", e.loc)
        scalars: dict[Var, Val | None] = {}
        arrays: dict[Var, ArrayStore] = {}
        for p, a in zip(h.params, e.args, strict=True):
            if isinstance(p.type, ArrayType):
                if not isinstance(a, Ref):
                    raise self.error(f"argument '{p.name}' of '{h.name}' is not an array", e.loc)
                arrays[p] = self.array(a.var, e.loc)
            else:
                scalars[p] = _own(self.ev(a, m))
        m = self.live(m)
        zero = None if h.result is Scalar.UNIT else h.result.dtype.type(0)
        callee = Frame(scalars, arrays, helper=h, result=zero)
        saved = self.frame
        saved_loops = self.loops
        self.frame = callee
        self.loops = []  # break/continue never cross a call (IR-32)
        self.depth += 1
        try:
            fell = self.exec(h.body, m)
            if h.result is not Scalar.UNIT:
                lane = ops.first_lane(np.True_, fell) if self.alive(fell) else None
                if lane is not None:
                    raise self.error("reached the end of the helper without a return", h.loc, lane)
        finally:
            self.frame = saved
            self.loops = saved_loops
            self.depth -= 1
        return callee.result

    def array(self, v: Var, loc: Loc | None) -> ArrayStore:
        st = self.frame.arrays.get(v)
        if st is None:
            raise self.error(f"unknown array '{v.name}'", loc)
        return st

    # ------------------------------------------------------------------ statements

    def exec(self, s: Stmt, m: Mask) -> Mask:
        """Run ``s`` in the active lanes of ``m``; the lanes that fall through it."""
        try:
            return _EX[type(s)](self, s, m)
        except LaneFault as f:
            raise self.error(f.message, s.loc, f.lane) from None

    def _let(self, s: Let, m: Mask) -> Mask:
        env = self.frame.scalars
        env[s.var] = _own(self.ev(s.value, m))
        try:
            return self.exec(s.body, self.live(m))
        finally:
            env.pop(s.var, None)

    def _assign(self, s: Assign, m: Mask) -> Mask:
        v = self.ev(s.value, m)
        m = self.live(m)
        env = self.frame.scalars
        if m is None or s.var not in env:
            env[s.var] = _own(v)
        else:
            new: Any = np.where(m, v, env[s.var])
            env[s.var] = new
        return m

    def _store(self, s: Store, m: Mask) -> Mask:
        st = self.array(s.array, s.loc)
        idx = [self.ev(i, m) for i in s.index]
        val = self.ev(s.value, m)
        m = self.live(m)
        if self.helper_stopped and not self.alive(m):
            return m  # every thread stopped inside a helper call of this statement
        addr = self.mem.address(st, idx, m, "store")
        self.mem.store(st, addr, val, m)
        return m

    def _seq(self, s: Seq, m: Mask) -> Mask:
        for x in s.stmts:
            m = self.exec(x, m)
            if m is not None and not m.any():
                return m
        return m

    def _if(self, s: If, m: Mask) -> Mask:
        c = self.ev(s.cond, m)
        m = self.live(m)
        if not isinstance(c, np.ndarray):
            branch = s.then if bool(c) else s.else_
            return m if branch is None else self.exec(branch, m)
        mt = self.narrow(m, c)
        if s.else_ is None:
            if not self.alive(mt):
                return m
            rt = self.exec(s.then, mt)
            if rt is mt:  # no thread left inside the branch
                return m
            return self.union(rt, self.narrow(m, ~c))
        mf = self.narrow(m, ~c)
        rt = self.exec(s.then, mt) if self.alive(mt) else self.empty
        rf = self.exec(s.else_, mf) if self.alive(mf) else self.empty
        if (rt is mt or not self.alive(mt)) and (rf is mf or not self.alive(mf)):
            return m
        return self.union(rt, rf)

    def spend(self, s: While | For) -> None:
        """Count one loop iteration against the launch's budget (INT-22)."""
        self.loop_budget -= 1
        if self.loop_budget < 0:
            raise InterpError(
                f"kernel {self.kernel.name}: the launch ran more loop iterations than its "
                f"budget allows (INT-22): a loop that does not end? "
                f"(raise run_kernel's loop_budget for a longer run)", s.loc)

    def endless(self, s: While) -> None:
        """Stop a ``while`` loop whose lanes came back from one iteration to a condition
        that cannot have changed (INT-29): it would spend INT-22's whole budget."""
        why = self.endless_why.get(id(s), "")
        if why == "":
            why = self.endless_why[id(s)] = never_ends(s)
        if why is not None:
            raise InterpError(f"kernel {self.kernel.name}: {why}", s.loc)

    def enter_loop(self) -> LoopExits:
        ex = LoopExits(self.empty)
        self.loops.append(ex)
        return ex

    def leave_loop(self, ex: LoopExits, out: Mask) -> Mask:
        """The lanes after a loop: those that ended it (``out``) and those that broke out
        of it (INT-25)."""
        popped = self.loops.pop()
        assert popped is ex
        return self.live(self.union(out, ex.broke))

    def iteration_end(self, ex: LoopExits, fell: Mask) -> Mask:
        """The lanes that go on to the loop's next step: those that fell through the body
        and those that continued (INT-25)."""
        if ex.cont is self.empty:
            return fell
        nxt = self.live(self.union(fell, ex.cont))
        ex.cont = self.empty
        return nxt

    def _while(self, s: While, m: Mask) -> Mask:
        ex = self.enter_loop()
        out: Mask = self.empty
        try:
            out = self._while_steps(s, m, ex)
        finally:
            out = self.leave_loop(ex, out)
        return out

    def _while_steps(self, s: While, m: Mask, ex: LoopExits) -> Mask:
        out: Mask = self.empty
        cur = m
        first = True
        while True:
            self.spend(s)
            c = self.ev(s.cond, cur)
            cur = self.live(cur)
            if not isinstance(c, np.ndarray):
                if not bool(c):
                    return self.union(out, cur)
            else:
                out = self.union(out, ~c if cur is None else cur & ~c)
                cur = self.narrow(cur, c)
                if not self.alive(cur):
                    return out
            cur = self.iteration_end(ex, self.exec(s.body, cur))
            if not self.alive(cur):
                return out
            if first:
                first = False
                self.endless(s)

    def _for(self, s: For, m: Mask) -> Mask:
        """Inclusive bounds evaluated once; per-lane trip counts (INT-11)."""
        a = self.ev(s.start, m)
        b = self.ev(s.stop, m)
        m = self.live(m)
        ex = self.enter_loop()
        out: Mask = self.empty
        try:
            out = self._for_steps(s, m, a, b, ex)
        finally:
            out = self.leave_loop(ex, out)
        return out

    def _for_steps(self, s: For, m: Mask, a: Any, b: Any, ex: LoopExits) -> Mask:
        assert isinstance(s.var.type, Scalar)
        dt = s.var.type.dtype
        env = self.frame.scalars
        try:
            if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
                lo, hi = int(a), int(b)
                rng = range(lo, hi - 1, -1) if s.down else range(lo, hi + 1)
                cur = m
                for k in rng:
                    self.spend(s)
                    env[s.var] = dt.type(k)
                    cur = self.iteration_end(ex, self.exec(s.body, cur))
                    if not self.alive(cur):
                        break
                return cur
            a64 = np.asarray(a).astype(np.int64)
            b64 = np.asarray(b).astype(np.int64)
            trips = np.broadcast_to((a64 - b64 if s.down else b64 - a64) + 1, (self.nlanes,))
            zero = trips <= 0  # lanes that run no iteration fall through at once
            out: Mask = zero if m is None else m & zero
            cur = self.narrow(m, trips > 0)
            k = 0
            while self.alive(cur):
                self.spend(s)
                env[s.var] = (a64 - k if s.down else a64 + k).astype(dt)
                cur = self.iteration_end(ex, self.exec(s.body, cur))
                k += 1
                if not self.alive(cur):
                    break
                fin = trips <= k
                out = self.union(out, fin if cur is None else cur & fin)
                cur = self.narrow(cur, ~fin)
            return out
        finally:
            env.pop(s.var, None)

    def _return(self, s: Return, m: Mask) -> Mask:
        fr = self.frame
        if fr.helper is not None and s.value is not None:
            v = self.ev(s.value, m)
            m = self.live(m)
            fr.result = _own(v) if m is None or fr.result is None else np.where(m, v, fr.result)
        return self.empty

    def _barrier(self, s: Barrier, m: Mask) -> Mask:
        """Every existing thread of a block or none of them (INT-16)."""
        if m is None:
            self.mem.barrier(None, self.shared)
            return m
        geo = self.geo
        counts = np.bincount(geo.block_of_lane[m], minlength=geo.nblocks)
        bad = (counts > 0) & (counts < geo.existing_per_block())
        if bad.any():
            blk = int(np.argmax(bad))
            lo = blk * geo.block_size
            part = m[lo: lo + geo.block_size]
            t = lo + int(np.argmax(part))
            u = lo + int(np.argmax(~part))
            raise self.error(
                f"divergent barrier in block {blk}: thread {t} reached it but thread {u} "
                "did not (it returned, stopped or took another branch)",
                s.loc,
                t,
            )
        self.mem.barrier(counts > 0, self.shared)
        return m

    def _empty(self, s: Empty, m: Mask) -> Mask:
        return m

    def _jump(self, s: Break | Continue, m: Mask) -> Mask:
        """``break``/``continue``: the active lanes leave the body of the innermost loop
        and wait at its end or at its next step (INT-25)."""
        if not self.loops:
            word = "break" if isinstance(s, Break) else "continue"
            raise self.error(f"'{word}' outside a loop (IR-32)", s.loc)
        ex = self.loops[-1]
        m = self.live(m)
        if isinstance(s, Break):
            ex.broke = self.union(ex.broke, m)
        else:
            ex.cont = self.union(ex.cont, m)
        return self.empty

    def _pragma(self, s: Pragma, m: Mask) -> Mask:
        return self.exec(s.body, m)

    def _stop(self, s: Stop, m: Mask) -> Mask:
        """Record ``code`` for the active lanes, which then do nothing more (INT-13)."""
        if self.stopped is None or self.stop_codes is None:
            self.stopped = np.zeros(self.nlanes, dtype=np.bool_)
            self.stop_codes = np.zeros(self.nlanes, dtype=np.int32)
        if m is None:
            self.stop_codes[:] = s.code
            self.stopped[:] = True
        else:
            self.stop_codes[m] = s.code
            self.stopped |= m
        if self.frame.helper is not None:
            self.helper_stopped = True
        return self.empty


# dispatch tables of plain functions (bound methods in the instance would make a reference
# cycle, keeping every value of a launch alive until the garbage collector runs)
_EV: dict[type, Callable[[Machine, Any, Mask], Any]] = {
    Const: Machine._const, Ref: Machine._ref, Unary: Machine._unary, Binary: Machine._binary,
    Read: Machine._read, Cast: Machine._cast, Cond: Machine._cond,
    Intrinsic: Machine._intrinsic, Call: Machine._call, Length: Machine._length,
    Atomic: Machine._atomic,
}
_EX: dict[type, Callable[[Machine, Any, Mask], Mask]] = {
    Let: Machine._let, Assign: Machine._assign, Store: Machine._store, Seq: Machine._seq,
    If: Machine._if, For: Machine._for, While: Machine._while, Return: Machine._return,
    Barrier: Machine._barrier, Empty: Machine._empty, Pragma: Machine._pragma,
    Stop: Machine._stop, Break: Machine._jump, Continue: Machine._jump,
}
