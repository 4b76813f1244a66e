"""``sarek-py fuse`` (specs/epilogue-fusion.md EF-14, EF-16; specs/fusion-legality.md
LEG-13, LEG-16).

``fuse FILE --producer P --consumer C [--array I] [--shared c=p …] [--name N]
[--threads TP,TC]`` prints the fused kernel (its helpers first), its launch conditions
first as ``//`` comments and in its header as a ``requires`` clause that parses back
(LEG-13); without ``--shared``, consumer parameters named like a producer parameter are
shared. A refusal is an error (exit status 1, the rule and the
reason on stderr).
"""

from __future__ import annotations

import argparse

from sarek_py.cli.loading import FILE_HELP, find_kernel, load_checked
from sarek_py.cli.registry import UsageError, command
from sarek_py.fusion.epilogue.conditions import describe
from sarek_py.fusion.epilogue.fuse_kernels import fuse, shared_by_name
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
def fuse_command(args: argparse.Namespace) -> int:
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


__all__ = ["FUSE_FLAGS", "fuse_command", "parse_shared", "parse_threads"]
