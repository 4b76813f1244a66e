"""Runtimes behind one interface: ``interp``, ``opencl``, ``cuda``, ``c`` (specs/launch.md,
specs/native.md).

``get_backend(name)`` gives the (process-wide) backend of that name; ``"default"`` is cuda
where a GPU is usable, else the c backend for the kernels it runs with the next backend for
the others (:mod:`sarek_py.runtime.auto`, NAT-25), else opencl, else the interpreter
(LCH-15). A backend that cannot
run here raises :class:`~sarek_py.ir.diagnostics.BackendUnavailable` with one sentence
saying why.
"""

from __future__ import annotations

import threading

from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.runtime.base import (
    POISON_BYTE,
    Backend,
    DeviceBuffer,
    LaunchError,
    RunResult,
    TransferStats,
)

BACKENDS = ("cuda", "c", "opencl", "interp")
#: what ``"default"`` tries, in order (LCH-15, NAT-25); ``auto``: the c backend sending the
#: kernels it refuses to the next backend
DEFAULT_ORDER = ("cuda", "auto", "opencl", "interp")

_instances: dict[str, Backend] = {}
_LOCK = threading.RLock()
_unavailable: dict[str, BackendUnavailable] = {}


def _make(name: str) -> Backend:
    if name == "interp":
        from sarek_py.runtime.interp import InterpBackend

        return InterpBackend()
    if name == "opencl":
        from sarek_py.runtime.opencl import OpenCLBackend

        return OpenCLBackend()
    if name == "c":
        from sarek_py.runtime.native import CBackend

        return CBackend()
    if name == "auto":
        from sarek_py.runtime.auto import AutoCBackend

        return AutoCBackend()
    from sarek_py.runtime.cuda import CudaBackend

    return CudaBackend()


def get_backend(name: str = "default") -> Backend:
    """The backend called ``name`` (``cuda``, ``c``, ``opencl``, ``interp`` or
    ``default``)."""
    if name == "default":
        for n in DEFAULT_ORDER:
            try:
                return _get(n)
            except BackendUnavailable:
                continue
        raise AssertionError("the interpreter is always available")
    if name not in BACKENDS:
        raise LaunchError(f"unknown backend {name!r} (choose one of {', '.join(BACKENDS)})")
    return _get(name)


def _get(name: str) -> Backend:
    found = _instances.get(name)
    if found is not None:
        return found
    with _LOCK:  # one backend object per name, whichever thread asks first (LCH-15)
        if name in _unavailable:
            raise _unavailable[name]
        if name not in _instances:
            try:
                _instances[name] = _make(name)
            except BackendUnavailable as exc:
                _unavailable[name] = exc
                raise
        return _instances[name]


def available_backends() -> list[str]:
    """The names of the backends that can run here, in order of preference."""
    out = []
    for n in BACKENDS:
        try:
            get_backend(n)
        except BackendUnavailable:
            continue
        out.append(n)
    return out


__all__ = ["BACKENDS", "POISON_BYTE", "Backend", "BackendUnavailable", "DeviceBuffer",
           "LaunchError", "RunResult", "TransferStats", "available_backends", "get_backend"]
