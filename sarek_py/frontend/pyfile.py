"""The kernels of a Python file as an IR module (FE-18: ``sarek-py print file.py``).

The file is imported as a fresh module (its directory first on ``sys.path``, so that it
can import its neighbours); every ``@kernel`` object found in its namespace is translated,
in the order the file defines them.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import warnings
from pathlib import Path

from sarek_py.frontend.kernel import KernelFunction
from sarek_py.frontend.translate import in_source_order
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.lexer import decode_source
from sarek_py.ir.nodes import HelperFunc, Kernel, Loc, Module

_count = itertools.count()

#: the largest Python file imported (the .sk reader's bound, CLI-16)
MAX_PY_BYTES = 4 << 20


def kernels_of(path: str | Path) -> list[KernelFunction]:
    """The ``@kernel`` objects defined by the Python file ``path``, in definition order."""
    p = Path(path)
    if p.is_dir():
        raise SarekError(f"cannot read '{path}': it is a directory")
    if not p.exists():
        raise SarekError(f"cannot read '{path}': no such file")
    if not p.is_file():
        raise SarekError(f"cannot read '{path}': not a regular file")
    size = p.stat().st_size
    if size > MAX_PY_BYTES:
        raise SarekError(f"cannot read '{path}': longer than {MAX_PY_BYTES >> 20} MiB")
    name = f"_sarek_frontend_file_{next(_count)}_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise SarekError(f"cannot import '{path}' as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(p.resolve().parent))
    sys.modules[name] = module
    try:
        with warnings.catch_warnings():
            # Python's own compile-time warnings ("invalid decimal literal") would print
            # unformatted lines before the located error (FE-22)
            warnings.simplefilter("ignore", SyntaxWarning)
            spec.loader.exec_module(module)
    except SarekError:
        raise
    except SyntaxError as exc:  # FE-22: located, with the line and a caret
        raise _syntax_error(path, exc) from None
    except UnicodeDecodeError:  # a byte that is not UTF-8 (FE-22): located at the byte
        decode_source(p.read_bytes(), str(path))
        raise
    except RecursionError:
        raise SarekError(f"importing '{path}' failed: it is nested too deeply for Python "
                         "to run") from None
    except Exception as exc:
        raise _import_error(path, exc) from None
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


def _source_of(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _syntax_error(path: str | Path, exc: SyntaxError) -> SarekError:
    """A Python syntax error of ``path`` as a located error (FE-22)."""
    line = exc.lineno or 1
    col = exc.offset or 1
    return SarekError(f"Python syntax error: {exc.msg}", Loc(str(path), line, max(col, 1)),
                      _source_of(path))


def _import_error(path: str | Path, exc: BaseException) -> SarekError:
    """An exception raised while importing ``path``, located at the innermost line of
    ``path`` that the traceback passes through (FE-22)."""
    here = Path(path).resolve()
    where: Loc | None = None
    tb = exc.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == here:
            where = Loc(str(path), tb.tb_lineno, 1)
        tb = tb.tb_next
    text = str(exc) if len(str(exc)) <= 300 else str(exc)[:300] + "…"
    return SarekError(f"importing '{path}' failed: {type(exc).__name__}: {text}", where,
                      _source_of(path) if where is not None else None)


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
