"""``sarek-py run`` (docs/cli.md, CLI-6..CLI-8, CLI-11, CLI-14, CLI-30; CG-16, CG-24).

``run FILE --kernel K --threads N`` runs one kernel on random inputs
(:mod:`~sarek_py.cli.inputs`); ``run FILE`` of a host program runs the program. Either way
it prints a digest of every array (:mod:`~sarek_py.cli.report`). ``--compare BACKEND``
also runs it on ``BACKEND`` from the same inputs, ``--against PROGRAM-FILE`` also runs
another program, and both report per array whether the bytes are identical
(:mod:`~sarek_py.cli.compare`).
"""

from __future__ import annotations

import argparse

from sarek_py.cli.compare import against, compare_kernel, compare_program, print_executors
from sarek_py.cli.inputs import make_inputs
from sarek_py.cli.loading import file_arg
from sarek_py.cli.registry import UsageError, command
from sarek_py.cli.report import describe_program_run, describe_run
from sarek_py.cli.running import (
    apply_unchecked,
    at_least,
    extents,
    kernel_runner,
    launch_of,
    positive,
    run_program_args,
    run_target,
    seed_of,
    size,
    sizes,
    warn_endless,
)
from sarek_py.ir.nodes import Kernel


def _configure(p: argparse.ArgumentParser) -> None:
    file_arg(p)
    p.add_argument("--kernel", "-k", metavar="K",
                   help="the kernel to run (required unless FILE holds a host program, "
                        "which then runs as a whole)")
    p.add_argument("--threads", "-n", type=positive, metavar="N",
                   help="number of threads to launch (required with --kernel)")
    p.add_argument("--block", "-b", type=extents, metavar="B",
                   help="threads per block (default 256), or a block of 2 or 3 dimensions "
                        "(BxB or BxBxB)")
    p.add_argument("--grid", "-g", type=extents, metavar="G",
                   help="instead of --threads: a grid of G blocks, or of GxG or GxGxG "
                        "blocks of --block threads (an n-D launch, CLI-17)")
    p.add_argument("--shared", type=int, metavar="N",
                   help="the extent in elements of the kernel's dynamic shared array "
                        "(shared s : T[]), given at each launch (CLI-50, LCH-50)")
    p.add_argument("--size", action="append", type=size, default=[], metavar="NAME=N",
                   help="an integer scalar parameter's value, or an array parameter's "
                        "extents (NAME=RxC for 2-D); of a host program: an integer scalar "
                        "variable's initial value; repeatable")
    p.add_argument("--seed", type=at_least(0), metavar="S",
                   help="seed of the random inputs of a kernel (default 0)")
    p.add_argument("--backend", default="interp",
                   help="where to run: interp (the reference interpreter, default) or a "
                        "runtime of sarek_py.runtime")
    p.add_argument("--no-race-check", action="store_true",
                   help="do not report data races (interpreter)")
    p.add_argument("--unchecked", action="store_true",
                   help="opencl/cuda/c: emit kernels without bounds checks (for benchmarks; "
                        "an out-of-bounds access then corrupts memory; CG-24)")
    p.add_argument("--compare", metavar="BACKEND",
                   help="also run on BACKEND from the same inputs and report per array "
                        "whether the bytes are identical (exit 1 if not)")
    p.add_argument("--input", metavar="FILE",
                   help="host programs: the values their 'read' statements take, separated "
                        "by white space (CLI-30)")
    p.add_argument("--against", metavar="PROGRAM-FILE",
                   help="host programs: also run PROGRAM-FILE (e.g. the output of 'sarek-py "
                        "opt') on the same inputs and backend, and report per variable "
                        "whether the bytes are identical (exit 1 if not)")


@command("run", "run a kernel (of a .sk or .py file) on random inputs, or a host program, "
                "and print a digest of every array", _configure)
def run_command(args: argparse.Namespace) -> int:
    apply_unchecked(args)
    if args.against is not None and args.compare:
        raise UsageError("--against and --compare: give one (--against runs two programs "
                         "on --backend; --compare runs one on two backends)")
    target = run_target(args)
    if not isinstance(target, Kernel):
        if args.against is not None:
            return against(target, args)
        if args.compare:
            return compare_program(target, args)
        result = run_program_args(target, args, args.backend)
        for line in describe_program_run(target, result):
            print(line)
        print_executors(result)
        return 0
    if args.against is not None:
        raise UsageError(f"--against compares two host programs; {args.file} is run as "
                         f"kernel '{target.name}'")
    if args.input is not None:
        raise UsageError(f"--input feeds the 'read' statements of a host program; {args.file} "
                         f"is run as kernel '{target.name}' (its inputs are random, --seed)")
    threads, block, shape = launch_of(args)
    inputs = make_inputs(target, dict(sizes(args.size)), threads, seed_of(args))
    if args.compare:
        return compare_kernel(target, inputs, args)
    run_kernel = kernel_runner(args.backend)
    warn_endless(target, args.backend)
    result = run_kernel(target, inputs, threads, block, check_races=not args.no_race_check,
                        **shape)
    for line in describe_run(target, inputs, result):
        print(line)
    if args.backend == "default":  # the automatic choice, per kernel (NAT-27)
        from sarek_py.runtime import get_backend

        chosen = getattr(get_backend("default"), "choices", {}).get(target.name)
        print(f"backend: default ran kernel {target.name} on "
              f"{chosen or get_backend('default').name}")
    return 0


__all__ = ["run_command"]
