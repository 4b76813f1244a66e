"""Running what ``run`` names (docs/cli.md, CLI-6, CLI-8, CLI-11): the kernel or host
program of a file, its inputs' options, the backend it runs on."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from sarek_py.cli.loading import check_any, find_kernel, load_any, program_module, shown
from sarek_py.cli.registry import UsageError
from sarek_py.ir.interp_endless import endless_loops
from sarek_py.ir.nodes import Kernel, Module
from sarek_py.ir.types import ArrayType

if TYPE_CHECKING:
    from sarek_py.ir.host.program import Program


def at_least(low: int) -> Callable[[str], int]:
    """An ``argparse`` type: an integer ``>= low``."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}: {text}")
        return n

    return parse


positive = at_least(1)


def size(text: str) -> tuple[str, tuple[int, ...]]:
    """An ``argparse`` type: ``NAME=N`` or ``NAME=RxC``."""
    name, eq, value = text.partition("=")
    parts = value.split("x")
    if not eq or not name.isidentifier() or not all(x.isdigit() for x in parts):
        raise argparse.ArgumentTypeError(
            f"expected NAME=N or NAME=RxC (non-negative integers), got {text!r}")
    return name, tuple(int(x) for x in parts)


def sizes(pairs: Sequence[tuple[str, tuple[int, ...]]]) -> list[tuple[str, tuple[int, ...]]]:
    """The ``--size`` values, each name once (else a usage error)."""
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise UsageError(f"--size {name}=… given twice")
        seen.add(name)
    return list(pairs)


def seed_of(args: argparse.Namespace) -> int:
    """``--seed`` of a kernel run (default 0)."""
    return 0 if args.seed is None else int(args.seed)


def extents(text: str) -> tuple[int, ...]:
    """An ``argparse`` type: ``N``, ``NxM`` or ``NxMxK``, positive integers (CLI-17)."""
    parts = text.split("x")
    if not 1 <= len(parts) <= 3 or not all(x.isdigit() and int(x) >= 1 for x in parts):
        raise argparse.ArgumentTypeError(
            f"expected N, NxM or NxMxK (positive integers), got {text!r}")
    return tuple(int(x) for x in parts)


def block_of(args: argparse.Namespace) -> int:
    """``--block`` of a kernel run (default 256): its size, the product of its extents."""
    block = args.block
    if block is None:
        return 256
    if isinstance(block, tuple):
        return math.prod(block)
    return int(block)


def launch_of(args: argparse.Namespace) -> tuple[int, int, dict[str, Any]]:
    """The thread count, block size and n-D shape keywords (``grid``, ``block_shape``) of
    a kernel run (CLI-17): ``--threads N`` with ``--block B`` (or ``BxB[xB]``), or
    ``--grid GxG[xG]`` blocks of ``--block`` threads, the count their product; and
    ``shared``, the dynamic shared extent of ``--shared N`` (CLI-50)."""
    block = args.block if args.block is not None else (256,)
    bshape = block if isinstance(block, tuple) else (int(block),)
    grid = getattr(args, "grid", None)
    dyn: dict[str, Any] = {}
    if getattr(args, "shared", None) is not None:
        dyn["shared"] = args.shared
    if grid is not None:
        return math.prod(grid) * math.prod(bshape), math.prod(bshape), {
            "grid": grid, "block_shape": bshape, **dyn}
    kw: dict[str, Any] = {"block_shape": bshape} if len(bshape) > 1 else {}
    return int(args.threads), math.prod(bshape), {**kw, **dyn}


def apply_unchecked(args: argparse.Namespace) -> None:
    """``run --unchecked`` (CG-24): the device backends named by ``--backend`` (and
    ``--compare``) emit their kernels without bounds checks; refused for the interpreter,
    which always checks."""
    if not getattr(args, "unchecked", False):
        return
    names = [args.backend, *([args.compare] if getattr(args, "compare", None) else [])]
    if all(n == "interp" for n in names):
        raise UsageError("--unchecked: the interpreter always checks its accesses; the flag "
                         "applies to --backend opencl, cuda or c")
    from sarek_py.runtime import get_backend

    for n in names:
        if n != "interp":
            get_backend(n).checked = False


def warn_endless(kernel: Kernel, *backends: str) -> None:
    """INT-29: before ``kernel`` runs on the first of ``backends`` that is not the
    interpreter, a located warning on standard error for each of its loops that never end
    once entered (a device launch cannot be stopped from the host)."""
    device = next((b for b in backends if b != "interp"), None)
    if device is not None:
        for warning in endless_loops(kernel, device):
            print(shown(warning), file=sys.stderr, flush=True)


def kernel_runner(name: str) -> Callable[..., Any]:
    """``run_kernel`` of backend ``name`` (CLI-8): the reference interpreter for ``interp``,
    else the runtime's backend of that name (which says why when it cannot run here)."""
    if name == "interp":
        from sarek_py.ir.interp import run_kernel
        from sarek_py.runtime.fused_errors import speaking_user_terms

        interp: Callable[..., Any] = speaking_user_terms(run_kernel)  # FE-90
        return interp
    from sarek_py.runtime import get_backend

    runner: Callable[..., Any] = get_backend(name).run_kernel
    return runner


def run_target(args: argparse.Namespace) -> Kernel | Program:
    """What ``run`` runs (CLI-6, CLI-11): kernel ``--kernel`` of the checked module, or the
    checked host program when ``FILE`` holds one and no ``--kernel`` is named.

    Raises :class:`UsageError` when ``--kernel`` or ``--threads`` is missing for a kernel,
    or when a kernel-only option (``--threads``, ``--block``, ``--seed``) is given for a
    program."""
    from sarek_py.ir.typecheck import check_module

    m = load_any(args.file)
    if isinstance(m, Module) or args.kernel is not None:
        mod = m if isinstance(m, Module) else program_module(m)
        if args.kernel is None:
            raise UsageError("the following argument is required: --kernel K "
                             f"({args.file} holds kernels, not a host program)")
        grid = getattr(args, "grid", None)
        if args.threads is None and grid is None:
            raise UsageError("the following argument is required to run a kernel (or "
                             "--grid GxG[xG], CLI-17): --threads N")
        if args.threads is not None and grid is not None:
            raise UsageError("--threads and --grid: give one (--grid launches its blocks "
                             "of --block threads, CLI-17)")
        check_module(mod)
        return find_kernel(mod, args.kernel, args.file)
    given = [opt for opt, v in (("--threads", args.threads), ("--block", args.block),
                                ("--grid", getattr(args, "grid", None)),
                                ("--shared", getattr(args, "shared", None)),
                                ("--seed", args.seed)) if v is not None]
    if given:
        raise UsageError(f"{', '.join(given)}: {args.file} holds the host program "
                         f"'{m.name}', whose parallel loops and launches set their own "
                         "threads; name a kernel with --kernel to run it alone")
    check_any(m)
    return m


def program_preset(p: Program, pairs: Sequence[tuple[str, tuple[int, ...]]]) -> dict[str, Any]:
    """``--size NAME=N`` of a program run: the initial value of integer scalar ``NAME``
    (replacing its declared initial value). Raises :class:`UsageError` otherwise."""
    out: dict[str, Any] = {}
    for name, value in sizes(pairs):
        try:
            v = p.var(name)
        except KeyError:
            raise UsageError(f"--size {name}: program '{p.name}' declares no variable "
                             f"'{name}'") from None
        t = v.type
        if isinstance(t, ArrayType) or not t.is_int or len(value) != 1:
            raise UsageError(f"--size {name}: '{name}' is a {t} variable; --size gives a "
                             "value only to an integer scalar of a program")
        if value[0] >= 2 ** (t.bits - 1):
            raise UsageError(f"--size {name}: {value[0]} does not fit in {t}")
        out[name] = t.dtype.type(value[0])
    return out


def run_program_args(p: Program, args: argparse.Namespace, backend: str) -> Any:
    """Run host program ``p`` (HP-13) with ``--size`` presets and the values of
    ``--input FILE`` for its ``read`` statements (HP-45, CLI-30), its parallel loops and
    launches on ``backend`` (``interp``: the reference interpreter; a device backend runs
    the offloaded program, HP-17); the ``HostResult`` with its ``executor``."""
    from sarek_py.host.backend import run_program_on
    from sarek_py.host.input_values import read_input_file

    preset = program_preset(p, args.size)
    # HP-45: --input FILE feeds the program's read statements (each run its own values)
    path = getattr(args, "input", None)
    inputs: Sequence[Any] = () if path is None else read_input_file(path)
    # HP-17: on a device backend the parallel loops run there too (offloaded), never on
    # the interpreter; the result names its executor
    result, executor = run_program_on(p, backend, preset, inputs=inputs,
                                      check_races=not args.no_race_check)
    return attrs.evolve(result, executor=executor)


__all__ = ["apply_unchecked", "at_least", "block_of", "extents", "kernel_runner",
           "launch_of", "positive",
           "program_preset", "run_program_args", "run_target", "seed_of", "size", "sizes"]
