"""Large host arrays and device buffers of the ``c`` backend on huge pages (specs/native.md
NAT-78, NAT-79)."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import numpy as np
import pytest

from sarek_py.host.backend import run_program_on
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend, hostmem
from sarek_py.runtime.base import Backend

SMAPS = Path("/proc/self/smaps")


def c_backend() -> Backend:
    try:
        return get_backend("c")
    except Exception as exc:  # pragma: no cover - no C compiler
        pytest.skip(f"no c backend: {exc}")


def advised(address: int) -> bool | None:
    """Whether the mapping holding ``address`` carries the ``hg`` (MADV_HUGEPAGE) flag;
    None where /proc/self/smaps is not there."""
    if not SMAPS.exists():
        return None
    inside = False
    for line in SMAPS.read_text().splitlines():
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
        if m:
            inside = int(m.group(1), 16) <= address < int(m.group(2), 16)
        elif inside and line.startswith("VmFlags:"):
            return " hg" in line
    return False


needs_advice = pytest.mark.skipif(hostmem.advice() is None,
                                  reason="this Python has no mmap.MADV_HUGEPAGE (not Linux)")


@needs_advice
@pytest.mark.parametrize("shape, dtype", [((512, 512), np.float64), ((1 << 19,), np.float32),
                                          ((3, 700, 401), np.int32), ((1 << 21,), np.uint8)])
def test_nat78_a_large_array_is_aligned_zero_and_advised(shape: tuple[int, ...],
                                                          dtype: type) -> None:
    """NAT-78: from 2 MiB, an aligned anonymous mapping advised MADV_HUGEPAGE, all zeros,
    C-contiguous and writeable, of the shape and type asked."""
    a = hostmem.zeros(shape, dtype)
    assert a.shape == shape and a.dtype == np.dtype(dtype)
    assert a.flags.c_contiguous and a.flags.writeable and a.flags.aligned
    assert a.ctypes.data % hostmem.HUGE_PAGE == 0
    assert not a.any()
    flag = advised(a.ctypes.data)
    if flag is not None:
        assert flag, "the mapping is not advised MADV_HUGEPAGE"
    a[...] = 7
    assert int(a.reshape(-1)[-1]) == 7  # the whole extent is mapped and writable


def test_nat78_small_arrays_and_no_advice_get_np_zeros(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """NAT-78: below 2 MiB, or without the advice, the array is np.zeros's (its memory is
    not a mapping of its own)."""
    small = hostmem.zeros((hostmem.HUGE_PAGE // 8 - 1,), np.float64)
    assert not small.any() and small.base is None
    monkeypatch.setattr(hostmem, "advice", lambda: None)
    big = hostmem.zeros((1 << 20,), np.float64)
    assert not big.any() and big.base is None


@needs_advice
def test_nat78_a_view_keeps_the_mapping_alive() -> None:
    """NAT-78: the mapping lives as long as a view of the array does."""
    a = hostmem.zeros((1 << 20,), np.float64)
    v = a[1000:2000]
    del a
    gc.collect()
    v[:] = 2.5
    assert float(v.sum()) == 2500.0


@needs_advice
def test_nat78_a_program_allocates_on_huge_pages_on_c_only() -> None:
    """NAT-78: a host program's allocate on c gives an aligned, advised array (the
    backend's ``host_zeros``); on the interpreter np.zeros's; the bytes are equal."""
    src = """
program big
  var n : i32 = 512; var a : f64[0:, 0:] allocatable;
begin
  allocate a[0:n - 1, 0:n - 1];
  parallel for (j = 0 to n - 1, i = 0 to n - 1) do a[j, i] <- f64(i * 3 + j) * 0.5 done
end
"""
    p = parse_program(src)
    on_c, _ = run_program_on(p, c_backend(), check_races=False)
    ref, _ = run_program_on(p, "interp", check_races=False)
    a = on_c.array("a")
    assert a.ctypes.data % hostmem.HUGE_PAGE == 0
    flag = advised(a.ctypes.data)
    assert flag is None or flag
    assert a.tobytes() == ref.array("a").tobytes()
    assert ref.array("a").base is None  # np.zeros: not a mapping of its own


@needs_advice
def test_nat78_the_example_is_bitwise_with_and_without_huge_pages(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-78: the advection example on c, 2 MiB arrays on huge pages or on 4 KiB pages:
    the same bytes."""
    from sarek_py.ir.host.text import parse_program_file

    p = parse_program_file(Path(__file__).resolve().parent.parent / "examples"
                           / "advection_diffusion.sk")
    preset = {"nx": 512, "ny": 512, "nt": 1}
    dev = c_backend()
    huge, _ = run_program_on(p, dev, preset, check_races=False)
    assert huge.array("u").ctypes.data % hostmem.HUGE_PAGE == 0
    monkeypatch.setattr(hostmem, "advice", lambda: None)
    plain, _ = run_program_on(p, dev, preset, check_races=False)
    assert plain.array("u").base is None
    for name in ("u", "du"):
        assert huge.array(name).tobytes() == plain.array(name).tobytes(), name


@needs_advice
def test_nat79_device_buffers_of_c_on_huge_pages() -> None:
    """NAT-79: a c device buffer of 2 MiB or more is aligned and advised; a small one is
    a numpy byte array of at least 8 bytes; a device array round-trips its bytes."""
    import sarek_py

    dev = c_backend()
    buf = dev._alloc(3 << 20)
    assert buf.ctypes.data % hostmem.HUGE_PAGE == 0 and buf.nbytes == 3 << 20
    flag = advised(buf.ctypes.data)
    assert flag is None or flag
    assert dev._alloc(0).nbytes == 8
    x = np.arange(1 << 20, dtype=np.float32) * np.float32(0.75)
    d = sarek_py.to_device(x, backend="c")
    assert d.get().tobytes() == x.tobytes()
