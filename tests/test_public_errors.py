"""The errors a user may catch are ``sarek_py``'s own names (specs/frontend.md FE-95)."""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

import sarek_py

#: the modules of issue 14's features (device arrays, interop, temporaries, replay) and
#: the runtime errors every launch may raise
MODULES = ("sarek_py.frontend.replay", "sarek_py.frontend.temporaries",
           "sarek_py.runtime.arrays", "sarek_py.runtime.interop", "sarek_py.ir.diagnostics")


@pytest.mark.parametrize("module", MODULES)
def test_fe95_every_public_error_is_exported_at_the_top(module: str) -> None:
    mod = importlib.import_module(module)
    errors = [c for _, c in inspect.getmembers(mod, inspect.isclass)
              if issubclass(c, sarek_py.SarekError) and c.__module__ == module
              and not c.__name__.startswith("_")]
    if module == "sarek_py.ir.diagnostics":  # the user-facing ones of a launch and a run
        errors = [c for c in errors if c.__name__ in ("LaunchError", "InterpError")]
    assert errors
    for c in errors:
        assert getattr(sarek_py, c.__name__, None) is c, c.__name__
        assert c.__name__ in sarek_py.__all__
        assert c.__name__ in (sarek_py.__doc__ or ""), f"{c.__name__} is not documented"


def test_fe95_a_replay_error_is_caught_by_its_top_level_name() -> None:
    p = sarek_py.pipeline("interp")
    with pytest.raises(sarek_py.ReplayError, match="no completed run"):
        p.replay()


def test_fe95_a_dead_temporary_error_is_caught_by_its_top_level_name() -> None:
    from test_dead_stores import relu, scale

    n = 16
    x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
    with sarek_py.pipeline("interp") as p:
        t = p.empty_like(x)
        scale[n, 16](x, t, 2.0, n)
        relu[n, 16](t, y, n)
    with pytest.raises(sarek_py.DeadTemporaryError):
        np.asarray(t)
