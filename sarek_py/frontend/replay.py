"""Capture and replay: ``p.replay(times)`` runs a pipeline's last run again
(specs/frontend.md FE-85 … FE-87).

A pipeline's run records, plans and binds its launches; a time loop that runs the same
launches on the same arrays again need not do any of that. :func:`replay` runs the
launches of the last run again, in order, on the backend that ran them, with the same
argument objects: numpy arrays are read as they are at the replay (their current
contents, copied in as at any launch, or used in place where the backend shares host
memory) and updated in place; device arrays are used in place. Each launch goes through
the backend's launch path as any launch does, so its checks (argument types, the device's
limits, a fused kernel's launch conditions LEG-14/LEG-15) are made again for the arrays
as they are then. A replay adds nothing to ``p.launches``, ``p.results`` or
``p.decisions``.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs
import numpy as np

from sarek_py.frontend.kernel import RECORDER
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import Launch
from sarek_py.runtime.cache import kernel_facts


class ReplayError(SarekError):
    """A replay that cannot run: the pipeline is still open, or has no completed run
    (FE-86), or ``times`` is not a count (FE-87)."""


@attrs.define(eq=False)
class LastRun:
    """What a pipeline's last completed run ran: its backend object and its launches
    after fusion; ``calls`` the backend calls, made at the first replay."""

    backend: Any
    launches: tuple[Launch, ...]
    calls: list[tuple[Any, dict[str, Any], int, int, dict[str, Any]]] | None = None
    #: which part of its ``with`` block's launches this run was (1: the first or only;
    #: more when a host read or ``p.run()`` inside the block ran earlier parts, FE-89)
    parts: int = 1


class Replayable(Protocol):
    """What :func:`replay` reads of a pipeline."""

    last_run: LastRun | None
    recorded: list[Launch]

    @property
    def is_open(self) -> bool: ...


def run_keywords(lc: Launch) -> dict[str, Any]:
    """The grid and block shape of an n-D launch (FE-24) and the dynamic shared extent
    (FE-50) as ``Backend.run_kernel`` keywords (a pipeline's run and its replay alike)."""
    kw: dict[str, Any] = {}
    shape = lc.shape()
    if shape is not None:
        kw.update(grid=shape[0], block_shape=shape[1])
    if lc.shared is not None:
        kw["shared"] = lc.shared
    return kw


def _calls(run: LastRun) -> list[tuple[Any, dict[str, Any], int, int, dict[str, Any]]]:
    if run.calls is None:
        run.calls = [(lc.kernel, lc.by_name, *lc.counts(), run_keywords(lc))
                     for lc in run.launches]
    return run.calls


def replay(p: Replayable, times: object = 1) -> list[Any]:
    """Run ``p``'s last run again ``times`` times (FE-85); the results of the last time
    (``[]`` for ``times=0``). A :class:`ReplayError` when ``p`` is still open or has not
    completed a run (FE-86), or ``times`` is not a non-negative integer (FE-87)."""
    if isinstance(times, bool) or not isinstance(times, int | np.integer) or times < 0:
        raise ReplayError(f"replay(times=...) takes a non-negative integer, not {times!r}")
    if p.is_open:
        raise ReplayError("this pipeline is still open: replay it after its with block "
                          "ends (its launches have not run yet)")
    if RECORDER.get() is not None:  # FE-89: it would run before that block's launches
        raise ReplayError("p.replay() inside the with block of another pipeline would run "
                          "at once, before the launches that block recorded: replay it "
                          "outside the block")
    run = p.last_run
    if run is None:
        raise ReplayError("this pipeline has no completed run to replay: run it first "
                          "(end its with block, or call p.run()); a run that raised an "
                          "error leaves nothing to replay")
    if run.parts > 1:  # FE-89: the host code between the parts is not replayed
        raise ReplayError(
            f"the last with block of this pipeline ran its launches in {run.parts} parts (a "
            "host read inside the block, or p.run(), ran the launches recorded before "
            "it): a replay would repeat only the last part, not the earlier launches nor "
            "the host code between them; replay a block that reads nothing on the host "
            "before it ends")
    calls = _calls(run)
    for k, args, *_ in calls:  # FE-87: as a launch refuses one (FE-15)
        written = kernel_facts(k).written
        for name, a in args.items():
            if isinstance(a, np.ndarray) and not a.flags.writeable and name in written:
                raise ReplayError(f"argument '{name}' of kernel '{k.name}' has become a "
                                  "read-only array since the pipeline ran: a replay writes "
                                  "its results back into its arrays")
    runner = run.backend.run_kernel
    results: list[Any] = []
    for _ in range(int(times)):
        results = [runner(k, args, threads, block, **kw)
                   for k, args, threads, block, kw in calls]
    return results


__all__ = ["LastRun", "ReplayError", "replay", "run_keywords"]
