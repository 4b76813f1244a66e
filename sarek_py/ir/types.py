"""Element types, memory spaces and array types of the kernel IR (specs/ir.md, IR-1..IR-3)."""

from __future__ import annotations

import enum

import attrs
import numpy as np

#: the numpy dtype of each storable scalar type, by the type's name (Scalar.dtype)
_DTYPES: dict[str, np.dtype[np.generic]] = {
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64), "bool": np.dtype(np.bool_)}


class Scalar(enum.Enum):
    """An element type. ``UNIT`` is the type of statements and of functions without a value."""

    I32 = "i32"
    I64 = "i64"
    F32 = "f32"
    F64 = "f64"
    BOOL = "bool"
    UNIT = "unit"

    @property
    def is_int(self) -> bool:
        return self in (Scalar.I32, Scalar.I64)

    @property
    def is_float(self) -> bool:
        return self in (Scalar.F32, Scalar.F64)

    @property
    def is_numeric(self) -> bool:
        return self.is_int or self.is_float

    @property
    def bits(self) -> int:
        return {"i32": 32, "i64": 64, "f32": 32, "f64": 64, "bool": 8, "unit": 0}[self.value]

    @property
    def dtype(self) -> np.dtype[np.generic]:
        """The numpy dtype the interpreter and the runtimes use for this type."""
        d = _DTYPES.get(self.value)
        if d is None:
            raise ValueError("unit has no storage")
        return d

    def __str__(self) -> str:
        return self.value


class MemSpace(enum.Enum):
    """Where an array lives: device global memory, per-block shared memory, per-thread local."""

    GLOBAL = "global"
    SHARED = "shared"
    LOCAL = "local"

    def __str__(self) -> str:
        return self.value


def _check_dims(inst: ArrayType, _attr: object, value: tuple[int | None, ...]) -> None:
    if len(value) == 0:
        raise ValueError("an array has at least one dimension")
    if len(inst.lower) != len(value):
        raise ValueError("an array needs one lower bound per dimension")
    for n in value:
        if n is not None and n < 0:
            raise ValueError(f"array extent {n} is negative")


def _check_elem(_inst: ArrayType, _attr: object, value: Scalar) -> None:
    if value is Scalar.UNIT:
        raise ValueError("an array of unit has no storage")


@attrs.frozen
class ArrayType:
    """A row-major array of ``elem``.

    ``lower`` holds a lower bound per dimension (default 0) and ``shape`` an extent per
    dimension, ``None`` when the extent is only known at run time (a parameter's array).
    Shared and local arrays have constant extents (checked by the checker).
    """

    elem: Scalar = attrs.field(validator=_check_elem)
    space: MemSpace = MemSpace.GLOBAL
    lower: tuple[int, ...] = (0,)
    shape: tuple[int | None, ...] = attrs.field(default=(None,), validator=_check_dims)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_constant_shape(self) -> bool:
        return all(n is not None for n in self.shape)

    @property
    def size(self) -> int:
        """Number of elements of a constant-shape array."""
        total = 1
        for n in self.shape:
            if n is None:
                raise ValueError("array has a run-time extent")
            total *= n
        return total

    def __str__(self) -> str:
        dims = []
        for lo, n in zip(self.lower, self.shape, strict=True):
            ext = "" if n is None else str(n)
            dims.append(f"{lo}:{ext}" if lo != 0 else ext)
        space = "" if self.space is MemSpace.GLOBAL else f"{self.space} "
        return f"{space}{self.elem}[{', '.join(dims)}]"


Type = Scalar | ArrayType


def array(elem: Scalar, rank: int = 1, space: MemSpace = MemSpace.GLOBAL) -> ArrayType:
    """A zero-based array type of run-time extents (the usual kernel parameter)."""
    return ArrayType(elem, space, (0,) * rank, (None,) * rank)
