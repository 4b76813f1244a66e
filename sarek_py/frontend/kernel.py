"""``@kernel`` and ``@helper``: Python functions as IR kernels, launched on numpy arrays.

A decorated function is translated lazily, on first use (so a kernel may call helpers
defined after it in the file), and the IR is cached. A kernel is launched with
``k[threads, block](args...)`` or ``k.launch(args..., threads=…, block=…, backend=…)``:
the arguments are checked against the parameters (FE-15), the kernel runs on the chosen
backend and the numpy arrays hold the results afterwards. Inside ``with sarek_py.pipeline()``
a launch is recorded instead, and run fused when the pipeline ends (FE-17).
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, Protocol, overload

import numpy as np

from sarek_py.frontend.intrinsics import KernelOnly
from sarek_py.frontend.temporaries import Temporary
from sarek_py.frontend.translate import translate_helper, translate_kernel
from sarek_py.ir.deep import SHALLOW, call_deep, in_deep_thread, tree_depth
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import HelperFunc, Kernel, Loc, Var
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.runtime.arrays import DeviceArray
from sarek_py.runtime.cache import kernel_facts

ArgValue = np.ndarray[Any, Any] | int | float | bool | np.generic | DeviceArray | Temporary


#: a thread count or block size, or (CUDA's spelling, FE-24) a grid or block shape
Count = int | tuple[int, ...]


class Recorder(Protocol):
    """Where a launch goes instead of running: an open ``pipeline()`` (FE-17)."""

    def record(self, k: KernelFunction, args: dict[str, ArgValue], threads: Count,
               block: Count, backend: str | None, shared: int | None = None) -> None: ...


#: the recorder open in this context (``with sarek_py.pipeline():``), if any; the pipeline
#: sets it, a launch reads it
RECORDER: ContextVar[Recorder | None] = ContextVar("sarek_pipeline", default=None)


#: held while a kernel or helper is translated on first use (FE-100): threads that use a
#: new kernel at once translate it once, and wait for it. A translation runs on a deep
#: thread (:func:`call_deep`) whose caller holds this lock; the helpers it translates in
#: turn run on that deep thread, which does not take it again.
_TRANSLATING = threading.RLock()


def _translated(translate: Callable[[], Any]) -> Any:
    """``translate()`` under :data:`_TRANSLATING` (FE-100), or directly on the deep
    thread of a translation already holding it."""
    if in_deep_thread():
        return translate()
    with _TRANSLATING:
        return translate()


class LaunchArgumentError(SarekError):
    """Arguments that do not match a kernel's parameters, or a bad launch configuration."""


class HelperFunction:
    """A ``@helper`` device function; call it from kernels (FE-11)."""

    def __init__(self, fn: Callable[..., Any], *, pure: bool = False):
        _check_function(fn, "@helper")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.pure = pure
        self._ir: tuple[HelperFunc, tuple[HelperFunc, ...]] | None = None
        self._busy = False

    def _translate(self) -> tuple[HelperFunc, tuple[HelperFunc, ...]]:
        if self._ir is None:
            _translated(self._translate_once)
        assert self._ir is not None
        return self._ir

    def _translate_once(self) -> None:
        if self._ir is not None:  # another thread translated it while this one waited
            return
        if self._busy:
            raise SarekError(f"helper '{self.fn.__name__}' calls itself (directly or "
                             "through other helpers): recursion is not supported")
        self._busy = True
        try:
            self._ir = call_deep(translate_helper, self.fn, pure=self.pure)
        finally:
            self._busy = False

    def helper_ir(self) -> HelperFunc:
        """The IR of this helper."""
        return self._translate()[0]

    def helper_deps(self) -> tuple[HelperFunc, ...]:
        """The helpers it calls, transitively."""
        return self._translate()[1]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelOnly(f"helper '{self.fn.__name__}' can only be called inside a @kernel")


class KernelFunction:
    """A ``@kernel``: its IR (``.ir``) and its launches (FE-14, FE-15)."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None):
        _check_function(fn, "@kernel")
        _check_name(fn, name)
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name if name is not None else fn.__name__
        self._ir: Kernel | None = None
        #: ``k[threads, block]`` launchers of two ``int``s, made once (FE-82)
        self._launchers: dict[tuple[int, int], Callable[..., Any]] = {}

    @property
    def ir(self) -> Kernel:
        """The IR kernel, translated on first access and checked."""
        if self._ir is None:
            _translated(self._translate_once)
        assert self._ir is not None
        return self._ir

    def _translate_once(self) -> None:
        if self._ir is None:  # else another thread translated it while this one waited
            self._ir = call_deep(translate_kernel, self.fn, self.name)

    def kernel_ir(self) -> Kernel:
        return self.ir

    def text(self) -> str:
        """The kernel in the IR's text form (``sarek-py print``)."""
        from sarek_py.ir.printer import print_kernel

        return print_kernel(self.ir)

    def source(self, target: str = "opencl") -> str:
        """The generated device code for ``target`` ("cuda" or "opencl")."""
        return emit(self.ir, target)

    def __getitem__(self, config: Any) -> Callable[..., Any]:
        """``k[threads, block]``, ``k[grid, block]`` (tuples, FE-24), and with dynamic
        shared memory (FE-50) ``k[grid, block, shared]`` (``shared``: elements of the
        kernel's ``shared(T)`` array) or numba's ``k[grid, block, stream, nbytes]``
        (``stream`` 0 or None, ``nbytes`` a multiple of the element size)."""
        plain = (type(config) is tuple and len(config) == 2 and type(config[0]) is int
                 and type(config[1]) is int)  # no bool, no numpy integer: checked below
        if plain:
            made = self._launchers.get(config)
            if made is not None:
                return made
        key = config
        config, dyn = _dynamic_config(self.name, config)
        threads, block = _config(config)

        def launcher(*args: Any, backend: str | None = None, **kwargs: Any) -> Any:
            return self._start(args, kwargs, threads, block, backend, dyn)

        if plain and len(self._launchers) < 64:  # the checks above passed for this pair
            self._launchers[key] = launcher
        return launcher

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise LaunchArgumentError(f"launch the kernel '{self.name}' with "
                                  f"{self.name}[threads, block](...) or "
                                  f"{self.name}.launch(..., threads=…, block=…)")

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, ArgValue]:
        """The launch arguments by parameter name, checked and converted (FE-15)."""
        return bind_arguments(self.ir, args, kwargs)

    def launch(self, *args: Any, threads: Any = None, block: Any = 256, grid: Any = None,
               backend: str | None = None, shared: Any = None, **kwargs: Any) -> Any:
        """Run the kernel over ``threads`` threads in blocks of ``block`` — or, with
        ``grid`` (FE-24), over a grid of 1 to 3 extents of blocks of ``block`` (an int or 1
        to 3 extents); arrays are updated in place. ``shared`` is the extent in elements
        of the kernel's dynamic shared array (``shared(T)``, FE-50). Inside a
        ``pipeline()`` the launch is recorded instead (and None returned)."""
        dyn = None if shared is None else ("elements", _shared_count(self.name, shared))
        if grid is not None:
            if threads is not None:
                raise LaunchArgumentError(f"{self.name}.launch: give threads= or grid=, "
                                          "not both")
            return self._start(args, kwargs, _shape("grid", grid), _shape("block", block),
                               backend, dyn)
        if threads is None:
            raise LaunchArgumentError(f"{self.name}.launch: give threads= (or grid=)")
        return self._start(args, kwargs, threads, block, backend, dyn)

    def _start(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], threads: Any,
               block: Any, backend: str | None,
               dyn: tuple[str, int] | None = None) -> Any:
        if type(threads) is not int or type(block) is not int:  # (k[...] gave ints: FE-82)
            threads, block = _config((threads, block))
        shared = _dynamic_elements(self.ir, dyn)
        bound = self.bind(args, kwargs)
        active = RECORDER.get()
        if active is not None:
            active.record(self, bound, threads, block, backend, shared)
            return None
        return run_on(backend, self.ir, bound, threads, block, shared)


def _check_function(fn: object, what: str) -> None:
    """``@kernel``/``@helper`` take a Python function (FE-20): its source is what is
    translated. Anything else is a ``TypeError`` saying so (a lambda is a function, refused
    with its location when translated, FE-1)."""
    if isinstance(fn, functools.partial):
        raise TypeError(f"{what} takes a function defined with def, not a functools.partial "
                        "(its source cannot be translated): decorate the function itself")
    if not inspect.isfunction(fn):
        raise TypeError(f"{what} takes a function defined with def, not "
                        f"{type(fn).__name__} {_short_repr(fn)}")


def _check_name(fn: Callable[..., Any], name: object) -> None:
    """``@kernel(name=…)`` must be a name the ``.sk`` text can read back (FE-20)."""
    if name is None:
        return
    from sarek_py.ir.parser import name_problem

    why = name_problem(name)
    if why is None:
        return
    if not isinstance(name, str):
        raise TypeError(f"@kernel(name=…): {why}")
    code = getattr(fn, "__code__", None)
    loc = Loc(code.co_filename, code.co_firstlineno, 1) if code is not None else None
    raise SarekError(f"@kernel(name={_short_repr(name)}): {why}", loc)


def _short_repr(x: object) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _shape(what: str, v: Any) -> tuple[int, ...]:
    """A grid or block shape (FE-24): an int or 1 to 3 positive ints."""
    ext = v if isinstance(v, tuple) else (v,)
    if not 1 <= len(ext) <= 3 or any(
            not isinstance(n, int | np.integer) or isinstance(n, bool) or n <= 0 for n in ext):
        raise LaunchArgumentError(f"the {what} must be a positive integer or a tuple of 1 to "
                                  f"3 positive integers, not {v!r}")
    return tuple(int(n) for n in ext)


def _shared_count(name: str, v: Any, what: str = "shared") -> int:
    if not isinstance(v, int | np.integer) or isinstance(v, bool) or not 0 <= v < 2 ** 31:
        raise LaunchArgumentError(f"{name}: the {what} size must be an integer in "
                                  f"0..{2 ** 31 - 1}, not {v!r}")
    return int(v)


def _dynamic_config(name: str, config: Any) -> tuple[Any, tuple[str, int] | None]:
    """The launch configuration without its dynamic shared size (FE-50), and that size:
    ``("elements", n)`` from ``[grid, block, n]``, ``("bytes", n)`` from numba's
    ``[grid, block, stream, n]`` (``stream`` must be 0 or None: there are no streams)."""
    if not isinstance(config, tuple) or len(config) <= 2:
        return config, None
    if len(config) == 3:
        return config[:2], ("elements", _shared_count(name, config[2]))
    if len(config) == 4:
        stream = config[2]
        if stream is not None and not (isinstance(stream, int) and stream == 0):
            raise LaunchArgumentError(f"{name}[grid, block, stream, nbytes]: sarek_py has no "
                                      f"streams, so stream must be 0 or None, not {stream!r}")
        return config[:2], ("bytes", _shared_count(name, config[3], "dynamic shared bytes"))
    raise LaunchArgumentError("write kernel[threads, block](...), kernel[grid, block, "
                              "shared_elements](...) or numba's kernel[grid, block, 0, "
                              f"shared_bytes](...), not {len(config)} values")


def _dynamic_elements(k: Kernel, dyn: tuple[str, int] | None) -> int | None:
    """The dynamic shared extent in elements of a launch of ``k`` (FE-50), checked: required
    when ``k`` declares ``shared(T)``, refused otherwise; bytes must be whole elements."""
    from sarek_py.ir.dynamic_shared import dynamic_shared, element_bytes

    arr = dynamic_shared(k)
    if arr is None:
        if dyn is not None:
            raise LaunchArgumentError(
                f"kernel '{k.name}' declares no dynamic shared array (x = shared(T) without "
                f"an extent), so its launch cannot give a shared size ({dyn[1]} {dyn[0]}): "
                f"write kernel[grid, block](...) or kernel[threads, block](...)")
        return None
    if dyn is None:
        raise LaunchArgumentError(
            f"kernel '{k.name}' declares the dynamic shared array '{arr.name}' "
            f"({arr.type}): give its size at launch, {k.name}[grid, block, elements](...), "
            f"{k.name}[grid, block, 0, nbytes](...) or {k.name}.launch(..., shared=elements)")
    kind, n = dyn
    if kind == "elements":
        return n
    size = element_bytes(arr.scalar)
    if n % size:
        raise LaunchArgumentError(
            f"kernel '{k.name}': {n} dynamic shared bytes are not a whole number of "
            f"{arr.scalar} elements of '{arr.name}' ({size} bytes each)")
    return n // size


def _config(config: Any) -> tuple[Count, Count]:
    if isinstance(config, tuple):
        if len(config) != 2:
            raise LaunchArgumentError("write kernel[threads, block](...), or "
                                      "kernel[grid, block](...) with tuples (CUDA's spelling)")
        threads, block = config
    else:
        threads, block = config, 256
    if isinstance(threads, tuple) or isinstance(block, tuple):  # CUDA's spelling (FE-24)
        return _shape("grid", threads), _shape("block", block)
    for what, n in (("threads", threads), ("block", block)):
        if not isinstance(n, int | np.integer) or isinstance(n, bool) or n <= 0:
            raise LaunchArgumentError(f"{what} must be a positive integer, not {n!r}")
    return int(threads), int(block)


def bind_arguments(k: Kernel, args: tuple[Any, ...], kwargs: Mapping[str, Any]
                   ) -> dict[str, ArgValue]:
    """Match positional and keyword arguments to ``k``'s parameters, checking each (FE-15)."""
    if not kwargs and len(args) == len(k.params):  # every one by position (FE-82)
        return {p.name: _convert(k, p, a) for p, a in zip(k.params, args, strict=True)}
    if len(args) > len(k.params):
        raise LaunchArgumentError(f"kernel '{k.name}' takes {len(k.params)} arguments, "
                                  f"{len(args)} given")
    out: dict[str, Any] = {}
    for p, a in zip(k.params, args, strict=False):
        out[p.name] = a
    for name, a in kwargs.items():
        if name in out:
            raise LaunchArgumentError(f"argument '{name}' of kernel '{k.name}' given twice")
        if name not in {p.name for p in k.params}:
            raise LaunchArgumentError(f"kernel '{k.name}' has no parameter '{name}'")
        out[name] = a
    missing = [p.name for p in k.params if p.name not in out]
    if missing:
        raise LaunchArgumentError(f"kernel '{k.name}' misses argument(s) {', '.join(missing)}")
    return {p.name: _convert(k, p, out[p.name]) for p in k.params}


#: each scalar type's numpy dtype (``Scalar.dtype`` is a property: this is the hot path of
#: every launch, FE-82)
_DTYPE: dict[Scalar, np.dtype[Any]] = {s: s.dtype for s in Scalar if s is not Scalar.UNIT}
#: the same by the member's id: an enum member's hash is a Python function, an int's is not
_DTYPE_OF: dict[int, np.dtype[Any]] = {id(s): d for s, d in _DTYPE.items()}
_I32_RANGE = range(-(2**31), 2**31)


def _convert(k: Kernel, p: Var, a: Any) -> ArgValue:
    t0 = p.type
    # the common arguments first, checked exactly as below (a launch's hot path, FE-82)
    if isinstance(t0, ArrayType):
        if (type(a) is np.ndarray and a.dtype == _DTYPE_OF[id(t0.elem)] and a.ndim == t0.rank
                and a.flags.writeable):
            return a
    elif type(a) is float and t0.is_float or type(a) is int and t0 is Scalar.I32 \
            and a in _I32_RANGE:
        fast: np.generic = _DTYPE_OF[id(t0)].type(a)
        return fast
    where = f"argument '{p.name}' of kernel '{k.name}'"
    if isinstance(p.type, ArrayType):
        t = p.type
        if isinstance(a, Temporary):  # a pipeline temporary (FE-70)
            return a.sarek_argument(where, t)
        if not isinstance(a, np.ndarray | DeviceArray):
            from sarek_py.runtime.interop import InteropError, adopt, is_foreign_array

            if not is_foreign_array(a):
                raise LaunchArgumentError(
                    f"{where} must be a numpy array of {t.elem} (rank {t.rank}), a "
                    "sarek_py.DeviceArray, a pyopencl array or an object with "
                    f"__cuda_array_interface__ or __dlpack__, not {type(a).__name__}")
            try:
                a = adopt(a, where)  # a foreign array, used in place (FE-61)
            except InteropError as exc:
                raise LaunchArgumentError(exc.message) from None
        if isinstance(a, DeviceArray):  # its buffer, no copy (FE-60)
            if a.dtype != t.elem.dtype or a.ndim != t.rank:
                raise LaunchArgumentError(
                    f"{where} must be an array of dtype {t.elem.dtype} and rank {t.rank}, "
                    f"not a device array of dtype {a.dtype} and rank {a.ndim}")
            return a
        if not isinstance(a, np.ndarray):
            raise LaunchArgumentError(f"{where} must be a numpy array of {t.elem} "
                                      f"(rank {t.rank}), not {type(a).__name__}")
        if a.dtype != t.elem.dtype or a.ndim != t.rank:
            raise LaunchArgumentError(
                f"{where} must be a numpy array of dtype {t.elem.dtype} and rank {t.rank}, "
                f"not dtype {a.dtype} and rank {a.ndim} (no conversion: the results are "
                "written back into this array)")
        if not a.flags.writeable and p.name in kernel_facts(k).written:
            raise LaunchArgumentError(
                f"{where} is a read-only array, and kernel '{k.name}' may store into it "
                "(its results are written back into the array): pass a writable copy, "
                "np.array(...)")
        return a  # read-only and only read: copied in, never written back (FE-15)
    s = p.type
    if isinstance(a, np.ndarray | DeviceArray):
        raise LaunchArgumentError(f"{where} is a scalar {s}, not an array")
    if s is Scalar.BOOL:
        if not isinstance(a, bool | np.bool_):
            raise LaunchArgumentError(f"{where} must be a bool, not {type(a).__name__}")
        return np.bool_(a)
    if isinstance(a, bool | np.bool_):
        raise LaunchArgumentError(f"{where} must be a {s}, not a bool")
    if s.is_int:
        if not isinstance(a, int | np.integer):
            raise LaunchArgumentError(f"{where} must be an integer ({s}), not "
                                      f"{type(a).__name__}")
        lo, hi = (-(2**31), 2**31 - 1) if s is Scalar.I32 else (-(2**63), 2**63 - 1)
        if not lo <= int(a) <= hi:
            raise LaunchArgumentError(f"{where} = {a} does not fit in {s}")
        result: np.generic = s.dtype.type(int(a))
        return result
    if not isinstance(a, int | float | np.integer | np.floating):
        raise LaunchArgumentError(f"{where} must be a number ({s}), not {type(a).__name__}")
    value: np.generic = s.dtype.type(a)
    return value


def is_deep(k: Kernel) -> bool:
    """Whether ``k`` nests deeply enough to need a deep stack (sarek_py.ir.deep)."""
    return not in_deep_thread() and tree_depth(k) > SHALLOW


def run_on(backend: str | None, k: Kernel, args: Mapping[str, ArgValue], threads: Count,
           block: Count, shared: int | None = None) -> Any:
    """Run ``k`` on the named backend (None: the runtime's default) (FE-16); tuples are a
    grid and block shape (FE-24); ``shared``: the dynamic shared extent (FE-50)."""
    runner = get_backend(backend).run_kernel
    kw: dict[str, Any] = {} if shared is None else {"shared": shared}
    if isinstance(threads, tuple) or isinstance(block, tuple):
        grid = threads if isinstance(threads, tuple) else (threads,)
        bshape = block if isinstance(block, tuple) else (block,)
        kw.update(grid=grid, block_shape=bshape)
        threads, block = math.prod(grid) * math.prod(bshape), math.prod(bshape)
    if is_deep(k):
        return call_deep(runner, k, args, threads, block, **kw)
    return runner(k, args, threads, block, **kw)


def get_backend(backend: str | None) -> Any:
    """The runtime backend called ``backend`` (``None``: the runtime's ``default``)."""
    from sarek_py.runtime import get_backend as runtime_backend

    return runtime_backend("default" if backend is None else backend)


def emit(k: Kernel, target: str) -> str:
    """Device source of ``k`` for ``target``."""
    from sarek_py import codegen

    if is_deep(k):
        return call_deep(emit, k, target)
    if target == "cuda":
        return codegen.emit_cuda(k)
    if target == "opencl":
        return codegen.emit_opencl(k)
    if target == "c":
        return codegen.emit_c(k)
    raise SarekError(f"unknown target {target!r}: use 'cuda', 'opencl' or 'c'")


@overload
def kernel(fn: Callable[..., Any], /) -> KernelFunction: ...


@overload
def kernel(*, name: str | None = None) -> Callable[[Callable[..., Any]], KernelFunction]: ...


def kernel(fn: Callable[..., Any] | None = None, /, *, name: str | None = None
           ) -> KernelFunction | Callable[[Callable[..., Any]], KernelFunction]:
    """Make a Python function a kernel: ``@kernel`` or ``@kernel(name="k")`` (FE-1)."""
    if fn is not None:
        return KernelFunction(fn, name=name)
    return lambda f: KernelFunction(f, name=name)


@overload
def helper(fn: Callable[..., Any], /) -> HelperFunction: ...


@overload
def helper(*, pure: bool = False) -> Callable[[Callable[..., Any]], HelperFunction]: ...


def helper(fn: Callable[..., Any] | None = None, /, *, pure: bool = False
           ) -> HelperFunction | Callable[[Callable[..., Any]], HelperFunction]:
    """Make a Python function a device helper: ``@helper`` or ``@helper(pure=True)`` (FE-11)."""
    if fn is not None:
        return HelperFunction(fn, pure=pure)
    return lambda f: HelperFunction(f, pure=pure)
