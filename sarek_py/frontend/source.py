"""The Python source of a decorated function, parsed, with file positions (FE-1).

``inspect.getsource`` gives the function's lines; they are dedented (a kernel may be
defined inside a class or a function) and parsed with :mod:`ast`. Every position the
translator reports is mapped back to the real file: line offset of the function, and the
indentation removed by the dedent.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Loc


class FrontendError(SarekError):
    """A Python function outside the kernel subset, located in its file."""


@attrs.frozen
class FunctionSource:
    """A function's syntax tree and what is needed to locate its nodes in the file."""

    tree: ast.FunctionDef
    file: str
    first_line: int
    indent: int
    text: str
    dedented: str

    def segment(self, node: ast.AST) -> str | None:
        """The source text of ``node``."""
        return ast.get_source_segment(self.dedented, node)

    def loc(self, node: ast.AST) -> Loc:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)  # in UTF-8 bytes: count characters instead
        lines = self.dedented.splitlines()
        if 1 <= line <= len(lines):
            col = len(lines[line - 1].encode()[:col].decode(errors="ignore"))
        return Loc(self.file, self.first_line + line - 1, col + self.indent + 1)

    def error(self, node: ast.AST, message: str) -> FrontendError:
        """A located error at ``node``, showing the file's line under a caret."""
        return FrontendError(message, self.loc(node), self.text)


def _undecodable(fn: Callable[..., Any]) -> None:
    """When ``fn``'s file exists but is not UTF-8 (inspect then finds no source), raise the
    located error of the first bad byte (FE-22)."""
    from sarek_py.ir.lexer import decode_source

    code = getattr(fn, "__code__", None)
    if code is None:
        return
    try:
        data = Path(code.co_filename).read_bytes()
    except OSError:
        return
    decode_source(data, code.co_filename)


def load(fn: Callable[..., Any]) -> FunctionSource:
    """Read and parse the source of ``fn`` (a plain ``def`` at any nesting)."""
    try:
        lines, first = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as err:
        _undecodable(fn)
        raise FrontendError(
            f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {err} "
            "(kernels must be defined in a file, not typed at an interactive prompt)"
        ) from None
    raw = "".join(lines)
    dedented = textwrap.dedent(raw)
    indent = _indent(lines[0]) - _indent(dedented.splitlines()[0] if dedented else "")
    text = "".join(linecache.getlines(file)) or raw
    try:
        with warnings.catch_warnings():
            # the file's import already compiled this text with Python's warnings off
            # ("invalid decimal literal", FE-22); parsing it again would print them
            warnings.simplefilter("ignore", SyntaxWarning)
            module = ast.parse(dedented)
    except SyntaxError as err:  # e.g. a lambda or a def whose lines do not stand alone
        raise FrontendError(
            f"cannot parse the source of {getattr(fn, '__name__', fn)!r}: {err.msg}",
            Loc(file, first + (err.lineno or 1) - 1, (err.offset or 1) + indent),
            text,
        ) from None
    defs = [n for n in module.body if isinstance(n, ast.FunctionDef)]
    if not defs and module.body and isinstance(module.body[0], ast.AsyncFunctionDef):
        node = module.body[0]
        raise FrontendError("an async def cannot be a kernel: write a plain `def` function",
                            Loc(file, first + node.lineno - 1, node.col_offset + indent + 1),
                            text)
    if not defs:
        kind = "lambda" if "lambda" in dedented.split("\n", 1)[0] else "this object"
        raise FrontendError(
            f"{kind} cannot be a kernel: write a plain `def` function",
            Loc(file, first, indent + 1),
            text,
        )
    tree = defs[0]
    # getsourcelines starts at the first decorator; positions in the tree are relative to it.
    return FunctionSource(tree, file, first, indent, text, dedented)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
