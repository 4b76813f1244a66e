"""The variables a host statement sees (specs/host-program.md, HP-8): a procedure's own
variables, then the program's. The host interpreter (:mod:`sarek_py.host.interp`) makes the
frames; :mod:`sarek_py.host.residency` reads and writes host arrays through them.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from sarek_py.ir.host.program import HostError
from sarek_py.ir.nodes import Var

#: what a frame's dict gives for a variable it does not hold (a value may be ``None``)
_MISSING = object()


class Frame(MutableMapping[str, Any]):
    """The variables a statement sees, by :class:`Var` (and by name for launches):
    a procedure's own variables first, then the program's."""

    def __init__(self, own: dict[Var, Any], outer: Frame | None = None) -> None:
        self.own = own
        self.outer = outer

    def owner(self, v: Var) -> dict[Var, Any]:
        f: Frame | None = self
        while f is not None:
            if v in f.own:
                return f.own
            f = f.outer
        raise HostError(f"host variable '{v.name}' is not declared here")

    def get_var(self, v: Var) -> Any:
        f: Frame | None = self
        while f is not None:  # one look-up per frame (the host's most frequent call)
            x = f.own.get(v, _MISSING)
            if x is not _MISSING:
                return x
            f = f.outer
        raise HostError(f"host variable '{v.name}' is not declared here")

    def set_var(self, v: Var, value: Any) -> None:
        self.owner(v)[v] = value

    def _by_name(self, name: str) -> tuple[dict[Var, Any], Var]:
        f: Frame | None = self
        while f is not None:
            for v in reversed(f.own):  # a loop's variable, added last, hides the others
                if v.name == name:
                    return f.own, v
            f = f.outer
        raise KeyError(name)

    def __getitem__(self, name: str) -> Any:
        d, v = self._by_name(name)
        return d[v]

    def __setitem__(self, name: str, value: Any) -> None:
        d, v = self._by_name(name)
        d[v] = value

    def __delitem__(self, name: str) -> None:
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        names: list[str] = []
        f: Frame | None = self
        while f is not None:
            names += [v.name for v in f.own if v.name not in names]
            f = f.outer
        return iter(names)

    def __len__(self) -> int:
        return len(list(iter(self)))

    def own_vars(self) -> list[Var]:
        """Every variable visible here (a procedure's, then the program's)."""
        out: list[Var] = []
        f: Frame | None = self
        while f is not None:
            out += list(f.own)
            f = f.outer
        return out


__all__ = ["Frame"]
