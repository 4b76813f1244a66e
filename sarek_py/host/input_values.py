"""The values ``read`` takes from an input file (specs/host-program.md, HP-45).

An input file holds values separated by white space. Each value keeps where it was
(file, line, column), so that a ``read`` that finds a value of the wrong type, or none
left, says which value and which variable, at the ``read``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.program import HostError
from sarek_py.ir.nodes import Loc, Var
from sarek_py.ir.types import Scalar


class InputValue(str):
    """One whitespace-separated value of an input file, with its place."""

    where: str

    def __new__(cls, text: str, where: str) -> InputValue:
        self = super().__new__(cls, text)
        self.where = where
        return self


class InputValues(list[Any]):
    """The values of an input file in order, and the file's name (for messages)."""

    def __init__(self, values: list[InputValue], source: str) -> None:
        super().__init__(values)
        self.source = source


def read_input_file(path: str) -> InputValues:
    """HP-45: the values of ``path``; a ``SarekError`` naming it when it cannot be read."""
    try:
        data = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SarekError(f"--input {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SarekError(f"--input {path}: cannot read it ({why})") from None
    return parse_input_text(data, path)


def parse_input_text(data: str, source: str) -> InputValues:
    out: list[InputValue] = []
    for n, line in enumerate(data.splitlines(), start=1):
        col = 0
        for word in line.split():
            col = line.index(word, col)
            out.append(InputValue(word, f"{source}:{n}:{col + 1}"))
            col += len(word)
    return InputValues(out, source)


def convert_value(v: Var, text: str, where: str, loc: Loc | None) -> Any:
    """The value of input text ``text`` for scalar variable ``v`` (HP-45): an integer in
    decimal within its type's range, a float as Python reads one, ``true``/``false``;
    a ``HostError`` located at the ``read`` otherwise."""
    t = v.type
    assert isinstance(t, Scalar)
    bad = HostError(f"read of '{v.name}': '{text}' ({where}) is not a value of type {t}",
                     loc)
    if t is Scalar.BOOL:
        if text not in ("true", "false"):
            raise bad
        return np.bool_(text == "true")
    if t.is_int:
        try:
            n = int(text, 10)
        except ValueError:
            raise bad from None
        info = np.iinfo(t.dtype.name)
        if not int(info.min) <= n <= int(info.max):
            raise HostError(f"read of '{v.name}': {text} ({where}) does not fit in {t}", loc)
        return t.dtype.type(n)
    try:
        x = float(text)
    except ValueError:
        raise bad from None
    with np.errstate(over="ignore"):
        value = t.dtype.type(x)
    if np.isinf(value) and not np.isinf(x):
        raise HostError(f"read of '{v.name}': {text} ({where}) overflows {t}", loc)
    return value


__all__ = ["InputValue", "InputValues", "convert_value", "parse_input_text",
           "read_input_file"]
