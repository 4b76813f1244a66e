"""The registry of IR → IR passes and the pipeline that runs them (specs/inlining.md, INL-12).

A pass is a function ``(module, notes) -> module`` registered under a name::

    @register_pass("inline", "inline the calls of pure helper functions")
    def _inline(m: Module, notes: list[str]) -> Module: ...

It returns a module with the same meaning (or raises a ``SarekError``), and may append
one line per thing it left alone to ``notes``. ``run_pipeline(module, ["inline", …])``
runs the named passes in order; ``sarek-py opt FILE -p NAME`` is its command line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Module

PassFn = Callable[[Module, list[str]], Module]


@attrs.frozen
class Pass:
    """A named pass with one line of help."""

    name: str
    help: str
    run: PassFn


PASSES: dict[str, Pass] = {}


class UnknownPass(SarekError):
    """A pipeline names a pass that is not registered."""


def register_pass(name: str, help: str = "") -> Callable[[PassFn], PassFn]:
    """Register the decorated function as the pass ``name``."""

    def register(fn: PassFn) -> PassFn:
        if name in PASSES and PASSES[name].run is not fn:
            raise ValueError(f"pass {name!r} registered twice")
        PASSES[name] = Pass(name, help or (fn.__doc__ or "").strip().split("\n")[0], fn)
        return fn

    return register


def get_pass(name: str) -> Pass:
    if name not in PASSES:
        known = ", ".join(sorted(PASSES)) or "none"
        raise UnknownPass(f"unknown pass '{name}' (passes: {known})")
    return PASSES[name]


def run_pipeline(module: Module, names: Sequence[str], notes: list[str] | None = None) -> Module:
    """Run the passes ``names`` in order on ``module``; their notes go to ``notes``."""
    passes = [get_pass(n) for n in names]  # every name is checked before any pass runs
    sink: list[str] = [] if notes is None else notes
    for p in passes:
        module = p.run(module, sink)
    return module


@register_pass("inline", "inline the calls of pure helpers with a scalar result (INL-*)")
def _inline(m: Module, notes: list[str]) -> Module:
    from sarek_py.fusion.loops.inline import inline_module

    return inline_module(m, notes)


@register_pass("thread-index", "write each kernel's thread element as global_idx_a (EF-20)")
def _thread_index(m: Module, notes: list[str]) -> Module:
    from sarek_py.ir.thread_index import canonical_thread_index

    kernels = tuple(canonical_thread_index(k) for k in m.kernels)
    if all(a is b for a, b in zip(kernels, m.kernels, strict=True)):
        return m
    out: Module = attrs.evolve(m, kernels=kernels)
    return out
