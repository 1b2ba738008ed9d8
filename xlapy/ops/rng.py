"""Random number builder functions with XlaBuilder's names and argument order: RngUniform,
RngNormal (HLO ``rng`` with distribution=rng_uniform / rng_normal) and RngBitGenerator
(HLO ``rng-bit-generator``). Only shapes and attributes are built; the numbers are the
evaluator's business."""

from __future__ import annotations

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.enums import RandomAlgorithm, RandomDistribution
from xlapy.opdefs.common import tname
from xlapy.opdefs.rng import unsigned_type_for_bit_width
from xlapy.ops.builder import XlaOp
from xlapy.ops.core import check_same_builder
from xlapy.shape import Shape, dtypes

__all__ = ["RandomAlgorithm", "RandomDistribution", "RngBitGenerator", "RngNormal", "RngUniform"]


def _shape(shape, op_name: str) -> Shape:
    if not isinstance(shape, Shape):
        raise InvalidArgumentError(f"{op_name}: shape must be a Shape, got {type(shape).__name__}")
    return shape


def _rng(op_name: str, distribution: RandomDistribution, a: XlaOp, b: XlaOp, shape) -> XlaOp:
    builder = check_same_builder(op_name, [a, b])
    shape = _shape(shape, op_name)
    return builder.emit("rng", [a, b], {"distribution": distribution}, shape=shape,
                        op_name=op_name)


def RngUniform(a: XlaOp, b: XlaOp, shape: Shape) -> XlaOp:
    """``ops.RngUniform(lo, hi, parse_shape("f32[3,4]"))``: numbers uniform in [a, b);
    a and b are scalars of the shape's element type (PRED, integer or floating)."""
    return _rng("RngUniform", RandomDistribution.RNG_UNIFORM, a, b, shape)


def RngNormal(mu: XlaOp, sigma: XlaOp, shape: Shape) -> XlaOp:
    """``ops.RngNormal(mu, sigma, parse_shape("f32[8]"))``: normally distributed numbers
    with mean mu and standard deviation sigma (floating point scalars)."""
    return _rng("RngNormal", RandomDistribution.RNG_NORMAL, mu, sigma, shape)


def RngBitGenerator(algorithm, initial_state: XlaOp, shape: Shape) -> XlaOp:
    """``ops.RngBitGenerator("rng_three_fry", state, parse_shape("u32[11,17]"))``: the tuple
    (new state, random bits). The bits take the unsigned integer type as wide as
    ``shape``'s element type (f32[4] gives u32[4]), as XLA's builder does."""
    b = check_same_builder("RngBitGenerator", [initial_state])
    shape = _shape(shape, "RngBitGenerator")
    bits = None
    if shape.is_array():
        unsigned = unsigned_type_for_bit_width(dtypes.bit_width(shape.element_type))
        if unsigned is not None:
            bits = shape.with_element_type(unsigned)
    if bits is None:
        raise InvalidArgumentError(
            f"RngBitGenerator: Unsupported shape for RngBitGenerator: {tname(shape.element_type)}")
    result = Shape.tuple([initial_state.shape, bits])
    return b.emit("rng-bit-generator", [initial_state], {"algorithm": algorithm}, shape=result,
                  op_name="RngBitGenerator")
