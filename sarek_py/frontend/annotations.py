"""Type markers for kernel parameters and casts: ``Vec[f32]``, ``Vec2[f64]``, ``i32`` … (FE-2).

A scalar marker (``f32``, ``f64``, ``i32``, ``i64``, ``boolean``) is three things at once:
a parameter annotation, a cast inside a kernel (``f32(i)``), and, called in ordinary Python,
a constructor of the matching numpy scalar (``f32(2.5)`` is ``np.float32(2.5)``) to pass
scalars of the exact type to a launch. ``Vec[t]``, ``Vec2[t]``, ``Vec3[t]`` annotate
global arrays of rank 1, 2, 3 (numpy arrays of dtype ``t``, row-major).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from sarek_py.ir.types import ArrayType, Scalar, array


@attrs.frozen
class ScalarMarker:
    """A scalar type usable as an annotation, a cast in kernels, a numpy constructor on the host."""

    scalar: Scalar

    def __call__(self, value: Any) -> np.generic:
        """The numpy scalar of this type (host side; inside a kernel the call is a cast)."""
        result: np.generic = self.scalar.dtype.type(value)
        return result

    def __repr__(self) -> str:
        return "boolean" if self.scalar is Scalar.BOOL else self.scalar.value

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype, so that ``np.dtype(f32)``, ``sarek_py.empty(n, f32)`` and
        ``p.empty(n, f32)`` read the marker as numpy reads ``np.float32`` (FE-63)."""
        return self.scalar.dtype


@attrs.frozen
class ArrayMarker:
    """``Vec[t]`` and friends: a global array parameter of element ``elem`` and rank ``rank``."""

    elem: Scalar
    rank: int

    @property
    def type(self) -> ArrayType:
        return array(self.elem, self.rank)

    def __repr__(self) -> str:
        name = "Vec" if self.rank == 1 else f"Vec{self.rank}"
        return f"{name}[{ScalarMarker(self.elem)!r}]"


def _array_marker(rank: int, item: object) -> ArrayMarker:
    if not isinstance(item, ScalarMarker) or item.scalar is Scalar.UNIT:
        raise TypeError(f"an array annotation takes a scalar type (f32, i32 …), not {item!r}")
    return ArrayMarker(item.scalar, rank)


class Vec:
    """``Vec[f32]``: a rank-1 global array parameter (a 1-D numpy array of that dtype)."""

    rank = 1

    def __class_getitem__(cls, item: object) -> ArrayMarker:
        return _array_marker(cls.rank, item)


class Vec2(Vec):
    """``Vec2[f64]``: a rank-2 global array parameter (row-major 2-D numpy array)."""

    rank = 2


class Vec3(Vec):
    """``Vec3[i32]``: a rank-3 global array parameter."""

    rank = 3


f32 = ScalarMarker(Scalar.F32)
f64 = ScalarMarker(Scalar.F64)
i32 = ScalarMarker(Scalar.I32)
i64 = ScalarMarker(Scalar.I64)
boolean = ScalarMarker(Scalar.BOOL)

SCALARS: dict[Scalar, ScalarMarker] = {m.scalar: m for m in (f32, f64, i32, i64, boolean)}
