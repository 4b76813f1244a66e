"""The canonical thread-element form (specs/epilogue-fusion.md EF-20, EF-21, EF-22).

CUDA's ``blockIdx.x * blockDim.x + threadIdx.x`` in every spelling a user writes (operand
orders, ``i64`` widenings, ``let`` copies of the intrinsics, other ``let``s first) is read
as the thread's element: such consumers are element-wise (EF-1) and such producers store
at the thread id, so the pairs fuse, bitwise equal to the unfused launches on the
interpreter and OpenCL. The rewrite is checked exact on 1-D, 2-D and 3-D launches, and
what depends on a launch (a literal block size) is left alone."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from sarek_py.fusion.epilogue.consumer import consumer_shape
from sarek_py.fusion.epilogue.fuse_kernels import fuse
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import KernelLaunch, Launch
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel
from sarek_py.ir.thread_index import canonical_thread_index, global_axis
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.base import Backend

FUZZ = bool(os.environ.get("SAREK_FUZZ"))


def kernel(text: str) -> Kernel:
    m = parse_module(text, "canon.sk")
    check_module(m)
    return m.kernels[-1]


def canon_text(text: str) -> str:
    return print_kernel(canonical_thread_index(kernel(text)))


def opencl() -> Backend:
    try:
        return get_backend("opencl")
    except SarekError as exc:
        pytest.skip(f"no OpenCL: {exc}")


# ------------------------------------------------------------------ EF-20: the spellings

SPELLINGS = [
    "block_idx_x * block_dim_x + thread_idx_x",
    "block_dim_x * block_idx_x + thread_idx_x",
    "thread_idx_x + block_idx_x * block_dim_x",
    "thread_idx_x + block_dim_x * block_idx_x",
]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_ef20_every_operand_order_is_the_global_index(spelling: str) -> None:
    """EF-20: the four orders of ``bx * bdx + tx`` are ``global_idx_x``."""
    out = canon_text(f"kernel k(y : f32[]) =\n  let i = {spelling} in y[i] <- 1.0f\n")
    assert "let i = global_idx_x in" in out, out
    assert "block_idx" not in out and "thread_idx" not in out


@pytest.mark.parametrize("axis", ["x", "y", "z"])
def test_ef20_every_axis(axis: str) -> None:
    """EF-20: ``y`` and ``z`` alike."""
    out = canon_text(f"kernel k(y : f32[]) =\n  let i = block_idx_{axis} * block_dim_{axis} + "
                     f"thread_idx_{axis} in y[i] <- 1.0f\n")
    assert f"let i = global_idx_{axis} in" in out, out


@pytest.mark.parametrize("spelling", [
    "i64(block_idx_x) * i64(block_dim_x) + i64(thread_idx_x)",
    "i64(thread_idx_x) + i64(block_dim_x) * i64(block_idx_x)",
    "i64(block_idx_x * block_dim_x) + i64(thread_idx_x)",
    "i64(block_idx_x * block_dim_x + thread_idx_x)",
])
def test_ef20_ef21_widened_index_is_a_copy_of_the_global_index(spelling: str) -> None:
    """EF-20, EF-21: a widened sum is ``i64(global_idx_x)``, split at the head into an
    ``i32`` element and its widened copy; such a consumer is element-wise (EF-1)."""
    text = (f"kernel c(y : f32[], z : f32[], n : i32) =\n  let i = {spelling} in\n"
            "  if i < i64(n) then z[i] <- y[i] + 1.0f\n")
    out = canon_text(text)
    assert "let i_g = global_idx_x in" in out and "let i = i64(i_g) in" in out, out
    c = consumer_shape(kernel(text))
    assert c.index.name == "i_g" and c.reads_at_index == ("y", "z")


def test_ef20_let_copies_of_the_intrinsics_are_inlined() -> None:
    """EF-20: ``int bx = blockIdx.x; int tx = threadIdx.x;`` copies (also widened) are the
    intrinsics; the sum of them is the element."""
    out = canon_text("kernel k(y : f32[], n : i32) =\n  let tx = thread_idx_x in\n"
                     "  let bx = block_idx_x in\n  let bd = block_dim_x in\n"
                     "  let i = bx * bd + tx in\n  if i < n then y[i] <- f32(tx)\n")
    assert out.splitlines()[1].strip() == "let i = global_idx_x in", out
    assert "f32(thread_idx_x)" in out, out


def test_ef21_element_moved_before_the_lets_that_precede_it() -> None:
    """EF-21: ``let m = n * 2 in let i = <element> in`` is ``let i = … in let m = …``."""
    text = ("kernel c(y : f32[], z : f32[], n : i32) =\n  let m = n * 2 in\n"
            "  let s = y[0] in\n  let i = block_idx_x * block_dim_x + thread_idx_x in\n"
            "  if i < m then z[i] <- y[i] + s\n")
    lines = canon_text(text).splitlines()
    assert [ln.strip() for ln in lines[1:4]] == [
        "let i = global_idx_x in", "let m = n * 2 in", "let s = y[0] in"], lines
    with pytest.raises(FusionRefused) as info:  # y[0] is not the consumer's element
        fuse(kernel("kernel p(x : f32[], y : f32[]) =\n  let i = global_thread_id in "
                    "y[i] <- x[i]\n"), kernel(text), shared={"y": "y"})
    assert info.value.rule == "EF-9", info.value


@pytest.mark.parametrize("spelling", [
    "block_idx_x * 256 + thread_idx_x",            # a literal block: depends on the launch
    "block_idx_x * block_dim_y + thread_idx_x",    # mixed axes
    "block_idx_x * block_dim_x + thread_idx_y",
    "block_idx_x * block_dim_x - thread_idx_x",
    "block_idx_x + block_dim_x + thread_idx_x",
    "block_idx_x * block_dim_x * thread_idx_x",
    "grid_dim_x * block_dim_x + thread_idx_x",
])
def test_ef20_other_sums_are_left_alone(spelling: str) -> None:
    """EF-20: only ``block_idx_a * block_dim_a + thread_idx_a`` is rewritten; the other
    spellings keep their meaning and such a consumer stays refused (EF-1)."""
    text = (f"kernel c(y : f32[], z : f32[]) =\n  let i = {spelling} in\n"
            "  z[i] <- y[i] + 1.0f\n")
    k = kernel(text)
    assert global_axis(k.body.value) is None  # type: ignore[attr-defined]
    assert "global_idx" not in print_kernel(canonical_thread_index(k))
    with pytest.raises(FusionRefused) as info:
        consumer_shape(k)
    assert info.value.rule == "EF-1", info.value


def test_ef20_mutable_variable_is_not_a_copy() -> None:
    """EF-20: only immutable ``let``s of intrinsics are inlined; a ``var`` assigned a
    thread intrinsic keeps its assignments."""
    text = ("kernel k(y : i32[])\n  var t : i32 =\n  t := thread_idx_x;\n"
            "  t := t + 1;\n  y[global_thread_id] <- t\n")
    out = print_kernel(canonical_thread_index(kernel(text)))
    assert "t := thread_idx_x" in out and "t := t + 1" in out, out


def test_ef21_global_id_used_without_a_let_is_named_at_the_head() -> None:
    """EF-21: ``y[global_idx_x] <- x[global_idx_x]`` is ``let i = global_idx_x in``
    ``y[i] <- x[i]`` (an element-wise consumer); two different global intrinsics are
    left as they are."""
    out = canon_text("kernel k(x : f32[], y : f32[]) =\n  y[global_idx_x] <- x[global_idx_x]\n")
    assert "let i = global_idx_x in" in out and "y[i] <- x[i]" in out, out
    both = "kernel k(x : f32[], y : f32[]) =\n  y[global_idx_x] <- x[global_thread_id]\n"
    assert "let" not in canon_text(both)


def test_ef22_canonical_form_is_idempotent_and_shares_unchanged_kernels() -> None:
    """EF-22: a kernel already canonical is returned as is (the same object)."""
    k = kernel("kernel k(y : f32[]) =\n  let i = global_thread_id in y[i] <- 1.0f\n")
    assert canonical_thread_index(k) is k
    k2 = canonical_thread_index(kernel(
        "kernel k(y : f32[]) =\n  let m = 3 in let i = i64(thread_idx_x + block_idx_x * "
        "block_dim_x) in y[i] <- f32(m)\n"))
    assert canonical_thread_index(k2) is k2


# -------------------------------------------------------- generated spellings (EF-20..22)


def spell(rng: random.Random, axis: str, lets: list[str]) -> tuple[str, bool]:
    """A random spelling of ``block_idx_a * block_dim_a + thread_idx_a``; appends the
    ``let`` copies it uses to ``lets``; returns (text, widened)."""
    def leaf(kind: str) -> str:
        name = f"{kind}_{axis}"
        if rng.random() < 0.3:
            v = f"c{len(lets)}"
            lets.append(f"let {v} = {name} in")
            return v
        return name

    bx, bd, tx = leaf("block_idx"), leaf("block_dim"), leaf("thread_idx")
    prod_parts = [bx, bd] if rng.random() < 0.5 else [bd, bx]
    mode = rng.choice(["i32", "i32", "leaves", "product", "whole"])
    if mode == "leaves":
        prod = " * ".join(f"i64({p})" for p in prod_parts)
        t = f"i64({tx})"
    elif mode == "product":
        prod, t = f"i64({' * '.join(prod_parts)})", f"i64({tx})"
    else:
        prod, t = " * ".join(prod_parts), tx
    s = f"{prod} + {t}" if rng.random() < 0.5 else f"{t} + {prod}"
    if mode == "whole":
        s = f"i64({s})"
    return s, mode != "i32"


def exactness_case(seed: int) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """EF-22: a kernel storing, for each thread, its spelled index and the intrinsic."""
    rng = random.Random(seed)
    dims = rng.choice([1, 2, 3])
    axis = rng.choice("xyz"[:dims])
    lets: list[str] = []
    s, wide = spell(rng, axis, lets)
    val = "i32(e)" if wide else "e"
    text = ("kernel k(a : i32[], b : i32[]) =\n  " + " ".join(lets)
            + f"\n  let e = {s} in\n  let f = global_thread_id in\n"
            f"  a[f] <- {val};\n  b[f] <- global_idx_{axis}\n")
    block = tuple(rng.choice([1, 2, 3, 4, 8]) for _ in range(dims))
    grid = tuple(rng.choice([1, 2, 3, 5]) for _ in range(dims))
    return text, grid, block


def exactness_mismatches(count: int, backends: list[Backend]) -> list[str]:
    bad = []
    for seed in range(count):
        text, grid, block = exactness_case(seed)
        k = kernel(text)
        assert "global_idx" in print_kernel(canonical_thread_index(k)).split("a[f]")[0]
        threads = int(np.prod(grid)) * int(np.prod(block))
        for be in backends:
            a = np.full(threads, -7, np.int32)
            b = np.full(threads, -9, np.int32)
            be.run_kernel(k, {"a": a, "b": b}, threads, grid=grid, block_shape=block)
            if a.tobytes() != b.tobytes():
                bad.append(f"seed {seed} on {be.name}: {text}")
    return bad


def test_ef22_spelled_index_equals_the_intrinsic_on_nd_launches() -> None:
    """EF-22: on 1-D, 2-D and 3-D launches, every generated spelling computes the
    intrinsic's value in every thread, on the interpreter and on OpenCL."""
    bad = exactness_mismatches(400 if FUZZ else 40, [get_backend("interp"), opencl()])
    assert not bad, bad[:3]


PRODUCER = """
kernel p(x : f32[], y : f32[], a : f32, n : i32) =
  {lets}
  let i = {spell} in
  if i < {n} then y[i] <- a * x[i] + 0.5f
"""

CONSUMER = """
kernel c(y : f32[], z : f32[], n : i32) =
  {lets}
  let j = {spell} in
  if j < {n} then z[j] <- y[{at}] > 0.0f ? y[{at}] : 0.0f
"""


def pair_case(seed: int) -> tuple[Kernel, Kernel, Kernel, Kernel, int, int, int, int, bool]:
    """A producer and a consumer in random spellings, their twins in ``global_thread_id``,
    the sizes, and whether the consumer reads away from its element (illegal)."""
    rng = random.Random(seed)
    off = rng.random() < 0.25
    ks = []
    for tmpl, var in ((PRODUCER, "i"), (CONSUMER, "j")):
        lets: list[str] = []
        s, wide = spell(rng, "x", lets)
        n = "i64(n)" if wide else "n"
        at = (f"{var} + {'1L' if wide else '1'}") if off and var == "j" else var
        twin = "i64(global_thread_id)" if wide else "global_thread_id"
        ks.append(kernel(tmpl.format(lets=" ".join(lets), spell=s, n=n, at=at)))
        ks.append(kernel(tmpl.format(lets="", spell=twin, n=n, at=at)))
    block = rng.choice([1, 3, 32, 64, 128])
    n = rng.randint(1, 300)
    tp = -(-n // block) * block + rng.choice([0, 0, block])
    tc = -(-n // block) * block
    return ks[0], ks[2], ks[1], ks[3], n, tp, tc, block, off


def launches(p: Kernel, c: Kernel, n: int, tp: int, tc: int, block: int) -> list[Launch]:
    return [KernelLaunch(p, tp, block, {"x": "X", "y": "Y", "a": np.float32(1.5), "n": n}),
            KernelLaunch(c, tc, block, {"y": "Y", "z": "Z", "n": n})]


def run_all(ls: list[Launch], bufs: dict[str, np.ndarray], be: Backend | None) -> None:
    for lc in ls:
        args = {k: bufs[v] if isinstance(v, str) else v for k, v in lc.by_name.items()}
        assert isinstance(lc.threads, int) and isinstance(lc.block, int)
        if be is None:
            run_kernel(lc.kernel, args, lc.threads, lc.block)
        else:
            be.run_kernel(lc.kernel, args, lc.threads, lc.block)


def pair_mismatches(count: int, cl: Backend | None) -> tuple[list[str], int]:
    bad: list[str] = []
    fused_n = 0
    for seed in range(count):
        p, c, tw_p, tw_c, n, tp, tc, block, off = pair_case(seed)
        ls = launches(p, c, n, tp, tc, block)
        new, rep = fuse_launches(ls)
        _, tw_rep = fuse_launches(launches(tw_p, tw_c, n, tp, tc, block))
        if (rep[0].fused, rep[0].rule) != (tw_rep[0].fused, tw_rep[0].rule):
            bad.append(f"seed {seed}: {rep[0]} but twin {tw_rep[0]}")
            continue
        if off and rep[0].fused:
            bad.append(f"seed {seed}: a consumer reading y[j + 1] fused")
            continue
        if not rep[0].fused:
            continue
        fused_n += 1
        rng = np.random.default_rng(seed)
        size = max(tp, tc) + 2
        base = {k: rng.standard_normal(size).astype(np.float32) for k in "XYZ"}
        for be in [None] if cl is None or seed % 4 else [None, cl]:
            a = {k: v.copy() for k, v in base.items()}
            b = {k: v.copy() for k, v in base.items()}
            run_all(ls, a, be)
            run_all(new, b, be)
            for k in a:
                if a[k].tobytes() != b[k].tobytes():
                    bad.append(f"seed {seed}: {k} differs ({be.name if be else 'interp'})")
    return bad, fused_n


def test_ef20_generated_spellings_decide_like_global_thread_id_and_fuse_exactly() -> None:
    """EF-20, EF-22: producer/consumer pairs in generated spellings decide exactly as
    their twins written with ``global_thread_id`` (same rule), a consumer reading its
    neighbour is never fused, and each fused pair is bitwise the unfused launches on the
    interpreter (every case) and OpenCL (every fourth)."""
    bad, fused_n = pair_mismatches(300 if FUZZ else 24, opencl())
    assert not bad, bad[:3]
    assert fused_n > 0


@pytest.mark.slow
@pytest.mark.skipif(not FUZZ, reason="full size in make fuzz (SAREK_FUZZ=1)")
def test_ef20_generated_spellings_fuzz() -> None:
    """EF-20..EF-22 at fuzz size: 2,000 pairs, 2,000 exactness launches."""
    bad, _ = pair_mismatches(2000, opencl())
    assert not bad, bad[:3]
    assert not exactness_mismatches(2000, [get_backend("interp"), opencl()])


def test_ef20_thread_index_pass_on_the_command_line(tmp_path: object) -> None:
    """EF-20: ``sarek-py opt FILE -p thread-index`` prints the canonical form."""
    import pathlib
    import subprocess
    import sys

    assert isinstance(tmp_path, pathlib.Path)
    f = tmp_path / "add.sk"
    f.write_text("kernel add(a : f32[], c : f32[], n : i32) =\n  let tx = thread_idx_x in\n"
                 "  let i = block_dim_x * block_idx_x + tx in\n"
                 "  if i < n then c[i] <- a[i]\n")
    out = subprocess.run([sys.executable, "-m", "sarek_py.cli", "opt", str(f), "-p",
                          "thread-index"], capture_output=True, text=True, check=True).stdout
    assert "let i = global_idx_x in" in out and "thread_idx_x" not in out, out


# ------------------------------------------------------------- EF-23: facts of a launch

LITERAL = """
kernel p(x : f32[], y : f32[], n : i32) =
  let bx = block_idx_x in
  let tx = thread_idx_x in
  let i = bx * 64 + tx in
  if i < n then y[i] <- x[i] * 2.0f

kernel c(y : f32[], z : f32[], n : i32) =
  let i = block_idx_x * 64 + thread_idx_x in
  if i < n then z[i] <- y[i] + 1.0f
"""

ONE_BLOCK = """
kernel p(x : i32[], y : i32[]) =
  y[thread_idx_x] <- x[thread_idx_x] * 2

kernel c(y : i32[], z : i32[]) =
  z[thread_idx_x] <- y[thread_idx_x] + 1
"""


def _pair(text: str) -> tuple[Kernel, Kernel]:
    m = parse_module(text, "facts.sk")
    check_module(m)
    return m.kernels[0], m.kernels[1]


def _bufs(dtype: type, size: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {k: (rng.standard_normal(size) * 10).astype(dtype) for k in "XYZ"}


@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_ef23_literal_block_size_fuses_on_that_block_only(backend: str) -> None:
    """EF-23: ``bx * 64 + tx`` is the element on launches of blocks of 64 (fused, bitwise
    equal); on blocks of 32 it is not (refused, the consumer is not element-wise there);
    the fused kernel launched on blocks of 32 is refused by its launch check (LEG-14)."""
    p, c = _pair(LITERAL)
    n = 200
    ls = [KernelLaunch(p, 256, 64, {"x": "X", "y": "Y", "n": n}),
          KernelLaunch(c, 256, 64, {"y": "Y", "z": "Z", "n": n})]
    new, rep = fuse_launches(ls)
    assert rep[0].fused, rep[0]
    be = None if backend == "interp" else opencl()
    a, b = _bufs(np.float32, 256), _bufs(np.float32, 256)
    run_all(ls, a, be)
    run_all(new, b, be)
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)
    other = [KernelLaunch(p, 256, 32, {"x": "X", "y": "Y", "n": n}),
             KernelLaunch(c, 256, 32, {"y": "Y", "z": "Z", "n": n})]
    _, rep2 = fuse_launches(other)
    assert not rep2[0].fused and rep2[0].rule == "EF-1", rep2[0]
    fused = new[0]
    args = {k: b[v] if isinstance(v, str) else v for k, v in fused.by_name.items()}
    with pytest.raises(SarekError, match="LEG-14|not the fusion"):
        if be is None:
            run_kernel(fused.kernel, args, 256, 32)
        else:
            be.run_kernel(fused.kernel, args, 256, 32)


@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_ef23_one_block_thread_idx_is_the_element(backend: str) -> None:
    """EF-23: Sarek's unguarded ``a.(thread_idx_x)`` kernels fuse on a launch of one
    block (bitwise equal to the unfused pair); on two blocks they are refused, and the
    fused kernel launched on two blocks is refused by its launch check (LEG-14)."""
    p, c = _pair(ONE_BLOCK)
    ls = [KernelLaunch(p, 64, 64, {"x": "X", "y": "Y"}),
          KernelLaunch(c, 64, 64, {"y": "Y", "z": "Z"})]
    new, rep = fuse_launches(ls)
    assert rep[0].fused, rep[0]
    be = None if backend == "interp" else opencl()
    a, b = _bufs(np.int32, 64), _bufs(np.int32, 64)
    run_all(ls, a, be)
    run_all(new, b, be)
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)
    _, rep2 = fuse_launches([KernelLaunch(p, 64, 32, {"x": "X", "y": "Y"}),
                             KernelLaunch(c, 64, 32, {"y": "Y", "z": "Z"})])
    assert not rep2[0].fused, rep2[0]
    fused = new[0]
    args = {k: b[v] if isinstance(v, str) else v for k, v in fused.by_name.items()}
    with pytest.raises(SarekError, match="LEG-14|not the fusion"):
        if be is None:
            run_kernel(fused.kernel, args, 64, 32)
        else:
            be.run_kernel(fused.kernel, args, 64, 32)


def test_ef23_fuse_without_launch_keeps_literal_blocks_refused() -> None:
    """EF-23: ``fuse(p, c, shared=...)`` knows no launch: a literal block size is not the
    element there (EF-1), nor is ``thread_idx_x``."""
    for text in (LITERAL, ONE_BLOCK):
        p, c = _pair(text)
        with pytest.raises(FusionRefused) as info:
            fuse(p, c, shared={"y": "y"})
        assert info.value.rule == "EF-1", info.value


def test_ef23_fuse_names_the_literal_block_as_the_cause() -> None:
    """EF-1 with EF-23: ``fuse()`` refusing a consumer whose element names the block size
    as a number says so, and says to fuse the launches instead (a red-team finding: the
    refusal only said the consumer is not of the form ``let i = global_thread_id``)."""
    p, c = _pair(LITERAL)
    with pytest.raises(FusionRefused) as info:
        fuse(p, c, shared={"y": "y"})
    assert info.value.rule == "EF-1"
    assert "names the block size as a number" in info.value.reason
    assert "fuse_launches" in info.value.reason


def test_ef23_fused_kernel_carries_the_consumers_launch_facts() -> None:
    """EF-23: a fusion that read the consumer's element from its launch carries the facts:
    ``block(64)`` for a literal block, with ``within(ep_tc)`` for one block; the text reads
    back; a relaunch on the same block runs, on another block or with more consumer
    threads than the block is refused (a red-team finding: the fused kernel was accepted
    on another block and differed from the unfused pair there)."""
    from sarek_py.ir.nodes import Module
    from sarek_py.ir.printer import print_module
    p, c = _pair(LITERAL)
    new, rep = fuse_launches([KernelLaunch(p, 256, 64, {"x": "X", "y": "Y", "n": 200}),
                              KernelLaunch(c, 256, 64, {"y": "Y", "z": "Z", "n": 200})])
    k = new[0].kernel
    text = print_module(Module(kernels=(k,)))
    assert "block(64)" in text and "within" not in text, text
    again = parse_module(text, "again.sk")
    check_module(again)
    assert again.kernels[0].requires == k.requires
    b = _bufs(np.float32, 256)
    args = {q: b[v] if isinstance(v, str) else v for q, v in new[0].by_name.items()}
    run_kernel(k, args, 256, 64)  # the same block: runs
    p1, c1 = _pair(ONE_BLOCK)
    new1, _ = fuse_launches([KernelLaunch(p1, 64, 64, {"x": "X", "y": "Y"}),
                             KernelLaunch(c1, 64, 64, {"y": "Y", "z": "Z"})])
    k1 = new1[0].kernel
    assert k1.requires is not None and k1.requires.block == 64
    assert k1.requires.within == ("ep_tc",)
    t1 = print_module(Module(kernels=(k1,)))
    assert "block(64) within(ep_tc)" in t1, t1
    b1 = _bufs(np.int32, 128)
    args1 = {q: b1[v] if isinstance(v, str) else v for q, v in new1[0].by_name.items()}
    args1["ep_tc"] = 100
    with pytest.raises(SarekError, match="one block"):
        run_kernel(k1, args1, 64, 64)


def test_ef23_producer_block_other_than_the_consumers_is_refused() -> None:
    """EF-23: a consumer whose element needs its own launch's block (64) is refused when
    the producer's launch, which the fused kernel keeps, has blocks of 128."""
    _, c = _pair(LITERAL)
    p = kernel("kernel p(x : f32[], y : f32[], n : i32) =\n  let i = global_thread_id in\n"
               "  if i < n then y[i] <- x[i] * 2.0f\n")
    _, rep = fuse_launches([KernelLaunch(p, 256, 128, {"x": "X", "y": "Y", "n": 200}),
                            KernelLaunch(c, 256, 64, {"y": "Y", "z": "Z", "n": 200})])
    assert not rep[0].fused and rep[0].rule == "EF-23", rep[0]
    assert "blocks of 64" in (rep[0].reason or "") and "blocks of 128" in (rep[0].reason or "")
    new, rep = fuse_launches([KernelLaunch(p, 256, 64, {"x": "X", "y": "Y", "n": 200}),
                              KernelLaunch(c, 256, 64, {"y": "Y", "z": "Z", "n": 200})])
    assert rep[0].fused, rep[0]


@pytest.mark.parametrize("clause,msg", [
    ("fused(p, c, p_y, ep_tc) within(ep_tc)", "within(...) needs the block"),
    ("fused(p, c, p_y, ep_tc) block(0)", "block(...) holds one block size"),
    ("fused(p, c, p_y, ep_tc) block(64) block(64)", "block(...) holds one block size"),
    ("range(ep_tc > 0) block(64)", "block(...) and within(...) belong to a fused kernel"),
])
def test_txt40_block_and_within_clauses_are_checked(clause: str, msg: str) -> None:
    """TXT-40 with EF-23: ``block(B)`` and ``within(...)`` read back only as a fused
    kernel's conditions, one block size, ``within`` with its block; else a located error."""
    text = (f"kernel k(p_y : f32[], ep_tc : i32)\n  requires {clause} =\n"
            "  p_y[global_thread_id] <- 1.0f\n")
    with pytest.raises(SarekError, match=r"k\.sk:2:\d+: error: .*" + msg.replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.")):
        parse_module(text, "k.sk")
