"""Every example, corpus kernel and fused corpus pair on the native C backend, against the
interpreter (specs/native.md NAT-53).

* example kernels (examples/*.sk and their Python twins, examples/python/*.py) and the
  test kernels of tests/test_codegen_cases.sk, run as tests/test_codegen_exact.py runs
  them on OpenCL;
* the example programs (examples/advection_diffusion.sk unfused, fused and fused + swap,
  examples/newton.sk), offloaded, run by the host interpreter with the ``c`` backend as
  the device against the interpreter as the device;
* the corpus's launch sequences (tests/corpus/scenarios.py) with the original's launch
  shapes, against the scenarios' numpy references (which the interpreter equals bitwise,
  tests/test_corpus.py), and every corpus pair that fuses (tests/test_corpus.py's ``CASES``) as the
  fused launch on ``c`` against the unfused pair on the interpreter.

Each item the backend accepts is bitwise equal (a buffer a transcendental intrinsic writes
within CG-15's bound, and the interpreter's values then carried on); each one it refuses
is refused with a reason and only for a barrier or shared memory. ``test_nat53_table``
counts both (``pytest -s`` prints the table).
"""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from native_diff import c_backend, needs_gpu
from test_codegen_exact import (
    TRANSCENDENTAL_ULP,
    case_kernels,
    example_kernels,
    run_config,
    ulp_distance,
)
from test_corpus import (
    CASES,
    SIZED,
    Run,
    check_transcendental,
    interp_run,
    run_launch,
    run_step,
    same_bits,
)

from sarek_py.cli import loading
from sarek_py.cli.inputs import make_inputs
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Kernel, Module
from sarek_py.runtime import get_backend

ROOT = Path(__file__).resolve().parent.parent
CORPUS_V0 = sorted(n for n in SIZED if n.endswith(" @0"))
CORPUS_OTHERS = sorted(n for n in SIZED if not n.endswith(" @0"))
FUSED_V0 = [c for c in CASES if not c[0].endswith(("@1", "@2"))]
FUSED_OTHERS = [c for c in CASES if c[0].endswith(("@1", "@2"))]


def python_example_kernels() -> list[tuple[str, Kernel]]:
    out = []
    for path in sorted((ROOT / "examples" / "python").glob("*.py")):
        m = loading.load_any(str(path))
        assert isinstance(m, Module)
        out.extend((f"python/{path.name}", k) for k in m.kernels)
    return out


KERNELS = [(f"cases:{k.name}", k) for k in case_kernels()] \
    + [(f"{f}:{k.name}", k) for f, k in example_kernels()] \
    + [(f"{f}:{k.name}", k) for f, k in python_example_kernels()]


def c_run(k: Kernel, args: dict[str, object], threads: int, block: int,
          grid: tuple[int, ...] | None, shape: tuple[int, ...] | None,
          shared: int | None = None) -> None:
    be = c_backend()
    if grid is None:
        be.run_kernel(k, args, threads, block, shared=shared)
    else:
        be.run_kernel(k, args, threads, 1, grid=grid, block_shape=shape, shared=shared)


def refused(k: Kernel, exc: SarekError) -> str:
    """NAT-50: the reason of a refusal, which only a barrier or shared memory may cause."""
    msg = str(exc).strip()
    assert msg and needs_gpu(k), f"{k.name}: refused: {msg!r}"
    return msg


def close(name: str, a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> None:
    """Bitwise, or (a float buffer) within CG-15's ULP bound with the same NaNs."""
    if same_bits(a, b):
        return
    assert a.dtype.kind == "f", f"{name} differs"
    assert (np.isnan(a) == np.isnan(b)).all(), f"{name}: NaNs differ"
    fin = np.isfinite(a) & np.isfinite(b)
    assert (a[~fin].tobytes() == b[~fin].tobytes()) or (np.isnan(a[~fin]).all()), name
    assert ulp_distance(a[fin], b[fin]).max(initial=0) <= TRANSCENDENTAL_ULP, name


# ------------------------------------------------------------------- kernels (NAT-53)


def kernel_outcome(item: tuple[str, Kernel]) -> str:
    label, k = item
    be = c_backend()
    threads, block, sizes = run_config(k, example=not label.startswith("cases:"))
    inputs = make_inputs(k, sizes, threads, 1)
    ref, dev = copy.deepcopy(inputs), copy.deepcopy(inputs)
    r_ref = get_backend("interp").run_kernel(k, ref, threads, block)
    try:
        r_dev = be.run_kernel(k, dev, threads, block)
    except SarekError as exc:
        return "refused: " + refused(k, exc)
    assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes), f"{label}: stop codes"
    for p in k.params:
        if p.is_array:
            if k.name == "transcendental":
                close(p.name, ref[p.name], dev[p.name])
            else:
                assert same_bits(ref[p.name], dev[p.name]), f"{label}: {p.name} differs"
    return "accepted"


@pytest.mark.parametrize("item", KERNELS, ids=[label for label, _ in KERNELS])
def test_nat53_test_and_example_kernels_on_c(item: tuple[str, Kernel]) -> None:
    kernel_outcome(item)


# --------------------------------------------------------------------------- programs


def program_runs() -> list[tuple[str, Any, dict[str, int], list[str]]]:
    """(name, offloaded program, preset sizes, inputs) of each example program."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from advection_diffusion import variants

    from sarek_py.host.offload import offload
    from sarek_py.ir.host.text import parse_program_file

    out: list[tuple[str, Any, dict[str, int], list[str]]] = [
        (f"advection_diffusion {name}", p, {"nx": 13, "ny": 11, "nt": 2}, [])
        for name, p in variants(64).items()]
    newton = parse_program_file(ROOT / "examples" / "newton.sk")
    given = (ROOT / "examples" / "newton.in").read_text().split()
    out.append(("newton", offload(newton, block_size=64), {}, given))
    return out


def uses_transcendental(prog: Any) -> bool:
    from sarek_py.ir.intrinsics import TRANSCENDENTAL
    from sarek_py.ir.nodes import Intrinsic

    return any(isinstance(n, Intrinsic) and n.name in TRANSCENDENTAL
               for n in _walk(prog))


def _walk(x: Any) -> Any:
    """Every attrs node under ``x`` (program, statements, expressions)."""
    import attrs

    todo = [x]
    while todo:
        n = todo.pop()
        if isinstance(n, (tuple, list)):
            todo.extend(n)
        elif attrs.has(type(n)):
            yield n
            todo.extend(getattr(n, f.name) for f in attrs.fields(type(n)))


def program_outcome(name: str, prog: Any, preset: dict[str, int], given: list[str]) -> str:
    """The program with ``c`` as its device against the interpreter as its device: every
    variable bitwise equal. A program calling a transcendental intrinsic (the advection's
    initial field calls ``exp``: numpy's AVX-512 ``exp`` and libm's may differ in the last
    bit, CG-13) is held to the bytes of its *unfused* run on ``c`` instead, and to the
    interpreter within what one ULP of the initial field becomes (1e-12 of the largest
    value)."""
    from sarek_py.host.interp import run_program

    be = c_backend()
    interp = get_backend("interp")
    ref = run_program(prog, preset, inputs=list(given), device=interp, check_races=False)
    try:
        got = run_program(prog, preset, inputs=list(given), device=be, check_races=False)
    except SarekError as exc:
        return f"refused: {exc}"
    assert ref.output == got.output and ref.stop_code == got.stop_code, name
    exact = ref
    if uses_transcendental(prog):
        unfused = next(p for n, p, *_ in PROGRAMS if n.split()[0] == name.split()[0])
        exact = run_program(unfused, preset, inputs=list(given), device=be, check_races=False)
    for v, a in exact.values.items():
        if isinstance(a, np.ndarray):
            assert same_bits(a, got.array(v)), f"{name}: {v} differs"
            r = ref.array(v)
            if r.dtype.kind == "f" and not same_bits(r, got.array(v)):
                top = float(np.abs(r).max(initial=0.0))
                assert np.abs(r - got.array(v)).max() <= 1e-12 * max(top, 1.0), v
            else:
                assert same_bits(r, got.array(v)), f"{name}: {v} differs from the interpreter"
        else:
            assert repr(a) == repr(got.values[v]), f"{name}: {v}: {a!r} != {got.values[v]!r}"
    return "accepted"


PROGRAMS = program_runs()


@pytest.mark.parametrize("run", PROGRAMS, ids=[r[0] for r in PROGRAMS])
def test_nat53_example_programs_offloaded_on_c(run: tuple[str, Any, dict[str, int], list[str]]
                                              ) -> None:
    outcome = program_outcome(*run)
    assert outcome == "accepted", outcome  # no barrier, no shared memory: never refused


# ------------------------------------------------------------------ polybench programs


def polybench_outcome(name: str, numbering: str, sizes: dict[str, int]) -> str:
    """tests/corpus/polybench's program, unfused and fused + swap, offloaded with
    ``numbering`` and run with ``c`` as the device: every array bitwise the unfused
    program's on the host interpreter (no transcendental in these stencils)."""
    from test_polybench_stencils import EXPECTED as POLY
    from test_polybench_stencils import fused as poly_fused
    from test_polybench_stencils import same

    from sarek_py.host.interp import run_program
    from sarek_py.host.offload import offload

    be = c_backend()
    prog, out, _ = poly_fused(name, swap=True, **sizes)
    ref = run_program(prog)
    for what, p in (("unfused", prog), ("fused + swap", out)):
        try:
            got = run_program(offload(p, numbering=numbering), device=be)  # type: ignore[arg-type]
        except SarekError as exc:
            return f"refused: {exc}"
        same(ref, got, POLY[name][0], f"{name} {what} {numbering} {sizes}")
    return "accepted"


POLYBENCH = ["fdtd-2d", "heat-3d", "jacobi-1d", "jacobi-2d"]


@pytest.mark.parametrize("name", POLYBENCH)
def test_nat53_polybench_programs_offloaded_on_c(name: str) -> None:
    """NAT-53: rows numbering (the default) at the largest small size of
    tests/test_polybench_stencils.py (the published sizes run in the slow test below: the
    reference interpreter takes tens of seconds on them under typeguard)."""
    from test_polybench_stencils import SIZES

    assert polybench_outcome(name, "rows", SIZES[name][-1]) == "accepted"


@pytest.mark.slow
@pytest.mark.parametrize("numbering", ["rows", "tiles", "flat"])
@pytest.mark.parametrize("name", POLYBENCH)
def test_nat53_polybench_programs_every_numbering_on_c(name: str, numbering: str) -> None:
    """NAT-53: every numbering of the offloaded nests (OFF-10, OFF-11), at the published
    size and at every small size of tests/test_polybench_stencils.py (empty interiors)."""
    from test_polybench_stencils import SIZES

    for sizes in [{}, *SIZES[name]]:
        assert polybench_outcome(name, numbering, sizes) == "accepted"


# ----------------------------------------------------------------------------- corpus


def corpus_outcome(name: str) -> str:
    """Each launch of the scenario on ``c`` against the scenario's numpy reference, as
    tests/test_corpus.py checks OpenCL (the interpreter equals the same references bitwise:
    ``test_corpus_interp_matches_reference``; it is 10 to 50 times slower than numpy here);
    a transcendental step's buffer within test_corpus's bound of the exact result, then
    the reference takes ``c``'s values. A refused step runs on the interpreter."""
    sc = SIZED[name]
    got, ref = sc.buffers(0), sc.buffers(0)
    trans = sc.transcendental or (None,) * len(sc.steps)
    refusals = []
    for k, step in enumerate(sc.steps):
        before = {n: v.copy() for n, v in got.items()}
        try:
            run_step(step, got, c_run)
        except SarekError as exc:
            refusals.append(f"{step.name}: " + refused(step.kernel, exc))
            run_step(step, got, interp_run)  # carry on from the interpreter's buffers
        sc.refs[k](ref)
        bad = [n for n in got if not same_bits(got[n], ref[n])]
        if trans[k] is not None:
            assert set(bad) <= {trans[k]}, f"{name}: {step.name}: {bad} differ bitwise"
            check_transcendental(step, before, got)  # test_corpus's bound (CG-15)
            ref[trans[k]][...] = got[trans[k]]
        else:
            assert not bad, f"{name}: {step.name}: {bad} differ from the reference"
    return "refused: " + "; ".join(refusals) if refusals else "accepted"


@pytest.mark.parametrize("name", CORPUS_V0)
def test_nat53_corpus_launches_on_c(name: str) -> None:
    corpus_outcome(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", CORPUS_OTHERS)
def test_nat53_corpus_launches_on_c_other_sizes(name: str) -> None:
    corpus_outcome(name)


def fused_outcome(case: tuple[str, list[Any], dict[str, Any]]) -> str:
    """The fused launch on ``c`` against the unfused pair on the interpreter."""
    label, launches, bufs = case
    new, report = fuse_launches(launches)
    assert len(new) == 1 and report[0].fused
    b1 = {k: v.copy() for k, v in bufs.items()}
    b2 = {k: v.copy() for k, v in bufs.items()}
    for lc in launches:
        run_launch(lc, b1, interp_run)
    run: Run = c_run
    try:
        run_launch(new[0], b2, run)
    except SarekError as exc:
        return "refused: " + refused(new[0].kernel, exc)
    written = {str(v) for lc in launches for v in lc.by_name.values() if isinstance(v, str)}
    for k in b1:
        if k in written:
            assert same_bits(b1[k], b2[k]), f"{label}: buffer {k} differs"
    return "accepted"


@pytest.mark.parametrize("case", FUSED_V0, ids=[c[0] for c in FUSED_V0])
def test_nat53_fused_corpus_pairs_on_c(case: tuple[str, list[Any], dict[str, Any]]) -> None:
    fused_outcome(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", FUSED_OTHERS, ids=[c[0] for c in FUSED_OTHERS])
def test_nat53_fused_corpus_pairs_on_c_other_sizes(
        case: tuple[str, list[Any], dict[str, Any]]) -> None:
    fused_outcome(case)


@pytest.mark.slow
def test_nat53_table() -> None:
    """The table of accepted / refused items (``pytest -s`` prints it; every item of every
    size variant)."""
    c_backend()
    rows: dict[str, Counter[str]] = {}
    reasons: Counter[str] = Counter()

    def count(group: str, outcome: str) -> None:
        rows.setdefault(group, Counter())["accepted" if outcome == "accepted"
                                          else "refused"] += 1
        if outcome != "accepted":
            reasons[outcome.split(": ", 2)[-1][:100]] += 1

    for item in KERNELS:
        count("test and example kernels", kernel_outcome(item))
    for run in PROGRAMS:
        count("example programs (offloaded)", program_outcome(*run))
    for name in POLYBENCH:
        for numbering in ("rows", "tiles", "flat"):
            count("polybench programs x numberings (offloaded)",
                  polybench_outcome(name, numbering, {}))
    for name in sorted(SIZED):
        count("corpus scenarios (all sizes)", corpus_outcome(name))
    for case in CASES:
        count("fused corpus pairs (all sizes)", fused_outcome(case))
    print("\n| items | accepted, bitwise | refused |\n| --- | ---: | ---: |")
    for group, c in rows.items():
        print(f"| {group} | {c['accepted']} | {c['refused']} |")
    for why, n in reasons.most_common():
        print(f"refused ({n}): {why}")
    assert all(c["accepted"] for c in rows.values())
