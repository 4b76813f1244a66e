"""benchmarks/peers.py's ``c`` rows (specs/native.md NAT-55): the peers written in the
program's operation order are bitwise the ``c`` backend's field; ``--backend opencl,c``
gives both backends their rows, each bitwise, and says whether ``c`` meets issue 16's
targets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from native_diff import c_backend
from test_peers_benchmark import _sarek_fields, peers

ROOT = Path(__file__).resolve().parent.parent


def test_nat55_the_numpy_peer_is_bitwise_the_c_field() -> None:
    """NAT-55: from the ``c`` run's initial field, the numpy peer ends on bitwise the ``c``
    backend's field, unfused and fused + swap alike (13 x 13, 3 steps: the example's ``dt``
    at its Courant limit; the numba test below runs the diffusion limit, 64)."""
    u0, g, ref, swapped = _sarek_fields(c_backend(), 13, 3)
    assert ref.tobytes() == swapped.tobytes()
    assert peers.compare(peers.Row("numpy", 1.0), peers.numpy_advection(u0, g), ref).bitwise


@pytest.mark.slow
def test_nat55_the_numba_peers_are_bitwise_the_c_field() -> None:
    """NAT-55: numba's two peers (two loops a stage; hand-fused + ping-pong), fastmath off,
    end on bitwise the ``c`` backend's field (slow: numba compiles them in parallel mode)."""
    numba = pytest.importorskip("numba", reason="numba is an optional peer (.[peers])")
    n, steps = 64, 2
    u0, g, ref, _ = _sarek_fields(c_backend(), n, steps)
    assert peers.compare(peers.Row("numpy", 1.0), peers.numpy_advection(u0, g), ref).bitwise
    ra, rb = np.array(g.ra), np.array(g.rb)
    for fn in peers.numba_advection(numba):
        got = fn(u0.copy(), steps, g.dt, g.cx, g.cy, g.kx, g.ky, g.rdx, g.rdy, ra, rb)
        assert peers.compare(peers.Row("numba", 1.0), got, ref).bitwise


def test_nat55_opencl_and_c_rows_in_one_run(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """NAT-55: one run at tiny sizes on ``opencl,c`` (numba and JAX left out: their
    compilation is slow): every sarek_py row of both backends is bitwise its backend's
    unfused run, ``c``'s unfused rows say how they compare with opencl's."""
    c_backend()
    for name in ("numba", "jax"):
        monkeypatch.setitem(sys.modules, name, None)
    code = peers.main(["--log2", "10", "--size", "8", "--steps", "1", "--repeat", "1",
                       "--backend", "opencl,c"])
    out = capsys.readouterr().out
    assert code == 0, out
    names = [f"{peers.TEMPS} [{b}]" for b in ("opencl", "c")]
    for b in ("opencl", "c"):
        names += [f"sarek_py fused, device arrays [{b}]", f"sarek_py unfused, numpy arrays [{b}]",
                  f"sarek_py unfused ({b}, whole program)",
                  f"sarek_py fused+swap ({b}, whole program)"]
    for name in names:
        line = next(x for x in out.splitlines() if x.startswith(f"| {name} |"))
        assert "| yes | 0 |" in line, line
    chain_c = next(x for x in out.splitlines()
                   if x.startswith("| sarek_py unfused, numpy arrays [c] |"))
    assert "bitwise equal to opencl's: yes" in chain_c  # no transcendental in the chain
    adv_c = next(x for x in out.splitlines() if x.startswith("| sarek_py unfused (c,"))
    assert "bitwise equal to opencl's: " in adv_c  # exp: libm's and PoCL's may differ
    assert "| numexpr" in out or "skipped numexpr" in out


def _row(name: str, ms: float) -> Any:
    return peers.Row(name, ms / 1e3, bitwise=True)


@pytest.mark.parametrize(("c_ms", "met"), [(11.9, True), (12.1, False)])
def test_nat55_verdicts_say_whether_c_meets_the_targets(c_ms: float, met: bool) -> None:
    """NAT-55: advection fused + swap on c against 1.2x numba's hand-fused time, and the
    fused chain on c against numexpr, from the rows' best times."""
    adv = [_row("sarek_py fused+swap (c, whole program)", c_ms),
           _row("numba parallel, hand-fused + ping-pong", 9.0),
           _row(peers.WHOLE, 10.0)]
    chain = [_row(f"{peers.TEMPS} [c]", 5.0), _row("sarek_py fused, numpy arrays [c]", 4.0),
             _row("numexpr (2 threads)", 4.5 if met else 3.0)]
    lines = peers.verdict_lines(chain, adv)
    # like with like first (the whole program), then the time loop alone: never met here
    assert ("numba parallel hand-fused, the whole program, as sarek_py's row (10.0 ms): "
            "target <= 1.2x " + ("met" if met else "NOT met")) in lines[0], lines
    assert lines[0].endswith("its time loop alone (9.0 ms): target <= 1.2x NOT met"), lines
    assert "fused, numpy arrays [c]" in lines[1]  # the best c row
    assert lines[1].endswith("target faster " + ("met" if met else "NOT met")), lines


def test_nat55_the_chain_verdict_with_c_alone() -> None:
    """NAT-55: with ``--backend c`` alone the chain's rows carry no ``[c]``; the verdict
    still compares the best fused c row with numexpr."""
    chain = [_row(peers.TEMPS, 5.0), _row("sarek_py fused, numpy arrays", 4.0),
             _row("numexpr (2 threads)", 4.5)]
    lines = peers.verdict_lines(chain, [], ("c",))
    assert lines[0].endswith("target faster met"), lines
    assert peers.verdict_lines(chain, [], ("opencl",)) == []
