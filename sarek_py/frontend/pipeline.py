"""``sarek_py.pipeline()``: record launches, fuse them, run them (FE-17).

Inside ``with pipeline() as p:`` a kernel launch is recorded instead of run. When the block
ends without an exception, or at ``p.run()``, the recorded launches are fused by
:func:`sarek_py.fusion.epilogue.sequence.fuse_launches` (each adjacent producer/consumer pair that is
provably equal to the two launches run one after the other) and run in order. Buffers are
the numpy arrays passed: two are the same buffer only when they are the same memory with
the same shape, strides and dtype (``t`` and ``t[:]``, not ``t[:k]`` or ``t.view(i4)``);
any other overlap is partial aliasing, which fusion refuses (specs/fusion-legality.md
LEG-1, LEG-7). A fused kernel carries the buffers and counts it was proved for, and the
backend checks them again at its launch (LEG-13 … LEG-15).
"""

from __future__ import annotations

from contextvars import Token
from types import TracebackType
from typing import Any

from sarek_py.frontend.kernel import (
    RECORDER,
    ArgValue,
    Count,
    KernelFunction,
    Recorder,
    emit,
    get_backend,
)
from sarek_py.frontend.plan_cache import cached_fuse
from sarek_py.frontend.replay import LastRun, replay, run_keywords
from sarek_py.frontend.temporaries import Temporaries, Temporary
from sarek_py.fusion.epilogue.merge_scalars import MergeNote
from sarek_py.fusion.epilogue.sequence import Decision
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import KernelLaunch, Launch
from sarek_py.runtime.arrays import HOST_ACCESS_HOOKS, DeviceArray


def current() -> Recorder | None:
    """The pipeline recording launches here, if any."""
    return RECORDER.get()


class Pipeline:
    """Launches recorded in a ``with`` block, then fused and run on one backend."""

    def __init__(self, backend: str | None = None, *, fuse: bool = True, force: bool = False):
        self.backend = backend
        self.fuse = fuse
        self.force = force
        self.recorded: list[Launch] = []
        #: the launches actually run (after fusion), in order, over every ``run``
        self.launches: list[Launch] = []
        self.decisions: list[Decision] = []
        #: the scalar parameters of fused launches made one, over every run (FE-97)
        self.merged: list[MergeNote] = []
        self.results: list[Any] = []
        self._token: Token[Recorder | None] | None = None
        #: what the last run ran, for :meth:`replay` (None before a run, FE-86)
        self.last_run: LastRun | None = None
        #: the arrays made by :meth:`empty` / :meth:`empty_like` (FE-70)
        self.temporaries = Temporaries(self)
        #: the runs made inside the open ``with`` block (a host read of a temporary,
        #: ``p.run()``): the block's launches then ran in parts (FE-89)
        self._runs_in_block = 0

    # ------------------------------------------------------------------ context

    def __enter__(self) -> Pipeline:
        if self._token is not None:
            raise SarekError("this pipeline is already open")
        if current() is not None:
            raise SarekError("pipelines cannot be nested: the inner one would run its "
                             "launches before the outer one's")
        self._token = RECORDER.set(self)
        self._runs_in_block = 0
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._token is not None
        RECORDER.reset(self._token)
        self._token = None
        if exc_type is None:
            self.run()
        else:
            self.recorded.clear()  # an error in the block: nothing runs

    @property
    def is_open(self) -> bool:
        """Whether the ``with`` block is running (launches are being recorded)."""
        return self._token is not None

    # --------------------------------------------------------------- recording

    def record(self, k: KernelFunction, args: dict[str, ArgValue], threads: Count,
               block: Count, backend: str | None, shared: int | None = None) -> None:
        """Record one launch (called by :meth:`KernelFunction.launch`)."""
        if backend is not None and backend != self.backend:
            raise SarekError(f"a launch of '{k.name}' asks for backend {backend!r} inside a "
                             f"pipeline running on {self.backend or 'the default backend'!r}: "
                             "give the backend to pipeline(backend=...) instead")
        ir = k.ir
        if type(threads) is int and type(block) is int:  # the common launch (FE-82): the
            # arguments are bound and checked (FE-15), the shared extent too (FE-50)
            self.recorded.append(Launch(ir, threads, block,
                                        tuple([args[p.name] for p in ir.params]), shared=shared))
        else:
            self.recorded.append(KernelLaunch(ir, threads, block, args, shared=shared))

    def _backend(self) -> Any:
        return get_backend(self.backend)

    def run(self) -> list[Any]:
        """Fuse the launches recorded since the last run and run them; their results."""
        from sarek_py.fusion.policy import target

        launches, self.recorded = self.recorded, []
        if not launches:
            return []
        recorded = launches
        backend = self._backend()
        self.last_run = None  # FE-86: a run that fails leaves nothing to replay
        if self.fuse:  # the plan found again when these launches were planned (FE-80)
            limits = backend.device_limits()  # the fused kernel's shared memory (LEG-34)
            tgt = target(backend.name,
                         shared_bytes=None if limits is None else limits.shared_bytes)
            launches, decisions = cached_fuse(launches, backend=backend.name,
                                              target=tgt, force=self.force,
                                              merged=self.merged)  # FE-97
            self.decisions.extend(decisions)
        # temporaries: dead stores dropped at the final run, the others allocated (FE-71)
        launches = self.temporaries.bind(recorded, launches, final=not self.is_open)
        results = [backend.run_kernel(lc.kernel, lc.by_name, *lc.counts(), **run_keywords(lc))
                   for lc in launches]
        self.launches.extend(launches)
        self.results.extend(results)
        # a part of the block (the block still open), or its last part after earlier ones
        parts = self._runs_in_block + 1
        if self.is_open:
            self._runs_in_block += 1
        self.last_run = LastRun(backend, tuple(launches), parts=parts)
        return results

    def empty(self, shape: Any, dtype: Any = "float32", *, name: object = None
              ) -> Temporary:
        """A temporary of ``shape`` and ``dtype``: device-only, its stores dropped when
        nobody can see them (FE-70, FE-71); ``name``: for the report (default: the
        variable assigned)."""
        return self.temporaries.empty(shape, dtype, name)

    def empty_like(self, x: Any, *, name: object = None) -> Temporary:
        """A temporary of ``x``'s shape and dtype (FE-70): ``x`` a numpy array, a
        device array, a temporary, or anything with ``shape`` and ``dtype``."""
        shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
        if shape is None or dtype is None:
            raise SarekError(f"p.empty_like takes an array (numpy, device array or "
                             f"temporary), not {type(x).__name__}: for a list, write "
                             "p.empty_like(np.asarray(...))")
        return self.temporaries.empty(shape, dtype, name)

    def keep(self, t: object) -> Temporary:
        """Mark the temporary ``t`` as read after the pipeline: its stores stay (FE-71)."""
        return self.temporaries.keep(t)

    def replay(self, times: object = 1) -> list[Any]:
        """Run the launches of the last run again ``times`` times, on the same arrays
        (their current contents), without recording or planning (FE-85 … FE-87); the
        results of the last time."""
        return replay(self, times)

    # ---------------------------------------------------------------- reporting

    def report(self) -> str:
        """What was fused, and why the other adjacent pairs were not."""
        lines = [f"{len(self.launches)} launch(es) run: "
                 + ", ".join(lc.kernel.name for lc in self.launches)]
        if not self.fuse:
            lines.append("fusion is off for this pipeline")
        lines.extend(str(d) for d in self.decisions)
        lines.extend(str(m) for m in self.merged)
        lines.extend(self.temporaries.report_lines())  # FE-74
        if self.recorded:
            lines.append(f"{len(self.recorded)} launch(es) recorded, not run yet")
        return "\n".join(lines)

    def source(self, target: str = "opencl") -> str:
        """The device code of the launches run, after fusion."""
        seen: dict[str, str] = {}
        for lc in self.launches:
            seen.setdefault(lc.kernel.name, emit(lc.kernel, target))
        return "\n".join(seen.values())


def _host_access(d: DeviceArray) -> None:
    """FE-72 for device arrays: the host reads or writes ``d`` inside an open pipeline
    whose recorded launches use it: they run first, so the host sees (and changes) what
    the launches one by one would leave."""
    p = current()
    if isinstance(p, Pipeline) and any(a is d for lc in p.recorded for a in lc.args):
        p.run()


HOST_ACCESS_HOOKS.append(_host_access)


def pipeline(backend: str | None = None, *, fuse: bool = True, force: bool = False) -> Pipeline:
    """A context that records launches and runs them fused at its end (FE-17)."""
    return Pipeline(backend, fuse=fuse, force=force)
