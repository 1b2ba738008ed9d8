"""The convolution kernel against the semantics page's pseudo-code (a padded, strided 2-D
convolution, written out element by element here and extended with dilations, groups and
window reversal), the page's SAME/VALID padding, negative padding, lhs dilation (transposed
convolution), rhs dilation (atrous), feature groups (depthwise), batch groups, dim_labels
layouts, integer wrapping and the preferred element type (values from XLA:CPU), and
element types."""

import ml_dtypes
import numpy as np
import pytest
from movement_eval_helpers import assert_same, np_dtype

from xlapy import ops
from xlapy.hlo.attrs.window import Padding
from xlapy.interpreter import EvaluationError, evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape


def run(text, *args):
    return evaluate(parse_hlo_module(text), *args)


def reference(x, w, strides, pads, lhs_d=None, rhs_d=None, fgc=1, bgc=1, reverse=None):
    """The page's pseudo-code in bf01/oi01 layout, generalised: for every output coordinate
    and kernel coordinate, the input position oy*stride + ky*rhs_dilation - pad_low must be a
    multiple of lhs_dilation inside the base area. Accumulates in float64/int64."""
    n_sp = x.ndim - 2
    lhs_d = lhs_d or [1] * n_sp
    rhs_d = rhs_d or [1] * n_sp
    reverse = reverse or [False] * n_sp
    wide = np.int64 if x.dtype.kind in "iu" else np.complex128 if x.dtype.kind == "c" else np.float64
    x, w = x.astype(wide), w.astype(wide)
    n = x.shape[0]
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = []
    for i in range(n_sp):
        padded = pads[i][0] + (x.shape[2 + i] - 1) * lhs_d[i] + 1 + pads[i][1]
        span = (ks[i] - 1) * rhs_d[i] + 1
        outs.append(max(0, (padded - span) // strides[i] + 1))
    out = np.zeros((n // bgc, o) + tuple(outs), wide)
    og_f, og_b = o // fgc, o // bgc
    for b in range(n // bgc):
        for oz in range(o):
            g = oz // og_f
            bb = b + (oz // og_b) * (n // bgc)
            for opos in np.ndindex(*outs):
                value = 0
                for kpos in np.ndindex(*ks):
                    ipos = []
                    for i in range(n_sp):
                        p = opos[i] * strides[i] + kpos[i] * rhs_d[i] - pads[i][0]
                        if p % lhs_d[i] or not 0 <= p // lhs_d[i] < x.shape[2 + i]:
                            break
                        ipos.append(p // lhs_d[i])
                    else:
                        k = tuple(ks[i] - 1 - kpos[i] if reverse[i] else kpos[i]
                                  for i in range(n_sp))
                        for iz in range(cg):
                            value += x[(bb, g * cg + iz) + tuple(ipos)] * w[(oz, iz) + k]
                out[(b, oz) + opos] = value
    return out


def conv_text(t, ls, rs, out_t, os, window, labels="bf01_oi01->bf01", extra=""):
    d = lambda s: "[" + ",".join(map(str, s)) + "]"
    return f"""
HloModule m
ENTRY e {{
  a = {t}{d(ls)} parameter(0)
  b = {t}{d(rs)} parameter(1)
  ROOT r = {out_t}{d(os)} convolution(a, b), window={{{window}}}, dim_labels={labels}{extra}
}}
"""


def window_text(ks, strides, pads, lhs_d, rhs_d, reverse=None):
    text = (f"size={'x'.join(map(str, ks))} stride={'x'.join(map(str, strides))} "
            f"pad={'x'.join(f'{lo}_{hi}' for lo, hi in pads)} lhs_dilate={'x'.join(map(str, lhs_d))} "
            f"rhs_dilate={'x'.join(map(str, rhs_d))}")
    if reverse:
        text += " rhs_reversal=" + "x".join("1" if r else "0" for r in reverse)
    return text


def test_page_pseudo_code_padded_strided_2d():
    rng = np.random.default_rng(0)
    x = rng.integers(-4, 5, (2, 3, 5, 6)).astype(np.float32)
    w = rng.integers(-4, 5, (4, 3, 3, 2)).astype(np.float32)
    want = reference(x, w, [2, 1], [(1, 2), (0, 1)]).astype(np.float32)
    text = conv_text("f32", x.shape, w.shape, "f32", want.shape,
                     "size=3x2 stride=2x1 pad=1_2x0_1")
    assert_same(run(text, x, w), want)


def test_page_same_and_valid_padding_builder():
    # SAME pads the input with zeros so the output keeps the input's spatial shape (with
    # stride 1); VALID does not pad.
    x = np.arange(1, 26, dtype=np.float32).reshape(1, 1, 5, 5)
    w = np.ones((1, 1, 3, 3), np.float32)
    for padding, want in [(Padding.SAME, reference(x, w, [1, 1], [(1, 1), (1, 1)])),
                          (Padding.VALID, reference(x, w, [1, 1], [(0, 0), (0, 0)]))]:
        b = XlaBuilder("m")
        lhs = ops.Parameter(b, 0, Shape.array(PrimitiveType.F32, (1, 1, 5, 5)), "x")
        rhs = ops.Parameter(b, 1, Shape.array(PrimitiveType.F32, (1, 1, 3, 3)), "w")
        ops.Conv(lhs, rhs, [1, 1], padding)
        assert_same(evaluate(b.build(), x, w), want.astype(np.float32))


@pytest.mark.parametrize("case", range(8))
def test_random_against_the_pseudo_code(case):
    rng = np.random.default_rng(100 + case)
    n_sp = 1 + case % 2
    fgc = [1, 2, 1, 3][case % 4]
    bgc = 2 if case in (2, 6) else 1
    n = int(rng.integers(1, 3)) * bgc
    c = fgc * int(rng.integers(1, 3))
    o = fgc * bgc * int(rng.integers(1, 3))
    sp = [int(v) for v in rng.integers(3, 6, n_sp)]
    ks = [int(v) for v in rng.integers(1, 4, n_sp)]
    strides = [int(v) for v in rng.integers(1, 3, n_sp)]
    pads = [(int(a), int(b)) for a, b in rng.integers(-1, 3, (n_sp, 2))]
    lhs_d = [int(v) for v in rng.integers(1, 3, n_sp)]
    rhs_d = [int(v) for v in rng.integers(1, 3, n_sp)]
    reverse = [bool(v) for v in rng.integers(0, 2, n_sp)]
    x = rng.integers(-5, 6, [n, c] + sp).astype(np.float64)
    w = rng.integers(-5, 6, [o, c // fgc] + ks).astype(np.float64)
    want = reference(x, w, strides, pads, lhs_d, rhs_d, fgc, bgc, reverse)
    labels = {1: "bf0_oi0->bf0", 2: "bf01_oi01->bf01"}[n_sp]
    text = conv_text("f64", x.shape, w.shape, "f64", want.shape,
                     window_text(ks, strides, pads, lhs_d, rhs_d, reverse), labels,
                     f", feature_group_count={fgc}, batch_group_count={bgc}")
    assert_same(run(text, x, w), want)


def test_nhwc_layouts_and_transposed_output():
    # jax's conv2d_nhwc: b01f_01io->b01f; the output may use yet another layout
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, (2, 4, 5, 3)).astype(np.float32)  # NHWC
    w = rng.integers(-3, 4, (3, 2, 3, 4)).astype(np.float32)  # HWIO
    want = reference(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), [1, 1],
                     [(1, 1), (0, 1)]).astype(np.float32)  # bf01
    text = conv_text("f32", x.shape, w.shape, "f32", want.transpose(0, 2, 3, 1).shape,
                     "size=3x2 pad=1_1x0_1", "b01f_01io->b01f")
    assert_same(run(text, x, w), want.transpose(0, 2, 3, 1))
    text = conv_text("f32", x.shape, w.shape, "f32", want.transpose(1, 3, 2, 0).shape,
                     "size=3x2 pad=1_1x0_1", "b01f_01io->f10b")
    assert_same(run(text, x, w), want.transpose(1, 3, 2, 0))


def test_depthwise_feature_groups():
    # feature_group_count = input features, kernel [kh, kw, 1, channels] (tf depthwise)
    rng = np.random.default_rng(2)
    x = rng.integers(-3, 4, (1, 6, 6, 4)).astype(np.float32)
    w = rng.integers(-3, 4, (3, 3, 1, 4)).astype(np.float32)
    text = conv_text("f32", x.shape, w.shape, "f32", (1, 4, 4, 4), "size=3x3",
                     "b01f_01io->b01f", ", feature_group_count=4")
    want = np.zeros((1, 4, 4, 4), np.float32)
    for ch in range(4):
        for i in range(4):
            for j in range(4):
                want[0, i, j, ch] = np.sum(x[0, i:i + 3, j:j + 3, ch] * w[:, :, 0, ch])
    assert_same(run(text, x, w), want)


def test_batch_groups_split_the_batch_group_major():
    # batch_group_count 2: output feature f uses batch group f // (features / 2)
    x = np.arange(1, 9, dtype=np.float32).reshape(4, 1, 2)  # [batch 4, feature 1, width 2]
    w = np.ones((4, 1, 1), np.float32)  # 4 output features
    text = conv_text("f32", x.shape, w.shape, "f32", (2, 4, 2), "size=1", "bf0_oi0->bf0",
                     ", batch_group_count=2")
    got = run(text, x, w)
    want = np.empty((2, 4, 2), np.float32)
    want[:, 0:2, :] = x[0:2, :, :]  # features 0, 1: batches 0, 1
    want[:, 2:4, :] = x[2:4, :, :]  # features 2, 3: batches 2, 3
    assert_same(got, want)


def test_transposed_convolution_lhs_dilation():
    # conv_transpose, stride 2: lhs_dilate=2 with a reversed kernel
    x = np.array([[[1, 2, 3]]], np.float32)
    w = np.array([[[1, 10, 100]]], np.float32)
    text = conv_text("f32", x.shape, w.shape, "f32", (1, 1, 7), "size=3 pad=2_2 lhs_dilate=2",
                     "bf0_oi0->bf0")
    # dilated input 1 0 2 0 3, padded with two zeros on each side
    assert_same(run(text, x, w), np.array([[[100, 10, 201, 20, 302, 30, 3]]], np.float32))


def test_window_reversal_flips_the_kernel():
    x = np.array([[[1, 2, 3]]], np.float32)
    w = np.array([[[1, 10]]], np.float32)
    text = conv_text("f32", x.shape, w.shape, "f32", (1, 1, 2), "size=2 rhs_reversal=1",
                     "bf0_oi0->bf0")
    assert_same(run(text, x, w), np.array([[[12, 23]]], np.float32))


def test_s8_sums_wrap():
    # XLA:CPU through jax 0.10.2: an s8 convolution summing 100 * 100 twice gives 32
    # (20000 mod 256); XLA's evaluator would saturate, XLA:CPU wraps.
    x = np.full((1, 1, 4), 100, np.int8)
    w = np.full((1, 1, 2), 100, np.int8)
    text = conv_text("s8", x.shape, w.shape, "s8", (1, 1, 3), "size=2", "bf0_oi0->bf0")
    assert_same(run(text, x, w), np.full((1, 1, 3), 32, np.int8))


def test_preferred_element_type_s8_to_s32():
    x = np.full((1, 1, 4), 100, np.int8)
    w = np.full((1, 1, 2), 100, np.int8)
    text = conv_text("s8", x.shape, w.shape, "s32", (1, 1, 3), "size=2", "bf0_oi0->bf0")
    assert_same(run(text, x, w), np.full((1, 1, 3), 20000, np.int32))


def test_bf16_operands_f32_result():
    x = np.array([[[1.00390625, 2, 3]]], np.float32).astype(ml_dtypes.bfloat16)  # 1.0 in bf16
    w = np.array([[[0.5, 0.25]]], ml_dtypes.bfloat16)
    text = conv_text("bf16", x.shape, w.shape, "f32", (1, 1, 2), "size=2", "bf0_oi0->bf0")
    assert_same(run(text, x, w), np.array([[[1.0, 1.75]]], np.float32))


@pytest.mark.parametrize("t", ["s8", "s16", "s32", "s64", "u8", "u32", "f16", "bf16", "f32",
                               "f64", "c64", "c128"])
def test_element_types(t):
    dt = np_dtype(t)
    rng = np.random.default_rng(3)
    if dt.kind == "c":
        x = (rng.integers(-3, 4, (2, 2, 4)) + 1j * rng.integers(-3, 4, (2, 2, 4))).astype(dt)
        w = (rng.integers(-3, 4, (3, 2, 2)) - 1j * rng.integers(-3, 4, (3, 2, 2))).astype(dt)
    else:
        low = 0 if dt.kind == "u" else -3
        x = rng.integers(low, 4, (2, 2, 4)).astype(dt)
        w = rng.integers(low, 4, (3, 2, 2)).astype(dt)
    want = reference(x, w, [1], [(1, 0)]).astype(dt)
    text = conv_text(t, x.shape, w.shape, t, want.shape, "size=2 pad=1_0", "bf0_oi0->bf0")
    got = run(text, x, w)
    assert got.dtype == dt
    assert_same(got, want)


def test_empty_output_and_empty_batch():
    x = np.zeros((0, 1, 4), np.float32)
    w = np.ones((2, 1, 2), np.float32)
    text = conv_text("f32", x.shape, w.shape, "f32", (0, 2, 3), "size=2", "bf0_oi0->bf0")
    assert_same(run(text, x, w), np.zeros((0, 2, 3), np.float32))
    x = np.ones((1, 1, 1), np.float32)
    text = conv_text("f32", x.shape, w.shape, "f32", (1, 2, 0), "size=2", "bf0_oi0->bf0")
    assert_same(run(text, x, w), np.zeros((1, 2, 0), np.float32))


def test_sparse_convolution_is_unimplemented():
    # 1:2 structured sparsity of the kernel's input features (metadata operand 2)
    text = """
HloModule m
ENTRY e {
  a = f32[1,2,4] parameter(0)
  b = f32[1,1,2] parameter(1)
  meta = u16[1,1,1] parameter(2)
  ROOT r = f32[1,1,3] convolution(a, b, meta), window={size=2}, dim_labels=bf0_oi0->bf0, sparsity_config={rhs={sparsity=1x2 dimension=1 stride=1 idx=2}}
}
"""
    with pytest.raises(EvaluationError, match="sparsity_config"):
        run(text, np.ones((1, 2, 4), np.float32), np.ones((1, 1, 2), np.float32),
            np.zeros((1, 1, 1), np.uint16))
