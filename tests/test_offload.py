"""Offload of parallel loops (specs/offload.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sarek_py.host.interp import HostError, run_program
from sarek_py.host.offload import STACK_BUDGET, OffloadError, offload
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.launch import Launch, Sync
from sarek_py.ir.host.program import Block, HFor, Program, iter_host
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.runtime import get_backend
from sarek_py.runtime.interp import InterpBackend


def prog(body: str, decls: str = "") -> Program:
    return parse_program(f"""
pure fun sq(a : f64) : f64 = return a * a
program p
  var n : i32 = 6; var m : i32 = 4; var s : f64; var k : i32;
  var u : f64[1:] allocatable; var v : f64[1:] allocatable; var w : f64[0:, 0:] allocatable;
  {decls}
begin
  allocate u[n]; allocate v[n]; allocate w[0:m - 1, 0:n - 1];
  {body}
end
""")


def both(p: Program, preset: dict[str, Any] | None = None) -> tuple[Any, Any, InterpBackend]:
    """OFF-1: the offloaded program on the interpreter backend, device-resident, against
    the original on the host."""
    dev = InterpBackend()
    q = offload(p)
    text = print_program(q)
    assert print_program(parse_program(text)) == text
    ref = run_program(p, preset)
    got = run_program(q, preset, device=dev)
    plain = run_program(q, preset)  # the default backend (a fresh interpreter backend)
    for other in (got, plain):
        for name, a in ref.values.items():
            if name in other.values and not name.endswith("_status"):
                assert np.asarray(a).tobytes() == np.asarray(other.values[name]).tobytes(), name
        assert ref.output == other.output and ref.stop_code == other.stop_code
    return q, got, dev


def launches(p: Program) -> list[Launch]:
    return [s for s in iter_host(p.body) if isinstance(s, Launch)]


def test_off1_loops_become_launches() -> None:
    q, _, dev = both(prog("parallel for (j = 0 to m - 1, i = 0 to n - 1) do "
                          "w[j, i] <- f64(j * 10 + i) done; s := w[1, 2]"))
    flat, rows = launches(q)     # the host picks one (OFF-11); 4 x 6 runs flat
    assert rows.kernel.name == flat.kernel.name + "_rows"
    assert not any(True for x in iter_host(q.body) if type(x).__name__ == "ParFor")
    assert dev.stats.launches == 1


def test_off1_empty_nest_launches_nothing() -> None:
    _, _, dev = both(prog("parallel for (j = 0 to m - 1, i = 0 to -1) do w[j, i] <- 1.0 done;"
                          "parallel for (j = 3 to 1, i = 5 to 2) do w[0, 0] <- 1.0 done"))
    assert dev.stats.launches == 0


def test_off2_arguments_and_names() -> None:
    p = prog("parallel for (i = 1 to n) do u[i] <- sq(f64(i)) + s done; "
             "parallel for (i = 1 to n) do v[i] <- u[i] done")
    q, _, _ = both(p, {"s": 0.5})
    ks = [ln.kernel for ln in launches(q)]
    assert [k.name for k in ks] == ["p_loop", "p_loop_2"]
    assert [x.name for x in ks[0].params][:2] == ["u", "s"]
    assert [h.name for h in ks[0].helpers] == ["sq"]


def test_off3_arrays_stay_on_the_device() -> None:
    p = prog("parallel for (i = 1 to n) do u[i] <- f64(i) done;"
             "for t = 1 to 5 do parallel for (i = 1 to n) do u[i] <- u[i] * 2.0 done done;"
             "s := u[2]; u[1] <- 0.0;"
             "parallel for (i = 1 to n) do u[i] <- u[i] + 1.0 done")
    _, got, dev = both(p)
    nbytes = 6 * 8
    # the first launch overwrites u whole (discarded); one copy in after the host store
    assert dev.stats.bytes_discarded == nbytes and dev.stats.bytes_in == nbytes
    # one copy out for s := u[2], one at the end
    assert dev.stats.bytes_out == 2 * nbytes
    assert dev.stats.launches == 7


def test_off4_write_discard() -> None:
    p = prog("parallel for (i = 1 to n) do u[i] <- 3.0 done;"
             "parallel for (i = 2 to n) do v[i] <- 1.0 done")
    q, _, dev = both(p)
    first, second = launches(q)
    assert [v.name for v in first.overwritten] == ["u"]
    assert [v.name for v in second.overwritten] == ["v"]   # condition false at run time
    assert dev.stats.bytes_discarded == 6 * 8
    q2 = offload(prog("parallel for (i = 1 to n) do (s2[0] <- 1.0; u[i] <- u[i] + 1.0) done",
                      "var s2 : f64[1];"))
    assert launches(q2)[0].overwritten == ()


def test_off5_stop_status_and_replay() -> None:
    p = prog("parallel for (i = 1 to n) do if i == 4 then stop 9 else u[i] <- 1.0 done;"
             "print 1")
    q, got, _ = both(p)
    [ln] = launches(q)
    assert ln.stop_status is not None and [r.code for r in ln.stop_replay] == [9]
    assert got.stop_code == 9 and got.output == []
    body = q.body
    assert isinstance(body, Block)
    k = next(i for i, s in enumerate(body.stmts) if isinstance(s, Launch))
    assert isinstance(body.stmts[k + 1], Sync)


def test_off6_private_arrays() -> None:
    small = prog("parallel for (i = 1 to n) local t : f64[4] do "
                 "(t[1] <- f64(i); u[i] <- t[1] + t[0]) done")
    q, _, _ = both(small)
    assert launches(q)[0].scratch == () and launches(q)[0].kernel.locals
    big_n = STACK_BUDGET // 8 + 1
    big = prog(f"parallel for (i = 1 to n) local t : f64[{big_n}] do "
               f"(t[{big_n - 1}] <- f64(i); t[0] <- 2.0; u[i] <- t[{big_n - 1}] * t[0]) done")
    q, _, _ = both(big)
    [ln] = launches(q)
    assert len(ln.scratch) == 1 and not ln.kernel.locals


def test_off7_sync_placement() -> None:
    p = prog("parallel for (i = 1 to n) do u[i] <- 1.0 done;"
             "parallel for (i = 1 to n) do v[i] <- u[i] done;"
             "s := 2.0;"
             "for t = 1 to 3 do (parallel for (i = 1 to n) do u[i] <- u[i] + v[i] done;"
             "k := k + 1) done;"
             "s := u[1]")
    q, _, _ = both(p)
    text = print_program(q)
    assert text.count("sync") == 1                  # only before s := u[1]
    assert text.index("sync") > text.index("for t")
    # a loop whose body reads what its own launches write needs a sync inside
    p2 = prog("for t = 1 to 3 do (parallel for (i = 1 to n) do u[i] <- u[i] + 1.0 done;"
              "s := s + u[1]) done")
    q2, _, _ = both(p2)
    loop = next(x for x in iter_host(q2.body) if isinstance(x, HFor))
    assert any(isinstance(x, Sync) for x in iter_host(loop.body))


def test_off7_missing_sync_is_an_error() -> None:
    q = offload(prog("parallel for (i = 1 to n) do u[i] <- 1.0 done; s := u[1]"))
    assert isinstance(q.body, Block)
    stripped = Block(tuple(x for x in q.body.stmts if not isinstance(x, Sync)))
    import attrs
    with pytest.raises(HostError, match="before a sync"):
        run_program(attrs.evolve(q, body=stripped), device=InterpBackend())


def test_off8_cannot_offload() -> None:
    with pytest.raises(OffloadError, match="host scalar"):
        offload(prog("parallel for (i = 1 to n) do s := 1.0 done"))
    with pytest.raises(OffloadError, match="thread intrinsic"):
        offload(prog("parallel for (i = 1 to n) do u[i] <- f64(global_thread_id) done"))
    with pytest.raises(OffloadError, match="barrier"):
        offload(prog("parallel for (i = 1 to n) do barrier done"))


def _opencl() -> object:
    try:
        return get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


def test_off9_fused_program_on_opencl_bitwise() -> None:
    """OFF-9 and LF-14 on OpenCL: a small fused, renamed, swapped program, bitwise equal to
    the unfused one, and to the interpreter backend."""
    backend = _opencl()
    from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program

    src = prog("parallel for (i = 1 to n) do u[i] <- f64(i * i % 5) done;"
               "for t = 1 to 4 do (parallel for (i = 1 to n - 1) do v[i] <- u[i] * 0.5 + u[i + 1]"
               " done; parallel for (i = 2 to n - 1) do u[i] <- u[i] - 0.25 * (v[i] - v[i - 1])"
               " done) done")
    variants = [src, fuse_program(src)[0], fuse_program(src, FusionOptions(swap=True))[0]]
    outs = [run_program(offload(v), device=backend).array("u") for v in variants]  # type: ignore[arg-type]
    ref = run_program(src).array("u")
    assert all(o.tobytes() == ref.tobytes() for o in outs)


@pytest.mark.slow
def test_off9_example_on_opencl_bitwise() -> None:
    try:
        backend = get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
    from sarek_py.ir.host.text import parse_program_file

    src = parse_program_file(Path(__file__).resolve().parent.parent / "examples"
                             / "advection_diffusion.sk")
    variants = [src, fuse_program(src)[0], fuse_program(src, FusionOptions(swap=True))[0]]
    outs = [run_program(offload(v), {"nx": 9, "ny": 7, "nt": 2}, device=backend,
                        check_races=False).array("u") for v in variants]
    assert all(o.tobytes() == outs[0].tobytes() for o in outs)
    assert float(np.abs(outs[0]).sum()) > 1.0


@pytest.mark.parametrize(("m", "n", "tiled"), [(8, 64, True), (7, 60, True), (3, 5, False),
                                               (0, 64, False)])
def test_off10_tiles(m: int, n: int, tiled: bool) -> None:
    from sarek_py.host.interp import HostInterp

    p = prog("parallel for (j = 0 to m - 1, i = 0 to n - 1) do "
             "w[j, i] <- f64(j * 100 + i) + sq(f64(i)) done")
    q = offload(p, numbering="tiles")
    [ln] = launches(q)
    assert "tiles_flat" in [x.name for x in ln.kernel.params]
    ref = run_program(p, {"m": m, "n": n})
    run = HostInterp(q, device=InterpBackend())
    got = run.run({"m": m, "n": n})
    assert ref.array("w").tobytes() == got.array("w").tobytes()
    flat = bool(run.eval(ln.args[-1], run.globals))
    count = int(run.eval(ln.thread_count, run.globals))
    assert flat == (not tiled)
    padded = -(-n // 32) * 32 * (-(-m // 8) * 8)     # tiles of 32 x (256 / 32)
    assert count == (padded if tiled else m * n)
    text = print_program(q)
    assert print_program(parse_program(text)) == text
