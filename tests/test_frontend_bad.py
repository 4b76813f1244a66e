"""The corpus of Python constructs outside the kernel subset (FE-12).

Every file of ``tests/frontend_bad/`` defines a kernel ``bad`` that uses one unsupported
construct; its ``# expect:`` line holds a fragment of the error message and ``# <- error``
marks the line the error must point at.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sarek_py.frontend.source import FrontendError

CORPUS = Path(__file__).parent / "frontend_bad"
FILES = sorted(CORPUS.glob("*.py"))


def test_fe12_corpus_is_large() -> None:
    assert len(FILES) >= 40


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_fe12_unsupported_construct_gives_a_located_error(path: Path) -> None:
    text = path.read_text()
    lines = text.splitlines()
    expect = next(ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("# expect:"))
    line = next(n for n, ln in enumerate(lines, 1) if ln.rstrip().endswith("# <- error"))
    spec = importlib.util.spec_from_file_location(f"frontend_bad_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(FrontendError) as info:
        _ = module.bad.ir
    err = info.value
    assert expect in err.message
    assert err.loc is not None
    assert (err.loc.file, err.loc.line) == (str(path), line), str(err)
    shown = str(err).splitlines()
    assert shown[0].startswith(f"{path}:{line}:{err.loc.col}: error: ")
    assert shown[1] == lines[line - 1]
    assert shown[2] == " " * (err.loc.col - 1) + "^"
