"""Launching kernels: the launch and sync nodes, tiling, host execution, the runtimes.

* :mod:`launch` — ``Launch`` (after seed 001's ``GpuKernelLaunch``), ``Sync``,
  ``check_launch`` (specs/launch.md);
* :mod:`execute` — running launches and syncs on a backend; :mod:`text` — their text form;
* :mod:`tiling` — a loop nest launched in tiles or flat (specs/tiling.md);
* :mod:`runtime` — ``get_backend("interp" | "opencl" | "cuda" | "default")``.
"""

from __future__ import annotations

from sarek_py.host.execute import HostRun, ProgramStopped, execute
from sarek_py.ir.host.launch import HostStmt, Launch, ScratchBuffer, Sync, check_launch
from sarek_py.runtime import get_backend

__all__ = ["HostRun", "HostStmt", "Launch", "ProgramStopped", "ScratchBuffer", "Sync",
           "check_launch", "execute", "get_backend"]
