"""rng (distribution=rng_uniform | rng_normal), rng-get-and-update-state and ops.RngUniform /
RngNormal: the declared result shape checked as HloVerifier's HandleRng does (spec 002
"RngUniform"/"RngNormal"), and XLA-printed texts (hlo_parser_test.cc)."""

import pytest
from collective_helpers import infer, parse_entry, printed_attrs

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def rng(a, b, result, distribution="rng_uniform"):
    return str(infer("rng", a, b, result=result, distribution=distribution))


@pytest.mark.parametrize("t", ["f32", "bf16", "f64", "s32", "u64", "s8", "pred"])
def test_uniform_element_types(t):
    assert rng(f"{t}[]", f"{t}[]", f"{t}[3,4]") == f"{t}[3,4]{{1,0}}"


@pytest.mark.parametrize("t", ["f32", "f16", "bf16", "f64"])
def test_normal_element_types(t):
    assert rng(f"{t}[]", f"{t}[]", f"{t}[8]", "rng_normal") == f"{t}[8]{{0}}"


def test_declared_layout_is_kept():
    assert rng("f32[]", "f32[]", "f32[2,3]{0,1}") == "f32[2,3]{0,1}"


def test_rng_errors():
    with pytest.raises(ShapeError, match=r"rng: Element type not supported. Expected element to be "
                                         r"FloatingPointType for RngNormal, got S32"):
        rng("s32[]", "s32[]", "s32[4]", "rng_normal")
    with pytest.raises(ShapeError, match=r"RngUniform, got C64"):
        rng("c64[]", "c64[]", "c64[4]")
    with pytest.raises(ShapeError, match=r"rng: Expected scalar types for the two operands of Rng "
                                         r"instruction, got f32\[2\]\{0\} and f32\[\]"):
        rng("f32[2]", "f32[]", "f32[2]")
    with pytest.raises(ShapeError, match=r"rng: Expected compatible element types for the result and "
                                         r"the two operands of Rng instruction, got f32\[\], f32\[\] "
                                         r"-> f64\[4\]\{0\}"):
        rng("f32[]", "f32[]", "f64[4]")
    with pytest.raises(ShapeError, match="Expected compatible element types"):
        rng("f32[]", "bf16[]", "f32[4]")
    with pytest.raises(ShapeError, match="rng: the result shape must be given"):
        infer("rng", "f32[]", "f32[]", distribution="rng_uniform")
    with pytest.raises(ShapeError, match=r"rng: RNG distribution \(RNG_UNIFORM\) expects 2 "
                                         r"parameters, but got 3"):
        infer("rng", "f32[]", "f32[]", "f32[]", result="f32[2]", distribution="rng_uniform")
    with pytest.raises(ShapeError, match="rng: expects at least 2 operands, got 1"):
        infer("rng", "f32[]", result="f32[2]", distribution="rng_uniform")
    with pytest.raises(InvalidArgumentError, match="rng: attribute 'distribution' must be one of "
                                                   "rng_uniform, rng_normal"):
        infer("rng", "f32[]", "f32[]", result="f32[2]", distribution="rng_cauchy")


def test_builder_rng_uniform_and_normal():
    b = XlaBuilder("rng")
    lo = ops.Parameter(b, 0, parse_shape("f32[]"), "lo")
    hi = ops.Parameter(b, 1, parse_shape("f32[]"), "hi")
    u = ops.RngUniform(lo, hi, parse_shape("f32[3,4]"))
    n = ops.RngNormal(lo, hi, parse_shape("f32[5]{0}"))
    comp = b.build(ops.Tuple(b, [u, n]))
    assert str(comp.program_shape()) == "(lo: f32[], hi: f32[]) -> (f32[3,4], f32[5])"
    assert printed_attrs(u.instruction) == "distribution=rng_uniform"
    assert printed_attrs(n.instruction) == "distribution=rng_normal"


def test_builder_rng_errors():
    b = XlaBuilder("rng")
    i = ops.Parameter(b, 0, parse_shape("s32[]"), "i")
    with pytest.raises(ShapeError, match="FloatingPointType for RngNormal, got S32"):
        ops.RngNormal(i, i, parse_shape("s32[4]"))
    with pytest.raises(ShapeError, match="Expected compatible element types"):
        ops.RngUniform(i, i, parse_shape("f32[4]"))
    with pytest.raises(InvalidArgumentError, match="RngUniform: shape must be a Shape"):
        ops.RngUniform(i, i, "s32[4]")
    other = ops.Parameter(XlaBuilder("other"), 0, parse_shape("s32[]"), "j")
    with pytest.raises(InvalidArgumentError, match="RngUniform: operand 1 was built by builder "
                                                   "'other'"):
        ops.RngUniform(i, other, parse_shape("s32[4]"))


def test_rng_text_prints_back():
    # hlo_parser_test.cc Rng.
    instrs = parse_entry("  constant = f32[] parameter(0)\n  constant.1 = f32[] parameter(1)\n"
                         "  ROOT rng = f32[8]{0} rng(constant, constant.1), distribution=rng_uniform")
    assert printed_attrs(instrs["rng"]) == "distribution=rng_uniform"
    with pytest.raises(ParseError, match="missing required attribute 'distribution'"):
        parse_entry("  c = f32[] parameter(0)\n  ROOT rng = f32[8]{0} rng(c, c)")


# -- rng-get-and-update-state ----------------------------------------------------------------------


def test_rng_get_and_update_state():
    assert str(infer("rng-get-and-update-state", delta=4096)) == "u64[2]{0}"
    assert str(infer("rng-get-and-update-state", delta=1, result="u64[2]{0}")) == "u64[2]{0}"
    with pytest.raises(ShapeError, match=r"Invalid RngGetAndUpdateState, expect result to have shape "
                                         r"u64\[2\]\{0\}, got u64\[3\]\{0\}"):
        infer("rng-get-and-update-state", delta=1, result="u64[3]")
    with pytest.raises(InvalidArgumentError, match="missing required attribute 'delta'"):
        infer("rng-get-and-update-state")
    # hlo_parser_test.cc RngGetAndUpdateState.
    instrs = parse_entry("  ROOT rng-get-and-update-state = u64[2]{0} rng-get-and-update-state(), "
                         "delta=4096")
    assert printed_attrs(instrs["rng-get-and-update-state"]) == "delta=4096"
