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


def test_make_test_instruments_every_module_but_the_hot_loops() -> None:
    """docs/testing.md: the first pass's ``--typeguard-packages`` (tests/typeguard_packages.py)
    covers every module of sarek_py except the left-out hot loops, and none of those."""
    import typeguard_packages as tp

    listed = tp.packages()
    for name in tp.modules():
        covered = any(name == p or name.startswith(p + ".") for p in listed)
        if not covered and not tp.left_out(name):
            # a package holding a left-out module: its __init__ defines no function
            path = tp.ROOT / name.replace(".", "/") / "__init__.py"
            assert path.exists() and "def " not in path.read_text(), name
            continue
        assert covered != tp.left_out(name), name
    assert any(m.startswith("sarek_py.ir.interp_") for m in tp.modules())
    assert "sarek_py.fusion" in listed and "sarek_py.ir.nodes" in listed
