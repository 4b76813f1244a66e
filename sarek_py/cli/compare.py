"""``run --compare`` and ``run --against`` (docs/cli.md, CG-16, CLI-11, CLI-14, HP-18):
the same kernel or program on two backends, or two programs on one backend, compared
bitwise; exit status 1 when something differs."""

from __future__ import annotations

import argparse
import copy
import sys
from typing import Any

import numpy as np

from sarek_py.cli.loading import check_any, load_any
from sarek_py.cli.registry import UsageError
from sarek_py.cli.report import describe_program_run, describe_run
from sarek_py.cli.running import kernel_runner, launch_of, run_program_args, warn_endless
from sarek_py.ir.host.program import Program
from sarek_py.ir.nodes import Kernel


def compare_arrays(k: Kernel, a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """Per array parameter: (name, bytes identical, a short description)."""
    return compare_named([p.name for p in k.params if p.is_array], a, b)


def compare_named(names: list[str], a: dict[str, Any],
                  b: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """Per array name: (name, bytes identical, a short description)."""
    out = []
    for name in names:
        x = np.ascontiguousarray(a[name])
        y = np.ascontiguousarray(b[name])
        same = x.shape == y.shape and x.tobytes() == y.tobytes()
        if same:
            out.append((name, True, f"identical ({x.nbytes} bytes)"))
            continue
        if x.shape != y.shape:
            out.append((name, False, f"DIFFERENT: shapes {x.shape} and {y.shape}"))
            continue
        flat_x, flat_y = x.reshape(-1), y.reshape(-1)
        bx = flat_x.view(np.uint8).reshape(flat_x.size, -1)
        by = flat_y.view(np.uint8).reshape(flat_y.size, -1)
        differ = np.flatnonzero((bx != by).any(axis=1))
        first = int(differ[0])
        out.append((name, False, f"DIFFERENT: {differ.size} of {flat_x.size} elements differ "
                                   f"(first at flat index {first}: {flat_x[first]!r} vs "
                                   f"{flat_y[first]!r})"))
    return out


def compare_kernel(k: Kernel, inputs: dict[str, Any], args: argparse.Namespace) -> int:
    """``run FILE --kernel K --compare C`` (CG-16): the kernel on ``--backend`` and on ``C``
    from copies of the same inputs, the first run's report, then per array whether the
    bytes are identical, and whether the stop codes agree."""
    mine = copy.deepcopy(inputs)
    theirs = copy.deepcopy(inputs)
    threads, block, shape = launch_of(args)  # CLI-17
    warn_endless(k, args.backend, args.compare)
    res_a = kernel_runner(args.backend)(k, mine, threads, block,
                                        check_races=not args.no_race_check, **shape)
    res_b = kernel_runner(args.compare)(k, theirs, threads, block,
                                        check_races=not args.no_race_check, **shape)
    for line in describe_run(k, mine, res_a):
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


def print_executors(*results: Any) -> None:
    """When a run was not on the interpreter alone, the line naming what ran each program
    (HP-17), on standard error (so that the digests on standard output of two runs can be
    compared as they are)."""
    executors = [getattr(res, "executor", None) for res in results]
    if all(ex is None or not ex.offloaded for ex in executors):
        return
    for ex in executors:
        if ex is not None:
            print(ex.line(), file=sys.stderr)


def compare_program(p: Program, args: argparse.Namespace) -> int:
    """``run PROGRAM --compare C``: the program on both backends, then per allocated array
    whether the bytes are identical, and whether the stop codes agree (CLI-11, CG-16).
    Each run names its executor: on a device backend the parallel loops run there
    (HP-17), so the comparison is never the interpreter with itself."""
    res_a = run_program_args(p, args, args.backend)
    res_b = run_program_args(p, args, args.compare)
    for line in describe_program_run(p, res_a):
        print(line)
    print_executors(res_a, res_b)
    print(f"compare {args.backend} with {args.compare}:")
    names = [d.var.name for d in p.decls if isinstance(res_a.values.get(d.var.name), np.ndarray)
             or isinstance(res_b.values.get(d.var.name), np.ndarray)]
    ok = True
    for name in names:
        if not (isinstance(res_a.values.get(name), np.ndarray)
                and isinstance(res_b.values.get(name), np.ndarray)):
            ok = False
            print(f"  {name}: DIFFERENT: allocated on one backend only")
            continue
        ((_, same, text),) = compare_named([name], res_a.values, res_b.values)
        ok &= same
        print(f"  {name}: {text}")
    if res_a.stop_code != res_b.stop_code:
        ok = False
        print(f"  stop codes: DIFFERENT ({res_a.stop_code} vs {res_b.stop_code})")
    return 0 if ok else 1


def compare_programs(a: Program, res_a: Any, b: Program, res_b: Any,
                     b_label: str = "") -> tuple[bool, list[str]]:
    """HP-18: every variable program ``a`` declares against ``b``'s variable of the same
    name, bitwise (arrays: shape and bytes; scalars: type and bytes; an array allocated in
    one run only differs), then the output lines and the stop codes. ``b``'s own extra
    variables (a pass's copies and counters) are listed, not compared."""
    lines: list[str] = []
    ok = True
    for d in a.decls:
        name = d.var.name
        if name not in res_b.values:
            ok = False
            lines.append(f"  {name}: DIFFERENT: {b_label or b.name} declares no '{name}'")
            continue
        x, y = res_a.values.get(name), res_b.values.get(name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
                ok = False
                lines.append(f"  {name}: DIFFERENT: allocated in one run only")
                continue
            if x.dtype != y.dtype:
                ok = False
                lines.append(f"  {name}: DIFFERENT: element types {x.dtype} and {y.dtype}")
                continue
            ((_, same, text),) = compare_named([name], res_a.values, res_b.values)
        elif x is None and y is None:
            same, text = True, "not allocated in either run"
        else:
            bx, by = np.asarray(x), np.asarray(y)
            same = bx.dtype == by.dtype and bx.tobytes() == by.tobytes()
            text = "identical" if same else f"DIFFERENT: {x!r} vs {y!r}"
        ok &= same
        lines.append(f"  {name}: {text}")
    extra = [d.var.name for d in b.decls if d.var.name not in {e.var.name for e in a.decls}]
    if extra:
        lines.append(f"  not compared (declared by {b_label or b.name} only): "
                     f"{', '.join(extra)}")
    if res_a.output != res_b.output:
        ok = False
        lines.append(f"  output: DIFFERENT ({len(res_a.output)} and {len(res_b.output)} "
                     "lines)")
    if res_a.stop_code != res_b.stop_code:
        ok = False
        lines.append(f"  stop codes: DIFFERENT ({res_a.stop_code} vs {res_b.stop_code})")
    return ok, lines


def against(p: Program, args: argparse.Namespace) -> int:
    """``run A --against B`` (HP-18, CLI-14): both programs on ``--backend`` with the same
    ``--size`` values; every variable of A compared bitwise with B's; exit 1 if one
    differs."""
    other = load_any(args.against)
    if not isinstance(other, Program):
        raise UsageError(f"--against {args.against}: holds kernels, not a host program")
    check_any(other)
    res_a = run_program_args(p, args, args.backend)
    res_b = run_program_args(other, args, args.backend)
    for line in describe_program_run(p, res_a):
        print(line)
    print_executors(res_a, res_b)
    ok, lines = compare_programs(p, res_a, other, res_b, args.against)
    print(f"compare {args.file} with {args.against} (on {args.backend}):")
    for line in lines:
        print(line)
    return 0 if ok else 1


__all__ = ["against", "compare_arrays", "compare_kernel", "compare_named", "compare_program",
           "compare_programs", "print_executors"]
