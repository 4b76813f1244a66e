"""Reading and loading the files the subcommands take (docs/cli.md, CLI-10, CLI-12, CLI-16).

A ``FILE`` argument is a ``.sk`` file (kernels, or a host program), a ``.py`` file of
``@kernel`` functions (the Python front end) or ``-`` for standard input. Every text read
is kept for the command, so that an error located in it is shown with its source line and
a caret (:func:`shown`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Kernel, Module

if TYPE_CHECKING:
    from sarek_py.ir.host.program import Program

_SOURCES: dict[str, str] = {}


def read_source(path: str) -> str:
    """The text of ``path`` (``-`` for standard input), decoded strictly as UTF-8.

    Standard input is read once per command: a second call gives the same text. A missing
    file, a directory, an unreadable file or bytes that are not UTF-8 raise a
    :class:`SarekError` (exit status 1).
    """
    from sarek_py.ir.lexer import decode_source

    if path == "-":
        if "<stdin>" in _SOURCES:
            return _SOURCES["<stdin>"]
        data = read_capped(sys.stdin.buffer, "standard input")
        name = "<stdin>"
    else:
        p = Path(path)
        if p.is_dir():
            raise SarekError(f"cannot read '{path}': it is a directory")
        try:
            with p.open("rb") as f:
                data = read_capped(f, f"'{path}'")
        except FileNotFoundError:
            raise SarekError(f"cannot read '{path}': no such file") from None
        except OSError as exc:
            raise SarekError(f"cannot read '{path}': {exc.strerror or exc}") from None
        name = path
    text = decode_source(data, name)
    _SOURCES[name] = text
    return text


def _remember_python(path: str) -> None:
    """Keep the text of a loaded ``.py`` file under the names its kernels' locations use
    (the interpreter's absolute ``co_filename``), so that a later run-time error shows its
    line and caret like one in a ``.sk`` file (FE-101)."""
    try:
        text = read_source(path)
    except SarekError:
        return  # it loaded, so this is a race with the file changing: no line to show
    for name in (os.path.abspath(path), str(Path(path).resolve())):
        _SOURCES.setdefault(name, text)


def forget_sources() -> None:
    """Drop the texts read so far (a new command starts; standard input is read again)."""
    _SOURCES.clear()


def shown(err: SarekError) -> str:
    """The error as printed: with its source line and a caret when it is located in a text
    this command read."""
    loc = err.loc
    if err.source is None and loc is not None and loc.file in _SOURCES:
        err.with_source(_SOURCES[loc.file])
    return str(err)


#: the largest input file read (CLI-16): an endless input (a device, a pipe) stops there;
#: the lexer reads 4 MiB of dense tokens in about 5 s
MAX_INPUT_BYTES = 4 << 20


def read_capped(f: Any, what: str) -> bytes:
    """All bytes of the binary stream ``f``, or a :class:`SarekError` when it holds more
    than :data:`MAX_INPUT_BYTES` (without reading further)."""
    data: bytes = f.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise SarekError(f"cannot read {what}: longer than {MAX_INPUT_BYTES >> 20} MiB (the "
                         "largest input sarek-py reads)")
    return data


#: a line that starts a host program (specs/host-program.md, HP-10)
_PROGRAM = re.compile(r"^\s*program\s+\w+", re.MULTILINE)


def is_program_text(text: str) -> bool:
    """Whether a ``.sk`` text holds a host ``program`` item (CLI-10) rather than only
    kernels and helpers."""
    return _PROGRAM.search(text) is not None


def source_name(path: str) -> str:
    """The name a text read from ``path`` has in messages (``<stdin>`` for ``-``)."""
    return "<stdin>" if path == "-" else path


def load_any(path: str) -> Module | Program:
    """The parsed (not yet checked) contents of a file (CLI-10): a host
    :class:`~sarek_py.ir.host.program.Program` when the ``.sk`` text holds a ``program``
    item, a kernel :class:`Module` otherwise (``.sk`` text, or the ``@kernel`` functions of
    a Python ``.py`` file translated by the front end, specs/frontend.md FE-18)."""
    if path.endswith(".py"):
        from sarek_py.frontend.pyfile import load_python_module

        module = load_python_module(path)
        _remember_python(path)
        return module
    text = read_source(path)
    if is_program_text(text):
        from sarek_py.ir.host.text import parse_program

        return parse_program(text, source_name(path))
    from sarek_py.ir.parser import parse_module

    return parse_module(text, source_name(path))


def program_module(p: Program) -> Module:
    """The helpers and kernels of a host program as a kernel module."""
    return Module(p.helpers, p.kernels)


def load_module(path: str) -> Module:
    """The parsed (not yet checked) kernel module of a ``.sk`` file, or the ``@kernel``
    functions of a Python ``.py`` file translated by the front end (specs/frontend.md,
    FE-18). A file holding a host program gives the program's helpers and kernels."""
    m = load_any(path)
    return m if isinstance(m, Module) else program_module(m)


def check_any(m: Module | Program) -> None:
    """Check a kernel module (specs/ir.md) or a host program: its helpers and kernels,
    then its host statements and parallel loops (HP-9)."""
    from sarek_py.ir.typecheck import check_module

    if isinstance(m, Module):
        check_module(m)
        return
    from sarek_py.host.check import check_program

    check_module(program_module(m))
    check_program(m)


def load_checked(path: str) -> Module:
    """The parsed and checked kernel module of a file (of a host program: its helpers and
    kernels, CLI-10)."""
    from sarek_py.ir.typecheck import check_module

    m = load_module(path)
    check_module(m)
    return m


def find_kernel(m: Module, name: str, path: str) -> Kernel:
    """Kernel ``name`` of ``m`` (read from ``path``), or an error naming the kernels there."""
    try:
        return m.kernel(name)
    except KeyError:
        names = ", ".join(k.name for k in m.kernels) or "none"
        raise SarekError(f"no kernel '{name}' in {path} (kernels: {names})") from None


#: the help of a FILE argument that the front end also reads
FILE_HELP = ("a .sk file (kernels, or a host program), a .py file of @kernel functions "
             "(the Python front end), or '-' for standard input (.sk text)")


def file_arg(p: argparse.ArgumentParser) -> None:
    """Add the ``FILE`` argument (CLI-12)."""
    p.add_argument("file", metavar="FILE", help=FILE_HELP)


__all__ = ["FILE_HELP", "MAX_INPUT_BYTES", "check_any", "file_arg", "find_kernel",
           "forget_sources", "is_program_text", "load_any", "load_checked", "load_module",
           "program_module", "read_capped", "read_source", "shown", "source_name"]
