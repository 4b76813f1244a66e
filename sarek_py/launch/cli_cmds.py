"""The ``emit`` subcommand and ``run --compare`` (docs: ``sarek-py emit --help``).

``sarek-py emit FILE --target cuda|opencl [--kernel K]`` prints the C of one kernel (or of
every kernel of the file, as one translation unit). ``sarek-py run … --backend B --compare C`` runs the kernel on
both backends from the same inputs and reports, per array argument, whether the bytes are
identical; the exit status is 1 when one differs (CG-16).

The module registers itself with :mod:`sarek_py.cli` when imported (it is named in
``sarek_py.cli.PLUGINS``); ``run`` keeps its own options and runner and gains ``--compare``.
"""

from __future__ import annotations

import argparse
import copy
import sys
from typing import Any

import attrs
import numpy as np

from sarek_py import cli
from sarek_py.codegen.cstyle import emit, emit_module
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.opencl import OPENCL
from sarek_py.ir.nodes import Kernel

_DIALECTS = {"cuda": CUDA, "opencl": OPENCL}


def _configure_emit(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a .sk file ('-' for standard input)")
    p.add_argument("--target", "-t", required=True, choices=sorted(_DIALECTS),
                   help="the C dialect: cuda (CUDA C) or opencl (OpenCL C)")
    p.add_argument("--kernel", "-k", metavar="K",
                   help="the kernel to emit (default: every kernel of the file)")


@cli.command("emit", "print a kernel as CUDA C or OpenCL C", _configure_emit)
def emit_command(args: argparse.Namespace) -> int:
    m = cli.load_checked(args.file)
    d = _DIALECTS[args.target]
    if args.kernel:
        text = emit(cli.find_kernel(m, args.kernel, args.file), d).source
    else:
        text = emit_module(m.kernels, d, args.file)
    sys.stdout.write(text)
    return 0


def compare_arrays(k: Kernel, a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """Per array parameter: (name, bytes identical, a short description)."""
    out = []
    for p in k.params:
        if not p.is_array:
            continue
        x = np.ascontiguousarray(a[p.name])
        y = np.ascontiguousarray(b[p.name])
        same = x.tobytes() == y.tobytes()
        if same:
            out.append((p.name, True, f"identical ({x.nbytes} bytes)"))
            continue
        flat_x, flat_y = x.reshape(-1), y.reshape(-1)
        bx = flat_x.view(np.uint8).reshape(flat_x.size, -1)
        by = flat_y.view(np.uint8).reshape(flat_y.size, -1)
        differ = np.flatnonzero((bx != by).any(axis=1))
        first = int(differ[0])
        out.append((p.name, False, f"DIFFERENT: {differ.size} of {flat_x.size} elements differ "
                                   f"(first at flat index {first}: {flat_x[first]!r} vs "
                                   f"{flat_y[first]!r})"))
    return out


_original_run: cli.Command | None = None


def _configure_run(p: argparse.ArgumentParser) -> None:
    assert _original_run is not None
    _original_run.configure(p)
    p.add_argument("--compare", metavar="BACKEND",
                   help="also run on BACKEND from the same inputs and report per array "
                        "whether the bytes are identical (exit 1 if not)")


def run_command(args: argparse.Namespace) -> int:
    assert _original_run is not None
    if not args.compare:
        return _original_run.run(args)
    k = cli.find_kernel(cli.load_checked(args.file), args.kernel, args.file)
    inputs = cli.make_inputs(k, dict(cli._sizes(args.size)), args.threads, args.seed)
    mine = copy.deepcopy(inputs)
    theirs = copy.deepcopy(inputs)
    res_a = cli._backend(args.backend)(k, mine, args.threads, args.block,
                                      check_races=not args.no_race_check)
    res_b = cli._backend(args.compare)(k, theirs, args.threads, args.block,
                                      check_races=not args.no_race_check)
    for line in cli.describe_run(k, mine, res_a):
        print(line)
    ok = True
    print(f"compare {args.backend} with {args.compare}:")
    for name, same, text in compare_arrays(k, mine, theirs):
        ok &= same
        print(f"  {name}: {text}")
    codes_a = np.asarray(res_a.stop_codes)
    codes_b = np.asarray(res_b.stop_codes)
    if codes_a.any() or codes_b.any():
        same_codes = codes_a.tobytes() == codes_b.tobytes()
        ok &= same_codes
        print(f"  stop codes: {'identical' if same_codes else 'DIFFERENT'}")
    return 0 if ok else 1


def _install() -> None:
    global _original_run
    current = cli.COMMANDS.get("run")
    if current is None or current.run is run_command:
        return
    _original_run = current
    cli.COMMANDS["run"] = attrs.evolve(current, configure=_configure_run, run=run_command)


_install()
