"""The runtimes behind one interface (specs/launch.md, LCH-8 … LCH-15)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from sarek_py import runtime
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import (
    POISON_BYTE,
    Backend,
    LaunchError,
    available_backends,
    get_backend,
)
from sarek_py.runtime.base import written_arrays

SRC = """
kernel saxpy(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- a * x[i] + y[i]

// assigns every element of out before reading any: out may be write-discarded
kernel fill_then_scale(x : f32[], out : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (out[i] <- x[i]; out[i] <- out[i] * 2.0f)

fun put(a : f32[], i : i32, v : f32) : i32 =
  a[i] <- v;
  return 0

kernel via_helper(src : f32[], dst : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then let r = put(dst, i, src[i] + 1.0f) in ()

kernel sync_block(x : f32[])
  shared t : f32[64] =
  t[thread_idx_x] <- x[global_thread_id];
  barrier;
  x[global_thread_id] <- t[63 - thread_idx_x]

kernel bools(b : bool[], flag : bool, n : i32) =
  let i = global_thread_id in
  if i < n then b[i] <- b[i] != flag
"""
M = parse_module(SRC)
check_module(M)
BACKENDS = available_backends()


def backend(name: str) -> Backend:
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(exc.message)


@pytest.fixture(params=["interp", "opencl"])
def be(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The backend on its copying path: these tests check copies, discards and poison,
    which a device sharing the host's memory skips (zero copy, LCH-67, is
    tests/test_zero_copy.py's)."""
    b = backend(request.param)
    b.stats.reset()
    was = getattr(b, "zero_copy", None)
    if was is not None:
        b.zero_copy = False  # type: ignore[attr-defined]
    yield b
    if was is not None:
        b.zero_copy = was  # type: ignore[attr-defined]


def saxpy_args(n: int = 1000) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    return {"x": rng.standard_normal(n).astype(np.float32),
            "y": rng.standard_normal(n).astype(np.float32), "a": 1.5, "n": n}


# ----------------------------------------------------------------------------- LCH-8


def test_lch8_primitives_round_trip(be: Backend) -> None:
    host = np.arange(10, dtype=np.float64)
    dev = be.allocate((10,), np.float64)
    be.copy_in(dev, host)
    back = np.zeros(4, np.float64)
    be.copy_out(dev, back, 4)
    assert (back == host[:4]).all()
    be.fill(dev, POISON_BYTE)
    full = np.zeros(10, np.float64)
    be.copy_out(dev, full)
    assert full.view(np.uint8).tolist() == [POISON_BYTE] * 80
    assert be.stats.bytes_in == 80 and be.stats.bytes_out == 32 + 80
    assert be.stats.bytes_allocated == 80
    with pytest.raises(LaunchError):
        be.copy_in(dev, np.zeros(3, np.float64))


def test_lch8_launch_does_not_copy_back_before_sync(be: Backend) -> None:
    k = M.kernel("saxpy")
    args = saxpy_args(100)
    y0 = args["y"].copy()
    pending = be.start(k, args, 100, 32)
    assert (args["y"] == y0).all()  # nothing reaches the host array before finish
    be.sync()
    be.finish(pending)
    assert (args["y"] == np.float32(1.5) * args["x"] + y0).all()
    assert be.stats.launches == 1


# ----------------------------------------------------------------------------- LCH-9


def test_lch9_run_kernel_updates_in_place_like_the_interpreter(be: Backend) -> None:
    k = M.kernel("saxpy")
    args = saxpy_args()
    x0, y0 = args["x"].copy(), args["y"].copy()
    y_ref = y0.copy()
    from sarek_py.ir.interp import run_kernel

    run_kernel(k, {**args, "y": y_ref}, 1000, 128)
    res = be.run_kernel(k, args, 1000, 128)
    assert args["y"].tobytes() == y_ref.tobytes()
    assert (args["x"] == x0).all()
    assert res.stop_codes.shape == (1000,) and not res.stop_codes.any()
    # x is only read: copied in, not out
    assert be.stats.bytes_in == 8000 and be.stats.bytes_out == 4000


def test_lch9_arrays_written_through_helpers_are_copied_back(be: Backend) -> None:
    k = M.kernel("via_helper")
    assert written_arrays(k) == {"dst"}
    src = np.arange(50, dtype=np.float32)
    dst = np.zeros(50, np.float32)
    be.run_kernel(k, {"src": src, "dst": dst, "n": 50}, 50, 32)
    assert (dst == src + 1).all()


def test_lch9_bool_arrays_and_scalars(be: Backend) -> None:
    b = np.array([True, False, True, False] * 8)
    be.run_kernel(M.kernel("bools"), {"b": b, "flag": True, "n": 30}, 32, 32)
    expect = np.array([False, True, False, True] * 8)
    expect[30:] = b[30:]
    assert (b == expect).all()


def test_lch9_same_array_twice_is_one_buffer(be: Backend) -> None:
    k = M.kernel("saxpy")
    v = np.arange(16, dtype=np.float32)
    be.run_kernel(k, {"x": v, "y": v, "a": 2.0, "n": 16}, 16, 16)
    assert (v == np.arange(16, dtype=np.float32) * 3).all()


# ---------------------------------------------------------------------------- LCH-10


def test_lch10_write_discard_skips_the_copy(be: Backend) -> None:
    k = M.kernel("fill_then_scale")
    x = np.arange(256, dtype=np.float32)
    out = np.full(256, 7.0, np.float32)
    be.run_kernel(k, {"x": x, "out": out, "n": 256}, 256, 64, overwritten=["out"])
    assert (out == x * 2).all()
    assert be.stats.bytes_in == x.nbytes  # out was not copied in
    assert be.stats.bytes_discarded == out.nbytes


def test_lch10_discarded_buffer_is_poisoned(be: Backend) -> None:
    """A kernel that does read before writing (saxpy reads y) shows the poison: what the
    host held did not reach the device."""
    k = M.kernel("saxpy")
    args = saxpy_args(64)
    be.run_kernel(k, args, 64, 64, overwritten=["y"])
    poison = np.frombuffer(bytes([POISON_BYTE] * 4), np.float32)[0]
    assert (args["y"] == np.float32(1.5) * args["x"] + poison).all()


def test_lch10_aliased_argument_cancels_the_discard(be: Backend) -> None:
    k = M.kernel("saxpy")
    v = np.arange(16, dtype=np.float32)
    be.run_kernel(k, {"x": v, "y": v, "a": 2.0, "n": 16}, 16, 16, overwritten=["y"])
    assert (v == np.arange(16, dtype=np.float32) * 3).all()
    assert be.stats.bytes_discarded == 0


# ---------------------------------------------------------------------------- LCH-11


def test_lch11_argument_errors(be: Backend) -> None:
    k = M.kernel("saxpy")
    good = saxpy_args(8)
    bad_cases: list[tuple[dict[str, Any], str]] = [
        ({k: v for k, v in good.items() if k != "a"}, "no argument for parameter a"),
        ({**good, "z": 1}, "no parameter z"),
        ({**good, "x": good["x"].astype(np.float64)}, "argument x must be a 1-d array of"),
        ({**good, "x": np.zeros((2, 4), np.float32)}, "argument x must be a 1-d array"),
        ({**good, "n": 2**40}, "does not fit i32"),
        ({**good, "n": 1.5}, "must be an integer"),
        ({**good, "a": True}, "must be a number"),
        ({**good, "x": [1.0]}, "must be a numpy array"),
    ]
    for args, msg in bad_cases:
        with pytest.raises(LaunchError, match=msg):
            be.run_kernel(k, args, 8, 8)
    with pytest.raises(LaunchError, match="block size 0"):
        be.run_kernel(k, good, 8, 0)
    base = np.zeros(20, np.float32)
    with pytest.raises(LaunchError, match="overlaps"):
        be.run_kernel(k, {**good, "x": base[:8], "y": base[4:12]}, 8, 8)


def test_lch11_block_size_above_the_device_limit() -> None:
    be = backend("opencl")
    with pytest.raises(LaunchError, match="exceeds the device's limit"):
        be.run_kernel(M.kernel("saxpy"), saxpy_args(8), 8, 1 << 20)


def test_lch6_barrier_kernels_need_whole_blocks() -> None:
    k = M.kernel("sync_block")
    x = np.arange(96, dtype=np.float32)
    get_backend("interp").run_kernel(k, {"x": x.copy()}, 64, 64)
    be = backend("opencl")
    with pytest.raises(LaunchError, match="LCH-6"):
        be.run_kernel(k, {"x": x}, 96, 64)
    y = np.arange(128, dtype=np.float32)
    be.run_kernel(k, {"x": y}, 128, 64)
    assert (y[:64] == np.arange(64)[::-1]).all()


def test_lch3_no_thread_below_one(be: Backend) -> None:
    args = saxpy_args(8)
    y0 = args["y"].copy()
    res = be.run_kernel(M.kernel("saxpy"), args, 0, 8)
    assert (args["y"] == y0).all() and res.stop_codes.size == 0
    assert be.stats.launches == 0


# ------------------------------------------------------------------------ LCH-12..15


def test_lch12_interp_backend_is_the_interpreter() -> None:
    from sarek_py.ir.diagnostics import InterpError

    be = get_backend("interp")
    assert be.name == "interp"
    k = parse_module("""
kernel oob(x : f32[]) = x[global_thread_id + 1] <- 1.0f
""").kernels[0]
    with pytest.raises(InterpError):
        be.run_kernel(k, {"x": np.zeros(4, np.float32)}, 4, 4)


def test_lch13_programs_are_built_once() -> None:
    from sarek_py.runtime import opencl as ocl

    be = backend("opencl")
    k = M.kernel("saxpy")
    be.run_kernel(k, saxpy_args(8), 8, 8)
    n = len(ocl._PROGRAMS)
    be.run_kernel(k, saxpy_args(8), 8, 8)
    assert len(ocl._PROGRAMS) == n


def test_lch13_no_platform_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from sarek_py.runtime import opencl as ocl

    class NoPlatforms:
        @staticmethod
        def get_platforms() -> list[Any]:
            raise RuntimeError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    with pytest.raises(BackendUnavailable, match="no OpenCL platform"):
        ocl._pick_device(NoPlatforms)


def test_lch14_cuda_unavailable_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    from sarek_py.runtime import cuda

    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    with pytest.raises(BackendUnavailable) as info:
        cuda.CudaBackend()
    text = info.value.message
    assert "PyCUDA is not installed" in text and text.count(". ") == 0 and "\n" not in text


@pytest.mark.gpu
def test_lch14_cuda_matches_the_interpreter() -> None:
    be = backend("cuda")
    k = M.kernel("saxpy")
    args = saxpy_args()
    ref = {**args, "y": args["y"].copy()}
    get_backend("interp").run_kernel(k, ref, 1000, 128)
    be.run_kernel(k, args, 1000, 128)
    assert args["y"].tobytes() == ref["y"].tobytes()


def test_lch15_default_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_instances", {})
    monkeypatch.setattr(runtime, "_unavailable", {})
    made: list[str] = []
    real = runtime._make

    def make(name: str) -> Backend:
        made.append(name)
        if name == "cuda":
            raise BackendUnavailable("no GPU.")
        return real(name)

    monkeypatch.setattr(runtime, "_make", make)
    chosen = get_backend("default")
    assert made[:2] == ["cuda", "auto"]  # CUDA first, then C + OpenMP (NAT-25)
    assert chosen.name == "c"
    with pytest.raises(BackendUnavailable, match="no GPU"):
        get_backend("cuda")  # remembered
    with pytest.raises(LaunchError, match="choose one of cuda, c, opencl, interp"):
        get_backend("metal")


def test_lch15_default_order_without_a_c_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """LCH-15, NAT-25: without CUDA and without a C compiler, OpenCL, then the
    interpreter."""
    monkeypatch.setattr(runtime, "_instances", {})
    monkeypatch.setattr(runtime, "_unavailable", {})
    real = runtime._make

    def make(name: str) -> Backend:
        if name in ("cuda", "auto", "c"):
            raise BackendUnavailable(f"no {name} here.")
        return real(name)

    monkeypatch.setattr(runtime, "_make", make)
    assert get_backend("default").name == ("opencl" if "opencl" in BACKENDS else "interp")


class _FakeDriver:
    """Enough of ``pycuda.driver`` to run the cuda backend's glue without a GPU: memory is
    numpy bytes, the PTX is really compiled by nvcc, and a launch records its arguments."""

    class Device:
        @staticmethod
        def count() -> int:
            return 1

        def __init__(self, n: int) -> None:
            self.n = n

        def retain_primary_context(self) -> Any:
            class Ctx:
                def push(self) -> None:
                    pass

            return Ctx()

        def compute_capability(self) -> tuple[int, int]:
            return (8, 0)

        def name(self) -> str:
            return "Fake GPU"

        def get_attribute(self, attr: Any) -> int:
            # a real GPU's figures (sm_80): LCH-21 checks launches against them
            return {"max threads": 1024, "max block x": 1024, "max grid x": 2**31 - 1,
                    "max shared": 49152, "max block y": 1024, "max block z": 64,
                    "max grid y": 65535, "max grid z": 65535}[attr]

    class device_attribute:  # noqa: N801 (pycuda's spelling)
        MAX_THREADS_PER_BLOCK = "max threads"
        MAX_BLOCK_DIM_X = "max block x"
        MAX_GRID_DIM_X = "max grid x"
        MAX_BLOCK_DIM_Y = "max block y"  # LCH-27: per-axis limits of n-D launches
        MAX_BLOCK_DIM_Z = "max block z"
        MAX_GRID_DIM_Y = "max grid y"
        MAX_GRID_DIM_Z = "max grid z"
        MAX_SHARED_MEMORY_PER_BLOCK = "max shared"

    class Context:
        syncs = 0

        @classmethod
        def synchronize(cls) -> None:
            cls.syncs += 1

    def __init__(self) -> None:
        self.launches: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.modules: list[bytes] = []

    def init(self) -> None:
        pass

    def mem_alloc(self, n: int) -> np.ndarray[Any, Any]:
        return np.zeros(n, np.uint8)

    def memcpy_htod(self, dev: np.ndarray[Any, Any], host: np.ndarray[Any, Any]) -> None:
        dev[: host.nbytes] = host.reshape(-1).view(np.uint8)

    def memcpy_dtoh(self, host: np.ndarray[Any, Any], dev: np.ndarray[Any, Any]) -> None:
        host.reshape(-1).view(np.uint8)[...] = dev[: host.nbytes]

    def memset_d8(self, dev: np.ndarray[Any, Any], byte: int, n: int) -> None:
        dev[:n] = byte

    def module_from_buffer(self, ptx: bytes) -> Any:
        self.modules.append(ptx)
        outer = self

        class Module:
            def get_function(self, name: str) -> Any:
                assert f".entry {name}(".encode() in ptx

                def launch(*args: Any, **kw: Any) -> None:
                    outer.launches.append((args, kw))

                return launch

        return Module()


def test_lch14_cuda_backend_glue_with_a_fake_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    from sarek_py.codegen.nvcc import find_nvcc
    from sarek_py.runtime import cuda

    if find_nvcc() is None:
        pytest.skip("nvcc is not installed here")
    fake = _FakeDriver()
    monkeypatch.setattr(cuda, "_import_driver", lambda: fake)
    be = cuda.CudaBackend()
    assert be.arch == "sm_80" and be.device_name == "Fake GPU (sm_80)"
    be.prove_launches = False  # the checked build's ABI (a proved launch has no record, CG-72)
    args = saxpy_args(300)
    be.run_kernel(M.kernel("saxpy"), args, 300, 128)
    assert len(fake.modules) == 1 and b"fma.rn" not in fake.modules[0]
    (values, kw), = fake.launches
    assert kw == {"block": (128, 1, 1), "grid": (3, 1)}
    # x, its extent, y, its extent, a, n, the thread count, the bounds-check record
    # (CG-22): the ABI's order and C types
    assert [type(v).__name__ for v in values] == [
        "ndarray", "int32", "ndarray", "int32", "float32", "int32", "int64", "ndarray"]
    assert values[1] == 300 and values[4] == np.float32(1.5) and values[6] == 300
    assert values[0][: 300 * 4].view(np.float32).tolist() == args["x"].tolist()
    be.run_kernel(M.kernel("saxpy"), saxpy_args(300), 300, 128)
    assert len(fake.modules) == 1  # loaded once
    with pytest.raises(LaunchError, match="limit of 1024"):
        be.run_kernel(M.kernel("saxpy"), saxpy_args(8), 8, 2048)


# ---------------------------------------------------------------------------- LCH-17


def _fresh_kernel(name: str) -> Any:
    """A kernel object no test has launched yet (a new parse), named ``name``."""
    return parse_module(SRC.replace("kernel saxpy(", f"kernel {name}(")).kernel(name)


def test_lch17_second_launch_neither_emits_nor_builds() -> None:
    be = backend("opencl")
    k = _fresh_kernel("lch17_once")
    ref = saxpy_args(300)
    get_backend("interp").run_kernel(k, ref, 300, 64)
    be.stats.reset()
    first = saxpy_args(300)
    be.run_kernel(k, first, 300, 64)
    assert (be.stats.emits, be.stats.builds, be.stats.launches) == (1, 1, 1)
    again = saxpy_args(300)
    be.run_kernel(k, again, 300, 64)
    assert (be.stats.emits, be.stats.builds, be.stats.launches) == (1, 1, 2)
    assert first["y"].tobytes() == again["y"].tobytes() == ref["y"].tobytes()


def test_lch17_equal_source_shares_the_built_program() -> None:
    be = backend("opencl")
    k1, k2 = _fresh_kernel("lch17_shared"), _fresh_kernel("lch17_shared")
    assert k1 is not k2
    be.stats.reset()
    a1, a2 = saxpy_args(64), saxpy_args(64)
    be.run_kernel(k1, a1, 64, 32)
    be.run_kernel(k2, a2, 64, 32)
    assert (be.stats.emits, be.stats.builds) == (2, 1)  # each object emitted, one build
    assert a1["y"].tobytes() == a2["y"].tobytes()


def test_lch17_bool_and_scalar_types_are_declared_once() -> None:
    """The kernel object's scalar C types are set at the first launch; later launches with
    other Python/numpy scalar types still pass the parameter's C type."""
    be = backend("opencl")
    k = parse_module(SRC).kernel("bools")
    for flag in (True, np.bool_(False), True):
        b = np.array([True, False, True], np.bool_)
        ref = b.copy()
        be.run_kernel(k, {"b": b, "flag": flag, "n": np.int64(3)}, 3, 4)
        assert b.tolist() == [x != bool(flag) for x in ref.tolist()]


def test_lch17_kernel_cache_is_by_identity_and_bounded() -> None:
    from sarek_py.runtime.cache import KernelCache

    made: list[str] = []
    cache: KernelCache[str] = KernelCache(lambda k: made.append(k.name) or k.name, limit=2)
    a, b, c = (_fresh_kernel(n) for n in ("ka", "kb", "kc"))
    assert [cache.get(a), cache.get(a), cache.get(b)] == ["ka", "ka", "kb"]
    assert made == ["ka", "kb"] and (cache.hits, cache.misses) == (1, 2)
    cache.get(_fresh_kernel("ka"))  # the same text, another object: prepared again
    assert made == ["ka", "kb", "ka"] and len(cache) == 2  # a went (least recently used)
    assert cache.get(b) == "kb" and made == ["ka", "kb", "ka"]  # b stayed
    cache.get(a)
    cache.get(c)
    assert made == ["ka", "kb", "ka", "ka", "kc"] and len(cache) == 2


def test_lch17_source_caches_are_bounded() -> None:
    """The source-keyed caches (built programs, kernel objects) keep the most recently
    used entries only."""
    from sarek_py.runtime.cache import LruCache
    from sarek_py.runtime.opencl import _PROGRAMS

    cache: LruCache[str, int] = LruCache(limit=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1          # a is now the most recent
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == (1, None, 3, 2)
    assert isinstance(_PROGRAMS, LruCache)


def test_lch17_kernel_facts_are_the_kernels() -> None:
    from sarek_py.runtime.cache import kernel_facts

    f = kernel_facts(M.kernel("sync_block"))
    assert f.has_barrier and not f.can_stop and f.written == frozenset({"x"})
    g = kernel_facts(M.kernel("via_helper"))
    assert not g.has_barrier and g.written == written_arrays(M.kernel("via_helper"))
    assert kernel_facts(M.kernel("via_helper")) is g  # computed once


def test_lch17_cuda_compiles_each_kernel_object_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from sarek_py.codegen.nvcc import find_nvcc
    from sarek_py.runtime import cuda

    if find_nvcc() is None:
        pytest.skip("nvcc is not installed here")
    fake = _FakeDriver()
    monkeypatch.setattr(cuda, "_import_driver", lambda: fake)
    be = cuda.CudaBackend()
    k = _fresh_kernel("lch17_cuda")
    for _ in range(3):
        be.run_kernel(k, saxpy_args(64), 64, 32)
    assert (be.stats.emits, be.stats.builds, be.stats.launches) == (1, 1, 3)
    assert len(fake.modules) == 1 and len(fake.launches) == 3


# ---------------------------------------------------------------------------- LCH-18

MEMO_PROGRAM = """
program p
  var n : i32 = 2;
  var m : i32 = 30;
  var a : i32[1:] allocatable;
begin
  for t = 1 to 7 do
    if t % 3 == 1 then
      (
        if t > 1 then deallocate a;
        m := m + 7;
        allocate a[1:m]
      );
    n := n + (t % 2) * 3;
    parallel for (i = 1 to n) do a[i] <- a[i] + i * t done;
    parallel for (i = 1 to m) do a[i] <- a[i] * 2 done
  done
end
"""


@pytest.mark.parametrize("name", ["interp", "opencl"])
def test_lch18_launch_expressions_follow_their_inputs(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thread counts that change with n and m between launches (and unchanged ones reused)
    give the host-only run's result; the count that depends on m alone is walked only when
    m changed (three times in seven iterations)."""
    from sarek_py.host import interp as interp_module
    from sarek_py.host.interp import run_program
    from sarek_py.host.offload import offload
    from sarek_py.ir.host.launch import Launch
    from sarek_py.ir.host.program import iter_host
    from sarek_py.ir.host.text import parse_program

    be = backend(name)
    prog = parse_program(MEMO_PROGRAM)
    ref = run_program(prog).array("a")
    off = offload(prog, block_size=8)
    walked: list[Any] = []
    real = interp_module.host_expr

    def counting(e: Any) -> Any:
        entry = real(e)
        fn = entry.fn
        if not getattr(fn, "counted", False):  # each expression's closure counts its runs

            def run(frame: Any, fn: Any = fn, e: Any = e) -> Any:
                walked.append(e)
                return fn(frame)

            run.counted = True  # type: ignore[attr-defined]
            entry.fn = run
        return entry

    monkeypatch.setattr(interp_module, "host_expr", counting)
    got = run_program(off, device=be).array("a")
    assert got.tobytes() == ref.tobytes()
    launches = [s for s in iter_host(off.body) if isinstance(s, Launch)]
    by_m = next(s.thread_count for s in launches if "loop_2" in s.kernel.name)
    by_n = next(s.thread_count for s in launches if "loop_2" not in s.kernel.name)
    assert sum(e is by_m for e in walked) == 3
    assert sum(e is by_n for e in walked) == 4  # n changes at t = 1, 3, 5, 7


def test_lch18_keys_hold_types_shapes_and_skip_floats() -> None:
    from sarek_py.host.frame import Frame
    from sarek_py.host.interp import HostInterp
    from sarek_py.ir.host.text import parse_program
    from sarek_py.ir.nodes import Binary, BinaryOp, Const, Length, Ref, var
    from sarek_py.ir.types import Scalar, array

    hi = HostInterp(parse_program("program p\nbegin\n  ()\nend\n"))
    n, a = var("n", Scalar.I32), var("a", array(Scalar.F32, 1))
    x = var("x", Scalar.F64)
    f = Frame({n: np.int32(3), a: np.zeros(5, np.float32), x: np.float64(0.0)})
    e = Binary(BinaryOp.ADD, Ref(n), Length(a, 0))
    assert hi.eval(e, f) == 8
    f.set_var(a, np.zeros(9, np.float32))  # reallocated: same n, another shape
    assert hi.eval(e, f) == 12
    f.set_var(n, np.int32(-1))
    assert hi.eval(e, f) == 8
    inv = Binary(BinaryOp.DIV, Const(1.0, Scalar.F64), Ref(x))
    assert hi.eval(inv, f) == np.inf
    f.set_var(x, np.float64(-0.0))  # equal to 0.0, yet 1/x differs: floats are not reused
    assert hi.eval(inv, f) == -np.inf



# ---------------------------------------------------------------------------- LCH-19

ZERO_PROGRAM = """
program p
  var n : i32 = 40;
  var a : f64[1:] allocatable;
  var b : f64[1:] allocatable;
  var c : f64[1:] allocatable;
begin
  allocate a[1:n];
  allocate b[1:n];
  allocate c[1:n];
  b[3] <- 2.5;
  parallel for (i = 1 to n) do a[i] <- a[i] + b[i] + c[i] + f64(i) done;
  c[2] <- 1.0;
  parallel for (i = 1 to n) do a[i] <- a[i] * 2.0 + c[i] done
end
"""


@pytest.mark.parametrize("name", ["interp", "opencl"])
def test_lch19_fresh_arrays_are_zero_filled(name: str) -> None:
    """a and c are fresh: zero-filled, not copied; b was stored by the host after its
    allocation: copied. c is stored by the host after the first launch: copied in for the
    second. The values are the host-only run's."""
    from sarek_py.host.interp import run_program
    from sarek_py.host.offload import offload
    from sarek_py.ir.host.text import parse_program

    be = backend(name)
    prog = parse_program(ZERO_PROGRAM)
    ref = run_program(prog)
    be.stats.reset()
    got = run_program(offload(prog, block_size=16), device=be)
    for arr in "abc":
        assert got.array(arr).tobytes() == ref.array(arr).tobytes()
    nbytes = 40 * 8
    assert be.stats.bytes_zeroed == 2 * nbytes  # a and c at the first launch
    assert be.stats.bytes_in == 2 * nbytes  # b at the first launch, c at the second
    assert got.array("a")[2] == 2 * (0 + 2.5 + 0 + 3)  # b[3] reached the device
