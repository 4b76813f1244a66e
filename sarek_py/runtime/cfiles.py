"""The files of the c backend's disk cache: one key held at a time across threads and
processes, and the cache's bound (specs/native.md, NAT-71, NAT-75).

A library's key (:func:`~sarek_py.runtime.ccompiler.cache_key`) is held, while it is looked
up, compiled or loaded, by one thread of one process: a per-key lock among this process's
threads (:class:`~sarek_py.runtime.once.KeyedLocks`) and an exclusive ``flock`` of the file
``<key>.lock`` among processes. So eight threads, or two processes, asking for one new
library compile it once; the others wait and find it.

The cache keeps at most ``$SAREK_C_CACHE_LIBRARIES`` libraries (default
:data:`DEFAULT_LIBRARIES`; 0 keeps them all). A library's modification time is its last
use (a lookup that finds it touches it); after a compile that puts the cache over its
bound, the least recently used libraries are removed (with their kept source and lock file)
until a tenth of the bound is free. A library whose key another thread or process holds
(being looked up, compiled or loaded) is never removed; a library a process has loaded
already stays mapped in it, so removing its file changes nothing there.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.runtime.once import KeyedLocks

#: how many libraries the cache keeps by default (about 16 KB each, and their sources)
DEFAULT_LIBRARIES = 8192
#: the name of a library of the cache: its 32-hex-digit key
_KEYED = re.compile(r"[0-9a-f]{32}")

_THREADS = KeyedLocks()


def limit() -> int:
    """``$SAREK_C_CACHE_LIBRARIES``: how many libraries the cache keeps (0: no bound)."""
    text = os.environ.get("SAREK_C_CACHE_LIBRARIES") or str(DEFAULT_LIBRARIES)
    if not text.isdigit():
        raise BackendUnavailable(
            f"$SAREK_C_CACHE_LIBRARIES is {text!r}, which is not a count: set it to how "
            f"many compiled kernels the c backend's disk cache keeps (0 keeps all; the "
            f"default is {DEFAULT_LIBRARIES}).")
    return int(text)


def _flock(path: Path, blocking: bool) -> int | None:
    """An open descriptor of ``path`` holding its exclusive ``flock``, or ``None`` where
    ``blocking`` is false and another holds it. The file is made where missing; a file
    removed (by an eviction) while this waited for it is opened again."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the file was removed while we waited: lock the one there now


@contextmanager
def holding(out_dir: Path, key: str) -> Iterator[None]:
    """Hold ``key`` of the cache in ``out_dir`` for the ``with`` block: no other thread
    of this process nor other process holds it meanwhile, and no eviction removes it."""
    with _THREADS.hold((str(out_dir), key)):
        fd = _flock(out_dir / f"{key}.lock", blocking=True)
        assert fd is not None
        try:
            yield
        finally:
            os.close(fd)


def touch(lib: Path) -> None:
    """Mark ``lib`` used now (its modification time orders the evictions); a cache
    another user owns is only read."""
    try:
        os.utime(lib)
    except OSError:
        pass


def evict(out_dir: Path, bound: int | None = None, keep: str = "") -> list[str]:
    """Remove the least recently used libraries of the cache in ``out_dir`` while it holds
    more than ``bound`` (default :func:`limit`) of them, down to nine tenths of it; a
    library whose key is held, and the library of key ``keep`` (the one just built), are
    kept. The keys removed."""
    bound = limit() if bound is None else bound
    if bound <= 0:
        return []
    libs: list[tuple[int, str]] = []
    with os.scandir(out_dir) as entries:
        for e in entries:
            stem, dot, ext = e.name.partition(".")
            if ext == "so" and dot and _KEYED.fullmatch(stem):
                try:
                    libs.append((e.stat().st_mtime_ns, stem))
                except FileNotFoundError:
                    continue
    if len(libs) <= bound:
        return []
    libs.sort()
    excess = len(libs) - bound * 9 // 10
    removed: list[str] = []
    for _, key in libs:
        if len(removed) >= excess:
            break
        if key == keep:
            continue
        lock = out_dir / f"{key}.lock"
        fd = _flock(lock, blocking=False)
        if fd is None:
            continue  # in use: being looked up, compiled or loaded
        try:
            for suffix in (".so", ".c"):
                try:
                    (out_dir / f"{key}{suffix}").unlink()
                except FileNotFoundError:
                    pass
            lock.unlink()
            removed.append(key)
        finally:
            os.close(fd)
    return removed


__all__ = ["DEFAULT_LIBRARIES", "evict", "holding", "limit", "touch"]
