"""``sarek-py opt FILE -p PASS [-p PASS …]``: run named passes, print the module (INL-12).

The module is checked before and after the pipeline (a pass that produced an ill-formed
program would be a bug, reported as an error rather than printed). ``--notes`` prints on
standard error what the passes left alone and why (e.g. calls not inlined, with the rule).
"""

from __future__ import annotations

import argparse
import math
import sys

from sarek_py.cli.main import (
    FILE_HELP,
    UsageError,
    check_any,
    command,
    is_program_text,
    load_checked,
    read_source,
)
from sarek_py.cli.opt_program import HOST_PASSES
from sarek_py.fusion.passes import PASSES, run_pipeline
from sarek_py.ir.printer import print_module
from sarek_py.ir.typecheck import check_module


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help=FILE_HELP)
    p.add_argument("-p", "--pass", dest="passes", action="append", default=[],
                   metavar="NAME",
                   help="a pass to run (repeatable, or comma separated); passes: "
                        + ", ".join(sorted(PASSES)) + "; of a host program: "
                        + ", ".join(HOST_PASSES) + " (default fuse,swap)")
    p.add_argument("--notes", action="store_true",
                   help="print on stderr what the passes left alone, and why")
    # host programs (a file with a 'program'): the loop passes (sarek_py/cli/opt_program.py)
    p.add_argument("--gpu-loop-transforms", default="all", metavar="all|none|fuse,swap",
                   help="loop transforms of host programs: all (default), none, or a "
                        "comma-separated list of fuse and swap")
    p.add_argument("--fusion-threshold", type=float, default=64.0, metavar="OPS",
                   help="host programs: most extra operations per byte removed for a loop "
                        "fusion (default 64)")
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
    if not (math.isfinite(t) and t >= 0):
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
def _opt(args: argparse.Namespace) -> int:
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


def _opt_program(args: argparse.Namespace) -> int:
    """A host program: the loop passes (LF-16, ``sarek_py.cli.opt_program``)."""
    from sarek_py.cli.opt_program import LoopOptionError, opt_program_file
    from sarek_py.ir.host.text import print_program

    names = [n.strip() for it in args.passes for n in it.split(",") if n.strip()]
    try:
        res = opt_program_file(args.file, names, args.gpu_loop_transforms, args.dump_dir,
                               args.fusion_threshold, args.numbering,
                               text=read_source(args.file) if args.file == "-" else None,
                               check=check_any)
    except LoopOptionError as exc:
        raise UsageError(exc.message) from None
    sys.stdout.write(print_program(res.program))
    if args.notes:
        for line in res.notes:
            print(f"note: {line}", file=sys.stderr)
    return 0
