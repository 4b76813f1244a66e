"""The shared check of tests/rule_citations.py (each file's "every rule is cited" test is a
call of it) fails where a rule of the range is cited by no test: only test functions'
docstrings cite, not the checking test's own, not comments or other strings, and the
range's numbers must be rules of the spec (specs/offload.md's OFF-13 … OFF-16 here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rule_citations import assert_rules_cited, cited_rules, defined_rules

CITING = '''
"""Module docstring: OFF-16."""


def test_a() -> None:
    """OFF-13 and OFF-14."""


class TestB:
    def test_b(self) -> None:
        """OFF-15/OFF-16: in a class."""


def test_check() -> None:
    """Each rule OFF-13 … OFF-16 is cited."""
    assert_rules_cited(__file__, "offload", "OFF", 13, 16)
'''


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "test_cites.py"
    path.write_text(text)
    return str(path)


def test_rule_citations_pass_where_every_rule_is_cited(tmp_path: Path) -> None:
    """Every rule cited by a docstring of a test function or method: it passes."""
    here = write(tmp_path, CITING)
    assert cited_rules(Path(here), "OFF") == {13, 14, 15, 16}
    assert_rules_cited(here, "offload", "OFF", 13, 16)


@pytest.mark.parametrize(("old", "new"), [
    ("OFF-15/OFF-16: in a class.", "OFF-15: in a class."),  # only the checker's range
    ("OFF-13 and OFF-14.", "OFF-14."),                       # only the checker's range
    ("OFF-13 and OFF-14.", "OFF-130 and OFF-14."),           # another number
    ("OFF-13 and OFF-14.", "XOFF-13 and OFF-14."),           # another prefix
    ('def test_a() -> None:\n    """OFF-13 and OFF-14."""',  # a helper, not a test
     'def a() -> None:\n    """OFF-13 and OFF-14."""'),
    ('    """OFF-13 and OFF-14."""',                          # not a docstring
     '    x = 1  # OFF-13 and OFF-14\n    "OFF-13 and OFF-14."'),
])
def test_rule_citations_fail_where_a_rule_is_not_cited(tmp_path: Path, old: str,
                                                          new: str) -> None:
    """A rule cited only by the checking test's docstring, the module docstring, a
    comment, a string after the docstring, a function that is not a test, or as part of
    another number or prefix, is not cited: the check fails naming it."""
    text = CITING.replace(old, new)
    assert text != CITING
    with pytest.raises(AssertionError, match="cited by no test"):
        assert_rules_cited(write(tmp_path, text), "offload", "OFF", 13, 16)


def test_rule_citations_fail_where_the_range_is_not_the_specs() -> None:
    """A number of the range that the spec does not define fails unless it is a gap, and
    the gaps must be a proper part of the range (a range of gaps checks nothing)."""
    assert {14, 15, 16, 17} <= defined_rules("offload", "OFF")
    assert 18 not in defined_rules("offload", "OFF")
    with pytest.raises(AssertionError, match=r"not in specs/offload.md: \['OFF-18'\]"):
        assert_rules_cited(__file__, "offload", "OFF", 17, 18)
    with pytest.raises(AssertionError):
        assert_rules_cited(__file__, "offload", "OFF", 18, 18, gaps=(18,))
    with pytest.raises(AssertionError):
        assert_rules_cited(__file__, "offload", "OFF", 17, 18, gaps=(19,))
    with pytest.raises(AssertionError, match=r"cited by no test: \['OFF-17'\]"):
        assert_rules_cited(__file__, "offload", "OFF", 17, 18, gaps=(18,))


def test_rule_citations_read_the_other_files_named(tmp_path: Path) -> None:
    """Rules cited in another file named count; a defined rule inside a gap must be cited
    too."""
    other = tmp_path / "test_other.py"
    other.write_text('def test_o() -> None:\n    """OFF-12."""\n')
    here = write(tmp_path, CITING)
    with pytest.raises(AssertionError, match=r"\['OFF-12'\]"):
        assert_rules_cited(here, "offload", "OFF", 12, 16)
    with pytest.raises(AssertionError, match=r"\['OFF-12'\]"):
        assert_rules_cited(here, "offload", "OFF", 12, 16, gaps=(12,))
    assert_rules_cited(here, "offload", "OFF", 12, 16, str(other))
