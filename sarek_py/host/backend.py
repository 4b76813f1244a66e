"""Running a whole host program on a named backend (specs/host-program.md, HP-17, HP-18).

``run_program_on(p, "interp")`` runs the program on the host interpreter: its parallel
loops on the reference interpreter, its launches on the interpreter backend. On a device
backend (``opencl``, ``cuda``) the parallel loops must run on that device too, or the run
would compare the interpreter with itself: the program is offloaded first (every parallel
loop becomes a kernel and a launch, :func:`sarek_py.host.offload.offload`), then run
with its launches on the device; a loop the offload cannot lower is refused, naming the
loop and the backend. The result says which executor ran and how many kernels the backend
launched (:class:`Executor`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from sarek_py.host.interp import HostResult, run_program
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.program import ParFor, Program, iter_host
from sarek_py.runtime.base import Backend


@attrs.frozen
class Executor:
    """What ran a program: the backend's name, whether the program was offloaded, how
    many parallel loops became kernels, and how many kernels the backend launched."""

    backend: str
    offloaded: bool
    loops: int
    launches: int

    def line(self) -> str:
        if not self.offloaded:
            return (f"executor: {self.backend}: parallel loops on the reference interpreter, "
                    f"{self.launches} launch(es) on the interpreter backend")
        return (f"executor: {self.backend}: program offloaded ({self.loops} parallel loop(s) "
                f"as kernels), {self.launches} kernel launch(es) on {self.backend}")


def count_parfors(p: Program) -> int:
    """The parallel loops of ``p`` (program body and procedures)."""
    bodies = (p.body, *(q.body for q in p.procedures))
    return sum(1 for b in bodies for s in iter_host(b) if isinstance(s, ParFor))


def run_program_on(p: Program, backend: str | Backend,
                   preset: Mapping[str, Any] | None = None, *, inputs: Iterable[Any] = (),
                   check_races: bool = True,
                   numbering: str = "rows") -> tuple[HostResult, Executor]:
    """Run ``p`` on ``backend`` (HP-17): ``"interp"`` as written; another backend (a name
    of :func:`~sarek_py.runtime.get_backend`, or a :class:`Backend` object, which
    may be an interpreter backend standing for a device) after offloading every parallel
    loop to it. Raises a :class:`SarekError` when the backend is not available here or a
    loop cannot be offloaded."""
    from sarek_py.runtime import get_backend

    if backend == "interp":
        from sarek_py.runtime.interp import InterpBackend

        dev = InterpBackend()
        res = run_program(p, preset, inputs=inputs, device=dev, check_races=check_races)
        return res, Executor("interp", False, 0, dev.stats.launches)
    from sarek_py.host.offload import OffloadError, offload

    device = get_backend(backend) if isinstance(backend, str) else backend
    name = device.name
    loops = count_parfors(p)
    try:
        # OFF-17: 1-D loops as rows kernels where the backend runs them faster so
        q = offload(p, numbering=numbering, rows_1d=device.rows_1d)  # type: ignore[arg-type]
    except OffloadError as exc:
        raise SarekError(f"--backend {name}: this parallel loop cannot run on {name} "
                         f"({exc.message}); run the program with --backend interp",
                         exc.loc) from None
    left = count_parfors(q)
    if left:  # pragma: no cover - offload lowers every loop or raises (OFF-8)
        raise SarekError(f"--backend {name}: {left} parallel loop(s) were not offloaded")
    before = device.stats.launches
    res = run_program(q, preset, inputs=inputs, device=device, check_races=check_races)
    return res, Executor(name, True, loops, device.stats.launches - before)


__all__ = ["Executor", "count_parfors", "run_program_on"]
