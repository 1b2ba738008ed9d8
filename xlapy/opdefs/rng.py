"""Random number ops: rng (RngUniform/RngNormal), rng-bit-generator and
rng-get-and-update-state.

XLA has no ShapeInference function for these: the result shape is given (by the builder or
the HLO text) and HloVerifier's HandleRng / HandleRngBitGenerator /
HandleRngGetAndUpdateState check it. The rules here make those checks and return the shape,
so builder, parser and verifier agree. The state constraints of rng-bit-generator come from
StableHLO's rng_bit_generator (C2: u64 state, 2 words for THREE_FRY, 2 or 3 for PHILOX).
Imports the shape and hlo layers and the registry only.
"""

from __future__ import annotations

from xlapy.hlo.attrs import AttrSpec, IntKind
from xlapy.hlo.attrs.enums import (
    RANDOM_ALGORITHM,
    RANDOM_DISTRIBUTION,
    RandomAlgorithm,
    RandomDistribution,
)
from xlapy.opdefs.common import require_result, tname
from xlapy.opdefs.registry import OpCall, op
from xlapy.shape import PrimitiveType, Shape, dtypes

P = PrimitiveType

#: Words of u64 state each algorithm takes (rng_default: the backend's choice, which on
#: CPU/GPU is Philox).
STATE_WORDS = {
    RandomAlgorithm.RNG_THREE_FRY: (2,),
    RandomAlgorithm.RNG_PHILOX: (2, 3),
    RandomAlgorithm.RNG_DEFAULT: (2, 3),
}

_UNSIGNED_BY_WIDTH = {2: P.U2, 4: P.U4, 8: P.U8, 16: P.U16, 32: P.U32, 64: P.U64}


def unsigned_type_for_bit_width(bits: int) -> PrimitiveType | None:
    """primitive_util::UnsignedIntegralTypeForBitWidth (None where there is none)."""
    return _UNSIGNED_BY_WIDTH.get(bits)


@op("rng", min_operands=2, attrs=[AttrSpec("distribution", RANDOM_DISTRIBUTION)])
def _rng(call: OpCall) -> Shape:
    """rng(a, b), distribution=rng_uniform: values uniform in [a, b); rng_normal: normal
    with mean a and deviation b. a and b are scalars of the result's element type; the
    result shape is the declared one."""
    result = require_result(call, "rng takes its shape from the result")
    if len(call.operands) != 2:
        call.fail(f"RNG distribution ({call.distribution.name}) expects 2 parameters, but got "
                  f"{len(call.operands)}")
    a, b = call.operands
    if not (a.is_scalar() and b.is_scalar()):
        call.fail(f"Expected scalar types for the two operands of Rng instruction, got {a} and {b}")
    if not result.is_array():
        call.fail(f"the result of rng must be an array, got {result}")
    if a.element_type != b.element_type or a.element_type != result.element_type:
        call.fail(f"Expected compatible element types for the result and the two operands of "
                  f"Rng instruction, got {a}, {b} -> {result}")
    t = a.element_type
    if call.distribution == RandomDistribution.RNG_UNIFORM:
        if not (dtypes.is_floating(t) or dtypes.is_integral(t) or t == P.PRED):
            call.fail(f"Element type not supported. Expected element to be of floating point "
                      f"type, integral type or predicate type for RngUniform, got {tname(t)}")
    elif not dtypes.is_floating(t):
        call.fail(f"Element type not supported. Expected element to be FloatingPointType for "
                  f"RngNormal, got {tname(t)}")
    return result


@op("rng-bit-generator", attrs=[AttrSpec("algorithm", RANDOM_ALGORITHM)])
def _rng_bit_generator(call: OpCall) -> Shape:
    """rng-bit-generator(state), algorithm=...: the result is (new state, random bits),
    the new state shaped like the old, the bits of the declared shape."""
    (state,) = call.operands
    algorithm = call.algorithm
    words = STATE_WORDS[algorithm]
    if (not state.is_array() or state.element_type != P.U64 or state.rank != 1
            or state.dimensions[0] not in words):
        want = " or ".join(f"u64[{w}]" for w in words)
        call.fail(f"the initial state for {algorithm.text} must be {want}, got {state}")
    result = require_result(call, "rng-bit-generator takes the shape of its bits from the result")
    if not result.is_tuple() or len(result.tuple_shapes) != 2:
        call.fail(f"Expected tuple shape with 2 elements for RngBitGenerator. Got: {result}")
    new_state, bits = result.tuple_shapes
    if not state.compatible(new_state):
        call.fail(f"Expected state shape to match between input and output for "
                  f"RngBitGenerator. Got {state} vs. {new_state}")
    if not bits.is_array() or not (dtypes.is_integral(bits.element_type)
                                   or dtypes.is_floating(bits.element_type)):
        call.fail(f"the random bits must be an array of integer or floating point type, got {bits}")
    return Shape.tuple([state, bits])


@op("rng-get-and-update-state", attrs=[AttrSpec("delta", IntKind())])
def _rng_get_and_update_state(call: OpCall) -> Shape:
    """Returns the module's RNG state (u64[2]) and advances it by ``delta``."""
    expected = Shape.array(P.U64, (2,))
    if call.result is not None and not call.result.compatible(expected):
        call.fail(f"Invalid RngGetAndUpdateState, expect result to have shape {expected}, got "
                  f"{call.result}")
    return expected
