"""Loading a script of ``benchmarks/`` as a module in the tests (they are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_benchmark(name: str, tag: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``<name>_<tag>`` (each test file its own
    ``tag``, so that one file's changes to a module's state stay in that file)."""
    module_name = f"{name}_{tag}"
    spec = importlib.util.spec_from_file_location(module_name,
                                                  ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
