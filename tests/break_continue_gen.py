"""Random kernels with ``break`` and ``continue`` in every position, and the same program
as plain Python (the per-thread meaning, IR-32 / INT-25), for tests/test_break_continue*.py.

A case is a kernel ``bc(out : i32[], trace : i32[], n : i32)`` whose thread ``i`` runs a
random nest of ``for`` (up, down, and up to the last i32 value, CG-29), ``while`` and
``if`` statements over a mutable accumulator, with ``break``/``continue`` under tests that
depend on the thread id, the loop counters and the accumulator (so lanes diverge), stores
of the accumulator into ``trace`` at random places, and ``out[i] <- acc`` at the end.
Every value stays non-negative and below 2^31, so Python's ``%`` and ints agree with i32.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MOD = 1000003
TRACE = 4  # trace slots per thread

INT_MAX = 2**31 - 1


@dataclass
class Case:
    seed: int
    sk: str  # the kernel, text form
    py: str  # ``def bc(i, trace_row) -> acc`` in Python
    jumps: int  # break/continue statements in it


class _Gen:
    def __init__(self, rng: random.Random, max_depth: int):
        self.rng = rng
        self.max_depth = max_depth
        self.nvars = 0
        self.jumps = 0

    def fresh(self, base: str) -> str:
        self.nvars += 1
        return f"{base}{self.nvars}"

    def atom(self, loops: list[str]) -> str:
        """A non-negative i32 term: the thread id, the accumulator, a loop counter."""
        opts = ["i", "acc"] + [f"({v} % 5)" for v in loops]
        return self.rng.choice(opts)

    def cond(self, loops: list[str]) -> str:
        a = self.atom(loops)
        b = self.atom(loops)
        m = self.rng.choice([2, 3, 4, 5, 7])
        r = self.rng.randrange(m)
        op = self.rng.choice(["==", "!=", "<", ">="])
        return f"({a} + {b}) % {m} {op} {r}"

    def update(self, loops: list[str]) -> tuple[list[str], list[str]]:
        t = self.atom(loops)
        c = self.rng.randrange(1, 9)
        line = f"acc := (acc * 7 + {t} + {c}) % {MOD}"
        return [line], [f"acc = (acc * 7 + {t} + {c}) % {MOD}"]

    def store(self) -> tuple[list[str], list[str]]:
        slot = self.rng.randrange(TRACE)
        return ([f"trace[i * {TRACE} + {slot}] <- acc"], [f"trace[{slot}] = acc"])

    def block(self, depth: int, loops: list[str]) -> tuple[list[str], list[str]]:
        """Statements (text lines without separators, Python lines), one level."""
        n = self.rng.randint(1, 3)
        sk: list[list[str]] = []
        py: list[str] = []
        for _ in range(n):
            s, p = self.stmt(depth, loops)
            sk.append(s)
            py.extend(p)
        return _seq(sk), py

    def stmt(self, depth: int, loops: list[str]) -> tuple[list[str], list[str]]:
        kinds = ["update", "update", "store"]
        if depth < self.max_depth:
            kinds += ["if", "for", "while", "for"]
        if loops:
            kinds += ["jump", "jump"]
        kind = self.rng.choice(kinds)
        if kind == "update":
            return self.update(loops)
        if kind == "store":
            return self.store()
        if kind == "jump":
            word = self.rng.choice(["break", "continue"])
            self.jumps += 1
            c = self.cond(loops)
            if self.rng.random() < 0.2:  # unconditional, after an update
                u, pu = self.update(loops)
                return _seq([u, [word]]), [*pu, word]
            return [f"if {c} then", f"  {word}"], [f"if {_py(c)}:", f"    {word}"]
        if kind == "if":
            c = self.cond(loops)
            ts, tp = self.block(depth + 1, loops)
            sk = [f"if {c} then (", *_ind(ts), ")"]
            py = [f"if {_py(c)}:", *_pind(tp)]
            if self.rng.random() < 0.5:
                es, ep = self.block(depth + 1, loops)
                sk[-1] = ") else ("
                sk += [*_ind(es), ")"]
                py += ["else:", *_pind(ep)]
            return sk, py
        if kind == "for":
            v = self.fresh("k")
            shape = self.rng.choice(["up", "down", "top", "thread"])
            bs, bp = self.block(depth + 1, [*loops, v])
            if shape == "up":
                a, b = self.rng.randint(0, 2), self.rng.randint(0, 5)
                head, rng_ = f"for {v} = {a} to {b} do", f"range({a}, {b} + 1)"
            elif shape == "down":
                a, b = self.rng.randint(3, 6), self.rng.randint(0, 2)
                head, rng_ = f"for {v} = {a} downto {b} do", f"range({a}, {b} - 1, -1)"
            elif shape == "top":  # the last value is the type's: CG-29's loop form
                a = INT_MAX - self.rng.randint(0, 4)
                head, rng_ = f"for {v} = {a} to {INT_MAX} do", f"range({a}, {INT_MAX} + 1)"
            else:
                head, rng_ = f"for {v} = 0 to i % 6 do", "range(0, i % 6 + 1)"
            return ([head, *_ind(bs), "done"], [f"for {v} in {rng_}:", *_pind(bp)])
        # while over a counter advanced first, so a continue cannot spin
        w = self.fresh("w")
        bound = self.rng.randint(1, 6)
        bs, bp = self.block(depth + 1, [*loops, w])
        sk = [f"let mut {w} = 0 in", f"while {w} < {bound} do",
              *_ind(_seq([[f"{w} := {w} + 1"], bs])), "done"]
        py = [f"{w} = 0", f"while {w} < {bound}:", f"    {w} = {w} + 1", *_pind(bp)]
        return sk, py


def _ind(lines: list[str]) -> list[str]:
    return ["  " + x for x in lines]


def _pind(lines: list[str]) -> list[str]:
    return ["    " + x for x in lines]


def _py(c: str) -> str:
    return c


def _seq(parts: list[list[str]]) -> list[str]:
    """Statements in sequence: each in parentheses (a ``let`` scopes over what follows)."""
    if len(parts) == 1:
        return parts[0]
    out: list[str] = []
    for k, p in enumerate(parts):
        out += ["(", *_ind(p), ")" + (";" if k < len(parts) - 1 else "")]
    return out


def case(seed: int, max_depth: int = 3) -> Case:
    """The random case of ``seed``: a kernel with at least one loop and one jump."""
    rng = random.Random(seed)
    while True:
        g = _Gen(rng, max_depth)
        # the top level is a loop, so that a jump can sit anywhere below it
        v = g.fresh("k")
        bs, bp = g.block(1, [v])
        if g.jumps == 0:
            continue
        top = rng.randint(1, 4)
        body_sk = _seq([[f"for {v} = 0 to {top} do", *_ind(bs), "done"],
                        ["out[i] <- acc"]])
        sk = "\n".join([
            "kernel bc(out : i32[], trace : i32[], n : i32) =",
            "  let i = global_thread_id in",
            "  if i < n then (",
            "    let mut acc = 0 in",
            *["    " + x for x in body_sk],
            "  )",
        ]) + "\n"
        py = "\n".join([
            "def bc(i, trace):",
            "    acc = 0",
            f"    for {v} in range(0, {top} + 1):",
            *["        " + x for x in bp],
            "    return acc",
        ]) + "\n"
        return Case(seed, sk, py, g.jumps)


def python_reference(c: Case, n: int) -> tuple[list[int], list[int]]:
    """``out`` and ``trace`` as the Python program computes them, thread by thread."""
    scope: dict[str, object] = {}
    exec(c.py, scope)  # noqa: S102 - the generated reference program
    fn = scope["bc"]
    out: list[int] = []
    trace: list[int] = []
    for i in range(n):
        row = [0] * TRACE
        out.append(fn(i, row))  # type: ignore[operator]
        trace += row
    return out, trace
