"""FE-100: a kernel or helper first used from several threads at once is translated once,
and a helper being translated by one thread is not taken for a recursive one by another."""

from __future__ import annotations

import importlib
import threading
import time
from typing import Any

import numpy as np
import pytest

from sarek_py.frontend import Vec, f64, global_thread_id, helper, i32, kernel
from sarek_py.ir.diagnostics import SarekError

kernel_module = importlib.import_module("sarek_py.frontend.kernel")


def _slow_counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """Make ``kernel_module.<name>`` slow (so that threads overlap) and count its calls."""
    real = getattr(kernel_module, name)
    calls: list[str] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        calls.append(threading.current_thread().name)
        time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(kernel_module, name, slow)
    return calls


def _in_threads(fn: Any, n: int = 8) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def work() -> None:
        start.wait()
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_fe100_a_kernel_first_used_by_eight_threads_is_translated_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _slow_counting(monkeypatch, "translate_kernel")

    @kernel
    def twice(x: Vec[f64], y: Vec[f64], n: i32) -> None:
        i = global_thread_id()
        if i < n:
            y[i] = x[i] * 2.0

    irs: list[object] = []
    assert _in_threads(lambda: irs.append(twice.ir)) == []
    assert len(calls) == 1
    assert all(ir is irs[0] for ir in irs)


def test_fe100_a_helper_translated_by_another_thread_is_not_recursion(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _slow_counting(monkeypatch, "translate_helper")

    @helper
    def half(v: f64) -> f64:
        return v * 0.5

    @kernel
    def halve(x: Vec[f64], y: Vec[f64], n: i32) -> None:
        i = global_thread_id()
        if i < n:
            y[i] = half(x[i])

    assert _in_threads(half.helper_ir) == []
    assert len(calls) == 1
    x = np.arange(16, dtype=np.float64)
    y = np.zeros_like(x)
    halve.launch(x, y, 16, threads=16, block=16, backend="interp")
    assert np.array_equal(y, x * 0.5)


def test_fe100_recursion_is_still_refused() -> None:
    @helper
    def loop(v: f64) -> f64:
        return loop(v)

    @kernel
    def calls_loop(x: Vec[f64]) -> None:
        x[0] = loop(x[0])

    with pytest.raises(SarekError, match="calls itself"):
        _ = calls_loop.ir
