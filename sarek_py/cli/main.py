"""The ``sarek-py`` command (docs/cli.md).

A thin shell over the library: each subcommand is one small function registered with
:func:`command`, which gives it an ``argparse`` sub-parser (``--help`` included) and a
runner returning the exit status. Other modules add subcommands the same way::

    from sarek_py.cli.main import command, load_module

    def _configure(p: argparse.ArgumentParser) -> None:
        p.add_argument("file")

    @command("emit", "print a kernel as CUDA C or OpenCL C", _configure)
    def _emit(args: argparse.Namespace) -> int:
        ...

and are named in :data:`PLUGINS` so that ``main`` imports them. Exit status: 0 success,
1 invalid input, refusal or run-time error (the error's text, ``file:line:col: error: …``
with the source line and a caret, on stderr), 2 usage error. A user's mistake never
prints a traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from sarek_py.ir.alloc import check_bytes
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Kernel, Module
from sarek_py.ir.types import ArrayType, Scalar

if TYPE_CHECKING:
    from sarek_py.ir.host.program import Program

PROG = "sarek-py"

#: modules that register further subcommands when imported (emit, fuse, explain, opt …)
PLUGINS: tuple[str, ...] = ("sarek_py.cli.emit", "sarek_py.cli.opt",
                            "sarek_py.cli.fuse")

Runner = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """A command line that cannot be carried out as written (exit status 2)."""


@attrs.frozen
class Command:
    """A subcommand: its name, one line of help, how to add its arguments, its runner."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Runner


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str,
            configure: Callable[[argparse.ArgumentParser], None]) -> Callable[[Runner], Runner]:
    """Register the decorated function as subcommand ``name``."""

    def register(run: Runner) -> Runner:
        if name in COMMANDS and COMMANDS[name].run is not run:
            raise ValueError(f"subcommand {name!r} registered twice")
        COMMANDS[name] = Command(name, help, configure, run)
        return run

    return register


# ----------------------------------------------------------------------------- reading

_SOURCES: dict[str, str] = {}


def read_source(path: str) -> str:
    """The text of ``path`` (``-`` for standard input), decoded strictly as UTF-8.

    Standard input is read once per command: a second call gives the same text. A missing
    file, a directory, an unreadable file or bytes that are not UTF-8 raise a
    :class:`SarekError` (exit status 1).
    """
    from sarek_py.ir.lexer import decode_source

    if path == "-":
        if "<stdin>" in _SOURCES:
            return _SOURCES["<stdin>"]
        data = read_capped(sys.stdin.buffer, "standard input")
        name = "<stdin>"
    else:
        p = Path(path)
        if p.is_dir():
            raise SarekError(f"cannot read '{path}': it is a directory")
        try:
            with p.open("rb") as f:
                data = read_capped(f, f"'{path}'")
        except FileNotFoundError:
            raise SarekError(f"cannot read '{path}': no such file") from None
        except OSError as exc:
            raise SarekError(f"cannot read '{path}': {exc.strerror or exc}") from None
        name = path
    text = decode_source(data, name)
    _SOURCES[name] = text
    return text


#: the largest input file read (CLI-16): an endless input (a device, a pipe) stops there;
#: the lexer reads 4 MiB of dense tokens in about 5 s
MAX_INPUT_BYTES = 4 << 20


def read_capped(f: Any, what: str) -> bytes:
    """All bytes of the binary stream ``f``, or a :class:`SarekError` when it holds more
    than :data:`MAX_INPUT_BYTES` (without reading further)."""
    data: bytes = f.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise SarekError(f"cannot read {what}: longer than {MAX_INPUT_BYTES >> 20} MiB (the "
                         "largest input sarek-py reads)")
    return data


#: a line that starts a host program (specs/host-program.md, HP-10)
_PROGRAM = re.compile(r"^\s*program\s+\w+", re.MULTILINE)


def is_program_text(text: str) -> bool:
    """Whether a ``.sk`` text holds a host ``program`` item (CLI-10) rather than only
    kernels and helpers."""
    return _PROGRAM.search(text) is not None


def _source_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def load_any(path: str) -> Module | Program:
    """The parsed (not yet checked) contents of a file (CLI-10): a host
    :class:`~sarek_py.ir.host.program.Program` when the ``.sk`` text holds a ``program``
    item, a kernel :class:`Module` otherwise (``.sk`` text, or the ``@kernel`` functions of
    a Python ``.py`` file translated by the front end, specs/frontend.md FE-18)."""
    if path.endswith(".py"):
        from sarek_py.frontend.pyfile import load_python_module

        return load_python_module(path)
    text = read_source(path)
    if is_program_text(text):
        from sarek_py.ir.host.text import parse_program

        return parse_program(text, _source_name(path))
    from sarek_py.ir.parser import parse_module

    return parse_module(text, _source_name(path))


def program_module(p: Program) -> Module:
    """The helpers and kernels of a host program as a kernel module."""
    return Module(p.helpers, p.kernels)


def load_module(path: str) -> Module:
    """The parsed (not yet checked) kernel module of a ``.sk`` file, or the ``@kernel``
    functions of a Python ``.py`` file translated by the front end (specs/frontend.md,
    FE-18). A file holding a host program gives the program's helpers and kernels."""
    m = load_any(path)
    return m if isinstance(m, Module) else program_module(m)


def check_any(m: Module | Program) -> None:
    """Check a kernel module (specs/ir.md) or a host program: its helpers and kernels,
    then its host statements and parallel loops (HP-9)."""
    from sarek_py.ir.typecheck import check_module

    if isinstance(m, Module):
        check_module(m)
        return
    from sarek_py.host.check import check_program

    check_module(program_module(m))
    check_program(m)


def load_checked(path: str) -> Module:
    """The parsed and checked kernel module of a file (of a host program: its helpers and
    kernels, CLI-10)."""
    from sarek_py.ir.typecheck import check_module

    m = load_module(path)
    check_module(m)
    return m


def find_kernel(m: Module, name: str, path: str) -> Kernel:
    try:
        return m.kernel(name)
    except KeyError:
        names = ", ".join(k.name for k in m.kernels) or "none"
        raise SarekError(f"no kernel '{name}' in {path} (kernels: {names})") from None


# ------------------------------------------------------------------------ subcommands


#: the help of a FILE argument that the front end also reads
FILE_HELP = ("a .sk file (kernels, or a host program), a .py file of @kernel functions "
             "(the Python front end), or '-' for standard input (.sk text)")


def _file_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help=FILE_HELP)


def _configure_print(p: argparse.ArgumentParser) -> None:
    _file_arg(p)
    p.add_argument("--sexp", action="store_true",
                   help="print the lossless S-expression form instead of .sk text")


@command("print", "parse a .sk (or .py) file and print it back in canonical .sk form",
         _configure_print)
def _print(args: argparse.Namespace) -> int:
    m = load_any(args.file)
    if not isinstance(m, Module):
        if args.sexp:
            from sarek_py.ir.host.sexp import program_to_sexp

            text = program_to_sexp(m)
        else:
            from sarek_py.ir.host.text import print_program

            text = print_program(m)
    elif args.sexp:
        from sarek_py.ir.sexp import to_sexp

        text = to_sexp(m)
    else:
        from sarek_py.ir.printer import print_module

        text = print_module(m)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


@command("check", "parse and check a .sk (or .py) file (types, scopes, barriers, purity)",
         _file_arg)
def _check(args: argparse.Namespace) -> int:
    m = load_any(args.file)
    check_any(m)
    kernels = ", ".join(k.name for k in m.kernels) or "none"
    counts = f"{len(m.kernels)} kernel(s): {kernels}; {len(m.helpers)} helper(s)"
    if isinstance(m, Module):
        print(f"{args.file}: ok ({counts})")
    else:
        loops = _count_parfors(m)
        print(f"{args.file}: ok (program {m.name}: {counts}; {len(m.procedures)} "
              f"procedure(s); {loops} parallel loop(s))")
    return 0


def _count_parfors(p: Program) -> int:
    """The parallel loops of a program's body and procedures."""
    from sarek_py.ir.host.program import ParFor, iter_host

    bodies = [p.body, *(proc.body for proc in p.procedures)]
    return sum(isinstance(s, ParFor) for b in bodies for s in iter_host(b))


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}: {text}")
        return n

    return parse


_positive = _at_least(1)


def _size(text: str) -> tuple[str, tuple[int, ...]]:
    name, eq, value = text.partition("=")
    parts = value.split("x")
    if not eq or not name.isidentifier() or not all(x.isdigit() for x in parts):
        raise argparse.ArgumentTypeError(
            f"expected NAME=N or NAME=RxC (non-negative integers), got {text!r}")
    return name, tuple(int(x) for x in parts)


def _configure_run(p: argparse.ArgumentParser) -> None:
    _file_arg(p)
    p.add_argument("--kernel", "-k", metavar="K",
                   help="the kernel to run (required unless FILE holds a host program, "
                        "which then runs as a whole)")
    p.add_argument("--threads", "-n", type=_positive, metavar="N",
                   help="number of threads to launch (required with --kernel)")
    p.add_argument("--block", "-b", type=_positive, metavar="B",
                   help="threads per block (default 256)")
    p.add_argument("--size", action="append", type=_size, default=[], metavar="NAME=N",
                   help="an integer scalar parameter's value, or an array parameter's "
                        "extents (NAME=RxC for 2-D); of a host program: an integer scalar "
                        "variable's initial value; repeatable")
    p.add_argument("--seed", type=_at_least(0), metavar="S",
                   help="seed of the random inputs of a kernel (default 0)")
    p.add_argument("--backend", default="interp",
                   help="where to run: interp (the reference interpreter, default) or a "
                        "runtime of sarek_py.runtime")
    p.add_argument("--no-race-check", action="store_true",
                   help="do not report data races (interpreter)")
    p.add_argument("--unchecked", action="store_true",
                   help="opencl/cuda: emit kernels without bounds checks (for benchmarks; "
                        "an out-of-bounds access then corrupts memory; CG-24)")


def apply_unchecked(args: argparse.Namespace) -> None:
    """``run --unchecked`` (CG-24): the device backends named by ``--backend`` (and
    ``--compare``) emit their kernels without bounds checks; refused for the interpreter,
    which always checks."""
    if not getattr(args, "unchecked", False):
        return
    names = [args.backend, *([args.compare] if getattr(args, "compare", None) else [])]
    if all(n == "interp" for n in names):
        raise UsageError("--unchecked: the interpreter always checks its accesses; the flag "
                         "applies to --backend opencl or cuda")
    from sarek_py.runtime import get_backend

    for n in names:
        if n != "interp":
            get_backend(n).checked = False


@command("run", "run a kernel (of a .sk or .py file) on random inputs, or a host program, "
                "and print a digest of every array", _configure_run)
def _run(args: argparse.Namespace) -> int:
    apply_unchecked(args)
    target = run_target(args)
    if not isinstance(target, Kernel):
        result = run_program_args(target, args, args.backend)
        for line in describe_program_run(target, result):
            print(line)
        return 0
    inputs = make_inputs(target, dict(_sizes(args.size)), args.threads, seed_of(args))
    run_kernel = _backend(args.backend)
    result = run_kernel(target, inputs, args.threads, block_of(args),
                        check_races=not args.no_race_check)
    for line in describe_run(target, inputs, result):
        print(line)
    return 0


def seed_of(args: argparse.Namespace) -> int:
    """``--seed`` of a kernel run (default 0)."""
    return 0 if args.seed is None else int(args.seed)


def block_of(args: argparse.Namespace) -> int:
    """``--block`` of a kernel run (default 256)."""
    return 256 if args.block is None else int(args.block)


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
        if args.threads is None:
            raise UsageError("the following argument is required to run a kernel: "
                             "--threads N")
        check_module(mod)
        return find_kernel(mod, args.kernel, args.file)
    given = [opt for opt, v in (("--threads", args.threads), ("--block", args.block),
                                ("--seed", args.seed)) if v is not None]
    if given:
        raise UsageError(f"{', '.join(given)}: {args.file} holds the host program "
                         f"'{m.name}', whose parallel loops and launches set their own "
                         "threads; name a kernel with --kernel to run it alone")
    check_any(m)
    return m


def program_preset(p: Program, sizes: Sequence[tuple[str, tuple[int, ...]]]) -> dict[str, Any]:
    """``--size NAME=N`` of a program run: the initial value of integer scalar ``NAME``
    (replacing its declared initial value). Raises :class:`UsageError` otherwise."""
    out: dict[str, Any] = {}
    for name, value in _sizes(sizes):
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
    """Run host program ``p`` (HP-13) with ``--size`` presets, its parallel loops and
    launches on ``backend`` (``interp``: the reference interpreter; a device backend runs
    the offloaded program, HP-17); the ``HostResult`` with its ``executor``."""
    from sarek_py.host.backend import run_program_on

    preset = program_preset(p, args.size)
    # HP-17: on a device backend the parallel loops run there too (offloaded), never on
    # the interpreter; the result names its executor
    result, executor = run_program_on(p, backend, preset, check_races=not args.no_race_check)
    return attrs.evolve(result, executor=executor)


def describe_program_run(p: Program, result: Any) -> list[str]:
    """The report of a program run (CLI-11): the program's output lines, then one line per
    declared variable in declaration order (``NAME = VALUE`` for a scalar, the array line
    of CLI-7 for an array, ``NAME: not allocated`` for an array without storage), then
    ``stop: program stopped with code C`` when it executed ``stop``."""
    lines = list(result.output)
    for d in p.decls:
        name = d.var.name
        value = result.values.get(name)
        if isinstance(d.var.type, ArrayType):
            lines.append(array_line(name, value) if isinstance(value, np.ndarray)
                         else f"{name}: not allocated")
        else:
            lines.append(f"{name} = {value!s}")
    if result.stop_code is not None:
        lines.append(f"stop: program stopped with code {result.stop_code}")
    return lines


def _sizes(pairs: Sequence[tuple[str, tuple[int, ...]]]) -> list[tuple[str, tuple[int, ...]]]:
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise UsageError(f"--size {name}=… given twice")
        seen.add(name)
    return list(pairs)


def _backend(name: str) -> Callable[..., Any]:
    if name == "interp":
        from sarek_py.ir.interp import run_kernel

        return run_kernel
    try:
        runtime = importlib.import_module("sarek_py.runtime")
    except ImportError:
        runtime = None
    get_backend = getattr(runtime, "get_backend", None)
    if get_backend is None:
        raise SarekError(f"backend '{name}' is not available (only 'interp' is)")
    backend = get_backend(name)
    runner: Callable[..., Any] = backend.run_kernel
    return runner


# --------------------------------------------------------------------------- run inputs

INT_SCALARS = (1, 100)
INT_ELEMENTS = (0, 99)
SHOWN_VALUES = 4


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


def array_line(name: str, array: np.ndarray[Any, Any]) -> str:
    """``NAME: sha256=<hex> [v0, v1, v2, v3, ...]`` (CLI-7)."""
    a = np.ascontiguousarray(array)
    digest = hashlib.sha256(a.tobytes()).hexdigest()
    flat = a.reshape(-1)
    shown = [str(v) for v in flat[:SHOWN_VALUES]]
    if flat.size > SHOWN_VALUES:
        shown.append("...")
    return f"{name}: sha256={digest} [{', '.join(shown)}]"


def describe_run(k: Kernel, args: dict[str, Any], result: Any) -> list[str]:
    """The report of a run: each scalar's value, then one line per array parameter
    (``name: sha256=<hex> [first values …]``), then the stop codes if a thread stopped."""
    lines = [f"{p.name} = {args[p.name]!s}" for p in k.params if not p.is_array]
    lines += [array_line(p.name, args[p.name]) for p in k.params if p.is_array]
    codes = getattr(result, "stop_codes", None)
    if codes is not None and np.any(codes != 0):
        stopped = np.asarray(codes)[np.asarray(codes) != 0]
        distinct = ", ".join(str(int(c)) for c in np.unique(stopped))
        lines.append(f"stop: {stopped.size} of {np.asarray(codes).size} threads stopped "
                     f"(codes {distinct})")
    return lines


# ---------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one sub-parser per registered subcommand."""
    for mod in PLUGINS:
        importlib.import_module(mod)
    parser = argparse.ArgumentParser(
        prog=PROG, description="Typed GPU kernel IR: print, check and run .sk programs.")
    sub = parser.add_subparsers(title="subcommands", metavar="COMMAND", required=True)
    for cmd in COMMANDS.values():
        sp = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.configure(sp)
        sp.set_defaults(_command=cmd, _parser=sp)
    return parser


def _shown(err: SarekError) -> str:
    loc = err.loc
    if err.source is None and loc is not None and loc.file in _SOURCES:
        err.with_source(_SOURCES[loc.file])
    return str(err)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else 2
    cmd: Command = args._command
    _SOURCES.clear()
    try:
        # every subcommand runs on a deep stack: programs nest up to MAX_DEPTH levels
        from sarek_py.ir.deep import call_deep

        return call_deep(cmd.run, args)
    except UsageError as exc:
        args._parser.print_usage(sys.stderr)
        print(f"{PROG} {cmd.name}: error: {exc}", file=sys.stderr)
        return 2
    except SarekError as exc:
        print(_shown(exc), file=sys.stderr)
        return 1
    except RecursionError:
        print(f"{PROG} {cmd.name}: error: the input is nested too deeply", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"{PROG} {cmd.name}: error: out of memory (sizes too large?)", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `sarek-py print f.sk | head -1`: stop quietly
        _silence_stdout()
        return 1
    except KeyboardInterrupt:
        return 130


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so exiting does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    # plugins register with the imported module ``sarek_py.cli.main``, not with ``__main__``
    from sarek_py.cli.main import main as _imported_main

    sys.exit(_imported_main())
