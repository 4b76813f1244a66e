"""Round-trip properties of the text form and the S-expression dump over generated IR
(specs/text-format.md TXT-22, TXT-25) and over the files of examples/.

``SAREK_FUZZ=1`` (``make fuzz``) runs the slow variants with many more examples.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import kernels, modules

from sarek_py.ir.nodes import Kernel, Module
from sarek_py.ir.parser import parse_file, parse_module
from sarek_py.ir.printer import print_kernel, print_module
from sarek_py.ir.sexp import from_sexp, to_sexp
from sarek_py.ir.visit import canonical_ids

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
#: the kernel-module examples (other .sk files of examples/ may hold host programs, which
#: the launch layer parses and tests)
EXAMPLES = [Path(__file__).parent.parent / "examples" / f"{name}.sk"
            for name in ("saxpy", "scale_relu", "block_reduce", "stencil2d", "helper")]


def quick(n: int) -> settings:
    """Settings for a property run in ``make test`` (``n`` examples)."""
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fuzz(n: int) -> settings:
    """Settings for a slow property run (``make fuzz``)."""
    return settings(max_examples=n * 10 if FUZZ else n, deadline=None,
                    suppress_health_check=list(HealthCheck))


def check_text_roundtrip(m: Module) -> None:
    text = print_module(m)
    back = parse_module(text, "<generated>")
    again = print_module(back)
    assert again == text, f"print is not a fixed point:\n{text}\n----\n{again}"
    assert canonical_ids(back) == canonical_ids(m), text


@quick(150)
@given(kernels())
def test_txt22_kernel_print_parse_roundtrip(k: Kernel) -> None:
    """print(parse(print(k))) == print(k) and parse(print(k)) == k up to ids (TXT-22)."""
    text = print_kernel(k)
    back = parse_module(text).kernel(k.name)
    assert print_kernel(back) == text
    assert canonical_ids(back) == canonical_ids(k), text


@quick(80)
@given(modules())
def test_txt22_module_print_parse_roundtrip(m: Module) -> None:
    check_text_roundtrip(m)


@quick(60)
@given(modules(allow_nan=True))
def test_txt22_print_is_a_fixed_point_with_nans(m: Module) -> None:
    """With NaN constants (never equal to themselves) the printed text still is a fixed
    point, and the re-parsed constants are NaNs of the same type (TXT-21, TXT-22)."""
    text = print_module(m)
    assert print_module(parse_module(text)) == text


@quick(60)
@given(modules(allow_nan=True))
def test_txt25_sexp_roundtrip(m: Module) -> None:
    """from_sexp(to_sexp(m)) == m, ids included; the dump is a fixed point (TXT-24/25)."""
    dump = to_sexp(m)
    back = from_sexp(dump)
    assert to_sexp(back) == dump
    if "nan" not in dump:
        assert back == m


@pytest.mark.slow
@fuzz(300)
@given(modules())
def test_txt22_fuzz_roundtrip(m: Module) -> None:
    check_text_roundtrip(m)
    assert from_sexp(to_sexp(m)) == m


@quick(40)
@given(modules())
def test_txt22_generated_ir_is_well_typed(m: Module) -> None:
    """The round trip is promised for well-typed IR: the strategies generate only that
    (checked by the checker when it is there)."""
    typecheck = pytest.importorskip("sarek_py.ir.typecheck")
    typecheck.check_module(m)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_txt22_examples_print_twice_equal(path: Path) -> None:
    m = parse_file(path)
    assert m.kernels, path
    once = print_module(m)
    twice = print_module(parse_module(once, str(path)))
    assert once == twice
    assert canonical_ids(parse_module(once)) == canonical_ids(m)
    assert from_sexp(to_sexp(m)) == m


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_txt22_examples_are_well_typed(path: Path) -> None:
    typecheck = pytest.importorskip("sarek_py.ir.typecheck")
    typecheck.check_module(parse_file(path))


def test_txt22_examples_present() -> None:
    assert all(p.is_file() for p in EXAMPLES)
    helper = parse_file(EXAMPLES[-1])
    assert helper.kernels[0].helpers and all(h.pure for h in helper.helpers)


def test_txt21_float_constants_keep_their_bits() -> None:
    """Every float32 bit pattern class (normal, subnormal, extremes) prints and reads
    back exactly (TXT-21)."""
    import numpy as np

    from sarek_py.ir.nodes import Const
    from sarek_py.ir.parser import Parser
    from sarek_py.ir.printer import format_const
    from sarek_py.ir.types import Scalar

    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=800, dtype=np.uint64).astype(np.uint32)
    for v in bits.view(np.float32):
        if not np.isfinite(v):
            continue
        c = Const(float(v), Scalar.F32)
        back = Parser(format_const(c)).parse_expr(Scalar.F32)
        assert isinstance(back, Const) and back.value == c.value
        assert math.copysign(1.0, float(back.value)) == math.copysign(1.0, float(v))  # type: ignore[arg-type]
    for v in rng.standard_normal(300) * 10.0 ** rng.integers(-300, 300, 300):
        c = Const(float(v), Scalar.F64)
        back = Parser(format_const(c)).parse_expr(Scalar.F64)
        assert isinstance(back, Const) and back.value == c.value
