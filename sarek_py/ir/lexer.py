"""The tokens of the ``.sk`` text form (specs/text-format.md, TXT-1..TXT-4).

A hand-written scanner: it turns text into :class:`Token` s with 1-based line and column,
skips blanks and comments (``// …`` to the end of the line, ``(* … *)`` nested), and
reports anything it cannot read as a located :class:`ParseError`.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import attrs
import numpy as np

from sarek_py.ir.diagnostics import ParseError
from sarek_py.ir.nodes import Loc

#: words that cannot name a variable or a function (TXT-2)
KEYWORDS = frozenset({
    "let", "mut", "in", "if", "then", "else", "for", "to", "downto", "do", "done", "while",
    "return", "barrier", "stop", "pragma", "break", "continue", "fun", "pure", "kernel", "shared", "local", "var",
    "true", "false", "length", "nan", "inf", "nanf", "inff",
    "i32", "i64", "f32", "f64", "bool", "unit",
})

#: punctuation and operators, longest first so that ``<=`` wins over ``<`` (TXT-1)
PUNCTUATION = (
    ":=", "<-", "<=", ">=", "==", "!=", "&&", "||", "<<", ">>",
    "(", ")", "[", "]", ",", ";", ":", "=", "?", "+", "-", "*", "/", "%", "<", ">",
    "!", "~", "&", "|", "^",
)

#: token kinds that carry a value (every other kind is the token's own text)
NAME, INT, INT64, FLOAT, FLOAT32, STRING, EOF = (
    "name", "int", "int64", "float", "float32", "string", "eof",
)

_SPECIAL_FLOATS = {"nan": (FLOAT, math.nan), "inf": (FLOAT, math.inf),
                   "nanf": (FLOAT32, math.nan), "inff": (FLOAT32, math.inf)}


@attrs.frozen
class Token:
    """A token: ``kind`` (a kind constant above, or the keyword/punctuation itself),
    its source ``text``, its ``value`` (number or decoded string), and where it starts
    and ends (``end_line``/``end_col`` point just after its last character)."""

    kind: str
    text: str
    value: int | float | str | None
    line: int
    col: int
    end_line: int
    end_col: int

    def loc(self, file: str) -> Loc:
        return Loc(file, self.line, self.col)

    def describe(self) -> str:
        """How an error message names this token: ``'x'``, ``end of file``."""
        if self.kind == EOF:
            return "end of file"
        if self.kind == STRING:
            return f"string {self.text}"
        return f"'{self.text}'"


#: decimal digits kept when rounding a literal: more than any float32 or float64 halfway
#: point needs (767), the rest folded into one sticky digit (TXT-33)
_KEPT_DIGITS = 800
#: a decimal literal whose leading digit is past 10**_HUGE_EXP overflows both float types;
#: one below 10**-_TINY_EXP rounds to zero in both (TXT-33)
_HUGE_EXP = 310
_TINY_EXP = 330
#: the punctuation that starts with each character, longest first (as PUNCTUATION)
_PUNCT_BY_FIRST: dict[str, tuple[str, ...]] = {
    c: tuple(p for p in PUNCTUATION if p[0] == c) for c in {p[0] for p in PUNCTUATION}}
_BLANKS = re.compile(r"[ \t\r\n\f\v]+")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIGITS = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"(\d*)(?:\.(\d*))?(?:[eE]([+-]?)(\d+))?")


def bounded_decimal(text: str) -> Fraction | float:
    """The value of the decimal literal ``text`` (digits, an optional fraction and
    exponent, no sign) as an exact :class:`Fraction`, in time bounded by the length of
    ``text`` whatever its exponent (TXT-33).

    Digits past the 800th significant one are folded into a sticky digit (which changes
    no float32/float64 rounding); a value too large for any float type is ``math.inf``,
    one too small to round to anything but zero is ``0.0``. ``inf`` and ``nan`` give
    themselves. Raises ``ValueError`` for text that is not a decimal number.
    """
    if text in ("inf", "nan"):
        return math.inf if text == "inf" else math.nan
    m = _DECIMAL.fullmatch(text)
    if m is None or not (m.group(1) or m.group(2)):
        raise ValueError(f"not a decimal number: {text!r}")
    whole, frac = m.group(1), m.group(2) or ""
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    exp_digits = (m.group(4) or "0").lstrip("0") or "0"
    negative_exp = m.group(3) == "-"
    if len(exp_digits) > 9:  # |exponent| >= 10**9: far outside every float range
        return 0.0 if negative_exp else math.inf
    exp = (-1 if negative_exp else 1) * int(exp_digits) - len(frac)
    lead = exp + len(digits) - 1  # the power of ten of the leading digit
    if lead > _HUGE_EXP:
        return math.inf
    if lead < -_TINY_EXP:
        return 0.0
    if len(digits) > _KEPT_DIGITS:
        rest = digits[_KEPT_DIGITS:]
        exp += len(rest)
        digits = digits[:_KEPT_DIGITS]
        if rest.strip("0"):
            digits += "1"
            exp -= 1
    value = Fraction(int(digits))
    scale = Fraction(10) ** exp
    return value * scale


def f32_from_decimal(text: str) -> float:
    """The float32 nearest to the decimal ``text`` (ties to even), as a Python float.

    Converts exactly (no double rounding through float64), so that the shortest
    float32 spelling printed by the printer always reads back as the same value (TXT-4),
    in time bounded by the length of ``text`` (TXT-33). ``inf`` and ``nan`` give
    themselves.
    """
    exact = bounded_decimal(text)
    if isinstance(exact, float):
        return exact
    f32max = Fraction(np.finfo(np.float32).max.item())
    if exact >= f32max + Fraction(2) ** (127 - 24):
        return math.inf
    with np.errstate(over="ignore"):
        approx = np.float32(float(exact))
    if not np.isfinite(approx):
        approx = np.float32(np.finfo(np.float32).max)
    best = approx
    best_err = abs(Fraction(approx.item()) - exact)
    with np.errstate(over="ignore"):
        neighbours = (np.nextafter(approx, np.float32(np.inf)),
                      np.nextafter(approx, np.float32(-np.inf)))
    for cand in neighbours:
        if not np.isfinite(cand):
            continue
        err = abs(Fraction(cand.item()) - exact)
        even = int(cand.view(np.uint32)) % 2 == 0
        if err < best_err or (err == best_err and even):
            best, best_err = cand, err
    return float(best.item())


#: an integer literal with more significant digits than this is out of every integer
#: type's range; its value is kept as :data:`HUGE_INT` (TXT-33)
_INT_DIGITS = 40
HUGE_INT = 10 ** _INT_DIGITS


def bounded_int(digits: str) -> int:
    """The value of a string of decimal digits, or :data:`HUGE_INT` when it has more than
    40 significant digits (past Python's int-string limit it could not be converted at
    all; it fits no integer type either way)."""
    stripped = digits.lstrip("0")
    return HUGE_INT if len(stripped) > _INT_DIGITS else int(stripped or "0")


class Lexer:
    """Scans ``text`` into tokens; :meth:`tokens` returns them all, ending with EOF."""

    def __init__(self, text: str, filename: str = "<string>"):
        self.text = text
        self.filename = filename
        self.pos = 0
        self.line = 1
        self.col = 1

    # -- errors ---------------------------------------------------------------------
    def error(self, message: str, line: int, col: int) -> ParseError:
        return ParseError(message, Loc(self.filename, line, col), self.text)

    # -- character movement ------------------------------------------------------------
    def _peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.text[i] if i < len(self.text) else ""

    def _advance(self, n: int = 1) -> None:
        """Move ``n`` characters on, counting lines and columns (in bulk: a long input is
        read in time linear in its size with a small constant, CLI-16)."""
        chunk = self.text[self.pos:self.pos + n]
        self.pos += len(chunk)
        newlines = chunk.count("\n")
        if newlines:
            self.line += newlines
            self.col = len(chunk) - chunk.rfind("\n")
        else:
            self.col += len(chunk)

    # -- skipping ---------------------------------------------------------------------
    def _skip_blanks_and_comments(self) -> None:
        while self.pos < len(self.text):
            ch = self._peek()
            if ch in " \t\r\n\f\v":
                m = _BLANKS.match(self.text, self.pos)
                assert m is not None
                self._advance(m.end() - self.pos)
            elif ch == "/" and self._peek(1) == "/":
                end = self.text.find("\n", self.pos)
                self._advance((len(self.text) if end < 0 else end) - self.pos)
            elif ch == "(" and self._peek(1) == "*":
                self._skip_block_comment()
            else:
                return

    def _skip_block_comment(self) -> None:
        starts = [(self.line, self.col)]
        self._advance(2)
        while starts:
            if self.pos >= len(self.text):
                line, col = starts[-1]
                raise self.error("unterminated comment: '(*' has no matching '*)'", line, col)
            if self._peek() == "(" and self._peek(1) == "*":
                starts.append((self.line, self.col))
                self._advance(2)
            elif self._peek() == "*" and self._peek(1) == ")":
                starts.pop()
                self._advance(2)
            else:
                self._advance()

    # -- tokens -----------------------------------------------------------------------
    def tokens(self) -> list[Token]:
        out: list[Token] = []
        while True:
            self._skip_blanks_and_comments()
            if self.pos >= len(self.text):
                break
            out.append(self._token())
        # the end of file sits just after the last token, so that an error there shows
        # the last line of the file under a caret
        if out:
            line, col = out[-1].end_line, out[-1].end_col
        else:
            line, col = 1, 1
        out.append(Token(EOF, "", None, line, col, line, col))
        return out

    def _make(self, kind: str, start: int, line: int, col: int,
              value: int | float | str | None) -> Token:
        return Token(kind, self.text[start:self.pos], value, line, col, self.line, self.col)

    def _token(self) -> Token:
        ch = self._peek()
        line, col, start = self.line, self.col, self.pos
        if ch.isascii() and (ch.isalpha() or ch == "_"):
            m = _WORD.match(self.text, self.pos)
            assert m is not None
            self._advance(m.end() - self.pos)
            word = self.text[start:self.pos]
            if word in _SPECIAL_FLOATS:
                kind, fval = _SPECIAL_FLOATS[word]
                return self._make(kind, start, line, col, fval)
            return self._make(word if word in KEYWORDS else NAME, start, line, col, word)
        if ch.isascii() and ch.isdigit():
            return self._number(line, col, start)
        if ch == '"':
            return self._string(line, col, start)
        for p in _PUNCT_BY_FIRST.get(ch, ()):
            if self.text.startswith(p, self.pos):
                self._advance(len(p))
                return self._make(p, start, line, col, None)
        if "\udc80" <= ch <= "\udcff":
            # a byte that was not UTF-8, decoded with surrogateescape
            raise self.error(f"invalid UTF-8 byte 0x{ord(ch) - 0xDC00:02x}", line, col)
        if ch.isprintable():
            raise self.error(f"unexpected character '{ch}'", line, col)
        raise self.error(f"unexpected character U+{ord(ch):04X}", line, col)

    def _digits(self) -> None:
        m = _DIGITS.match(self.text, self.pos)
        if m is not None:
            self._advance(m.end() - self.pos)

    def _number(self, line: int, col: int, start: int) -> Token:
        self._digits()
        is_float = False
        if self._peek() == "." and self._peek(1).isascii() and self._peek(1).isdigit():
            is_float = True
            self._advance()
            self._digits()
        if self._peek() in ("e", "E"):
            k = 1
            if self._peek(1) in ("+", "-"):
                k = 2
            if self._peek(k).isascii() and self._peek(k).isdigit():
                is_float = True
                self._advance(k)
                self._digits()
        body = self.text[start:self.pos]
        kind = FLOAT if is_float else INT
        if not is_float and self._peek() == "L":
            kind = INT64
            self._advance()
        elif is_float and self._peek() == "f":
            kind = FLOAT32
            self._advance()
        if _continues_number(self._peek()):
            while _continues_number(self._peek()):
                self._advance()
            bad = self.text[start:self.pos]
            hint = ""
            if not is_float and bad == body + "f":
                hint = f" (an f32 literal has a point: {body}.0f)"
            raise self.error(f"malformed number '{short(bad)}'{hint}", line, col)
        value: int | float
        if kind in (INT, INT64):
            value = bounded_int(body)  # the parser checks the range, after a leading minus
        else:
            value = f32_from_decimal(body) if kind == FLOAT32 else _f64(body)
            if math.isinf(value):
                kind_name = "f32" if kind == FLOAT32 else "f64"
                raise self.error(f"float literal {short(self.text[start:self.pos])} overflows "
                                 f"{kind_name} (write inf{'f' if kind == FLOAT32 else ''})",
                                 line, col)
        return self._make(kind, start, line, col, value)

    def _string(self, line: int, col: int, start: int) -> Token:
        self._advance()
        chars: list[str] = []
        escapes = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
        while True:
            ch = self._peek()
            if ch == "" or ch == "\n":
                raise self.error("unterminated string literal", line, col)
            if ch == '"':
                self._advance()
                break
            if ch == "\\":
                esc = self._peek(1)
                if esc in escapes and esc != "":
                    chars.append(escapes[esc])
                    self._advance(2)
                    continue
                hexdigits = self.text[self.pos + 2:self.pos + 4]
                if esc == "x" and len(hexdigits) == 2 and all(
                        c in "0123456789abcdefABCDEF" for c in hexdigits):
                    chars.append(chr(int(hexdigits, 16)))
                    self._advance(4)
                    continue
                raise self.error(f"unknown escape '\\{esc}' in string", self.line, self.col)
            if "\udc80" <= ch <= "\udcff":
                raise self.error(f"invalid UTF-8 byte 0x{ord(ch) - 0xDC00:02x}",
                                 self.line, self.col)
            chars.append(ch)
            self._advance()
        return self._make(STRING, start, line, col, "".join(chars))


def short(text: str, keep: int = 40) -> str:
    """``text`` as an error message quotes it: whole, or its ends and its length when it
    is longer than ``keep`` characters (a 5000-digit literal, TXT-33)."""
    if len(text) <= keep:
        return text
    return f"{text[:keep // 2]}…{text[-10:]} ({len(text)} characters)"


def _f64(text: str) -> float:
    """The float64 nearest to the decimal ``text``, in bounded time (TXT-33): Python's
    own correctly rounded conversion, which has neither a digit limit nor a slow path."""
    return float(text)


def _continues_number(ch: str) -> bool:
    """A character that may not directly follow a number (``12ab``, ``1.``, ``1e``)."""
    return ch != "" and ch.isascii() and (ch.isalnum() or ch in "_.")


def tokenize(text: str, filename: str = "<string>") -> list[Token]:
    """All tokens of ``text``, the last one EOF."""
    return Lexer(text, filename).tokens()


def decode_source(data: bytes, filename: str) -> str:
    """``data`` decoded as UTF-8, strictly; a bad byte is a ParseError located at it."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        prefix = data[:exc.start]
        line = prefix.count(b"\n") + 1
        line_start = prefix.rfind(b"\n") + 1
        col = len(prefix[line_start:].decode("utf-8", errors="replace")) + 1
        shown = data.decode("utf-8", errors="replace")
        raise ParseError(f"invalid UTF-8 byte 0x{data[exc.start]:02x}",
                         Loc(filename, line, col), shown) from None
