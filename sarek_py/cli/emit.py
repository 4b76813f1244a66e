"""``sarek-py emit FILE --target cuda|opencl|c [--kernel K] [--unchecked]`` (docs/cli.md,
CLI-10; CG-16, CG-24): the C of one kernel, or of every kernel of the file as one
translation unit."""

from __future__ import annotations

import argparse
import sys

from sarek_py.cli.loading import FILE_HELP, find_kernel, is_program_text, load_checked, read_source
from sarek_py.cli.registry import command
from sarek_py.codegen.c99 import C99
from sarek_py.codegen.cstyle import emit, emit_module
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.opencl import OPENCL
from sarek_py.ir.diagnostics import SarekError

_DIALECTS = {"cuda": CUDA, "opencl": OPENCL, "c": C99}


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help=FILE_HELP)
    p.add_argument("--target", "-t", required=True, choices=sorted(_DIALECTS),
                   help="the C dialect: cuda (CUDA C), opencl (OpenCL C) or c (C + OpenMP, NAT-1)")
    p.add_argument("--kernel", "-k", metavar="K",
                   help="the kernel to emit (default: every kernel of the file)")
    p.add_argument("--unchecked", action="store_true",
                   help="no bounds checks on array accesses (CG-24; for benchmarks)")


@command("emit", "print a kernel as CUDA C or OpenCL C", _configure)
def emit_command(args: argparse.Namespace) -> int:
    m = load_checked(args.file)
    if not m.kernels and is_program_text(read_source(args.file)):
        raise SarekError(f"{args.file} holds a host program without kernels: its parallel "
                         "loops become kernels with 'sarek-py opt FILE -p offload --dump-dir "
                         "DIR' (kernels.cu, kernels.cl)")
    d = _DIALECTS[args.target]
    if args.kernel is not None:  # '' names no kernel: an error, not "every kernel"
        text = emit(find_kernel(m, args.kernel, args.file), d,
                    checked=not args.unchecked).source
    else:
        text = emit_module(m.kernels, d, args.file, checked=not args.unchecked)
    sys.stdout.write(text)
    return 0


__all__ = ["emit_command"]
