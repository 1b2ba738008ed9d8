"""The bad-argument sweep over every public name of ``xlapy.ops``.

Each function (and each value class users construct: dimension numbers, channel handles,
replica groups...) has one valid call in BASELINES. The sweep replaces one argument at a
time by invalid values chosen by the kind of the valid one (an XlaOp, a list of XlaOps, an
integer, a list of integers, a list of pairs, a computation, a shape, an element type, an
enum member, a dataclass of dimension numbers, a literal...), plus the parameters the
baseline leaves at their defaults, and requires of every call that:

- only xlapy's own errors (xlapy.errors.XlaError) escape, never a TypeError, IndexError,
  AttributeError, NumPy error...;
- the message names the op first: its builder name (``ReduceWindow: ...``) or the HLO
  opcode it emits (``reduce-window: ...``);
- a call that succeeds builds a computation the verifier accepts (the builder never hands
  out an instruction XLA's verifier would reject).

A new public name without a baseline fails ``test_every_public_name_has_a_baseline``, so the
sweep covers new ops as they are added. Representative messages are pinned at the end.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import math
import re

import numpy as np
import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError, XlaError
from xlapy.ops.builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.shape import Layout, PrimitiveType, Shape, parse_shape
from xlapy.shape.literal import Literal
from xlapy.verifier import verify_module

# -- the environment the calls are made in ----------------------------------------------------

#: Parameters of every environment's builder (and, the same, of the "other" builder).
PARAMS = {
    "x": "f32[2,3]", "y": "f32[2,3]", "s": "f32[]", "i": "s32[]", "p": "pred[]",
    "v": "f32[3]", "m": "f32[3,3]", "t": "(f32[2,3], s32[])", "u": "u32[2]", "c": "c64[4]",
    "q": "f32[7]", "img": "f32[1,2,4,4]", "ker": "f32[3,2,2,2]", "idx": "s32[2,1]",
    "upd": "f32[2,3]", "cnt": "s32[2]", "st": "u64[2]", "dyn": "f32[<=4]", "sizes": "u32[2]",
    "w": "f32[2,3,4]",
}


class Env:
    """A fresh builder ``b`` holding one parameter per PARAMS entry (``env.x``...), a token
    ``env.tok``, and a second builder ``other`` with the same parameters."""

    def __init__(self):
        self.b = XlaBuilder("main")
        self.other = XlaBuilder("other")
        self.o: dict[str, XlaOp] = {}
        for n, (name, text) in enumerate(PARAMS.items()):
            setattr(self, name, ops.Parameter(self.b, n, parse_shape(text), name))
            self.o[name] = ops.Parameter(self.other, n, parse_shape(text), name)
        self.next_parameter = len(PARAMS)
        self.tok = self.b.emit("after-all", [])
        self.o["tok"] = self.other.emit("after-all", [])
        self.setup_size = len(self.b._computation.instructions)

    def other_op(self, op: XlaOp) -> XlaOp:
        """An op of the other builder with ``op``'s shape (or its ``x``)."""
        for o in self.o.values():
            if o.shape == op.shape:
                return o
        return self.o["x"]

    def emitted_opcodes(self) -> set[str]:
        return {i.opcode for i in self.b._computation.instructions[self.setup_size:]}


def _computation(name: str, param_shapes: list[str], body) -> XlaComputation:
    b = XlaBuilder(name)
    params = [ops.Parameter(b, n, parse_shape(s), f"p{n}") for n, s in enumerate(param_shapes)]
    return b.build(body(b, *params))


@functools.cache
def comps() -> dict[str, XlaComputation]:
    c = {
        "add_f32": _computation("add_f32", ["f32[]", "f32[]"], lambda b, x, y: ops.Add(x, y)),
        "add_s32": _computation("add_s32", ["s32[]", "s32[]"], lambda b, x, y: ops.Add(x, y)),
        "lt_f32": _computation("lt_f32", ["f32[]", "f32[]"], lambda b, x, y: ops.Lt(x, y)),
        "ge_f32": _computation("ge_f32", ["f32[]", "f32[]"], lambda b, x, y: ops.Ge(x, y)),
        "neg_x": _computation("neg_x", ["f32[2,3]"], lambda b, x: ops.Neg(x)),
        "add_x": _computation("add_x", ["f32[2,3]", "f32[2,3]"], lambda b, x, y: ops.Add(x, y)),
        "cond_i": _computation("cond_i", ["s32[]"],
                               lambda b, i: ops.Lt(i, ops.ConstantR0(b, np.int32(10)))),
        "body_i": _computation("body_i", ["s32[]"],
                               lambda b, i: ops.Add(i, ops.ConstantR0(b, np.int32(1)))),
        "neg_f32": _computation("neg_f32", ["f32[]"], lambda b, x: ops.Neg(x)),
        "add3_f32": _computation("add3_f32", ["f32[]", "f32[]", "f32[]"],
                                 lambda b, x, y, z: ops.Add(ops.Add(x, y), z)),
        "pair_f32": _computation("pair_f32", ["f32[]", "f32[]"],
                                 lambda b, x, y: ops.Tuple(b, [x, y])),
        "add_v2": _computation("add_v2", ["f32[2]", "f32[2]"], lambda b, x, y: ops.Add(x, y)),
    }
    return c


#: Computations of signatures no baseline takes (put in place of any computation argument).
WRONG_COMPUTATIONS = ("add_s32", "neg_f32", "add3_f32", "pair_f32", "add_v2", "lt_f32",
                      "neg_x")


# -- one valid call per public name --------------------------------------------------------------


def _s(text: str, **kw) -> Shape:
    return parse_shape(text, **kw)


def _gather_dn():
    return ops.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                      start_index_map=(0,), index_vector_dim=1)


def _scatter_dn():
    return ops.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,), index_vector_dim=1)


def _dot_dn():
    return ops.DotDimensionNumbers(lhs_contracting_dimensions=(1,),
                                   rhs_contracting_dimensions=(0,))


def _conv_dn():
    return ops.CreateDefaultConvDimensionNumbers(2)


def _ragged_inputs(e: Env):
    b = e.b
    shapes = ["f32[4,2]", "s32[2]", "s32[2]", "f32[4,2]", "s32[2]", "s32[2]"]
    params = []
    for s in shapes:
        params.append(ops.Parameter(b, e.next_parameter, _s(s)))
        e.next_parameter += 1
    return params


def _scaled_inputs(e: Env):
    params = []
    for s in ("f8e4m3fn[4,64]", "f8e4m3fn[64,8]", "f8e8m0fnu[4,2]", "f8e8m0fnu[2,8]"):
        params.append(ops.Parameter(e.b, e.next_parameter, _s(s)))
        e.next_parameter += 1
    return params


def _ragged_dot_inputs(e: Env):
    params = []
    for s in ("f32[11,5]", "f32[2,5,7]", "u32[2]"):
        params.append(ops.Parameter(e.b, e.next_parameter, _s(s)))
        e.next_parameter += 1
    return params


def _cmp():
    return comps()


#: name -> (env -> (args, kwargs)): one valid call.
BASELINES = {
    "Parameter": lambda e: ((e.b, e.next_parameter, _s("f32[5]"), "z"), {}),
    "Compare": lambda e: ((e.x, e.y, (), "LT", "TOTALORDER"), {}),
    "Clamp": lambda e: ((e.s, e.x, e.s), {}),
    "Select": lambda e: ((e.p, e.x, e.y), {}),
    "ConvertElementType": lambda e: ((e.x, PrimitiveType.S32), {}),
    "BitcastConvertType": lambda e: ((e.x, PrimitiveType.U32), {}),
    "ReducePrecision": lambda e: ((e.x, 5, 10), {}),
    "Broadcast": lambda e: ((e.x, [4]), {}),
    "BroadcastInDim": lambda e: ((e.v, [2, 3], [1]), {}),
    "Collapse": lambda e: ((e.x, [0, 1]), {}),
    "ConcatInDim": lambda e: ((e.b, [e.x, e.y], 0), {}),
    "DynamicReshape": lambda e: ((e.x, [e.i, e.i], [3, 2], [True, False]), {}),
    "DynamicSlice": lambda e: ((e.x, [e.i, e.i], [1, 2]), {}),
    "DynamicUpdateSlice": lambda e: ((e.x, e.x, [e.i, e.i]), {}),
    "GetDimensionSize": lambda e: ((e.dyn, 0), {}),
    "GetTupleElement": lambda e: ((e.t, 1), {}),
    "Iota": lambda e: ((e.b, _s("s32[4,8]"), 1), {}),
    "MakeEdgePaddingConfig": lambda e: (([(1, 2), (0, 1)],), {}),
    "MakeNoPaddingConfig": lambda e: ((2,), {}),
    "Pad": lambda e: ((e.x, e.s, [(1, 2, 1), (0, 1, 0)]), {}),
    "PadInDim": lambda e: ((e.x, e.s, 1, 1, 2), {}),
    "RemoveDynamicDimension": lambda e: ((e.dyn, 0), {}),
    "Reshape": lambda e: ((e.x, [1, 0], [3, 2]), {}),
    "ReshapeWithInferredDimension": lambda e: ((e.x, [3, 2], 1), {}),
    "Rev": lambda e: ((e.x, [0]), {}),
    "SetDimensionSize": lambda e: ((e.x, e.i, 1), {}),
    "Slice": lambda e: ((e.x, [0, 1], [2, 3], [1, 1]), {}),
    "SliceInDim": lambda e: ((e.x, 0, 2, 1, 1), {}),
    "Transpose": lambda e: ((e.x, [1, 0]), {}),
    "Tuple": lambda e: ((e.b, [e.x, e.i]), {}),
    "Reduce": lambda e: ((e.x, e.s, _cmp()["add_f32"], [0, 1]), {}),
    "ReduceAll": lambda e: ((e.x, e.s, _cmp()["add_f32"]), {}),
    "ReduceWindow": lambda e: (([e.x], [e.s], _cmp()["add_f32"], [1, 2], [1, 1],
                                ops.Padding.VALID), {}),
    "ReduceWindowWithGeneralPadding": lambda e: (
        (e.x, e.s, _cmp()["add_f32"], [1, 2], [1, 1], [1, 1], [1, 1], [(0, 0), (1, 1)]), {}),
    "SelectAndScatter": lambda e: ((e.x, _cmp()["ge_f32"], [1, 3], [1, 3], ops.Padding.VALID,
                                    ops.Slice(e.x, [0, 0], [2, 1], [1, 1]), e.s,
                                    _cmp()["add_f32"]), {}),
    "SelectAndScatterWithGeneralPadding": lambda e: (
        (e.x, _cmp()["ge_f32"], [1, 3], [1, 3], [(0, 0), (0, 0)],
         ops.Slice(e.x, [0, 0], [2, 1], [1, 1]), e.s, _cmp()["add_f32"]), {}),
    "Window": lambda e: ((), {}),
    "make_padding": lambda e: (([4, 4], [2, 2], [1, 1], ops.Padding.SAME), {}),
    "Conv": lambda e: ((e.img, e.ker, [1, 1], ops.Padding.SAME), {}),
    "ConvGeneral": lambda e: ((e.img, e.ker, [1, 1], [(0, 0), (1, 1)], _conv_dn()), {}),
    "ConvGeneralDilated": lambda e: ((e.img, e.ker, [1, 1], [(0, 0), (1, 1)], [1, 1], [1, 2],
                                      _conv_dn()), {}),
    "ConvWithGeneralDimensions": lambda e: ((e.img, e.ker, [1, 1], ops.Padding.VALID,
                                             _conv_dn()), {}),
    "ConvWithGeneralPadding": lambda e: ((e.img, e.ker, [1, 1], [(0, 0), (1, 1)]), {}),
    "ConvolutionDimensionNumbers": lambda e: ((), dataclasses.asdict(_conv_dn())),
    "CreateDefaultConvDimensionNumbers": lambda e: ((2,), {}),
    "Dot": lambda e: ((e.x, e.m), {}),
    "DotDimensionNumbers": lambda e: (((1,), (0,)), {}),
    "DotGeneral": lambda e: ((e.x, e.m, _dot_dn()), {}),
    "PrecisionConfig": lambda e: (((ops.Precision.HIGH, ops.Precision.DEFAULT),), {}),
    "RaggedDot": lambda e: ((*_ragged_dot_inputs(e), ops.RaggedDotDimensionNumbers(
        ops.DotDimensionNumbers((1,), (1,)), (0,), (0,))), {}),
    "RaggedDotDimensionNumbers": lambda e: ((ops.DotDimensionNumbers((1,), (1,)), (0,), (0,)),
                                            {}),
    "ScaledDot": lambda e: ((*_scaled_inputs(e), _dot_dn()), {"preferred_element_type": "bf16"}),
    "Gather": lambda e: ((e.x, e.idx, _gather_dn(), [1, 3]), {}),
    "Scatter": lambda e: ((e.x, e.idx, e.upd, _cmp()["add_f32"], _scatter_dn()), {}),
    "GatherDimensionNumbers": lambda e: ((), dataclasses.asdict(_gather_dn())),
    "ScatterDimensionNumbers": lambda e: ((), dataclasses.asdict(_scatter_dn())),
    "Map": lambda e: ((e.b, [e.x, e.y], _cmp()["add_f32"], [0, 1]), {}),
    "Call": lambda e: ((e.b, _cmp()["add_x"], [e.x, e.y]), {}),
    "CompositeCall": lambda e: ((e.b, _cmp()["neg_x"], [e.x], "foo.bar"), {"version": 1}),
    "While": lambda e: ((_cmp()["cond_i"], _cmp()["body_i"], e.i), {}),
    "Conditional": lambda e: ((e.p, e.x, _cmp()["neg_x"], e.y, _cmp()["neg_x"]), {}),
    "AllGather": lambda e: ((e.x, 0, 2, [[0, 1]]), {}),
    "AllGatherTuple": lambda e: (([e.x, e.v], 0, 2), {}),
    "AllReduce": lambda e: ((e.x, _cmp()["add_f32"], [[0, 1]]), {}),
    "AllReduceTuple": lambda e: (([e.x, e.v], _cmp()["add_f32"]), {}),
    "AllToAll": lambda e: ((e.x, 0, 1, 2), {}),
    "AllToAllTuple": lambda e: ((e.x, 0, 1, 2), {}),
    "ChannelHandle": lambda e: ((3, ops.ChannelType.DEVICE_TO_DEVICE), {}),
    "CollectiveBroadcast": lambda e: ((e.x, [[0, 1]]), {}),
    "CollectiveDeviceList": lambda e: ((((0, 1), (2, 3)),), {}),
    "CollectivePermute": lambda e: ((e.x, [(0, 1), (1, 0)]), {}),
    "CreateChannelHandle": lambda e: ((e.b,), {}),
    "CreateDeviceToHostChannelHandle": lambda e: ((e.b,), {}),
    "CreateHostToDeviceChannelHandle": lambda e: ((e.b,), {}),
    "CrossReplicaSum": lambda e: ((e.x, [[0, 1]]), {}),
    "Infeed": lambda e: ((e.b, _s("f32[2]")), {}),
    "InfeedWithToken": lambda e: ((e.tok, _s("f32[2]")), {}),
    "IotaReplicaGroupList": lambda e: ((2, 2, [4], [0]), {}),
    "MultiCollectivePermute": lambda e: (([e.x, e.v], [(0, 1)]), {}),
    "Outfeed": lambda e: ((e.x, e.x.shape, ""), {}),
    "OutfeedWithToken": lambda e: ((e.x, e.tok, e.x.shape, ""), {}),
    "PartitionId": lambda e: ((e.b,), {}),
    "RaggedAllToAll": lambda e: (tuple(_ragged_inputs(e)), {"replica_groups": [[0, 1]]}),
    "Recv": lambda e: ((e.b, _s("f32[2]"), ops.ChannelHandle(1)), {}),
    "RecvFromHost": lambda e: ((e.tok, _s("s32[4]"),
                                ops.ChannelHandle(2, ops.ChannelType.HOST_TO_DEVICE)), {}),
    "RecvWithToken": lambda e: ((e.tok, _s("f32[2]"), ops.ChannelHandle(1)), {}),
    "ReduceScatter": lambda e: ((e.x, _cmp()["add_f32"], 0, 2), {}),
    "ReplicaGroup": lambda e: (((0, 1),), {}),
    "ReplicaId": lambda e: ((e.b,), {}),
    "Send": lambda e: ((e.x, ops.ChannelHandle(1)), {}),
    "SendToHost": lambda e: ((e.x, e.tok, e.x.shape,
                              ops.ChannelHandle(2, ops.ChannelType.DEVICE_TO_HOST)), {}),
    "SendWithToken": lambda e: ((e.x, e.tok, ops.ChannelHandle(1)), {}),
    "RngBitGenerator": lambda e: (("rng_three_fry", e.st, _s("u32[3,4]")), {}),
    "RngNormal": lambda e: ((e.s, e.s, _s("f32[3,4]")), {}),
    "RngUniform": lambda e: ((e.s, e.s, _s("f32[3,4]")), {}),
    "Sort": lambda e: (([e.x], _cmp()["lt_f32"]), {}),
    "TopK": lambda e: ((e.x, 2), {}),
    "BatchNormGrad": lambda e: ((e.x, e.v, e.v, e.v, e.x, 1e-3, 1), {}),
    "BatchNormInference": lambda e: ((e.x, e.v, e.v, e.v, e.v, 1e-3, 1), {}),
    "BatchNormTraining": lambda e: ((e.x, e.v, e.v, 1e-3, 1), {}),
    "Cholesky": lambda e: ((e.m, True), {}),
    "Fft": lambda e: ((e.c, ops.FftType.FFT, [4]), {}),
    "TriangularSolve": lambda e: ((e.m, e.m, True, True, False,
                                   ops.TriangularSolveOptions.NO_TRANSPOSE), {}),
    "TriangularSolveOptions": lambda e: ((), {}),
    "ConstantLiteral": lambda e: ((e.b, Literal.from_array(np.arange(3, dtype=np.float32))), {}),
    "Constant": lambda e: ((e.b, np.arange(3, dtype=np.int32)), {}),
    "ConstantR0": lambda e: ((e.b, 3, PrimitiveType.S32), {}),
    "ConstantR1": lambda e: ((e.b, 4, np.float32(0)), {}),
    "CustomCall": lambda e: ((e.b, "myfunc", [e.x, e.y], _s("f32[3,3]")), {}),
    "CustomCallWithComputation": lambda e: ((e.b, "foo", [e.x], _cmp()["neg_x"], e.x.shape),
                                            {}),
    "CustomCallWithLayout": lambda e: ((e.b, "baz", [e.v], _s("f32[3,2]{0,1}"),
                                        [_s("f32[3]{0}")]), {}),
    "OptimizationBarrier": lambda e: ((e.t,), {}),
    "AfterAll": lambda e: ((e.b, [e.tok, e.tok]), {}),
    "CreateToken": lambda e: ((e.b,), {}),
}


def _elementwise_baselines():
    from xlapy.ops import elementwise as ew

    for name in ew.UNARY:
        BASELINES.setdefault(name, lambda e: ((e.x,), {}))
    for name in ("Clz", "PopulationCount", "Not"):
        BASELINES[name] = lambda e: ((e.cnt,), {})
    for name in ("Real", "Imag"):
        BASELINES[name] = lambda e: ((e.c,), {})
    for name in ew.BINARY:
        BASELINES.setdefault(name, lambda e: ((e.x, e.v, [1]), {}))
    for name in ("And", "Or", "Xor", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical",
                 "MulHi"):
        BASELINES[name] = lambda e: ((e.cnt, e.cnt), {})
    for name in ew.COMPARISONS:
        BASELINES[name] = lambda e: ((e.x, e.v, [1]), {})
        BASELINES[name + "TotalOrder"] = lambda e: ((e.x, e.y), {})


_elementwise_baselines()


def _public_names() -> list[str]:
    out = []
    for name in ops.__all__:
        obj = getattr(ops, name)
        if isinstance(obj, type) and issubclass(obj, enum.Enum):
            continue  # enums: their members are the values
        out.append(name)
    return out


# -- invalid values by kind --------------------------------------------------------------------

_COMMON = (("None", None), ("a word", "bogus"), ("an object", object()))


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _bad_op(e: Env, op: XlaOp):
    return [("an XlaOp of another builder", e.other_op(op)), ("a list", [op]), ("an int", 1),
            ("a float", 1.5), ("a tuple", e.t), ("a token", e.tok), ("an s32 scalar", e.i),
            ("a pred scalar", e.p), ("f32[7]", e.q), ("an f32 scalar", e.s),
            ("c64[4]", e.c), ("a dynamic f32[<=4]", e.dyn), ("the builder", e.b)]


def _bad_op_list(e: Env, v: list):
    v = list(v)
    return [("one XlaOp, not a list", v[0]), ("an empty list", []),
            ("a list holding None", [*v[:-1], None]),
            ("a list holding another builder's op", [*v[:-1], e.other_op(v[-1])]),
            ("one more element", [*v, v[-1]]), ("one element fewer", v[:-1]),
            ("tuples", [e.t] * len(v)), ("tokens", [e.tok] * len(v)),
            ("s32 scalars", [e.i] * len(v)), ("an int", 3), ("a string", "ab")]


def _bad_int_list(e: Env, v: list):
    v = list(v)
    n = max(len(v), 1)
    out = [("an int, not a list", 1), ("floats", [1.5] * n), ("negative", [-1] * n),
           ("out of range", [99] * n), ("2**63", [2**63] * n), ("2**70", [2**70] * n),
           ("one more element", [*v, v[-1] if v else 1]), ("nested lists", [[1]] * n),
           ("a list holding None", [None] * n), ("booleans", [True] * n),
           ("a float array", np.ones(n)), ("a string", "12"), ("a dict", {1: 2}),
           ("ops", [e.i] * n)]
    if v:
        out += [("one element fewer", v[:-1]), ("an empty list", []),
                ("repeated", [v[0]] * len(v))]
    return out


def _bad_pairs(e: Env, v: list):
    v = list(v)
    n = max(len(v), 1)
    width = len(v[0]) if v else 2
    return [("a flat list", [1] * (n * width)), ("too long tuples", [tuple([1] * (width + 1))] * n),
            ("1-tuples", [(1,)] * n), ("float pairs", [(0.5,) * width] * n),
            ("negative", [(-5,) * width] * n), ("2**70", [(2**70,) * width] * n),
            ("string pairs", [("a",) * width] * n), ("one more element", [*v, (0,) * width]),
            ("one element fewer", v[:-1]), ("an int", 1), ("None pairs", [None] * n),
            ("ops", [(e.i,) * width] * n), ("an empty list", [])]


def _bad_int(e: Env, v):
    return [("-1", -1), ("-100", -100), ("99", 99), ("2**63", 2**63), ("2**70", 2**70),
            ("1.5", 1.5), ("1.0", 1.0), ("True", True), ("the string '1'", "1"),
            ("a list", [v]), ("an XlaOp", e.i), ("nan", math.nan)]


def _bad_float(e: Env, v):
    return [("a string", "x"), ("a list", [v]), ("nan", math.nan), ("inf", math.inf),
            ("-1.0", -1.0), ("complex", 1j), ("an XlaOp", e.s), ("2**1100", 2**1100)]


def _bad_bool(e: Env, v):
    return [("2", 2), ("the string 'yes'", "yes"), ("a list", [v]), ("an XlaOp", e.p),
            ("1.5", 1.5)]


def _bad_str(e: Env, v):
    return [("an empty string", ""), ("an int", 1), ("bytes", b"x"), ("a list", [v]),
            ("a non-ASCII word", "ǅ\u0660"), ("NOT_A_THING", "NOT_A_THING"),
            ("an XlaOp", e.x)]


def _bad_computation(e: Env, v):
    c = comps()
    return [(f"the computation {n}", c[n]) for n in WRONG_COMPUTATIONS] + [
        ("an XlaOp", e.x), ("the builder", e.b), ("a function", lambda x: x),
        ("a list", [v])]


def _bad_computation_list(e: Env, v):
    c = comps()
    v = list(v)
    return [("one computation, not a list", v[0]), ("an empty list", []),
            ("a list holding None", [*v[:-1], None]), ("one more element", [*v, v[-1]]),
            ("one element fewer", v[:-1])] + [
        (f"a list of {n}", [c[n]] * len(v)) for n in WRONG_COMPUTATIONS]


def _bad_shape(e: Env, v):
    return [("a tuple shape", _s("(f32[], s32[])")), ("a token shape", _s("token[]")),
            ("pred[2]", _s("pred[2]")), ("f32[5,5,5]", _s("f32[5,5,5]")),
            ("a shape without layout", _s(str(v).split("{")[0], fill_missing_layouts=False)
             if v.is_array() else _s("f32[2]", fill_missing_layouts=False)),
            ("a 4 TiB shape", _s("f32[1099511627776]")),  # valid; larger ones cannot be made
            ("a dynamic shape", _s("f32[<=3]")), ("its text", str(v)),
            ("an element type", PrimitiveType.F32), ("an XlaOp", e.x),
            ("a list of shapes", [v]), ("an opaque shape", _s("opaque[]"))]


def _bad_shape_list(e: Env, v):
    v = list(v)
    return [("one shape, not a list", v[0] if v else _s("f32[2]")),
            ("a list holding None", [None] * max(len(v), 1)),
            ("one more element", [*v, _s("f32[2]{0}")]), ("one element fewer", v[:-1]),
            ("texts", [str(s) for s in v] or ["f32[2]"]), ("an int", 1)]


def _bad_element_type(e: Env, v):
    return [("TUPLE", PrimitiveType.TUPLE), ("TOKEN", PrimitiveType.TOKEN),
            ("OPAQUE_TYPE", PrimitiveType.OPAQUE_TYPE),
            ("PRIMITIVE_TYPE_INVALID", PrimitiveType.PRIMITIVE_TYPE_INVALID),
            ("the name f33", "f33"), ("an int", 11), ("the object dtype", np.dtype(object)),
            ("a shape", _s("f32[2]")), ("the type float", float)]


def _bad_enum(e: Env, v):
    other = ops.FftType.FFT if not isinstance(v, ops.FftType) else ops.Padding.SAME
    return [("NOT_A_MEMBER", "NOT_A_MEMBER"), ("an int", 1), ("another enum's member", other),
            ("an empty string", ""), ("a list", [v])]


def _bad_dataclass(e: Env, v):
    out = [("a dict of its fields", dataclasses.asdict(v)), ("an int", 1),
           ("another value type", ops.ReplicaGroup((0,)) if not isinstance(v, ops.ReplicaGroup)
            else ops.ChannelHandle(1))]
    for f in dataclasses.fields(v):
        value = getattr(v, f.name)
        if isinstance(value, tuple) and all(_is_int(x) for x in value):
            cands = [(99,) * max(len(value), 1), (-1,) * max(len(value), 1), (*value, 0)]
        elif _is_int(value):
            cands = [99, -1]
        else:
            continue
        for bad in cands:
            try:
                out.append((f"{f.name}={bad}", dataclasses.replace(v, **{f.name: bad})))
            except XlaError:
                pass  # the value type itself refuses it: the class's own sweep covers that
    return out


def _bad_array(e: Env, v):
    return [("an object array", np.array([object(), 1], dtype=object)),
            ("a string array", np.array(["a", "b"])), ("a ragged list", [[1], [1, 2]]),
            ("a dict", {1: 2}), ("a datetime", np.datetime64("2020-01-01")),
            ("2**70", 2**70), ("an XlaOp", e.x), ("a float128 array", np.ones(2, np.longdouble)),
            ("a structured array", np.zeros(2, dtype=[("a", "i4")]))]


def _bad_layout(e: Env, v):
    return [("a layout of another rank", Layout((0,))), ("its text", "{1,0}"),
            ("a list", [1, 0]), ("an int", 1), ("a layout with repeats", Layout((0, 0)))]


def _bad_absent(e: Env, v):
    """For an argument the baseline leaves at None or its default."""
    return [("a word", "bogus"), ("-1", -1), ("a list of floats", [1.5]), ("an object", object()),
            ("an XlaOp", e.x)]


def _is_op_list(v) -> bool:
    return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(o, XlaOp) for o in v)


def _is_pair_list(v) -> bool:
    return (isinstance(v, (list, tuple)) and bool(v)
            and all(isinstance(p, tuple) and all(_is_int(x) for x in p) for p in v))


def _is_int_list(v, annotation: str) -> bool:
    if not isinstance(v, (list, tuple)):
        return False
    if not v:
        return "int" in annotation or "Sequence" in annotation or annotation == ""
    return all(_is_int(x) for x in v)


def bad_values(e: Env, value, annotation: str):
    if isinstance(value, XlaOp):
        return _bad_op(e, value)
    if isinstance(value, XlaBuilder):
        return [("another builder", e.other), ("an XlaOp", e.x)] + list(_COMMON)
    if isinstance(value, XlaComputation):
        return _bad_computation(e, value) + list(_COMMON)
    if isinstance(value, Shape):
        return _bad_shape(e, value) + list(_COMMON)
    if isinstance(value, PrimitiveType):
        return _bad_element_type(e, value) + list(_COMMON)
    if isinstance(value, enum.Enum):
        return _bad_enum(e, value) + list(_COMMON)
    if isinstance(value, Layout):
        return _bad_layout(e, value) + list(_COMMON)
    if isinstance(value, bool):
        return _bad_bool(e, value) + list(_COMMON)
    if _is_int(value):
        return _bad_int(e, value) + list(_COMMON)
    if isinstance(value, float):
        return _bad_float(e, value) + list(_COMMON)
    if isinstance(value, str):
        return _bad_str(e, value) + list(_COMMON)
    if isinstance(value, (np.ndarray, np.generic, Literal)):
        return _bad_array(e, value) + list(_COMMON)
    if dataclasses.is_dataclass(value):
        return _bad_dataclass(e, value) + list(_COMMON)
    if _is_op_list(value):
        return _bad_op_list(e, value) + list(_COMMON)
    if isinstance(value, (list, tuple)) and value and all(isinstance(c, XlaComputation)
                                                          for c in value):
        return _bad_computation_list(e, value) + list(_COMMON)
    if isinstance(value, (list, tuple)) and value and all(isinstance(s, Shape) for s in value):
        return _bad_shape_list(e, value) + list(_COMMON)
    if _is_pair_list(value):
        return _bad_pairs(e, value) + list(_COMMON)
    if isinstance(value, (list, tuple)) and value and all(isinstance(x, bool) for x in value):
        return [("ints", [2] * len(value)), ("one more element", [*value, True]),
                ("one element fewer", value[:-1]), ("a bool, not a list", True),
                ("strings", ["yes"] * len(value))] + list(_COMMON)
    if isinstance(value, (list, tuple)) and value and all(_is_int_list(x, "int") for x in value):
        return _bad_pairs(e, [tuple(x) for x in value]) + list(_COMMON)
    if _is_int_list(value, annotation):
        return _bad_int_list(e, value) + list(_COMMON)
    if value is None:
        return _bad_absent(e, value)
    return list(_COMMON)


# -- running the calls -------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    label: str
    args: tuple
    kwargs: dict


def _parameters(fn) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None


def cases(name: str, e: Env) -> list[Case]:
    """Every one-argument mutation of the baseline call, in ``e``."""
    fn = getattr(ops, name)
    args, kwargs = BASELINES[name](e)
    params = _parameters(fn) or []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    out = []
    for pos, value in enumerate(args):
        pname = positional[pos].name if pos < len(positional) else f"argument {pos}"
        annotation = str(positional[pos].annotation) if pos < len(positional) else ""
        for label, bad in bad_values(e, value, annotation):
            out.append(Case(f"{pname} = {label}", (*args[:pos], bad, *args[pos + 1:]), kwargs))
    for key, value in kwargs.items():
        annotation = next((str(p.annotation) for p in params if p.name == key), "")
        for label, bad in bad_values(e, value, annotation):
            out.append(Case(f"{key} = {label}", args, {**kwargs, key: bad}))
    given = {p.name for p in positional[:len(args)]} | set(kwargs)
    for p in params:
        if p.name in given or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is inspect.Parameter.empty:
            continue
        for label, bad in bad_values(e, p.default, str(p.annotation)):
            out.append(Case(f"{p.name} = {label}", args, {**kwargs, p.name: bad}))
    # Arity: one argument too few, one too many.
    if args:
        out.append(Case("one argument too few", args[:-1], kwargs))
    out.append(Case("one argument too many", (*args, *kwargs.values(), 1), {}))
    return out


def _op_names(name: str) -> set[str]:
    """What a message may start with: the builder name, or an opcode the valid call emits."""
    e = Env()
    args, kwargs = BASELINES[name](e)
    before = len(e.b._computation.instructions)
    getattr(ops, name)(*args, **kwargs)
    names = {name}
    names |= {i.opcode for i in e.b._computation.instructions[before:]}
    return names


def _names_op(message: str, names: set[str]) -> bool:
    return any(re.match(re.escape(n) + r"\b", message) for n in names)


def run_case(name: str, case: Case, names: set[str]) -> tuple[str | None, bool]:
    """(None if the call behaves, otherwise what is wrong; whether the builder was built)."""
    fn = getattr(ops, name)
    try:
        result = fn(*case.args, **case.kwargs)
    except XlaError as err:
        message = str(err)
        if not _names_op(message, names):
            return (f"{case.label}: the message does not start with {sorted(names)}: "
                    f"{message!r}"), False
        return None, False
    except Exception as err:  # noqa: BLE001 (the point of the sweep)
        return f"{case.label}: {type(err).__name__}: {err}", False
    if not (isinstance(result, XlaOp) and result.builder.name == "main"):
        return None, False
    try:
        # build may refuse what a later call could still complete (a gap in the parameter
        # numbers); what it builds, the verifier must accept.
        module = result.builder.build(result).module
    except XlaError:
        return None, False
    except Exception as err:  # noqa: BLE001
        return (f"{case.label}: accepted, then building raised {type(err).__name__}: "
                f"{err}"), True
    try:
        verify_module(module)
    except Exception as err:  # noqa: BLE001
        return f"{case.label}: accepted, but the verifier rejects the result: {err}", True
    return None, True


def test_every_public_name_has_a_baseline():
    missing = [n for n in _public_names() if n not in BASELINES]
    assert missing == [], f"add a valid call for these to BASELINES: {missing}"


@pytest.mark.parametrize("name", _public_names())
def test_baseline_is_valid(name):
    e = Env()
    args, kwargs = BASELINES[name](e)
    result = getattr(ops, name)(*args, **kwargs)
    if isinstance(result, XlaOp):
        verify_module(result.builder.build(result).module)


@pytest.mark.parametrize("name", _public_names())
def test_bad_arguments(name):
    names = _op_names(name) if name[0].isupper() else {name}
    failures = []
    todo = cases(name, Env())
    for k in range(len(todo)):
        failure, built = run_case(name, todo[k], names)
        if failure:
            failures.append(failure)
        if built:  # the builder is spent: the next calls get a fresh one
            todo = cases(name, Env())
    assert not failures, f"ops.{name}:\n  " + "\n  ".join(failures)


# -- representative messages, pinned ------------------------------------------------------------


def _pinned():
    e = Env()
    add = comps()["add_f32"]
    return [
        # The IndexError: no operands.
        (lambda: ops.ReduceWindow([], [e.s], add, [1, 2], [1, 1], "VALID"), InvalidArgumentError,
         ("ReduceWindow: expects one or more operands and as many init_values, got 0 operands "
          "and 1 init_values")),
        # A non-list where a list is expected (the TypeErrors).
        (lambda: ops.Transpose(e.x, 1), InvalidArgumentError,
         "Transpose: permutation must be a list of integers, got 1"),
        (lambda: ops.Add(e.x, e.v, None), InvalidArgumentError,
         "Add: broadcast_dimensions must be a list of integers, got None"),
        (lambda: ops.Tuple(e.b, e.x), InvalidArgumentError,
         "Tuple: elements must be a list of XlaOps, got one XlaOp (%x)"),
        (lambda: ops.Gather(e.x, e.idx, _gather_dn(), None), InvalidArgumentError,
         "Gather: slice_sizes must be a list of integers, got None"),
        (lambda: ops.CollectivePermute(e.x, [(0, 1, 2)]), InvalidArgumentError,
         ("CollectivePermute: source_target_pairs must be a list of (source, target) pairs, "
          "got (0, 1, 2) at index 0")),
        (lambda: ops.ConvGeneralDilated(e.img, e.ker, [1, 1], [("a", "b")] * 2, [], [],
                                        _conv_dn()), InvalidArgumentError,
         "ConvGeneralDilated: padding[0] must be a list of integers, got ('a', 'b')"),
        # Integers beyond XLA's int64.
        (lambda: ops.Slice(e.x, [0, 2**64], [1, 1], [1, 1]), InvalidArgumentError,
         "Slice: start_indices[1] must fit in 64 bits (int64), got 18446744073709551616"),
        # Errors raised by another op's code name the op the user called.
        (lambda: ops.Conv(1, e.ker, [1, 1], "SAME"), InvalidArgumentError,
         "Conv: operand 0 must be an XlaOp, got int"),
        (lambda: ops.ReduceAll(e.x, e.s, None), InvalidArgumentError,
         "ReduceAll: expected an XlaComputation, got NoneType"),
        (lambda: ops.Recv(e.b, _s("f32[2]"), "h"), InvalidArgumentError,
         "Recv: channel handle must be an integer, got 'h'"),
        # Errors of lower layers (literals, text) get the op's name in front.
        (lambda: ops.ConstantLiteral(e.b, np.array(["a"])), InvalidArgumentError,
         "ConstantLiteral: NumPy dtype <U1 has no XLA element type"),
        (lambda: ops.ConvGeneral(e.img, e.ker, [1, 1], [(0, 0)] * 2, "bogus"), XlaError,
         "ConvGeneral: dim_labels:1:1: expects dim labels pattern"),
        # Shape rules keep their opcode.
        (lambda: ops.Add(e.x, e.q, [1]), InvalidArgumentError,
         "add: Broadcast dimension 0 mismatch: 7 != 3; f32[7]{0} and f32[2,3]{1,0}."),
        # Calls that do not fit the signature.
        (lambda: ops.Add(e.x), InvalidArgumentError,
         "Add: missing 1 required positional argument: 'rhs'"),
        (lambda: ops.DotDimensionNumbers(1, 2, 3, 4, 5), InvalidArgumentError,
         "DotDimensionNumbers: takes from 1 to 5 positional arguments but 6 were given"),
        (lambda: ops.AllToAllTuple(e.x, 0, 1), InvalidArgumentError,
         "AllToAllTuple: missing a required argument: 'split_count'"),
        # Element types, booleans, allocation.
        (lambda: ops.ConvertElementType(e.x, None), InvalidArgumentError,
         ("ConvertElementType: new_element_type must be an element type (a PrimitiveType, its "
          "name or a NumPy dtype), got None")),
        (lambda: ops.DynamicReshape(e.x, [e.i, e.i], [3, 2], [2, False]), InvalidArgumentError,
         "DynamicReshape: dims_are_dynamic[0] must be true or false, got 2"),
        (lambda: ops.ConstantR1(e.b, 2**62, np.float32(0)), InvalidArgumentError,
         ("ConstantR1: cannot allocate 4611686018427387904 elements of float32 "
          "(18446744073709551616 bytes)")),
    ]


@pytest.mark.parametrize("index", range(len(_pinned())))
def test_pinned_message(index):
    call, error, message = _pinned()[index]
    with pytest.raises(error) as info:
        call()
    assert str(info.value).startswith(message), str(info.value)


def test_a_bug_inside_an_op_is_not_disguised_as_bad_input():
    # public_op turns a TypeError into an InvalidArgumentError only when the call itself
    # does not fit the signature; one raised inside the op's code stays what it is.
    from xlapy.ops.core import PUBLIC_OPS, public_op

    def Broken(x):
        return x + "1"

    broken = public_op("Broken", Broken)
    try:
        with pytest.raises(InvalidArgumentError, match="Broken: takes 1 positional argument"):
            broken(1, 2)
        with pytest.raises(TypeError, match="unsupported operand"):
            broken(1)
    finally:
        PUBLIC_OPS.discard("Broken")
