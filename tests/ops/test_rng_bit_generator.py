"""rng-bit-generator and ops.RngBitGenerator: the (state, bits) result (spec 002
"RngBitGenerator", HloVerifier's HandleRngBitGenerator), state sizes per algorithm
(StableHLO rng_bit_generator C2), the builder's unsigned bits type, and XLA-printed text."""

import pytest
from collective_helpers import infer, parse_entry, printed_attrs

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def rbg(state, result, algorithm="rng_three_fry"):
    return str(infer("rng-bit-generator", state, result=result, algorithm=algorithm))


@pytest.mark.parametrize("algorithm, state", [
    ("rng_three_fry", "u64[2]"), ("rng_philox", "u64[2]"), ("rng_philox", "u64[3]"),
    ("rng_default", "u64[2]"), ("rng_default", "u64[3]"),
])
def test_state_sizes(algorithm, state):
    assert rbg(state, f"({state}, u32[11,17])", algorithm) == f"({state}{{0}}, u32[11,17]{{1,0}})"


def test_bits_types_and_layouts():
    assert rbg("u64[2]", "(u64[2], u8[4])") == "(u64[2]{0}, u8[4]{0})"
    assert rbg("u64[2]", "(u64[2], u64[2,2]{0,1})") == "(u64[2]{0}, u64[2,2]{0,1})"
    assert rbg("u64[2]", "(u64[2], f32[3])") == "(u64[2]{0}, f32[3]{0})"


@pytest.mark.parametrize("algorithm, state, message", [
    ("rng_three_fry", "u64[3]", r"the initial state for rng_three_fry must be u64\[2\], got u64\[3\]"),
    ("rng_philox", "u64[4]", r"the initial state for rng_philox must be u64\[2\] or u64\[3\]"),
    ("rng_three_fry", "u32[4]", r"the initial state for rng_three_fry must be u64\[2\], got u32\[4\]\{0\}"),
    ("rng_three_fry", "u64[1,2]", r"the initial state for rng_three_fry must be u64\[2\], got u64\[1,2\]"),
])
def test_state_errors(algorithm, state, message):
    with pytest.raises(ShapeError, match="rng-bit-generator: " + message):
        rbg(state, f"({state}, u32[4])", algorithm)


def test_result_errors():
    with pytest.raises(ShapeError, match=r"Expected tuple shape with 2 elements for RngBitGenerator. "
                                         r"Got: u32\[4\]"):
        rbg("u64[2]", "u32[4]")
    with pytest.raises(ShapeError, match=r"Expected state shape to match between input and output "
                                         r"for RngBitGenerator. Got u64\[2\]\{0\} vs. u64\[3\]"):
        rbg("u64[2]", "(u64[3], u32[4])", "rng_philox")
    with pytest.raises(ShapeError, match=r"the random bits must be an array of integer or floating "
                                         r"point type, got \(u32\[4\]\{0\}\)"):
        rbg("u64[2]", "(u64[2], (u32[4]))")
    with pytest.raises(ShapeError, match="the result shape must be given"):
        infer("rng-bit-generator", "u64[2]", algorithm="rng_default")


def test_builder_rng_bit_generator():
    b = XlaBuilder("rbg")
    state = ops.Parameter(b, 0, parse_shape("u64[2]"), "state")
    r = ops.RngBitGenerator("rng_three_fry", state, parse_shape("u32[11,17]"))
    comp = b.build(r)
    assert str(comp.program_shape()) == "(state: u64[2]) -> (u64[2], u32[11,17])"
    assert printed_attrs(r.instruction) == "algorithm=rng_three_fry"


def test_builder_bits_take_the_unsigned_type_of_equal_width():
    b = XlaBuilder("rbg")
    state = ops.Parameter(b, 0, parse_shape("u64[3]"), "state")
    for given, bits in [("f32[4]", "u32[4]{0}"), ("s8[2,2]", "u8[2,2]{1,0}"), ("bf16[3]", "u16[3]{0}"),
                        ("f64[]", "u64[]"), ("s4[8]", "u4[8]{0}")]:
        r = ops.RngBitGenerator(ops.RandomAlgorithm.RNG_PHILOX, state, parse_shape(given))
        assert str(r.shape) == f"(u64[3]{{0}}, {bits})", given
    with pytest.raises(InvalidArgumentError, match="Unsupported shape for RngBitGenerator: TUPLE"):
        ops.RngBitGenerator("rng_default", state, parse_shape("(u32[2])"))
    with pytest.raises(InvalidArgumentError, match="Unsupported shape for RngBitGenerator: F6E3M2FN"):
        ops.RngBitGenerator("rng_default", state, parse_shape("f6e3m2fn[2]"))
    with pytest.raises(ShapeError, match=r"the initial state for rng_three_fry must be u64\[2\]"):
        ops.RngBitGenerator("RNG_THREE_FRY", state, parse_shape("u32[2]"))
    with pytest.raises(InvalidArgumentError, match="attribute 'algorithm' must be one of"):
        ops.RngBitGenerator("mersenne", state, parse_shape("u32[2]"))


def test_xla_text_prints_back():
    # hlo_parser_test.cc RngBitGenerator.
    instrs = parse_entry("  p0 = u64[2]{0} parameter(0)\n"
                         "  ROOT rand = (u64[2]{0}, u32[11,17]{1,0}) rng-bit-generator(p0), "
                         "algorithm=rng_three_fry")
    assert printed_attrs(instrs["rand"]) == "algorithm=rng_three_fry"
    # hlo_parser_test.cc RngBitGeneratorNoOperands.
    with pytest.raises(ParseError, match="rng-bit-generator: expects 1 operand, got 0"):
        parse_entry("  ROOT r = (u64[2], u32[4]) rng-bit-generator(), algorithm=rng_three_fry")
