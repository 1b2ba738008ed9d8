"""dot-upcast: narrow-float dots become f32 dots between converts (the CPU backend's
compute type for them), everything else is left alone; the rewritten module computes the
products' f32 sum rounded once, within rounding of the original; on the CPU backend such a
dot is a generated GEMM kernel, not a library call. Integer dots whose sums f32 or f64 hold
exactly become float dots, bit for bit the integer dot (extreme operands, wrapping results,
the bounds' edges); others are left alone."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from pass_check import opcodes

import xlapy
from xlapy.passes import make_pipeline
from xlapy.passes.dot_upcast import exact_float, upcast


def _dot(lhs: str, rhs: str, out: str, dn="lhs_contracting_dims={1}, rhs_contracting_dims={0}"):
    return (f"HloModule m\nENTRY e {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n"
            f"  ROOT d = {out} dot(a, b), {dn}\n}}\n")


def _run(text):
    module = xlapy.parse_hlo_module(text)
    make_pipeline(["dot-upcast", "dce"]).run(module)
    return module


@pytest.mark.parametrize("t", ["bf16", "f16", "f8e4m3fn", "f8e5m2"])
def test_narrow_dots_become_f32_dots(t):
    m = _run(_dot(f"{t}[4,8]", f"{t}[8,5]", f"{t}[4,5]"))
    root = m.entry.root
    assert root.opcode == "convert" and str(root.shape.element_type) == t
    dot = root.operands[0]
    assert dot.opcode == "dot" and dot.shape.element_type.name == "F32"
    assert [o.opcode for o in dot.operands] == ["convert", "convert"]
    assert dict(opcodes(m)) == {"parameter": 2, "convert": 3, "dot": 1}


def test_an_f32_result_or_operand_is_not_converted():
    m = _run(_dot("bf16[4,8]", "f32[8,5]", "f32[4,5]"))
    root = m.entry.root
    assert root.opcode == "dot" and [o.opcode for o in root.operands] == ["convert",
                                                                          "parameter"]


@pytest.mark.parametrize("text", [
    _dot("f32[4,8]", "f32[8,5]", "f32[4,5]"),
    _dot("f64[4,8]", "f64[8,5]", "f64[4,5]"),
    _dot("bf16[4,8]", "bf16[8,5]", "f64[4,5]"),
    _dot("s32[4,8]", "s32[8,5]", "s32[4,5]"),
    _dot("s8[4,8]", "s8[8,5]", "pred[4,5]"),
    _dot("c64[4,8]", "c64[8,5]", "c64[4,5]"),
], ids=["f32", "f64", "f64-result", "s32", "pred-result", "complex"])
def test_other_dots_are_left_alone(text):
    m = xlapy.parse_hlo_module(text)
    assert not upcast(m.entry.root) and exact_float(m.entry.root) is None
    assert not make_pipeline(["dot-upcast"]).run(m)


def test_batch_dimensions_and_precision_are_kept():
    text = _dot("bf16[3,4,8]", "bf16[3,5,8]", "bf16[3,4,5]",
                "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                "rhs_contracting_dims={2}, operand_precision={highest,default}")
    dot = _run(text).entry.root.operands[0]
    dn = dot.attrs["dot_dimension_numbers"]
    assert dn.lhs_batch_dimensions == (0,) and dn.rhs_contracting_dimensions == (2,)
    assert [p.value for p in dot.attrs["precision_config"].operand_precision] == \
        ["highest", "default"]


def test_values_within_rounding_of_the_original():
    rng = np.random.default_rng(0)
    bf16 = ml_dtypes.bfloat16
    a = rng.standard_normal((6, 40)).astype(bf16)
    b = rng.standard_normal((40, 7)).astype(bf16)
    text = _dot("bf16[6,40]", "bf16[40,7]", "bf16[6,7]")
    want = np.asarray(xlapy.evaluate(xlapy.parse_hlo_module(text), a, b)).astype(np.float64)
    got = np.asarray(xlapy.evaluate(_run(text), a, b)).astype(np.float64)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # both are the exact sum rounded to bf16 (8 bits), the rewritten one after an f32 sum
    np.testing.assert_allclose(got, exact, rtol=2 ** -8, atol=1e-6)
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-6)


def test_the_cpu_backend_runs_a_bf16_dot_as_a_kernel():
    from xlapy.backends.cpu import backend as be
    from xlapy.runtime import Client

    text = _dot("bf16[48,96]", "bf16[96,80]", "bf16[48,80]")
    module = xlapy.parse_hlo_module(text)
    steps = [type(s).__name__ for s in be.compile_module(module).entry.steps]
    assert "LibraryStep" not in steps and steps.count("KernelStep") >= 1
    rng = np.random.default_rng(1)
    a = rng.standard_normal((48, 96)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((96, 80)).astype(ml_dtypes.bfloat16)
    got = np.asarray(Client(backend="cpu").compile(module)(a, b)).astype(np.float64)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, exact, rtol=2 ** -7, atol=1e-5)


# -- integer dots --------------------------------------------------------------------------


@pytest.mark.parametrize("lhs,rhs,k,want", [
    ("s8", "s8", 1024, "F32"),  # 1024 * 128 * 128 = 2^24
    ("s8", "s8", 1025, "F64"),
    ("u8", "s8", 512, "F32"),  # 512 * 255 * 128 < 2^24
    ("u8", "u8", 1024, "F64"),
    ("s16", "s16", 1 << 20, "F64"),  # 2^20 * 2^30 <= 2^53
    ("s16", "s16", (1 << 23) + 1, None),
    ("pred", "s8", 1 << 17, "F32"),
    ("s32", "s8", 4, "F64"),
    ("u32", "u32", 2, None),
])
def test_which_float_holds_an_integer_dots_sums(lhs, rhs, k, want):
    m = xlapy.parse_hlo_module(_dot(f"{lhs}[2,{k}]", f"{rhs}[{k},3]", "s32[2,3]"))
    got = exact_float(m.entry.root)
    assert (got.name if got is not None else None) == want


def _ints(rng, t, shape):
    info = np.iinfo(t)
    x = rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(t)
    x.flat[:4] = [info.min, info.max, info.min, info.max]  # the largest products
    return x


@pytest.mark.parametrize("lhs,rhs,out,k", [
    ("s8", "s8", "s32", 1024),  # f32: the bound's edge, every product -128 * -128
    ("s8", "s8", "s32", 1030),  # f64
    ("u8", "s8", "s32", 300),
    ("s8", "u8", "u32", 64),  # negative sums wrap into u32
    ("s16", "s16", "s32", 700),  # sums past 2^31: wrap in s32
    ("s8", "s8", "s8", 96),  # an s8 result wraps
    ("u16", "u8", "s64", 33),
    ("s32", "s8", "s64", 5),
])
def test_integer_dots_are_bit_for_bit_the_integer_dot(lhs, rhs, out, k):
    rng = np.random.default_rng(k)
    a = _ints(rng, np.dtype(lhs.replace("s", "int").replace("u", "uint")), (5, k))
    b = _ints(rng, np.dtype(rhs.replace("s", "int").replace("u", "uint")), (k, 7))
    if lhs == "s8" and rhs == "s8":
        a[:, :], b[:, :] = -128, -128  # the largest sums: k * 2^14
        a[1], b[:, 2] = 127, 127
    text = _dot(f"{lhs}[5,{k}]", f"{rhs}[{k},7]", f"{out}[5,7]")
    m = _run(text)
    assert m.entry.root.opcode == "convert"
    assert any(i.opcode == "dot" and i.shape.element_type.name in ("F32", "F64")
               for i in m.entry.instructions)
    want = np.asarray(xlapy.evaluate(xlapy.parse_hlo_module(text), a, b))
    exact = (a.astype(object) @ b.astype(object))
    bits = 8 * want.dtype.itemsize
    wrapped = np.vectorize(lambda v: ((int(v) + (1 << (bits - 1))) % (1 << bits))
                           - (1 << (bits - 1)) if want.dtype.kind == "i"
                           else int(v) % (1 << bits), otypes=[want.dtype])(exact)
    np.testing.assert_array_equal(want, wrapped)  # the interpreter's integer dot
    np.testing.assert_array_equal(np.asarray(xlapy.evaluate(m, a, b)), want)


def test_the_cpu_backend_runs_an_int8_dot_as_a_kernel():
    from xlapy.backends.cpu import backend as be
    from xlapy.runtime import Client

    text = _dot("s8[96,512]", "s8[512,80]", "s32[96,80]")
    module = xlapy.parse_hlo_module(text)
    steps = [type(s).__name__ for s in be.compile_module(module).entry.steps]
    assert "LibraryStep" not in steps
    rng = np.random.default_rng(2)
    a, b = _ints(rng, np.int8, (96, 512)), _ints(rng, np.int8, (512, 80))
    got = np.asarray(Client(backend="cpu").compile(module)(a, b))
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
