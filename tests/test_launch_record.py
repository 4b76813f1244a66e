"""One launch record (specs/launch.md LCH-24, LCH-23; specs/fusion-legality.md LEG-1,
LEG-10, LEG-12).

The host-program IR, the launch text, ``fuse_launches``, pipelines and ``KernelLaunch``
all hold :class:`sarek_py.ir.host.launch.Launch`; a launch of a host program goes into
``fuse_launches`` as it is, and the fusion decides on it exactly as on the same launch
spelled with ``KernelLaunch``.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest
from fusion_strategies import Case, cases
from hypothesis import HealthCheck, event, given, settings

import sarek_py
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel, pipeline
from sarek_py.fusion.epilogue.sequence import Decision, fuse_launches, host_segments
from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.host.launch import (
    UNBOUND,
    KernelLaunch,
    Launch,
    check_launch,
    is_symbolic,
)
from sarek_py.ir.host.launch_text import parse_host, print_launch
from sarek_py.ir.nodes import Const, Ref, Var
from sarek_py.ir.parser import parse_module
from sarek_py.ir.types import Scalar

ROOT = Path(__file__).resolve().parent.parent / "sarek_py"
FUZZ = bool(os.environ.get("SAREK_FUZZ"))

KERNELS = """
kernel scale(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- a * x[i]

kernel relu(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then z[i] <- y[i] > 0.0f ? y[i] : 0.0f

kernel bias(z : f32[], w : f32[], b : f32) =
  let i = global_thread_id in
  w[i] <- z[i] + b

kernel shift(w : f32[], v : f32[]) =
  let i = global_thread_id in
  v[i] <- w[i + 1]

kernel blocks(y : f32[], z : f32[]) =
  let i = global_thread_id in
  if i < block_dim_x * 8 then z[i] <- y[i]
"""

M = parse_module(KERNELS, "record.sk")

#: launch texts (LCH-16) whose adjacent pairs fuse or are refused for different rules
TEXTS = {
    "chain": """host x : f32[], y : f32[], z : f32[], w : f32[], n : i32
launch scale(x, y, 1.5f, n) threads i64(n) + 3L block 8
launch relu(y, z, n) threads n block 16
launch bias(z, w, 0.25f) threads n block 4
""",
    "other count": """host x : f32[], y : f32[], z : f32[], n : i32, m : i32
launch scale(x, y, 2.0f, m) threads m block 8
launch relu(y, z, n) threads n block 16
""",
    "window": """host x : f32[], y : f32[], z : f32[], n : i32
launch relu(x, y, n) threads n block 8
launch shift(y, z) threads n block 8
""",
    "aliasing": """host x : f32[], y : f32[], n : i32
launch scale(x, y, 2.0f, n) threads n block 8
launch relu(y, x, n) threads n block 8
""",
    "constants": """host x : f32[], y : f32[], z : f32[]
launch scale(x, y, 2.0f, 64) threads 64L block 8
launch relu(y, z, 60) threads 60L block 8
launch blocks(z, y) threads 60L block 8
""",
}


def host_launches(name: str) -> list[Launch]:
    _, stmts = parse_host(TEXTS[name], M, f"{name}.launches")
    return [s for s in stmts if isinstance(s, Launch)]


def spelled(lc: Launch) -> Launch:
    """The same launch spelled with ``KernelLaunch``: array arguments by buffer name,
    counts and scalars as numbers where they are constants, symbolic otherwise."""

    def value(e: object) -> object:
        if isinstance(e, Ref) and e.var.is_array:
            return e.var.name
        if isinstance(e, Const):
            return e.value
        return e

    assert isinstance(lc.block, Const)
    return KernelLaunch(lc.kernel, value(lc.threads), int(lc.block.value),  # type: ignore[arg-type]
                        {p: value(a) for p, a in lc.by_name.items()})  # type: ignore[misc]


def decisions(report: list[Decision]) -> list[tuple[bool, str | None, str | None, str | None]]:
    return [(d.fused, d.rule, d.reason, d.kernel) for d in report]


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_lch24_host_launches_and_kernel_launches_decide_alike(name: str) -> None:
    """LCH-24: the launches of a host program go into fuse_launches as they are (no
    converter), through host_segments (what the host knows evaluated), or spelled with
    KernelLaunch: the same decision for every pair, made by the one fuse_launches."""
    raw = host_launches(name)
    _, direct = fuse_launches(raw)
    segs = host_segments(raw)
    assert len(segs) == 1 and segs[0].break_reason is None
    assert all(type(lc) is Launch for lc in segs[0].launches)
    _, evaluated = fuse_launches(segs[0].launches)
    _, by_name = fuse_launches([spelled(lc) for lc in raw])
    assert decisions(direct) == decisions(evaluated) == decisions(by_name)
    assert len(direct) == len(raw) - 1


def test_lch24_the_decisions_differ_between_the_cases() -> None:
    """The check above can fail: the cases fuse and refuse for different rules."""
    seen = {name: [(d.fused, d.rule) for d in fuse_launches(host_launches(name))[1]]
            for name in TEXTS}
    assert seen["chain"] == [(True, None), (True, None)]
    assert seen["other count"] == [(False, "LEG-12")]
    assert seen["window"][0][0] is False and seen["aliasing"][0][0] is False
    assert seen["constants"] == [(True, None), (False, "EF-2")]  # block_dim_x in C


def test_lch24_a_fused_host_launch_is_a_launch_of_the_fused_kernel() -> None:
    """The fused launch is the same record: P's geometry, P's arguments then C's
    unshared ones then C's thread count (ep_tc), still symbolic where they were."""
    raw = host_launches("chain")
    new, report = fuse_launches(raw)
    assert [d.fused for d in report] == [True, True] and len(new) == 1
    f = new[0]
    assert type(f) is Launch
    assert [p.name for p in f.kernel.params] == list(f.by_name)
    assert f.threads == raw[0].threads and f.block == 8  # the constant is its value
    assert f.arg("p_p_x") == raw[0].arg("x") and is_symbolic(f.arg("ep_tc"))
    assert f.arg("ep_tc") == raw[2].threads and f.arg("p_ep_tc") == raw[1].threads


def test_lch24_pipelines_record_the_one_launch_record() -> None:
    """LCH-24: a pipeline records Launch values and fuses them with the one
    fuse_launches: its decisions are those of the KernelLaunch spelling of its launches."""

    @kernel
    def dbl(x: Vec[f32], t: Vec[f32], n: i32):
        i = global_thread_id()
        if i < n:
            t[i] = x[i] * 2.0

    @kernel
    def inc(t: Vec[f32], y: Vec[f32], n: i32):
        i = global_thread_id()
        if i < n:
            y[i] = t[i] + 1.0

    x = np.arange(100, dtype=np.float32)
    t, y = np.zeros_like(x), np.zeros_like(x)
    with pipeline(backend="interp") as p:
        dbl[100, 32](x, t, 100)
        inc[100, 32](t, y, 100)
    assert all(type(lc) is Launch for lc in p.launches)
    assert np.array_equal(y, x * 2 + 1)
    by_hand = [KernelLaunch(dbl.ir, 100, 32, {"x": x, "t": t, "n": 100}),
               KernelLaunch(inc.ir, 100, 32, {"t": t, "y": y, "n": 100})]
    _, report = fuse_launches(by_hand)
    assert decisions(report) == decisions(p.decisions) and report[0].fused


def is_record(cls: ast.ClassDef) -> bool:
    """Whether a class is a launch record: a kernel, a thread count, a block size and the
    arguments (a started launch's device state, ``runtime.base.Pending``, is not one)."""
    fields = {s.target.id for s in cls.body
              if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return ("kernel" in fields and bool(fields & {"threads", "thread_count", "count"})
            and bool(fields & {"block", "block_size"}) and bool(fields & {"args", "arguments"}))


def _record_classes() -> list[str]:
    """Every launch record class of sarek_py."""
    out = []
    for f in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ClassDef) and is_record(node):
                out.append(f"{f.relative_to(ROOT.parent)}:{node.name}")
    return sorted(out)


def test_lch24_no_second_record_and_no_converter() -> None:
    """LCH-24: Launch is the only launch record of the package; KernelLaunch makes one,
    and nothing converts a launch of one kind into another."""
    assert _record_classes() == ["sarek_py/ir/host/launch.py:Launch"]
    assert type(KernelLaunch(M.kernel("bias"), 4, 4, {"z": "Z", "w": "W", "b": 1.0})) is Launch
    assert sarek_py.KernelLaunch is KernelLaunch and sarek_py.Launch is Launch
    from sarek_py.fusion.epilogue import sequence

    assert not hasattr(sequence, "kernel_launch") and not hasattr(sequence, "KernelLaunch")


def test_lch24_the_record_finder_finds_a_second_record() -> None:
    """The scan above can fail: the old second record (kernel, threads, block, args) is
    found; a class without arguments is not."""
    old = ("class KernelLaunch:\n    kernel: Kernel\n    threads: int | Expr\n"
           "    block: int = 256\n    args: Mapping[str, ArgValue] = {}\n")
    cls = ast.parse(old).body[0]
    assert isinstance(cls, ast.ClassDef) and is_record(cls)
    pending = ast.parse("class Pending:\n    kernel: Kernel\n    threads: int\n").body[0]
    assert isinstance(pending, ast.ClassDef) and not is_record(pending)


# ------------------------------------------------------------------ equality and hashing


def test_lch24_array_arguments_compare_by_identity() -> None:
    """Two launches are equal when their arrays are the same objects and their other
    arguments equal values; a copy of an array is another argument. Hashing agrees."""
    k = M.kernel("bias")
    z, w = np.ones(8, np.float32), np.zeros(8, np.float32)
    a = KernelLaunch(k, 8, 4, {"z": z, "w": w, "b": 1.0})
    b = KernelLaunch(k, 8, 4, {"z": z, "w": w, "b": 1.0})
    c = KernelLaunch(k, 8, 4, {"z": z.copy(), "w": w, "b": 1.0})
    d = KernelLaunch(k, 8, 4, {"z": z, "w": w, "b": 1})  # an int is not the float 1.0
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != c and a != d
    nan = float("nan")
    e = KernelLaunch(k, 8, 4, {"z": z, "w": w, "b": nan})
    assert e == attrs_copy(e) and e in {e}


def attrs_copy(lc: Launch) -> Launch:
    import attrs

    return attrs.evolve(lc)


def test_lch24_symbolic_arguments_compare_by_value() -> None:
    raw = host_launches("chain")
    again = host_launches("chain")
    assert raw[1] != again[1]  # parsed twice: other host variables (ids)
    assert raw[1] == attrs_copy(raw[1]) and hash(raw[1]) == hash(attrs_copy(raw[1]))


# ------------------------------------------------------------------------- the spellings


def test_lch24_by_name_view_and_unbound() -> None:
    k = M.kernel("scale")
    lc = KernelLaunch(k, 8, 4, {"x": "X", "y": "Y", "n": 8})
    assert lc.args == ("X", "Y", UNBOUND, 8)
    assert lc.by_name == {"x": "X", "y": "Y", "n": 8}
    assert lc.arg("n") == 8 and lc.threads == 8 and lc.block == 4
    with pytest.raises(KeyError):
        lc.arg("a")
    assert lc.counts() == (8, 4)


@pytest.mark.parametrize("make, error, match", [
    (lambda k: KernelLaunch(k, 8, 4, {"zz": "Z"}), ValueError, "'zz' is not a parameter of bias"),
    (lambda k: KernelLaunch(k, 8, 4, ["Z", "W", 1.0]), TypeError, "KernelLaunch args must map"),
    (lambda k: KernelLaunch("bias", 8), TypeError, "KernelLaunch kernel must be an IR Kernel"),
    (lambda k: KernelLaunch(k, 2 ** 63), ValueError, "KernelLaunch threads = 9223372036854775808"),
    (lambda k: KernelLaunch(k, 8, Const(4, Scalar.I32)), TypeError, "KernelLaunch block"),
    (lambda k: Launch(k, True, 4, ("Z", "W", 1.0)), TypeError, "Launch threads must be an integer"),
    (lambda k: Launch(k, 8, 0, ("Z", "W", 1.0)), ValueError, "Launch block = 0 is not in 1.."),
    (lambda k: Launch(k, 8.0, 4, ("Z", "W", 1.0)), TypeError, "Launch threads must be an integer"),
    (lambda k: Launch(k, 8, 4, {"z": "Z"}), TypeError, "one argument per kernel parameter"),
])
def test_lch23_lch24_both_spellings_check_counts_and_arguments(
        make: object, error: type[Exception], match: str) -> None:
    """LCH-23 holds for the record itself, not only for KernelLaunch."""
    with pytest.raises(error, match=match):
        make(M.kernel("bias"))  # type: ignore[operator]


def test_lch24_a_bound_launch_is_no_host_statement() -> None:
    """LCH-1: a host program holds symbolic launches; a bound one given to the checker,
    the printer or the counts is a LaunchError, never a crash."""
    k = M.kernel("bias")
    bound = KernelLaunch(k, 8, 4, {"z": np.ones(8, np.float32), "w": "W", "b": 1.0})
    with pytest.raises(LaunchError, match="bound value, not a host expression"):
        check_launch(bound)
    with pytest.raises(LaunchError, match="bound value"):
        print_launch(bound)
    unbound = KernelLaunch(k, 8, 4, {"z": "Z", "w": "W"})
    with pytest.raises(LaunchError, match="has no argument"):
        check_launch(unbound)
    with pytest.raises(LaunchError, match="must be known to run it"):
        host_launches("chain")[0].counts()


def test_lch24_symbolic_block_size_is_unknown_to_the_analysis() -> None:
    """A block size that is a host expression: a fusion whose proof needs it (P stores
    under ``i < block_dim_x * 8``) is refused with the reason, with the block size known
    it is proved; a fusion that does not need it goes through either way."""
    _, stmts = parse_host("""host x : f32[], y : f32[], z : f32[], b : i32
launch blocks(x, y) threads 64L block 8
launch relu(y, z, 64) threads 64L block 8
""", M, "b.launches")
    known = [s for s in stmts if isinstance(s, Launch)]
    b = Ref(next(v for v in parse_host("host b : i32\n", M)[0]))
    sym = [Launch(lc.kernel, lc.threads, b, lc.args) for lc in known]
    assert fuse_launches(known)[1][0].fused
    refused = fuse_launches(sym)[1][0]
    assert not refused.fused and refused.rule == "LEG-4"
    assert "block_dim_x" in (refused.reason or "")
    chain = host_launches("chain")
    assert all(d.fused for d in fuse_launches(
        [Launch(lc.kernel, lc.threads, b, lc.args) for lc in chain])[1])


# ------------------------------------------------------------------- scratch buffers


@pytest.mark.parametrize("text", [
    # C's t is a scratch buffer: a fresh device buffer, not the t P wrote
    """host x : f32[], t : f32[], y : f32[], n : i32
launch scale(x, t, 2.0f, n) threads n block 8
launch relu(t, y, n) threads n block 8 scratch t size n
""",
    # P writes a scratch buffer: C reads the host array t, not P's device buffer
    """host x : f32[], t : f32[], y : f32[], n : i32
launch scale(x, t, 2.0f, n) threads n block 8 scratch t size n read_back n
launch relu(t, y, n) threads n block 8
""",
])
def test_lch5_lch24_a_scratch_argument_is_a_buffer_of_its_own_launch(text: str) -> None:
    """LCH-5, LEG-1: a scratch argument is a device-only buffer of its launch, whatever
    host variable names it, so it is never the intermediate shared with another launch:
    the pair is not fused, directly or through host_segments (the old converter dropped
    the scratch clause and fused these)."""
    _, stmts = parse_host(text, M, "s.launches")
    raw = [s for s in stmts if isinstance(s, Launch)]
    for launches in (raw, list(host_segments(raw)[0].launches)):
        _, report = fuse_launches(launches)
        assert not report[0].fused, report[0]
        assert report[0].rule == "LEG-8"


# ------------------------------------------------------------- counts known out of range

NEGATIVE = KERNELS + """
program main
  var n : i32 = 0 - 5;
  var x : f32[] allocatable;
  var y : f32[] allocatable;
  var z : f32[] allocatable;
begin
  allocate x[10];
  allocate y[10];
  allocate z[10];
  launch scale(x, y, 1.5f, n) threads n block 8;
  launch relu(y, z, n) threads n block 8
end
"""


def test_lch23_lch24_a_known_count_out_of_range_ends_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """LEG-11, LCH-23: a thread count the host knows to be -5 ends the run with the reason
    (the old converter raised a ValueError: a traceback from `sarek-py explain`); given to
    fuse_launches directly it is a LaunchError naming the launch."""
    from sarek_py.cli.main import main
    from sarek_py.ir.host.text import parse_program

    f = tmp_path / "neg.sk"
    f.write_text(NEGATIVE)
    code = main(["explain", str(f)])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    assert "launch of scale: the thread count -5 is not in 0..9223372036854775807" in out
    prog = parse_program(NEGATIVE, "neg.sk")
    launches = [s for s in prog.body.stmts if isinstance(s, Launch)]  # type: ignore[union-attr]
    with pytest.raises(LaunchError, match="launch of scale: the thread count -5"):
        fuse_launches([lc.known_in({"n": -5}) for lc in launches])


# ------------------------------------------------- differential: the two spellings agree


def as_host_launch(lc: Launch) -> Launch:
    """``lc`` (buffers by name, values) written as a host program writes it: a ``Ref`` of
    a host array per buffer name, constants for the values."""
    args: list[object] = []
    for p, a in zip(lc.kernel.params, lc.args, strict=True):
        if isinstance(a, str):
            args.append(Ref(Var(a, 10_000 + sum(map(ord, a)), p.type)))
        else:
            assert isinstance(p.type, Scalar)
            args.append(Const(a.item() if isinstance(a, np.generic) else a, p.type))
    assert isinstance(lc.threads, int) and isinstance(lc.block, int)
    return Launch(lc.kernel, Const(lc.threads, Scalar.I64), Const(lc.block, Scalar.I32),
                  tuple(args))  # type: ignore[arg-type]


def same_decision_in_both_spellings(case: Case) -> None:
    host = [as_host_launch(lc) for lc in case.launches]
    assert all(is_symbolic(a) for lc in host for a in lc.args)
    _, by_value = fuse_launches(list(case.launches))
    _, by_host = fuse_launches(host)
    assert decisions(by_host) == decisions(by_value)
    event(f"fused={by_value[0].fused} rule={by_value[0].rule}")


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_lch24_generated_pairs_decide_alike_in_both_spellings(case: Case) -> None:
    """LCH-24 on generated producer/consumer pairs (tests/fusion_strategies.py): the pair
    written as a host program writes it and as KernelLaunch values gets the same
    decision, rule and reason from fuse_launches."""
    same_decision_in_both_spellings(case)


@pytest.mark.slow
@pytest.mark.skipif(not FUZZ, reason="the long run of make fuzz (SAREK_FUZZ=1)")
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_lch24_generated_pairs_decide_alike_in_both_spellings_long(case: Case) -> None:
    """The same, 3000 random pairs (make fuzz)."""
    same_decision_in_both_spellings(case)
