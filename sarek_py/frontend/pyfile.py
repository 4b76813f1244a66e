"""The kernels of a Python file as an IR module (FE-18: ``sarek-py print file.py``).

The file is imported as a fresh module (its directory first on ``sys.path``, so that it
can import its neighbours); every ``@kernel`` object found in its namespace is translated,
in the order the file defines them.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

from sarek_py.frontend.kernel import KernelFunction
from sarek_py.frontend.translate import in_source_order
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import HelperFunc, Kernel, Module

_count = itertools.count()


def kernels_of(path: str | Path) -> list[KernelFunction]:
    """The ``@kernel`` objects defined by the Python file ``path``, in definition order."""
    p = Path(path)
    if not p.is_file():
        raise SarekError(f"cannot read '{path}': no such file")
    name = f"_sarek_frontend_file_{next(_count)}_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise SarekError(f"cannot import '{path}' as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(p.resolve().parent))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SarekError:
        raise
    except Exception as exc:
        raise SarekError(f"importing '{path}' failed: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(str(p.resolve().parent))
    here = p.resolve()

    def defined_here(k: KernelFunction) -> bool:
        code = getattr(k.fn, "__code__", None)
        return code is not None and Path(code.co_filename).resolve() == here

    found = [v for v in vars(module).values() if isinstance(v, KernelFunction)]
    unique = [k for k in {id(k): k for k in found}.values() if defined_here(k)]

    def line(k: KernelFunction) -> int:
        code = getattr(k.fn, "__code__", None)
        return code.co_firstlineno if code is not None else 0

    return sorted(unique, key=line)


def load_python_module(path: str | Path) -> Module:
    """The IR module of the kernels of a Python file: their helpers, then the kernels."""
    kernels: list[Kernel] = [k.ir for k in kernels_of(path)]
    helpers: dict[str, HelperFunc] = {}
    for k in kernels:
        for h in k.helpers:
            if helpers.setdefault(h.name, h) != h:
                raise SarekError(f"two different helper functions are named '{h.name}' in "
                                 f"'{path}'")
    return Module(in_source_order(helpers.values()), tuple(kernels))
