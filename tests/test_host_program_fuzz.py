"""The host-program differential generator (issue 11 item 9; HP-16, HP-17, TXT-31, LF-14,
PP-6, OFF-1).

A random program (:class:`Gen`) is built from every statement kind of the host language
(assignments, element stores, blocks, ``if``/``else``, ``for`` with steps up and down,
``break``, ``continue``, ``return``, ``stop``, parallel loops with private scalars and
arrays, nested procedure calls with arrays by reference and ``in``/``inout`` scalars,
``print``, ``write`` with ``iostat``, ``read``, ``allocate``/``deallocate``, pointer
association, explicit ``launch``/``sync``) and of the kernel language in parallel-loop
bodies and helpers (``let``, ``let mut``/assignment, stores, ``if``/``else``, ``for`` up
and down, ``while``, ``return``, ``stop``, pure and non-pure helpers). It puts
producer/consumer pairs of parallel loops (what loop fusion and ping-pong rewrite) in
sequential loops, in the program and in procedures, with: guarded stores whose tests read
arrays the loops write; ``stop`` in parallel-loop bodies, procedures, helpers and host
loops; host scalars named like kernel ``let``s, loop indices and helper parameters.

Each program runs on the interpreter as written (the reference), then through every pass
of ``sarek-py opt`` one at a time (``run_passes``): fuse, fuse+swap (ping-pong), offload
of the original and of each fused program, and the kernel pass ``inline`` on the kernels
of the offloaded programs. The PRINTED output of every pass is parsed back, must be the
pass's program up to names (TXT-31), and runs; every variable the original declares, the
output lines and the stop code must be bitwise the reference's. Offloaded programs run
their launches on the interpreter backend, and a sample on OpenCL (PoCL) when available.
A located refusal of the offload (a helper that may stop cannot be emitted as C, CG-11)
is counted, not compared.

``make test`` runs a small sample; ``SAREK_FUZZ=1`` (``make fuzz``) runs the slow test:
FUZZ_CHUNKS x FUZZ_PER_CHUNK programs.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest
from test_printer_capture import same_meaning

from sarek_py.cli.opt import run_passes
from sarek_py.fusion.passes import run_pipeline
from sarek_py.host.interp import HostResult, run_program
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.nodes import Expr, Kernel, Module, Var
from sarek_py.runtime.interp import InterpBackend

ALL = frozenset({"fuse", "swap"})
INPUTS = (0.75,)

# -------------------------------------------------------------------------- generator

HELPERS = """
pure fun mix(a : f64, b : f64) : f64 = return a * 0.5 - b * 0.25
pure fun lim(x : f64, k : i32) : f64 = let v = x * 0.5 in return v + f64(k) * 0.125
fun chk(x : f64, c : f64) : f64 = if x > c then stop 7; return x
pure fun clamp(x : f64) : f64 =
  let mut r = x in
  if r > 2.0 then r := 2.0 else if r < -2.0 then r := -2.0;
  return r
kernel twice(w : f64[], n1 : i32) =
  let i = global_thread_id in
  if i < n1 then w[i] <- w[i] * 0.5 + 0.25
"""


@attrs.define
class Gen:
    """A random program; ``text()`` gives it. Names: program scalars ``a``, ``i``, ``k``,
    ``x``, ``v`` (also kernel let names, loop indices and helper parameters), arrays
    ``u f g h`` (lower bound -2), ``q`` (for launches), pointer ``p``."""

    r: random.Random
    pointer: bool = False
    #: whether loops call ``chk``, a helper that may stop (the offload refuses it, CG-11)
    stop_helper: bool = False
    #: whether the program has the 2-D arrays ``u2 f2 g2`` and pairs over them
    two_d: bool = False
    depth: int = 0
    #: how often a choice is adversarial (what the passes must refuse or handle exactly)
    adv: float = 0.3

    def pick(self, friendly: list[Any], adversarial: list[Any]) -> Any:
        """A friendly choice (one the passes can transform), or with probability ``adv``
        an adversarial one."""
        pool = adversarial if adversarial and self.r.random() < self.adv else friendly
        return self.r.choice(pool)

    # --------------------------------------------------------------- expressions
    def idx(self) -> str:
        return self.r.choice(["i", "i", "j", "k"])

    def off(self, e: str, o: int) -> str:
        return e if o == 0 else (f"{e} + {o}" if o > 0 else f"{e} - {-o}")

    def threshold(self) -> str:
        return self.r.choice(["0.5", "1.25", "2.0", "1e9"])

    def producer(self, U: str, F: str, G: str, H: str = "h") -> str:
        r = self.r
        ix = self.idx()
        lo, hi = self.pick([(-1, 1), (0, 1), (-1, 2)], [(1, -1), (0, 0), (1, 2)])
        po = r.choice([-1, 0, 1])
        e = self.pick([
            f"mix({U}[{ix}], {U}[{self.off(ix, po)}])",
            f"{U}[{self.off(ix, po)}] * a + f64(k)",
            f"lim({U}[{ix}], k) + x",
            f"{U}[{ix}] * 0.5 + f64(i) * 0.125",
            f"({U}[{ix}] > 0.0 ? {U}[{ix}] : -{U}[{ix}]) * 0.5",
            f"sqrt(abs({U}[{ix}])) + min({U}[{self.off(ix, po)}], 0.5)",
            f"{U}[{ix}] - f64(i64(k) * 2L) * 0.25",
        ], [
            f"chk({U}[{ix}], {self.threshold()})" if self.stop_helper else "1.0",
            f"clamp({U}[{ix}] + {G}[{ix}])",
            f"{U}[{ix}] + {G}[{ix}] * 0.5",
            f"f64(m) * {U}[{ix}]",
            f"{U}[{ix}] + {H}[{ix}] * 0.25",
            f"{U}[{ix} + m % 2] * 0.5",
        ])
        guard = self.pick(["", "", f"if {ix} >= 1 then ", f"if {ix} <= n - 1 then "], [
            f"if {G}[{ix}] > 0.0 then ", f"if {U}[{ix}] >= 0.0 then ", "if m > 0 then ",
            f"if {ix} >= 0 && {G}[{ix}] <= 0.5 then ", f"if {H}[{ix}] <= 1.0 then ",
            f"if {ix} <= m then "])
        return (f"parallel for ({ix} = {lo} to n + {hi}) do {guard}{F}[{ix}] <- {e} done")

    def consumer(self, U: str, F: str, G: str, H: str) -> str:
        r = self.r
        c = r.choice(["i", "i", "j"])
        lo, hi = self.pick([(0, 0), (1, 0), (1, 1), (0, 1)], [(-1, -1), (-1, 0), (0, -1)])
        o = r.choice([-1, 0, 1])
        reads = " + ".join(f"{F}[{self.off(c, oo)}]"
                           for oo in r.sample([-1, 0, 1], r.randint(1, 3)))
        t = self.threshold()
        body = self.pick([
            f"{G}[{c}] <- ({reads}) * 0.5",
            f"let a = 0.5 in {G}[{c}] <- {F}[{c}] + a * {F}[{self.off(c, o)}]",
            f"let x = {F}[{c}] * 2.0 in {G}[{c}] <- x - {F}[{self.off(c, o)}]",
            f"{U}[{c}] <- {U}[{c}] * 0.75 + ({reads}) * 0.125",
            f"if {G}[{c}] > 0.0 then {G}[{c}] <- {F}[{c}] * 0.5 else {G}[{c}] <- "
            f"{F}[{self.off(c, o)}]",
            f"for k = 0 to 1 do {H}[{c}] <- {H}[{c}] * 0.5 + {F}[{c} + k] done",
            f"for k = 1 downto 0 do {H}[{c}] <- {H}[{c}] + {F}[{c} - k] * 0.25 done",
            f"let mut s = 0.0 in let mut w = 0 in (while w < 2 do s := s + {F}[{c}]; "
            f"w := w + 1 done; {G}[{c}] <- s)",
            f"{U}[{c}] <- mix({U}[{c}], {F}[{self.off(c, o)}])",
        ], [
            f"if {F}[{c}] > {t} then stop 4; {G}[{c}] <- {F}[{c}]",
            f"{G}[{c}] <- chk({F}[{c}], {t})" if self.stop_helper else f"{G}[{c}] <- 1.0",
            f"if m > 1 then stop 2; {G}[{c}] <- {F}[{c}] * 0.5",
            f"{G}[{c}] <- {F}[{c}] + {G}[{c}] * f64(m)",
        ])
        return f"parallel for ({c} = {lo} to n - {hi}) do {body} done"

    def pair(self, U: str, F: str, G: str, H: str) -> str:
        two = f"{self.producer(U, F, G, H)};\n{self.consumer(U, F, G, H)}"
        if H in (U, F, G) or self.r.random() >= 0.25:
            return two
        # LF-70/LF-74: a third stage reading the consumer's output near its edges (a chain)
        o = self.r.choice([-1, 1])
        return (f"{two};\nparallel for (i = 1 to n - 1) do {H}[i] <- {G}[i + {o}] * 0.5 + "
                f"{G}[i] done")

    def pair2d(self) -> str:
        """A 2-D pair over ``u2 f2 g2`` (lower bounds -1, upper bounds n + 3): rows numbering
        on offload, tests on either index, reads of the intermediate at 2-D offsets."""
        r = self.r
        plo, phi = self.pick([(0, 1), (-1, 2)], [(1, 0), (0, 0)])
        clo, chi = self.pick([(1, 0), (1, 1)], [(0, 0), (0, -1)])
        po = r.choice([0, 1] if plo < 0 else [-1, 0, 1])
        guard = self.pick(["", "if j >= 0 then ", "if i + j >= 1 then "],
                          ["if g2[j, i] > 0.0 then ", "if m > 0 then "])
        e = self.pick([f"mix(u2[j, i], u2[j + {po}, i])", "u2[j, i] * a + f64(k)"],
                      ["u2[j, i] + g2[j, i]"])
        a, b = r.choice([-1, 0, 1]), r.choice([-1, 0, 1])
        cons = self.pick([
            f"g2[j, i] <- f2[j + {a}, i] + f2[j, i + {b}] * 0.5",
            "pragma \"unroll\" for k = 0 to 1 do g2[j, i] <- g2[j, i] * 0.5 + "
            "f2[j - k, i + k] done",
            f"let a = f2[j, i] in u2[j, i] <- u2[j, i] * 0.75 + (a + f2[j + {a}, i + {b}]) "
            "* 0.125",
        ], [f"if f2[j, i] > {self.threshold()} then stop 4; g2[j, i] <- f2[j, i]"])
        return (f"parallel for (j = {plo} to n + {phi}, i = {plo} to n + {phi}) do "
                f"{guard}f2[j, i] <- {e} done;\n"
                f"parallel for (j = {clo} to n - {chi}, i = {clo} to n - {chi}) do {cons} done")

    # ----------------------------------------------------------------- statements
    def host_item(self, U: str, F: str, G: str, H: str, in_loop: bool,
                  in_proc: bool) -> str:
        r = self.r
        friendly: list[Callable[[], str]] = [
            lambda: "m := m + 1",
            lambda: "if m > 1 then x := x * 0.5 else x := x + 1.0",
            lambda: self.single(U, H),
            lambda: "v := v * 0.5 + 1.0",
        ]
        adversarial: list[Callable[[], str]] = [
            lambda: f"parallel for (j = 0 to n) do if {U}[j] > {self.threshold()} then "
                    "stop 5 done",
            lambda: f"call halt({U}, {self.threshold()})",
            lambda: f"print m, {U}[1]",
            lambda: "write (unit = 6, iostat = io) x, k",
            lambda: f"{U}[0] <- {U}[0] * 0.5 + 0.25",
            lambda: f"if {U}[1] > {self.threshold()} then stop 3",
        ]
        if not in_proc:
            adversarial += [
                lambda: "launch twice(q, n + 1) threads n + 1 block 4;\nsync",
                lambda: f"deallocate {H};\nallocate {H}[-2:n + 4]",
                lambda: "call step(u, g, k, x)",
                lambda: "call inner(h, k)",
            ]
        if in_loop:
            adversarial += [
                lambda: f"if m == {r.randint(1, 4)} then break",
                lambda: f"if m == {r.randint(1, 4)} then continue",
                lambda: f"if {G}[0] > {self.threshold()} then break",
            ]
        if in_proc or not in_loop:
            adversarial.append(lambda: "if k > 3 then return")  # leaves the proc/program
        if self.pointer and not in_proc:
            adversarial.append(lambda: "parallel for (i = 0 to n) do p[i] <- p[i] * 0.5 done")
        return str(self.pick(friendly, adversarial)())

    def single(self, U: str, H: str) -> str:
        j = self.r.choice(["j", "i", "a"])  # an index may be named like a host scalar
        return self.r.choice([
            f"parallel for ({j} = 0 to n) var y : f64 do y := {U}[{j}] * 0.5; "
            f"{H}[{j}] <- y + x done",
            f"parallel for ({j} = -1 to n) local tl : f64[2] do tl[0] <- {U}[{j}]; "
            f"tl[1] <- tl[0] * 0.25; {H}[{j}] <- tl[0] - tl[1] done",
            f"parallel for ({j} = 0 to n, k = 0 to 1) do if k == 0 then {H}[{j}] <- "
            f"{U}[{j}] * 0.5 done",
        ])

    def loop_body(self, U: str, F: str, G: str, H: str, in_proc: bool) -> str:
        r = self.r
        parts = [self.pair2d() if self.two_d and r.random() < 0.5 and not in_proc
                 else self.pair(U, F, G, H)]
        for _ in range(r.choice([0, 0, 1, 1, 2, 3])):
            parts.insert(r.randint(0, len(parts)),
                         self.host_item(U, F, G, H, True, in_proc))
        if r.random() < 0.25:  # a second pair, through another intermediate when there is one
            parts.append(self.pair(U, H, G, G) if H not in (F, G, U) else self.pair(U, F, G, G))
        if r.random() < 0.2 and self.depth < 1:
            self.depth += 1
            step = self.pick(["", " step 1"], [" step 2"])
            inner = self.loop_body(U, F, G, H, in_proc).replace("\n", "\n  ")
            self.depth -= 1
            parts.append(f"for s = 1 to 2{step} do\n  {inner}\ndone")
        return ";\n".join(parts)

    def time_loop(self, U: str, F: str, G: str, H: str, in_proc: bool) -> str:
        body = self.loop_body(U, F, G, H, in_proc).replace("\n", "\n  ")
        t = "r" if in_proc else "t"
        if self.r.random() < self.adv * 0.3:
            return f"for {t} = nt to 1 step -1 do\n  {body}\ndone"
        loop = f"for {t} = 1 to nt do\n  {body}\ndone"
        shape = self.r.random()
        if in_proc or shape >= 0.3:
            return loop
        # HP-40/HP-50: host while loops around the time loop, or holding its body (LF-40)
        inner = (loop if shape < 0.2 else body).replace("\n", "\n  ")
        if shape < 0.1:
            return (f"wc := 0;\nwhile true do\n  {inner};\n  wc := wc + 1;\n"
                    "  if wc >= 2 then break\ndone")
        return f"wc := 0;\nwhile wc < 2 do\n  {inner};\n  wc := wc + 1\ndone"

    # -------------------------------------------------------------------- program
    def text(self) -> str:
        r = self.r
        self.adv = r.choice([0.0, 0.15, 0.3, 0.6])
        self.pointer = r.random() < self.adv * 0.3
        self.stop_helper = r.random() < 0.4
        self.two_d = r.random() < 0.3
        n, nt = r.randint(0, 6), r.randint(1, 3)
        hf = r.choice([2, 3, 4])
        uattr = " target" if self.pointer else ""
        decls = [
            f"var n : i32 = {n}", f"var nt : i32 = {nt}", "var m : i32",
            f"var k : i32 = {r.randint(0, 4)}", f"var a : f64 = {r.choice(['0.5', '1.5'])}",
            f"var i : i32 = {r.randint(-2, 3)}", "var x : f64", "var v : f64",
            "var io : i32 = 5", "var wc : i32",
            f"var u : f64[-2:] allocatable{uattr}", "var f : f64[-2:] allocatable",
            "var g : f64[-2:] allocatable", "var h : f64[-2:] allocatable",
            "var q : f64[] allocatable",
        ]
        if self.pointer:
            decls.append("var p : f64[-2:] pointer")
        if self.two_d:
            decls += [f"var {x} : f64[-1:, -1:] allocatable" for x in ("u2", "f2", "g2")]
        halt = ("proc halt(w : f64[-2:] in, c : f64 in) =\n"
                "  if w[0] > c then stop 8 else if w[1] > c then return;\n"
                "  if w[2] > c * 2.0 then stop 6\nend")
        inner = ("proc inner(w : f64[-2:] inout, a : i32 in) =\n"
                 "  parallel for (i = 0 to n) do w[i] <- w[i] * 0.5 + f64(a) done;\n"
                 f"  if w[0] > {self.threshold()} then stop 9;\n"
                 "  if a > 2 then return;\n"
                 "  call halt(w, 1e9);\n"
                 "  w[1] <- w[1] + 0.25\nend")
        if r.random() < 0.5:  # LF-17: loops on the procedure's own arrays, copied
            loop = self.time_loop("lu", "t", "lg", "lg", True).replace("\n", "\n  ")
            work = ("allocate lu[-2:n + 4];\nallocate lg[-2:n + 4];\n"
                    "parallel for (i = -2 to n + 4) do lu[i] <- w[i] done;\n"
                    "parallel for (i = -2 to n + 4) do lg[i] <- z[i] done;\n"
                    f"{loop};\n"
                    "parallel for (i = -2 to n + 4) do w[i] <- lu[i] done;\n"
                    "parallel for (i = -2 to n + 4) do z[i] <- lg[i] done")
        else:  # on the dummies, which a caller may pass as one array
            work = self.time_loop("w", "t", "z", "z", True)
        work = work.replace("\n", "\n  ")
        step = ("proc step(w : f64[-2:] inout, z : f64[-2:] inout, k : i32 in, "
                "x : f64 inout)\n  var t : f64[-2:] allocatable;\n  var m : i32;\n"
                "  var lu : f64[-2:] allocatable;\n  var lg : f64[-2:] allocatable;\n=\n"
                f"  allocate t[-2:n + 4];\n  m := k;\n  {work};\n"
                "  x := x + w[0];\n  call inner(w, k)\nend")
        body = [
            "allocate u[-2:n + 4]", f"allocate f[-2:n + {hf}]", "allocate g[-2:n + 4]",
            "allocate h[-2:n + 4]", "allocate q[n + 1]",
            "read x",
            "parallel for (i = -2 to n + 4) do u[i] <- f64((i * 7 + 3) % 11) * 0.5 - 1.0 done",
            "parallel for (i = -2 to n + 4) do g[i] <- f64((i * 5 + 1) % 7) * 0.25 - 0.5 done",
            "parallel for (i = 0 to n) do q[i] <- f64(i) done",
            "m := 0",
        ]
        if self.pointer:
            body.append("p => u")
        if self.two_d:
            body += [f"allocate {x}[-1:n + 3, -1:n + 3]" for x in ("u2", "f2", "g2")]
            body.append("parallel for (j = -1 to n + 3, i = -1 to n + 3) do u2[j, i] <- "
                        "f64((i * 7 + j * 3) % 11) * 0.5 - 1.0 done")
        for _ in range(r.randint(1, 2)):
            body.append(self.time_loop("u", "f", "g", "h", False))
        if r.random() < 0.6:
            body.append(self.host_item("u", "f", "g", "h", False, False))
        body.append("print m, x, u[0]")
        return (HELPERS + "program fz\n  " + ";\n  ".join(decls) + ";\n  "
                + halt.replace("\n", "\n  ") + "\n  "
                + inner.replace("\n", "\n  ") + "\n  " + step.replace("\n", "\n  ")
                + "\nbegin\n  " + ";\n".join(body).replace("\n", "\n  ") + "\nend\n")


def program_text(seed: int) -> str:
    return Gen(random.Random(seed)).text()


# -------------------------------------------------------------------------- checking


@attrs.define
class Tally:
    programs: int = 0
    invalid: int = 0
    outputs_run: int = 0
    changed: int = 0
    opencl: int = 0
    refused: int = 0
    refusals: set[str] = attrs.Factory(set)
    mismatches: list[str] = attrs.Factory(list)


def same_result(p: Program, ref: HostResult, got: HostResult) -> str | None:
    """``None`` when every variable of ``p``, the output and the stop code are bitwise the
    reference's; else what differs."""
    for d in p.decls:
        name = d.var.name
        a, b = ref.values.get(name), got.values.get(name)
        if (a is None) != (b is None):
            return f"{name}: allocated in one run only"
        if a is None:
            continue
        x, y = np.asarray(a), np.asarray(b)
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            return f"{name}: {x!r} vs {y!r}"
    if ref.output != got.output:
        return f"output {ref.output} vs {got.output}"
    if ref.stop_code != got.stop_code:
        return f"stop {ref.stop_code} vs {got.stop_code}"
    return None


def run(p: Program, device: Any = None) -> HostResult:
    return run_program(p, inputs=INPUTS, device=device)


def check_one(seed: int, tally: Tally, opencl: Any = None) -> None:
    """One program: the reference, then every pass of every pipeline; each pass's printed
    output is read back, must be the pass's program up to names (TXT-31) and must run to
    the reference's bytes."""
    prog = parse_program(program_text(seed))
    tally.programs += 1
    try:
        ref = run(prog)  # checks the program first (HP-9)
    except SarekError:
        tally.invalid += 1  # e.g. a race the generator wrote: nothing to compare
        return
    seen: set[str] = set()

    def step(p: Program, passes: tuple[str, ...], where: str) -> Program | None:
        """One pass of ``sarek-py opt`` (``run_passes``) on ``p``, its printed output
        checked; the pass's program, or None when the pass refused or failed."""
        try:
            res = run_passes(p, passes, ALL)
        except SarekError as exc:
            if "offload" not in passes or exc.loc is None:
                tally.mismatches.append(f"{where}: the pass failed: {exc}")
            else:  # a located refusal of the offload (OFF-8, CG-11): it names the cause
                tally.refused += 1
                tally.refusals.add(str(exc).split("\n")[0].split(": error: ")[-1])
            return None
        if res.program is p:
            return p
        tally.changed += 1
        [dump] = [d for n, d in res.dumps if n.endswith(".sk")]
        if dump in seen:
            return res.program
        seen.add(dump)
        try:
            back = parse_program(dump, where)
        except SarekError as exc:
            tally.mismatches.append(f"{where}: printed output does not read back: {exc}")
            return None
        if not same_meaning(res.program, back):
            tally.mismatches.append(f"{where}: the printed program is not the pass's "
                                    "program (TXT-31)")
        device = InterpBackend() if "offload" in passes else None
        tally.outputs_run += 1
        for dev, label in ((device, ""), (opencl if device is not None else None, " on opencl")):
            if label and dev is None:
                continue
            tally.opencl += bool(label)
            try:
                got = run(back, dev)
            except SarekError as exc:
                tally.mismatches.append(f"{where}{label}: the output fails to run: {exc}")
                continue
            diff = same_result(prog, ref, got)
            if diff is not None:
                tally.mismatches.append(f"{where}{label}: {diff}")
        return res.program

    def inline(p: Program, where: str) -> None:
        """``sarek-py opt -p inline`` on the kernels of an offloaded program (helper
        parameters become ``let``s in the kernels), printed, read back, run."""
        m = run_pipeline(Module(p.helpers, p.kernels), ["inline"])
        table = {k.name: k for k in m.kernels}
        if all(table[k.name] == k for k in p.kernels):
            return
        q = attrs.evolve(_with_kernels(p, table), helpers=m.helpers)
        text = print_program(q)
        if text in seen:
            return
        seen.add(text)
        try:
            back = parse_program(text, where)
        except SarekError as exc:
            tally.mismatches.append(f"{where}: printed output does not read back: {exc}")
            return
        if not same_meaning(q, back):
            tally.mismatches.append(f"{where}: the printed program is not the pass's "
                                    "program (TXT-31)")
        tally.outputs_run += 1
        try:
            diff = same_result(prog, ref, run(back, InterpBackend()))
        except SarekError as exc:
            diff = f"the output fails to run: {exc}"
        if diff is not None:
            tally.mismatches.append(f"{where}: {diff}")

    base = f"seed {seed}"
    off = step(prog, ("offload",), f"{base}: offload")
    if off is not None and off is not prog:
        inline(off, f"{base}: offload,inline")
    for passes in (("fuse",), ("fuse", "swap")):
        fused = step(prog, passes, f"{base}: {','.join(passes)}")
        if fused is not None and fused is not prog:
            off = step(fused, ("offload",), f"{base}: {','.join(passes)},offload")
            if off is not None and off is not fused and passes == ("fuse", "swap"):
                inline(off, f"{base}: {','.join(passes)},offload,inline")


def _with_kernels(x: Any, table: dict[str, Kernel]) -> Any:
    """``x`` with every kernel (the program's and each launch's) replaced by the kernel of
    the same name in ``table``."""
    if isinstance(x, Kernel):
        return table.get(x.name, x)
    if isinstance(x, tuple):
        return tuple(_with_kernels(y, table) for y in x)
    if not attrs.has(type(x)) or isinstance(x, (Expr, Var)):
        return x
    changes = {f.name: _with_kernels(getattr(x, f.name), table)
               for f in attrs.fields(type(x)) if f.name != "loc"}
    return attrs.evolve(x, **changes)


def _opencl_or_none() -> Any:
    try:
        from sarek_py.runtime import get_backend

        return get_backend("opencl")
    except Exception:  # noqa: BLE001  (any reason it cannot run here)
        return None


def run_seeds(seeds: range, opencl_every: int = 0) -> Tally:
    tally = Tally()
    dev = _opencl_or_none() if opencl_every else None
    for s in seeds:
        check_one(s, tally, dev if dev is not None and s % opencl_every == 0 else None)
    return tally


QUICK = range(0, 4)


def test_hp16_lf14_quick_sample() -> None:
    """``make test``: a small sample of programs, every pass output re-parsed and run."""
    tally = run_seeds(QUICK, opencl_every=3)
    assert tally.mismatches == [], "\n".join(tally.mismatches)
    assert tally.programs == len(QUICK) and tally.invalid <= len(QUICK) // 4
    assert tally.changed > 0 and tally.outputs_run > len(QUICK)
    if _opencl_or_none() is not None:
        assert tally.opencl > 0  # offloaded outputs ran on PoCL too


FUZZ_CHUNKS = 20
FUZZ_PER_CHUNK = int(os.environ.get("SAREK_FUZZ_PROGRAMS", "10000")) // FUZZ_CHUNKS


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(FUZZ_CHUNKS))
def test_hp16_lf14_fuzz(chunk: int) -> None:
    """``make fuzz``: FUZZ_CHUNKS x FUZZ_PER_CHUNK programs (10,000 by default), 0
    mismatches; one program in 50 also runs its offloaded outputs on OpenCL."""
    start = 1000 + chunk * FUZZ_PER_CHUNK
    tally = run_seeds(range(start, start + FUZZ_PER_CHUNK), opencl_every=50)
    print(f"chunk {chunk}: {tally}")
    assert tally.mismatches == [], "\n".join(tally.mismatches[:20])


# ------------------------------------------------------------- findings (regressions)

FOUND_STOP_AFTER_FUSED_PAIR = """
pure fun mix(a : f64, b : f64) : f64 = return a * 0.5 - b * 0.25
program fz
  var n : i32 = 2; var nt : i32 = 3;
  var u : f64[-2:] allocatable; var f : f64[-2:] allocatable; var g : f64[-2:] allocatable;
  var h : f64[-2:] allocatable;
begin
  allocate u[-2:n + 4]; allocate f[-2:n + 2]; allocate g[-2:n + 4]; allocate h[-2:n + 4];
  parallel for (i = -2 to n + 4) do u[i] <- f64((i * 7 + 3) % 11) * 0.5 - 1.0 done;
  for t = 1 to nt do
    for s = 1 to 2 do
      parallel for (k = 0 to n + 0) do if k >= 1 then f[k] <- mix(u[k], u[k]) done
    done
  done;
  for t = 1 to nt do
    parallel for (k = -1 to n + 1) do f[k] <- (u[k] > 0.0 ? u[k] : -u[k]) * 0.5 done;
    parallel for (i = 0 to n - 1) do for k = 0 to 1 do h[i] <- h[i] * 0.5 + f[i + k] done done;
    parallel for (j = 0 to n - 1) do if h[j] > 2.0 then stop 4; g[j] <- h[j] done
  done
end
"""


def test_lf10_generator_finding_stop_in_a_later_parallel_loop() -> None:
    """Found by this generator (seed 114, shrunk) on main d75ac43: the pair f -> h fused
    although a later parallel loop of the same time loop stops the program at t = 1, so
    the fused program ended with f as the fused loop left it ([0, 0, 0, 1, 0.5, ...]
    instead of [0, 1.5, 0.25, 2, 1, ...]). Issue 11 item 2's class (LF-10); passes since
    the effect summary sees the stop."""
    prog = parse_program(FOUND_STOP_AFTER_FUSED_PAIR)
    ref = run(prog)
    assert ref.stop_code == 4
    for passes in (("fuse",), ("fuse", "swap"), ("fuse", "swap", "offload")):
        res = run_passes(prog, passes, ALL)
        [dump] = [d for n, d in res.dumps if n.endswith(".sk")][-1:]
        back = parse_program(dump)
        device = InterpBackend() if "offload" in passes else None
        assert same_result(prog, ref, run(back, device)) is None, passes


FOUND_CALL_AFTER_LAUNCH = """
program fz
  var n : i32 = 1; var nt : i32 = 3;
  var u : f64[-2:] allocatable; var f : f64[-2:] allocatable; var g : f64[-2:] allocatable;
  proc halt(w : f64[-2:] in, c : f64 in) =
    if w[0] > c then stop 8 else if w[1] > c then return
  end
begin
  allocate u[-2:n + 4]; allocate f[-2:n + 3]; allocate g[-2:n + 4];
  for t = 1 to nt do
    parallel for (i = -1 to n + 2) do if g[i] > 0.0 then f[i] <- u[i] + 1.0 done;
    call halt(u, 1.25)
  done
end
"""


def test_off7_generator_finding_call_after_launch() -> None:
    """Found by this generator (seed 109, shrunk) on main d75ac43: the offloaded program,
    which calls a self-contained procedure after a launch, failed at run time ("the host
    needs 'f', which a launch writes, before a sync waited for it"): issue 11 item 6's
    class (sync placement against residency); passes since one effect summary serves
    both."""
    prog = parse_program(FOUND_CALL_AFTER_LAUNCH)
    ref = run(prog)
    res = run_passes(prog, ("offload",), ALL)
    [dump] = [d for n, d in res.dumps if n.endswith(".sk")]
    assert same_result(prog, ref, run(parse_program(dump), InterpBackend())) is None
