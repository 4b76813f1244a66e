"""Running host programs (docs/architecture.md, floor 7): checking them, interpreting them,
launching their kernels on a runtime, offloading their parallel loops.

* :mod:`check` — the host-program checker (specs/host-program.md, HP-9);
* :mod:`interp` (with :mod:`frame` and :mod:`residency`) — the host interpreter, arrays kept
  on the device between launches (specs/offload.md);
* :mod:`execute` — running launches and syncs on a backend (specs/launch.md);
  :mod:`backend` — a whole program on a named backend (HP-17);
* :mod:`offload` (with :mod:`parfor` and :mod:`tiling`) — parallel loops → kernels, launches
  and syncs (specs/offload.md, specs/tiling.md).

The records these run — ``Launch``, ``Sync``, ``Program`` — are the host-program IR,
:mod:`sarek_py.ir.host`; the backends are :mod:`sarek_py.runtime`.
"""

from __future__ import annotations

from sarek_py.host.execute import HostRun, ProgramStopped, execute

__all__ = ["HostRun", "ProgramStopped", "execute"]
