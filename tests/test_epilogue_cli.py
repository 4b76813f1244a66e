"""``sarek-py fuse`` and ``sarek-py explain`` (EF-14, LEG-11): golden outputs on examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from sarek_py.cli.main import main
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "scale_relu.sk"

GOLDEN_SCALE_RELU = """\
// launch conditions of scale_relu, checked at every launch (specs/fusion-legality.md LEG-13 .. LEG-16):
// - launch it on scale's thread count and block size, with scale's arguments and ep_tc = relu's thread count; each launch proves again that scale stores exactly once every element of p_tmp in [0, ep_tc) on which relu's body (as inserted) reads, stores or calls (LEG-18)
// - array arguments p_x, p_tmp, c_y: separate buffers that do not overlap
kernel scale_relu(p_x : f32[], p_tmp : f32[], p_a : f32, p_n : i32, c_y : f32[], c_n : i32, ep_tc : i32)
  requires fused(scale, relu, p_tmp, ep_tc) =
  let p_i = global_thread_id in
  if p_i < p_n then (
    let ep_t = p_i in
    p_tmp[ep_t] <- p_a * p_x[p_i];
    if ep_t < ep_tc then (
      let c_i = ep_t in
      if c_i < c_n then (
        let c_v = p_tmp[c_i] in
        c_y[c_i] <- c_v > 0.0f ? c_v : 0.0f
      )
    )
  )
"""

PROGRAM = EXAMPLE.read_text() + """
kernel bias(y : f32[], w : f32[], b : f32) =
  let i = global_thread_id in w[i] <- y[i] + b

program main
  var n : i32 = 1000;
  var x : f32[] allocatable;
  var t : f32[] allocatable;
  var y : f32[] allocatable;
  var w : f32[] allocatable;
begin
  allocate x[n];
  allocate t[n];
  allocate y[n];
  allocate w[n];
  launch scale(x, t, 2.0f, n) threads n block 256;
  launch relu(t, y, n) threads n block 256;
  sync;
  launch bias(y, w, 0.5f) threads n block 128;
  n := 10;
  launch relu(y, t, n) threads n + 1 block 256;
  launch bias(t, x, 1.0f) threads n + 1 block 128
end
"""


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_ef14_fuse_golden_scale_relu(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["fuse", str(EXAMPLE), "--producer", "scale", "--consumer", "relu"],
                         capsys)
    assert (code, err) == (0, "")
    assert out == GOLDEN_SCALE_RELU
    check_module(parse_module(out, "fused.sk"))  # the output is a valid .sk kernel


def test_ef14_fuse_options(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["fuse", str(EXAMPLE), "--producer", "scale", "--consumer", "relu",
                        "--shared", "tmp=tmp", "--array", "tmp", "--name", "sr"], capsys)
    assert code == 0 and out == GOLDEN_SCALE_RELU.replace("scale_relu", "sr")


def test_ef14_fuse_refusal_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["fuse", str(EXAMPLE), "--producer", "relu", "--consumer", "scale"],
                         capsys)
    assert code == 1 and out == ""
    assert "fusion refused: [EF-7]" in err and "Traceback" not in err
    code, _, err = run(["fuse", str(EXAMPLE), "--producer", "scale", "--consumer", "relu",
                        "--shared", "tmp=x"], capsys)
    assert code == 1 and "[EF-7]" in err


def test_ef14_fuse_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["fuse", str(EXAMPLE), "--producer", "scale", "--consumer", "relu",
                        "--shared", "tmp"], capsys)
    assert code == 2 and "c=p" in err
    code, _, err = run(["fuse", str(EXAMPLE), "--producer", "scale"], capsys)
    assert code == 2
    code, _, err = run(["fuse", str(EXAMPLE), "--producer", "nope", "--consumer", "relu"],
                       capsys)
    assert code == 1 and "nope" in err


def test_leg11_explain_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "prog.sk"
    f.write_text(PROGRAM)
    code, out, err = run(["explain", str(f)], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "scale -> relu: fused into scale_relu",
        "scale_relu -> bias: fused into scale_relu_bias",
        "-- not fused across: host assignment to n",
        "relu -> bias: not fused: [LEG-3] relu: the producer stores 10 of the 11 elements "
        "[0, 11) of y over which bias's 11 threads are launched (element 10 is not stored); "
        f"fused, the consumer's body runs only right after a store (at {f}:13:5)",
    ]


def test_leg11_explain_contraction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "prog.sk"
    f.write_text(PROGRAM)
    code, out, _ = run(["explain", str(f), "--target", "cuda", "--contraction", "on"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("scale -> relu: not fused: [LEG-9] target cuda contracts")
    code, out, _ = run(["explain", str(f), "--target", "cuda", "--contraction", "on",
                        "--force"], capsys)
    assert out.splitlines()[0] == "scale -> relu: fused into scale_relu"


def test_leg11_explain_launches_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The launch list of sarek_py.ir.host.launch_text: host scalars are symbolic (LEG-12)."""
    sk = tmp_path / "sr.sk"
    sk.write_text(EXAMPLE.read_text())
    (tmp_path / "sr.launches").write_text(
        "host x : f32[], t : f32[], y : f32[], n : i32\n"
        "launch scale(x, t, 2.0f, n) threads n block 32\n"
        "launch relu(t, y, n) threads n block 32\n"
        "sync\n"
        "launch relu(y, t, n) threads n block 32\n"
        "launch scale(t, x, 2.0f, 100) threads 100 block 32\n"
        "launch relu(x, y, 100) threads 100 block 32\n")
    code, out, _ = run(["explain", str(sk)], capsys)
    assert code == 0
    assert out.splitlines() == [
        "scale -> relu: fused into scale_relu",
        # relu's y is the host t, which the fused kernel reads as scale's tmp
        "scale_relu -> relu: not fused: [LEG-7] consumer relu writes y, the buffer producer "
        f"scale_relu reads as tmp (at {sk}:13:5)",
        # relu's n threads against scale's 100: no relation between them is known
        "relu -> scale: not fused: [LEG-12] relu: for symbolic counts, not every element "
        "of [0, count) is proved to be stored (of y; count: the consumer's thread count "
        f"100, threads: the producer's n) (at {sk}:13:5)",
        "scale -> relu: fused into scale_relu",
    ]
    bad = tmp_path / "bad.launches"
    bad.write_text("host x : f32[], t : f32[]\nlaunch scale(x, t, 2.0f) threads 4 block 4\n")
    code, _, err = run(["explain", str(sk), "--launches", str(bad)], capsys)
    assert code == 1 and "bad.launches:2:" in err


def test_leg11_explain_may_alias_ends_run(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "alias.sk"
    f.write_text(PROGRAM.replace("var t : f32[] allocatable;",
                                 "var t : f32[] allocatable target;"))
    code, out, err = run(["explain", str(f)], capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "-- not fused across: launch of scale: t may alias another array"
    assert not any("fused into" in ln and "scale ->" in ln for ln in lines)
