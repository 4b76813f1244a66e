"""Only well-formed kernels are analysed for epilogue fusion (specs/epilogue-fusion.md
EF-1).

The analyses read the IR as the type checker guarantees it: a variable is bound once in
its scope (IR-17), so ``Ref(i)`` under ``let i = global_thread_id`` *is* the thread index
and a ``let t = i`` copy holds it wherever ``t`` is used (EF-3). IR built by hand (the
builder API) need not be so — ``let i = i + 1`` with the same variable, a copy used
outside its ``let`` — and the interpreter runs it anyway; fusing it would compare the
rebound ``i`` with the index. :func:`well_formed` refuses such a kernel with the type
checker's own message and place.
"""

from __future__ import annotations

from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.typecheck import check_kernel


def _check(kernel: Kernel) -> SarekError | None:
    try:
        check_kernel(kernel)
    except SarekError as e:
        return e
    return None


#: kernels already checked (by identity: IR nodes are immutable), with the error if any
_SEEN: IdentityCache[Kernel, SarekError | None] = IdentityCache(_check, 256)


def well_formed(kernel: Kernel, role: str) -> None:
    """Raise ``FusionRefused`` (EF-1) unless ``kernel`` passes the type checker;
    ``role`` (``"producer"``, ``"consumer"``) names it in the message."""
    err = _SEEN.get(kernel)
    if err is not None:
        raise FusionRefused("EF-1", f"{role} {kernel.name} is not a well-formed kernel (the "
                            f"type checker refuses it): {err.message}", err.loc or kernel.loc)
