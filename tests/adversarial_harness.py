"""The differential harness of tests/test_adversarial_effects.py (issue 11): a host program against
every pipeline of ``sarek-py opt`` (fuse, fuse+swap, offload, and their orders), each pass
output re-parsed from its printed text (HP-16), run on the host interpreter and on OpenCL;
every variable the original declares compared bitwise, with output and stop code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sarek_py.cli.opt import LOOP_TRANSFORMS, run_passes
from sarek_py.codegen.cstyle import CodegenError
from sarek_py.fusion.loops.fusion import FusionOptions, PairReport, fuse_program
from sarek_py.host.backend import run_program_on
from sarek_py.host.interp import HostResult, run_program
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program, print_program

PIPELINES: tuple[tuple[str, ...], ...] = (
    ("fuse",), ("fuse", "swap"), ("offload",), ("fuse", "swap", "offload"),
    ("offload", "fuse", "swap"),
)


def opencl_available() -> bool:
    from sarek_py.runtime import get_backend

    try:
        get_backend("opencl")
    except BackendUnavailable:
        return False
    return True


def _run(p: Program, backend: str) -> HostResult | str:
    """A run's result, or the text of the error it raised."""
    try:
        if backend == "host":
            return run_program(p)
        return run_program_on(p, backend)[0]
    except CodegenError as exc:  # the device cannot run it (CG-11): a located refusal
        return f"refused: {exc}"
    except SarekError as exc:  # every error a program can raise at run time
        if "cannot run on" in str(exc):  # a loop offload cannot lower (OFF-8, HP-17)
            return f"refused: {exc}"
        return f"{type(exc).__name__}: {exc}"


def _diff(ref: HostResult | str, got: HostResult | str, names: Sequence[str]) -> str | None:
    if isinstance(ref, str) or isinstance(got, str):
        if isinstance(ref, str) and isinstance(got, str):
            return None  # both raise: the same program error, seen by both
        return f"reference: {ref if isinstance(ref, str) else 'ran'}; " \
            f"transformed: {got if isinstance(got, str) else 'ran'}"
    for n in names:
        a, b = ref.values.get(n), got.values.get(n)
        if a is None and b is None:
            continue
        if a is None or b is None:
            return f"{n}: allocated in one run only"
        aa, bb = np.asarray(a), np.asarray(b)
        if aa.shape != bb.shape or aa.dtype != bb.dtype or aa.tobytes() != bb.tobytes():
            return f"{n}: {aa!r} != {bb!r}"
    if ref.output != got.output:
        return f"output {ref.output} != {got.output}"
    if ref.stop_code != got.stop_code:
        return f"stop code {ref.stop_code} != {got.stop_code}"
    return None


def transformed(p: Program, passes: Sequence[str]) -> tuple[Program, tuple[str, ...]]:
    """``p`` after the passes, re-parsed from its printed text."""
    q, _, notes = transformed_text(p, passes)
    return q, notes


def transformed_text(p: Program, passes: Sequence[str]) -> tuple[Program, str,
                                                                 tuple[str, ...]]:
    """``p`` after the passes, re-parsed from its printed text, with that text."""
    res = run_passes(p, list(passes), frozenset(LOOP_TRANSFORMS))
    text = print_program(res.program)
    return parse_program(text), text, res.notes


def differences(text: str, *, opencl: bool = True,
                pipelines: Sequence[tuple[str, ...]] = PIPELINES) -> list[str]:
    """Every (pipeline, backend) on which the transformed program differs from the
    original on the host interpreter; the notes of the first pipeline come last as
    ``notes: …`` for messages."""
    p = parse_program(text)
    names = [d.var.name for d in p.decls]
    ref = _run(p, "host")
    if isinstance(ref, str) and ref.startswith("CheckError"):
        raise ValueError(f"not a well-formed program (HP-9): {ref}")
    backends = ["host", "interp"] + (["opencl"] if opencl and opencl_available() else [])
    out: list[str] = []
    notes: tuple[str, ...] = ()
    unfused = {backends[-1]: _run(p, backends[-1])}
    unfused_device = unfused[backends[-1]]
    if isinstance(unfused_device, str) and unfused_device.startswith("refused: "):
        backends.pop()  # a located refusal of the device (CG-11, OFF-8): the host backends only
    for b in backends[1:]:
        d = _diff(ref, unfused[b] if b in unfused else _run(p, b), names)
        if d is not None:
            out.append(f"unfused on {b}: {d}")
    # Pipelines often print the same program (a refused fusion leaves the program as it
    # was; offload after a refused fusion is offload alone): each distinct text runs once
    # per backend, and that result is compared for every pipeline that printed the text.
    runs: dict[tuple[str, str], HostResult | str] = {}
    for passes in pipelines:
        try:
            q, text, n = transformed_text(p, passes)
        except SarekError as exc:
            # a located refusal of a pass (offload: CG-11, a parallel loop that returns)
            # is fine where the program cannot run offloaded either
            if "offload" not in passes or not (isinstance(unfused_device, str)
                                               and unfused_device.startswith("refused: ")):
                out.append(f"{'+'.join(passes)}: the pass raised {exc}")
            continue
        notes = notes or n
        for b in backends:
            if (text, b) not in runs:
                runs[text, b] = _run(q, b)
            d = _diff(ref, runs[text, b], names)
            if d is not None:
                out.append(f"{'+'.join(passes)} on {b}: {d}")
    if out:
        out.append(f"notes: {list(notes)}")
    return out


def reports(text: str, swap: bool = False) -> list[PairReport]:
    """The loop-fusion reports of the program ``text`` (one per adjacent pair)."""
    return fuse_program(parse_program(text), FusionOptions(swap=swap))[1]


def fused_pairs(text: str, swap: bool = True) -> int:
    """How many pairs loop fusion fused."""
    return sum(1 for r in reports(text, swap) if r.fused)


def refusal_rules(text: str) -> list[str]:
    """The rules of the refused pairs, in order."""
    return [r.refusal.rule for r in reports(text) if r.refusal is not None]


__all__ = ["PIPELINES", "differences", "fused_pairs", "opencl_available", "refusal_rules", "reports",
           "transformed", "transformed_text"]

