"""The test suite's fast union check (tests/conftest.py ``_fast_unions``, docs/testing.md):
it must accept exactly what typeguard's own check accepts and refuse the rest."""

from __future__ import annotations

from typing import Optional, Union

import pytest
from typeguard import TypeCheckError, check_type

from sarek_py.ir.nodes import Const, Expr, Stmt
from sarek_py.ir.types import Scalar


def test_an_ir_node_passes_and_a_stranger_is_refused() -> None:
    check_type(Const(1.0, Scalar.F64), Expr)
    with pytest.raises(TypeCheckError, match="did not match any element in the union"):
        check_type("x", Expr)
    with pytest.raises(TypeCheckError):
        check_type(Const(1.0, Scalar.F64), Stmt)


@pytest.mark.parametrize("value, hint, ok", [
    (1, int | None, True),
    (None, int | None, True),
    ("1", int | None, False),
    (True, float | None, True),          # typeguard's numeric tower: bool is an int
    (1, Optional[float], True),  # noqa: UP045 (typing.Union, not X | Y)
    (["a"], int | list[str], True),
    ([1], int | list[str], False),       # the generic member is still checked
    ({"a": 1}, Union[int, dict[str, str]], False),  # noqa: UP007
    (b"x", Union[str, bytes], True),  # noqa: UP007
])
def test_members_that_are_not_plain_classes_keep_typeguards_check(
        value: object, hint: object, ok: bool) -> None:
    if ok:
        check_type(value, hint)
    else:
        with pytest.raises(TypeCheckError):
            check_type(value, hint)


def test_the_fast_check_is_installed() -> None:
    from types import UnionType

    from typeguard import _checkers

    for origin in (Union, UnionType):
        assert _checkers.origin_type_checkers[origin].__qualname__ == "_fast_unions.<locals>.check"
