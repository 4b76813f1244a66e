"""The seed's workload (examples/advection_diffusion.sk) at a small size: fused, renamed
and ping-ponged by the passes with no change to the source, bitwise equal across the
unfused, fused and fused + swap programs (LF-14, PP-6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.ir.host.text import parse_program_file, print_program

EXAMPLE = (Path(__file__).resolve().parent.parent / "examples" / "advection_diffusion.sk")
SMALL = {"nx": 6, "ny": 5, "nt": 1}


def test_lf14_example_fused_renamed_swapped_bitwise_equal() -> None:
    prog = parse_program_file(EXAMPLE)
    fused, reports = fuse_program(prog)
    [r] = reports
    assert r.plan is not None, str(r)
    assert sorted(i.array.name for i in r.plan.intermediates) == ["fxa", "fxd", "fya", "fyd"]
    assert [v.name for v in r.plan.renamed] == ["u"]
    assert [lp.var.name for lp in r.plan.chain] == ["s", "t"]
    swapped, _ = fuse_program(prog, FusionOptions(swap=True))
    assert "swapped := !swapped" in print_program(swapped)
    assert "swapped" not in print_program(fused)
    runs = [run_program(p, SMALL) for p in (prog, fused, swapped)]
    u = runs[0].array("u")
    assert np.isfinite(u).all() and float(np.abs(u).sum()) > 1.0
    for name in ("u", "du"):
        for other in runs[1:]:
            assert runs[0].array(name).tobytes() == other.array(name).tobytes(), name
    # the fluxes are scratch: deallocated after the time loop in every run (LF-110)
    for name in ("fxa", "fxd", "fya", "fyd"):
        assert all(r.values[name] is None for r in runs), name
