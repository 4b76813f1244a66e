"""Launch conditions of kernel-level fusion (issue 11 item 5; specs/fusion-legality.md
LEG-13 … LEG-16, specs/epilogue-fusion.md EF-14, EF-15).

``fuse()`` and ``sarek-py fuse`` return a kernel that equals P's launch then C's only for
some launches. The fused kernel carries those conditions (``Kernel.requires``, printed as
a ``requires`` clause that parses back), and every launch path checks them against the
actual arguments: the interpreter's ``run_kernel``, ``Backend.launch``/``run_kernel``
(front-end pipelines go through it), host programs' launch statements (interpreter and
runtime), and ``sarek-py run``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sarek_py.cli.main import main
from sarek_py.fusion.epilogue.fuse_kernels import fuse
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel
from sarek_py.ir.requires import FusionRequires, FusionStep
from sarek_py.ir.sexp import from_sexp, to_sexp
from sarek_py.ir.typecheck import check_kernel
from sarek_py.runtime import get_backend

SRC = """
kernel scale(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- a * x[i]

kernel relu(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then z[i] <- y[i] > 0.0f ? y[i] : 0.0f

kernel bias(z : f32[], w : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then w[i] <- z[i] + 0.5f

kernel twice(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (y[i] <- x[i]; if i == 0 then y[0] <- 2.0f * x[0])

kernel holes(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n && i != 3 then y[i] <- x[i]

kernel acc(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then z[i] <- z[i] + y[i]
"""
M = parse_module(SRC, "pairs.sk")
N = 10
SIZE = 16  # arrays longer than the producer's n: a consumer on more threads reads more


def k(name: str) -> Kernel:
    return M.kernel(name)


def fused(p: str, c: str, **kw: Any) -> Kernel:
    return fuse(k(p), k(c), shared={"y": "y"}, **kw)


def arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(SIZE).astype(np.float32),
            "y": rng.standard_normal(SIZE).astype(np.float32),
            "z": rng.standard_normal(SIZE).astype(np.float32)}


def fused_args(a: dict[str, np.ndarray], tc: int, with_scale: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"p_x": a["x"], "p_y": a["y"], "p_n": N, "c_z": a["z"],
                           "c_n": tc, "ep_tc": tc}
    if with_scale:
        out["p_a"] = np.float32(1.5)
    return out


#: (producer, consumer, producer threads, consumer threads): wrong when fused as launched
WRONG = [
    pytest.param("twice", "acc", N, N, id="double-store-then-accumulate"),
    pytest.param("holes", "relu", N, N, id="element-left-unstored"),
    pytest.param("scale", "relu", N, N + 2, id="consumer-launched-with-more-threads"),
]


def unfused_then_fused(p: str, c: str, tp: int, tc: int,
                       run: Callable[[Kernel, dict[str, Any], int], None]
                       ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    a1, a2 = arrays(), arrays()
    pa: dict[str, Any] = {"x": a1["x"], "y": a1["y"], "n": N}
    if p == "scale":
        pa["a"] = np.float32(1.5)
    run(k(p), pa, tp)
    run(k(c), {"y": a1["y"], "z": a1["z"], "n": tc}, tc)
    run(fused(p, c), fused_args(a2, tc, p == "scale"), tp)
    return a1, a2


def interp(kern: Kernel, args: dict[str, Any], threads: int) -> None:
    run_kernel(kern, args, threads, 4)


def backend(kern: Kernel, args: dict[str, Any], threads: int) -> None:
    get_backend("interp").run_kernel(kern, args, threads, 4)


# ------------------------------------------------------------------------------ LEG-14


@pytest.mark.parametrize("p, c, tp, tc", WRONG)
@pytest.mark.parametrize("run", [interp, backend], ids=["run_kernel", "Backend.run_kernel"])
def test_leg14_wrong_launches_of_fused_kernels_are_refused(
        p: str, c: str, tp: int, tc: int, run: Callable[..., None]) -> None:
    """LEG-14: the three launches of issue 11 item 5 ran the fused kernel and gave other
    bytes than unfused; every launch path now refuses them with the rule."""
    with pytest.raises(FusionRefused) as ei:
        unfused_then_fused(p, c, tp, tc, run)
    assert ei.value.rule == "LEG-14"
    assert f"the fusion of {p} and {c}" in ei.value.reason
    assert "LEG-3" in ei.value.reason  # the cause: not stored exactly once


@pytest.mark.parametrize("run", [interp, backend], ids=["run_kernel", "Backend.run_kernel"])
def test_leg14_right_launch_runs_and_equals_unfused(run: Callable[..., None]) -> None:
    a1, a2 = unfused_then_fused("scale", "relu", N + 3, N, run)
    for name in a1:
        assert a1[name].tobytes() == a2[name].tobytes(), name
    a1, a2 = unfused_then_fused("scale", "relu", N, N - 4, run)  # fewer consumer threads
    for name in a1:
        assert a1[name].tobytes() == a2[name].tobytes(), name


def test_leg14_backend_launch_with_device_buffers_is_checked() -> None:
    """LEG-14 on ``Backend.launch`` itself (device buffers, no host arrays)."""
    be = get_backend("interp")
    fk = fused("scale", "relu")
    dev = {n: be.allocate((N,), np.float32) for n in ("p_x", "p_y", "c_z")}
    scalars = {"p_a": np.float32(1.0), "p_n": np.int32(N), "c_n": np.int32(N)}
    be.launch(fk, {**dev, **scalars, "ep_tc": np.int32(N)}, N, 4)
    with pytest.raises(FusionRefused, match="LEG-14"):  # relu acts on element N: unstored
        be.launch(fk, {**dev, **scalars, "c_n": np.int32(N + 1), "ep_tc": np.int32(N + 1)},
                  N, 4)
    with pytest.raises(FusionRefused, match="LEG-15"):
        be.launch(fk, {**dev, **scalars, "c_z": dev["p_x"], "ep_tc": np.int32(N)}, N, 4)
    with pytest.raises(FusionRefused, match="LEG-14"):  # no thread at all runs no consumer
        be.launch(fk, {**dev, **scalars, "ep_tc": np.int32(N)}, 0, 4)


def test_leg14_opencl_launch_is_checked() -> None:
    """LEG-14 on a device runtime: refused before anything is built or run."""
    try:
        be = get_backend("opencl")
    except (BackendUnavailable, SarekError) as exc:
        pytest.skip(f"no OpenCL: {exc}")
    a = arrays()
    builds, launches = be.stats.builds, be.stats.launches
    with pytest.raises(FusionRefused, match="LEG-14"):
        be.run_kernel(fused("twice", "acc"), fused_args(a, N), N, 4)
    assert (be.stats.builds, be.stats.launches) == (builds, launches)


def test_leg14_multi_dimensional_launch_of_a_fused_kernel_is_refused() -> None:
    a = arrays()
    with pytest.raises(SarekError, match="LEG-14"):
        run_kernel(fused("scale", "relu"), fused_args(a, N, True), N, 4, grid=(3,),
                   block_shape=(4,))


# ------------------------------------------------------------------------------ LEG-15


def test_leg15_buffers_must_be_distinct() -> None:
    """LEG-15: the fusion of kernels was proved with every unshared array parameter a
    buffer of its own: binding two to overlapping memory is refused."""
    a = arrays()
    fk = fused("scale", "relu")
    for bad in ({"c_z": a["y"]}, {"c_z": a["x"][::-1]}, {"p_x": a["y"][:5]}):
        for run in (run_kernel, get_backend("interp").run_kernel):  # the rule, before copies
            with pytest.raises(FusionRefused) as ei:
                run(fk, {**fused_args(a, N, True), **bad}, N, 4)
            assert ei.value.rule == "LEG-15" and "overlap" in ei.value.reason


def test_leg15_same_groups_of_a_launch_fusion() -> None:
    """LEG-15: a fusion of launches that bound two producer parameters to one buffer
    requires exactly that; a copy in its place is refused."""
    from sarek_py.fusion.epilogue.sequence import fuse_launches
    from sarek_py.ir.host.launch import KernelLaunch

    src = parse_module("""
kernel add(x : f32[], u : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- x[i] + u[i]
""" + SRC.split("kernel bias")[0].split("kernel relu")[1].join(["kernel relu", ""]))
    x, y, z = arrays()["x"], np.zeros(N, np.float32), np.zeros(N, np.float32)
    new, rep = fuse_launches([
        KernelLaunch(src.kernel("add"), N, 4, {"x": x, "u": x, "y": y, "n": N}),
        KernelLaunch(src.kernel("relu"), N, 4, {"y": y, "z": z, "n": N})])
    assert rep[0].fused
    fk = new[0].kernel
    assert fk.requires is not None and fk.requires.same == (("p_x", "p_u"),)
    run_kernel(fk, dict(new[0].by_name), N, 4)
    with pytest.raises(FusionRefused) as ei:
        run_kernel(fk, {**new[0].by_name, "p_u": x.copy()}, N, 4)
    assert ei.value.rule == "LEG-15" and "one buffer" in ei.value.reason


# ---------------------------------------------------------------------- LEG-13 text form


def test_leg13_fused_kernel_carries_its_conditions() -> None:
    fk = fused("scale", "relu")
    check_kernel(fk)
    assert fk.requires == FusionRequires((FusionStep("scale", "relu", "p_y", "ep_tc"),))
    assert k("scale").requires is None


def test_leg13_conditions_survive_print_parse_and_sexp() -> None:
    fk = fuse(fused("scale", "relu", threads=("n", "n")), k("bias"), shared={"z": "c_z"})
    text = print_kernel(fk)
    assert "requires fused(scale_relu, bias, p_c_z, ep_tc) " \
           "fused(scale, relu, p_p_y, p_ep_tc, p_p_n, p_p_n)" in text
    back = parse_module(text).kernels[0]
    assert back.requires == fk.requires
    assert print_kernel(back) == text
    assert from_sexp(to_sexp(fk)).requires == fk.requires
    # the parsed kernel is checked as the original: a wrong inner count is refused
    a = arrays()
    args = {"p_p_x": a["x"], "p_p_y": a["y"], "p_p_a": np.float32(1.0), "p_p_n": N,
            "p_c_z": a["z"], "p_c_n": N, "p_ep_tc": N + 1, "c_w": np.zeros(SIZE, np.float32),
            "c_n": N, "ep_tc": N}
    with pytest.raises(FusionRefused) as ei:
        run_kernel(back, args, N, 4)
    assert ei.value.rule == "LEG-14" and "scale and relu" in ei.value.reason
    run_kernel(back, {**args, "p_ep_tc": N}, N, 4)


@pytest.mark.parametrize("clause, msg", [
    ("requires =", "expected 'fused("),
    ("requires fused(a, b, n, ep_tc) =", "'n' is not an array parameter"),
    ("requires fused(a, b, y, x) =", "'x' is not an integer scalar parameter"),
    ("requires fused(a, b, y, ep_tc) same(y) =", "two or more"),
    ("requires fused(a, b, y, ep_tc, 4) =", "between the two thread counts"),
])
def test_leg13_bad_requires_clause_is_located(clause: str, msg: str) -> None:
    text = (f"kernel f(x : f32[], y : f32[], n : i32, ep_tc : i32)\n  {clause}\n"
            "  let i = global_thread_id in if i < n then y[i] <- x[i]\n")
    with pytest.raises(SarekError) as ei:
        parse_module(text, "bad.sk")
    assert msg in str(ei.value) and "bad.sk:2:" in str(ei.value)


# ------------------------------------------------------------------------------ LEG-16


def test_leg16_threads_given_to_fuse_are_proved_at_once() -> None:
    fk = fused("scale", "relu", threads=("n", "n"))
    assert fk.requires is not None and fk.requires.steps[0].threads == ("p_n", "p_n")
    for bad in [(N, N), ("n", N + 2)]:
        with pytest.raises(FusionRefused, match=r"with threads="):
            fused("scale", "relu", threads=bad)
    with pytest.raises(FusionRefused, match=r"\[LEG-12\] .* may write the same element"):
        fused("twice", "acc", threads=("n", "n"))
    for nonsense in [("m", "n"), (-1, 3), (True, 3), (3, 2**31)]:
        with pytest.raises(FusionRefused, match="LEG-16"):
            fused("scale", "relu", threads=nonsense)  # type: ignore[arg-type]


def test_leg16_declared_counts_are_checked_at_launch() -> None:
    fk = fused("scale", "relu", threads=("n", "n"))
    a = arrays()
    run_kernel(fk, fused_args(a, N, True), N, 4)
    with pytest.raises(FusionRefused) as ei:  # fewer consumer threads: fine unfused, but
        run_kernel(fk, fused_args(a, N - 1, True), N, 4)  # not what was declared
    assert ei.value.rule == "LEG-14" and "p_n threads" in ei.value.reason


def test_ef15_a_fused_consumer_is_refused() -> None:
    with pytest.raises(FusionRefused) as ei:
        fuse(k("scale"), fused("scale", "relu"), shared={"p_y": "y"})
    assert ei.value.rule == "EF-15"


# -------------------------------------------------------------------- host programs, CLI


def program(tc: int) -> str:
    text = print_kernel(fused("scale", "relu"))
    return (text + "\nprogram t\nvar x : f32[10]; var y : f32[10]; var z : f32[10];\nbegin\n"
            f"  launch scale_relu(x, y, 1.5f, 10, z, {tc}, {tc}) threads 10L "
            "block 4;\n  sync\nend\n")


def test_leg14_host_program_launch_is_checked() -> None:
    from sarek_py.host.interp import run_program
    from sarek_py.ir.host.text import parse_program

    run_program(parse_program(program(N)))
    with pytest.raises(FusionRefused) as ei:
        run_program(parse_program(program(N + 1), "prog.sk"))
    assert ei.value.rule == "LEG-14"
    assert ei.value.loc is not None and ei.value.loc.file == "prog.sk"  # the launch statement


def test_leg14_host_launch_statement_on_a_runtime_is_checked() -> None:
    from sarek_py.host.execute import execute
    from sarek_py.ir.host.text import parse_program

    prog = parse_program(program(N + 1))
    env = {"x": np.ones(N, np.float32), "y": np.zeros(N, np.float32),
           "z": np.zeros(N, np.float32)}
    body = prog.body.stmts if hasattr(prog.body, "stmts") else (prog.body,)
    with pytest.raises(FusionRefused) as ei:
        execute([s for s in body if type(s).__name__ in ("Launch", "Sync")], env,
                get_backend("interp"))
    assert ei.value.rule == "LEG-14" and ei.value.loc is not None


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_ef14_cli_fuse_prints_conditions_that_parse_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "pairs.sk"
    src.write_text(SRC)
    code, out, err = cli(["fuse", str(src), "--producer", "scale", "--consumer", "relu"],
                         capsys)
    assert (code, err) == (0, "")
    assert out.startswith("// launch conditions of scale_relu")
    assert "requires fused(scale, relu, p_y, ep_tc)" in out
    assert "separate buffers that do not overlap" in out
    assert parse_module(out).kernels[0].requires == fused("scale", "relu").requires
    code, out, err = cli(["fuse", str(src), "--producer", "twice", "--consumer", "acc",
                          "--threads", "n,n"], capsys)
    assert code == 1 and "may write the same element" in err and "threads=(n, n)" in err
    code, out, err = cli(["fuse", str(src), "--producer", "scale", "--consumer", "relu",
                          "--threads", "n"], capsys)
    assert code == 2 and "--threads expects TP,TC" in err


def test_leg14_cli_run_checks_conditions(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "f.sk"
    f.write_text(print_kernel(fused("scale", "relu")))
    base = ["run", str(f), "-k", "scale_relu", "--threads", "10", "--block", "4",
            "--size", "p_x=10", "--size", "p_y=10", "--size", "c_z=10", "--size", "p_n=10"]
    code, out, err = cli([*base, "--size", "ep_tc=10"], capsys)
    assert code == 0, err
    code, out, err = cli([*base, "--size", "ep_tc=12"], capsys)
    assert code == 1 and "[LEG-14]" in err and "Traceback" not in err
    p = tmp_path / "p.sk"
    p.write_text(program(N + 1))
    code, out, err = cli(["run", str(p)], capsys)
    assert code == 1 and "LEG-14" in err and "Traceback" not in err
    assert err.startswith(f"{p}:")  # located at the launch statement


def test_leg13_record_naming_no_parameter_is_refused_at_launch() -> None:
    """LEG-13: a record built in code that names what the kernel does not have is
    refused at launch with the rule, not a traceback."""
    import attrs

    fk = fused("scale", "relu")
    a = arrays()
    for bad in (FusionRequires((FusionStep("scale", "relu", "nope", "ep_tc"),)),
                FusionRequires((FusionStep("scale", "relu", "p_y", "p_x"),)),
                FusionRequires((FusionStep("scale", "relu", "p_y", "ep_tc"),), (("p_x", "p_n"),))):
        with pytest.raises(FusionRefused) as ei:
            run_kernel(attrs.evolve(fk, requires=bad), fused_args(a, N, True), N, 4)
        assert ei.value.rule == "LEG-13"


def test_ef9_leg13_fusing_a_fused_kernel_uses_its_buffer_groups() -> None:
    """EF-9 with LEG-13: a producer that requires ``p_x`` and ``p_w`` to be one buffer
    (proved so for its launches) writes ``p_w``; a consumer reading ``p_x`` reads what the
    producer writes, though under another name: refused."""
    from sarek_py.fusion.epilogue.sequence import fuse_launches
    from sarek_py.ir.host.launch import KernelLaunch

    m = parse_module("""
kernel twice_in_place(x : f32[], w : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (let v = x[i] in w[i] <- 2.0f * v; y[i] <- v)

kernel relu(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then z[i] <- y[i] > 0.0f ? y[i] : 0.0f

kernel addx(z : f32[], x : f32[], out : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then out[i] <- z[i] + x[i]
""")
    x, y, z = arrays()["x"], np.zeros(SIZE, np.float32), np.zeros(SIZE, np.float32)
    new, rep = fuse_launches([
        KernelLaunch(m.kernel("twice_in_place"), N, 4, {"x": x, "w": x, "y": y, "n": N}),
        KernelLaunch(m.kernel("relu"), N, 4, {"y": y, "z": z, "n": N})])
    assert rep[0].fused
    f1 = new[0].kernel
    assert f1.requires is not None and f1.requires.same == (("p_x", "p_w"),)
    with pytest.raises(FusionRefused) as ei:
        fuse(f1, m.kernel("addx"), shared={"z": "c_z", "x": "p_x"})
    assert ei.value.rule == "EF-9"
    # without the group (another producer buffer), the same consumer fuses
    fk = fuse(f1, m.kernel("addx"), shared={"z": "c_z"})
    assert fk.requires is not None and fk.requires.same == (("p_p_x", "p_p_w"),)


def test_leg15_host_launch_of_one_array_for_two_buffers_is_a_located_error() -> None:
    """LEG-15, statically: a host program passing one array as two parameters of a fused
    kernel that must be distinct buffers is refused when checked, at the launch."""
    from sarek_py.ir.host.text import parse_program

    text = program(N).replace("launch scale_relu(x, y, 1.5f, 10, z,",
                              "launch scale_relu(x, y, 1.5f, 10, y,")
    with pytest.raises(SarekError) as ei:
        from sarek_py.host.interp import run_program

        run_program(parse_program(text, "prog.sk"))
    assert "[LEG-15] y is passed as both p_y and c_z" in str(ei.value)
    assert ei.value.loc is not None and ei.value.loc.file == "prog.sk"


def test_leg14_checker_is_loaded_by_any_import(tmp_path: Path) -> None:
    """LEG-14: a fresh interpreter that imports only the parser and the interpreter
    checks a fused kernel's text (the checker is registered, not skipped)."""
    import subprocess
    import sys

    f = tmp_path / "f.sk"
    f.write_text(print_kernel(fused("scale", "relu")))
    code = (
        "import numpy as np\n"
        "from sarek_py.ir.parser import parse_file\n"
        "from sarek_py.ir.interp import run_kernel\n"
        f"k = parse_file({str(f)!r}).kernels[0]\n"
        "a = {n: np.zeros(10, np.float32) for n in ('p_x', 'p_y', 'c_z')}\n"
        "args = {**a, 'p_a': np.float32(1), 'p_n': 10, 'c_n': 10}\n"
        "run_kernel(k, {**args, 'ep_tc': 10}, 10)\n"
        "try:\n"
        "    run_kernel(k, {**args, 'c_n': 11, 'ep_tc': 11}, 10)\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, getattr(e, 'rule', None))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "FusionRefused LEG-14", done.stdout + done.stderr
