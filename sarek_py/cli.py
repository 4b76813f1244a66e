"""The ``sarek-py`` command (docs/cli.md).

A thin shell over the library: each subcommand is one small function registered with
:func:`command`, which gives it an ``argparse`` sub-parser (``--help`` included) and a
runner returning the exit status. Other modules add subcommands the same way::

    from sarek_py.cli import command, load_module

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
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Kernel, Module
from sarek_py.ir.types import ArrayType, Scalar

PROG = "sarek-py"

#: modules that register further subcommands when imported (emit, fuse, explain, opt …)
PLUGINS: tuple[str, ...] = ("sarek_py.launch.cli_cmds", "sarek_py.fusion.opt_cmd",
                            "sarek_py.fusion.cli_cmds")

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

    A missing file, a directory, an unreadable file or bytes that are not UTF-8 raise a
    :class:`SarekError` (exit status 1).
    """
    from sarek_py.ir.lexer import decode_source

    if path == "-":
        data = sys.stdin.buffer.read()
        name = "<stdin>"
    else:
        p = Path(path)
        if p.is_dir():
            raise SarekError(f"cannot read '{path}': it is a directory")
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise SarekError(f"cannot read '{path}': no such file") from None
        except OSError as exc:
            raise SarekError(f"cannot read '{path}': {exc.strerror or exc}") from None
        name = path
    text = decode_source(data, name)
    _SOURCES[name] = text
    return text


def load_module(path: str) -> Module:
    """The parsed (not yet checked) module of a ``.sk`` file, or the ``@kernel`` functions
    of a Python ``.py`` file translated by the front end (specs/frontend.md, FE-18)."""
    from sarek_py.ir.parser import parse_module

    if path.endswith(".py"):
        from sarek_py.frontend.pyfile import load_python_module

        return load_python_module(path)

    text = read_source(path)
    return parse_module(text, "<stdin>" if path == "-" else path)


def load_checked(path: str) -> Module:
    """The parsed and checked module of a ``.sk`` file."""
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


def _file_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a .sk file ('-' for standard input)")


def _configure_print(p: argparse.ArgumentParser) -> None:
    _file_arg(p)
    p.add_argument("--sexp", action="store_true",
                   help="print the lossless S-expression form instead of .sk text")


@command("print", "parse a .sk file and print it back (canonical form)", _configure_print)
def _print(args: argparse.Namespace) -> int:
    m = load_module(args.file)
    if args.sexp:
        from sarek_py.ir.sexp import to_sexp

        text = to_sexp(m)
    else:
        from sarek_py.ir.printer import print_module

        text = print_module(m)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


@command("check", "parse and check a .sk file (types, scopes, barriers, purity)", _file_arg)
def _check(args: argparse.Namespace) -> int:
    m = load_checked(args.file)
    kernels = ", ".join(k.name for k in m.kernels) or "none"
    print(f"{args.file}: ok ({len(m.kernels)} kernel(s): {kernels}; "
          f"{len(m.helpers)} helper(s))")
    return 0


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
    p.add_argument("--kernel", "-k", required=True, metavar="K", help="the kernel to run")
    p.add_argument("--threads", "-n", required=True, type=_positive, metavar="N",
                   help="number of threads to launch")
    p.add_argument("--block", "-b", type=_positive, default=256, metavar="B",
                   help="threads per block (default 256)")
    p.add_argument("--size", action="append", type=_size, default=[], metavar="NAME=N",
                   help="an integer scalar parameter's value, or an array parameter's "
                        "extents (NAME=RxC for 2-D); repeatable")
    p.add_argument("--seed", type=_at_least(0), default=0, metavar="S",
                   help="seed of the random inputs (default 0)")
    p.add_argument("--backend", default="interp",
                   help="where to run: interp (the reference interpreter, default) or a "
                        "runtime of sarek_py.launch.runtime")
    p.add_argument("--no-race-check", action="store_true",
                   help="do not report data races (interpreter)")


@command("run", "run a kernel on random inputs and print a digest of every array",
         _configure_run)
def _run(args: argparse.Namespace) -> int:
    k = find_kernel(load_checked(args.file), args.kernel, args.file)
    inputs = make_inputs(k, dict(_sizes(args.size)), args.threads, args.seed)
    run_kernel = _backend(args.backend)
    result = run_kernel(k, inputs, args.threads, args.block,
                        check_races=not args.no_race_check)
    for line in describe_run(k, inputs, result):
        print(line)
    return 0


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
        runtime = importlib.import_module("sarek_py.launch.runtime")
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


def describe_run(k: Kernel, args: dict[str, Any], result: Any) -> list[str]:
    """The report of a run: each scalar's value, then one line per array parameter
    (``name: sha256=<hex> [first values …]``), then the stop codes if a thread stopped."""
    lines = [f"{p.name} = {args[p.name]!s}" for p in k.params if not p.is_array]
    for p in k.params:
        if not p.is_array:
            continue
        a = np.ascontiguousarray(args[p.name])
        digest = hashlib.sha256(a.tobytes()).hexdigest()
        flat = a.reshape(-1)
        shown = [str(v) for v in flat[:SHOWN_VALUES]]
        if flat.size > SHOWN_VALUES:
            shown.append("...")
        lines.append(f"{p.name}: sha256={digest} [{', '.join(shown)}]")
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
        return cmd.run(args)
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
    sys.exit(main())
