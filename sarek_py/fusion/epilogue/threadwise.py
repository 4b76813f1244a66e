"""Thread-wise fusion of two launches of the same shape (specs/fusion-legality.md LEG-30,
LEG-31).

Two kernels launched on the same grid and block shape, as PolyBench's 2-D stencils and a
2-D epilogue are, fuse into one kernel in which each thread runs the producer's body and
then the consumer's. That is the unfused pair exactly when no thread's consumer part
meets another thread's producer part:

- every element of a buffer P writes that C(t) reads is written by no thread of P other
  than t (so C(t) reads what P(t) left, or what no thread of P writes);
- every element C(t) writes is read or written by no thread of P other than t.

Each condition is a question to Fourier-Motzkin (:mod:`sarek_py.analysis.affine.fm`) over
the subscripts and path conditions of the accesses (:func:`sarek_py.analysis.affine.paths.accesses`,
weaker conditions: sound), with the thread coordinates of P's thread ``u`` renamed apart
from C's ``t``, and ``u != t`` split into its six strict cases. No bound of the launch
shape enters the proof, so it holds for every launch shape; integer scalar arguments
that the proof needed as numbers (a row length ``nj`` multiplying a row index) are
pinned by the fused kernel's ``range(p_nj == 2048)`` conditions, checked at each launch
(LCH-25).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import attrs
import numpy as np

from sarek_py.analysis.affine.conditions import Constraint, Dnf, ge0
from sarek_py.analysis.affine.fm import dnf_is_empty
from sarek_py.analysis.affine.forms import AffineCtx, AffineForm, Atom, AtomKey, atom_key, to_affine
from sarek_py.analysis.affine.paths import Access, accesses
from sarek_py.analysis.affine.wrap import find_wrap, guarded_exprs, tests_and_lets
from sarek_py.fusion.epilogue.accesses import accesses_stmt, stopping_call
from sarek_py.fusion.epilogue.buffers import arg_buffer
from sarek_py.fusion.epilogue.fuse_kernels import (
    consumer_names,
    ids,
    merged_declarations,
    producer_names,
)
from sarek_py.fusion.epilogue.legality import derive_shared, partial_alias
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.intrinsics import AXES
from sarek_py.ir.nodes import (
    Barrier,
    Binary,
    BinaryOp,
    Const,
    Expr,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Read,
    Ref,
    Return,
    Stmt,
    Stop,
    Store,
    Var,
    fresh_id,
    reserve_ids,
    seq,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.requires import FusionRequires, ThreadStep
from sarek_py.ir.thread_index import canonical_thread_index
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import RenameCtx, iter_nodes, map_node, max_var_id, rename

#: intrinsics with one value in every thread of a launch
_UNIFORM = frozenset(f"{k}_{a}" for k in ("block_dim", "grid_dim") for a in AXES)
#: the thread's coordinates: two threads are one thread exactly when all three agree
_COORDS = tuple(Intrinsic(f"global_idx_{a}") for a in AXES)
#: the words of a refusal that found two threads meeting (not a construct, not a doubt)
_MEETS = "which may be an element"
#: the thread's flat id: two threads are one thread exactly when it agrees
_FLAT = Intrinsic("global_thread_id")


@attrs.frozen
class _Site:
    """An access of a buffer by one kernel: its subscript forms (``None`` where not
    affine), its (weaker) path condition, whether it writes, how the user wrote it."""

    buffer: Hashable
    index: tuple[AffineForm | None, ...] | None
    path: Dnf
    write: bool
    text: str
    node: Read | Store | None
    #: for a subscript read as row and column ``A * W + B`` (``0 <= B < W`` proved on
    #: its path): the row length ``W``; the index is then ``(A, B)``
    width: AtomKey | None = None
    #: a subscript read as ``((A * W1 + B1) * W2 + B2) …`` with numbers ``W1, W2 …``
    #: (``0 <= Bk < Wk`` proved on its path): the forms ``(A, B1, B2, …)`` and the
    #: widths; two such subscripts with the same widths are one element exactly when
    #: every form agrees (LEG-33)
    parts: tuple[tuple[AffineForm, ...], tuple[int, ...]] | None = None


def _shape(lc: Launch) -> tuple[tuple[int | Expr, ...], tuple[int | Expr, ...]]:
    """The launch's grid and block shape, padded with 1 to one length (extents are numbers
    or host expressions, compared as written: one segment of launches, LEG-10)."""
    grid, block = lc.grid, lc.block_shape
    pad = 3 if grid or block else 0
    return (tuple(grid) + (1,) * (pad - len(grid)),
            tuple(block) + (1,) * (pad - len(block)))


def _refuse_constructs(k: Kernel, role: str) -> None:
    for n in iter_nodes(k.body):
        what = None
        if isinstance(n, Barrier):
            what = "a barrier"
        elif isinstance(n, Stop):
            what = "a stop"
        elif isinstance(n, Return) and role == "producer":
            what = "a return (the consumer's part would not run after it)"
        if what is not None:
            raise FusionRefused(
                "LEG-31", f"{role} {k.name} has {what}: thread-wise fusion runs the "
                "producer's body, then the consumer's, in each thread, without either",
                n.loc or k.loc)
    stops = stopping_call(k.body, k.helpers)
    if stops is not None:
        raise FusionRefused(
            "LEG-31", f"{role} {k.name} calls {stops}, which may stop: thread-wise fusion "
            "runs the producer's body, then the consumer's, in each thread, without a stop",
            k.loc)


Pins = tuple[Expr, ...]


ArgKey = tuple[str, int, Scalar]


def _arg_key(v: object, t: Scalar, numbers: bool) -> ArgKey | None:
    """What identifies the value of a scalar argument: a number (``numbers``: as itself,
    else as a value equal arguments share), a host variable; ``None`` for anything else."""
    if isinstance(v, (bool, np.bool_)) or not t.is_int:
        return None
    if isinstance(v, (int, np.integer)):
        return ("number", int(v), t) if numbers else ("value", int(v), t)
    if isinstance(v, Ref):
        return ("host", v.var.id, t)
    return None


def _argument_facts(p: Launch, pk: Kernel, c: Launch, ca: Kernel, ck: Kernel,
                    numbers: bool) -> tuple[dict[Var, Expr], dict[Var, Expr], Pins,
                                            frozenset[int]]:
    """Bind each integer scalar parameter to what its launch passes: arguments of equal
    value (one number, one host variable) to one uniform unknown, and with ``numbers``
    numbers to themselves. Returns the bindings of P and of C, the conditions the fused
    kernel must then carry (``p_nj == c_nj``, ``p_nj == 20``) and the unknowns' ids."""
    atoms: dict[ArgKey, Var] = {}
    groups: dict[ArgKey, list[Var]] = {}
    binds: list[dict[Var, Expr]] = [{}, {}]
    cnames = _consumer_names(p, c, pk, ck)
    for side, (lc, k) in enumerate(((p, pk), (c, ca))):
        named = lc.by_name
        for q in k.params:
            if q.is_array or not isinstance(q.type, Scalar) or q.name not in named:
                continue
            key = _arg_key(named[q.name], q.type, numbers)
            if key is None:
                continue
            fused = producer_names.var(q) if side == 0 else cnames.var(ck.param(q.name))
            groups.setdefault(key, []).append(fused)
            if key[0] == "number":
                binds[side][q] = Const(key[1], q.type)
                continue
            if key not in atoms:
                reserve_ids(max(max_var_id(pk), max_var_id(ca)))
                atoms[key] = Var(f"arg{len(atoms)}", fresh_id(), q.type)
            binds[side][q] = Ref(atoms[key])
    pins: list[Expr] = []
    for key, vs in groups.items():
        if key[0] == "number":
            pins += [Binary(BinaryOp.EQ, Ref(v), Const(key[1], v.scalar)) for v in vs]
        else:
            pins += [Binary(BinaryOp.EQ, Ref(a), Ref(b)) for a, b in zip(vs, vs[1:], strict=False)]
    return binds[0], binds[1], tuple(pins), frozenset(v.id for v in atoms.values())


def _consumer_names(p: Launch, c: Launch, pk: Kernel, ck: Kernel) -> RenameCtx:
    shared = derive_shared(p, c)
    return consumer_names(pk, ck, shared, ids(pk, ck).c_shift)


def _sites(lc: Launch, k: Kernel, role: str, body: Stmt, uniform: frozenset[int],
           binds: Mapping[Var, Expr]) -> list[_Site]:
    """The accesses of the kernel's array parameters, ``binds`` giving what scalar
    parameters stand for (read through, so that the texts stay the user's)."""
    params = {p.id: i for i, p in enumerate(k.params) if p.is_array}
    defs = {**binds, **{n.var: n.value for n in iter_nodes(body) if isinstance(n, Let)
                        and not n.var.mutable and isinstance(n.var.type, Scalar)}}
    out: list[_Site] = []
    for a in accesses(body, AffineCtx(defs=dict(binds))):
        arr = a.node.array
        if arr.id not in params:
            continue  # a local or shared array: this thread's block only
        buf = arg_buffer(lc, params[arr.id], role)
        if buf is None:
            raise FusionRefused("LEG-1", f"launch of {k.name} binds a scalar to the array "
                                f"{arr.name}")
        site = _Site(buf, a.index, a.path, isinstance(a.node, Store), _text(a), a.node)
        if len(a.index) == 1 and a.index[0] is None:
            site = _delinearized(site, a.node.index[0], defs, uniform)
        out.append(site)
    for acc in accesses_stmt(body, k.helpers):  # arrays passed to helper functions
        if acc.index is None and acc.array.id in params:
            buf = arg_buffer(lc, params[acc.array.id], role)
            out.append(_Site(buf, None, Dnf.true(), acc.write,
                             f"{acc.array.name} (passed to a function)", None))
    return out


def _terms(e: Expr, defs: Mapping[Var, Expr], sign: int, depth: int = 0
           ) -> list[tuple[int, Expr]] | None:
    """``e`` as a signed sum of terms, ``let`` variables expanded."""
    if depth > 64:
        return None
    match e:
        case Binary(op=BinaryOp.ADD, lhs=x, rhs=y):
            a, b = _terms(x, defs, sign, depth + 1), _terms(y, defs, sign, depth + 1)
            return None if a is None or b is None else a + b
        case Binary(op=BinaryOp.SUB, lhs=x, rhs=y):
            a, b = _terms(x, defs, sign, depth + 1), _terms(y, defs, -sign, depth + 1)
            return None if a is None or b is None else a + b
        case Ref(var=v) if v in defs:
            return _terms(defs[v], defs, sign, depth + 1)
    return [(sign, e)]


def _delinearized(site: _Site, e: Expr, defs: Mapping[Var, Expr],
                  uniform: frozenset[int]) -> _Site:
    """The site read as row and column, ``A * W + B`` with ``W`` a uniform unknown and
    ``0 <= B < W`` on its path (LEG-30: then two such subscripts are one element exactly
    when their rows and their columns agree); the site unchanged when it is not one."""
    terms = _terms(e, defs, 1)
    if terms is None:
        return site
    width: Ref | None = None
    row: list[tuple[int, Expr]] = []
    col: list[tuple[int, Expr]] = []
    def unknown(x: Expr) -> Ref | None:
        """The uniform unknown ``x`` stands for (a parameter, or what it is bound to)."""
        if isinstance(x, Ref) and isinstance(defs.get(x.var), Ref):
            x = defs[x.var]
        ok = isinstance(x, Ref) and x.var.id in uniform and x.var.type == Scalar.I32
        return x if ok and isinstance(x, Ref) else None

    for sign, t in terms:
        factor: Expr | None = None
        w = width
        if unknown(t) is not None:
            w, factor = unknown(t), Const(1, Scalar.I32)
        elif isinstance(t, Binary) and t.op is BinaryOp.MUL:
            for w0, f0 in ((t.rhs, t.lhs), (t.lhs, t.rhs)):
                if unknown(w0) is not None:
                    w, factor = unknown(w0), f0
                    break
        if factor is None or w is None:
            col.append((sign, t))
            continue
        if width is not None and w.var.id != width.var.id:
            return site
        width = w
        row.append((sign, factor))
    if width is None or not row:
        return site
    ctx = AffineCtx(defs=dict(defs))
    fa, fb = _sum(row, ctx), _sum(col, ctx)
    wf = AffineForm.of_atom(width)
    if fa is None or fb is None or width in fb.atoms or width in fa.atoms:
        return site
    # on the site's path, with every thread coordinate at least 0
    path = site.path.and_(Dnf.of(*(ge0(AffineForm.of_atom(c)) for c in (*_COORDS, _FLAT))))
    if path is None or not (_empty(path, ge0(-fb - 1)) and _empty(path, ge0(fb - wf))):
        return site  # the column is not proved within the row
    return attrs.evolve(site, index=(fa, fb), width=atom_key(width))


def _sum(terms: Sequence[tuple[int, Expr]], ctx: AffineCtx) -> AffineForm | None:
    out = AffineForm.constant(0)
    for sign, t in terms:
        f = to_affine(t, ctx)
        if f is None:
            return None
        out = out + f.scale(sign)
    return out


def _text(a: Access) -> str:
    idx = ", ".join(print_expr(x) for x in a.node.index)
    return f"{a.node.array.name}[{idx}]"


def _is_uniform(a: Atom, uniform: frozenset[int]) -> bool:
    match a:
        case Ref(var=v):
            return v.id in uniform
        case Intrinsic(name=n, args=()):
            return n in _UNIFORM
        case Length():
            return True
    return False


def _apart(forms: Sequence[AffineForm], path: Dnf, uniform: frozenset[int], dims: int
           ) -> tuple[list[AffineForm], Dnf, dict[AtomKey, Atom]]:
    """The forms and path of thread ``u``: every atom that may differ between threads
    renamed (the coordinates to ``u.global_idx_*``)."""
    atoms: dict[AtomKey, Atom] = {}
    for f in forms:
        for a in f.atoms:
            atoms[atom_key(a)] = a
    for alt in path.alts:
        for con in alt:
            for a in con.form.atoms:
                atoms[atom_key(a)] = a
    for c in _COORDS[:dims]:
        atoms[atom_key(c)] = c
    mapping: dict[Atom, AffineForm] = {}
    renamed: dict[AtomKey, Atom] = {}
    for key, a in atoms.items():
        if not _is_uniform(a, uniform):
            new = Intrinsic(f"u.{key[0]}.{key[1]}.{key[2]}")
            mapping[a] = AffineForm.of_atom(new)
            renamed[key] = new
    return [f.substitute(mapping) for f in forms], path.substitute(mapping), renamed



def _meets(t: _Site, u: _Site, uniform: frozenset[int], dims: int) -> bool | None:
    """Whether C's access ``t`` (thread t) and P's access ``u`` may touch one element
    from two different threads: ``False`` when proved not, ``True``/``None`` when it
    may (``None``: the subscripts are not affine)."""
    if t.index is None or u.index is None or any(f is None for f in (*t.index, *u.index)):
        return None
    if len(t.index) != len(u.index) or t.width != u.width:
        return None
    tf = [f for f in t.index if f is not None]
    uf0 = [f for f in u.index if f is not None]
    uf, upath, renamed = _apart(uf0, u.path, uniform, dims)
    base = t.path.and_(upath)
    if base is None:
        return None
    coords: list[Constraint | bool] = []
    for c in (*_COORDS[:dims], _FLAT):
        cu = renamed.get(atom_key(c), c)
        coords += [ge0(AffineForm.of_atom(c)), ge0(AffineForm.of_atom(cu))]
    # u != t, split into strict cases: along the axes of the launch, or (an equivalent
    # characterisation, tried when the first does not prove it) by the flat thread id
    splits = [[(AffineForm.of_atom(c), AffineForm.of_atom(renamed.get(atom_key(c), c)))
               for c in _COORDS[:dims]]]
    if atom_key(_FLAT) in renamed:
        splits.append([(AffineForm.of_atom(_FLAT),
                        AffineForm.of_atom(renamed[atom_key(_FLAT)]))])

    def apart(zeros: Sequence[AffineForm]) -> bool | None:
        """Whether ``zeros`` all 0 (with the paths) is proved to need t == u."""
        eqs: list[Constraint | bool] = [x for z in zeros for x in (ge0(z), ge0(-z))]
        same = base.and_(Dnf.of(*eqs, *coords))
        if same is None:
            return None
        return any(all(_empty(same, differ) for ct, cu in split
                       for differ in (ge0(cu - ct - 1), ge0(ct - cu - 1)))
                   for split in splits)

    diffs = [a - b for a, b in zip(tf, uf, strict=True)]
    proved = apart(diffs)
    if proved is None:
        return None
    if proved:
        return False
    if len(diffs) == 1:
        # one subscript: its difference read as mixed-radix digits, each 0 (LEG-33)
        coord_path = base.and_(Dnf.of(*coords))
        digits = None if coord_path is None else _zero_digits(diffs[0], coord_path)
        if digits is not None and apart(digits):
            return False
    return True


def _zero_digits(d: AffineForm, path: Dnf) -> list[AffineForm] | None:
    """LEG-33: forms that are all 0 wherever the integer form ``d`` is 0 on ``path``:
    ``d = ((A * W1 + B1) * W2 + B2) …`` with integers ``Wk > 1`` and ``-Wk < Bk < Wk``
    proved on ``path`` — then ``d = 0`` forces every ``Bk`` and ``A`` to 0 (``|W * R| =
    |B| < W`` leaves ``R = 0``). Fourier-Motzkin, reasoning over the rationals, cannot
    see from ``35 dk + 7 di + dj = 0`` alone that ``dk = di = dj = 0``; with the digits
    it can. Each width is tried from the smallest coefficient up: the terms whose
    coefficient it divides are the row, the others (and the constant's remainder) the
    digit. ``None`` when no digit is found."""
    if not d.is_integral:
        return None
    zeros: list[AffineForm] = []
    f = d
    for _ in range(8):  # at most eight levels
        coeffs = {a: int(c) for a, c in f.coeffs.items()}
        step = None
        for w in sorted({abs(c) for c in coeffs.values() if abs(c) > 1}):
            row = {a: c // w for a, c in coeffs.items() if c % w == 0}
            col = {a: c for a, c in coeffs.items() if c % w != 0}
            c0 = int(f.const)
            r = c0 % w
            digit = AffineForm.make(col, r)
            if _empty(path, ge0(-digit - w)) and _empty(path, ge0(digit - w)):
                step = (AffineForm.make(row, (c0 - r) // w), digit)
                break
        if step is None:
            break
        f, digit = step
        zeros.append(digit)
    if not zeros:
        return None
    return [f, *zeros]


def _empty(system: Dnf, extra: Constraint | bool) -> bool:
    case = system.and_(Dnf.of(extra))
    return case is not None and dnf_is_empty(case)


def _opaque(s: _Site) -> list[str]:
    """The parts of the site's subscripts the affine forms keep as unknowns (``i * nj``
    with both unknown), as the user wrote them."""
    out: list[str] = []
    for f in s.index or ():
        for a in f.atoms if f is not None else ():
            if not isinstance(a, (Ref, Intrinsic, Length)):
                txt = print_expr(a)
                if txt not in out:
                    out.append(txt)
    return out


def _uniform_ids(k: Kernel) -> frozenset[int]:
    return frozenset(p.id for p in k.params if not p.is_array and not p.mutable)


def _flat_axes(body: Stmt, dims: int) -> Stmt:
    """``body`` on a launch of ``dims`` dimensions: along the other axes every index is 0
    and every extent 1."""
    def expr(e: Expr) -> Expr | None:
        if isinstance(e, Intrinsic) and not e.args and e.name[-2:] in ("_x", "_y", "_z"):
            if AXES.index(e.name[-1]) >= dims:
                one = e.name.startswith(("block_dim", "grid_dim"))
                return Const(1 if one else 0, Scalar.I32, loc=e.loc)
        return None

    out: Stmt = map_node(body, expr=expr)
    return out


def _proof(p: Launch, c: Launch, pk: Kernel, ck: Kernel,
           pbinds: Mapping[Var, Expr] | None = None, cbinds: Mapping[Var, Expr] | None = None,
           unknowns: frozenset[int] = frozenset()) -> FusionRefused | None:
    """Check the two conditions of LEG-30; the refusal naming the first pair of accesses
    that may meet, or ``None``. ``unknowns``: ids of the uniform unknowns the arguments
    were bound to."""
    dims = launch_dims(p, c)
    pbinds, cbinds = pbinds or {}, cbinds or {}
    uniform = _uniform_ids(pk) | _uniform_ids(ck) | unknowns
    pbody, cbody = _flat_axes(pk.body, dims), _flat_axes(ck.body, dims)
    psites = _sites(p, pk, "p", pbody, uniform, pbinds)
    csites = _sites(c, ck, "c", cbody, uniform, cbinds)
    p_written = {s.buffer for s in psites if s.write}
    for t in csites:
        for u in psites:
            if u.buffer != t.buffer or not (u.write or t.write):
                continue
            if not t.write and u.buffer not in p_written:
                continue
            meets = _meets(t, u, uniform, dims)
            if meets is False:
                continue
            verb_t = "writes" if t.write else "reads"
            verb_u = "writes" if u.write else "reads"
            loc = (t.node.loc if t.node is not None else None) or ck.loc
            opaque = _opaque(t) + [o for o in _opaque(u) if o not in _opaque(t)]
            need = ("thread-wise fusion needs every element a consumer thread touches that "
                    "the producer writes to be touched by the producer's same thread only")
            if meets is None or opaque:
                what = f" ({', '.join(opaque)} with unknown factors)" if opaque else ""
                return FusionRefused(
                    "LEG-30", f"consumer {ck.name} {verb_t} {t.text} and producer {pk.name} "
                    f"{verb_u} {u.text}: the subscripts are not affine in the thread "
                    f"coordinates{what}, so they cannot be proved to be touched by one "
                    f"thread only ({need}; with the arguments as numbers they may be)", loc)
            return FusionRefused(
                "LEG-30", f"consumer {ck.name} {verb_t} {t.text}, {_MEETS} "
                f"that producer {pk.name} {verb_u} as {u.text} in another thread's part of "
                f"the launch ({need})", loc)
    # no two threads meet in exact arithmetic; the device wraps (AFF-17)
    involved = {s.buffer for s in csites if s.write} | p_written
    for k, body, binds, sites in ((pk, pbody, pbinds, psites), (ck, cbody, cbinds, csites)):
        why = _wrap_refusal(k, body, binds, [s for s in sites if s.buffer in involved], dims)
        if why is not None:
            return why
    return None


def launch_dims(p: Launch, c: Launch) -> int:
    """The dimensions of the two launches: the last axis with an extent other than 1 (a
    number) in either one's grid or block (CUDA's ``dim3(32, 8, 1)`` is 2-D); 1 for
    launches by thread count."""
    dims = 1
    for lc in (p, c):
        for ext in (lc.grid, lc.block_shape):
            for axis, n in enumerate(ext):
                if not (isinstance(n, int) and n == 1):
                    dims = max(dims, axis + 1)
    return dims


def _wrap_refusal(k: Kernel, body: Stmt, binds: Mapping[Var, Expr], sites: list[_Site],
                  dims: int) -> FusionRefused | None:
    """A refusal when an integer subexpression the proof relies on — a subscript of an
    access it compares, a test, a ``let`` value — is not proved to stay within its type
    where it is evaluated (the proof takes integers to be exact, the device wraps:
    AFF-17, AFF-19), or when a subscript read as row and column has an unknown row
    length (its product is then not bounded)."""
    for site in sites:
        if site.width is not None:
            return FusionRefused(
                "LEG-30", f"{k.name}: the subscript of {site.text} is read as row * length + "
                "column with a length that is not a number here, so it is not proved to "
                "stay within i32 (the device wraps; with the arguments as numbers it may "
                "be)", site.node.loc if site.node is not None else k.loc)
    _, lets = tests_and_lets(body)
    ctx = AffineCtx(defs={**binds, **lets})
    items = guarded_exprs(body, ctx)
    for site in sites:
        if site.node is not None:
            items += [(x, site.path) for x in site.node.index]
    known = [ge0(AffineForm.of_atom(c)) for c in (*_COORDS[:dims], _FLAT)]
    w = find_wrap(items, ctx, known)
    if w is None:
        return None
    return FusionRefused(
        "LEG-30", f"{k.name}: {w.text()} where it is evaluated, from what is known there "
        "(the guards around it, the thread coordinates at least 0); the proof takes "
        "integers to be exact, the device wraps", w.expr.loc or k.loc)


def check_threadwise(p: Launch, c: Launch) -> tuple[Kernel, Kernel, tuple[Expr, ...]]:
    """Prove LEG-30 for the launches ``p`` then ``c``: they have one shape and no
    consumer thread meets another thread's producer part. Returns the two kernels in the
    canonical thread-element form and the conditions over the scalar arguments the proof
    needed (``p_nj == 2048``), or raises :class:`FusionRefused`."""
    if not p.shaped and not c.shaped and (p.threads, p.block) != (c.threads, c.block):
        raise FusionRefused(
            "LEG-30", f"the launches of {p.kernel.name} and {c.kernel.name} have different "
            "thread counts or block sizes: a thread-wise fusion runs both parts on one "
            "launch", c.loc or c.kernel.loc)
    if _shape(p) != _shape(c):
        raise FusionRefused(
            "LEG-30", f"the launches of {p.kernel.name} and {c.kernel.name} have different "
            f"shapes ({_show(p)} and {_show(c)}): a thread-wise fusion runs both parts on "
            "one launch", c.loc or c.kernel.loc)
    overlap = partial_alias((p, c))  # before pairing buffers: LEG-1, LEG-7
    if overlap is not None:
        raise FusionRefused("LEG-7", overlap, c.kernel.loc)
    pk, ck = canonical_thread_index(p.kernel), canonical_thread_index(c.kernel)
    if pk.requires is not None and not pk.requires.threadwise or ck.requires is not None:
        raise FusionRefused(
            "LEG-31", f"{'consumer ' + ck.name if ck.requires is not None else 'producer ' + pk.name}"
            " is a fused kernel with launch conditions of another kind", ck.loc)
    try:
        _refuse_constructs(pk, "producer")
        _refuse_constructs(ck, "consumer")
    except FusionRefused:
        # a consumer thread meeting another thread's producer part is the deeper cause:
        # the pair could not be fused even without the construct (LEG-30 before LEG-31)
        meet = _proof(p, c, pk, rename(ck, RenameCtx(id_shift=max_var_id(pk) + 1)))
        if meet is not None and _MEETS in meet.reason:
            raise meet from None
        raise
    # the consumer's variables apart from the producer's: one kernel launched twice has
    # one set of variables but each launch its own arguments
    ca = rename(ck, RenameCtx(id_shift=max_var_id(pk) + 1))
    # first for every value of the arguments; then for arguments of equal values being
    # equal (the fused kernel checks that they are: `range(p_nj == c_nj)`); then for
    # these numbers (`range(p_nj == 20)`)
    why = _proof(p, c, pk, ca)
    if why is None:
        return pk, ck, ()
    for numbers in (False, True):
        pb, cb, pins, unknowns = _argument_facts(p, pk, c, ca, ck, numbers)
        if not pb and not cb:
            continue
        why = _proof(p, c, pk, ca, pb, cb, unknowns)
        if why is None:
            return pk, ck, pins
    raise why


def _show(lc: Launch) -> str:
    g, b = lc.grid, lc.block_shape

    def ext(x: int | Expr) -> str:
        return str(x) if isinstance(x, int) else f"({print_expr(x)})"
    return f"<<<{'x'.join(map(ext, g))}, {'x'.join(map(ext, b))}>>>"


def fuse_threadwise(p: Launch, c: Launch, name: str | None = None) -> Launch:
    """The launch of the thread-wise fusion of ``p`` then ``c`` (LEG-30), or raise
    :class:`FusionRefused`. The fused kernel's parameters are P's (``p_``), then C's
    not bound to one of P's buffers (``c_``); it carries ``requires threadwise(P, C)``,
    the buffers proved for (``same``, LEG-15) and the pinned arguments (``range``)."""
    pk, ck, pins = check_threadwise(p, c)
    shared = derive_shared(p, c)
    for cname, pname in shared.items():
        if ck.param(cname).type != pk.param(pname).type:
            raise FusionRefused(
                "LEG-31", f"{ck.name}.{cname} and {pk.name}.{pname} are one buffer with "
                "two element types", ck.loc)
    the_ids = ids(pk, ck)
    params, locals_, helpers = merged_declarations(pk, ck, shared, the_ids)
    params = params[:-1]  # no consumer thread count: both parts run on one launch
    cn = consumer_names(pk, ck, shared, the_ids.c_shift)
    scalars = tuple(cn.var(v) for v in ck.locals if not isinstance(v.type, ArrayType))
    body = seq(rename(pk.body, producer_names), rename(ck.body, cn))
    inner = pk.requires.steps if pk.requires is not None else ()
    req = FusionRequires((ThreadStep(pk.name, ck.name, launch_dims(p, c)), *inner),
                         pk.requires.renamed(producer_names.prefix).same
                         if pk.requires is not None else ())
    inner_ranges = tuple(rename(r, producer_names) for r in pk.ranges)
    fused = Kernel(name or f"{pk.name}_{ck.name}", params, (*locals_, *scalars), body,
                   helpers, requires=req, ranges=(*inner_ranges, *pins), loc=pk.loc)
    args = {"p_" + q.name: a for q, a in zip(p.kernel.params, p.args, strict=True)}
    args.update({"c_" + q.name: a for q, a in zip(c.kernel.params, c.args, strict=True)
                 if q.name not in shared})
    scratch = tuple(p.scratch)
    if c.scratch:
        raise FusionRefused("LEG-31", f"the launch of {ck.name} has scratch buffers", c.loc)
    return attrs.evolve(p, kernel=fused, args=tuple(args[q.name] for q in params),
                        scratch=scratch)
