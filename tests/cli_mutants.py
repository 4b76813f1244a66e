"""Mutation fuzzing of the ``sarek-py`` command over the files of examples/ (issue 11,
"Bad input": CLI-2, CLI-15, CLI-16, TXT-32, TXT-33).

Every file of ``examples/`` (``.sk`` kernels and programs, ``.launches``, ``.py``) is
mutated — byte flips, token deletion and duplication, splicing with another example,
huge numbers (``10**5000``, ``1e99999f``), deep nesting of parentheses, unary minus and
``if``, binary tokens (NUL, invalid UTF-8, random bytes) — and each mutant is given to
the subcommands that read it. The commands run in-process through
:func:`sarek_py.cli.main` inside worker processes, each job under a time limit:

- an exception escaping ``main``, a traceback on stderr or an exit status other than
  0, 1, 2 is a **traceback**;
- a job that does not answer within the limit is a **hang** (the worker is killed and
  replaced);
- a worker that dies (a signal, ``os._exit``) is a **dead process**;
- an error whose text is not a diagnostic (``file:line:col: error: …`` with a caret
  line, ``error: …``, or a usage error) is **unformatted**.

``python tests/cli_mutants.py N [SEED]`` runs N mutants and prints the counts and rate.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing as mp
import os
import random
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

#: the files mutated: every example
SEEDS = sorted([*EXAMPLES.glob("*.sk"), *EXAMPLES.glob("*.launches"),
                *EXAMPLES.glob("python/*.py")])

_TOKEN = re.compile(rb"[A-Za-z_][A-Za-z_0-9]*|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[fL]?|\s+|.",
                    re.DOTALL)

HUGE_NUMBERS = (b"9" * 5000, b"1" + b"0" * 5000, b"1e99999f", b"1e-99999f", b"1e99999",
                b"1." + b"3" * 4400 + b"f", b"9" * 30 + b"L", b"2147483648", b"-2147483649",
                b"1e" + b"9" * 5000, b"0x10", b"1e-9999999f")
BINARY = (b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe2\x80\xae", b"\x1b[2J",
          b"\r", b"\t\x0b\x0c", b"(*", b"*)", b'"', b"//", b"\\", b"\xef\xbb\xbf")
DEPTHS = (40, 300, 900, 1100, 5200)


def tokens(data: bytes) -> list[bytes]:
    return _TOKEN.findall(data)


def _nest(rng: random.Random, data: bytes, is_py: bool) -> bytes:
    """Wrap an expression or statement of ``data`` in many levels of one construct."""
    depth = rng.choice(DEPTHS)
    kind = rng.choice(("paren", "neg", "not", "if", "sum"))
    if is_py:
        depth = min(depth, rng.choice((40, 150, 600)))  # Python's own parser stops ~200
    lines = data.split(b"\n")
    candidates = [i for i, ln in enumerate(lines)
                  if (b"<-" in ln or b"=" in ln) and not ln.lstrip().startswith((b"//", b"#"))]
    if not candidates:
        return data
    i = rng.choice(candidates)
    ln = lines[i]
    op = b"<-" if b"<-" in ln else (b":=" if b":=" in ln else b"=")
    head, _, rhs = ln.partition(op)
    rhs = rhs.rstrip()
    tail = b""
    for end in (b" in", b";"):
        if rhs.endswith(end):
            rhs, tail = rhs[: -len(end)], end
    if kind == "paren":
        rhs = b"(" * depth + rhs + b")" * depth
    elif kind == "neg":
        rhs = b"- " * depth + b"(" + rhs + b")"
    elif kind == "not":
        rhs = (b"not " if is_py else b"! ") * depth + b"(" + rhs + b")"
    elif kind == "sum":
        rhs = b" + ".join([b"(" + rhs + b")"] * depth)
    elif is_py:
        rhs = b" if True else ".join([b"(" + rhs + b")"] * min(depth, 150))
    else:  # nested conditionals
        rhs = b"(true ? " * depth + b"(" + rhs + b")" + (b" : (" + rhs + b"))") * depth
    lines[i] = head + op + b" " + rhs + tail
    return b"\n".join(lines)


def mutate(rng: random.Random, data: bytes, others: list[bytes], is_py: bool) -> bytes:
    """One to three random mutations of ``data``."""
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        toks = tokens(data)
        kind = rng.choice(("flip", "flip", "delete", "delete", "duplicate", "splice",
                           "huge", "huge", "nest", "nest", "binary", "swap", "lines"))
        if kind == "flip" and data:
            b = bytearray(data)
            for _ in range(rng.choice((1, 1, 2, 5))):
                i = rng.randrange(len(b))
                b[i] ^= 1 << rng.randrange(8)
            data = bytes(b)
        elif kind == "delete" and toks:
            i = rng.randrange(len(toks))
            n = rng.choice((1, 1, 2, 4))
            data = b"".join(toks[:i] + toks[i + n:])
        elif kind == "duplicate" and toks:
            i = rng.randrange(len(toks))
            n = rng.choice((1, 2, 5))
            data = b"".join(toks[:i + n] + toks[i:i + n] + toks[i + n:])
        elif kind == "splice" and others:
            o = rng.choice(others)
            a, b2 = sorted(rng.randrange(len(o) + 1) for _ in range(2))
            i = rng.randrange(len(data) + 1)
            data = data[:i] + o[a:b2] + data[i:]
        elif kind == "huge" and toks:
            nums = [i for i, t in enumerate(toks) if t[:1].isdigit()] or [rng.randrange(len(toks))]
            i = rng.choice(nums)
            toks[i] = rng.choice(HUGE_NUMBERS)
            data = b"".join(toks)
        elif kind == "nest":
            data = _nest(rng, data, is_py)
        elif kind == "binary":
            i = rng.randrange(len(data) + 1)
            junk = rng.choice(BINARY) if rng.random() < 0.7 else rng.randbytes(
                rng.choice((1, 4, 16)))
            data = data[:i] + junk + data[i:]
        elif kind == "swap" and len(toks) > 2:
            i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
            data = b"".join(toks)
        elif kind == "lines":
            lines = data.split(b"\n")
            i = rng.randrange(len(lines))
            if rng.random() < 0.5:
                del lines[i]
            else:
                lines.insert(i, lines[rng.randrange(len(lines))])
            data = b"\n".join(lines)
    return data


# ------------------------------------------------------------------------- commands

_KERNEL = re.compile(rb"kernel\s+([A-Za-z_]\w*)")
_PY_KERNEL = re.compile(rb"@kernel\s*\n\s*def\s+([A-Za-z_]\w*)")
#: small sizes for program runs: the examples' size variables
PROGRAM_SIZES = ("--size", "nx=6", "--size", "ny=5", "--size", "nt=1")


def commands(rng: random.Random, path: str, seed: Path, data: bytes,
             workdir: str) -> list[list[str]]:
    """The command lines that read mutant ``path`` (of example ``seed``): two drawn from
    those that apply to the file's kind."""
    if seed.suffix == ".launches":
        sk = str(EXAMPLES / (seed.stem + ".sk"))
        return [["explain", sk, "--launches", path]]
    names = _PY_KERNEL.findall(data) if seed.suffix == ".py" else _KERNEL.findall(data)
    name = (names[0] if names else b"k").decode("ascii", "replace")
    program = b"program" in data and seed.suffix == ".sk"
    out = [["check", path], ["print", path], ["emit", path, "--target", "cuda"],
           ["emit", path, "--target", "opencl"]]
    if seed.suffix == ".sk":
        out.append(["print", path, "--sexp"])
    if program:
        out += [["run", path, *PROGRAM_SIZES], ["opt", path],
                ["opt", path, "-p", "fuse,offload", "--dump-dir",
                 os.path.join(workdir, "dump")],
                ["explain", path]]
    else:
        out += [["run", path, "-k", name, "-n", "8", "--size", "n=8"],
                ["run", path, "-k", name, "-n", "8", "-b", "4"],
                ["opt", path, "-p", "inline"]]
        if len(names) >= 2:
            a, b = (n.decode("ascii", "replace") for n in names[:2])
            out.append(["fuse", path, "--producer", a, "--consumer", b])
    rng.shuffle(out)
    return out[:2]


# ---------------------------------------------------------------------------- worker

_DIAGNOSTIC = re.compile(r"^(?:\S.*?:\d+:\d+: )?(?:error|warning|fusion refused): "
                         r"|^sarek-py \w+: error: |^usage: ")
_LOCATED = re.compile(r"^\S.*?:(\d+):(\d+): (?:error|fusion refused): ")


def _run_one(argv: list[str]) -> dict[str, Any]:
    from sarek_py.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    escaped = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc: Any = main(argv)
    except BaseException:  # the finding: an exception escaping main
        rc = None
        escaped = traceback.format_exc()[-3000:]
    return {"rc": rc, "err": err.getvalue()[:4000], "escaped": escaped}


def _worker(conn: Any) -> None:
    sys.setrecursionlimit(10_000)
    while True:
        job = conn.recv()
        if job is None:
            return
        conn.send(_run_one(job))


@dataclass
class Finding:
    kind: str  # traceback, hang, dead, unformatted
    argv: list[str]
    detail: str
    mutant: bytes = b""


@dataclass
class Report:
    mutants: int = 0
    runs: int = 0
    seconds: float = 0.0
    status: Counter[Any] = field(default_factory=Counter)
    unlocated: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)

    def summary(self) -> str:
        kinds = Counter(f.kind for f in self.findings)
        return (f"{self.mutants} mutants, {self.runs} runs in {self.seconds:.1f} s "
                f"({self.runs / max(self.seconds, 1e-9):.1f} runs/s); exit statuses "
                f"{dict(sorted(self.status.items(), key=str))}; findings {dict(kinds)}")


class Pool:
    """Worker processes that run jobs in-process under a time limit each."""

    def __init__(self, size: int, limit: float) -> None:
        # fresh interpreters: what is measured is sarek_py itself, not the instrumentation
        # (typeguard) of the process that runs the tests
        self.ctx = mp.get_context("spawn")
        self.limit = limit
        self.workers = [self._start() for _ in range(size)]

    def _start(self) -> tuple[Any, Any]:
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        p.start()
        child.close()
        return p, parent

    def _replace(self, i: int) -> None:
        p, conn = self.workers[i]
        with contextlib.suppress(Exception):
            p.kill()
        p.join(5)
        conn.close()
        self.workers[i] = self._start()

    def run(self, jobs: list[list[str]]) -> Iterator[tuple[list[str], str, Any]]:
        """For each job: (argv, 'ok' | 'hang' | 'dead', the worker's answer)."""
        todo = list(enumerate(jobs))
        busy: dict[int, tuple[list[str], float]] = {}
        while todo or busy:
            for i in range(len(self.workers)):
                if i not in busy and todo:
                    _, argv = todo.pop(0)
                    self.workers[i][1].send(argv)
                    busy[i] = (argv, time.monotonic())
            conns = [self.workers[i][1] for i in busy]
            ready = mp.connection.wait(conns, timeout=0.2)
            for i in list(busy):
                p, conn = self.workers[i]
                argv, t0 = busy[i]
                if conn in ready:
                    try:
                        answer = conn.recv()
                    except (EOFError, OSError):
                        p.join(5)
                        yield argv, "dead", f"worker died (exit code {p.exitcode})"
                        del busy[i]
                        self._replace(i)
                        continue
                    del busy[i]
                    yield argv, "ok", answer
                elif not p.is_alive():
                    del busy[i]
                    yield argv, "dead", f"worker died (exit code {p.exitcode})"
                    self._replace(i)
                elif time.monotonic() - t0 > self.limit:
                    del busy[i]
                    yield argv, "hang", f"no answer within {self.limit} s"
                    self._replace(i)

    def close(self) -> None:
        for _, conn in self.workers:
            with contextlib.suppress(Exception):
                conn.send(None)
        for p, _ in self.workers:
            p.join(5)
            if p.is_alive():
                p.kill()


def check_answer(argv: list[str], answer: dict[str, Any], report: Report) -> Finding | None:
    """The finding in one answer, if any (and the statistics of the report)."""
    rc, err = answer["rc"], answer["err"]
    report.status[rc] += 1
    if answer["escaped"] is not None:
        return Finding("traceback", argv, answer["escaped"])
    if "Traceback (most recent call last)" in err or rc not in (0, 1, 2):
        return Finding("traceback", argv, f"exit {rc}: {err[-2000:]}")
    if rc in (1, 2):
        lines = err.splitlines()
        first = next((ln for ln in lines if not ln.startswith("usage:")), lines[0] if lines
                     else "")
        if not lines or not _DIAGNOSTIC.match(first) and not _DIAGNOSTIC.match(lines[0]):
            return Finding("unformatted", argv, err[:2000])
        m = _LOCATED.match(first)
        if m is None and rc == 1:
            report.unlocated[re.sub(r"'[^']*'", "'…'", first)[:70]] += 1
    return None


def fuzz(n: int, seed: int = 0, workers: int = 2, limit: float = 30.0,
         batch: int = 40) -> Report:
    """Mutate the examples ``n`` times (``seed``) and run each mutant's commands."""
    rng = random.Random(seed)
    blobs = {p: p.read_bytes() for p in SEEDS}
    report = Report()
    t0 = time.monotonic()
    pool = Pool(workers, limit)
    try:
        with tempfile.TemporaryDirectory(prefix="sarek-fuzz-") as tmp:
            done = 0
            while done < n:
                jobs: list[list[str]] = []
                mutants: dict[str, bytes] = {}
                for j in range(min(batch, n - done)):
                    src = rng.choice(SEEDS)
                    others = [b for p, b in blobs.items() if p.suffix == src.suffix]
                    data = mutate(rng, blobs[src], others, src.suffix == ".py")
                    name = os.path.join(tmp, f"m{done + j}_{src.stem}{src.suffix}")
                    Path(name).write_bytes(data)
                    mutants[name] = data
                    for argv in commands(rng, name, src, data, tmp):
                        jobs.append(argv)
                done += len(mutants)
                report.mutants += len(mutants)
                for argv, how, answer in pool.run(jobs):
                    report.runs += 1
                    mutant = next((d for p, d in mutants.items() if p in argv), b"")
                    if how != "ok":
                        report.status[how] += 1
                        report.findings.append(Finding(how, argv, str(answer), mutant))
                        continue
                    f = check_answer(argv, answer, report)
                    if f is not None:
                        f.mutant = mutant
                        report.findings.append(f)
                for name in mutants:
                    with contextlib.suppress(OSError):
                        os.remove(name)
    finally:
        pool.close()
    report.seconds = time.monotonic() - t0
    return report


def save_findings(report: Report, where: Path) -> list[Path]:
    """Write each finding's mutant and command line under ``where`` (for regression
    tests); the paths written."""
    where.mkdir(parents=True, exist_ok=True)
    out = []
    for i, f in enumerate(report.findings):
        base = where / f"{f.kind}_{i}"
        suffix = next((Path(a).suffix for a in f.argv if Path(a).suffix in
                       (".sk", ".py", ".launches")), ".txt")
        (base.with_suffix(suffix)).write_bytes(f.mutant)
        (base.with_suffix(".txt")).write_text(" ".join(f.argv) + "\n\n" + f.detail)
        out.append(base)
    return out


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    s = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    r = fuzz(count, s)
    print(r.summary())
    for k, v in r.unlocated.most_common(15):
        print(f"  unlocated x{v}: {k}")
    for f in r.findings[:20]:
        print(f"--- {f.kind}: {' '.join(f.argv)}\n{f.detail[-1500:]}")
    if r.findings:
        print("saved:", save_findings(r, Path(tempfile.gettempdir()) / "sarek-fuzz-findings")[:5])
