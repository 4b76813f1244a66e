"""A lossless S-expression dump of the IR, in the style of seed 001 (TXT-23, TXT-24).

``to_sexp`` writes every field of every node (locations excepted), variables with their
ids, in the notation of the seed's ASR documents::

    (Kernel
      :name "saxpy"
      :params [
        (Var :name "x" :id 3 :type (ArrayType :elem :f32 :space :global :lower [0] :shape [nil]) :mutable false)
        …
      ]
      :body (Let …)
    )

``from_sexp`` reads it back to an equal tree (ids included), so the dump loses nothing.
The dump is generic over the ``attrs`` fields of the node classes: a new node kind needs
no change here beyond being listed in ``NODE_CLASSES``.
"""

from __future__ import annotations

import enum
import json
import math
import types
import typing
from typing import Any

import attrs

from sarek_py.ir import nodes
from sarek_py.ir.diagnostics import ParseError
from sarek_py.ir.nodes import AtomicOp, BinaryOp, Loc, UnaryOp, Var, reserve_ids
from sarek_py.ir.requires import FusionRequires, FusionStep, ThreadStep
from sarek_py.ir.types import ArrayType, MemSpace, Scalar

#: the classes a dump may name, by name
NODE_CLASSES: dict[str, type] = {
    c.__name__: c
    for c in (*nodes.EXPR_TYPES, *nodes.STMT_TYPES, nodes.HelperFunc, nodes.Kernel,
              nodes.Module, Var, ArrayType, FusionRequires, FusionStep, ThreadStep)
}


def _enum_word(m: enum.Enum) -> str:
    return m.name if isinstance(m, (UnaryOp, BinaryOp)) else str(m.value)


#: enum members by the keyword that spells them (``:f32``, ``:shared``, ``:ADD``)
ENUM_WORDS: dict[str, enum.Enum] = {}
for _cls in (Scalar, MemSpace, UnaryOp, BinaryOp, AtomicOp):
    for _m in _cls:
        assert _enum_word(_m) not in ENUM_WORDS, _m
        ENUM_WORDS[_enum_word(_m)] = _m

WIDTH = 100


def register(classes: tuple[type, ...] = (), enums: tuple[type[enum.Enum], ...] = ()) -> None:
    """Let dumps name more ``attrs`` node classes and enum members (the host-program IR of
    :mod:`sarek_py.ir.host.sexp` registers its own, TXT-26); an enum word already taken by another
    member is an error."""
    for c in classes:
        if NODE_CLASSES.get(c.__name__, c) is not c:
            raise ValueError(f"node name {c.__name__!r} of {c!r} is taken by "
                             f"{NODE_CLASSES[c.__name__]!r}")
        NODE_CLASSES[c.__name__] = c
    for cls in enums:
        for m in cls:
            word = _enum_word(m)
            if ENUM_WORDS.get(word, m) is not m:
                raise ValueError(f"enum word ':{word}' of {m!r} is taken by "
                                 f"{ENUM_WORDS[word]!r}")
            ENUM_WORDS[word] = m


def _fields(x: Any) -> list[tuple[str, Any]]:
    """The fields a dump writes: all but the location, and but a keyword-only field at
    its default (``Kernel.requires`` of a kernel that is not fused, ``Kernel.ranges`` of
    one without launch conditions over its arguments), which reads back as that
    default."""
    return [(f.name, getattr(x, f.name)) for f in attrs.fields(type(x)) if f.name != "loc"
            and not (f.kw_only and _at_default(getattr(x, f.name), f.default))]


def _at_default(value: Any, default: Any) -> bool:
    return (value is None and default is None) or (value == () and default == ())


def _atom(x: Any) -> str | None:
    """The text of a value that is not a node or a list, else None."""
    if x is None:
        return "nil"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, enum.Enum):
        return ":" + _enum_word(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    if isinstance(x, str):
        return json.dumps(x, ensure_ascii=False)
    return None


class _Writer:
    """Renders one dump in time linear in its output: whether a subtree fits on one line
    is decided by a length count that stops at the line width (memoised by identity),
    and subtrees indented past :data:`INDENT_CAP` are written on one line, so that a
    deeply nested tree (TXT-32) does not give an output quadratic in its depth."""

    def __init__(self) -> None:
        self.lengths: dict[int, int] = {}
        self.keep: list[Any] = []  # keeps the measured objects (and so their ids) alive

    def _items(self, x: Any) -> list[Any] | None:
        if isinstance(x, frozenset):
            return sorted(x, key=self.flat)
        if isinstance(x, tuple):
            return list(x)
        return None

    def flat_into(self, x: Any, out: list[str]) -> None:
        a = _atom(x)
        if a is not None:
            out.append(a)
            return
        items = self._items(x)
        if items is not None:
            out.append("[")
            for i, y in enumerate(items):
                if i:
                    out.append(" ")
                self.flat_into(y, out)
            out.append("]")
        elif type(x).__name__ in NODE_CLASSES:
            out.append(f"({type(x).__name__}")
            for n, v in _fields(x):
                out.append(f" :{n} ")
                self.flat_into(v, out)
            out.append(")")
        else:
            raise TypeError(f"cannot dump {x!r}")

    def flat(self, x: Any) -> str:
        out: list[str] = []
        self.flat_into(x, out)
        return "".join(out)

    def length(self, x: Any, limit: int) -> int:
        """The length of ``x`` on one line, or some number above ``limit`` if longer."""
        a = _atom(x)
        if a is not None:
            return len(a)
        key = id(x)
        known = self.lengths.get(key)  # an exact length, or -(L + 1): longer than L
        if known is not None:
            if known >= 0:
                return known
            if -known - 1 >= limit:
                return limit + 1
        if isinstance(x, frozenset | tuple):
            total = 1 + max(len(x) - 1, 0) + 1
            for y in x:
                if total > limit:
                    break
                total += self.length(y, limit - total)
        elif type(x).__name__ in NODE_CLASSES:
            total = 2 + len(type(x).__name__)
            for n, v in _fields(x):
                if total > limit:
                    break
                total += 3 + len(n) + self.length(v, limit - total)
        else:
            raise TypeError(f"cannot dump {x!r}")
        self.lengths[key] = -(limit + 1) if total > limit else total
        self.keep.append(x)
        return total

    def render(self, x: Any, ind: int) -> str:
        if _atom(x) is not None or ind > INDENT_CAP or self.length(x, WIDTH - ind) <= WIDTH - ind:
            return self.flat(x)
        pad = " " * (ind + 2)
        items = self._items(x)
        if items is not None:
            body = "".join(f"{pad}{self.render(y, ind + 2)}\n" for y in items)
            return "[\n" + body + " " * ind + "]"
        lines = [f"({type(x).__name__}"]
        for n, v in _fields(x):
            lines.append(f"{pad}:{n} {self.render(v, ind + 2)}")
        return "\n".join(lines) + "\n" + " " * ind + ")"


#: past this indentation a subtree is written on one line (linear output, TXT-32)
INDENT_CAP = 160


def to_sexp(node: Any) -> str:
    """The S-expression dump of a node (module, kernel, helper, statement, expression,
    variable or type), indented, one field a line where it does not fit on one."""
    return _Writer().render(node, 0)


# -------------------------------------------------------------------------------- reading


class _Reader:
    def __init__(self, text: str, filename: str):
        self.text, self.filename = text, filename
        self.pos, self.line, self.col = 0, 1, 1
        self.max_id = 0

    def error(self, msg: str, line: int | None = None, col: int | None = None) -> ParseError:
        return ParseError(msg, Loc(self.filename, line or self.line, col or self.col), self.text)

    def _skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self._step(1)

    def _step(self, n: int) -> None:
        for ch in self.text[self.pos:self.pos + n]:
            if ch == "\n":
                self.line, self.col = self.line + 1, 1
            else:
                self.col += 1
        self.pos += n

    def _word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in " \t\r\n()[]\"":
            self._step(1)
        return self.text[start:self.pos]

    def value(self) -> Any:
        self._skip()
        if self.pos >= len(self.text):
            raise self.error("unexpected end of S-expression")
        ch = self.text[self.pos]
        line, col = self.line, self.col
        if ch == "(":
            self._step(1)
            return self.node(line, col)
        if ch == "[":
            self._step(1)
            items: list[Any] = []
            while True:
                self._skip()
                if self.text.startswith("]", self.pos):
                    self._step(1)
                    return tuple(items)
                items.append(self.value())
        if ch == '"':
            decoder = json.JSONDecoder()
            try:
                s, end = decoder.raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                raise self.error("bad string literal") from None
            self._step(end - self.pos)
            return s
        word = self._word()
        if not word:
            raise self.error(f"unexpected '{ch}'")
        return self.atom(word, line, col)

    def atom(self, word: str, line: int, col: int) -> Any:
        fixed = {"nil": None, "true": True, "false": False, "nan": math.nan,
                 "inf": math.inf, "-inf": -math.inf}
        if word in fixed:
            return fixed[word]
        if word.startswith(":"):
            if word[1:] in ENUM_WORDS:
                return ENUM_WORDS[word[1:]]
            raise self.error(f"unknown keyword '{word}'", line, col)
        try:
            if any(c in word for c in ".eE"):
                return float(word)
            return int(word)
        except ValueError:
            raise self.error(f"unknown atom '{word}'", line, col) from None

    def node(self, line: int, col: int) -> Any:
        name = self._word()
        if name not in NODE_CLASSES:
            raise self.error(f"unknown node '{name}'", line, col)
        cls = NODE_CLASSES[name]
        kwargs: dict[str, Any] = {}
        where: dict[str, tuple[int, int]] = {}
        while True:
            self._skip()
            if self.text.startswith(")", self.pos):
                self._step(1)
                break
            fline, fcol = self.line, self.col
            key = self._word()
            if not key.startswith(":") or len(key) < 2:
                raise self.error(f"expected ':field' or ')' in {name}, found '{key}'",
                                 fline, fcol)
            kwargs[key[1:]] = self.value()
            where[key[1:]] = (fline, fcol)
        hints = _hints(cls)
        for f in attrs.fields(cls):  # a set field reads its list back as a set
            if isinstance(f.default, frozenset) and isinstance(kwargs.get(f.name), tuple):
                kwargs[f.name] = frozenset(kwargs[f.name])
        for key, value in kwargs.items():  # TXT-25: a field of the wrong kind is an error
            hint = hints.get(key)
            if hint is not None and not _conforms(value, hint):
                raise self.error(f"bad {name}: field '{key}' cannot be {_describe(value)}",
                                 *where[key])
        try:
            obj = cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise self.error(f"bad {name}: {exc}", line, col) from None
        if isinstance(obj, Var):
            self.max_id = max(self.max_id, obj.id)
        return obj


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The resolved field annotations of a node class."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a value read from a dump has the kind its field is annotated with (node
    classes, enums, scalars, tuples, sets, optional and union types)."""
    if hint is Any:
        return True
    if hint is type(None) or hint is None:
        return value is None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_conforms(value, a) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return len(args) == len(value) and all(
            _conforms(v, a) for v, a in zip(value, args, strict=True))
    if origin is frozenset:
        return isinstance(value, frozenset) and all(_conforms(v, args[0]) for v in value)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _describe(value: Any) -> str:
    if isinstance(value, tuple):
        return "a list"
    if type(value).__name__ in NODE_CLASSES:
        return f"a {type(value).__name__}"
    return _atom(value) or type(value).__name__


def from_sexp(text: str, filename: str = "<sexp>") -> Any:
    """The node a :func:`to_sexp` dump describes (ids as written; later fresh ids are
    above them). A text that is not a dump, or a field of the wrong kind, is a located
    ``ParseError``."""
    r = _Reader(text, filename)
    try:
        node = r.value()
    except RecursionError:
        raise r.error("the S-expression is nested too deeply") from None
    r._skip()
    if r.pos != len(text):
        raise r.error("unexpected text after the S-expression")
    reserve_ids(r.max_id)
    return node
