"""The one C-family emitter: an IR kernel as CUDA C or OpenCL C (specs/codegen.md).

The emitter walks the IR once and reads every target difference from a
:class:`~sarek_py.codegen.dialect.Dialect`. It keeps the kernel's own names (CG-4),
indents by two spaces, and gives the C the interpreter's meaning (CG-5 … CG-12):

* every array parameter is followed by its extents as hidden ``int`` arguments
  (``a_len0``, ``a_len1`` …); an access is a row-major offset from the lower bounds,
  computed in 64 bits for global arrays of rank two or more;
* a hidden 64-bit ``sarek_threads`` sends threads numbered past the launch's count back
  before the body, or in the kernel's own leading guard when what precedes it is safe to
  run for them (kernels without a barrier, CG-21);
* a kernel that can ``stop`` gets a hidden ``sarek_stop`` buffer, one ``int`` per thread;
* by default every array access not proven in bounds is checked (CG-22, CG-23): a fault
  touches no memory and is recorded in a hidden ``sarek_oob`` buffer
  (:mod:`sarek_py.codegen.bounds`); ``checked=False`` is the opt-out (CG-24);
* locals start at zero; float ``min``/``max``/``abs`` are ``fmin``/``fmax``/``fabs``;
* an integer ``+ - * <<``, unary ``-`` or ``abs`` the range analysis cannot prove in range
  is a call of its named wrapping function, ``sarek_sub_i32(i, 1)`` (CG-18, CG-25,
  :mod:`sarek_py.codegen.wrap`); a proved one is the plain C operator.

:func:`emit` returns the source and the :class:`KernelAbi` the runtimes use to pass the
arguments in the order the C expects.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import attrs
import numpy as np

from sarek_py.analysis.ranges import Range, int_range, no_overflow, refine, type_range
from sarek_py.codegen.atomics import AtomicLoop, atomic_c, atomic_prelude
from sarek_py.codegen.bounds import (
    OOB,
    SITE,
    AccessSite,
    at_name,
    check_prelude,
    fault_words,
    get_name,
    in_name,
    set_name,
)
from sarek_py.codegen.dialect import Dialect
from sarek_py.codegen.minmax import minmax_name, minmax_prelude
from sarek_py.codegen.names import Namer
from sarek_py.codegen.rowsplit import RowGuard, RowRange, row_guard
from sarek_py.codegen.shallow import shallow_kernel
from sarek_py.codegen.speculate import speculation_guard
from sarek_py.codegen.wrap import BINARY_WORDS, WrapOp, wrap_name, wrap_prelude
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.dynamic_shared import dynamic_shared
from sarek_py.ir.intrinsics import MATH, THREAD_INTRINSICS
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
    UnaryOp,
    Var,
    While,
    iter_stmts,
)
from sarek_py.ir.typeof import scalar_type_of
from sarek_py.ir.types import ArrayType, MemSpace, Scalar
from sarek_py.ir.visit import iter_exprs, iter_nodes


class CodegenError(SarekError):
    """A kernel the C emitters cannot express (e.g. ``stop`` inside a helper function)."""


@attrs.frozen
class CArg:
    """One argument of the emitted C kernel, in order.

    ``kind`` is ``"array"`` (a buffer for parameter ``param``), ``"scalar"`` (the value of
    parameter ``param``), ``"extent"`` (dimension ``dim`` of array ``param``, an ``int``),
    ``"threads"`` (the launch's thread count, 64-bit), ``"status"`` (the stop status
    buffer, one ``int`` per thread), ``"fault"`` (the bounds-check record, CG-22),
    ``"shared"`` (where the dialect passes it: the dynamic shared array ``param``, a
    shared-space buffer of the launch's size) or ``"shared_extent"`` (its extent in
    elements, an ``int``; CG-50).
    """

    kind: str
    name: str
    param: str | None = None
    dim: int = 0


@attrs.frozen
class KernelAbi:
    """How to call an emitted kernel: C name, arguments in order, and what it needs;
    ``sites``: the checked accesses by site number minus one, ``fault_words``: the ``int``
    words of its fault buffer (0: the kernel takes none; CG-22)."""

    name: str
    args: tuple[CArg, ...]
    has_barrier: bool
    can_stop: bool
    sites: tuple[AccessSite, ...] = ()
    fault_words: int = 0


@attrs.frozen
class Emitted:
    """The C of one kernel: the whole source, its ABI, and its parts (``functions``: the
    helpers' and then the kernel's definitions; ``uses_f64``) for joining kernels."""

    source: str
    abi: KernelAbi
    functions: tuple[str, ...] = ()
    uses_f64: bool = False
    #: the OpenCL extensions its atomics need, each with the atomic that needs it (CG-31)
    extensions: tuple[tuple[str, str], ...] = ()


# C precedence levels (higher binds tighter)
_PREC: dict[BinaryOp, int] = {
    BinaryOp.OR: 4, BinaryOp.AND: 5, BinaryOp.BOR: 6, BinaryOp.BXOR: 7, BinaryOp.BAND: 8,
    BinaryOp.EQ: 9, BinaryOp.NE: 9, BinaryOp.LT: 10, BinaryOp.LE: 10, BinaryOp.GT: 10,
    BinaryOp.GE: 10, BinaryOp.SHL: 11, BinaryOp.SHR: 11, BinaryOp.ADD: 12, BinaryOp.SUB: 12,
    BinaryOp.MUL: 13, BinaryOp.DIV: 13, BinaryOp.MOD: 13,
}
_COND, _UNARY, _PRIMARY = 3, 14, 16
_I32_MIN, _I64_MIN = -(2**31), -(2**63)


def _paren(text: str, prec: int, need: int) -> str:
    return text if prec >= need else f"({text})"


def can_stop(kernel: Kernel) -> bool:
    """Whether the kernel's body holds a ``stop`` statement."""
    return any(isinstance(s, Stop) for s in iter_stmts(kernel.body))


def has_barrier(kernel: Kernel) -> bool:
    return any(isinstance(s, Barrier) for s in iter_stmts(kernel.body))


class _Function:
    """Emits one C function (a kernel or a helper): names, declarations, body."""

    def __init__(self, d: Dialect, helper_names: Mapping[str, str], loc: Loc | None,
                 owner: str, owner_c: str) -> None:
        self.d = d
        self.helper_names = helper_names
        self.namer = Namer(set(helper_names.values()) | {owner_c})
        self.names: dict[int, str] = {}
        self.extents: dict[int, tuple[str, ...]] = {}
        self.uses_f64 = False
        self.in_helper = False
        self.loc = loc
        self.owner = owner
        self.lines: list[str] = []
        #: value ranges of the immutable integer variables in scope (CG-18, CG-19)
        self.ranges: dict[int, Range] = {}
        #: the kernel's own guard that also tests the launch's thread count (CG-21)
        self.count_guard: If | None = None
        #: the kernel's leading guard that the launch skips for a row's threads inside
        #: the range it computes (NAT-65), tested only where ``sarek_edge`` is true
        self.row_guard: RowGuard | None = None
        #: the named wrapping operations the code calls (CG-18, CG-25)
        self.wrapping: set[WrapOp] = set()
        #: the ``i32`` locals declared 64-bit (NAT-37, CG-76)
        self.widened: set[int] = set()
        #: bounds checks (CG-22): whether accesses are checked, whether this function has
        #: the sarek_oob buffer, its sites so far, the ranks of the check functions used,
        #: the helpers taking the buffer and their sites
        self.checked = False
        self.has_oob = False
        self.sites: list[AccessSite] = []
        self.check_ranks: set[int] = set()
        self.at_ranks: set[int] = set()
        #: the ranks of the checked read and store macros used (CG-28)
        self.get_ranks: set[int] = set()
        self.set_ranks: set[int] = set()
        self.oob_helpers: frozenset[str] = frozenset()
        self.helper_sites: Mapping[str, tuple[AccessSite, ...]] = {}
        self.helper_params: Mapping[str, tuple[Var, ...]] = {}
        #: the helpers that store into an array, themselves or through a call (CG-22)
        self.storing_helpers: frozenset[str] = frozenset()
        #: the C loops around the statement being emitted, innermost last: for each, the
        #: test a ``continue`` runs first (a ``for`` whose last value is the type's last
        #: value leaves after it instead of stepping, CG-29), or None
        self.loop_tests: list[str | None] = []
        #: the compare-and-swap loop functions the atomics call, and the OpenCL
        #: extensions they need with the atomic that needs each (CG-30, CG-31)
        self.atomic_loops: set[AtomicLoop] = set()
        self.extensions: dict[str, str] = {}

    # ------------------------------------------------------------------ types and names

    def ctype(self, t: Scalar) -> str:
        if t is Scalar.F64:
            self.uses_f64 = True
        return self.d.type_name(t)

    def storage(self, t: Scalar) -> str:
        return self.d.storage_bool if t is Scalar.BOOL else self.ctype(t)

    def bind(self, v: Var) -> str:
        name = self.namer.fresh(v.name)
        self.names[v.id] = name
        return name

    def name(self, v: Var) -> str:
        try:
            return self.names[v.id]
        except KeyError:
            raise CodegenError(f"variable {v.name} is not bound in {self.owner}",
                               self.loc) from None

    def array_params(self, v: Var) -> list[tuple[str, str, str | None, int]]:
        """C declarations of an array parameter and its hidden extents:
        ``(declaration, c_name, kind, dim)`` entries."""
        assert isinstance(v.type, ArrayType)
        name = self.bind(v)
        ptr = self.d.global_pointer
        decl = f"{ptr} {self.storage(v.type.elem)}* {name}".strip()
        out: list[tuple[str, str, str | None, int]] = [(decl, name, "array", 0)]
        exts = []
        for dim in range(v.type.rank):
            ext = self.namer.fresh(f"{name}_len{dim}")
            exts.append(ext)
            out.append((f"int {ext}", ext, "extent", dim))
        self.extents[v.id] = tuple(exts)
        return out

    # ---------------------------------------------------------------------- expressions

    def const(self, c: Const) -> tuple[str, int]:
        v, t = c.value, c.type
        if t is Scalar.BOOL:
            return ("true" if v else "false"), _PRIMARY
        if t is Scalar.UNIT:
            raise CodegenError("a unit constant has no C value", c.loc or self.loc)
        if t.is_int:
            assert isinstance(v, int)
            suffix = self.d.i64_suffix if t is Scalar.I64 else ""
            if v == (_I64_MIN if t is Scalar.I64 else _I32_MIN):
                return f"(-{-v - 1}{suffix} - 1{suffix})", _PRIMARY
            return f"{v}{suffix}", (_UNARY if v < 0 else _PRIMARY)
        assert isinstance(v, (int, float))
        if t is Scalar.F32:
            x32 = np.float32(v)
            if not np.isfinite(x32):
                bits = int(x32.view(np.uint32))
                return self.d.f32_bits.format(hex=f"0x{bits:08x}"), _PRIMARY
            text = _float_text(x32) + "f"
        else:
            self.uses_f64 = True
            x64 = np.float64(v)
            if not np.isfinite(x64):
                bits = int(x64.view(np.uint64))
                return self.d.f64_bits.format(hex=f"0x{bits:016x}"), _PRIMARY
            text = _float_text(x64)
        return text, (_UNARY if text.startswith("-") else _PRIMARY)

    def expr(self, e: Expr) -> tuple[str, int]:
        """C text of ``e`` and its precedence level."""
        match e:
            case Const():
                return self.const(e)
            case Ref(var=v):
                return self.name(v), _PRIMARY
            case Unary(op=UnaryOp.NEG) | Binary(op=BinaryOp.ADD | BinaryOp.SUB | BinaryOp.MUL
                                               | BinaryOp.SHL) if self.wraps(e):
                return self.wrap_call(e)
            case Binary(op=BinaryOp.DIV | BinaryOp.MOD) if self.traps(e):
                return self.wrap_call(e)  # NAT-10
            case Unary(op=op, arg=a):
                text, prec = self.expr(a)
                text = _paren(text, prec, _UNARY)
                if op is UnaryOp.NEG and text.startswith("-"):
                    text = f"({text})"
                return f"{op.value}{text}", _UNARY
            case Binary(op=op, lhs=lhs, rhs=rhs):
                p = _PREC[op]
                lt, lp = self.expr(lhs)
                rt, rp = self.expr(rhs)
                # parenthesise nested logical and bitwise operators for the reader (and the
                # compilers' -Wparentheses), and by precedence everywhere
                need_l = _PRIMARY if _mixes(op, lhs) else p
                need_r = _PRIMARY if _mixes(op, rhs) else p + 1
                return f"{_paren(lt, lp, need_l)} {op.value} {_paren(rt, rp, need_r)}", p
            case Read(array=a, index=idx):
                return self.read(a, idx, e.loc), _PRIMARY
            case Cast(to=to, arg=a):
                return self.cast(to, a)
            case Cond(cond=c, if_true=t, if_false=f):
                ct, cp = self.expr(c)
                tt, tp = self.expr(t)
                ft, fp = self.expr(f)
                return (f"{_paren(ct, cp, _COND + 1)} ? {_paren(tt, tp, _COND + 1)} : "
                        f"{_paren(ft, fp, _COND + 1)}"), _COND
            case Intrinsic(name=n, args=args):
                return self.intrinsic(e, n, args)
            case Call(func=f, args=args):
                cargs = list(self.call_args(args))
                if f in self.oob_helpers:
                    # the callee's sites follow from here, its arrays called by the names
                    # passed here, as the interpreter names them (CG-22)
                    cargs += [OOB, self.site_id()]
                    rename = {p.name: a.var.name
                              for p, a in zip(self.helper_params[f], args, strict=True)
                              if isinstance(p.type, ArrayType) and isinstance(a, Ref)}
                    self.sites.extend(attrs.evolve(x, array=rename.get(x.array, x.array))
                                      for x in self.helper_sites[f])
                if self.d.thread_param:  # NAT-2: a helper may read the thread's place
                    cargs.append(self.d.thread_param.split()[-1])
                return f"{self.helper_names[f]}({', '.join(cargs)})", _PRIMARY
            case Length(array=a, dim=d):
                assert isinstance(a.type, ArrayType)
                if a.id in self.extents:
                    return self.extents[a.id][d], _PRIMARY
                extent = a.type.shape[d]
                assert extent is not None
                return str(extent), _PRIMARY
        raise CodegenError(f"cannot emit expression {e!r}", self.loc)

    def wraps(self, e: Expr) -> bool:
        """Whether integer ``e`` (``+ - * <<`` or unary ``-``) could overflow its type, so
        that C must compute it in the unsigned type (CG-18)."""
        t = scalar_type_of(e)
        if not t.is_int:
            return False
        if isinstance(e, Unary):
            return int_range(e.arg, self.ranges)[0] == type_range(t)[0]
        assert isinstance(e, Binary)
        return not no_overflow(e.op, int_range(e.lhs, self.ranges),
                               int_range(e.rhs, self.ranges), t)

    def wide_exact(self, v: Var, val: Expr) -> bool:
        """Whether immutable ``i32`` local ``v`` bound to ``val`` is declared 64-bit
        (NAT-37): the dialect asks it, ``val`` narrows an ``i64`` and the ranges prove that
        value an ``i32``, so the wider variable holds exactly the value the ``int`` would,
        and every use the emitter writes of it (exact arithmetic, comparisons, explicit
        casts, ``int`` parameters) computes the same."""
        if not (self.d.wide_exact_locals and v.scalar is Scalar.I32 and not v.mutable
                and isinstance(val, Cast) and val.to is Scalar.I32
                and scalar_type_of(val.arg) is Scalar.I64):
            return False
        lo, hi = int_range(val.arg, self.ranges)
        t_lo, t_hi = type_range(Scalar.I32)
        return t_lo <= lo and hi <= t_hi

    def traps(self, e: Expr) -> bool:
        """Whether integer ``e`` (``/`` or ``%``) may divide by zero or the least value by
        -1 where the dialect guards those (NAT-10)."""
        assert isinstance(e, Binary)
        t = scalar_type_of(e)
        if not self.d.guard_division or not t.is_int:
            return False
        lo, hi = int_range(e.rhs, self.ranges)
        if lo <= 0 <= hi:
            return True
        return lo <= -1 <= hi and int_range(e.lhs, self.ranges)[0] == type_range(t)[0]

    def wrap_call(self, e: Expr) -> tuple[str, int]:
        """Integer ``e`` (``+ - * <<`` or unary ``-``) that may overflow as a call of its
        named wrapping function, ``sarek_sub_i32(i, 1)`` for ``i - 1`` (CG-18, CG-25)."""
        t = scalar_type_of(e)
        args: tuple[Expr, ...]
        if isinstance(e, Unary):
            word, args = "neg", (e.arg,)
        else:
            assert isinstance(e, Binary)
            word, args = BINARY_WORDS[e.op], (e.lhs, e.rhs)
        self.wrapping.add((word, t))
        return f"{wrap_name(word, t)}({', '.join(self.expr(a)[0] for a in args)})", _PRIMARY

    def cast(self, to: Scalar, a: Expr) -> tuple[str, int]:
        src = scalar_type_of(a)
        text, prec = self.expr(a)
        if to is Scalar.BOOL:
            if src is Scalar.BOOL:
                return text, prec
            zero = "0.0f" if src is Scalar.F32 else "0.0" if src is Scalar.F64 else "0"
            return f"{_paren(text, prec, 10)} != {zero}", 9
        return f"({self.ctype(to)}){_paren(text, prec, _UNARY)}", _UNARY

    def intrinsic(self, e: Intrinsic, n: str, args: tuple[Expr, ...]) -> tuple[str, int]:
        if n in THREAD_INTRINSICS:
            return self.d.thread[n], _UNARY
        if n not in MATH:
            raise CodegenError(f"unknown intrinsic {n}", e.loc or self.loc)
        t = scalar_type_of(args[0])
        if t is Scalar.F64:
            self.uses_f64 = True
        if n == "abs" and t.is_int and int_range(args[0], self.ranges)[0] == type_range(t)[0]:
            # abs of the most negative value is itself (INT-10); C's abs may assume it
            # never meets it
            self.wrapping.add(("abs", t))
            return f"{wrap_name('abs', t)}({self.expr(args[0])[0]})", _PRIMARY
        if n in ("min", "max") and t.is_float:  # one sign for zeros on every backend (CG-40)
            self.wrapping.add((n, t))
            return (f"{minmax_name(n, t)}({', '.join(self.expr(a)[0] for a in args)})",
                    _PRIMARY)
        fn = self.d.math[(n, t)]
        call = f"{fn}({', '.join(self.math_arg(a, t) for a in args)})"
        wrap = self.d.math_wrap.get((n, t))
        if wrap is not None:
            return wrap.format(call), _UNARY
        return call, _PRIMARY

    def math_arg(self, a: Expr, t: Scalar) -> str:
        """An argument of a math function on integer type ``t``: written as its C type
        when it holds a local declared 64-bit (NAT-37), so an overloaded builtin (OpenCL's
        ``min``, ``max``, ``abs``) sees the operands' one type (CG-76); the value is the
        same (the ranges prove it a ``t``)."""
        text, prec = self.expr(a)
        if t.is_int and self.widened and any(
                isinstance(x, Ref) and x.var.id in self.widened for x in iter_nodes(a)):
            return f"({self.ctype(t)}){_paren(text, prec, _UNARY)}"
        return text

    def call_args(self, args: tuple[Expr, ...]) -> Iterator[str]:
        for a in args:
            if isinstance(a, Ref) and isinstance(a.var.type, ArrayType):
                yield self.name(a.var)
                for d in range(a.var.type.rank):
                    yield self.expr(Length(a.var, d))[0]
            else:
                yield self.expr(a)[0]

    def index_parts(self, a: Var, idx: tuple[Expr, ...],
                    raw: Sequence[tuple[str, int]] | None = None,
                    exact: bool = False) -> list[tuple[str, int, Scalar]]:
        """Each index of ``a[idx]`` counted from zero (C text, precedence, type); ``raw``
        gives the indices' C text when it is already made. ``exact``: the text is a bounds
        check's argument, computed for every index, also one out of bounds: an ``i32``
        index whose distance from a nonzero lower bound may not fit ``i32`` is counted in
        64 bits, an ``i64`` one wraps (CG-26)."""
        assert isinstance(a.type, ArrayType)
        parts: list[tuple[str, int, Scalar]] = []
        for d, (lo, ix) in enumerate(zip(a.type.lower, idx, strict=True)):
            text, prec = raw[d] if raw is not None else self.expr(ix)
            ty = scalar_type_of(ix)
            if exact and lo != 0 and not no_overflow(
                    BinaryOp.SUB, int_range(ix, self.ranges), (lo, lo), ty):
                if ty is Scalar.I64:
                    self.wrapping.add(("sub", ty))
                    text = f"{wrap_name('sub', ty)}({text}, {self.const(Const(lo, ty))[0]})"
                    parts.append((text, _PRIMARY, ty))
                    continue
                text = f"({self.ctype(Scalar.I64)}){_paren(text, prec, _UNARY)}"
                prec, ty = _UNARY, Scalar.I64
            if lo > 0:
                text, prec = f"{_paren(text, prec, 12)} - {lo}", 12
            elif lo < 0:
                text, prec = f"{_paren(text, prec, 12)} + {-lo}", 12
            parts.append((text, prec, ty))
        return parts

    def offset(self, a: Var, idx: tuple[Expr, ...],
               raw: Sequence[tuple[str, int]] | None = None) -> str:
        """The row-major element offset of ``a[idx]`` (64-bit for global arrays of rank > 1)."""
        assert isinstance(a.type, ArrayType)
        t = a.type
        parts = self.index_parts(a, idx, raw)
        if t.rank == 1:
            return parts[0][0]
        wide = t.space is MemSpace.GLOBAL
        acc, acc_prec, acc_ty = parts[0]
        if wide and acc_ty is not Scalar.I64:
            acc, acc_prec = f"({self.ctype(Scalar.I64)}){_paren(acc, acc_prec, _UNARY)}", _UNARY
        for d in range(1, t.rank):
            ext = self.expr(Length(a, d))[0]
            text, prec, _ = parts[d]
            acc = f"{_paren(acc, acc_prec, 13)} * {ext} + {_paren(text, prec, 13)}"
            acc_prec = 12
        return acc

    # ------------------------------------------------------------------- bounds checks

    def site_id(self) -> str:
        """The C text of the next site's number: its position plus one in the kernel, the
        position after the caller's ``sarek_site`` in a helper (CG-22)."""
        k = len(self.sites)
        if self.in_helper:
            return SITE if k == 0 else f"{SITE} + {k}"
        return str(k + 1)

    def new_site(self, a: Var, kind: str, loc: Loc | None) -> str:
        assert isinstance(a.type, ArrayType)
        text = self.site_id()
        self.sites.append(AccessSite(a.name, kind, a.type.space, a.type.lower,
                                     self.owner if self.in_helper else None, loc or self.loc))
        self.check_ranks.add(a.type.rank)
        return text

    def proven(self, a: Var, idx: tuple[Expr, ...]) -> bool:
        """Whether ``a[idx]`` needs no check: unchecked code, or a shared or local array
        of constant extents whose indices the range analysis keeps in bounds (CG-23)."""
        assert isinstance(a.type, ArrayType)
        t = a.type
        if not self.checked:
            return True
        if t.space is MemSpace.GLOBAL:
            return False
        for lo, n, ix in zip(t.lower, t.shape, idx, strict=True):
            if n is None:
                return False
            r_lo, r_hi = int_range(ix, self.ranges)
            if r_lo < lo or r_hi > lo + n - 1:
                return False
        return True

    def check_args(self, a: Var, idx: tuple[Expr, ...],
                   raw: Sequence[tuple[str, int]] | None = None) -> str:
        """``index, extent`` pairs of a check function's call, indices from zero."""
        parts = self.index_parts(a, idx, raw, exact=True)
        return ", ".join(f"{p[0]}, {self.expr(Length(a, d))[0]}" for d, p in enumerate(parts))

    def read(self, a: Var, idx: tuple[Expr, ...], loc: Loc | None) -> str:
        """``a[idx]`` as C: ``(sarek_in<rank>(…) ? a[idx] : 0)`` unless proven in bounds
        (CG-22)."""
        name = self.name(a)
        if self.proven(a, idx):
            return f"{name}[{self.offset(a, idx)}]"
        args = self.check_args(a, idx)
        site = self.new_site(a, "read", loc)
        if any(isinstance(x, Call) and x.func in self.storing_helpers
               for ix in idx for x in iter_exprs(ix)):
            # an index that calls a helper which stores is computed once: out of bounds,
            # element 0 (in the buffer) is read instead
            self.at_ranks.add(len(idx))
            return f"{name}[{at_name(len(idx))}({OOB}, {site}, {args})]"
        # out of bounds, nothing is read (the index is computed twice: it stores nothing)
        assert isinstance(a.type, ArrayType)
        if a.type.space is MemSpace.GLOBAL:  # the same conditional, as a macro (CG-28)
            self.get_ranks.add(len(idx))
            return f"{get_name(len(idx))}({name}, {site}, {args})"
        return f"({in_name(len(idx))}({OOB}, {site}, {args}) ? {name}[{self.offset(a, idx)}] : 0)"

    def store(self, s: Store, depth: int) -> None:
        """``a[idx] <- v``: under ``if (sarek_in<rank>(…))`` unless proven in bounds; an
        index that reads memory or calls a helper is computed once, into a constant."""
        a, idx = s.array, s.index
        name = self.name(a)
        if self.proven(a, idx):
            self.emit(f"{name}[{self.offset(a, idx)}] = {self.expr(s.value)[0]};", depth)
            return
        raw: list[tuple[str, int]] = []
        for d, ix in enumerate(idx):
            text, prec = self.expr(ix)
            if any(isinstance(x, (Read, Call)) for x in iter_exprs(ix)):
                tmp = self.namer.fresh(f"{name}_at{d}")
                self.emit(f"const {self.ctype(scalar_type_of(ix))} {tmp} = {text};", depth)
                text, prec = tmp, _PRIMARY
            raw.append((text, prec))
        value = self.expr(s.value)[0]
        if any(isinstance(x, (Read, Call)) for x in iter_exprs(s.value)):
            # the value is computed before the store's own check, as the interpreter does
            tmp = self.namer.fresh(f"{name}_value")
            self.emit(f"const {self.ctype(scalar_type_of(s.value))} {tmp} = {value};", depth)
            value = tmp
        args = self.check_args(a, idx, raw)
        site = self.new_site(a, "store", s.loc)
        assert isinstance(a.type, ArrayType)
        if a.type.space is MemSpace.GLOBAL:  # the same `if`, as a macro (CG-28)
            self.set_ranks.add(len(idx))
            self.emit(f"{set_name(len(idx))}({name}, {site}, {args}, {value});", depth)
            return
        self.emit(f"if ({in_name(len(idx))}({OOB}, {site}, {args})) {{", depth)
        self.emit(f"{name}[{self.offset(a, idx, raw)}] = {value};", depth + 1)
        self.emit("}", depth)

    def once(self, e: Expr, name: str, depth: int) -> tuple[str, int]:
        """The C text of ``e``; one that reads memory or calls a helper is computed first,
        into a constant named from ``name``, so it runs once and in the interpreter's
        order."""
        text, prec = self.expr(e)
        if any(isinstance(x, (Read, Call)) for x in iter_exprs(e)):
            tmp = self.namer.fresh(name)
            self.emit(f"const {self.ctype(scalar_type_of(e))} {tmp} = {text};", depth)
            return tmp, _PRIMARY
        return text, prec

    def atomic(self, e: Atomic, depth: int) -> str:
        """The C value of the atomic ``e`` (CG-30, CG-31): its indices, expected value and
        operand computed first where they read memory, then the operation on the
        element's address, under the bounds check unless proven in bounds (an atomic out
        of bounds touches no memory and gives 0, CG-22)."""
        a, idx = e.array, e.index
        assert isinstance(a.type, ArrayType)
        t = a.type
        name = self.name(a)
        raw = [self.once(ix, f"{name}_at{d}", depth) for d, ix in enumerate(idx)]
        compare = (None if e.compare is None
                   else self.once(e.compare, f"{name}_expected", depth)[0])
        value = self.once(e.value, f"{name}_value", depth)[0]
        if t.elem is Scalar.F64:
            self.uses_f64 = True
        c = atomic_c(self.d, e.op, t.elem, t.space,
                     f"&{name}[{self.offset(a, idx, raw)}]", value, compare)
        if c.loop is not None:
            self.atomic_loops.add(c.loop)
        for ext in c.extensions:
            self.extensions.setdefault(ext, f"{e.op.value} on {t.elem} array '{a.name}'")
        if self.proven(a, idx):
            return c.text
        args = self.check_args(a, idx, raw)
        site = self.new_site(a, e.op.value, e.loc)
        zero = self.const(Const(0.0 if t.elem.is_float else 0, t.elem))[0]
        return f"({in_name(len(idx))}({OOB}, {site}, {args}) ? {c.text} : {zero})"

    def value(self, e: Expr, depth: int) -> str:
        """The C text of the value of a ``let`` or an assignment (where atomics stand,
        IR-34)."""
        return self.atomic(e, depth) if isinstance(e, Atomic) else self.expr(e)[0]

    # ----------------------------------------------------------------------- statements

    def emit(self, line: str, depth: int) -> None:
        self.lines.append("  " * depth + line)

    def stmt(self, s: Stmt, depth: int) -> None:
        match s:
            case Seq(stmts=ss):
                saved = self.ranges
                for x in ss:
                    self.stmt(x, depth)
                    if isinstance(x, If) and _leaves(x.then) and _is_empty(x.else_):
                        # past `if c then return`, c is false (CG-18)
                        self.ranges = refine(x.cond, self.ranges, False)
                self.ranges = saved
            case Empty():
                pass
            case Let(var=v, value=val, body=body):
                t = v.scalar
                if t is Scalar.UNIT:
                    self.emit(f"{self.expr(val)[0]};", depth)
                elif self.wide_exact(v, val):
                    # NAT-37: the same value in the wider type (the ranges bound it)
                    assert isinstance(val, Cast)
                    text = self.expr(val.arg)[0]
                    self.emit(f"{self.ctype(Scalar.I64)} {self.bind(v)} = {text};"
                              "  // an int: the guard bounds it", depth)
                    self.widened.add(v.id)
                    self.ranges = {**self.ranges, v.id: int_range(val, self.ranges)}
                else:
                    text = self.value(val, depth)
                    self.emit(f"{self.ctype(t)} {self.bind(v)} = {text};", depth)
                    if t.is_int and not v.mutable:
                        self.ranges = {**self.ranges, v.id: int_range(val, self.ranges)}
                self.stmt(body, depth)
            case Assign(var=v, value=val):
                text = self.value(val, depth)
                self.emit(f"{self.name(v)} = {text};", depth)
            case Store():
                self.store(s, depth)
            case If(cond=c, then=t) if self.row_guard is not None and s is self.row_guard.guard:
                self.emit("// a row's threads that pass this test run without it (NAT-65)",
                          depth)
                if not self.row_guard.enter:
                    self.emit(f"if ({EDGE} && ({self.expr(c)[0]})) {{", depth)
                    self.emit("return;", depth + 1)
                    self.emit("}", depth)
                else:
                    saved = self.ranges
                    self.emit(f"if (!{EDGE} || ({self.expr(c)[0]})) {{", depth)
                    self.branch(t, refine(c, saved, True), depth + 1)
                    self.ranges = saved
                    self.emit("}", depth)
            case If(cond=c) if s is self.count_guard:
                # CG-21: threads past the launch's count leave with the kernel's own guard
                self.emit("// threads past the launch's count stop here too", depth)
                self.emit(f"if (({self.d.flat_id}) >= sarek_threads || ({self.expr(c)[0]})) "
                          "return;", depth)
            case If(cond=c, then=t, else_=e):
                saved = self.ranges
                self.emit(f"if ({self.expr(c)[0]}) {{", depth)
                self.branch(t, refine(c, saved, True), depth + 1)
                outside = refine(c, saved, False)
                while e is not None and isinstance(e, If):  # else if chains stay flat
                    self.ranges = outside
                    self.emit(f"}} else if ({self.expr(e.cond)[0]}) {{", depth)
                    self.branch(e.then, refine(e.cond, outside, True), depth + 1)
                    outside = refine(e.cond, outside, False)
                    e = e.else_
                if e is not None and not isinstance(e, Empty):
                    self.emit("} else {", depth)
                    self.branch(e, outside, depth + 1)
                self.ranges = saved
                self.emit("}", depth)
            case For():
                self.for_loop(s, depth)
            case While(cond=c, body=b):
                saved = self.ranges
                cond = self.expr(c)[0]
                if self.has_oob and not any(isinstance(x, Barrier) for x in iter_stmts(b)):
                    # a fault ends the loop: values read out of bounds cannot keep it
                    # running (CG-22)
                    cond = f"{self.d.atomic_read.format(ptr=OOB)} == 0 && ({cond})"
                if self.d.while_guard:  # Ctrl-C ends the loop (NAT-45)
                    cond = f"{self.d.while_guard} && ({cond})"
                self.emit(f"while ({cond}) {{", depth)
                self.loop_tests.append(None)
                self.branch(b, refine(c, saved, True), depth + 1)
                self.loop_tests.pop()
                self.ranges = saved
                self.emit("}", depth)
            case Break():
                self.emit("break;", depth)  # CG-29
            case Continue():
                test = self.loop_tests[-1] if self.loop_tests else None
                if test is not None:  # the last value of the loop: leave, never step (CG-29)
                    self.emit(f"if ({test}) break;", depth)
                self.emit("continue;", depth)
            case Return(value=v):
                self.emit("return;" if v is None else f"return {self.expr(v)[0]};", depth)
            case Barrier():
                self.emit(self.d.barrier, depth)
            case Pragma(options=opts, body=b):
                pragmas: list[str] = []  # C pragmas for the loop, emitted by for_loop
                for o in opts:
                    word, _, rest = o.strip().partition(" ")
                    ptext = self.d.pragmas.get(word)
                    if ptext is None or not isinstance(b, For):
                        self.emit(f"// pragma {o!r}: not understood by {self.d.name} here", depth)
                    else:
                        pragmas.append(f"{ptext} {rest}".rstrip() if rest and word == "unroll"
                                       else ptext)
                if isinstance(b, For):
                    self.for_loop(b, depth, pragmas)
                else:
                    self.stmt(b, depth)
            case Stop(code=c):
                if self.in_helper:
                    raise CodegenError(
                        f"stop inside helper function {self.owner} cannot be emitted as C "
                        "(CG-11): move it into the kernel", s.loc or self.loc)
                self.emit(f"sarek_stop[{self.d.flat_id}] = {c};", depth)
                self.emit("return;", depth)
            case _:
                raise CodegenError(f"cannot emit statement {s!r}", self.loc)

    def branch(self, s: Stmt, ranges: dict[int, Range], depth: int) -> None:
        """Emit ``s`` with the variable ranges ``ranges`` (a branch under a condition)."""
        self.ranges = ranges
        self.stmt(s, depth)

    def for_loop(self, s: For, depth: int, pragmas: Sequence[str] = ()) -> None:
        """A ``for`` loop over inclusive bounds evaluated once (CG-12, CG-19); ``pragmas``
        go directly before the C ``for`` (CG-20)."""
        ty = s.var.scalar
        t = self.ctype(ty)
        # the bounds stand beside <=, >= and == below: a conditional or a comparison needs
        # parentheses (`i <= c ? 0 : 3` would compare first)
        start = _paren(*self.expr(s.start), _PREC[BinaryOp.LE] + 1)
        stop = _paren(*self.expr(s.stop), _PREC[BinaryOp.LE] + 1)
        r_start, r_stop = int_range(s.start, self.ranges), int_range(s.stop, self.ranges)
        t_lo, t_hi = type_range(ty)
        # the plain C loop steps once past the last value: exact only when that exists
        plain = r_stop[0] > t_lo if s.down else r_stop[1] < t_hi
        name = self.bind(s.var)
        if not _stable(s.stop):  # bounds are evaluated once, before the first iteration
            lo = self.namer.fresh(f"{name}_first")
            hi = self.namer.fresh(f"{name}_last")
            self.emit(f"const {t} {lo} = {start};", depth)
            self.emit(f"const {t} {hi} = {stop};", depth)
            start, stop = lo, hi
        elif not plain and not _stable(s.start):  # the start is written twice below
            lo = self.namer.fresh(f"{name}_first")
            self.emit(f"const {t} {lo} = {start};", depth)
            start = lo
        saved = self.ranges
        span = (r_stop[0], r_start[1]) if s.down else (r_start[0], r_stop[1])
        if span[0] <= span[1]:
            self.ranges = {**saved, s.var.id: span}
        cmp, step = (">=", "--") if s.down else ("<=", "++")
        if plain:
            for p in pragmas:
                self.emit(p, depth)
            self.emit(f"for ({t} {name} = {start}; {name} {cmp} {stop}; {name}{step}) {{",
                      depth)
            self.loop_tests.append(None)
            self.stmt(s.body, depth + 1)
            self.loop_tests.pop()
            self.emit("}", depth)
        else:
            # the bound may be the type's last value: leave after it, never step past it
            self.emit(f"if ({start} {cmp} {stop}) {{", depth)
            for p in pragmas:
                self.emit(p, depth + 1)
            self.emit(f"for ({t} {name} = {start}; ; {name}{step}) {{", depth + 1)
            self.loop_tests.append(f"{name} == {stop}")
            self.stmt(s.body, depth + 2)
            self.loop_tests.pop()
            self.emit(f"if ({name} == {stop}) break;", depth + 2)
            self.emit("}", depth + 1)
            self.emit("}", depth)
        self.ranges = saved

    def dynamic_shared_params(self, v: Var) -> list[tuple[str, str, str]]:
        """CG-50: the C parameters of the dynamic shared array ``v`` — a pointer in the
        shared space where the dialect passes it (bound to a buffer of the launch's size)
        — and of its extent in elements, as ``(declaration, C name, ABI kind)``."""
        assert isinstance(v.type, ArrayType)
        name = self.bind(v)
        ext = self.namer.fresh(f"{name}_len0")
        self.extents[v.id] = (ext,)
        out = []
        if self.d.dynamic_shared_param:
            out.append((f"{self.d.shared_pointer} {self.storage(v.type.elem)}* {name}".strip(),
                        name, "shared"))
        out.append((f"int {ext}", ext, "shared_extent"))
        return out

    def dynamic_shared_decl(self, v: Var) -> list[str]:
        """CG-50: the dialect's declaration of the launch-sized shared bytes, seen as the
        array's element type (one name per unit whatever the kernels' element types);
        nothing for a dialect that passes the array as a parameter."""
        if self.d.dynamic_shared_param:
            return []
        assert isinstance(v.type, ArrayType)
        raw = self.namer.hidden("sarek_dynamic_shared")
        elem = self.storage(v.type.elem)
        return [line.format(raw=raw, elem=elem, name=self.name(v))
                for line in self.d.dynamic_shared_decl]

    def local_decl(self, v: Var) -> str:
        """The declaration of a kernel local: zero-initialised unless shared (CG-9)."""
        if isinstance(v.type, ArrayType):
            t = v.type
            name = self.bind(v)
            size = t.size
            if t.space is MemSpace.SHARED:
                return f"{self.d.shared_qualifier} {self.storage(t.elem)} {name}[{size}];"
            return f"{self.storage(t.elem)} {name}[{size}] = {{0}};"
        t0 = v.scalar
        zero = Const(False if t0 is Scalar.BOOL else 0.0 if t0.is_float else 0, t0)
        return f"{self.ctype(t0)} {self.bind(v)} = {self.const(zero)[0]};"


def _mixes(op: BinaryOp, child: Expr) -> bool:
    """Whether ``child`` under ``op`` gets parentheses for the reader even where C's
    precedence does not need them: a different logical or bitwise operator, or a shift
    mixed with arithmetic, another shift or a bitwise operator."""
    if not isinstance(child, Binary) or child.op is op:
        return False
    c = child.op
    if (op.is_logical or op.is_bitwise) and (c.is_logical or c.is_bitwise):
        return True
    if op.is_bitwise and (c.is_shift or c.is_compare or c.is_arith):
        return True
    return (op.is_shift and (c.is_shift or c.is_arith)) or (op.is_arith and c.is_shift)


def _leaves(s: Stmt) -> bool:
    """Whether ``s`` always ends the function or the thread (``return`` or ``stop`` last)."""
    if isinstance(s, Seq):
        return bool(s.stmts) and _leaves(s.stmts[-1])
    if isinstance(s, Let):
        return _leaves(s.body)
    return isinstance(s, (Return, Stop))


def _is_empty(s: Stmt | None) -> bool:
    return s is None or isinstance(s, Empty)


def _stable(e: Expr) -> bool:
    """Whether ``e`` has the same value at every iteration of a loop: no read, no call and
    no mutable variable in it."""
    for x in iter_exprs(e):
        if isinstance(x, (Read, Call)):
            return False
        if isinstance(x, Ref) and x.var.mutable:
            return False
    return True


def _float_text(x: np.float32 | np.float64) -> str:
    """The shortest decimal text that reads back as exactly ``x`` in its own precision."""
    ax = abs(float(x))
    if ax == 0.0 or 1e-4 <= ax < 1e16:
        text = np.format_float_positional(x, unique=True, trim="0")
    else:
        text = np.format_float_scientific(x, unique=True, trim="0")
    return text


def _helper_order(kernel: Kernel) -> list[HelperFunc]:
    """The helpers a kernel calls, callees before callers (C needs no prototypes)."""
    by_name = {h.name: h for h in kernel.helpers}
    done: list[HelperFunc] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen or name not in by_name:
            return
        seen.add(name)
        for n in iter_nodes(by_name[name].body):
            if isinstance(n, Call):
                visit(n.func)
        done.append(by_name[name])

    for n in iter_nodes(kernel.body):
        if isinstance(n, Call):
            visit(n.func)
    return done


def _signature(head: str, params: list[str], depth_indent: str = "    ") -> str:
    one = f"{head}({', '.join(params)})"
    if len(one) <= 100:
        return one
    return f"{head}(\n" + ",\n".join(depth_indent + p for p in params) + ")"


def _accesses(body: Stmt, oob_helpers: set[str]) -> bool:
    """Whether ``body`` reads or stores an array, or calls a helper that does (CG-22)."""
    return any(isinstance(n, (Read, Store, Atomic))
               or (isinstance(n, Call) and n.func in oob_helpers) for n in iter_nodes(body))


#: the thread function's flag that makes it test the leading guard (NAT-65)
EDGE = "sarek_edge"


def _row_range(k: _Function, g: RowGuard) -> RowRange:
    """The C of the row range of ``g`` for the launch function (NAT-65): the bounds'
    expressions read only parameters, extents and the thread intrinsics, which the launch
    function has under the same names (its ``sarek_id`` set to the row's first thread);
    the differences are computed in the dialect's 64-bit integer, where the ranges keep them
    (:mod:`sarek_py.codegen.rowsplit`)."""
    k.ranges = {}

    def wide(e: Expr) -> str:
        text, prec = k.expr(e)
        if scalar_type_of(e) is Scalar.I64:
            return _paren(text, prec, _PREC[BinaryOp.SUB] + 1)
        return f"({k.ctype(Scalar.I64)}){_paren(text, prec, _UNARY)}"

    first: list[str] = []
    end: list[str] = []
    whole: list[str] = []
    for b in g.bounds:
        if b.step == 0:
            whole.append(k.expr(b.lhs)[0])
            continue
        assert b.rhs is not None
        diff = f"{wide(b.lhs)} - {wide(b.rhs)}"
        # x >= diff (+ 1 where the test was <=); x <= diff (- 1), so x < diff + 1 (+ 0)
        one = (b.step == 1) != b.strict
        (first if b.step == 1 else end).append(diff + (" + 1" if one else ""))
    return RowRange(tuple(first), tuple(end), tuple(whole))


def emit(kernel: Kernel, d: Dialect, *, checked: bool = True) -> Emitted:
    """C source of ``kernel`` (and the helpers it calls) for dialect ``d``, with its ABI;
    ``checked=False`` leaves the array accesses unchecked (CG-22, CG-24)."""
    why = None if d.refuse is None else d.refuse(kernel)
    if why is not None:  # NAT-4: what the target cannot run exactly
        raise CodegenError(why, kernel.loc)
    kernel = shallow_kernel(kernel)  # no bracket nesting past the compilers' (CG-60)
    helpers = _helper_order(kernel)
    gnamer = Namer()
    kname = gnamer.fresh(kernel.name)
    helper_names = {h.name: gnamer.fresh(h.name) for h in helpers}
    uses_f64 = False
    chunks: list[str] = []
    wrapping: set[WrapOp] = set()
    atomic_loops: set[AtomicLoop] = set()
    extensions: dict[str, str] = {}
    oob_helpers: set[str] = set()
    helper_sites: dict[str, tuple[AccessSite, ...]] = {}
    helper_params = {h.name: h.params for h in helpers}
    storing: set[str] = set()
    for h in helpers:  # callees first
        if any(isinstance(n, (Store, Atomic)) or (isinstance(n, Call) and n.func in storing)
               for n in iter_nodes(h.body)):
            storing.add(h.name)
    check_ranks: set[int] = set()
    at_ranks: set[int] = set()
    get_ranks: set[int] = set()
    set_ranks: set[int] = set()
    oob_param = f"{d.global_pointer} int* {OOB}".strip()
    for h in helpers:  # callees first
        f = _Function(d, helper_names, h.loc, h.name, kname)
        f.in_helper = True
        f.checked = checked
        f.has_oob = checked and _accesses(h.body, oob_helpers)
        f.oob_helpers = frozenset(oob_helpers)
        f.helper_sites = helper_sites
        f.helper_params = helper_params
        f.storing_helpers = frozenset(storing)
        params: list[str] = []
        for p in h.params:
            if isinstance(p.type, ArrayType):
                params.extend(x[0] for x in f.array_params(p))
            else:
                params.append(f"{f.ctype(p.scalar)} {f.bind(p)}")
        if f.has_oob:
            f.namer.hidden(OOB)
            f.namer.hidden(SITE)
            params += [oob_param, f"int {SITE}"]
        if d.thread_param:  # NAT-2: the thread's place, for the intrinsics it reads
            params.append(d.thread_param)
        f.stmt(h.body, 1)
        if f.has_oob:
            oob_helpers.add(h.name)
            helper_sites[h.name] = tuple(f.sites)
        check_ranks |= f.check_ranks
        at_ranks |= f.at_ranks
        get_ranks |= f.get_ranks
        set_ranks |= f.set_ranks
        qual = (d.helper_qualifier + " ") if d.helper_qualifier else ""
        head = f"{qual}{f.ctype(h.result)} {helper_names[h.name]}"
        chunks.append(_signature(head, params) + " {\n" + "\n".join(f.lines) + "\n}\n")
        uses_f64 |= f.uses_f64
        wrapping |= f.wrapping
        atomic_loops |= f.atomic_loops
        for ext, why in f.extensions.items():
            extensions.setdefault(ext, why)

    k = _Function(d, helper_names, kernel.loc, kernel.name, kname)
    k.checked = checked
    k.has_oob = checked and _accesses(kernel.body, oob_helpers)
    k.oob_helpers = frozenset(oob_helpers)
    k.helper_sites = helper_sites
    k.helper_params = helper_params
    k.storing_helpers = frozenset(storing)
    cargs: list[CArg] = []
    params = []
    for p in kernel.params:
        if isinstance(p.type, ArrayType):
            for decl, cname, kind, dim in k.array_params(p):
                params.append(decl)
                cargs.append(CArg(kind or "array", cname, p.name, dim))
        else:
            t = p.scalar
            cname = k.bind(p)
            params.append(f"{k.storage(t)} {cname}")
            cargs.append(CArg("scalar", cname, p.name))
    barrier, stops = has_barrier(kernel), can_stop(kernel)
    params.append(f"{k.ctype(Scalar.I64)} {k.namer.hidden('sarek_threads')}")
    cargs.append(CArg("threads", "sarek_threads"))
    if stops:
        params.append(f"{d.global_pointer} int* {k.namer.hidden('sarek_stop')}".strip())
        cargs.append(CArg("status", "sarek_stop"))
    if k.has_oob:
        params.append(f"{oob_param}")
        k.namer.hidden(OOB)
        cargs.append(CArg("fault", OOB))
    dyn = dynamic_shared(kernel)
    if dyn is not None:  # CG-50: sized by the launch
        for decl, cname, kind in k.dynamic_shared_params(dyn):
            params.append(decl)
            cargs.append(CArg(kind, cname, dyn.name))
    for v in kernel.locals:
        if v is dyn:
            for line in k.dynamic_shared_decl(dyn):
                k.emit(line, 1)
            continue
        k.emit(k.local_decl(v), 1)
    if not barrier and d.driver is None:
        # CG-21: in the kernel's own leading guard when what comes before it is safe; a
        # driver runs only the threads below the count (NAT-31)
        k.count_guard = speculation_guard(kernel.body, k.ranges)
        if k.count_guard is None:
            k.emit("// threads past the launch's count stop here", 1)
            k.emit(f"if (({d.flat_id}) >= sarek_threads) return;", 1)
    if d.driver is not None and not k.has_oob:
        # NAT-65: a guard affine in the thread's x is skipped inside the row's range
        k.row_guard = row_guard(kernel)
        if k.row_guard is not None:
            k.namer.hidden(EDGE)
    k.stmt(kernel.body, 1)
    if d.driver is None:
        chunks.append(_signature(f"{d.kernel_qualifier} {kname}", params) + " {\n"
                      + "\n".join(k.lines) + "\n}\n")
    else:  # NAT-3: the body is one thread's function, the driver runs the launch's threads
        tname = gnamer.fresh(kname + d.thread_suffix)
        edge = [] if k.row_guard is None else [f"bool {EDGE}"]
        chunks.append(_signature(f"{d.kernel_qualifier} {tname}",
                                 [*params, *edge, d.thread_param])
                      + " {\n" + "\n".join(k.lines) + "\n}\n")
        rows = None if k.row_guard is None else _row_range(k, k.row_guard)
        chunks.append(d.driver(kname, tname, params, [a.name for a in cargs], k.has_oob,
                               rows))
    uses_f64 |= k.uses_f64
    wrapping |= k.wrapping
    atomic_loops |= k.atomic_loops
    for ext, why in k.extensions.items():
        extensions.setdefault(ext, why)
    check_ranks |= k.check_ranks
    at_ranks |= k.at_ranks
    get_ranks |= k.get_ranks
    set_ranks |= k.set_ranks
    chunks[:0] = [*check_prelude(d, check_ranks, at_ranks, get_ranks, set_ranks),
                  *wrap_prelude(d, wrapping),
                  *minmax_prelude(d, wrapping),
                  *atomic_prelude(d, atomic_loops, set(extensions))]

    source = _header(d, f"kernel {kernel.name}", uses_f64) + "\n".join(chunks)
    sites = tuple(k.sites)
    abi = KernelAbi(kname, tuple(cargs), barrier, stops, sites,
                    fault_words(sites) if k.has_oob else 0)
    return Emitted(source, abi, tuple(chunks), uses_f64, tuple(sorted(extensions.items())))


def _header(d: Dialect, what: str, uses_f64: bool) -> str:
    lines = [f"// {d.title} for {what}, generated by sarek_py", *d.prelude]
    if uses_f64:
        lines.extend(d.f64_prelude)
    if d.support:  # the linear thread id function (LCH-27)
        lines.extend(("", *d.support))
    return "\n".join(lines) + "\n\n"


def emit_module(kernels: Sequence[Kernel], d: Dialect, what: str = "a module", *,
                checked: bool = True) -> str:
    """One translation unit holding several kernels: the prelude once, each helper once
    (CG-16)."""
    seen: dict[str, str] = {}
    parts: list[str] = []
    uses_f64 = False
    for k in kernels:
        em = emit(k, d, checked=checked)
        uses_f64 |= em.uses_f64
        for chunk in em.functions:
            head = chunk.split("(", 1)[0]
            if head in seen:
                if seen[head] != chunk:
                    raise CodegenError(f"two different C functions would be called "
                                       f"{head.split()[-1]} in one file: emit the kernels "
                                       "one at a time (--kernel)", k.loc)
                continue
            seen[head] = chunk
            parts.append(chunk)
    return _header(d, what, uses_f64) + "\n".join(parts)
