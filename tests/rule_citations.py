"""The check that a test file cites every rule of its range of a spec (one helper for the
"every rule is cited" test of each file).

A rule ``PREFIX-n`` is defined in ``specs/<spec>.md`` by a line starting ``**PREFIX-n `` and
cited by the docstring of a test function (``def test_…``, at any depth) of the files
asked. A test that itself calls :func:`assert_rules_cited` cites nothing: its docstring
names the range it checks (``LF-81..LF-84``), which would cite the range's ends.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SPECS = TESTS.parent / "specs"


def defined_rules(spec: str, prefix: str) -> set[int]:
    """The numbers of the rules ``PREFIX-n`` that ``specs/<spec>.md`` defines."""
    text = (SPECS / f"{spec}.md").read_text()
    return {int(n) for n in re.findall(rf"^\*\*{re.escape(prefix)}-(\d+) ", text, re.M)}


def _checks_citations(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id == assert_rules_cited.__name__ for n in ast.walk(fn))


def cited_rules(path: Path, prefix: str) -> set[int]:
    """The numbers ``n`` of ``PREFIX-n`` cited by a docstring of a test function of
    ``path`` (the tests that check citations left out)."""
    cited: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name.startswith("test_") and not _checks_citations(node)):
            doc = ast.get_docstring(node) or ""
            cited |= {int(n) for n in re.findall(rf"\b{re.escape(prefix)}-(\d+)\b", doc)}
    return cited


def assert_rules_cited(here: str, spec: str, prefix: str, lo: int, hi: int, *others: str,
                       gaps: Iterable[int] = ()) -> None:
    """Every number of ``lo..hi`` but ``gaps`` is a rule ``PREFIX-n`` of
    ``specs/<spec>.md``, and every rule of ``lo..hi`` (a gap defined since too) is cited
    by a test of the file ``here`` (a test's ``__file__``) or of ``others`` (names of
    files of tests/)."""
    span, holes = set(range(lo, hi + 1)), set(gaps)
    assert holes < span, (lo, hi, sorted(holes))
    rules = defined_rules(spec, prefix) & span
    assert span - holes <= rules, \
        f"not in specs/{spec}.md: {[f'{prefix}-{n}' for n in sorted(span - holes - rules)]}"
    cited: set[int] = set()
    for path in (Path(here), *(TESTS / name for name in others)):
        cited |= cited_rules(path, prefix)
    missing = sorted(rules - cited)
    assert not missing, f"cited by no test: {[f'{prefix}-{n}' for n in missing]}"
