"""``sarek-py opt`` (specs/inlining.md INL-12; specs/loop-fusion.md LF-16).

On kernels, ``sarek-py opt FILE -p PASS [-p PASS …]`` runs named passes and prints the
module.

The module is checked before and after the pipeline (a pass that produced an ill-formed
program would be a bug, reported as an error rather than printed). ``--notes`` prints on
standard error what the passes left alone and why (e.g. calls not inlined, with the rule).

On a file holding a host ``program``, ``sarek-py opt FILE [--gpu-loop-transforms
all|none|fuse[,swap]] [-p PASS …] [--dump-dir DIR] [--notes]`` runs the loop passes
(:func:`run_passes`) and prints the program. Passes: ``fuse`` (producer-consumer fusion), ``swap`` (ping-pong of the
renamed arrays of fused loops; it only applies together with ``fuse``), ``offload``
(parallel loops to launches). Without ``-p`` the pipeline is ``fuse,swap`` (what
``--gpu-loop-transforms`` allows). ``--gpu-loop-transforms`` selects the loop transforms:
``all`` (default), ``none``, or a comma-separated list of ``fuse`` and ``swap``; any other
value is an error listing the accepted ones. ``--dump-dir DIR`` writes the program after
each pass (``01-fuse.sk`` …) and, after ``offload``, the emitted kernel sources
(``kernels.cl``, ``kernels.cu``). ``--backend NAME`` (default: the default backend) is the
backend whose cost table predicts each fusion, fused against unfused (LF-62, LF-66);
``--fusion-threshold OPS`` decides by operations per byte instead (LF-13, LF-63).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from sarek_py.cli.loading import FILE_HELP, check_any, is_program_text, load_checked, read_source
from sarek_py.cli.registry import UsageError, command
from sarek_py.fusion.passes import PASSES, run_pipeline
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.program import Program
from sarek_py.ir.printer import print_module
from sarek_py.ir.typecheck import check_module

# ------------------------------------------------------------------ host programs

LOOP_TRANSFORMS = ("fuse", "swap")
HOST_PASSES = ("fuse", "swap", "offload")


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


@attrs.frozen
class OptResult:
    program: Program
    notes: tuple[str, ...]
    dumps: tuple[tuple[str, str], ...]


def run_passes(program: Program, passes: Sequence[str], transforms: frozenset[str],
               threshold: float | None = None, numbering: str = "rows",
               backend: str | None = None) -> OptResult:
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
            program, reports = fuse_program(program, FusionOptions(threshold, want_swap,
                                                                     backend))
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
                     dump_dir: str | None, threshold: float | None = None,
                     numbering: str = "rows", text: str | None = None,
                     check: Callable[[Program], None] | None = None,
                     backend: str | None = None) -> OptResult:
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
    result = run_passes(program, names, transforms, threshold, numbering, backend)
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


# ---------------------------------------------------------------------- subcommand


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help=FILE_HELP)
    p.add_argument("-p", "--pass", dest="passes", action="append", default=[],
                   metavar="NAME",
                   help="a pass to run (repeatable, or comma separated); passes: "
                        + ", ".join(sorted(PASSES)) + "; of a host program: "
                        + ", ".join(HOST_PASSES) + " (default fuse,swap)")
    p.add_argument("--notes", action="store_true",
                   help="print on stderr what the passes left alone, and why")
    # host programs (a file with a 'program'): the loop passes (run_passes below)
    p.add_argument("--gpu-loop-transforms", default="all", metavar="all|none|fuse,swap",
                   help="loop transforms of host programs: all (default), none, or a "
                        "comma-separated list of fuse and swap")
    p.add_argument("--fusion-threshold", type=float, default=None, metavar="OPS",
                   help="host programs: decide each loop fusion by at most OPS extra "
                        "operations per byte removed instead of the cost model's prediction "
                        "(64 where --backend has no cost table)")
    p.add_argument("--backend", default="default", metavar="NAME",
                   help="host programs: the backend whose cost table predicts each loop "
                        "fusion, fused against unfused (default: the default backend)")
    p.add_argument("--numbering", default="rows", metavar="rows|tiles|flat",
                   help="host programs, offload: how a launch's threads number a nest of two "
                        "or more dimensions (default rows)")
    p.add_argument("--dump-dir", metavar="DIR",
                   help="host programs: write the program after each pass and the emitted "
                        "kernel sources into DIR")


def check_options(args: argparse.Namespace) -> None:
    """Option values that parse but mean nothing are usage errors (CLI-15): a pass list
    that names no pass, a fusion threshold that is not a finite number >= 0, an empty
    --dump-dir."""
    if args.passes and not any(n.strip() for it in args.passes for n in it.split(",")):
        raise UsageError(f"-p {' '.join(map(repr, args.passes))}: names no pass (passes: "
                         + ", ".join(sorted(PASSES)) + "; of a host program: "
                         + ", ".join(HOST_PASSES) + ")")
    t = args.fusion_threshold
    if t is not None and not (math.isfinite(t) and t >= 0):
        raise UsageError(f"--fusion-threshold {t}: must be a finite number of operations "
                         ">= 0")
    if args.dump_dir is not None and not args.dump_dir.strip():
        raise UsageError("--dump-dir: an empty directory name")


def pipeline_names(items: list[str]) -> list[str]:
    """``["inline", "a,b"]`` → ``["inline", "a", "b"]``; an empty pipeline is a usage error."""
    names = [n.strip() for it in items for n in it.split(",") if n.strip()]
    if not names:
        raise UsageError("name at least one pass with -p (passes: "
                         + ", ".join(sorted(PASSES)) + ")")
    return names


@command("opt", "run IR passes (inline, …) on kernels of a .sk or .py file, or loop passes "
                "(fuse, swap, offload) on a host program, and print the result", _configure)
def opt_command(args: argparse.Namespace) -> int:
    check_options(args)
    if not args.file.endswith(".py") and is_program_text(read_source(args.file)):
        return _opt_program(args)
    names = pipeline_names(args.passes)
    m = load_checked(args.file)
    notes: list[str] = []
    out = run_pipeline(m, names, notes)
    check_module(out)
    text = print_module(out)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if args.notes:
        for line in notes:
            print(f"note: {line}", file=sys.stderr)
    return 0


def cost_backend(name: str) -> str:
    """LF-66: the backend ``opt --backend`` names (``default``: the runtime's default, as
    ``run`` picks it); a name no runtime has is a usage error. The backend need not run
    here: only its cost table row is read."""
    from sarek_py.runtime import BACKENDS, get_backend

    if name == "default":
        return get_backend("default").name
    if name not in BACKENDS:
        raise UsageError(f"--backend {name}: unknown backend (choose one of "
                         f"{', '.join(BACKENDS)}, or default)")
    return name


def _opt_program(args: argparse.Namespace) -> int:
    """A host program: the loop passes (LF-16, :func:`opt_program_file`)."""
    from sarek_py.ir.host.text import print_program

    names = [n.strip() for it in args.passes for n in it.split(",") if n.strip()]
    try:
        res = opt_program_file(args.file, names, args.gpu_loop_transforms, args.dump_dir,
                               args.fusion_threshold, args.numbering,
                               text=read_source(args.file) if args.file == "-" else None,
                               check=check_any, backend=cost_backend(args.backend))
    except LoopOptionError as exc:
        raise UsageError(exc.message) from None
    sys.stdout.write(print_program(res.program))
    if args.notes:
        for line in res.notes:
            print(f"note: {line}", file=sys.stderr)
    return 0


__all__ = ["HOST_PASSES", "LOOP_TRANSFORMS", "LoopOptionError", "OptResult", "check_options",
           "opt_command", "opt_program_file", "parse_transforms", "pipeline_names",
           "run_passes"]
