"""``sarek-py fuse`` and ``sarek-py explain`` (specs/epilogue-fusion.md EF-14,
specs/fusion-legality.md LEG-11).

``fuse FILE --producer P --consumer C [--array I] [--shared c=p …] [--name N]`` prints
the fused kernel (its helpers first); without ``--shared``, consumer parameters named like
a producer parameter are shared. A refusal is an error (exit status 1, the rule and the
reason on stderr).

``explain FILE [--launches L] [--target T] [--contraction on|off] [--force]`` prints the
decision of :func:`~sarek_py.fusion.sequence.fuse_launches` for every adjacent pair of
launches. When ``FILE`` holds a host program (specs/host-program.md), its straight-line
runs of launches are explained (:func:`~sarek_py.fusion.sequence.program_segments`), with
a line for each host statement that ends a run. Otherwise the launches are read from
``L`` (default: ``FILE`` with the suffix ``.launches``) in the launch syntax of
:mod:`sarek_py.launch.text` (LCH-16), against the kernels of ``FILE``::

    host x : f32[], t : f32[], y : f32[], n : i32
    launch scale(x, t, 2.0f, n) threads n block 256
    launch relu(t, y, n) threads n block 256

Host scalars there have no values: counts such as ``n`` are symbolic (LEG-12).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sarek_py.cli import (
    FILE_HELP,
    UsageError,
    command,
    find_kernel,
    is_program_text,
    load_checked,
    read_source,
)
from sarek_py.fusion.epilogue import fuse, shared_by_name
from sarek_py.fusion.policy import target
from sarek_py.fusion.sequence import Segment, fuse_launches, host_segments, program_segments
from sarek_py.ir.printer import print_kernel


def _configure_fuse(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help=FILE_HELP)
    p.add_argument("--producer", required=True, metavar="P", help="the producer kernel")
    p.add_argument("--consumer", required=True, metavar="C", help="the consumer kernel")
    p.add_argument("--array", metavar="I", help="the intermediate array (a parameter of P)")
    p.add_argument("--shared", action="append", default=[], metavar="c=p",
                   help="consumer parameter c is producer parameter p (repeatable)")
    p.add_argument("--name", metavar="N", help="name of the fused kernel")


def parse_shared(items: list[str]) -> dict[str, str]:
    """``["c=p", …]`` as a mapping; a malformed item is a usage error."""
    out: dict[str, str] = {}
    for it in items:
        c, eq, p = it.partition("=")
        if not eq or not c.strip() or not p.strip():
            raise UsageError(f"--shared expects c=p, got {it!r}")
        out[c.strip()] = p.strip()
    return out


@command("fuse", "fuse an element-wise consumer kernel into its producer (epilogue fusion)",
         _configure_fuse)
def _fuse(args: argparse.Namespace) -> int:
    m = load_checked(args.file)
    p = find_kernel(m, args.producer, args.file)
    c = find_kernel(m, args.consumer, args.file)
    shared = parse_shared(args.shared) if args.shared else shared_by_name(p, c)
    k = fuse(p, c, shared=shared, p_array=args.array, name=args.name)
    print(print_kernel(k), end="")
    return 0


def _configure_explain(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE",
                   help="a .sk file holding a host program, or the kernels (.sk, or a .py "
                        "file of @kernel functions: the Python front end) that the "
                        "launches file launches")
    p.add_argument("--launches", metavar="L",
                   help="the launches file (default: FILE with the suffix .launches)")
    p.add_argument("--target", default="interp", help="the target (interp, opencl, cuda)")
    p.add_argument("--contraction", choices=["on", "off"],
                   help="whether the target contracts floating-point operations")
    p.add_argument("--force", action="store_true", help="fuse even where contraction is on")


def _segments(args: argparse.Namespace) -> list[Segment]:
    text = read_source(args.file)
    if args.launches is None and is_program_text(text):
        from sarek_py.launch.program_text import parse_program

        return program_segments(parse_program(text, args.file))
    from sarek_py.launch.text import parse_host

    m = load_checked(args.file)
    path = args.launches or str(Path(args.file).with_suffix(".launches"))
    _, stmts = parse_host(read_source(path), m, path)
    segments = host_segments(stmts)
    if not segments:
        raise UsageError(f"{path} holds no launch")
    return segments


@command("explain", "say, for every adjacent pair of launches, whether it fuses and why",
         _configure_explain)
def _explain(args: argparse.Namespace) -> int:
    contraction = None if args.contraction is None else args.contraction == "on"
    tgt = target(args.target, contraction)
    for seg in _segments(args):
        _, report = fuse_launches(seg.launches, target=tgt, force=args.force)
        for d in report:
            print(d)
        if seg.break_reason is not None:
            print(f"-- not fused across: {seg.break_reason}")
    return 0
