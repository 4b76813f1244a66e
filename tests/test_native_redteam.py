"""The red team's findings on the ``c`` backend, each a regression test (specs/native.md,
NAT-40 … NAT-49).

Every test that runs C is skipped, with the reason, where no C compiler with OpenMP is
installed (NAT-15). Processes that must start clean (a fresh disk cache, a fork) are
children of the test.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from native_diff import c_backend as c_or_skip

import sarek_py
from sarek_py.codegen.names import Namer, is_reserved
from sarek_py.frontend import Vec, f32, f64, global_thread_id, i32, kernel
from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.interp_ops import math
from sarek_py.runtime import get_backend

ROOT = Path(__file__).parent.parent


def _child(code: str, env: dict[str, str], timeout: float = 60
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=ROOT, env={**os.environ, **env}, timeout=timeout)


# ---------------------------------------------------------------- NAT-40, NAT-41: the cache

def test_nat40_an_edited_cached_source_is_not_compiled(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-40: the library is compiled from the source in memory, never from the kept
    ``.c`` file: an edited ``.c`` whose library was removed does not change the result."""
    c_or_skip()
    from sarek_py.runtime.ccompiler import library

    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    source = "int sarek_t40(void) { return 1; }\n"
    lib = library(source)
    kept = lib.with_suffix(".c")
    assert kept.read_text().startswith(source)
    lib.unlink()
    kept.write_text(source.replace("return 1", "return 2"))
    again = library(source)
    # a copy: the first library of this path may be loaded in this process already
    copy = tmp_path / "copy.so"
    copy.write_bytes(again.read_bytes())
    assert ctypes.CDLL(str(copy)).sarek_t40() == 1
    assert again.with_suffix(".c").read_text().startswith(source)


_SWAPPED = """
import numpy as np
from pathlib import Path
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel
from sarek_py.runtime.ccompiler import cache_dir

@kernel
def scale8(x: Vec[f32], t: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i] + 1.0

x = np.arange(8, dtype=np.float32)
t = np.zeros(8, np.float32)
scale8[8, 4](x, t, 2.0, 8, backend="c")
print(t.tolist())
if {swap}:
    libs = sorted(cache_dir().glob("*.so"))
    srcs = {{p: p.with_suffix(".c").read_text() for p in libs}}
    probe = next(p for p in libs if "scale8" not in srcs[p])
    for p in libs:
        if p != probe:  # a new file: the loaded one is mapped
            tmp = p.with_suffix(".tmp")
            tmp.write_bytes(probe.read_bytes())
            tmp.replace(p)
"""


_TWO_BUILDS = """
import numpy as np
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel
from sarek_py.runtime import get_backend
from sarek_py.runtime.ccompiler import CompileCounter, cache_dir

@kernel
def scale9(x: Vec[f32], t: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i] + 1.0

x = np.arange(8, dtype=np.float32)
t = np.zeros(8, np.float32)
be = get_backend("c")
if {swap}:
    for checked in (True, False):
        be.compiled(scale9.ir, checked)
    libs = [p for p in sorted(cache_dir().glob("*.so"))
            if "scale9" in p.with_suffix(".c").read_text()]
    assert len(libs) == 2, libs
    one, two = (p.read_bytes() for p in libs)
    for p, data in zip(libs, (two, one)):
        tmp = p.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(p)
else:
    runs = CompileCounter.runs
    for checked in (True, False):
        be.compiled(scale9.ir, checked)
    scale9[8, 4](x, t, 2.0, 8, backend="c")
    print(CompileCounter.runs - runs, t.tolist())
"""


def test_nat41_the_other_build_of_the_same_kernel_is_compiled_again(tmp_path: Path) -> None:
    """NAT-41: the checked and unchecked builds of one kernel export the same function;
    swapped in the cache, each is found not to be its source's library (its marker) and
    compiled again."""
    c_or_skip()
    env = {**os.environ, "SAREK_CACHE": str(tmp_path / "cache")}
    runs = []
    for swap in (True, False):
        script = tmp_path / f"two{swap}.py"
        script.write_text(_TWO_BUILDS.format(swap=swap))
        runs.append(subprocess.run([sys.executable, str(script)], capture_output=True,
                                   text=True, check=False, cwd=ROOT, env=env, timeout=60))
    first, second = runs
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == f"2 {[2.0 * v + 1 for v in range(8)]}"


def test_nat41_a_cached_library_of_another_source_is_compiled_again(tmp_path: Path) -> None:
    """NAT-41: a cached library that loads but is not the one of its source (here the
    OpenMP probe's, lacking the kernel's function) is compiled again, not a raw
    ``AttributeError``."""
    c_or_skip()
    env = {**os.environ, "SAREK_CACHE": str(tmp_path / "cache")}
    runs = []
    for swap in (True, False):
        script = tmp_path / f"swap{swap}.py"  # a file: kernels are read from their source
        script.write_text(_SWAPPED.format(swap=swap))
        runs.append(subprocess.run([sys.executable, str(script)], capture_output=True,
                                   text=True, check=False, cwd=ROOT, env=env, timeout=60))
    first, second = runs
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert second.stdout.split("\n")[0] == str([2.0 * v + 1 for v in range(8)])


# ---------------------------------------------------------------- NAT-42: min/max with NaNs

@kernel
def _minmax64(a: Vec[f64], b: Vec[f64], o: Vec[f64], n: i32) -> None:
    i = global_thread_id()
    if i < n:
        o[2 * i] = min(a[i], b[i])
        o[2 * i + 1] = max(b[i], a[i])


@kernel
def _minmax32(a: Vec[f32], b: Vec[f32], o: Vec[f32], n: i32) -> None:
    i = global_thread_id()
    if i < n:
        o[2 * i] = min(a[i], b[i])
        o[2 * i + 1] = max(a[i], b[i])


_NAN32 = [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00000, 0xFFFFFFFF, 0x7FC00001, 0xFF812345]
_NAN64 = [0x7FF8000000000000, 0x7FF0000000000001, 0xFFF4000000000000, 0xFFFFFFFFFFFFFFFF]


@pytest.mark.parametrize("n", [1, 7, 448])
def test_nat42_interpreter_min_max_of_a_signalling_nan_is_the_other(n: int) -> None:
    """NAT-42, CG-8: the interpreter's float min/max with a NaN operand, quiet or
    signalling, yield the other operand, whatever the launch's size (numpy's scalar and
    vector ``fmin`` disagree on a signalling NaN)."""
    for bits, ft, it in ((_NAN32, np.float32, np.uint32), (_NAN64, np.float64, np.uint64)):
        b = np.resize(np.array(bits, it), n).view(ft)
        a = np.full(n, 1.5, ft)
        for w in ("min", "max"):
            for x, y in ((a, b), (b, a)):
                got = math(w, [x, y])
                assert np.array_equal(got, a), (w, ft, n)
                one = math(w, [x[0], y[0]])
                assert one == 1.5, (w, ft)


@pytest.mark.parametrize("n", [7, 448])
def test_nat42_c_min_max_of_a_signalling_nan_is_the_other(n: int) -> None:
    """NAT-42, CG-8: on ``c``, ``min(1.5, sNaN)`` is 1.5 (glibc's ``fmin`` gives a NaN
    for a signalling NaN), bitwise as the interpreter; -0.0 stays below +0.0 (CG-40)."""
    c_or_skip()
    for k, bits, ft, it in ((_minmax32, _NAN32, np.float32, np.uint32),
                            (_minmax64, _NAN64, np.float64, np.uint64)):
        b = np.resize(np.array(bits, it), n).view(ft)
        a = np.full(n, 1.5, ft)
        a[::3] = -0.0
        b[::3] = 0.0
        outs = {}
        for be in ("interp", "c"):
            o = np.zeros(2 * n, ft)
            k[n, 32](a, b, o, n, backend=be)
            outs[be] = o
        assert outs["c"].tobytes() == outs["interp"].tobytes()
        assert not np.isnan(outs["c"]).any()
        assert np.signbit(outs["c"][0]) and not np.signbit(outs["c"][1])


# ---------------------------------------------------------------- NAT-43: device arrays

@kernel
def _scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32) -> None:
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


def test_nat43_device_arrays_of_c_and_the_default_mix() -> None:
    """NAT-43, NAT-25: a device array made for ``c`` runs on the default backend where the
    default picks ``c``, and the reverse; the bytes are the interpreter's."""
    c_or_skip()
    if get_backend("default").name != "c":
        pytest.skip("the default backend is not c here (a GPU is usable)")
    x = np.arange(64, dtype=np.float32)
    for made, run in (("c", "default"), ("default", "c"), ("c", None), (None, "c")):
        kw = {} if made is None else {"backend": made}
        dx = sarek_py.to_device(x, **kw)
        dt = sarek_py.empty_like(dx)
        rk = {} if run is None else {"backend": run}
        _scale[64, 32](dx, dt, 2.0, 64, **rk)
        assert dt.get().tobytes() == (2 * x).tobytes(), (made, run)


def test_nat43_a_device_array_of_another_backend_is_one_sentence() -> None:
    """NAT-43: an array of a backend the launch does not run on is one sentence naming
    both backends, never "another c backend object"."""
    c_or_skip()
    x = np.arange(8, dtype=np.float32)
    dx = sarek_py.to_device(x, backend="interp")
    dt = sarek_py.empty_like(dx)
    with pytest.raises(LaunchError) as err:
        _scale[8, 4](dx, dt, 2.0, 8, backend="c")
    msg = err.value.message
    assert "the interp backend" in msg and "runs on the c backend" in msg
    assert "another" not in msg


# ---------------------------------------------------------------- NAT-44: fork

_FORK = """
import multiprocessing as mp, numpy as np
from sarek_py.frontend import Vec, f64, global_thread_id, i32, kernel

@kernel
def scale(x: Vec[f64], y: Vec[f64], a: f64, n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = a * x[i]

N = 1 << 14
def child(a):
    x = np.arange(N, dtype=np.float64)
    y = np.zeros(N)
    scale[N, 256](x, y, float(a), N, backend="c")
    return bool(np.array_equal(y, a * x))

if __name__ == "__main__":
    x = np.arange(N, dtype=np.float64)
    y = np.zeros(N)
    scale[N, 256](x, y, 2.0, N, backend="c")
    with mp.get_context("fork").Pool(2) as p:
        print(p.map_async(child, [1, 2, 3]).get(timeout=40))
"""


def test_nat44_a_forked_child_launches_on_c_without_hanging(tmp_path: Path) -> None:
    """NAT-44: after the parent launched on ``c``, a forked child's launch on ``c`` (the
    OpenMP pool does not survive a fork) runs, serially, with the right bytes."""
    c_or_skip()
    script = tmp_path / "fork.py"
    script.write_text(_FORK)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          check=False, cwd=ROOT, timeout=90)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, True, True]"


# ---------------------------------------------------------------- NAT-46: reserved C names

@pytest.mark.parametrize("name", ["_Bool", "_Atomic", "_Generic", "_Thread_local",
                                  "_Complex", "_Float32", "_Noreturn", "_X", "a__b",
                                  "x__", "_Imaginary", "_Static_assert"])
def test_nat46_c_reserved_identifiers_are_renamed(name: str) -> None:
    """NAT-46, CG-4: every identifier C reserves (``_`` and a capital, ``__`` anywhere)
    is renamed, on every C target."""
    assert is_reserved(name)
    fresh = Namer().fresh(name)
    assert not is_reserved(fresh)
    assert not (fresh.startswith("_") and fresh[1:2].isupper()) and "__" not in fresh


def test_nat46_reserved_parameter_names_run_on_c() -> None:
    """NAT-46: a kernel whose parameters are named ``_Bool``, ``_Atomic`` … compiles and
    runs on ``c`` (and the C says nothing of the reserved names)."""
    c_or_skip()
    from sarek_py.ir.parser import parse_module
    from sarek_py.ir.typecheck import check_module

    text = ("kernel k(_Bool : f32[], _Atomic : f32[], _Generic : f32, a__b : i32) =\n"
            "  let i = global_thread_id in\n"
            "  if i < a__b then _Atomic[i] <- _Bool[i] * _Generic\n")
    m = parse_module(text)
    check_module(m)
    x = np.arange(5, dtype=np.float32)
    outs = []
    for be in ("interp", "c"):
        o = np.zeros(5, np.float32)
        get_backend(be).run_kernel(m.kernels[0], {"_Bool": x, "_Atomic": o, "_Generic": 3.0,
                                                  "a__b": 5}, 5, 4)
        outs.append(o)
    assert outs[0].tobytes() == outs[1].tobytes() == (3 * x).tobytes()


# ---------------------------------------------------------------- NAT-47: $SAREK_CFLAGS

_ENV = """
from sarek_py.runtime import get_backend
from sarek_py.ir.diagnostics import SarekError
try:
    get_backend('c')
    print('ok')
except SarekError as e:
    print(type(e).__name__, e.message)
"""


@pytest.mark.parametrize("flag", ["-ffast-math", "-Ofast", "-ffp-contract=fast",
                                  "-funsafe-math-optimizations", "-fassociative-math",
                                  "-freciprocal-math", "-ffinite-math-only"])
def test_nat47_flags_that_change_bytes_are_refused(tmp_path: Path, flag: str) -> None:
    """NAT-47: a ``$SAREK_CFLAGS`` flag that breaks bitwise results is refused with one
    sentence naming it."""
    done = _child(_ENV, {"SAREK_CACHE": str(tmp_path), "SAREK_CFLAGS": f"-O2 {flag}"})
    assert done.returncode == 0, done.stderr
    out = done.stdout.strip()
    assert out.startswith("BackendUnavailable") and repr(flag) in out, out


def test_nat47_bad_cflags_and_cc_say_what_is_wrong(tmp_path: Path) -> None:
    """NAT-47: an unbalanced quote in ``$SAREK_CFLAGS`` is one sentence (no traceback); a
    flag the compiler rejects reports the compiler's own error, not "no OpenMP";
    ``$SAREK_CC`` may carry flags."""
    c_or_skip()
    env = {"SAREK_CACHE": str(tmp_path)}
    quote = _child(_ENV, {**env, "SAREK_CFLAGS": "-O2 '-DX"}).stdout.strip()
    assert quote.startswith("BackendUnavailable") and "SAREK_CFLAGS" in quote, quote
    march = _child(_ENV, {**env, "SAREK_CFLAGS": "-march=nonsense"}).stdout.strip()
    assert march.startswith("BackendUnavailable") and "nonsense" in march, march
    assert "apt install" not in march
    cc = _child(_ENV, {**env, "SAREK_CC": "cc -O1"}).stdout.strip()
    assert cc == "ok", cc
