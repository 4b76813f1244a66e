"""Launches the user can interrupt (specs/native.md, NAT-45).

A C function called through ctypes holds the main thread until it returns, so Python's
handler of Ctrl-C (``KeyboardInterrupt``) cannot run while a kernel that never ends is
running. A kernel with a ``while`` loop is therefore called on one worker thread while the
main thread waits in short, interruptible waits; on Ctrl-C it sets the library's
``sarek_cancel`` word, which every emitted ``while`` loop tests, waits for the kernel to
end and raises ``KeyboardInterrupt``. Kernels without ``while`` loops end by themselves
(their ``for`` loops have bounds fixed at entry) and are called directly: no cost on the
common path.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable
from typing import Any

_POOL: list[concurrent.futures.ThreadPoolExecutor] = []
_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    _POOL.clear()  # the worker thread does not survive a fork


os.register_at_fork(after_in_child=_after_fork_in_child)


def _worker() -> concurrent.futures.ThreadPoolExecutor:
    # one persistent thread: OpenMP keeps one pool of threads per calling thread
    with _LOCK:
        if not _POOL:
            _POOL.append(concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="sarek-c-launch"))
        return _POOL[0]


def call_interruptibly(call: Callable[[], None], cancel: Any) -> None:
    """Run ``call`` (a C launch whose ``while`` loops test ``cancel``); on Ctrl-C in the
    main thread, end it through ``cancel`` and raise ``KeyboardInterrupt`` once it has
    ended (the arrays it wrote in place may hold part of its results, as after a fault,
    LCH-20)."""
    cancel.value = 0
    if threading.current_thread() is not threading.main_thread():
        call()  # only the main thread receives Ctrl-C
        return
    future = _worker().submit(call)
    try:
        while True:
            try:
                future.result(timeout=0.05)
                return
            except concurrent.futures.TimeoutError:
                continue
    except KeyboardInterrupt:
        cancel.value = 1
        concurrent.futures.wait([future])
        cancel.value = 0
        raise
