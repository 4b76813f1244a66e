"""A launch statement's launches reuse their values and their checked launch while nothing
the checks read changed, and check again when it did (specs/offload.md OFF-13 … OFF-15).

Each test mutates one input a cached value or check reads — an integer variable, an array's
extent, the array itself (reallocated), the backend's bounds-check flags, a float argument —
between two launches of the same statement, and shows the check firing (or the result
following) as without the cache. Results are compared bitwise with the interpreter's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from native_diff import c_backend
from rule_citations import assert_rules_cited

from sarek_py.host.interp import HostInterp, run_program
from sarek_py.host.launch_site import LaunchSite
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import InterpError, LaunchError
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.requires_check import RangeRefused
from sarek_py.runtime import Backend, get_backend
from sarek_py.runtime.auto import AutoCBackend


@pytest.fixture(params=["c", "interp"])
def dev(request: pytest.FixtureRequest) -> Backend:
    return c_backend() if request.param == "c" else get_backend("interp")


def sites(run: HostInterp) -> list[LaunchSite]:
    return list(run.device.sites.values())


def run_on(dev: Backend, text: str, **preset: Any) -> tuple[HostInterp, Any]:
    run = HostInterp(parse_program(text), device=dev, check_races=False)
    return run, run.run(preset)


RANGE = """
kernel k(a : f64[], m : i32) requires range(m <= 10) =
  let i = global_thread_id in
  a[i] <- a[i] + f64(m)

program p
  var m : i32;
  var a : f64[16];
begin
  for t = 1 to 3 do
    m := 5 * t;
    print t;
    launch k(a, m) threads 4 block 4
  done;
  sync
end
"""


def test_off13_a_changed_integer_argument_is_checked_again(dev: Backend) -> None:
    """OFF-13: the range condition (LCH-25) held for m = 5 and 10; m = 15 is refused at the
    third launch, whatever the first two kept."""
    run = HostInterp(parse_program(RANGE), device=dev, check_races=False)
    with pytest.raises(RangeRefused, match="m = 15"):
        run.run()
    assert run.output == ["1", "2", "3"]


BLOCK = """
kernel k(a : f64[], n : i32) =
  let i = global_thread_id in
  if i < n then a[i] <- a[i] + 1.0

program p
  var b : i32 = 64;
  var a : f64[64];
begin
  for t = 1 to 3 do
    if t == 3 then b := b - 64;
    print t;
    launch k(a, 64) threads 64 block b
  done;
  sync
end
"""


def test_off13_a_changed_block_variable_is_checked_again(dev: Backend) -> None:
    """OFF-13: a block size read from a variable that drops to zero
    (LCH-21) is refused at the launch that uses it, after two launches kept their values."""
    run = HostInterp(parse_program(BLOCK), device=dev, check_races=False)
    with pytest.raises(LaunchError, match="block size 0 is below one"):
        run.run()
    assert run.output == ["1", "2", "3"]


SHIFT = """
kernel k(a : f64[], m : i32) =
  let i = global_thread_id in
  a[i + m] <- 1.0

program p
  var m : i32 = 0;
  var n : i32 = 8;
  var a : f64[] allocatable;
begin
  allocate a[n];
  for t = 1 to 4 do
    if t == 3 then m := SHIFT_M;
    if t == 4 then (deallocate a; allocate a[SMALL]);
    launch k(a, m) threads 4 block 4;
    sync
  done
end
"""


@pytest.mark.parametrize("m, small, fault", [(0, 8, False), (6, 8, True), (0, 3, True),
                                            (0, 4, False)])
def test_off14_the_bounds_proof_follows_an_argument_and_a_resized_array(
        m: int, small: int, fault: bool) -> None:
    """OFF-14, NAT-61: the first launches are proved in bounds and run the unchecked build;
    an index offset that grows (``m``) or an array reallocated smaller makes a launch that
    is not in bounds: it runs the checked build and its fault is reported (LCH-20), as
    without a prepared launch. In bounds, the bytes are the interpreter's."""
    dev = c_backend()
    text = SHIFT.replace("SHIFT_M", str(m)).replace("SMALL", str(small))
    ref: Any = None
    try:
        ref = run_program(parse_program(text), check_races=False)
    except InterpError:
        ref = "fault"
    assert (ref == "fault") == fault
    before = dev.stats.launches_proved
    if fault:
        with pytest.raises(InterpError, match="out-of-bounds"):
            run_on(dev, text)
    else:
        _, got = run_on(dev, text)
        assert got.array("a").tobytes() == ref.array("a").tobytes()
        assert dev.stats.launches_proved - before == 4


REALLOC = """
kernel k(a : f64[], x : f64) =
  let i = global_thread_id in
  a[i] <- a[i] * 2.0 + x

program p
  var x : f64 = 0.5;
  var a : f64[] allocatable;
  var s : f64;
begin
  allocate a[8];
  for t = 1 to 6 do
    if t == 3 || t == 5 then (deallocate a; allocate a[8]);
    launch k(a, x) threads 8 block 8;
    sync;
    s := s + a[1]
  done
end
"""


def test_off14_a_reallocated_array_is_prepared_again(dev: Backend) -> None:
    """OFF-14, NAT-61: an array deallocated and allocated again with the same extents has
    another device buffer: the prepared launch does not hold for it (the key, which reads
    integers and extents only, is unchanged), so the launch is prepared again; the bytes
    are the interpreter's."""
    ref = run_program(parse_program(REALLOC), check_races=False)
    run, got = run_on(dev, REALLOC)
    assert got.values["s"] == ref.values["s"]
    assert got.array("a").tobytes() == ref.array("a").tobytes()
    (site,) = sites(run)
    assert site.prepares == 3 and site.reuses == 3


FLOATS = """
kernel k(a : f64[], x : f64) =
  let i = global_thread_id in
  a[i] <- 1.0 / x

program p
  var x : f64 = 0.0;
  var a : f64[4];
  var b : f64[1:8];
begin
  for t = 1 to 8 do
    x := -x;
    launch k(a, x) threads 4 block 4;
    sync;
    b[t] <- a[1]
  done
end
"""


def test_off15_float_arguments_are_given_to_every_launch(dev: Backend) -> None:
    """OFF-15: a float argument alternating between 0.0 and -0.0 (equal, not the same)
    reaches each launch with its bits: 1/x alternates -inf and inf; the launch is prepared
    once."""
    ref = run_program(parse_program(FLOATS), check_races=False)
    run, got = run_on(dev, FLOATS)
    assert got.array("b").tobytes() == ref.array("b").tobytes()
    assert list(got.array("b")) == [-np.inf, np.inf] * 4
    (site,) = sites(run)
    assert site.prepares == 1 and site.reuses == 7


KEYLESS = """
kernel k(a : f64[], n : i32) =
  let i = global_thread_id in
  if i < n then a[i] <- a[i] + 1.0

program p
  var c : f64 = 2.0;
  var ns : i32[1:3];
  var a : f64[16];
begin
  ns[1] <- 4; ns[2] <- 8; ns[3] <- 6;
  for t = 1 to 3 do
    launch k(a, ns[t]) threads i32(c) * ns[t] block 4;
    sync
  done
end
"""


def test_off13_a_launch_reading_an_element_or_a_float_has_no_key(dev: Backend) -> None:
    """OFF-13: a launch whose integer values read an array element or a float variable has
    no key: every launch is evaluated and checked in full, never prepared; the bytes are
    the interpreter's."""
    ref = run_program(parse_program(KEYLESS), check_races=False)
    run, got = run_on(dev, KEYLESS)
    assert got.array("a").tobytes() == ref.array("a").tobytes()
    (site,) = sites(run)
    assert site.inputs is None and site.prepares == 0 and site.reuses == 0


def test_off14_a_replaced_launch_method_sees_every_launch() -> None:
    """OFF-14: a backend object whose ``launch`` is replaced on the instance (a recorder)
    gets every launch through it; nothing is prepared behind its back."""
    dev = c_backend()
    seen: list[str] = []
    real = dev.launch

    def launch(kernel: Any, *a: Any, **kw: Any) -> None:
        seen.append(kernel.name)
        real(kernel, *a, **kw)

    dev.launch = launch  # type: ignore[method-assign]
    try:
        run, _ = run_on(dev, FLOATS)
    finally:
        del dev.launch
    assert seen == ["k"] * 8
    assert sites(run)[0].prepares == 0


def test_off13_offloaded_advection_prepares_each_launch_once() -> None:
    """OFF-13 … OFF-15 on the workload of NAT-63: the advection example fused + swap,
    offloaded, prepares each launch statement once per run (its float coefficients change
    at every stage, its integers never) and gives the bytes of the unfused program."""
    from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
    from sarek_py.ir.host.text import parse_program_file

    dev = c_backend()
    src = parse_program_file("examples/advection_diffusion.sk")
    fused, _ = fuse_program(src, FusionOptions(swap=True))
    preset = {"nx": 24, "ny": 24, "nt": 5}
    ref = run_program(offload(src), preset, device=dev, check_races=False)
    run = HostInterp(offload(fused), device=dev, check_races=False)
    before = dev.stats.launches
    got = run.run(preset)
    assert got.array("u").tobytes() == ref.array("u").tobytes()
    assert all(s.prepares == 1 for s in sites(run))
    assert sum(s.prepares + s.reuses for s in sites(run)) == dev.stats.launches - before
    assert sum(s.reuses for s in sites(run)) >= 5 * 3 - len(sites(run))


BARRIER = """
kernel k(a : f64[], x : f64) =
  let i = global_thread_id in
  a[i] <- a[i] + x;
  barrier;
  a[i] <- a[i] * 2.0

program p
  var x : f64 = 0.25;
  var a : f64[8];
begin
  for t = 1 to 3 do
    x := x + 1.0;
    launch k(a, x) threads 8 block 8
  done;
  sync
end
"""


def test_off14_the_default_sends_a_prepared_launch_it_refuses_to_its_fallback() -> None:
    """OFF-14, NAT-25: on the default backend where it is the c backend, a kernel ``c``
    refuses (a barrier) is prepared and run by the fallback, launch after launch, with the
    interpreter's bytes."""
    c_backend()
    dev = get_backend("default")
    ref = run_program(parse_program(BARRIER), check_races=False)
    run, got = run_on(dev, BARRIER)
    assert got.array("a").tobytes() == ref.array("a").tobytes()
    (site,) = sites(run)
    assert site.prepares == 1 and site.reuses == 2
    assert isinstance(dev, AutoCBackend) and not dev.choices["k"].startswith("c"), \
        dev.choices


NOSYNC = """
kernel k(a : f64[]) =
  let i = global_thread_id in
  a[i] <- 1.0

program p
  var a : f64[4];
  var s : f64;
begin
  launch k(a) threads 4 block 4;
  s := a[1]
end
"""


def test_off16_host_arrays_in_place_on_c() -> None:
    """OFF-16: on ``c`` the offloaded advection example uses its host arrays in place:
    nothing copied in, zeroed or copied out, and the bytes of the run with zero copy off,
    which makes the copies of OFF-3 (``exp`` is the C library's on both, CG-13)."""
    from sarek_py.ir.host.text import parse_program_file

    dev = c_backend()
    prog = offload(parse_program_file("examples/advection_diffusion.sk"))
    preset = {"nx": 20, "ny": 20, "nt": 3}
    out: dict[bool, Any] = {}
    moved: dict[bool, int] = {}
    mapped: dict[bool, int] = {}
    old = dev.zero_copy  # type: ignore[attr-defined]
    try:
        for zero_copy in (False, True):
            dev.zero_copy = zero_copy  # type: ignore[attr-defined]
            dev.stats.reset()
            out[zero_copy] = run_program(prog, preset, device=dev, check_races=False)
            moved[zero_copy] = dev.stats.bytes_in + dev.stats.bytes_out + dev.stats.bytes_zeroed
            mapped[zero_copy] = dev.stats.bytes_mapped
    finally:
        dev.zero_copy = old  # type: ignore[attr-defined]
    for name in ("u", "du"):
        assert out[True].array(name).tobytes() == out[False].array(name).tobytes(), name
    assert moved[True] == 0 and mapped[True] > 0
    assert moved[False] > 0 and mapped[False] == 0


def test_off16_a_missing_sync_is_still_an_error_in_place(dev: Backend) -> None:
    """OFF-16, OFF-7: the host reading an array a launch writes before a sync is an error,
    though on ``c`` the host array already holds what the launch wrote."""
    from sarek_py.ir.host.program import HostError

    with pytest.raises(HostError, match="before a sync"):
        run_on(dev, NOSYNC)


def test_off16_in_place_is_what_the_backend_says() -> None:
    """OFF-16: the residency uses host arrays in place on a backend whose
    ``host_arrays_in_place`` says it can (the c backend and the default built on it), on
    no other, whatever its class."""
    from sarek_py.host.residency import Residency
    from sarek_py.runtime.cuda import CudaBackend
    from sarek_py.runtime.interp import InterpBackend
    from sarek_py.runtime.native import CBackend
    from sarek_py.runtime.opencl import OpenCLBackend

    assert CBackend.host_arrays_in_place and AutoCBackend.host_arrays_in_place
    assert not any(b.host_arrays_in_place for b in (Backend, InterpBackend, OpenCLBackend,
                                                    CudaBackend))

    class Lending(InterpBackend):
        host_arrays_in_place = True

    p = parse_program(NOSYNC)
    assert Residency(Lending(), False, p).in_place
    assert not Residency(InterpBackend(), False, p).in_place
    assert Residency(c_backend(), False, p).in_place


# ------------------------------------------------ adversarial: one site, many argument shapes

ADVERSARIAL = """
program p
  var n : i32 = 5; var m : i32 = 9; var s : f64; var x : f64 = 0.5; var flag : bool;
  var u : f64[1:] allocatable target; var v : f64[1:] allocatable target;
  var w : f64[1:, 1:] allocatable; var e : f64[1:] allocatable;
  var q : f64[1:] pointer;
  proc scale(a : f64[1:] inout, b : f64[1:] inout, k : i32 in, y : f64 in) =
    parallel for (i = 1 to k) do a[i] <- a[i] * y + b[i] done
  end
  proc grid(c : f64[1:, 1:] inout, k : i32 in) =
    parallel for (j = 1 to k, i = 1 to k + 1) do c[j, i] <- c[j, i] + f64(i * j) done
  end
begin
  allocate u[m]; allocate v[m]; allocate w[n, n + 1]; allocate e[0];
  parallel for (i = 1 to m) do u[i] <- f64(i); v[i] <- 1.0 / f64(i) done;
  for t = 1 to 6 do
    x := -x * 1.5;
    flag := !flag;
    call scale(u, v, n, x);
    call scale(v, u, n, x + 1.0);
    call scale(v, u, m, x);
    call scale(u, u, n - 1, x);
    if flag then q => u else q => v;
    parallel for (i = 1 to n) do q[i] <- q[i] + x done;
    parallel for (i = 1 to n) do u[i] <- u[i] + (flag ? 1.0 : -1.0) done;
    call grid(w, n - t / 3);
    parallel for (i = 1 to length(e)) do e[i] <- 1.0 done;
    if t == 3 then (deallocate v; allocate v[m]; v[1] <- 2.0);
    if t == 4 then (deallocate u; allocate u[m]; u[n] <- 3.0);
    if t == 5 then (deallocate e; allocate e[3]);
    s := s + u[1] + v[2] + w[1, 2]
  done
end
"""


@pytest.mark.parametrize("numbering", ["rows", "flat"])
def test_off13_off16_one_launch_site_many_arguments(dev: Backend, numbering: str) -> None:
    """OFF-13 … OFF-16 as an adversary: the same launch statement (in a procedure) gets
    different arrays, the same array twice, a pointer to one then the other, arrays
    reallocated with the same and other extents, a 2-D nest whose extent changes, a
    0-size array, float arguments that change sign and bool tests that alternate: every
    byte is the interpreter's."""
    prog = parse_program(ADVERSARIAL)
    ref = run_program(prog, check_races=False)
    run = HostInterp(offload(prog, numbering=numbering), device=dev, check_races=False)
    got = run.run()
    for name in ("u", "v", "w", "e", "s"):
        a, b = np.asarray(ref.values[name]), np.asarray(got.values[name])
        assert a.tobytes() == b.tobytes(), name
    assert sum(site.reuses for site in sites(run)) > 0


STOPS = """
program p
  var n : i32 = 8; var s : f64;
  var u : f64[1:] allocatable;
begin
  allocate u[n];
  for t = 1 to 5 do
    parallel for (i = 1 to n) do
      if t == 4 && i == 6 then stop 3;
      u[i] <- u[i] + f64(t)
    done;
    s := s + u[6]
  done
end
"""


def test_off5_a_stoppable_launch_in_a_loop_gets_a_status_per_launch(dev: Backend) -> None:
    """OFF-14 with OFF-5: a kernel that can stop, launched again and again from a prepared
    launch, gets a new status buffer each launch; it stops the program at the fourth, as
    the interpreter does."""
    prog = parse_program(STOPS)
    ref = run_program(prog, check_races=False)
    run = HostInterp(offload(prog), device=dev, check_races=False)
    got = run.run()
    assert got.stop_code == ref.stop_code == 3
    assert got.values["s"] == ref.values["s"]


def test_off13_every_rule_of_the_launch_sites_is_cited() -> None:
    """Each rule OFF-13 … OFF-16 of specs/offload.md exists and is cited by another test's
    docstring in this file."""
    assert_rules_cited(__file__, "offload", "OFF", 13, 16)
