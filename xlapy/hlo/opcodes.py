"""The sorted opcode table: every HLO opcode of XLA's hlo_opcode.h with its text spelling
and operand arity (None: variadic). Owns nothing else; the per-opcode definitions (attribute
schema, traits, shape rule) live in xlapy.opdefs."""

from __future__ import annotations

VARIADIC = None

# (text spelling, arity), in the order of XLA's HLO_OPCODE_LIST.
OPCODES: tuple[tuple[str, int | None], ...] = (
    ("abs", 1), ("acos", 1), ("acosh", 1), ("add", 2), ("add-dependency", 2),
    ("after-all", VARIADIC), ("all-gather", VARIADIC), ("all-gather-done", 1),
    ("all-gather-start", VARIADIC), ("all-reduce", VARIADIC), ("all-reduce-done", 1),
    ("all-reduce-start", VARIADIC), ("all-to-all", VARIADIC), ("and", 2), ("asin", 1),
    ("asinh", 1), ("async-done", 1), ("async-start", VARIADIC), ("async-update", VARIADIC),
    ("atan2", 2), ("atanh", 1), ("batch-norm-grad", 5), ("batch-norm-inference", 5),
    ("batch-norm-training", 3), ("bitcast", 1), ("bitcast-convert", 1), ("broadcast", 1),
    ("call", VARIADIC), ("cbrt", 1), ("ceil", 1), ("cholesky", 1), ("clamp", 3),
    ("count-leading-zeros", 1), ("collective-broadcast", VARIADIC),
    ("collective-permute", VARIADIC), ("collective-permute-done", 1),
    ("collective-permute-start", VARIADIC), ("compare", 2), ("complex", 2),
    ("concatenate", VARIADIC), ("conditional", VARIADIC), ("constant", 0), ("convert", 1),
    ("convolution", VARIADIC), ("copy", 1), ("copy-done", 1), ("copy-start", 1),
    ("cosine", 1), ("cosh", 1), ("custom-call", VARIADIC), ("divide", 2), ("domain", 1),
    ("dot", 2), ("dynamic-reshape", VARIADIC), ("dynamic-slice", VARIADIC),
    ("dynamic-update-slice", VARIADIC), ("erf", 1), ("exponential", 1),
    ("exponential-minus-one", 1), ("fft", 1), ("floor", 1), ("fusion", VARIADIC),
    ("gather", 2), ("get-dimension-size", 1), ("get-tuple-element", 1), ("imag", 1),
    ("infeed", 1), ("iota", 0), ("is-finite", 1), ("log", 1), ("log-plus-one", 1),
    ("logistic", 1), ("map", VARIADIC), ("maximum", 2), ("minimum", 2), ("mulhi", 2),
    ("multiply", 2), ("negate", 1), ("not", 1), ("opt-barrier", 1), ("or", 2),
    ("outfeed", 2), ("pad", 2), ("parameter", 0), ("partition-id", 0), ("popcnt", 1),
    ("power", 2), ("ragged-all-to-all", 6), ("ragged-dot", 3), ("real", 1), ("recv", 1),
    ("recv-done", 1), ("reduce", VARIADIC), ("reduce-precision", 1),
    ("reduce-scatter", VARIADIC), ("reduce-window", VARIADIC), ("remainder", 2),
    ("replica-id", 0), ("reshape", 1), ("reverse", 1), ("rng", VARIADIC),
    ("rng-bit-generator", 1), ("rng-get-and-update-state", 0), ("round-nearest-afz", 1),
    ("round-nearest-even", 1), ("rsqrt", 1), ("scaled-dot", 4), ("scan", VARIADIC),
    ("scatter", VARIADIC), ("select", 3), ("select-and-scatter", 3), ("send", 2),
    ("send-done", 1), ("set-dimension-size", 2), ("shift-left", 2),
    ("shift-right-arithmetic", 2), ("shift-right-logical", 2), ("sign", 1), ("sine", 1),
    ("sinh", 1), ("slice", 1), ("sort", VARIADIC), ("sqrt", 1), ("stochastic-convert", 2),
    ("subtract", 2), ("tan", 1), ("tanh", 1), ("topk", 1), ("transpose", 1),
    ("triangular-solve", 2), ("tuple", VARIADIC), ("while", 1), ("xor", 2),
)

OPCODE_NAMES: frozenset[str] = frozenset(name for name, _ in OPCODES)
ARITY: dict[str, int | None] = dict(OPCODES)

#: Opcodes whose text form has an async "-start"/"-done" pair wrapping another op.
ASYNC_OPCODES = frozenset({"async-start", "async-update", "async-done"})

#: Opcodes with side effects (XLA's HloInstruction::HasSideEffectNoRecurse): never removed
#: as dead code, never merged by CSE.
SIDE_EFFECTING_OPCODES = frozenset({
    "send", "send-done", "recv", "recv-done", "rng", "rng-get-and-update-state", "infeed",
    "outfeed", "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done", "after-all", "custom-call",
    "all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter",
    "collective-broadcast", "ragged-all-to-all", "async-start", "async-update", "async-done",
})
