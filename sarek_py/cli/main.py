"""The ``sarek-py`` command (docs/cli.md): the parser of the registered subcommands, and
the one place that turns their errors into messages and exit statuses.

Each subcommand is one module of this package that registers itself with
:func:`sarek_py.cli.registry.command` (``print``, ``check``, ``run``, ``emit``, ``opt``,
``fuse``, ``explain``); shared pieces live in :mod:`~sarek_py.cli.loading` (reading and
loading files), :mod:`~sarek_py.cli.inputs`, :mod:`~sarek_py.cli.report`,
:mod:`~sarek_py.cli.running` and :mod:`~sarek_py.cli.compare`. A subcommand registered by
another module imported before :func:`main` runs is offered too (CLI-9).

Exit status: 0 success, 1 invalid input, refusal or run-time error (the error's text,
``file:line:col: error: …`` with the source line and a caret, on stderr), 2 usage error.
A user's mistake never prints a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from sarek_py.cli import check, emit, explain, fuse, opt, run
from sarek_py.cli import print as print_
from sarek_py.cli.loading import forget_sources, shown
from sarek_py.cli.registry import COMMANDS, PROG, VERSION, Command, UsageError
from sarek_py.ir.diagnostics import SarekError

#: the built-in subcommands' runners, in the order ``sarek-py --help`` lists them
BUILTIN = (print_.print_command, check.check_command, run.run_command, emit.emit_command,
           opt.opt_command, fuse.fuse_command, explain.explain_command)


def commands() -> list[Command]:
    """Every registered subcommand: the built-in ones first, in :data:`BUILTIN` order, then
    the others in the order they were registered."""
    first = [c for r in BUILTIN for c in COMMANDS.values() if c.run is r]
    return first + [c for c in COMMANDS.values() if c not in first]


#: what ``sarek-py --help`` says first: what the tool is for (CLI-21)
PURPOSE = """\
sarek-py: proved-exact fusion of GPU kernels.
It fuses kernels (.sk text, or Python @kernel files) only where the fused kernel
is proved to give bit-for-bit the results of the kernels run one after the
other, and otherwise names the rule that refuses it and why. Kernels compile to
CUDA C and OpenCL C with contraction off, and run on CUDA, OpenCL or the
reference interpreter."""

#: the built-in subcommands in one line each, for the list of ``sarek-py --help`` (CLI-21);
#: ``sarek-py COMMAND --help`` gives the whole help. Other subcommands show their help.
SUMMARY = {
    "print": "print a .sk or .py file back in canonical .sk form",
    "check": "check a file: types, scopes, barriers, purity",
    "run": "run a kernel or a host program; a digest of each array",
    "emit": "print a kernel as CUDA C or OpenCL C",
    "opt": "run IR passes on kernels, or loop passes on a program",
    "fuse": "fuse a consumer kernel into its producer (epilogue)",
    "explain": "say for each pair of launches whether it fuses, and why",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one sub-parser per registered subcommand."""
    parser = argparse.ArgumentParser(
        prog=PROG, description=PURPOSE, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {VERSION}",
                        help=f"print '{PROG} {VERSION}' and exit")
    sub = parser.add_subparsers(title="subcommands (sarek-py COMMAND --help for one)",
                                metavar="COMMAND", required=True)
    for cmd in commands():
        summary = SUMMARY.get(cmd.name, cmd.help) if cmd.run in BUILTIN else cmd.help
        sp = sub.add_parser(cmd.name, help=summary, description=cmd.help)
        cmd.configure(sp)
        sp.set_defaults(_command=cmd, _parser=sp)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else 2
    cmd: Command = args._command
    forget_sources()
    try:
        # every subcommand runs on a deep stack: programs nest up to MAX_DEPTH levels
        from sarek_py.ir.deep import call_deep

        return call_deep(cmd.run, args)
    except UsageError as exc:
        args._parser.print_usage(sys.stderr)
        print(f"{PROG} {cmd.name}: error: {exc}", file=sys.stderr)
        return 2
    except SarekError as exc:
        print(shown(exc), file=sys.stderr)
        return 1
    except RecursionError:
        print(f"{PROG} {cmd.name}: error: the input is nested too deeply", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"{PROG} {cmd.name}: error: out of memory (sizes too large?)", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `sarek-py print f.sk | head -1`: stop quietly
        _silence_stdout()
        return 1
    except KeyboardInterrupt:
        return 130


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so exiting does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


__all__ = ["BUILTIN", "PURPOSE", "SUMMARY", "build_parser", "commands", "main"]

if __name__ == "__main__":
    sys.exit(main())
