"""The second red team's findings on the ``c`` backend, each a regression test
(specs/native.md, NAT-70 … NAT-77).

Tests that run C are skipped, with the reason, where no C compiler with OpenMP is installed
(NAT-15); tests of the OpenCL fallback where there is no OpenCL device. Processes that must
start clean (a fresh disk cache, a PATH without ``ld``) are children of the test.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from native_diff import c_backend as c_or_skip

import sarek_py
from sarek_py.frontend import Vec, barrier, boolean, f32, f64, global_thread_id, helper, i32, kernel
from sarek_py.ir.diagnostics import BackendUnavailable, InterpError, LaunchError
from sarek_py.ir.interp import run_kernel
from sarek_py.runtime import get_backend

ROOT = Path(__file__).parent.parent


def _child(code: str, env: dict[str, str], timeout: float = 120
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=ROOT, env={**os.environ, **env}, timeout=timeout)


def _backend_or_skip(name: str) -> Any:
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(f"no {name} backend here: {exc.message}")


# ---------------------------------------------------------------- NAT-70: bool bytes


@helper
def _truth(b: Vec[boolean], i: i32) -> i32:
    r = 2
    if b[i]:
        r = 1
    return r


@kernel
def bool_reader(b: Vec[boolean], o: Vec[i32], n: i32):
    i = global_thread_id()
    if i < n:
        o[i] = 7
        if b[i] == True:  # noqa: E712 - the comparison the backends disagreed on
            o[i] = 9


@kernel
def bool_helper_reader(b: Vec[boolean], o: Vec[i32], n: i32):
    i = global_thread_id()
    if i < n:
        o[i] = _truth(b, i)


@kernel
def bool_writer(x: Vec[f32], b: Vec[boolean], n: i32):
    i = global_thread_id()
    if i < n:
        b[i] = x[i] > 0.0


def _raw(values: list[int]) -> np.ndarray:
    return np.array(values, np.uint8).view(np.bool_)


@pytest.mark.parametrize("backend", ["interp", "c", "opencl", "default"])
def test_nat70_a_bool_byte_other_than_0_1_is_refused_on_every_backend(backend: str) -> None:
    """NAT-70: byte 2 viewed as a bool was read as true by the interpreter and as false by
    ``b == true`` on c and OpenCL; every backend now refuses it alike, naming the byte."""
    _backend_or_skip("c" if backend == "default" else backend)
    for k in (bool_reader, bool_helper_reader):  # read directly, and through a helper
        o = np.zeros(4, np.int32)
        with pytest.raises(LaunchError, match=r"argument b is a bool array holding the "
                                               r"byte 2 at flat index 2"):
            k[4, 4](_raw([0, 1, 2, 255]), o, 4, backend=backend)
        assert not o.any()  # refused before anything ran
    good = _raw([0, 1, 1, 0])
    o = np.zeros(4, np.int32)
    bool_reader[4, 4](good, o, 4, backend=backend)
    assert o.tolist() == [7, 9, 9, 7]


def test_nat70_views_of_bool_bytes_are_refused_by_flat_index() -> None:
    """NAT-70: a strided, reversed or 2-D-derived view is looked at as the kernel sees it:
    the index is the view's flat (C-order) index."""
    c_or_skip()
    base = np.zeros(12, np.uint8)
    base[7] = 3
    view = base.view(np.bool_)[::-1][::2]  # elements 11, 9, 7, ...: byte 3 at index 2
    o = np.zeros(6, np.int32)
    with pytest.raises(LaunchError, match="byte 3 at flat index 2"):
        bool_reader[6, 4](view, o, 6, backend="c")
    base[7] = 1
    bool_reader[6, 4](view, o, 6, backend="c")
    ref = np.zeros(6, np.int32)
    bool_reader[6, 4](view, ref, 6, backend="interp")
    assert o.tobytes() == ref.tobytes()


def test_nat70_the_reference_interpreter_refuses_alike() -> None:
    """NAT-70: ``sarek_py.ir.interp.run_kernel`` called directly refuses the same array."""
    with pytest.raises(InterpError, match="byte 255 at flat index 1"):
        run_kernel(bool_reader.ir, {"b": _raw([1, 255]), "o": np.zeros(2, np.int32),
                                    "n": 2}, 2, 2)


def test_nat70_an_output_bool_array_is_not_looked_at() -> None:
    """NAT-70: an array the kernel only writes may hold any bytes before the launch
    (``np.empty``); the bytes written are the interpreter's on c."""
    c_or_skip()
    x = np.array([1.0, -1.0, 0.0, 2.0, -0.0], np.float32)
    outs = []
    for backend in ("interp", "c"):
        b = np.full(5, 0xEE, np.uint8).view(np.bool_)
        bool_writer[5, 4](x, b, 5, backend=backend)
        outs.append(b.view(np.uint8).tobytes())
    assert outs[0] == outs[1] == bytes([1, 0, 0, 1, 0])
    be = get_backend("c")
    b = np.full(5, 0xEE, np.uint8).view(np.bool_)  # write-discarded: never read
    be.run_kernel(bool_writer.ir, {"x": x, "b": b, "n": 5}, 5, 4, overwritten=["b"])
    assert b.view(np.uint8).tobytes() == outs[0]


def test_nat70_device_arrays_refuse_bool_bytes() -> None:
    """NAT-70: ``to_device`` and ``DeviceArray.set`` refuse a bool array with byte 2."""
    c_or_skip()
    with pytest.raises(LaunchError, match="to_device: the array is a bool array holding "
                                          "the byte 2 at flat index 0"):
        sarek_py.to_device(_raw([2, 0]), backend="c")
    d = sarek_py.to_device(_raw([1, 0]), backend="c")
    with pytest.raises(LaunchError, match="set: the host array .* byte 9 at flat index 1"):
        d.set(_raw([0, 9]))
    assert d.get().view(np.uint8).tolist() == [1, 0]


# ---------------------------------------------------------------- NAT-71: compile once


def test_nat71_eight_threads_compile_a_new_kernel_once(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """NAT-71: eight threads launching one new kernel object at once emit it once and run
    the compiler once; each gets the interpreter's bytes."""
    be = c_or_skip()
    from sarek_py.runtime.ccompiler import CompileCounter

    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))  # a library no process has built

    @kernel
    def scale71(x: Vec[f32], n: i32):
        i = global_thread_id()
        if i < n:
            x[i] = x[i] * 3.0 + 0.71

    k = scale71.ir
    runs, emits = CompileCounter.runs, be.stats.emits
    start = threading.Barrier(8)
    outs: list[bytes] = []
    errors: list[BaseException] = []

    def launch() -> None:
        try:
            x = np.linspace(-1, 1, 300, dtype=np.float32)
            start.wait()
            be.run_kernel(k, {"x": x, "n": 300}, 300, 64)
            outs.append(x.tobytes())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=launch) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert CompileCounter.runs - runs == 1
    assert be.stats.emits - emits == 1
    ref = np.linspace(-1, 1, 300, dtype=np.float32)
    run_kernel(k, {"x": ref, "n": 300}, 300, 64)
    assert set(outs) == {ref.tobytes()}


_TWO = """
import os, sys, time
from pathlib import Path
import numpy as np
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel
from sarek_py.runtime import get_backend

@kernel
def twice71(x: Vec[f32], n: i32):
    i = global_thread_id()
    if i < n:
        x[i] = x[i] * 5.0 - 0.25

be = get_backend("c")
go = Path(sys.argv[1])
Path(sys.argv[2]).touch()
while not go.exists():
    time.sleep(0.01)
x = np.arange(50, dtype=np.float32)
twice71[50, 16](x, 50, backend="c")
print(x.tobytes().hex())
"""


def test_nat71_two_processes_compile_a_new_kernel_once(tmp_path: Path) -> None:
    """NAT-71: two processes launching one new kernel at once, over one fresh disk cache,
    run the compiler once between them (a compiler that takes half a second, so their
    compiles would overlap), and print the same bytes."""
    c_or_skip()
    from sarek_py.runtime.ccompiler import compiler

    log = tmp_path / "cc.log"
    slow = tmp_path / "slowcc"
    slow.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nsleep 0.5\nexec {compiler()} \"$@\"\n")
    slow.chmod(0o755)
    env = {"SAREK_CACHE": str(tmp_path / "cache"), "SAREK_CC": str(slow)}
    go = tmp_path / "go"
    script = tmp_path / "twice71.py"  # a file: the front end reads a kernel's source
    script.write_text(_TWO)
    procs = [subprocess.Popen([sys.executable, str(script), str(go), str(tmp_path / f"r{i}")],
                              cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"r{i}").exists() for i in range(2)):
        assert time.monotonic() < deadline, "the children did not start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.02)
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert outs[0][0] == outs[1][0]
    kernel_compiles = [ln for ln in log.read_text().splitlines() if "-shared" in ln]
    # the probe (NAT-15) and the kernel: each once, whichever process compiled it
    assert len(kernel_compiles) == 2, kernel_compiles


# ---------------------------------------------------------------- NAT-72: f32 bits


@kernel
def put72(x: Vec[f32], y: Vec[f64], a: f32, b: f64, n: i32):
    i = global_thread_id()
    if i < n:
        x[i] = a
        y[i] = b


@pytest.mark.parametrize("backend", ["c", "opencl"])
@pytest.mark.parametrize("bits", [0x7F800001, 0xFF800001, 0x7FA00000, 0x7FC00001,
                                  0x80000000, 0x00000001, 0x7F800000])
def test_nat72_an_f32_scalar_keeps_its_bits(bits: int, backend: str) -> None:
    """NAT-72: a signalling NaN f32 argument (and other edge bit patterns) is written with
    the interpreter's bits on c and OpenCL, not quietened; an f64 one likewise."""
    _backend_or_skip(backend)
    a = np.array([bits], np.uint32).view(np.float32)[0]
    b = np.array([0x7FF0000000000001 | bits], np.uint64).view(np.float64)[0]
    outs = []
    for name in ("interp", backend):
        x, y = np.zeros(3, np.float32), np.zeros(3, np.float64)
        put72[3, 2](x, y, a, b, 3, backend=name)
        outs.append((x.tobytes(), y.tobytes()))
    assert outs[0] == outs[1]
    assert outs[1][0][:4] == np.uint32(bits).tobytes()


# ---------------------------------------------------------------- NAT-73: --unchecked


@kernel
def guarded73(x: Vec[f32], n: i32):
    i = global_thread_id()
    if i < n:
        x[i] = x[i] + 1.0
    barrier()


def test_nat73_unchecked_on_the_default_reaches_the_fallback() -> None:
    """NAT-73: ``checked = False`` on the default backend runs the unchecked build on the
    fallback for a kernel c refuses (a barrier), and ``checked = True`` checks again."""
    c_or_skip()
    be = get_backend("default")
    if be.name != "c":
        pytest.skip(f"the default backend here is {be.name}")
    other = be.fallback  # type: ignore[attr-defined]
    if other.name == "interp":
        pytest.skip("no OpenCL here: the interpreter always checks")
    k = guarded73.ir
    try:
        be.checked = False
        assert other.checked is False
        x = np.arange(64, dtype=np.float32)
        be.run_kernel(k, {"x": x, "n": 64}, 64, 64)
        assert x.tolist() == list(range(1, 65))
        unchecked = other._unchecked.misses + other._unchecked.hits
        checked = other._checked.misses + other._checked.hits
        be.run_kernel(k, {"x": x, "n": 64}, 64, 64)
        assert other._unchecked.misses + other._unchecked.hits > unchecked
        assert other._checked.misses + other._checked.hits == checked
    finally:
        be.checked = True
    assert other.checked is True
    checked = other._checked.misses + other._checked.hits
    other.prove_launches, proving = False, other.prove_launches
    try:
        be.run_kernel(k, {"x": x, "n": 64}, 64, 64)
    finally:
        other.prove_launches = proving
    assert other._checked.misses + other._checked.hits > checked


def test_nat73_the_cli_unchecked_default_reaches_the_fallback(tmp_path: Path) -> None:
    """NAT-73: ``run --backend default --unchecked`` on a file whose kernel has a barrier
    runs (on the fallback, unchecked where it is OpenCL) with the interpreter's output."""
    c_or_skip()
    src = tmp_path / "b.sk"
    src.write_text("kernel bar73(x : f32[], n : i32) =\n"
                   "  let i = global_thread_id in\n"
                   "  if i < n then x[i] <- x[i] * 2.0f;\n"
                   "  barrier\n")
    code = ("import sys\nfrom sarek_py.cli.main import main\n"
            "from sarek_py.runtime import get_backend\n"
            f"rc = main(['run', {str(src)!r}, '--backend', 'default', '--unchecked', "
            "'--kernel', 'bar73', '--threads', '64', '--block', '64', '--size', 'x=64', "
            "'--size', 'n=64', '--compare', 'interp'])\n"
            "be = get_backend('default')\n"
            "print('FALLBACK', be.fallback.name, be.fallback.checked)\nsys.exit(rc)\n")
    done = _child(code, {})
    assert done.returncode == 0, done.stderr
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("FALLBACK")][0]
    name, checked = line.split()[1:]
    assert checked == ("True" if name == "interp" else "False"), line


# ---------------------------------------------------------------- NAT-74: DLPack


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("shape", [(5,), (2, 3), (0,), (2, 0, 3)])
def test_nat74_c_device_arrays_export_dlpack(dtype: Any, shape: tuple[int, ...]) -> None:
    """NAT-74: ``np.from_dlpack`` of a c device array is a view of its memory, of its shape
    and dtype; ``__dlpack_device__`` is the CPU's."""
    c_or_skip()
    host = (np.arange(int(np.prod(shape))) % 2).astype(dtype).reshape(shape)
    for backend in ("c", "default"):
        d = sarek_py.to_device(host, backend=backend)
        if d.backend != "c":
            continue
        assert d.__dlpack_device__() == (1, 0)
        v = np.from_dlpack(d)
        assert v.shape == shape and v.dtype == np.dtype(dtype)
        assert v.tobytes() == host.tobytes()
        if v.size:
            v.reshape(-1)[0] = 1
            assert d.get().reshape(-1)[0] == 1


def test_nat74_other_exports_are_refused_naming_the_backend() -> None:
    """NAT-74: a c device array has no ``cl_array`` nor ``__cuda_array_interface__``."""
    c_or_skip()
    d = sarek_py.to_device(np.ones(3, np.float32), backend="c")
    for name in ("cl_array", "__cuda_array_interface__"):
        with pytest.raises(AttributeError, match=f"the c backend has no {name}"):
            getattr(d, name)


# ---------------------------------------------------------------- NAT-75: the bound


def _sources(n: int, tag: str) -> list[str]:
    return [f"int sarek_t75_{tag}{i}(void) {{ return {i}; }}\n" for i in range(n)]


def _libs(cache: Path) -> list[Path]:
    return sorted((cache / "c").glob("*.so"))


def test_nat75_the_cache_keeps_the_most_recently_used(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-75: with ``$SAREK_C_CACHE_LIBRARIES=4`` the cache never holds more than 4
    libraries after a compile; a library used again (a lookup that finds it) is kept over
    older ones; an evicted library's source and lock file go with it."""
    c_or_skip()
    from sarek_py.runtime.ccompiler import library

    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    monkeypatch.setenv("SAREK_C_CACHE_LIBRARIES", "4")
    srcs = _sources(6, "a")
    first = library(srcs[0])
    for s in srcs[1:4]:
        os.utime(first, (1, 1))  # ages apart, whatever the file system's clock grain
        library(s)
    time.sleep(0.01)
    assert library(srcs[0]) == first  # found, and touched: the most recently used now
    for s in srcs[4:]:
        library(s)
        assert len(_libs(tmp_path)) <= 4
    assert first.exists()
    keys = {p.stem for p in _libs(tmp_path)}
    leftovers = {p.stem for p in (tmp_path / "c").iterdir()} - keys
    assert not leftovers, leftovers


def test_nat75_a_held_library_is_never_evicted(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-75: a library whose key another process holds (it is loading it) is kept, however
    old; once let go, it is the first to go."""
    c_or_skip()
    from sarek_py.runtime.ccompiler import cache_dir, library
    from sarek_py.runtime.cfiles import evict

    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    if True:
        libs = [library(s) for s in _sources(5, "b")]
        for age, lib in enumerate(libs):
            os.utime(lib, (age + 1, age + 1))
        holder = subprocess.Popen(
            [sys.executable, "-c",
             "import fcntl, os, sys, time\n"
             f"fd = os.open({str(libs[0].with_suffix('.lock'))!r}, os.O_RDWR | os.O_CREAT)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n"],
            stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            removed = evict(cache_dir(), 2)
            assert libs[0].exists() and libs[0].stem not in removed
            assert len(removed) == 4 and not libs[1].exists()
        finally:
            holder.kill()
            holder.wait()
        assert evict(cache_dir(), 0) == []  # 0: no bound
        library(_sources(1, "c")[0])
        assert evict(cache_dir(), 1)[0] == libs[0].stem


def test_nat75_a_loaded_library_keeps_working_after_eviction(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """NAT-75: a kernel loaded in this process launches again after its file was evicted,
    and a new kernel object of the same source compiles it again, with the same bytes."""
    be = c_or_skip()
    from sarek_py.runtime.ccompiler import cache_dir
    from sarek_py.runtime.cfiles import evict

    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))

    def make() -> Any:
        @kernel
        def evicted75(x: Vec[f32], n: i32):
            i = global_thread_id()
            if i < n:
                x[i] = x[i] * 0.75 + 2.0

        return evicted75.ir

    k = make()
    x = np.arange(40, dtype=np.float32)
    be.run_kernel(k, {"x": x, "n": 40}, 40, 16)
    first = x.tobytes()
    from sarek_py.runtime.ccompiler import library

    library("int sarek_t75_other(void) { return 75; }\n")
    assert len(evict(cache_dir(), 1)) == 2 and not list(cache_dir().glob("*.so"))
    x = np.arange(40, dtype=np.float32)
    be.run_kernel(k, {"x": x, "n": 40}, 40, 16)  # still mapped in this process
    assert x.tobytes() == first
    x = np.arange(40, dtype=np.float32)
    be.run_kernel(make(), {"x": x, "n": 40}, 40, 16)
    assert x.tobytes() == first


def test_nat75_a_bad_bound_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-75: ``$SAREK_C_CACHE_LIBRARIES`` that is not a count makes the backend
    unavailable with one sentence."""
    from sarek_py.runtime.cfiles import limit

    monkeypatch.setenv("SAREK_C_CACHE_LIBRARIES", "lots")
    with pytest.raises(BackendUnavailable, match=r"\$SAREK_C_CACHE_LIBRARIES is 'lots', "
                                                 r"which is not a count"):
        limit()
    monkeypatch.setenv("SAREK_C_CACHE_LIBRARIES", "-1")
    with pytest.raises(BackendUnavailable):
        limit()


def test_nat75_an_eviction_waits_for_no_one(tmp_path: Path) -> None:
    """NAT-75: eviction only tries each lock (a held one is skipped at once)."""
    from sarek_py.runtime.cfiles import evict

    d = tmp_path / "c"
    d.mkdir()
    for i in range(3):
        (d / f"{i:032x}.so").write_bytes(b"")
        os.utime(d / f"{i:032x}.so", (i + 1, i + 1))
    fd = os.open(d / f"{0:032x}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        t = time.monotonic()
        assert evict(d, 1) == [f"{1:032x}", f"{2:032x}"][:2]
        assert time.monotonic() - t < 5
    finally:
        os.close(fd)


# ---------------------------------------------------------------- NAT-76: PoCL without ld


def test_nat76_pocl_without_ld_is_unavailable_not_an_abort(tmp_path: Path) -> None:
    """NAT-76: with no ``ld`` (nor ``cc``) on the PATH, ``get_backend("opencl")`` on PoCL
    is one sentence saying to install binutils, and the default backend runs the kernel on
    the interpreter; PoCL aborted the process (SIGABRT) at the first launch before."""
    cl = _backend_or_skip("opencl")
    from sarek_py.runtime.pocl import POCL

    if POCL not in str(cl.device.platform.name):
        pytest.skip("the OpenCL device here is not PoCL")
    empty = tmp_path / "bin"
    empty.mkdir()
    code = ("import numpy as np\n"
            "from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel\n"
            "from sarek_py.ir.diagnostics import BackendUnavailable\n"
            "from sarek_py.runtime import get_backend\n"
            "try:\n    get_backend('opencl')\n"
            "except BackendUnavailable as exc:\n    print('REFUSED', exc.message)\n"
            "@kernel\ndef k76(x: Vec[f32], n: i32):\n    i = global_thread_id()\n"
            "    if i < n:\n        x[i] = x[i] * 3.0 + 0.25\n"
            "x = np.ones(5, np.float32)\nk76[5, 4](x, 5)\n"
            "print('OUT', x.tolist(), get_backend('default').name)\n")
    script = tmp_path / "k76.py"  # a file: the front end reads a kernel's source
    script.write_text(code)
    code = f"import runpy\nrunpy.run_path({str(script)!r}, run_name='__main__')\n"
    done = _child(code, {"PATH": str(empty), "SAREK_CACHE": str(tmp_path / "cache"),
                         "POCL_CACHE_DIR": str(tmp_path / "pocl")})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "REFUSED" in done.stdout and "install binutils" in done.stdout, done.stdout
    assert "OUT [3.25, 3.25, 3.25, 3.25, 3.25] interp" in done.stdout, done.stdout


def test_nat76_missing_linker_names_pocl_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-76: only a PoCL CPU device without ``ld`` on the PATH is refused."""
    from sarek_py.runtime import pocl

    class Types:
        CPU, GPU = 2, 4

    class Cl:
        device_type = Types

    class Platform:
        def __init__(self, name: str) -> None:
            self.name = name

    class Device:
        def __init__(self, name: str, kind: int) -> None:
            self.platform, self.type = Platform(name), kind

    monkeypatch.setattr(pocl.shutil, "which", lambda name: None)
    assert "install binutils" in (pocl.missing_linker(Device(pocl.POCL, 2), Cl) or "")
    assert pocl.missing_linker(Device("NVIDIA CUDA", 4), Cl) is None
    assert pocl.missing_linker(Device(pocl.POCL, 4), Cl) is None
    monkeypatch.setattr(pocl.shutil, "which", lambda name: "/usr/bin/ld")
    assert pocl.missing_linker(Device(pocl.POCL, 2), Cl) is None


def test_nat71_a_child_forked_while_a_key_is_held_can_take_it() -> None:
    """NAT-71: a child forked while another thread of the parent held a key's lock (a
    compile in progress) does not wait for ever for that thread, which it does not have."""
    from sarek_py.runtime.once import KeyedLocks

    locks = KeyedLocks()
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with locks.hold("k"):
            held.set()
            release.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert held.wait(10)
        pid = os.fork()
        if pid == 0:  # the child: take the key, or be killed by the alarm
            import signal

            signal.alarm(10)
            with locks.hold("k"):
                pass
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        release.set()
        t.join()
    assert len(locks) == 0


def test_nat75_the_library_just_built_is_kept(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-75: with a bound of 1, the library a compile just built stays in the cache (the
    older one goes), so the next process finds it."""
    c_or_skip()
    from sarek_py.runtime.ccompiler import library

    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    monkeypatch.setenv("SAREK_C_CACHE_LIBRARIES", "1")
    a, b = (library(s) for s in _sources(2, "d"))
    assert b.exists() and not a.exists()


# ---------------------------------------------------------------- NAT-77: huge views

_HUGE = """
import resource, sys
import numpy as np
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
from sarek_py.frontend import Vec2, f32, global_idx_x, global_idx_y, kernel, length
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.runtime import get_backend

@kernel
def corner77(a: Vec2[f32], o: Vec2[f32]):
    j = global_idx_y()
    i = global_idx_x()
    if j < length(o, 0) and i < length(o, 1):
        o[j, i] = a[j, i] + 1.0

big = np.broadcast_to(np.float32(2), (2**16, 2**15))  # 8 GiB seen, 4 bytes stored
for be in sys.argv[1:]:
    try:
        get_backend(be)
    except BackendUnavailable:
        print(be, "unavailable")
        continue
    o = np.zeros((4, 4), np.float32)
    try:
        corner77[(1, 4), (4, 1)](big, o, backend=be)
        print(be, "ran")
    except SarekError as exc:
        print(be, "refused:", exc.message)
"""


def test_nat77_a_view_too_big_to_copy_is_one_sentence(tmp_path: Path) -> None:
    """NAT-77: a broadcast view of 8 GiB (4 bytes stored) that must be copied to the device
    is refused with one sentence on every backend, under a 6 GiB address-space limit; on
    OpenCL the staging copy raised a bare ``MemoryError`` before."""
    script = tmp_path / "huge77.py"  # a file: the front end reads a kernel's source
    script.write_text(_HUGE)
    code = f"import runpy\nrunpy.run_path({str(script)!r}, run_name='__main__')\n"
    done = subprocess.run([sys.executable, "-c", code, "c", "interp", "opencl"],
                          capture_output=True, text=True, check=False, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    for line in lines:
        assert line.endswith("unavailable") or "refused: cannot" in line, line
