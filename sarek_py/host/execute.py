"""Running host statements (launches and syncs) on a backend (specs/launch.md).

:class:`HostRun` keeps the launches that have not been waited for. A launch evaluates its
expressions once (LCH-2), copies in what the kernel needs (write-discard and scratch
buffers, LCH-10, LCH-11) and starts; a sync waits, copies back, allocates and fills the
read-back arrays, stores the stop codes in the ``stop_status`` array and replays the host
``stop`` of the first thread that stopped (LCH-9).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

import numpy as np

from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.evaluate import host_eval
from sarek_py.ir.host.launch import HostStmt, Launch, Sync, check_launch
from sarek_py.ir.nodes import Ref
from sarek_py.ir.requires_check import RangeRefused
from sarek_py.runtime.base import Backend, LaunchError, Pending
from sarek_py.runtime.fused_errors import in_user_terms


class ProgramStopped(SarekError):
    """The host replayed a ``stop`` that a kernel thread reached (LCH-9)."""

    def __init__(self, code: int, kernel: str, thread: int) -> None:
        super().__init__(f"stop {code} (reached by thread {thread} of kernel {kernel})")
        self.code = code
        self.kernel = kernel
        self.thread = thread


class HostRun:
    """Host statements run one after another on ``backend`` in environment ``env``."""

    def __init__(self, backend: Backend, env: MutableMapping[str, Any]) -> None:
        self.backend = backend
        self.env = env
        self.pending: list[tuple[Launch, Pending]] = []

    def run(self, stmts: Iterable[HostStmt]) -> None:
        for s in stmts:
            if isinstance(s, Launch):
                self.launch(s)
            else:
                self.sync(s)

    def launch(self, node: Launch) -> None:
        check_launch(node)
        env = self.env
        thread_count, block_size, node_args = node.host_exprs()
        threads = int(host_eval(thread_count, env))
        block = int(host_eval(block_size, env))
        grid, bshape = node.host_shape()  # an n-D launch's extents (LCH-28)
        grid_n = tuple(int(host_eval(e, env)) for e in grid) or None
        block_n = tuple(int(host_eval(e, env)) for e in bshape) or None
        shared = (node.shared if node.shared is None or isinstance(node.shared, int)
                  else int(host_eval(node.shared, env)))  # LCH-51
        k = node.kernel
        scratch: dict[str, int] = {}
        read_back: dict[str, int] = {}
        for s in node.scratch:
            name = k.params[s.argument].name
            scratch[name] = int(host_eval(s.size, env))
            if s.read_back is not None:
                read_back[name] = int(host_eval(s.read_back, env))
        args: dict[str, Any] = {}
        for p, a in zip(k.params, node_args, strict=True):
            if p.name in scratch:
                continue
            if isinstance(a, Ref) and p.is_array:
                value = env.get(a.var.name)
                if not isinstance(value, np.ndarray):
                    raise LaunchError(f"launch of {k.name}: host array {a.var.name} is not "
                                      "allocated", node.loc)
                args[p.name] = value
            else:
                args[p.name] = host_eval(a, env)
        overwritten = []
        for v, c in zip(node.overwritten, node.overwritten_if, strict=True):
            if bool(host_eval(c, env)):
                overwritten += [p.name for p, a in zip(k.params, node.args, strict=True)
                                if isinstance(a, Ref) and a.var == v]
        try:
            pending = self.backend.start(k, args, threads, block, overwritten=overwritten,
                                         scratch=scratch, read_back=read_back,
                                         grid=grid_n, block_shape=block_n, shared=shared)
        except FusionRefused as refusal:  # a fused kernel's launch conditions (LEG-14)
            refusal.loc = refusal.loc or node.loc
            in_user_terms(refusal, (k,), args)
            raise
        except RangeRefused as refusal:  # conditions over the arguments: here (LCH-25)
            refusal.loc = node.loc or refusal.loc
            in_user_terms(refusal, (k,), args)
            raise
        except LaunchError as err:  # a launch the backend refuses (LCH-21, LCH-27): here
            err.loc = err.loc or node.loc
            in_user_terms(err, (k,), args)
            raise
        except SarekError as err:  # a fused kernel's error in the user's names (FE-90)
            in_user_terms(err, (k,), args)
            raise
        self.pending.append((node, pending))

    def sync(self, node: Sync | None = None) -> None:
        kernels = [lc.kernel for lc, _ in self.pending]
        try:
            self._sync()
        except SarekError as err:  # a fused kernel's fault or stop in the user's names
            in_user_terms(err, kernels)  # (FE-90)
            raise

    def _sync(self) -> None:
        self.backend.sync()
        done, self.pending = self.pending, []
        for launch, pending in done:
            result = self.backend.finish(pending)
            k = launch.kernel
            for s in launch.scratch:
                actual = launch.arg_name(s.argument)
                self.env[actual] = result.read_back.get(k.params[s.argument].name)
            if launch.stop_status is not None:
                self.env[launch.stop_status.name] = result.stop_codes
                stopped = np.flatnonzero(result.stop_codes)
                if stopped.size:
                    t = int(stopped[0])
                    code = int(result.stop_codes[t])
                    if not any(r.code == code for r in launch.stop_replay):
                        raise LaunchError(f"kernel {k.name} stopped with code {code}, which "
                                          "no stop_replay statement handles", launch.loc)
                    raise ProgramStopped(code, k.name, t)


def execute(stmts: Iterable[HostStmt], env: MutableMapping[str, Any],
            backend: Backend) -> None:
    """Run launches and syncs in order; launches still pending at the end are waited for."""
    run = HostRun(backend, env)
    run.run(stmts)
    if run.pending:
        run.sync(Sync())
