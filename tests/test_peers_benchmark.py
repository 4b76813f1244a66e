"""benchmarks/peers.py (docs/cli.md CLI-24): its bitwise claims, its skips, its output.

The peers written "with the program's operation order" (numpy, numba) must give bitwise
sarek_py's final field on the interpreter and on OpenCL; the comparison must see a
one-bit difference (signed zeros, NaN payloads); a missing peer is skipped with a line;
``--write`` replaces its own section of docs/performance.md and nothing else.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from sarek_py.host.interp import run_program
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.runtime import get_backend

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "benchmarks" / "peers.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peers_benchmark", PEERS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["peers_benchmark"] = module
    spec.loader.exec_module(module)
    return module


peers = _load()


def _backend(name: str) -> Any:
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(f"backend {name} cannot run here: {exc}")


BACKENDS = ["interp", "opencl"]


# ------------------------------------------------------------------------ comparisons


@pytest.mark.parametrize(("got", "ref", "bitwise", "diff", "note"), [
    (np.array([1.0, 2.0]), np.array([1.0, 2.0]), True, None, ""),
    (np.array([0.0, 1.0]), np.array([-0.0, 1.0]), False, 0.0, ""),            # signed zero
    (np.array([np.inf, 1.0]), np.array([np.inf, 1.0]), True, None, ""),
    (np.array([np.inf, 1.0]), np.array([-np.inf, 1.5]), False, 0.5, "1 non-finite differ"),
    (np.array([np.nan]), np.array([np.nan]), True, None, ""),                 # same bits
    (np.array([np.nan]), np.array([-np.nan]), False, 0.0, "1 non-finite differ"),
    (np.array([1.0], np.float32), np.array([1.0]), False, 0.0, ""),           # dtype
])
def test_cli24_comparison_is_by_bits(got: Any, ref: Any, bitwise: bool, diff: float | None,
                                     note: str) -> None:
    """CLI-24: equal means equal bytes; NaN and infinity by their bits; else the largest
    absolute difference over elements finite in both, and the non-finite ones counted."""
    row = peers.compare(peers.Row("x", 1.0), got, ref)
    assert (row.bitwise, row.max_abs_diff, row.note) == (bitwise, diff, note)


# -------------------------------------------------------------------------- advection


def _sarek_fields(backend: Any, n: int, steps: int) -> tuple[Any, Any, Any, Any]:
    """sarek_py's initial field and set-up (nt = 0), and its unfused and fused + swap
    final fields."""
    progs = peers.variants(64)
    preset = {"nx": n, "ny": n, "nt": steps}

    def run(name: str, **kw: int) -> Any:
        return run_program(progs[name], {**preset, **kw}, device=backend, check_races=False)

    setup = run("unfused", nt=0)
    return (setup.array("u"), peers.Grid.of(setup.values, steps),
            run("unfused").array("u"), run("fused+swap").array("u"))


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize(("n", "steps"), [(8, 2), (13, 3), (64, 2)])
def test_cli24_numpy_advection_is_bitwise_sarek_py(backend_name: str, n: int,
                                                   steps: int) -> None:
    """CLI-24: the numpy peer, written in the program's operation order from sarek_py's
    initial field, ends on bitwise sarek_py's field (unfused and fused + swap alike); at
    64 the example's ``dt`` takes its diffusion limit, at 8 and 13 its Courant one."""
    u0, g, ref, swapped = _sarek_fields(_backend(backend_name), n, steps)
    assert ref.tobytes() == swapped.tobytes()
    assert (g.n, g.steps) == (n, steps)
    got = peers.numpy_advection(u0, g)
    assert peers.compare(peers.Row("numpy", 1.0), got, ref).bitwise


def test_cli24_a_reassociated_peer_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """CLI-24, adversarial: the same formula with its division moved (the kind of rewrite
    XLA may make) is not bitwise, and the row says by how much."""
    u0, g, ref, _ = _sarek_fields(_backend("interp"), 13, 3)
    # (adv4's velocities, 1 and 0.5, are powers of two: moving its division changes nothing)
    monkeypatch.setattr(peers, "dif4",
                        lambda a, b, c, d, k: k * ((15.0 * (c - b) - (d - a)) / 12.0))
    row = peers.compare(peers.Row("numpy", 1.0),
                        peers.numpy_advection(u0, g), ref)
    assert row.bitwise is False
    assert row.max_abs_diff is not None and 0.0 < row.max_abs_diff < 1e-12


def test_cli24_numba_advection_is_bitwise_sarek_py() -> None:
    """CLI-24: both numba peers (two loops a stage; hand-fused with a ping-pong of u),
    fastmath off, end on bitwise sarek_py's field on OpenCL."""
    numba = pytest.importorskip("numba", reason="numba is an optional peer (.[peers])")
    n, steps = 64, 2   # dt at its diffusion limit
    u0, g, ref, _ = _sarek_fields(_backend("opencl"), n, steps)
    ra, rb = np.array(g.ra), np.array(g.rb)
    unfused, fused, _ = peers.numba_advection(numba)
    for fn in (unfused, fused):
        got = fn(u0.copy(), steps, g.dt, g.cx, g.cy, g.kx, g.ky, g.rdx, g.rdy, ra, rb)
        assert peers.compare(peers.Row("numba", 1.0), got, ref).bitwise


def test_cli24_numba_whole_program_is_bitwise_sarek_py_on_c() -> None:
    """CLI-24: the numba whole program (allocation, initial field with the C library's
    exp, time loop hand-fused) ends on bitwise sarek_py's field on c, whose exp is the
    same library's (CG-13)."""
    numba = pytest.importorskip("numba", reason="numba is an optional peer (.[peers])")
    n, steps = 64, 2
    _, g, ref, _ = _sarek_fields(_backend("c"), n, steps)
    _, _, whole = peers.numba_advection(numba)
    got = whole(n, steps, g.dt, g.cx, g.cy, g.kx, g.ky, g.rdx, g.rdy, np.array(g.ra),
                np.array(g.rb))
    assert peers.compare(peers.Row("numba", 1.0), got, ref).bitwise


# ------------------------------------------------------------------------------- main


def _doc(tmp_path: Path) -> Path:
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\n## Before\n\nkept\n\n## After\n\nkept too\n")
    return doc


def test_cli24_write_section_replaces_only_its_own(tmp_path: Path) -> None:
    """CLI-24: ``--write`` replaces its section (wherever it stands) and keeps the rest."""
    doc = _doc(tmp_path)
    peers.write_section(f"{peers.SECTION} (generated)\n\nfirst\n", doc)
    peers.write_section(f"{peers.SECTION} (generated)\n\nsecond\n", doc)
    text = doc.read_text()
    assert text.count(peers.SECTION) == 1 and "second" in text and "first" not in text
    # in the middle, and twice (a hand edit): the first is replaced, the other dropped
    doc.write_text(f"# P\n\n## Before\n\nkept\n\n{peers.SECTION}\n\nold\n\n## After\n\n"
                   f"kept too\n\n{peers.SECTION} (generated)\n\nolder\n")
    peers.write_section(f"{peers.SECTION} (generated)\n\nthird\n", doc)
    text = doc.read_text()
    assert text.count(peers.SECTION) == 1 and "old" not in text and "third" in text
    assert text.count("kept") == 2 and text.index("third") < text.index("## After")


def test_cli24_missing_peers_are_skipped_with_a_line(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-24: one run at tiny sizes with numba and JAX not importable: each is skipped
    with a line, the sarek_py rows are bitwise, the section and the chart are written."""
    pytest.importorskip("matplotlib", reason="the chart needs matplotlib (.[peers])")
    _backend("opencl")
    for name in ("numba", "jax"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    doc, chart = _doc(tmp_path), tmp_path / "peers.png"
    monkeypatch.setattr(peers, "PERFORMANCE", doc)
    monkeypatch.setattr(peers, "CHART", chart)
    code = peers.main(["--log2", "10", "--size", "8", "--steps", "1", "--repeat", "1",
                       "--write"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "  skipped numba: " in out and "  skipped JAX: " in out
    assert "| numba | – | – | – | – | skipped: " in out
    for name in (peers.TEMPS, "sarek_py fused, device arrays",
                 "sarek_py unfused, device arrays", "sarek_py fused, numpy arrays", "sarek_py unfused, numpy arrays", "numpy",
                 "sarek_py unfused (opencl, whole program)",
                 "sarek_py fused+swap (opencl, whole program)"):
        line = next(x for x in out.splitlines() if x.startswith(f"| {name} |"))
        assert "| yes | 0 |" in line, line
    text = doc.read_text()
    assert text.count(peers.SECTION) == 1 and text.count("kept") == 2
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

