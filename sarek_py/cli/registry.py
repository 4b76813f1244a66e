"""The subcommands of ``sarek-py`` by name (docs/cli.md, CLI-9).

A subcommand is registered with :func:`command`, which gives it an ``argparse`` sub-parser
(``--help`` included) and a runner returning the exit status. The built-in subcommands
register this way, one module each (``sarek_py/cli/print.py`` … ``opt.py``); so can a
module of the user's, imported before :func:`sarek_py.cli.main.main` runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import attrs

PROG = "sarek-py"

#: the package's version: ``sarek-py --version`` and ``sarek_py.__version__`` (CLI-20)
VERSION = "0.1.0"

Runner = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """A command line that cannot be carried out as written (exit status 2)."""


@attrs.frozen
class Command:
    """A subcommand: its name, one line of help, how to add its arguments, its runner."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Runner


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str,
            configure: Callable[[argparse.ArgumentParser], None]) -> Callable[[Runner], Runner]:
    """Register the decorated function as subcommand ``name``."""

    def register(run: Runner) -> Runner:
        if name in COMMANDS and COMMANDS[name].run is not run:
            raise ValueError(f"subcommand {name!r} registered twice")
        COMMANDS[name] = Command(name, help, configure, run)
        return run

    return register


__all__ = ["COMMANDS", "PROG", "VERSION", "Command", "Runner", "UsageError", "command"]
