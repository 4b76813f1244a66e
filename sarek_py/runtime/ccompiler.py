"""The system C compiler for the c backend, and its disk cache (specs/native.md, NAT-13 …
NAT-18).

A kernel's C (:mod:`sarek_py.codegen.c99`) is compiled into a shared library with
``cc -std=c11 -O3 -ffp-contract=off -fno-fast-math -fno-math-errno -fopenmp -fPIC
-shared``: no contraction, no value-changing optimisation (``-fno-math-errno`` only stops
``sqrt`` from setting ``errno``). The library is cached under
``~/.cache/sarek_py/c`` (root overridden by ``$SAREK_CACHE``, as for the PTX cache,
CG-14), named by a hash of the source, the flags and the compiler's identity (the path it
resolves to, its size and modification time, so finding a cached library runs no
program); the C source is kept beside it. ``$SAREK_CC`` names the compiler (default
``cc``), ``$SAREK_CFLAGS`` adds flags (``-march=native``: NAT-17). A key is held by one
thread of one process while it is looked up, compiled or loaded (NAT-71), and the cache
keeps the ``$SAREK_C_CACHE_LIBRARIES`` most recently used libraries (NAT-75):
:mod:`sarek_py.runtime.cfiles`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sarek_py.ir.diagnostics import BackendUnavailable, LaunchError
from sarek_py.runtime.cfiles import evict, holding, limit, touch

#: the flags that keep the interpreter's arithmetic: no contraction into fused
#: multiply-adds, no fast math (NAT-13)
FLAGS: tuple[str, ...] = ("-std=c11", "-O3", "-ffp-contract=off", "-fno-fast-math",
                          "-fno-math-errno", "-fopenmp", "-fPIC", "-shared")

_PROBE = "#include <omp.h>\nint sarek_probe(void) { return omp_get_max_threads(); }\n"


def _words(var: str, default: str = "") -> list[str]:
    """The words of environment variable ``var``, split as a shell does; an unbalanced
    quote is one sentence (NAT-47)."""
    try:
        return shlex.split(os.environ.get(var) or default)
    except ValueError as exc:
        raise BackendUnavailable(
            f"${var} cannot be split into words as a shell does ({exc}), so the c backend "
            f"cannot run: fix its quotes.") from None


def compiler() -> str:
    """The C compiler: the first word of ``$SAREK_CC`` (its other words are flags,
    NAT-47) or ``cc`` on the PATH, as an absolute path; refused with what to install when
    there is none (NAT-15)."""
    name = (_words("SAREK_CC", "cc") or ["cc"])[0]
    found = shutil.which(name)
    if found is None:
        raise BackendUnavailable(
            f"no C compiler {name!r} was found, so the c backend cannot run: install one "
            "(apt install gcc) or name it in $SAREK_CC.")
    return found


#: flags that let the compiler change floating-point results: refused (NAT-47); a flag
#: ending in ``=`` is refused with any value after it
UNEXACT = ("-ffast-math", "-Ofast", "-ffp-contract=fast", "-ffp-contract=on",
           "-funsafe-math-optimizations", "-fassociative-math", "-freciprocal-math",
           "-ffinite-math-only", "-fno-signed-zeros", "-fno-honor-nans",
           "-fno-honor-infinities", "-ffp-model=", "-mfpmath=", "-mrecip", "-mdaz-ftz",
           "-fcx-limited-range", "-menable-unsafe-fp-math", "-fapprox-func")


def flags() -> tuple[str, ...]:
    """:data:`FLAGS`, the flags in ``$SAREK_CC`` after the compiler's name, and the user's
    ``$SAREK_CFLAGS``; a flag that breaks bitwise results is refused (NAT-47)."""
    user = [*_words("SAREK_CC")[1:], *_words("SAREK_CFLAGS")]
    for f in user:
        if any(f == u or (u.endswith("=") and f.startswith(u)) or
               (u == "-mrecip" and f.startswith("-mrecip")) for u in UNEXACT):
            raise BackendUnavailable(
                f"the C flag {f!r} (in $SAREK_CFLAGS or $SAREK_CC) lets the compiler change "
                "floating-point results, which the c backend keeps bitwise equal to the "
                "interpreter's: remove it.")
    return FLAGS + native() + tuple(user)


#: the flags for this CPU (NAT-38): its own instructions (AVX-512's masked arithmetic lets
#: a loop whose threads leave at a guard vectorise), no clones (NAT-32) as none is needed
NATIVE: tuple[str, ...] = ("-march=native", "-DSAREK_NO_CLONES")


def native() -> tuple[str, ...]:
    """:data:`NATIVE` on x86-64 Linux where ``/proc/cpuinfo`` names the CPU (its identity
    is then part of the cache key), else nothing; ``$SAREK_NATIVE=0`` turns it off
    (NAT-38)."""
    choice = os.environ.get("SAREK_NATIVE") or "1"
    if choice not in ("0", "1"):
        raise BackendUnavailable(
            f"$SAREK_NATIVE is {choice!r}, which the c backend does not know: set it to 1 "
            "(build for this CPU, the default) or 0 (the portable build).")
    if choice == "0" or cpu_identity() is None:
        return ()
    return NATIVE


@functools.cache
def cpu_identity() -> str | None:
    """The CPU this process runs on, as ``-march=native`` sees it: the vendor, model and
    instruction-set flags of the first processor in ``/proc/cpuinfo`` (x86-64 Linux), or
    ``None`` where there is no such file (NAT-38)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    keep = ("vendor_id", "cpu family", "model", "model name", "flags")
    seen: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if seen:
                break  # the first processor's block
            continue
        key, _, value = line.partition(":")
        if key.strip() in keep:
            seen[key.strip()] = value.strip()
    if "flags" not in seen:
        return None
    return "\n".join(f"{k}={seen[k]}" for k in keep if k in seen)


@functools.cache
def _identity(path: str) -> str:
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def cache_dir() -> Path:
    root = os.environ.get("SAREK_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "sarek_py"
    return base / "c"


def cache_key(source: str, cc: str, opts: tuple[str, ...]) -> str:
    """The hash naming a library: source, flags and the compiler's identity (NAT-14), and
    the CPU's when a flag builds for it (NAT-38): a cache shared by machines never gives
    one CPU a library built for another's instructions."""
    h = hashlib.sha256()
    cpu = ""
    if any(f.startswith(("-march=native", "-mcpu=native", "-mtune=native")) for f in opts):
        cpu = cpu_identity() or "an unknown CPU"
    for part in (source, " ".join(opts), _identity(cc), cpu):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


class CompileFailed(LaunchError):
    """The compiler refused a unit: ``why`` is its first error line (NAT-18)."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


class CompileCounter:
    """How many times this process has run the compiler (NAT-14's test reads it)."""

    runs = 0


def library(source: str) -> Path:
    """The shared library of ``source``: found in the cache, or compiled into it. A
    compiler error is a :class:`LaunchError` with the compiler's first error line."""
    with cached(source) as lib:
        return lib


@contextmanager
def cached(source: str) -> Iterator[Path]:
    """The shared library of ``source``, found in the cache or compiled into it, its key
    held for the ``with`` block (NAT-71): no other thread or process compiles or evicts
    it meanwhile, so the block may load it. A compile that puts the cache over its bound
    then evicts the least recently used libraries (NAT-75)."""
    cc, opts, bound = compiler(), flags(), limit()
    key = cache_key(source, cc, opts)
    out_dir = cache_dir()
    lib = out_dir / f"{key}.so"
    hold = holding(out_dir, key)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        hold.__enter__()
        held = True
    except OSError as exc:
        if not lib.exists():
            raise BackendUnavailable(
                f"the c backend cannot write its cache directory {out_dir} "
                f"({exc.strerror}): set $SAREK_CACHE to a writable directory.") from None
        held = False  # a cache this process may only read: its libraries as they are
    built = False
    try:
        if lib.exists():
            touch(lib)
        else:
            _compile(source, cc, opts, key, out_dir)
            built = True
        yield lib
    finally:
        if held:
            hold.__exit__(None, None, None)
    if built:
        try:
            evict(out_dir, bound, keep=key)
        except OSError:
            pass  # a cache another process is cleaning: bounded at the next compile


def _compile(source: str, cc: str, opts: tuple[str, ...], key: str, out_dir: Path) -> None:
    """Compile ``source`` into the library of ``key`` in ``out_dir`` (its key held)."""
    lib = out_dir / f"{key}.so"
    src = out_dir / f"{key}.c"
    try:
        # NAT-40: compiled from the source in memory, never from the kept .c file (which
        # anyone may have edited); the kept copy is replaced by it. NAT-41: the library
        # exports its key, so a library put in another's place is found out
        source = f"{source}\n{marker(key)}"
        _write_atomically(src, source.encode())
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=out_dir)
        cfd, ctmp = tempfile.mkstemp(suffix=".c", dir=out_dir)
    except OSError as exc:
        raise BackendUnavailable(
            f"the c backend cannot write its cache directory {out_dir} ({exc.strerror}): "
            "set $SAREK_CACHE to a writable directory.") from None
    os.close(fd)
    with os.fdopen(cfd, "wb") as f:
        f.write(source.encode())
    try:
        CompileCounter.runs += 1
        done = subprocess.run([cc, *opts, ctmp, "-o", tmp, "-lm"], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            errs = [ln for ln in done.stderr.splitlines() if "error" in ln]
            why = (errs or done.stderr.strip().splitlines() or ["no message"])[0]
            raise CompileFailed(f"the C compiler {cc} refused the emitted C ({src}): "
                                f"{why.replace(ctmp, str(src))}", why=why)
        os.replace(tmp, lib)  # another process may have done the same: either is whole
    finally:
        for t in (tmp, ctmp):
            if os.path.exists(t):
                os.unlink(t)


def marker_name(key: str) -> str:
    """The symbol a library of cache key ``key`` exports (NAT-41)."""
    return f"sarek_library_{key}"


def marker(key: str) -> str:
    """The line appended to a unit of cache key ``key`` before it is compiled (NAT-41)."""
    return (f"// this library's cache key, checked when it is loaded\n"
            f"const char {marker_name(key)} = 1;\n")


def forget(lib: Path) -> None:
    """Remove a cached library that does not load (a damaged file), so that the next
    :func:`library` call compiles it again."""
    try:
        lib.unlink()
    except OSError:
        pass


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def probe() -> None:
    """Whether the compiler builds OpenMP code: the probe library is compiled once and
    cached as any other; refused with what to install when it fails (NAT-15)."""
    cc = compiler()
    try:
        library(_PROBE)
    except CompileFailed as exc:  # not a cache directory that cannot be written: that says so
        if "omp" not in exc.why.lower():  # NAT-47: the compiler's own words
            raise BackendUnavailable(
                f"the C compiler {cc} with flags {' '.join(flags()[len(FLAGS):]) or 'none'} "
                f"added cannot build the c backend's probe, so the c backend cannot run: "
                f"{exc.why}") from None
        raise BackendUnavailable(
            f"the C compiler {cc} cannot build OpenMP code (-fopenmp), so the c backend "
            "cannot run: install gcc with its OpenMP runtime (apt install gcc libgomp1)."
        ) from None
