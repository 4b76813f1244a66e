"""``sarek-py print FILE [--sexp]`` (docs/cli.md, CLI-4, CLI-10; TXT-26): the file parsed
and printed back in canonical ``.sk`` form, or in its lossless S-expression form."""

from __future__ import annotations

import argparse
import sys

from sarek_py.cli.loading import file_arg, load_any
from sarek_py.cli.registry import command
from sarek_py.ir.nodes import Module


def _configure(p: argparse.ArgumentParser) -> None:
    file_arg(p)
    p.add_argument("--sexp", action="store_true",
                   help="print the lossless S-expression form instead of .sk text")


@command("print", "parse a .sk (or .py) file and print it back in canonical .sk form",
         _configure)
def print_command(args: argparse.Namespace) -> int:
    m = load_any(args.file)
    if not isinstance(m, Module):
        if args.sexp:
            from sarek_py.ir.host.sexp import program_to_sexp

            text = program_to_sexp(m)
        else:
            from sarek_py.ir.host.text import print_program

            text = print_program(m)
    elif args.sexp:
        from sarek_py.ir.sexp import to_sexp

        text = to_sexp(m)
    else:
        from sarek_py.ir.printer import print_module

        text = print_module(m)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


__all__ = ["print_command"]
