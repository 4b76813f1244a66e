"""Launching a loop nest in tiles, in rows, or flat (specs/tiling.md, TIL-1 … TIL-11).

A :class:`Nest` is the body of a parallel loop nest of two or more dimensions (outermost
loop first) over kernel parameters. :func:`tile_nest` makes one kernel that can number
the iterations either way:

* **tiled** — block ``b`` covers a tile of 32 iterations of the dimension the stores are
  contiguous in (the loop variable of their last index) by ``block / 32`` iterations of the
  next dimension (the loop variable of their second-to-last index, or the next loop in loop
  order when the stores do not agree); the block index numbers the tiles, the remaining
  dimensions outermost; the thread count counts whole tiles;
* **flat** — thread ``t`` is iteration ``t``, the contiguous dimension fastest.

The host chooses (:func:`choose_launch`): flat when whole tiles would pad the nest by more
than a quarter, tiled otherwise, and tells the kernel through a hidden ``bool`` parameter.
All thread arithmetic is 64-bit; a padded thread returns after comparing its zero-based
coordinates with the extents and before adding any lower bound.

:func:`row_nest` makes the kernel of the **rows** numbering (TIL-10 … TIL-14), launched
on a grid of two or three dimensions: block ``(bx, by, bz)`` covers ``block`` consecutive
iterations of the contiguous dimension (``bx`` numbers the blocks of a row) at place
``by`` of the next dimension and place ``bz`` of the others, so a thread's place along the
contiguous dimension is its thread index plus a number the whole block shares, and every
other coordinate is the block's. The grid comes from the host (TIL-12, TIL-14), and the
kernel's guard bounds each loop variable so that the body's offsets of it are proved in
range (TIL-13); the kernel requires of every launch the bounds within which that guard
skips no iteration (``Kernel.ranges``, specs/launch.md LCH-25), so a launch the host did
not choose is refused rather than run short. It has no flat branch: the
host launches the nest's flat kernel instead when whole rows would pad too much or the
grid would not fit (a uniform branch on a flag was measured to stop PoCL's work-group
vectorizer, TIL-11).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import attrs

from sarek_py.analysis.ranges import Range, offsets, type_range
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.evaluate import host_eval
from sarek_py.ir.nodes import (
    Assign,
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    If,
    Intrinsic,
    Kernel,
    Let,
    Ref,
    Return,
    Stmt,
    Store,
    Var,
    iter_stmts,
    seq,
    var,
)
from sarek_py.ir.requires_check import range_problem
from sarek_py.ir.typeof import scalar_type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import free_vars, fresh_name, var_names

#: iterations of the contiguous dimension in one tile (a warp's worth)
TILE = 32
#: whole tiles may pad the nest by at most this fraction before the host numbers flat
MAX_PADDING = 0.25
#: whole rows may pad the nest by at most this fraction (TIL-11): as many padded threads
#: as iterations
MAX_ROW_PADDING = Fraction(1)


class TilingRefused(SarekError):
    """A nest that cannot be launched in tiles (one dimension, or a reduction)."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{message} ({rule})")
        self.rule = rule


@attrs.frozen
class Loop:
    """One loop of a nest: ``for var = lower to upper`` (inclusive bounds)."""

    var: Var
    lower: Expr
    upper: Expr


@attrs.frozen
class Nest:
    """A parallel loop nest to launch: name and parameters of the kernel, the loops
    (outermost first), the body run once per iteration, and the kernel's locals."""

    name: str
    params: tuple[Var, ...]
    loops: tuple[Loop, ...]
    body: Stmt
    locals: tuple[Var, ...] = ()


@attrs.frozen
class TiledKernel:
    """The kernel of a nest and what the host needs to launch it."""

    kernel: Kernel
    nest: Nest
    contiguous: int  # index in nest.loops of the dimension the stores are contiguous in
    next: int  # index of the second tile dimension
    flat_param: str  # the hidden bool parameter: true = number the iterations flat


@attrs.frozen
class TileChoice:
    """The host's decision for one launch."""

    tiled: bool
    thread_count: int  # 64-bit: whole tiles (tiled) or iterations (flat)
    block: int
    padding: float  # padded / total - 1 of whole tiles (0 when there is no iteration)


def _loop_of(e: Expr, loops: tuple[Loop, ...]) -> int | None:
    """The one loop whose variable index expression ``e`` uses, if exactly one."""
    used = [i for i, lp in enumerate(loops) if lp.var in free_vars(e)]
    return used[0] if len(used) == 1 else None


def tile_dims(nest: Nest, one: bool = False) -> tuple[int, int]:
    """The contiguous and the next dimension of a nest (TIL-2, TIL-3), as loop indices;
    ``one``: a nest of one dimension is its own contiguous dimension, with no next (the
    rows kernel, TIL-15: the next is returned as -1)."""
    loops = nest.loops
    if len(loops) < 2 and not (one and len(loops) == 1):
        raise TilingRefused("TIL-1", f"nest {nest.name} has one dimension: nothing to tile")
    # a store into the kernel's own (private, per-thread) array is no result of the nest
    private = set(nest.locals)
    stores = [s for s in iter_stmts(nest.body) if isinstance(s, Store)
              and s.array not in private]
    loop_vars = {lp.var for lp in loops}
    for s in stores:
        used: set[Var] = set()
        for ix in s.index:
            used |= free_vars(ix) & loop_vars
        if used != loop_vars:
            raise TilingRefused(
                "TIL-1", f"nest {nest.name} has a reduction: the store into {s.array.name} does "
                "not use every loop variable")
    if len(loops) == 1:
        return 0, -1
    lasts = {_loop_of(s.index[-1], loops) for s in stores}
    contiguous = lasts.pop() if len(lasts) == 1 and None not in lasts else len(loops) - 1
    assert contiguous is not None
    seconds = {_loop_of(s.index[-2], loops) for s in stores if len(s.index) >= 2}
    nxt = seconds.pop() if len(seconds) == 1 and None not in seconds else None
    if nxt is None or nxt == contiguous:
        # the next one in loop order: the loop just outside the contiguous one, or inside
        nxt = contiguous - 1 if contiguous > 0 else 1
    return contiguous, nxt


def _c64(v: int) -> Const:
    return Const(v, Scalar.I64)


def _i64(e: Expr) -> Expr:
    return e if scalar_type_of(e) is Scalar.I64 else Cast(Scalar.I64, e)


def _bin(op: BinaryOp, a: Expr, b: Expr) -> Binary:
    return Binary(op, a, b)


def _bind_loop_vars(loops: tuple[Loop, ...], z: list[Var], body: Stmt) -> Stmt:
    """``body`` under each loop variable bound to its lower bound plus its zero-based
    coordinate ``z`` (converted to the variable's type: checked against its extent
    first, TIL-6, TIL-7)."""
    for lp, zd in reversed(list(zip(loops, z, strict=True))):
        zc: Expr = Ref(zd) if lp.var.scalar is Scalar.I64 else Cast(lp.var.scalar, Ref(zd))
        body = Let(lp.var, _bin(BinaryOp.ADD, lp.lower, zc), body)
    return body


def _bind_extents(loops: tuple[Loop, ...], ext: list[Var], body: Stmt) -> Stmt:
    """``body`` under each extent ``upper - lower + 1``, in ``i64`` (TIL-7)."""
    for lp, n in reversed(list(zip(loops, ext, strict=True))):
        body = Let(n, _bin(BinaryOp.ADD, _bin(BinaryOp.SUB, _i64(lp.upper), _i64(lp.lower)),
                           _c64(1)), body)
    return body


def _taken(nest: Nest) -> set[str]:
    """The names the kernel of ``nest`` already uses (parameters, locals, loop variables,
    every variable of the body): its own new names avoid them, so that its printed text
    reads back the same (a ``let`` never hides a parameter the body reads)."""
    return ({p.name for p in nest.params} | {v.name for v in nest.locals}
            | {lp.var.name for lp in nest.loops} | var_names(nest.body))


def tile_nest(nest: Nest) -> TiledKernel:
    """The kernel that runs ``nest`` tiled or flat, as the host says (TIL-4 … TIL-7)."""
    contiguous, nxt = tile_dims(nest)
    loops = nest.loops
    taken = _taken(nest)
    flat_name = "tiles_flat"
    while flat_name in taken:
        flat_name += "_"
    taken.add(flat_name)
    flat = var(flat_name, Scalar.BOOL)
    k = len(loops)
    # dimension order for numbering: contiguous fastest, then next, then the others
    # from the innermost outwards
    order = [contiguous, nxt] + [d for d in reversed(range(k)) if d not in (contiguous, nxt)]
    ext = [var(fresh_name(f"n_{lp.var.name}", taken), Scalar.I64) for lp in loops]
    z = [var(fresh_name(f"z_{lp.var.name}", taken), Scalar.I64, mutable=True) for lp in loops]
    t = var(fresh_name("thread", taken), Scalar.I64)
    rest = var(fresh_name("rest", taken), Scalar.I64, mutable=True)

    def split(skip: int) -> list[Stmt]:
        """Assign z[d] for the dimensions in ``order`` past the first ``skip`` ones from
        ``rest`` (row-major, the earlier in ``order`` the faster)."""
        out: list[Stmt] = []
        for d in order[skip:]:
            out.append(Assign(z[d], _bin(BinaryOp.MOD, Ref(rest), Ref(ext[d]))))
            out.append(Assign(rest, _bin(BinaryOp.DIV, Ref(rest), Ref(ext[d]))))
        return out

    # flat: thread t is iteration t; threads past the iteration count return
    flat_branch = seq(Assign(rest, Ref(t)), *split(0))
    # tiled: tile coordinates from the block index, place in the tile from the thread index
    tx = _bin(BinaryOp.MOD, _i64(Intrinsic("thread_idx_x")), _c64(TILE))
    ty = _bin(BinaryOp.DIV, _i64(Intrinsic("thread_idx_x")), _c64(TILE))
    rows = _bin(BinaryOp.DIV, _i64(Intrinsic("block_dim_x")), _c64(TILE))
    tiles_c = var(fresh_name("tiles_c", taken), Scalar.I64)
    tiles_n = var(fresh_name("tiles_n", taken), Scalar.I64)
    tiled_branch = Let(
        tiles_c, _bin(BinaryOp.DIV, _bin(BinaryOp.ADD, Ref(ext[contiguous]), _c64(TILE - 1)),
                      _c64(TILE)),
        Let(tiles_n, _bin(BinaryOp.DIV, _bin(BinaryOp.SUB, _bin(BinaryOp.ADD, Ref(ext[nxt]),
                                                                    rows), _c64(1)), rows),
            seq(Assign(rest, _i64(Intrinsic("block_idx_x"))),
                Assign(z[contiguous], _bin(BinaryOp.ADD, _bin(
                    BinaryOp.MUL, _bin(BinaryOp.MOD, Ref(rest), Ref(tiles_c)), _c64(TILE)), tx)),
                Assign(rest, _bin(BinaryOp.DIV, Ref(rest), Ref(tiles_c))),
                Assign(z[nxt], _bin(BinaryOp.ADD, _bin(
                    BinaryOp.MUL, _bin(BinaryOp.MOD, Ref(rest), Ref(tiles_n)), rows), ty)),
                Assign(rest, _bin(BinaryOp.DIV, Ref(rest), Ref(tiles_n))),
                *split(2))))
    # a padded thread returns: some coordinate is past its extent, or (flat) rest > 0
    outside: Expr = _bin(BinaryOp.GT, Ref(rest), _c64(0))
    for d in range(k):
        outside = _bin(BinaryOp.OR, outside, _bin(BinaryOp.GE, Ref(z[d]), Ref(ext[d])))
    # only then are the lower bounds added: lower + z <= upper cannot overflow
    body = _bind_loop_vars(loops, z, nest.body)
    main = seq(
        If(Ref(flat), flat_branch, tiled_branch),
        If(outside, Return()),
        body,
    )
    main = _bind_extents(loops, ext, main)
    main = Let(t, _bin(BinaryOp.ADD, _bin(BinaryOp.MUL, _i64(Intrinsic("block_idx_x")),
                                          _i64(Intrinsic("block_dim_x"))),
                       _i64(Intrinsic("thread_idx_x"))), main)
    kernel = Kernel(nest.name, (*nest.params, flat), (*nest.locals, *z, rest), main)
    return TiledKernel(kernel, nest, contiguous, nxt, flat_name)


def choose_launch(tk: TiledKernel, extents: tuple[int, ...], block: int = 256) -> TileChoice:
    """Tiled when whole tiles pad the nest by at most a quarter, flat otherwise (TIL-5)."""
    total = 1
    for n in extents:
        total *= max(n, 0)
    if total == 0:
        return TileChoice(False, 0, block, 0.0)
    rows = block // TILE
    if block % TILE or rows < 1:
        return TileChoice(False, total, block, 0.0)
    padded = 1
    for d, n in enumerate(extents):
        if d == tk.contiguous:
            padded *= -(-n // TILE) * TILE
        elif d == tk.next:
            padded *= -(-n // rows) * rows
        else:
            padded *= n
    padding = padded / total - 1.0
    if padded - total > total * MAX_PADDING:
        return TileChoice(False, total, block, padding)
    return TileChoice(True, padded, block, padding)


def nest_extents(tk: TiledKernel, scalars: Mapping[str, Any]) -> tuple[int, ...]:
    """The iteration count of each loop, evaluated on the host from the bounds."""
    out = []
    for lp in tk.nest.loops:
        n = int(host_eval(lp.upper, scalars)) - int(host_eval(lp.lower, scalars)) + 1
        out.append(max(n, 0))
    return tuple(out)


def tiled_args(tk: TiledKernel, args: Mapping[str, Any], block: int = 256,
               force: bool | None = None) -> tuple[dict[str, Any], TileChoice]:
    """The kernel's arguments (the hidden flag added) and the launch choice; ``force``
    True/False overrides the choice (tiled/flat) for measurements and tests."""
    choice = choose_launch(tk, nest_extents(tk, args), block)
    if force is not None and force != choice.tiled:
        total = 1
        for n in nest_extents(tk, args):
            total *= n
        if force:
            rows = block // TILE
            padded = 1
            for d, n in enumerate(nest_extents(tk, args)):
                step = TILE if d == tk.contiguous else rows if d == tk.next else 1
                padded *= -(-n // step) * step
            choice = TileChoice(True, padded, block, padded / max(total, 1) - 1.0)
        else:
            choice = TileChoice(False, total, block, choice.padding)
    full = dict(args)
    full[tk.flat_param] = not choice.tiled
    return full, choice


@attrs.frozen
class RowKernel:
    """The rows kernel of a nest (TIL-10), which loop is its contiguous dimension, which
    is its next (the grid's ``y``), the others (the grid's ``z``, the innermost first),
    and the offsets of each loop variable it proves in range (TIL-13)."""

    kernel: Kernel
    nest: Nest
    contiguous: int
    #: the loop numbered by ``block_idx_y`` (-1: a nest of one dimension, TIL-15)
    next: int = 0
    #: the loops numbered together by ``block_idx_z``, the innermost (fastest) first
    others: tuple[int, ...] = ()
    #: per loop, the offsets of its variable the kernel proves in range (TIL-13)
    margins: tuple[Range, ...] = ()


#: the largest i32: the blocks per row of a rows launch fit in it (TIL-12)
I32_MAX = 2**31 - 1
#: the largest grid extent along ``y`` and ``z`` on every device (CUDA's 65535; TIL-14)
GRID_YZ_MAX = 65535


def _c32(v: int) -> Const:
    return Const(v, Scalar.I32)


def _at_least_one(e: Expr) -> Expr:
    """``max(e, 1)``: ``e`` itself wherever a thread runs (every extent of a launched nest
    is at least 1), and a divisor the emitter can see is never zero (CG-21)."""
    one = _c64(1) if scalar_type_of(e) is Scalar.I64 else _c32(1)
    return Intrinsic("max", (e, one))


def row_margins(nest: Nest) -> tuple[Range, ...]:
    """Per loop, the least and greatest constant offset ``c`` of ``var + c`` in the body
    (TIL-13): the rows kernel proves those sums in range."""
    return tuple(offsets(nest.body, lp.var) for lp in nest.loops)


def _bounds_too_near_the_ends(nest: Nest, lowers: Sequence[Expr], uppers: Sequence[Expr],
                              margins: Sequence[Range]) -> Expr | None:
    """``lower < MIN - cmin || upper > MAX - cmax`` for each loop whose body adds a
    negative (positive) offset to its variable: where ``var + c`` could wrap (TIL-13)."""
    tests: list[Expr] = []
    for lp, lower, upper, (cmin, cmax) in zip(nest.loops, lowers, uppers, margins,
                                              strict=True):
        t = lp.var.scalar
        t_lo, t_hi = type_range(t)
        # a constant bound is decided here (the host program reads no `1 < -2147483647`)
        if cmin < 0 and not (isinstance(lower, Const) and isinstance(lower.value, int)
                             and lower.value >= t_lo - cmin):
            tests.append(_bin(BinaryOp.LT, lower, Const(t_lo - cmin, t)))
        if cmax > 0 and not (isinstance(upper, Const) and isinstance(upper.value, int)
                             and upper.value <= t_hi - cmax):
            tests.append(_bin(BinaryOp.GT, upper, Const(t_hi - cmax, t)))
    if not tests:
        return None
    out = tests[0]
    for x in tests[1:]:
        out = _bin(BinaryOp.OR, out, x)
    return out


def row_nest(nest: Nest, one_dim: bool = False) -> RowKernel:
    """The kernel that runs ``nest`` in rows of ``block`` iterations of its contiguous
    dimension on a grid of two or three dimensions (TIL-10, TIL-12, TIL-13, TIL-14), or
    with ``one_dim`` a loop of one dimension on a grid of one (TIL-15):
    thread ``t`` of block ``(bx, by, bz)`` is at ``bx * block + t`` along the contiguous
    dimension, at ``by`` along the next one, and ``bz`` numbers the places of the others
    (the innermost fastest; the outermost takes the rest, with no division). A thread
    adds each lower bound to its coordinate in 64 bits (no overflow), returns when that
    is past the upper bound, or when the bounds are so near the ends of the loop
    variable's type that an offset of it in the body could wrap, and only then converts
    it to the loop variable's type (TIL-6)."""
    contiguous, nxt = tile_dims(nest, one=one_dim)
    loops = nest.loops
    for lp in loops:  # (a parallel loop's index is an i32, HP-4)
        if lp.var.scalar is not Scalar.I32:
            raise TilingRefused("TIL-13", f"nest {nest.name}: the rows kernel numbers i32 "
                                f"loop variables, and {lp.var.name} is {lp.var.scalar}")
    k = len(loops)
    others = [d for d in reversed(range(k)) if d not in (contiguous, nxt)]
    taken = _taken(nest)
    ext = [var(fresh_name(f"n_{lp.var.name}", taken), Scalar.I64) for lp in loops]
    z = [var(fresh_name(f"z_{lp.var.name}", taken), Scalar.I64) for lp in loops]
    # each variable's value in 64 bits: an i32 bound plus a coordinate below 2**62
    wide_vars = [var(fresh_name(f"{lp.var.name}_64", taken), Scalar.I64) for lp in loops]
    # the block's place among the other dimensions (32-bit: block_idx_z >= 0)
    place = [var(fresh_name(f"place_{d}", taken), Scalar.I32) for d in range(k)]
    margins = row_margins(nest)
    # a thread outside the nest: past an upper bound (a padded thread of the last block
    # of a row), or at a value of the loop variable so near the end of its type that an
    # offset of it in the body could wrap (TIL-13; never for a launch the host makes,
    # which passes such bounds to the flat kernel, and refused for any other launch by
    # the kernel's conditions, LCH-25)
    tests: list[Expr] = []
    for d, lp in enumerate(loops):
        t_lo, t_hi = type_range(lp.var.scalar)
        cmin, cmax = margins[d]
        at = Ref(wide_vars[d])
        if cmin < 0:
            tests.append(_bin(BinaryOp.LT, at, _c64(t_lo - cmin)))
        upper = _i64(lp.upper)
        if cmax > 0:
            upper = Intrinsic("min", (upper, _c64(t_hi - cmax)))
        tests.append(_bin(BinaryOp.GT, at, upper))
    outside = tests[0]
    for x in tests[1:]:
        outside = _bin(BinaryOp.OR, outside, x)
    body = nest.body
    for lp, w in reversed(list(zip(loops, wide_vars, strict=True))):
        body = Let(lp.var, Cast(Scalar.I32, Ref(w)), body)
    main: Stmt = seq(If(outside, Return()), body)
    for d in reversed(range(k)):  # each variable's value in 64 bits: lower + coordinate
        main = Let(wide_vars[d], _bin(BinaryOp.ADD, _i64(loops[d].lower), Ref(z[d])), main)
    # the others' coordinates from block_idx_z, the innermost fastest; each place_d is
    # what is left of the place above dimension d; the outermost takes the rest
    used_ext: list[int] = []
    for pos in reversed(range(len(others))):
        d = others[pos]
        above: Expr = Ref(place[others[pos - 1]]) if pos > 0 else Intrinsic("block_idx_z")
        if pos == len(others) - 1:
            main = Let(z[d], _i64(above), main)
            continue
        # a 32-bit division: the grid's z extent is at most GRID_YZ_MAX (TIL-14)
        used_ext.append(d)
        div = _at_least_one(Cast(Scalar.I32, Ref(ext[d])))
        main = Let(z[d], _i64(_bin(BinaryOp.MOD, above, div)),
                   Let(place[d], _bin(BinaryOp.DIV, above, div), main))
    if nxt >= 0:  # (a nest of one dimension has no next: TIL-15)
        main = Let(z[nxt], _i64(Intrinsic("block_idx_y")), main)
    main = Let(z[contiguous], _bin(BinaryOp.ADD, _bin(
        BinaryOp.MUL, _i64(Intrinsic("block_idx_x")), _i64(Intrinsic("block_dim_x"))),
        _i64(Intrinsic("thread_idx_x"))), main)
    # the extents only the dimensions between the innermost and the outermost of the
    # others divide by (four or more dimensions)
    main = _bind_extents(tuple(loops[d] for d in sorted(used_ext)),
                         [ext[d] for d in sorted(used_ext)], main)
    params = nest.params
    kernel = Kernel(nest.name, params, nest.locals, main,
                    ranges=row_conditions(nest, margins, params))
    return RowKernel(kernel, nest, contiguous, nxt, tuple(others), margins)


def row_conditions(nest: Nest, margins: Sequence[Range],
                   params: Sequence[Var]) -> tuple[Expr, ...]:
    """What the rows kernel requires of every launch (TIL-13, specs/launch.md LCH-25):
    per loop whose body adds a negative (positive) offset to its variable, ``lower >= MIN
    - cmin`` (``upper <= MAX - cmax``), the bounds within which its guard skips no
    iteration; a constant bound that meets it needs none. A bound that is not an
    expression over the nest's scalar parameters cannot be checked at a launch: the nest
    is refused (``TilingRefused``), never given a kernel that could skip in silence."""
    out: list[Expr] = []
    for lp, (cmin, cmax) in zip(nest.loops, margins, strict=True):
        t = lp.var.scalar
        t_lo, t_hi = type_range(t)
        for bound, edge, op, needed in ((lp.lower, t_lo - cmin, BinaryOp.GE, cmin < 0),
                                        (lp.upper, t_hi - cmax, BinaryOp.LE, cmax > 0)):
            if not needed or (isinstance(bound, Const) and isinstance(bound.value, int)
                              and (bound.value >= edge if op is BinaryOp.GE
                                   else bound.value <= edge)):
                continue
            cond = _bin(op, bound, Const(edge, t))
            bad = range_problem(cond, params)
            if bad is not None:
                raise TilingRefused("TIL-13", f"nest {nest.name}: the rows kernel requires "
                                    f"a bound of {lp.var.name} within {edge} at every "
                                    f"launch, and cannot check {bad[0]}")
            out.append(cond)
    return tuple(out)


def rows_bounds_too_near_expr(rk: RowKernel, starts: Sequence[Expr],
                              stops: Sequence[Expr]) -> Expr | None:
    """TIL-13 as a host expression over the loops' bounds: whether some offset of a loop
    variable in the body could wrap, so the rows kernel would return for every thread
    and the host launches the flat kernel instead (``None``: never)."""
    return _bounds_too_near_the_ends(rk.nest, starts, stops, rk.margins)


def product(factors: Sequence[Expr]) -> Expr:
    """``f0 * f1 * …`` (left to right) of one or more ``i64`` factors."""
    out = factors[0]
    for f in factors[1:]:
        out = _bin(BinaryOp.MUL, out, f)
    return out


def row_count_expr(rk: RowKernel, extents: Sequence[Expr], block: int) -> Expr:
    """The thread count of a rows launch as a host expression over the nest's extents
    (``i64``, at least 0): whole rows of ``block`` along the contiguous dimension times
    the other extents (TIL-10)."""
    return product([_bin(BinaryOp.MUL, _bin(BinaryOp.DIV, _bin(BinaryOp.ADD, e, _c64(block - 1)),
                                            _c64(block)), _c64(block))
                    if d == rk.contiguous else e for d, e in enumerate(extents)])


def row_blocks_expr(rk: RowKernel, extents: Sequence[Expr], block: int) -> Expr:
    """``ceil(n_c / block)``, the blocks per row of a rows launch (its grid's ``x``
    extent), as an ``i64`` host expression over the nest's extents (TIL-12)."""
    return _bin(BinaryOp.DIV, _bin(BinaryOp.ADD, extents[rk.contiguous], _c64(block - 1)),
                _c64(block))


def _others_expr(rk: RowKernel, extents: Sequence[Expr]) -> Expr | None:
    """The grid's ``z`` extent: the product of the other dimensions' extents (``None``
    for a nest of two dimensions)."""
    return product([extents[d] for d in rk.others]) if rk.others else None


def row_grid_expr(rk: RowKernel, extents: Sequence[Expr], block: int) -> tuple[Expr, ...]:
    """The grid of a rows launch (TIL-14) as ``i32`` host expressions: the blocks per row,
    the next dimension's extent and (three or more dimensions) the product of the
    others'; the host launches it only when each fits (TIL-11)."""
    if rk.next < 0:  # one dimension: a grid of blocks along it (TIL-15)
        return (Cast(Scalar.I32, row_blocks_expr(rk, extents, block)),)
    grid = [row_blocks_expr(rk, extents, block), extents[rk.next]]
    z = _others_expr(rk, extents)
    if z is not None:
        grid.append(z)
    return tuple(Cast(Scalar.I32, e) for e in grid)


def rows_pad_too_much_expr(rk: RowKernel, extents: Sequence[Expr], block: int) -> Expr:
    """TIL-11 as a host expression: the flat kernel runs instead when nothing runs, when
    whole rows pad the nest by more than ``MAX_ROW_PADDING``, or when the grid does not
    fit (TIL-12, TIL-14), or its thread count passes the most a launch numbers (LCH-21,
    TIL-15): ``total == 0 || (rows - total) * den > total * num || rows_c > I32_MAX ||
    rows > I32_MAX || n_next > 65535 || n_others > 65535``."""
    total = product(extents)
    padded = row_count_expr(rk, extents, block)
    num, den = MAX_ROW_PADDING.numerator, MAX_ROW_PADDING.denominator
    out = _bin(BinaryOp.OR, _bin(BinaryOp.EQ, total, _c64(0)),
               _bin(BinaryOp.GT, _bin(BinaryOp.MUL, _bin(BinaryOp.SUB, padded, total),
                                      _c64(den)), _bin(BinaryOp.MUL, total, _c64(num))))
    out = _bin(BinaryOp.OR, out, _bin(BinaryOp.GT, row_blocks_expr(rk, extents, block),
                                      _c64(I32_MAX)))
    # a launch numbers at most I32_MAX threads (LCH-21): whole rows of a loop of up to
    # I32_MAX iterations may pad past it, where its flat launch fits (TIL-15)
    out = _bin(BinaryOp.OR, out, _bin(BinaryOp.GT, padded, _c64(I32_MAX)))
    if rk.next >= 0:
        out = _bin(BinaryOp.OR, out, _bin(BinaryOp.GT, extents[rk.next], _c64(GRID_YZ_MAX)))
    z = _others_expr(rk, extents)
    if z is not None:
        out = _bin(BinaryOp.OR, out, _bin(BinaryOp.GT, z, _c64(GRID_YZ_MAX)))
    return out


def _known(extents: tuple[int, ...]) -> list[Expr]:
    return [_c64(max(n, 0)) for n in extents]


def row_count(rk: RowKernel, extents: tuple[int, ...], block: int = 256) -> int:
    """:func:`row_count_expr` at known extents."""
    return int(host_eval(row_count_expr(rk, _known(extents), block), {}))


def row_blocks(rk: RowKernel, extents: tuple[int, ...], block: int = 256) -> int:
    """:func:`row_blocks_expr` at known extents: the grid's ``x`` extent (TIL-12)."""
    return int(host_eval(row_blocks_expr(rk, _known(extents), block), {}))


def row_grid(rk: RowKernel, extents: tuple[int, ...], block: int = 256) -> tuple[int, ...]:
    """:func:`row_grid_expr` at known extents (each must fit: TIL-11)."""
    known = _known(extents)
    return tuple(int(host_eval(e.arg if isinstance(e, Cast) else e, {}))
                 for e in row_grid_expr(rk, known, block))


def rows_pad_too_much(rk: RowKernel, extents: tuple[int, ...], block: int = 256) -> bool:
    """:func:`rows_pad_too_much_expr` at known extents."""
    return bool(host_eval(rows_pad_too_much_expr(rk, _known(extents), block), {}))
