"""What PoCL needs of the machine (specs/native.md, NAT-76).

PoCL, the OpenCL driver for CPUs, compiles a kernel with its own clang and links it into a
shared library with the system linker ``ld``, found on the ``PATH``. Where there is none it
prints the linker's error and aborts the process (SIGABRT) at the first launch, so the
opencl backend on a PoCL CPU device is unavailable, with one sentence, when ``ld`` is not on
the ``PATH``: the automatic choice (NAT-25) then goes on to the interpreter instead of ending
the program.
"""

from __future__ import annotations

import shutil
from typing import Any

#: the name a PoCL platform reports
POCL = "Portable Computing Language"


def missing_linker(device: Any, cl: Any) -> str | None:
    """Why the OpenCL ``device`` cannot run kernels here (PoCL on the CPU without ``ld``
    on the PATH), or ``None``."""
    try:
        pocl = POCL in str(device.platform.name) and bool(device.type & cl.device_type.CPU)
    except Exception:  # a driver that cannot say: not PoCL's concern
        return None
    if not pocl or shutil.which("ld") is not None:
        return None
    return ("the OpenCL device is PoCL on the CPU, which links every kernel with the "
            "system linker 'ld', and no 'ld' is on the PATH, so the opencl backend cannot "
            "run: install binutils (apt install binutils) or put ld on the PATH.")


__all__ = ["POCL", "missing_linker"]
