"""The loaded library of a kernel's C, checked before it is trusted (specs/native.md,
NAT-14, NAT-41).

:func:`kernel_function` finds the library of a source in the disk cache of
:mod:`sarek_py.runtime.ccompiler` (or compiles it), loads it once per process and returns
the kernel's exported function. A cached file that does not load (a truncated file) or
that loads but lacks the function or the symbol naming its cache key (the library of
another source put in its place: another kernel's, or the other build of this one) is
removed, unloaded and compiled again from the source in memory, once; a second failure is a
:class:`LaunchError`.

OpenMP's thread pool does not survive ``fork``: a child forked after the parent launched
on ``c`` (multiprocessing's default on Linux) would wait for ever for pool threads that are
not there. The child's forking thread is set to one OpenMP thread, so its launches run
serially (NAT-44); other threads of the child, and children started with 'spawn', make
pools of their own.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

from sarek_py.ir.diagnostics import LaunchError
from sarek_py.runtime.cache import LruCache
from sarek_py.runtime.ccompiler import cached, forget, library, marker_name

#: loaded libraries by path, for the whole process
_LIBS: LruCache[str, Any] = LruCache()
#: ``omp_set_num_threads`` of the OpenMP runtime the loaded libraries use (NAT-44)
_OMP_THREADS: list[Any] = []


def _after_fork_in_child() -> None:
    """NAT-44: the forking thread's OpenMP pool is gone in the child: one thread."""
    for set_threads in _OMP_THREADS:
        set_threads(1)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _load(path: str, symbol: str) -> tuple[Any, Any] | None:
    """The library at ``path`` and its function ``symbol``, or None (and nothing left
    loaded) when the file does not load or lacks it."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    try:
        getattr(lib, marker_name(Path(path).stem))  # its source's library (NAT-41)
        return lib, getattr(lib, symbol)
    except AttributeError:
        # not the library of this source: unloaded, so that the path loads anew
        import _ctypes

        _ctypes.dlclose(lib._handle)
        return None


def cancel_flag(source: str) -> Any:
    """The ``sarek_cancel`` word of the (loaded) library of ``source``, as a ctypes int
    (NAT-45)."""
    lib = _LIBS.get(str(library(source)))
    if lib is None:
        raise LaunchError("the library of this C is not loaded (load its kernel first)")
    return ctypes.c_int.in_dll(lib, "sarek_cancel")


def kernel_function(source: str, symbol: str) -> tuple[Any, bool]:
    """The function ``symbol`` of the library of ``source`` and whether this call loaded
    the library (False: it was loaded already in this process)."""
    with cached(source) as held:  # NAT-71: one thread of one process at a time
        path = str(held)
        lib = _LIBS.get(path)
        if lib is not None:
            return getattr(lib, symbol), False
        found = _load(path, symbol)
        if found is None:  # a damaged or foreign cached file (NAT-14, NAT-41)
            forget(held)
        else:
            _LIBS.put(path, found[0])
    if found is None:  # built again, once
        with cached(source) as held:
            path = str(held)
            found = _load(path, symbol)
            if found is not None:
                _LIBS.put(path, found[0])
        if found is None:
            raise LaunchError(f"the library {path} compiled from the C of kernel {symbol} "
                              f"does not load or lacks its function {symbol}")
    if not _OMP_THREADS:
        _OMP_THREADS.append(found[0].omp_set_num_threads)
    return found[1], True
