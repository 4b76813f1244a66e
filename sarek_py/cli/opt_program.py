"""``sarek-py opt`` on host programs: the loop passes (specs/loop-fusion.md, LF-16).

``sarek-py opt FILE [--gpu-loop-transforms all|none|fuse[,swap]] [-p PASS …]
[--dump-dir DIR] [--notes]`` on a file holding a ``program`` runs the loop passes and prints
the program. Passes: ``fuse`` (producer-consumer fusion), ``swap`` (ping-pong of the
renamed arrays of fused loops; it only applies together with ``fuse``), ``offload``
(parallel loops to launches). Without ``-p`` the pipeline is ``fuse,swap`` (what
``--gpu-loop-transforms`` allows). ``--gpu-loop-transforms`` selects the loop transforms:
``all`` (default), ``none``, or a comma-separated list of ``fuse`` and ``swap``; any other
value is an error listing the accepted ones. ``--dump-dir DIR`` writes the program after
each pass (``01-fuse.sk`` …) and, after ``offload``, the emitted kernel sources
(``kernels.cl``, ``kernels.cu``). ``--fusion-threshold OPS`` sets the cost model's
operations per byte (LF-13).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.program import Program

LOOP_TRANSFORMS = ("fuse", "swap")
HOST_PASSES = ("fuse", "swap", "offload")
_PROGRAM = re.compile(r"^\s*program\s+\w+", re.MULTILINE)


class LoopOptionError(SarekError):
    """A ``--gpu-loop-transforms`` or ``-p`` value the loop passes do not accept."""


def parse_transforms(value: str) -> frozenset[str]:
    """LF-16: ``all``, ``none`` or a comma-separated list of ``fuse`` and ``swap``."""
    v = value.strip()
    if v == "all":
        return frozenset(LOOP_TRANSFORMS)
    if v == "none":
        return frozenset()
    items = [x.strip() for x in v.split(",")]
    if not items or any(x not in LOOP_TRANSFORMS for x in items):
        raise LoopOptionError(f"--gpu-loop-transforms: invalid value '{value}' (accepted: all, "
                              "none, or a comma-separated list of fuse and swap)")
    return frozenset(items)


def looks_like_program(text: str) -> bool:
    """Whether a text holds a host ``program`` (rather than only kernels)."""
    return _PROGRAM.search(text) is not None


@attrs.frozen
class OptResult:
    program: Program
    notes: tuple[str, ...]
    dumps: tuple[tuple[str, str], ...]


def run_passes(program: Program, passes: Sequence[str], transforms: frozenset[str],
               threshold: float = 64.0, numbering: str = "rows") -> OptResult:
    """Run the named loop passes in order (LF-16); ``fuse`` followed by ``swap`` fuses with
    ping-pong; a pass ``--gpu-loop-transforms`` excludes is skipped (with a note)."""
    from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
    from sarek_py.host.offload import NUMBERINGS, offload
    from sarek_py.ir.host.text import print_program

    if numbering not in NUMBERINGS:
        raise LoopOptionError(f"--numbering: '{numbering}' is not one of "
                              f"{', '.join(NUMBERINGS)}")
    for name in passes:
        if name not in HOST_PASSES:
            raise LoopOptionError(f"unknown pass '{name}' for a host program (passes: "
                                  f"{', '.join(HOST_PASSES)})")
    notes: list[str] = []
    dumps: list[tuple[str, str]] = []
    want_swap = "swap" in passes and "swap" in transforms
    step = 0
    for name in passes:
        if name in LOOP_TRANSFORMS and name not in transforms:
            notes.append(f"{name}: disabled by --gpu-loop-transforms")
            continue
        if name == "fuse":
            program, reports = fuse_program(program, FusionOptions(threshold, want_swap))
            notes += [str(r) for r in reports]
        elif name == "swap":
            if "fuse" not in passes or "fuse" not in transforms:
                notes.append("swap: applies only to fused loops; nothing fused")
            continue  # done together with fuse
        else:
            program = offload(program, numbering=numbering)
        step += 1
        dumps.append((f"{step:02d}-{name}.sk", print_program(program)))
        if name == "offload":
            from sarek_py.codegen import CUDA, OPENCL
            from sarek_py.codegen.cstyle import emit_module

            # one translation unit each: the prelude and every helper once (CG-16, LF-20)
            what = f"program {program.name}"
            dumps.append(("kernels.cl", emit_module(program.kernels, OPENCL, what)))
            dumps.append(("kernels.cu", emit_module(program.kernels, CUDA, what)))
    return OptResult(program, tuple(notes), tuple(dumps))


def opt_program_file(path: str, passes: Sequence[str], transforms_value: str,
                     dump_dir: str | None, threshold: float = 64.0,
                     numbering: str = "rows", text: str | None = None,
                     check: Callable[[Program], None] | None = None) -> OptResult:
    """``sarek-py opt`` on a host-program file (or on ``text``, standard input's, read
    under the name ``<stdin>``): parse, ``check`` (the passes assume a well-formed
    program, HP-9), run, write the dumps."""
    from sarek_py.ir.host.text import parse_program, parse_program_file

    transforms = parse_transforms(transforms_value)
    program = (parse_program_file(path) if text is None
               else parse_program(text, "<stdin>"))
    if check is not None:
        check(program)
    names = list(passes) if passes else [p for p in LOOP_TRANSFORMS]
    result = run_passes(program, names, transforms, threshold, numbering)
    if dump_dir is not None:
        out = Path(dump_dir)
        try:
            out.mkdir(parents=True, exist_ok=True)
            for fname, dump in result.dumps:
                (out / fname).write_text(dump if dump.endswith("\n") else dump + "\n")
        except OSError as exc:
            raise SarekError(f"--dump-dir {dump_dir}: cannot write the dumps "
                             f"({exc.strerror or exc})") from None
    return result
