"""The random inputs of a kernel run (docs/cli.md, CLI-6): every parameter's argument,
drawn in parameter order from a seed, with the sizes given by ``--size``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sarek_py.cli.registry import UsageError
from sarek_py.ir.alloc import check_bytes
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import ArrayType, Scalar

INT_SCALARS = (1, 100)
INT_ELEMENTS = (0, 99)


def make_inputs(k: Kernel, sizes: dict[str, tuple[int, ...]], threads: int,
                seed: int) -> dict[str, Any]:
    """Arguments for every parameter of ``k``, drawn in parameter order from ``seed``.

    ``sizes`` gives an integer scalar its value or an array its extents; arrays of rank 1
    default to ``threads`` elements. Floats are uniform in [-1, 1), integer elements
    uniform in [0, 99], integer scalars in [1, 100], booleans fair coins.
    Raises :class:`UsageError` for a size that does not fit the kernel.
    """
    names = {p.name for p in k.params}
    for name in sizes:
        if name not in names:
            raise UsageError(f"--size {name}: kernel '{k.name}' has no parameter '{name}'")
    rng = np.random.default_rng(seed)
    args: dict[str, Any] = {}
    for p in k.params:  # the sizes first: refuse what memory cannot hold (INT-23)
        if isinstance(p.type, ArrayType):
            shape = _shape(p.name, p.type.shape, sizes.get(p.name), threads)
            # drawing floats goes through float64 (8 bytes an element), then the array,
            # then the interpreter's race shadows (a writer and a reader, int32)
            check_bytes(math.prod(shape) * (16 + p.type.elem.dtype.itemsize),
                        f"the random input '{p.name}' ({'x'.join(map(str, shape))} "
                        "elements)")
    for p in k.params:
        given = sizes.get(p.name)
        t = p.type
        if isinstance(t, ArrayType):
            shape = _shape(p.name, t.shape, given, threads)
            args[p.name] = _random(rng, t.elem, shape)
        elif given is not None:
            if not t.is_int or len(given) != 1:
                raise UsageError(f"--size {p.name}: '{p.name}' is a {t} scalar; --size gives "
                                 "a value only to an integer scalar")
            if given[0] >= 2 ** (t.bits - 1):
                raise UsageError(f"--size {p.name}: {given[0]} does not fit in {t}")
            args[p.name] = t.dtype.type(given[0])
        elif t is Scalar.BOOL:
            args[p.name] = np.bool_(rng.integers(0, 2) == 1)
        elif t.is_int:
            args[p.name] = t.dtype.type(rng.integers(INT_SCALARS[0], INT_SCALARS[1] + 1))
        else:
            args[p.name] = t.dtype.type(rng.uniform(-1.0, 1.0))
    return args


def _shape(name: str, declared: tuple[int | None, ...], given: tuple[int, ...] | None,
           threads: int) -> tuple[int, ...]:
    rank = len(declared)
    if given is not None:
        if len(given) != rank:
            raise UsageError(f"--size {name}: '{name}' has {rank} dimension(s), "
                             f"got {len(given)} extent(s)")
        for d, g in zip(declared, given, strict=True):
            if d is not None and d != g:
                raise UsageError(f"--size {name}: extent {g} differs from the declared {d}")
        return given
    if all(d is not None for d in declared):
        return tuple(d for d in declared if d is not None)
    if rank == 1:
        return (threads,)
    raise UsageError(f"array '{name}' has {rank} dimensions: give its extents with "
                     f"--size {name}={'x'.join(['N'] * rank)}")


def _random(rng: np.random.Generator, elem: Scalar,
            shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    if elem.is_float:
        out: np.ndarray[Any, Any] = rng.uniform(-1.0, 1.0, shape).astype(elem.dtype)
    elif elem.is_int:
        out = rng.integers(INT_ELEMENTS[0], INT_ELEMENTS[1] + 1, shape).astype(elem.dtype)
    else:
        out = rng.integers(0, 2, shape) == 1
    return out


__all__ = ["INT_ELEMENTS", "INT_SCALARS", "make_inputs"]
