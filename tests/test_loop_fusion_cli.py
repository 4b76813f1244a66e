"""``sarek-py opt`` on host programs (LF-16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sarek_py.cli.main import main
from sarek_py.cli.opt import LoopOptionError, parse_transforms
from sarek_py.ir.host.text import parse_program

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "advection_diffusion.sk")
SMALL = """
program small
  var n : i32 = 8;
  var u : f64[0:] allocatable; var f : f64[0:] allocatable;
begin
  allocate u[0:n + 1]; allocate f[0:n];
  for t = 1 to 3 do
    parallel for (i = 0 to n) do f[i] <- u[i] + u[i + 1] done;
    parallel for (i = 1 to n) do u[i] <- u[i] - (f[i] - f[i - 1]) done
  done
end
"""


@pytest.fixture
def small(tmp_path: Path) -> str:
    path = tmp_path / "small.sk"
    path.write_text(SMALL)
    return str(path)


def test_lf16_transform_values() -> None:
    assert parse_transforms("all") == {"fuse", "swap"}
    assert parse_transforms("none") == frozenset()
    assert parse_transforms("fuse") == {"fuse"}
    assert parse_transforms("fuse,swap") == {"fuse", "swap"}
    for bad in ("", "fuse,", "Fuse", "fusion", "all,none"):
        with pytest.raises(LoopOptionError, match="accepted: all, none"):
            parse_transforms(bad)


def test_lf16_opt_default_fuses_and_swaps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["opt", EXAMPLE, "--notes"]) == 0
    out, err = capsys.readouterr()
    assert "swapped := !swapped" in out and "fused (intermediates" in err
    parse_program(out)


def test_lf16_opt_selection(small: str, capsys: pytest.CaptureFixture[str]) -> None:
    # copied back, the small pair is a predicted tie (LF-121): LF-13's threshold decides
    assert main(["opt", small, "--gpu-loop-transforms", "fuse", "--fusion-threshold", "64"]) == 0
    out, _ = capsys.readouterr()
    assert "u_copy" in out and "swapped" not in out
    assert main(["opt", small, "--gpu-loop-transforms", "fuse", "--notes",
                 "--backend", "c"]) == 0
    out, err = capsys.readouterr()
    assert "u_copy" not in out and "is a tie, the loops kept as written" in err
    assert main(["opt", small, "--gpu-loop-transforms", "none"]) == 0
    out, _ = capsys.readouterr()
    assert "u_copy" not in out and out.count("parallel for") == 2
    assert main(["opt", small, "-p", "swap"]) == 0       # swap alone: nothing fused
    out, _ = capsys.readouterr()
    assert "u_copy" not in out
    assert main(["opt", small, "--gpu-loop-transforms", "swap,bogus"]) == 2
    _, err = capsys.readouterr()
    assert "accepted: all, none, or a comma-separated list of fuse and swap" in err
    assert main(["opt", small, "-p", "tile"]) == 2
    assert main(["opt", small, "--fusion-threshold", "0.01", "--notes"]) == 0   # LF-13
    out, err = capsys.readouterr()
    assert "u_copy" not in out and "LF-13" in err


def test_lf16_dump_dir(tmp_path: Path, small: str,
                      capsys: pytest.CaptureFixture[str]) -> None:
    tmp_path = tmp_path / "dump"
    assert main(["opt", small, "-p", "fuse,swap", "-p", "offload",
                 "--dump-dir", str(tmp_path)]) == 0
    out, _ = capsys.readouterr()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["01-fuse.sk", "02-offload.sk", "kernels.cl", "kernels.cu"]
    assert (tmp_path / "02-offload.sk").read_text() == out
    assert "__kernel void" in (tmp_path / "kernels.cl").read_text()
    assert "__global__" in (tmp_path / "kernels.cu").read_text()
    parse_program((tmp_path / "01-fuse.sk").read_text())
