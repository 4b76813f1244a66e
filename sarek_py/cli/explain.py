"""``sarek-py explain`` (specs/fusion-legality.md LEG-11, LEG-12; specs/epilogue-fusion.md).

``explain FILE [--launches L] [--target T] [--contraction on|off] [--force]`` prints the
decision of :func:`~sarek_py.fusion.epilogue.sequence.fuse_launches` for every adjacent pair of
launches. When ``FILE`` holds a host program (specs/host-program.md), its straight-line
runs of launches are explained (:func:`~sarek_py.fusion.epilogue.sequence.program_segments`), with
a line for each host statement that ends a run. Otherwise the launches are read from
``L`` (default: ``FILE`` with the suffix ``.launches``) in the launch syntax of
:mod:`sarek_py.ir.host.launch_text` (LCH-16), against the kernels of ``FILE``::

    host x : f32[], t : f32[], y : f32[], n : i32
    launch scale(x, t, 2.0f, n) threads n block 256
    launch relu(t, y, n) threads n block 256

Host scalars there have no values: counts such as ``n`` are symbolic (LEG-12).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sarek_py.cli.loading import is_program_text, load_checked, read_source
from sarek_py.cli.registry import UsageError, command
from sarek_py.fusion.epilogue.sequence import (
    Segment,
    fuse_launches,
    host_segments,
    program_segments,
)
from sarek_py.fusion.policy import KNOWN_TARGETS, target

#: the flag of each option a decision of ``explain`` may name
EXPLAIN_FLAGS = {"contraction": "--contraction", "force": "--force"}


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE",
                   help="a .sk file holding a host program, or the kernels (.sk, or a .py "
                        "file of @kernel functions: the Python front end) that the "
                        "launches file launches")
    p.add_argument("--launches", metavar="L",
                   help="the launches file (default: FILE with the suffix .launches)")
    p.add_argument("--target", default="interp", help="the target (interp, opencl, cuda, c)")
    p.add_argument("--contraction", choices=["on", "off"],
                   help="whether the target contracts floating-point operations")
    p.add_argument("--force", action="store_true", help="fuse even where contraction is on")


def _segments(args: argparse.Namespace) -> list[Segment]:
    text = read_source(args.file)
    if args.launches is None and is_program_text(text):
        from sarek_py.ir.host.text import parse_program

        return program_segments(parse_program(text, args.file))
    from sarek_py.ir.host.launch_text import parse_host

    m = load_checked(args.file)
    path = args.launches or str(Path(args.file).with_suffix(".launches"))
    _, stmts = parse_host(read_source(path), m, path)
    segments = host_segments(stmts)
    if not segments:
        raise UsageError(f"{path} holds no launch")
    return segments


@command("explain", "say, for every adjacent pair of launches, whether it fuses and why",
         _configure)
def explain_command(args: argparse.Namespace) -> int:
    contraction = None if args.contraction is None else args.contraction == "on"
    if contraction is None and args.target not in KNOWN_TARGETS:
        raise UsageError(f"--target {args.target!r}: unknown target (known: "
                         f"{', '.join(sorted(KNOWN_TARGETS))}); for another target say "
                         "whether it contracts floating-point operations with "
                         "--contraction on|off")
    tgt = target(args.target, contraction)
    for seg in _segments(args):
        _, report = fuse_launches(seg.launches, target=tgt, force=args.force)
        for d in report:
            print(d.with_flags(EXPLAIN_FLAGS))
        if seg.break_reason is not None:
            print(f"-- not fused across: {seg.break_reason}")
    return 0


__all__ = ["EXPLAIN_FLAGS", "explain_command"]
