"""Mutation fuzzing of the CLI over examples/ (issue 11, "Bad input"; CLI-2, CLI-15,
CLI-16, TXT-32, TXT-33, FE-22): no traceback, no hang, no dead process, every error a
diagnostic. The mutator and the worker pool are in tests/cli_mutants.py.

A quick sample runs in ``make test``; ``make fuzz`` (SAREK_FUZZ=1) runs at least 10,000
mutants (SAREK_FUZZ_MUTANTS overrides the count).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cli_mutants import SEEDS, Report, commands, fuzz, mutate, save_findings

FINDINGS = Path(tempfile.gettempdir()) / "sarek-fuzz-findings"


def _assert_clean(report: Report) -> None:
    if report.findings:
        saved = save_findings(report, FINDINGS)
        first = report.findings[0]
        raise AssertionError(f"{report.summary()}\nfirst: {first.kind}: {' '.join(first.argv)}"
                             f"\n{first.detail[-2000:]}\nmutants saved under {saved[0].parent}")


def test_cli2_mutants_of_every_example_quick_sample() -> None:
    """CLI-2: 300 mutants of the examples, two commands each, in-process (workers with a
    60 s limit per command): no traceback, hang, dead worker or unformatted error."""
    report = fuzz(300, seed=20261201, workers=2, limit=60.0)
    assert report.mutants == 300 and report.runs >= 300
    _assert_clean(report)
    assert report.status[0] > 0 and report.status[1] > 0  # mutants that run and that fail


def test_cli2_mutator_covers_every_example_and_kind() -> None:
    """The mutants come from every example file and include the issue's classes: huge
    numbers, deep nesting, binary bytes."""
    kinds = {p.suffix for p in SEEDS}
    assert kinds == {".sk", ".launches", ".py"}
    rng = random.Random(3)
    seen = {"huge": False, "deep": False, "binary": False}
    for _ in range(400):
        src = rng.choice(SEEDS)
        data = mutate(rng, src.read_bytes(), [src.read_bytes()], src.suffix == ".py")
        seen["huge"] |= b"9" * 4000 in data or b"1e99999" in data or b"0" * 4000 in data
        seen["deep"] |= b"(" * 300 in data or b"- " * 300 in data or b"! " * 300 in data
        seen["binary"] |= any(b > 0x7F or b == 0 for b in data)
    assert all(seen.values()), seen


def test_cli2_subprocess_sample_no_dead_process(tmp_path: Path) -> None:
    """CLI-2: a few mutants through the installed console script in a fresh process each:
    exit status 0, 1 or 2 (never a signal), no traceback."""
    rng = random.Random(7)
    exe = Path(sys.executable).with_name("sarek-py")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "sarek_py.cli"]
    for i in range(6):
        src = SEEDS[i % len(SEEDS)]
        data = mutate(rng, src.read_bytes(), [src.read_bytes()], src.suffix == ".py")
        path = tmp_path / f"m{i}{src.suffix}"
        path.write_bytes(data)
        for argv in commands(rng, str(path), src, data, str(tmp_path))[:1]:
            r = subprocess.run(base + argv, capture_output=True, text=True, timeout=120,
                               errors="replace")
            assert r.returncode in (0, 1, 2), (argv, r.returncode, r.stderr[-2000:])
            assert "Traceback" not in r.stderr, r.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("SAREK_FUZZ"), reason="make fuzz (SAREK_FUZZ=1)")
def test_cli2_mutants_of_every_example_full() -> None:
    """CLI-2, make fuzz: 20,000 mutants (measured 15-23 mutants/s with 2 workers on the
    2-core machine: about 15-22 minutes)."""
    n = int(os.environ.get("SAREK_FUZZ_MUTANTS", "20000"))
    report = fuzz(n, seed=int(os.environ.get("SAREK_FUZZ_SEED", "1")), workers=2,
                  limit=60.0)
    print(report.summary())
    assert report.mutants >= min(n, 10_000)
    _assert_clean(report)
