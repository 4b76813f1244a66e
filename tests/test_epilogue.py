"""Epilogue fusion, kernel level (specs/epilogue-fusion.md, EF-1 … EF-13)."""

from __future__ import annotations

import numpy as np
import pytest

from sarek_py.fusion.epilogue.accesses import accesses_expr, accesses_stmt, is_index
from sarek_py.fusion.epilogue.consumer import Consumer, consumer, consumer_shape
from sarek_py.fusion.epilogue.fuse_kernels import ep_var, fuse, ids, insert
from sarek_py.fusion.refusal import FusionRefused, Incompatible
from sarek_py.ir import intrinsics
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.intrinsics import GLOBAL_IDS, THREAD_INTRINSICS
from sarek_py.ir.nodes import Const, Empty, If, Kernel, Let, Ref, Store, Var, iter_stmts
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel
from sarek_py.ir.typecheck import check_kernel
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_nodes, max_var_id

SCALE_RELU = """
kernel scale(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then
    y[i] <- a * x[i]

kernel relu(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    z[i] <- y[i] > 0.0f ? y[i] : 0.0f
"""


def kernels(text: str) -> dict[str, Kernel]:
    return {k.name: k for k in parse_module(text, "t.sk").kernels}


def one(text: str) -> Kernel:
    (k,) = parse_module(text, "t.sk").kernels
    return k


def refusal(p: Kernel, c: Kernel, **kw: object) -> FusionRefused:
    with pytest.raises(FusionRefused) as ei:
        fuse(p, c, **kw)  # type: ignore[arg-type]
    return ei.value


def vars_of(k: Kernel) -> list[Var]:
    out: list[Var] = [*k.params, *k.locals]
    for n in iter_nodes(k.body):
        if isinstance(n, (Let,)):
            out.append(n.var)
    return out


# ------------------------------------------------------------------------------- EF-1


def test_ef1_consumer_shape_recognised() -> None:
    k = kernels(SCALE_RELU)["relu"]
    c = consumer_shape(k)
    assert isinstance(c, Consumer)
    assert c.index.name == "i" and c.index.type is Scalar.I32
    assert isinstance(c.body, If)
    assert c.written == ("z",)
    assert set(c.reads_at_index) == {"y", "z"}  # z is never read: "or not at all"


def test_ef1_global_idx_x_is_a_global_id() -> None:
    assert "global_idx_x" in GLOBAL_IDS and "global_thread_id" in GLOBAL_IDS
    assert GLOBAL_IDS is intrinsics.GLOBAL_IDS and THREAD_INTRINSICS is intrinsics.THREAD_INTRINSICS
    k = one("kernel c(y : f32[], z : f32[]) = let i = global_idx_x in z[i] <- y[i]")
    assert consumer_shape(k).written == ("z",)


@pytest.mark.parametrize("body", [
    "let i = thread_idx_x in z[i] <- y[i]",
    "z[0] <- y[0]",
    "let mut i = global_thread_id in z[i] <- y[i]",
    "let i = global_thread_id + 1 in z[i] <- y[i]",
])
def test_ef1_other_shapes_refused(body: str) -> None:
    k = one(f"kernel c(y : f32[], z : f32[]) = {body}")
    r = consumer(k)
    assert isinstance(r, FusionRefused) and r.rule == "EF-1"
    assert "consumer c" in str(r)


# ------------------------------------------------------------------------------- EF-2


@pytest.mark.parametrize("body, what", [
    ("z[i] <- y[i] + f32(block_idx_x)", "block_idx_x"),
    ("if i > 3 then return; z[i] <- y[i]", "return"),
    ("z[i] <- y[i]; stop 3", "stop"),
    ("z[i] <- f(y[i])", "calls f"),
])
def test_ef2_thread_specific_consumer_refused(body: str, what: str) -> None:
    text = ("fun f(u : f32) : f32 = return u + f32(thread_idx_x)\n"
            f"kernel c(y : f32[], z : f32[]) = let i = global_thread_id in {body}")
    k = parse_module(text, "t.sk").kernels[0]
    with pytest.raises(FusionRefused) as ei:
        consumer_shape(k)
    assert ei.value.rule == "EF-2" and what in ei.value.message


def test_ef2_barrier_and_shared_array_refused() -> None:
    k = one("kernel c(y : f32[], z : f32[]) shared s : f32[4] = "
            "let i = global_thread_id in z[i] <- y[i]")
    assert isinstance(consumer(k), FusionRefused)
    assert "shared array s" in str(consumer(k))
    k2 = one("kernel c(y : f32[], z : f32[]) = let i = global_thread_id in "
             "(barrier; z[i] <- y[i])")
    r = consumer(k2)
    assert isinstance(r, FusionRefused) and r.rule == "EF-2" and "barrier" in r.message


# ------------------------------------------------------------------------------- EF-3


def test_ef3_writes_away_from_index_refused() -> None:
    k = one("kernel c(y : f32[], z : f32[]) = let i = global_thread_id in z[i + 1] <- y[i]")
    r = consumer(k)
    assert isinstance(r, FusionRefused) and r.rule == "EF-3" and "writes z" in r.message


def test_ef3_write_through_helper_is_away_from_index() -> None:
    text = ("fun put(a : f32[], k : i32) : f32 = (a[k] <- 1.0f; return 0.0f)\n"
            "kernel c(y : f32[], z : f32[]) = let i = global_thread_id in "
            "let d = put(z, i) in ()")
    k = parse_module(text, "t.sk").kernels[0]
    r = consumer(k)
    assert isinstance(r, FusionRefused) and r.rule == "EF-3"


def test_ef3_reads_elsewhere_are_recorded_not_refused() -> None:
    k = one("kernel c(y : f32[], w : f32[], z : f32[]) = let i = global_thread_id in "
            "z[i] <- y[i] + w[0]")
    c = consumer_shape(k)
    assert "w" not in c.reads_at_index and "y" in c.reads_at_index


def test_ef3_accesses_and_is_index() -> None:
    k = one("kernel c(y : f32[], z : f32[]) = let i = global_thread_id in "
            "z[i] <- y[i] + y[2]")
    assert isinstance(k.body, Let)
    i = k.body.var
    acc = accesses_stmt(k.body)
    got = [(a.array.name, a.write, is_index(i, a.index)) for a in acc]
    assert ("z", True, True) in got and ("y", False, True) in got and ("y", False, False) in got
    store = next(s for s in iter_stmts(k.body) if isinstance(s, Store))
    assert [a.array.name for a in accesses_expr(store.value)] == ["y", "y"]
    assert not is_index(i, None)


# ------------------------------------------------------------------------------- EF-4


def test_ef4_reading_own_output_elsewhere_refused() -> None:
    k = one("kernel c(y : f32[], z : f32[]) = let i = global_thread_id in "
            "z[i] <- y[i] + z[0]")
    r = consumer(k)
    assert isinstance(r, FusionRefused) and r.rule == "EF-4" and "z" in r.message


# ------------------------------------------------------------------------------- EF-5


def test_ef5_prefixes_and_disjoint_ids() -> None:
    ks = kernels(SCALE_RELU)
    p, c = ks["scale"], ks["relu"]
    k = fuse(p, c, shared={"y": "y"})
    names = {v.name for v in vars_of(k)}
    assert all(n.startswith(("p_", "c_", "ep_")) for n in names), names
    the_ids = ids(p, c)
    c_ids = [v.id for v in vars_of(c)]
    assert min(c_ids) + the_ids.c_shift == max_var_id(p) + 1  # just above P's
    assert the_ids.tmp_id > the_ids.c_shift + max(c_ids) and the_ids.tc_id > the_ids.tmp_id
    by_id: dict[int, str] = {}
    for v in vars_of(k):
        assert by_id.setdefault(v.id, v.name) == v.name  # one id, one variable
    assert ep_var(7, "t", Scalar.I32) == Var("ep_t", 7, Scalar.I32)


def test_ef5_name_clash_cannot_capture() -> None:
    """P and C both use i, n, t and a parameter called ep_tc / p_y: nothing captures."""
    text = """
kernel p(x : f32[], y : f32[], ep_tc : i32) =
  let i = global_thread_id in
  let t = i in
  if t < ep_tc then y[t] <- x[t] * 2.0f
kernel c(y : f32[], p_y : f32[], ep_tc : i32) =
  let i = global_thread_id in
  let t = y[i] in
  if i < ep_tc then p_y[i] <- t + 1.0f
"""
    ks = kernels(text)
    k = fuse(ks["p"], ks["c"], shared={"y": "y"})
    check_kernel(k)
    assert [q.name for q in k.params] == ["p_x", "p_y", "p_ep_tc", "c_p_y", "c_ep_tc", "ep_tc"]
    x = np.arange(8, dtype=np.float32)
    y = np.full(8, np.nan, np.float32)
    out = np.full(8, np.nan, np.float32)
    run_kernel(k, {"p_x": x, "p_y": y, "p_ep_tc": 8, "c_p_y": out, "c_ep_tc": 5, "ep_tc": 8},
               8, 4)
    assert np.array_equal(out[:5], x[:5] * 2 + 1) and np.isnan(out[5:]).all()


# ------------------------------------------------------------------------------- EF-6


def test_ef6_shared_parameter_becomes_producers() -> None:
    ks = kernels(SCALE_RELU)
    k = fuse(ks["scale"], ks["relu"], shared={"y": "y"})
    assert "c_y" not in {q.name for q in k.params}
    reads = {n.array.name for n in iter_nodes(k.body) if hasattr(n, "array")}
    assert "p_y" in reads and "c_y" not in reads


def test_ef6_shared_names_must_exist() -> None:
    ks = kernels(SCALE_RELU)
    r = refusal(ks["scale"], ks["relu"], shared={"nope": "y"})
    assert r.rule == "EF-6" and "nope" in r.message
    r = refusal(ks["scale"], ks["relu"], shared={"y": "nope"})
    assert r.rule == "EF-6" and "nope" in r.message


def test_ef6_shared_types_must_agree() -> None:
    ks = kernels(SCALE_RELU + """
kernel relu64(y : f64[], z : f64[], n : i32) =
  let i = global_thread_id in if i < n then z[i] <- y[i]
""")
    with pytest.raises(Incompatible) as ei:
        fuse(ks["scale"], ks["relu64"], shared={"y": "y"})
    assert ei.value.rule == "EF-6" and "f64" in ei.value.message


# ------------------------------------------------------------------------------- EF-7


def test_ef7_default_intermediate() -> None:
    ks = kernels(SCALE_RELU)
    k = fuse(ks["scale"], ks["relu"], shared={"y": "y"})
    stores = [s for s in iter_stmts(k.body) if isinstance(s, Store)]
    assert [s.array.name for s in stores] == ["p_y", "c_z"]


def test_ef7_ambiguous_or_missing_intermediate() -> None:
    text = """
kernel p(x : f32[], y : f32[], w : f32[]) =
  let i = global_thread_id in (y[i] <- x[i]; w[i] <- x[i])
kernel c(y : f32[], w : f32[], z : f32[]) =
  let i = global_thread_id in z[i] <- y[i] + w[i]
"""
    ks = kernels(text)
    r = refusal(ks["p"], ks["c"], shared={"y": "y", "w": "w"})
    assert r.rule == "EF-7" and "ambiguous" in r.message
    # naming it is not enough here: C also reads w, which P writes (EF-9)
    assert refusal(ks["p"], ks["c"], shared={"y": "y", "w": "w"}, p_array="y").rule == "EF-9"
    assert refusal(ks["p"], ks["c"], shared={}).rule == "EF-7"


def test_ef7_intermediate_must_be_zero_based_rank1() -> None:
    text = """
kernel p(x : f32[], y : f32[1:]) = let i = global_thread_id in y[i + 1] <- x[i]
kernel c(y : f32[1:], z : f32[]) = let i = global_thread_id in z[i] <- y[i]
"""
    ks = kernels(text)
    r = refusal(ks["p"], ks["c"], shared={"y": "y"})
    assert r.rule == "EF-7" and "zero-based" in r.message


# ------------------------------------------------------------------------------- EF-8


BRANCHY = """
kernel p(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if x[i] > 0.0f then y[i] <- x[i] else (
    for k = 0 to 1 do
      if k == 1 then y[i] <- x[i] * 2.0f
    done
  );
  y[n] <- 5.0f
kernel c(y : f32[], z : f32[]) =
  let i = global_thread_id in z[i] <- y[i] + 1.0f
"""


def test_ef8_every_store_instrumented() -> None:
    ks = kernels(BRANCHY)
    k = fuse(ks["p"], ks["c"], shared={"y": "y"})
    check_kernel(k)
    lets = [s for s in iter_stmts(k.body) if isinstance(s, Let) and s.var.name == "ep_t"]
    assert len(lets) == 3
    for s in lets:
        first, guard = s.body.stmts  # type: ignore[union-attr]
        assert isinstance(first, Store) and first.index == (Ref(s.var),)
        assert isinstance(guard, If) and "ep_tc" in print_kernel(
            Kernel("g", (), (), guard))
    # nothing else changed: removing the inserted consumer gives P back (renamed)
    assert sum(isinstance(s, Store) and s.array.name == "c_z" for s in iter_stmts(k.body)) == 3


def test_ef8_insert_is_generic() -> None:
    ks = kernels(BRANCHY)
    p = ks["p"]
    y = p.param("y")
    seen: list[str] = []

    def after(t: Ref) -> Empty:
        seen.append(t.var.name)
        return Empty()

    out = insert(p.body, y, 999, after)
    assert seen == ["ep_t"] * 3
    assert sum(isinstance(s, Let) and s.var.id == 999 for s in iter_stmts(out)) == 3


def test_ef8_i64_index() -> None:
    text = """
kernel p(x : f32[], y : f32[]) = let i = global_thread_id in y[i64(i)] <- x[i]
kernel c(y : f32[], z : f32[]) = let i = global_thread_id in z[i] <- y[i] * 3.0f
"""
    ks = kernels(text)
    k = fuse(ks["p"], ks["c"], shared={"y": "y"})
    check_kernel(k)
    t = next(s.var for s in iter_stmts(k.body) if isinstance(s, Let) and s.var.name == "ep_t")
    assert t.type is Scalar.I64
    x = np.linspace(-1, 1, 6).astype(np.float32)
    y, z = np.zeros(6, np.float32), np.full(6, np.nan, np.float32)
    run_kernel(k, {"p_x": x, "p_y": y, "c_z": z, "ep_tc": 4}, 6, 4)
    assert np.array_equal(z[:4], x[:4] * np.float32(3)) and np.isnan(z[4:]).all()


def test_ef8_store_through_helper_refused() -> None:
    text = """
fun put(a : f32[], k : i32) : f32 = (a[k] <- 1.0f; return 0.0f)
kernel p(y : f32[]) = let i = global_thread_id in let d = put(y, i) in ()
kernel c(y : f32[], z : f32[]) = let i = global_thread_id in z[i] <- y[i]
"""
    ks = kernels(text)
    r = refusal(ks["p"], ks["c"], shared={"y": "y"}, p_array="y")
    assert r.rule == "EF-8" and "y" in r.message


# ------------------------------------------------------------------------------- EF-9


@pytest.mark.parametrize("consumer_body, frag", [
    ("z[i] <- y[i + 1]", "away from its index"),
    ("z[i] <- y[i] + w[i]", "reads w"),
    ("x[i] <- y[i]", "writes x"),
    ("w[i] <- y[i]", "writes w"),
])
def test_ef9_window_with_shared(consumer_body: str, frag: str) -> None:
    text = f"""
kernel p(x : f32[], y : f32[], w : f32[]) =
  let i = global_thread_id in (y[i] <- x[i]; w[i] <- x[i])
kernel c(x : f32[], y : f32[], w : f32[], z : f32[]) =
  let i = global_thread_id in {consumer_body}
"""
    ks = kernels(text)
    r = refusal(ks["p"], ks["c"], shared={"x": "x", "y": "y", "w": "w"}, p_array="y")
    assert r.rule == "EF-9" and frag in r.message


def test_ef9_in_place_update_of_intermediate() -> None:
    text = """
kernel p(x : f32[], y : f32[]) = let i = global_thread_id in y[i] <- x[i] + 1.0f
kernel c(y : f32[]) = let i = global_thread_id in y[i] <- y[i] * y[i]
kernel q(x : f32[], y : f32[]) =
  let i = global_thread_id in (y[i] <- x[i]; x[i] <- y[i])
"""
    ks = kernels(text)
    k = fuse(ks["p"], ks["c"], shared={"y": "y"})
    x = np.arange(5, dtype=np.float32)
    y = np.full(5, np.nan, np.float32)
    run_kernel(k, {"p_x": x, "p_y": y, "ep_tc": 5}, 5, 2)
    assert np.array_equal(y, (x + 1) * (x + 1))
    # a producer that reads the intermediate cannot have C overwrite it
    assert refusal(ks["q"], ks["c"], shared={"y": "y"}).rule == "EF-9"


# ------------------------------------------------------------------------------ EF-10


def test_ef10_parameters_order() -> None:
    ks = kernels(SCALE_RELU)
    k = fuse(ks["scale"], ks["relu"], shared={"y": "y"})
    assert [q.name for q in k.params] == ["p_x", "p_y", "p_a", "p_n", "c_z", "c_n", "ep_tc"]
    assert k.params[-1].type is Scalar.I32


def test_ef10_consumer_locals_restart_at_zero() -> None:
    """P stores two elements per thread: C's body runs twice in one thread."""
    text = """
kernel p(x : f32[], y : f32[]) =
  let i = global_thread_id in (y[2 * i] <- x[2 * i]; y[2 * i + 1] <- x[2 * i + 1])
kernel c(y : f32[], z : f32[]) var acc : f32 local t : f32[2] =
  let i = global_thread_id in (
    acc := acc + y[i];
    t[1] <- t[1] + y[i];
    z[i] <- acc + t[1]
  )
"""
    ks = kernels(text)
    k = fuse(ks["p"], ks["c"], shared={"y": "y"})
    check_kernel(k)
    assert [v.name for v in k.locals] == ["c_t"]
    x = np.arange(8, dtype=np.float32) + 1
    y, z = np.zeros(8, np.float32), np.full(8, np.nan, np.float32)
    run_kernel(k, {"p_x": x, "p_y": y, "c_z": z, "ep_tc": 8}, 4, 2)
    assert np.array_equal(z, 2 * x)


# ------------------------------------------------------------------------------ EF-11


HELPERS = """
fun h(u : f32) : f32 = return u * 2.0f
kernel p(x : f32[], y : f32[]) = let i = global_thread_id in y[i] <- h(x[i])
"""


def test_ef11_identical_helpers_once() -> None:
    p = kernels(HELPERS)["p"]
    c = kernels("fun h(u : f32) : f32 = return u * 2.0f\n"
                "fun g(u : f32) : f32 = return u - 1.0f\n"
                "kernel c(y : f32[], z : f32[]) = let i = global_thread_id in "
                "z[i] <- g(h(y[i]))")["c"]
    k = fuse(p, c, shared={"y": "y"})
    assert [h.name for h in k.helpers] == ["h", "g"]
    check_kernel(k)


def test_ef11_clashing_helpers_incompatible() -> None:
    p = kernels(HELPERS)["p"]
    c = kernels("fun h(u : f32) : f32 = return u * 3.0f\n"
                "kernel c(y : f32[], z : f32[]) = let i = global_thread_id in "
                "z[i] <- h(y[i])")["c"]
    with pytest.raises(Incompatible) as ei:
        fuse(p, c, shared={"y": "y"})
    assert ei.value.rule == "EF-11" and "h" in ei.value.message
    assert isinstance(ei.value, SarekError)


# ------------------------------------------------------------------------------ EF-12


def test_ef12_scale_relu_same_bits() -> None:
    ks = kernels(SCALE_RELU)
    k = fuse(ks["scale"], ks["relu"], shared={"y": "y"})
    rng = np.random.default_rng(3)
    x = rng.standard_normal(100).astype(np.float32)
    y1, z1 = np.full(100, np.nan, np.float32), np.full(100, np.nan, np.float32)
    run_kernel(ks["scale"], {"x": x, "y": y1, "a": np.float32(1.7), "n": 100}, 100, 32)
    run_kernel(ks["relu"], {"y": y1, "z": z1, "n": 90}, 90, 16)
    y2, z2 = np.full(100, np.nan, np.float32), np.full(100, np.nan, np.float32)
    run_kernel(k, {"p_x": x, "p_y": y2, "p_a": np.float32(1.7), "p_n": 100, "c_z": z2,
                   "c_n": 90, "ep_tc": 90}, 100, 32)
    assert y1.tobytes() == y2.tobytes() and z1.tobytes() == z2.tobytes()


# ------------------------------------------------------------------------------ EF-13


def test_ef13_api_default_name_and_result() -> None:
    ks = kernels(SCALE_RELU)
    k = fuse(ks["scale"], ks["relu"], shared={"y": "y"})
    assert k.name == "scale_relu"
    assert fuse(ks["scale"], ks["relu"], shared={"y": "y"}, name="sr").name == "sr"
    check_kernel(k)
    assert isinstance(consumer(ks["relu"]), Consumer)
    assert isinstance(consumer(ks["scale"]), Consumer)  # scale is element-wise too
    r = refusal(ks["relu"], ks["relu"], shared={})
    assert str(r).startswith("t.sk:7:1: fusion refused: [EF-7]")  # located at the consumer


def test_ef13_fresh_ids_after_fusion() -> None:
    from sarek_py.ir.nodes import fresh_id

    ks = kernels(SCALE_RELU)
    k = fuse(ks["scale"], ks["relu"], shared={"y": "y"})
    assert fresh_id() > max_var_id(k)
    # EF-5: fusing again and again (a chain) grows the ids by the consumer's span only
    before = fresh_id()
    for _ in range(12):
        k = fuse(k, ks["relu"], shared={"y": "c_z"}, p_array="c_z")
    assert max_var_id(k) - before < 12 * 20
    assert Const(0, Scalar.I32) == Const(0, Scalar.I32)
