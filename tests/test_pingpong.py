"""Ping-pong buffers (specs/ping-pong.md)."""

from __future__ import annotations

from test_loop_fusion import BASIC, PRODUCER, program, same

from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.fusion.loops.pingpong import swap_refusal
from sarek_py.ir.host.text import print_program

RENAMING = PRODUCER + "; parallel for (i = 1 to n) do u[i] <- u[i] - 0.1 * (f[i] - f[i - 1]) done"


def swapped(body: str, **kw: object) -> tuple[str, object]:
    prog = program(body, **kw)  # type: ignore[arg-type]
    fused, reports = fuse_program(prog, FusionOptions(swap=True))
    same(prog, fused)
    [r] = reports
    assert r.plan is not None, str(r)
    return print_program(fused), r.plan


def test_pp1_swap_needs_renamed_array() -> None:
    prog = program(BASIC)
    plain, _ = fuse_program(prog)
    swap, _ = fuse_program(prog, FusionOptions(swap=True))
    assert print_program(plain) == print_program(swap)
    _, reports = fuse_program(prog)
    assert reports[0].plan is not None
    assert swap_refusal(prog, reports[0].plan) is not None


def test_pp2_other_statement_uses_array() -> None:
    text, plan = swapped(RENAMING + "; s := u[1]")
    assert "swapped" not in text and "u_copy" in text
    text, plan = swapped(RENAMING, outer="for e = 1 to 2 do (BODY; s := u[2]) done")
    assert "swapped" not in text


def test_pp3_consumer_bounds_must_not_change() -> None:
    body = PRODUCER + "; parallel for (i = 1 to n - t + 1) do u[i] <- u[i] + f[i] done"
    text, _ = swapped(body)
    assert "swapped" not in text
    text, _ = swapped(PRODUCER + "; parallel for (i = 1 to k) do u[i] <- u[i] + f[i] done",
                      pre="k := n;", decls="")
    assert "swapped :=" in text
    text, _ = swapped(PRODUCER + "; parallel for (i = 1 to k) do u[i] <- u[i] + f[i] done; "
                      "k := k", pre="k := n;")
    assert "swapped :=" not in text


def test_pp4_turns_and_initial_copy() -> None:
    text, _ = swapped(RENAMING)
    assert "u_copy[k0_] <- u[k0_]" in text          # one device copy before the loops
    assert "swapped := !swapped" in text
    assert "u[i] <- u_copy[i] - 0.1" in text        # reads the copy, writes the array
    assert "u_copy[i] <- u[i] - 0.1" in text


def test_pp5_last_iteration_restores() -> None:
    text, _ = swapped(RENAMING)
    assert "if swapped then" in text and "u[i] <- u_copy[i]" in text


def test_pp6_same_result_many_steps() -> None:
    for nt in (1, 4):
        swapped(RENAMING, pre=f"nt := {nt};")
    swapped(RENAMING, pre="nt := 2;", outer="for e = 1 to 3 do BODY done")
