"""Our own nvcc call: CUDA C to PTX without contraction, cached on disk (CG-13, CG-14).

``compile_ptx`` runs ``nvcc --fmad=false -ftz=false -prec-div=true -prec-sqrt=true
-arch=<arch> -ptx``: no fused multiply-add, IEEE denormals, correctly rounded division and
square root, so the device computes what the interpreter computes. The PTX is cached under
``~/.cache/sarek_py/ptx`` (``$SAREK_CACHE`` overrides the root) by a hash of the source,
the flags and nvcc's version text.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from sarek_py.ir.diagnostics import BackendUnavailable, SarekError

#: the flags that make nvcc's arithmetic the interpreter's (no FMA contraction, no flush to
#: zero, IEEE division and square root)
EXACT_FLAGS: tuple[str, ...] = ("--fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true")
DEFAULT_ARCH = "sm_80"


class NvccError(SarekError):
    """nvcc rejected the generated CUDA C (a bug of the emitter: the message has nvcc's)."""


def find_nvcc() -> str | None:
    """The nvcc executable ($NVCC, then PATH, then /usr/local/cuda/bin), or None."""
    env = os.environ.get("NVCC")
    if env:
        return env
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.exists() else None


@functools.cache
def nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


def cache_dir() -> Path:
    root = os.environ.get("SAREK_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "sarek_py"
    return base / "ptx"


def nvcc_command(nvcc: str, arch: str, src: Path, out: Path) -> list[str]:
    return [nvcc, *EXACT_FLAGS, f"-arch={arch}", "-ptx", str(src), "-o", str(out)]


def compile_ptx(source: str, arch: str = DEFAULT_ARCH) -> str:
    """PTX of CUDA C ``source`` for ``arch`` (``sm_80`` …), from the cache when there.

    Raises :class:`BackendUnavailable` without nvcc and :class:`NvccError` when nvcc fails.
    """
    nvcc = find_nvcc()
    if nvcc is None:
        raise BackendUnavailable("nvcc was not found (set $NVCC or put it on PATH).")
    flags = " ".join((*EXACT_FLAGS, f"-arch={arch}", "-ptx"))
    key = hashlib.sha256(
        "\0".join((source, flags, nvcc_version(nvcc))).encode()
    ).hexdigest()
    cached = cache_dir() / f"{key}.ptx"
    if cached.exists():
        return cached.read_text()
    with tempfile.TemporaryDirectory(prefix="sarek_nvcc_") as tmp:
        src = Path(tmp) / "kernel.cu"
        out = Path(tmp) / "kernel.ptx"
        src.write_text(source)
        res = subprocess.run(nvcc_command(nvcc, arch, src, out), capture_output=True,
                             text=True, check=False)
        if res.returncode != 0:
            raise NvccError(f"nvcc failed on the generated CUDA C:\n{res.stderr.strip()}")
        ptx = out.read_text()
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp_file = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp_file.write_text(ptx)
    tmp_file.replace(cached)  # atomic: concurrent compilers never see half a file
    return ptx
