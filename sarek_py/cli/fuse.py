"""``sarek-py fuse`` and ``sarek-py explain`` (specs/epilogue-fusion.md EF-14,
specs/fusion-legality.md LEG-11).

``fuse FILE --producer P --consumer C [--array I] [--shared c=p …] [--name N]
[--threads TP,TC]`` prints the fused kernel (its helpers first), its launch conditions
first as ``//`` comments and in its header as a ``requires`` clause that parses back
(LEG-13); without ``--shared``, consumer parameters named like a producer parameter are
shared. A refusal is an error (exit status 1, the rule and the
reason on stderr).

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

from sarek_py.cli.main import (
    FILE_HELP,
    UsageError,
    command,
    find_kernel,
    is_program_text,
    load_checked,
    read_source,
)
from sarek_py.fusion.epilogue.conditions import describe
from sarek_py.fusion.epilogue.fuse_kernels import fuse, shared_by_name
from sarek_py.fusion.epilogue.sequence import (
    Segment,
    fuse_launches,
    host_segments,
    program_segments,
)
from sarek_py.fusion.policy import KNOWN_TARGETS, target
from sarek_py.fusion.refusal import FusionRefused, with_flags
from sarek_py.ir.parser import name_problem
from sarek_py.ir.printer import print_kernel


def _configure_fuse(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help=FILE_HELP)
    p.add_argument("--producer", required=True, metavar="P", help="the producer kernel")
    p.add_argument("--consumer", required=True, metavar="C", help="the consumer kernel")
    p.add_argument("--array", metavar="I", help="the intermediate array (a parameter of P)")
    p.add_argument("--shared", action="append", default=[], metavar="c=p",
                   help="consumer parameter c is producer parameter p (repeatable)")
    p.add_argument("--name", metavar="N", help="name of the fused kernel")
    p.add_argument("--threads", metavar="TP,TC",
                   help="thread counts of P and C (numbers or integer parameters of P): "
                        "prove the launch conditions for them now (LEG-16)")


#: the flag of each option of ``fuse()`` that a refusal may name
FUSE_FLAGS = {"p_array": "--array", "shared": "--shared", "name": "--name",
              "threads": "--threads", "force": "--force"}


#: the flag of each option a decision of ``explain`` may name
EXPLAIN_FLAGS = {"contraction": "--contraction", "force": "--force"}


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
    if args.name is not None and (why := name_problem(args.name)) is not None:
        raise UsageError(f"--name: {why}; the fused kernel's name must read back as .sk text")
    m = load_checked(args.file)
    p = find_kernel(m, args.producer, args.file)
    c = find_kernel(m, args.consumer, args.file)
    shared = parse_shared(args.shared) if args.shared else shared_by_name(p, c)
    threads = None if args.threads is None else parse_threads(args.threads)
    try:
        k = fuse(p, c, shared=shared, p_array=args.array, name=args.name, threads=threads)
    except FusionRefused as r:  # options in the flags' spelling (EF-16)
        raise with_flags(r, FUSE_FLAGS) from None
    for line in describe(k):
        print("// " + line)
    print(print_kernel(k), end="")
    return 0


def parse_threads(text: str) -> tuple[int | str, int | str]:
    """``--threads TP,TC``: each a number or a parameter name; else a usage error."""
    parts = [t.strip() for t in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"--threads expects TP,TC, got {text!r}")
    out: list[int | str] = []
    for t in parts:
        if t.isdigit() and len(t) <= 10:
            out.append(int(t))
        elif t.isidentifier():
            out.append(t)
        else:
            raise UsageError(f"--threads: {t!r} is neither a thread count nor a parameter name")
    return out[0], out[1]


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
         _configure_explain)
def _explain(args: argparse.Namespace) -> int:
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
