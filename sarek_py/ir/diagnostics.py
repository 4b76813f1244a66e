"""Errors a user can cause, with a location and the source line under a caret.

Every error of sarek_py that a user can cause derives from :class:`SarekError`; the CLI
prints ``str(err)`` and exits 1 (never a traceback). Its text is
``file:line:col: error: message`` followed, when the source is known, by the line and a
caret under the column.
"""

from __future__ import annotations

from sarek_py.ir.nodes import Loc


class SarekError(Exception):
    """A located, user-facing error."""

    kind = "error"

    def __init__(self, message: str, loc: Loc | None = None, source: str | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.source = source

    def with_source(self, source: str) -> SarekError:
        """The same error, told the text of its file so that it can show the line."""
        if self.source is None:
            self.source = source
        return self

    def __str__(self) -> str:
        head = f"{self.kind}: {self.message}"
        if self.loc is None:
            return head
        text = f"{self.loc}: {head}"
        if self.source is not None:
            lines = self.source.splitlines()
            if 1 <= self.loc.line <= len(lines):
                line = lines[self.loc.line - 1].expandtabs(1)
                text += f"\n{line}\n{' ' * max(self.loc.col - 1, 0)}^"
        return text


class ParseError(SarekError):
    """Text that is not a ``.sk`` program."""


class CheckError(SarekError):
    """An ill-formed program: types, scopes, mutability, ranks, barriers, purity."""


class InterpError(SarekError):
    """A run-time error found by the reference interpreter (out of bounds, race, …)."""


class LaunchError(SarekError):
    """A launch the runtime cannot make: missing or ill-typed arguments, a bad block size …"""


class BackendUnavailable(SarekError):
    """A backend that cannot run here, with one sentence saying why."""


class SarekWarning(SarekError):
    """Not an error: something the user should know before a run that may not come back
    (printed, never raised; INT-29 on a device backend)."""

    kind = "warning"
