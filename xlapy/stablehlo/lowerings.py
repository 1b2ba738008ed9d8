"""One rule per StableHLO op: how XLA's translation (``mlir_hlo_to_hlo.cc``'s
``ExportXlaOp`` and the XlaBuilder calls it makes) turns it into HLO instructions.

Owns ``LOWERINGS`` (op name -> rule) and ``UNSUPPORTED`` (ops XLA's translation rejects,
with the reason). A rule reads the op's attributes (in either syntax: the custom syntax's
reader in ``pretty`` gives them their generic names) and emits instructions through the
``Lowering`` of ``convert``. Facts carried over from XLA: ``convert`` of complex to real
takes the real part first; ``broadcast_in_dim`` with unsorted dimensions transposes first,
and size-1 operand dimensions that expand are reshaped away (XlaBuilder::BroadcastInDim);
splat constants of 32 or more elements are a scalar constant and a broadcast;
``all_to_all`` with split != concat dimension is an all-to-all plus reshape/transpose/
reshape (XlaBuilder::AllToAllArray); ``create_token`` is ``after-all()``; ``send``/``recv``
become send/send-done and recv/recv-done; ``infeed`` returns ((data...), token);
custom calls keep ``backend_config`` (a string, or with ``mhlo.backend_config`` or
api_version 4 the dictionary's MLIR text, as typed-FFI calls carry it), operand/result
layouts and aliasing; ``ApproxTopK`` lowers to its sort-based CPU form; a composite is a
``call`` with ``is_composite=true`` and the composite.* frontend attributes; dynamic ops
whose shape operands are constants and whose result is static become their static ops
(what StableHLO's shape refinement leaves for XLA).
"""

from __future__ import annotations

import numpy as np

from xlapy.shape import Shape, dtypes
from xlapy.shape.literal import Literal
from xlapy.stablehlo import mlir as M
from xlapy.stablehlo.convert import (
    CONSTANT_OPS,
    LocatedError,
    Lowering,
    a_bool,
    a_bools,
    a_enum,
    a_float,
    a_int,
    a_ints,
    a_matrix,
    a_str,
    attr,
    enum_of,
    implicit_operands,
    ints_of,
    struct_of,
)
from xlapy.stablehlo.values import dense_array, element_type, shape_of


def _ints(xs) -> str:
    return "{" + ",".join(str(int(x)) for x in xs) + "}"


def _groups(rows) -> str:
    return "{" + ",".join(_ints(r) for r in rows) + "}"


# -- elementwise ---------------------------------------------------------------------------

_UNARY = {
    "abs": "abs", "cbrt": "cbrt", "ceil": "ceil", "count_leading_zeros": "count-leading-zeros",
    "cosine": "cosine", "exponential": "exponential",
    "exponential_minus_one": "exponential-minus-one", "floor": "floor", "imag": "imag",
    "is_finite": "is-finite", "log": "log", "log_plus_one": "log-plus-one",
    "logistic": "logistic", "not": "not", "negate": "negate", "popcnt": "popcnt",
    "real": "real", "round_nearest_afz": "round-nearest-afz",
    "round_nearest_even": "round-nearest-even", "rsqrt": "rsqrt", "sign": "sign",
    "sine": "sine", "sqrt": "sqrt", "tan": "tan", "tanh": "tanh",
}
_BINARY = {
    "add": "add", "atan2": "atan2", "complex": "complex", "divide": "divide",
    "maximum": "maximum", "minimum": "minimum", "multiply": "multiply", "power": "power",
    "remainder": "remainder", "shift_left": "shift-left",
    "shift_right_arithmetic": "shift-right-arithmetic",
    "shift_right_logical": "shift-right-logical", "subtract": "subtract", "and": "and",
    "or": "or", "xor": "xor", "select": "select", "clamp": "clamp",
}


def _result_accuracy(low: Lowering, op: M.Op) -> dict:
    a = op.attrs.get("result_accuracy")
    if a is None:
        return {}
    f = struct_of(low.conv, a, f"{op.name}: result_accuracy")
    mode = f.get("mode")
    mode = enum_of(mode, "result_accuracy mode") if isinstance(mode, M.Attr) else (mode or
                                                                                     "DEFAULT")
    if mode == "DEFAULT":
        return {}
    if mode == "HIGHEST":
        text = "{mode=highest}"
    else:
        text = (f"{{tolerance={{atol={f.get('atol', 0.0):g},rtol={f.get('rtol', 0.0):g},"
                f"ulps={int(f.get('ulps', 0))}}}}}")
    from xlapy.hlo.attrs.result_accuracy import read_result_accuracy
    from xlapy.shape.text import Scanner

    canonical = read_result_accuracy(Scanner(text, "result_accuracy"))
    return {"extras": {"result_accuracy": canonical}} if canonical else {}


def _unary(opcode):
    def rule(low: Lowering, op: M.Op):
        data = low.op_data(opcode)
        data.update(_result_accuracy(low, op))
        x = low.get(op.operands[0], op)
        from xlapy.stablehlo import complex_math

        if complex_math.applies(op.name, x.shape.element_type) and "extras" not in data:
            from xlapy.stablehlo.chlo import Ex

            out = complex_math.EXPANSIONS[op.name](Ex(low, x))
            low.values[id(op.results[0])] = out.inst
            return
        low.bind(op, low.make(opcode, low.operands(op), shape=low.result_shape(op),
                              data=data))
    return rule


def _binary(opcode):
    def rule(low: Lowering, op: M.Op):
        low.bind(op, low.make(opcode, low.operands(op), shape=low.result_shape(op)))
    return rule


def _convert(low: Lowering, op: M.Op):
    (x,) = low.operands(op)
    out = low.result_shape(op)
    if dtypes.is_complex(x.shape.element_type) and not dtypes.is_complex(out.element_type):
        x = low.make("real", [x])  # XlaBuilder::ConvertElementType
    low.bind(op, low.make("convert", [x], shape=out))


def _compare(low: Lowering, op: M.Op):
    texts = {"direction": a_enum(op, "comparison_direction")}
    ctype = a_enum(op, "compare_type", None)
    if ctype is not None and ctype != "NOTYPE":
        texts["type"] = ctype
    low.bind(op, low.make("compare", low.operands(op), texts=texts, shape=low.result_shape(op)))


# -- constants, shapes ---------------------------------------------------------------------


def _constant(low: Lowering, op: M.Op):
    value = attr(op, "value")
    if not isinstance(value, M.DenseAttr):
        if isinstance(value, (M.IntAttr, M.FloatAttr, M.BoolAttr)):
            t = op.results[0].type
            arr = np.asarray(value.value, dtype=_dtype(t.elem, value.pos))
            low.bind(op, low.make("constant", [], {"literal": Literal.from_array(
                arr, Shape.scalar(element_type(t.elem)))}, shape=low.result_shape(op)))
            return
        raise LocatedError(f"{op.name}: expected a dense<...> value, got {value.text}", value.pos)
    try:
        arr = dense_array(value, low.conv.p.resources)
    except LocatedError:
        raise
    except Exception as e:  # noqa: BLE001 - element conversion errors of every kind
        raise LocatedError(f"{op.name}: {e}", value.pos) from None
    shape = shape_of(value.type)
    splat = isinstance(value.payload, M.Element) or (
        isinstance(value.payload, str) and arr.size > 1 and (arr.reshape(-1) == arr.flat[0]).all()
        and len(value.payload) - 2 == 2 * dtypes.byte_width(shape.element_type))
    if splat and arr.size >= 32:  # stablehlo-prepare-for-hlo-export: splats broadcast
        scalar = low.make("constant", [], {"literal": Literal.from_array(
            np.asarray(arr.flat[0]), Shape.scalar(shape.element_type))},
            shape=Shape.scalar(shape.element_type))
        low.bind(op, low.make("broadcast", [scalar], {"dimensions": ()}, shape=shape))
        return
    low.bind(op, low.make("constant", [], {"literal": Literal.from_array(arr, shape)},
                          shape=shape))


def _dtype(elem: str, pos: int):
    try:
        return dtypes.to_dtype(element_type(elem))
    except Exception as e:  # noqa: BLE001
        raise LocatedError(str(e), pos) from None


def _iota(low, op):
    low.bind(op, low.make("iota", [], {"iota_dimension": a_int(op, "iota_dimension")},
                          shape=low.result_shape(op)))


def _reshape(low, op):
    low.bind(op, low.make("reshape", low.operands(op), shape=low.result_shape(op)))


def _transpose(low, op):
    low.bind(op, low.make("transpose", low.operands(op),
                          {"dimensions": a_ints(op, "permutation")}, shape=low.result_shape(op)))


def broadcast_in_dim(low: Lowering, x, dims, out: Shape):
    """XlaBuilder::BroadcastInDim after stablehlo-prepare-for-hlo-export."""
    dims = list(dims)
    if dims != sorted(dims):
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        x = low.make("transpose", [x], {"dimensions": order})
        dims = sorted(dims)
    if len(dims) != x.shape.rank:
        raise LocatedError(f"broadcast_in_dim: {len(dims)} broadcast dimensions for an operand "
                           f"of rank {x.shape.rank}", low.cur_op.pos if low.cur_op else 0)
    keep = [i for i, d in enumerate(dims)
            if not (x.shape.dimensions[i] == 1 and out.rank > d >= 0
                    and out.dimensions[d] != 1)]
    if len(keep) != len(dims):
        kept_dims = [x.shape.dimensions[i] for i in keep]
        x = low.make("reshape", [x], shape=Shape.array(x.shape.element_type, kept_dims))
        dims = [dims[i] for i in keep]
    return low.make("broadcast", [x], {"dimensions": tuple(dims)}, shape=out)


def _broadcast_in_dim(low, op):
    (x,) = low.operands(op)
    low.bind(op, broadcast_in_dim(low, x, a_ints(op, "broadcast_dimensions"),
                                  low.result_shape(op)))


def _broadcast(low, op):
    (x,) = low.operands(op)
    sizes = a_ints(op, "broadcast_sizes")
    dims = tuple(range(len(sizes), len(sizes) + x.shape.rank))
    low.bind(op, low.make("broadcast", [x], {"dimensions": dims}, shape=low.result_shape(op)))


def _slice(low, op):
    starts = a_ints(op, "start_indices")
    limits = a_ints(op, "limit_indices")
    strides = a_ints(op, "strides", (1,) * len(starts))
    text = "{" + ", ".join(f"[{a}:{b}:{c}]" for a, b, c in zip(starts, limits, strides)) + "}"
    low.bind(op, low.make("slice", low.operands(op), texts={"slice": text},
                          shape=low.result_shape(op)))


def _dynamic_slice(low, op):
    low.bind(op, low.make("dynamic-slice", low.operands(op),
                          {"dynamic_slice_sizes": a_ints(op, "slice_sizes")},
                          shape=low.result_shape(op)))


def _simple(opcode):
    def rule(low, op):
        low.bind(op, low.make(opcode, low.operands(op), shape=low.result_shape(op)))
    return rule


def _concatenate(low, op):
    low.bind(op, low.make("concatenate", low.operands(op),
                          {"dimensions": (a_int(op, "dimension"),)}, shape=low.result_shape(op)))


def _pad(low, op):
    lo, hi = a_ints(op, "edge_padding_low"), a_ints(op, "edge_padding_high")
    interior = a_ints(op, "interior_padding")
    text = "x".join(f"{a}_{b}_{c}" if c else f"{a}_{b}" for a, b, c in zip(lo, hi, interior))
    low.bind(op, low.make("pad", low.operands(op), texts={"padding": text or "{}"},
                          shape=low.result_shape(op)))


def _reverse(low, op):
    low.bind(op, low.make("reverse", low.operands(op), {"dimensions": a_ints(op, "dimensions")},
                          shape=low.result_shape(op)))


def _get_tuple_element(low, op):
    low.bind(op, low.make("get-tuple-element", low.operands(op), {"index": a_int(op, "index")},
                          shape=low.result_shape(op)))


def _tuple(low, op):
    low.bind(op, low.make("tuple", low.operands(op), shape=low.result_shape(op)))


def _optimization_barrier(low, op):
    xs = low.operands(op)
    if not xs:
        return
    low.bind(op, low.make("opt-barrier", [low.tuple_if_many(xs)],
                          shape=low.result_shape(op)))


def _reduce_precision(low, op):
    low.bind(op, low.make("reduce-precision", low.operands(op),
                          {"exponent_bits": a_int(op, "exponent_bits"),
                           "mantissa_bits": a_int(op, "mantissa_bits")},
                          shape=low.result_shape(op)))


def _get_dimension_size(low, op):
    low.bind(op, low.make("get-dimension-size", low.operands(op),
                          {"dimensions": (a_int(op, "dimension"),)},
                          shape=low.result_shape(op)))


def _set_dimension_size(low, op):
    # The declared result type decides whether the dimension stays dynamic: a constant size
    # equal to the static size is XLA's RemoveDynamicDimension, a static result.
    x, size = low.operands(op)
    low.bind(op, low.make("set-dimension-size", [x, size],
                          {"dimensions": (a_int(op, "dimension"),)}, shape=low.result_shape(op)))


# -- contractions ----------------------------------------------------------------------------


def _precision_text(low, op) -> dict:
    a = op.attrs.get("precision_config")
    if a is None or (isinstance(a, M.ArrayAttr) and not a.items):
        return {}
    if not isinstance(a, M.ArrayAttr):
        raise LocatedError(f"{op.name}: precision_config must be a list", a.pos)
    values = [enum_of(x, f"{op.name}: precision_config").lower() for x in a.items]
    return {"operand_precision": "{" + ",".join(values) + "}"}


_ALGORITHMS = {
    ("f16", "f16", "f16", 1, 1, 1): "dot_f16_f16_f16",
    ("f16", "f16", "f32", 1, 1, 1): "dot_f16_f16_f32",
    ("bf16", "bf16", "bf16", 1, 1, 1): "dot_bf16_bf16_bf16",
    ("bf16", "bf16", "f32", 1, 1, 1): "dot_bf16_bf16_f32",
    ("bf16", "bf16", "f32", 1, 1, 3): "dot_bf16_bf16_f32_x3",
    ("bf16", "bf16", "f32", 1, 1, 6): "dot_bf16_bf16_f32_x6",
    ("bf16", "bf16", "f32", 1, 1, 9): "dot_bf16_bf16_f32_x9",
    ("tf32", "tf32", "f32", 1, 1, 1): "dot_tf32_tf32_f32",
    ("tf32", "tf32", "f32", 1, 1, 3): "dot_tf32_tf32_f32_x3",
    ("f32", "f32", "f32", 1, 1, 1): "dot_f32_f32_f32",
    ("f64", "f64", "f64", 1, 1, 1): "dot_f64_f64_f64",
}


def _algorithm_text(low, op) -> dict:
    a = op.attrs.get("algorithm")
    if a is None:
        return {}
    f = struct_of(low.conv, a, f"{op.name}: algorithm")
    key = (f.get("lhs_precision_type"), f.get("rhs_precision_type"), f.get("accumulation_type"),
           f.get("lhs_component_count", 1), f.get("rhs_component_count", 1),
           f.get("num_primitive_operations", 1))
    name = _ALGORITHMS.get(key)
    if name is None and str(key[0]).startswith("f8") and str(key[1]).startswith("f8") \
            and key[2] == "f32":
        name = ("dot_any_f8_any_f8_f32_fast_accum" if f.get("allow_imprecise_accumulation")
                else "dot_any_f8_any_f8_f32")
    if name is None:
        raise LocatedError(f"{op.name}: this dot algorithm has no XLA equivalent: {a.text}", a.pos)
    return {"algorithm": name}


def _dot_general(low, op):
    f = struct_of(low.conv, attr(op, "dot_dimension_numbers"), f"{op.name}: dot_dimension_numbers")
    texts = {"lhs_batch_dims": _ints(f.get("lhs_batching_dimensions", ())),
             "rhs_batch_dims": _ints(f.get("rhs_batching_dimensions", ())),
             "lhs_contracting_dims": _ints(f.get("lhs_contracting_dimensions", ())),
             "rhs_contracting_dims": _ints(f.get("rhs_contracting_dimensions", ()))}
    texts.update(_precision_text(low, op))
    texts.update(_algorithm_text(low, op))
    low.bind(op, low.make("dot", low.operands(op), texts=texts, shape=low.result_shape(op)))


def _dot(low, op):
    lhs, rhs = low.operands(op)
    texts = {"lhs_contracting_dims": _ints([max(lhs.shape.rank - 1, 0)]),
             "rhs_contracting_dims": "{0}"}
    texts.update(_precision_text(low, op))
    low.bind(op, low.make("dot", [lhs, rhs], texts=texts, shape=low.result_shape(op)))


def window_text(sizes, strides=None, padding=None, lhs_dilate=None, rhs_dilate=None,
                reversal=None) -> str:
    n = len(sizes)
    parts = ["size=" + "x".join(map(str, sizes))]
    if strides and any(s != 1 for s in strides):
        parts.append("stride=" + "x".join(map(str, strides)))
    if padding and any(p != (0, 0) for p in padding):
        parts.append("pad=" + "x".join(f"{a}_{b}" for a, b in padding))
    if lhs_dilate and any(d != 1 for d in lhs_dilate):
        parts.append("lhs_dilate=" + "x".join(map(str, lhs_dilate)))
    if rhs_dilate and any(d != 1 for d in rhs_dilate):
        parts.append("rhs_dilate=" + "x".join(map(str, rhs_dilate)))
    if reversal and any(reversal):
        parts.append("rhs_reversal=" + "x".join("1" if r else "0" for r in reversal))
    return "{" + " ".join(parts) + "}" if n else "{}"


def _dim_labels(f: dict) -> str:
    def labels(rank, batch, feature, spatial, b, fch):
        out = ["?"] * rank
        out[batch] = b
        out[feature] = fch
        for i, d in enumerate(spatial):
            out[d] = str(i)
        return "".join(out)
    n = len(f["input_spatial_dimensions"])
    lhs = labels(n + 2, f["input_batch_dimension"], f["input_feature_dimension"],
                 f["input_spatial_dimensions"], "b", "f")
    rhs = labels(n + 2, f["kernel_input_feature_dimension"], f["kernel_output_feature_dimension"],
                 f["kernel_spatial_dimensions"], "i", "o")
    out = labels(n + 2, f["output_batch_dimension"], f["output_feature_dimension"],
                 f["output_spatial_dimensions"], "b", "f")
    return f"{lhs}_{rhs}->{out}"


def _convolution(low, op):
    lhs, rhs = low.operands(op)
    f = struct_of(low.conv, attr(op, "dimension_numbers"), f"{op.name}: dimension_numbers")
    try:
        spatial = f["kernel_spatial_dimensions"]
        sizes = [rhs.shape.dimensions[d] for d in spatial]
        labels = _dim_labels(f)
    except (KeyError, IndexError):
        raise LocatedError(f"{op.name}: bad dimension numbers for operands {lhs.shape} and "
                           f"{rhs.shape}", op.pos) from None
    n = len(sizes)
    window = window_text(sizes, a_ints(op, "window_strides", (1,) * n), a_matrix(op, "padding", n),
                         a_ints(op, "lhs_dilation", (1,) * n), a_ints(op, "rhs_dilation", (1,) * n),
                         a_bools(op, "window_reversal", (False,) * n))
    texts = {"dim_labels": labels}
    if n:
        texts["window"] = window
    texts.update(_precision_text(low, op))
    values = {"feature_group_count": a_int(op, "feature_group_count", 1),
              "batch_group_count": a_int(op, "batch_group_count", 1)}
    low.bind(op, low.make("convolution", [lhs, rhs], values, texts=texts,
                          shape=low.result_shape(op)))


# -- regions ---------------------------------------------------------------------------------


def _computation(low, op, index=0, prefix="region"):
    return low.conv.region(low, op.regions[index], op, prefix=prefix)


def _reduce(low, op):
    body = _computation(low, op)
    low.cur_op = op
    low.bind(op, low.make("reduce", low.operands(op),
                          {"dimensions": a_ints(op, "dimensions"), "to_apply": body},
                          shape=low.result_shape(op)))


def _reduce_window(low, op):
    body = _computation(low, op)
    low.cur_op = op
    sizes = a_ints(op, "window_dimensions")
    n = len(sizes)
    window = window_text(sizes, a_ints(op, "window_strides", (1,) * n), a_matrix(op, "padding", n),
                         a_ints(op, "base_dilations", (1,) * n),
                         a_ints(op, "window_dilations", (1,) * n))
    low.bind(op, low.make("reduce-window", low.operands(op), {"to_apply": body},
                          texts={"window": window} if n else None, shape=low.result_shape(op)))


def _select_and_scatter(low, op):
    select = _computation(low, op, 0)
    scatter = _computation(low, op, 1)
    low.cur_op = op
    operand = low.get(op.operands[0], op)
    n = operand.shape.rank
    sizes = a_ints(op, "window_dimensions", (1,) * n)
    window = window_text(sizes, a_ints(op, "window_strides", (1,) * n), a_matrix(op, "padding", n))
    low.bind(op, low.make("select-and-scatter", low.operands(op),
                          {"select": select, "scatter": scatter},
                          texts={"window": window} if n else None, shape=low.result_shape(op)))


def _sort(low, op):
    comparator = _computation(low, op)
    low.cur_op = op
    low.bind(op, low.make("sort", low.operands(op),
                          {"dimensions": (a_int(op, "dimension", -1),),
                           "is_stable": a_bool(op, "is_stable"), "to_apply": comparator},
                          shape=low.result_shape(op)))


def _map(low, op):
    comp = _computation(low, op)
    low.cur_op = op
    low.bind(op, low.make("map", low.operands(op),
                          {"dimensions": a_ints(op, "dimensions"), "to_apply": comp},
                          shape=low.result_shape(op)))


def _gather(low, op):
    f = struct_of(low.conv, attr(op, "dimension_numbers"), f"{op.name}: dimension_numbers")
    texts = {"offset_dims": _ints(f.get("offset_dims", ())),
             "collapsed_slice_dims": _ints(f.get("collapsed_slice_dims", ())),
             "start_index_map": _ints(f.get("start_index_map", ())),
             "operand_batching_dims": _ints(f.get("operand_batching_dims", ())),
             "start_indices_batching_dims": _ints(f.get("start_indices_batching_dims", ())),
             "index_vector_dim": str(f.get("index_vector_dim", 0))}
    low.bind(op, low.make("gather", low.operands(op),
                          {"slice_sizes": a_ints(op, "slice_sizes"),
                           "indices_are_sorted": a_bool(op, "indices_are_sorted")},
                          texts=texts, shape=low.result_shape(op)))


def _scatter(low, op):
    update = _computation(low, op)
    low.cur_op = op
    f = struct_of(low.conv, attr(op, "scatter_dimension_numbers"),
                  f"{op.name}: scatter_dimension_numbers")
    texts = {"update_window_dims": _ints(f.get("update_window_dims", ())),
             "inserted_window_dims": _ints(f.get("inserted_window_dims", ())),
             "scatter_dims_to_operand_dims": _ints(f.get("scatter_dims_to_operand_dims", ())),
             "input_batching_dims": _ints(f.get("input_batching_dims", ())),
             "scatter_indices_batching_dims": _ints(f.get("scatter_indices_batching_dims", ())),
             "index_vector_dim": str(f.get("index_vector_dim", 0))}
    xs = low.operands(op)
    n = (len(xs) - 1) // 2
    operands = xs[:n] + [xs[n]] + xs[n + 1:]  # inputs, indices, updates (HLO's order)
    low.bind(op, low.make("scatter", operands,
                          {"indices_are_sorted": a_bool(op, "indices_are_sorted"),
                           "unique_indices": a_bool(op, "unique_indices"), "to_apply": update},
                          texts=texts, shape=low.result_shape(op)))


def _while(low, op):
    implicit = implicit_operands(op.regions, low)
    body = low.conv.region(low, op.regions[1], op, implicit=implicit, implicit_results=implicit,
                           single_arg=True)
    cond = low.conv.region(low, op.regions[0], op, implicit=implicit, single_arg=True)
    low.cur_op = op
    operands = low.operands(op) + [low.get(v, op) for v in implicit]
    state = low.tuple_if_many(operands)
    w = low.make("while", [state], {"condition": cond, "body": body})
    if len(operands) == 1:
        low.values[id(op.results[0])] = w
        return
    for i, v in enumerate(op.results):
        low.values[id(v)] = low.make("get-tuple-element", [w], {"index": i})


def _branches(low, op, regions):
    comps, args = [], []
    for region in regions:
        implicit = implicit_operands([region], low)
        comps.append(low.conv.region(low, region, op, implicit=implicit, single_arg=True))
        low.cur_op = op
        vals = [low.get(v, op) for v in implicit]
        args.append(low.make("tuple", vals) if len(vals) != 1 else vals[0])
    return comps, args


def _if(low, op):
    (pred,) = low.operands(op)
    comps, args = _branches(low, op, op.regions)
    low.cur_op = op
    low.bind(op, low.make("conditional", [pred] + args,
                          {"true_computation": comps[0], "false_computation": comps[1]},
                          shape=low.result_shape(op) if op.results else None))


def _case(low, op):
    (index,) = low.operands(op)
    comps, args = _branches(low, op, op.regions)
    low.cur_op = op
    cond = low.make("conditional", [index] + args, {"branch_computations": tuple(comps)},
                    shape=low.result_shape(op) if op.results else None)
    if op.results:
        low.bind(op, cond)


# -- calls, custom calls -------------------------------------------------------------------


def _call(low, op):
    callee = attr(op, "callee")
    comp = low.conv.function(callee.name, callee.pos)
    low.cur_op = op
    data = low.op_data("call")
    fe = dict(data.get("frontend_attributes", {}))
    backend_config = fe.pop("backend_config", None)
    if "frontend_attributes" in data:
        data["frontend_attributes"] = fe
    if backend_config:
        data["backend_config"] = backend_config
    inst = low.make("call", low.operands(op), {"to_apply": comp},
                    shape=low.result_shape(op) if op.results else None, data=data)
    if op.results:
        low.bind(op, inst)


def _composite(low, op):
    callee = attr(op, "decomposition")
    comp = low.conv.function(callee.name, callee.pos)
    low.cur_op = op
    data = low.op_data("call")
    fe = dict(data.get("frontend_attributes", {}))
    ca = op.attrs.get("composite_attributes")
    fe["composite.attributes"] = ca.text if ca is not None else "{}"
    fe["composite.name"] = a_str(op, "name")
    fe["composite.version"] = str(a_int(op, "version", 0))
    data["frontend_attributes"] = fe
    inst = low.make("call", low.operands(op), {"to_apply": comp, "is_composite": True},
                    shape=low.result_shape(op) if op.results else None, data=data)
    if op.results:
        low.bind(op, inst)


_API_VERSIONS = {0: "API_VERSION_UNSPECIFIED", 1: "API_VERSION_ORIGINAL",
                 2: "API_VERSION_STATUS_RETURNING", 3: "API_VERSION_STATUS_RETURNING_UNIFIED",
                 4: "API_VERSION_TYPED_FFI"}


def _layout_shape(t: M.MType, layout: M.Attr, what: str) -> Shape:
    shape = shape_of(t)
    m2m = ints_of(layout, what)
    if shape.is_array():
        from xlapy.shape import Layout

        return shape.with_layout(Layout(tuple(m2m)))
    return shape


def _custom_call(low, op):
    target = a_str(op, "call_target_name")
    if target == "ApproxTopK":
        return _approx_top_k(low, op)
    values: dict = {"custom_call_target": target}
    texts: dict = {}
    data = low.op_data("custom-call")
    fe = data.get("frontend_attributes", {})
    version = op.attrs.get("api_version")
    api = 1
    if isinstance(version, M.IntAttr):
        api = version.value
    elif version is not None:
        name = enum_of(version, f"{op.name}: api_version")
        api = {v: k for k, v in _API_VERSIONS.items()}.get(name, -1)
    if api not in _API_VERSIONS:
        raise LocatedError(f"{op.name}: unknown api_version {version.text}", version.pos)
    bc = op.attrs.get("backend_config")
    mbc = op.attrs.get("mhlo.backend_config")
    config = ""
    if isinstance(mbc, M.DictAttr):  # jax's typed-FFI calls: the dictionary is the config
        api = 4
        config = mbc.text
    elif isinstance(bc, M.DictAttr):
        config = bc.text
    elif isinstance(bc, M.StrAttr):
        config = bc.value
    elif bc is not None:
        raise LocatedError(f"{op.name}: backend_config must be a string or a dictionary",
                           bc.pos)
    if api != 1:
        texts["api_version"] = _API_VERSIONS[api]
    if config:
        data["backend_config"] = config
    if fe:
        data["frontend_attributes"] = fe
    values["custom_call_has_side_effect"] = a_bool(op, "has_side_effect")
    called = op.attrs.get("called_computations")
    if isinstance(called, M.ArrayAttr) and called.items:
        values["called_computations"] = tuple(
            low.conv.function(s.name, s.pos) for s in called.items)
        low.cur_op = op
    shape = low.result_shape(op) if op.results else Shape.tuple(())
    operand_layouts = op.attrs.get("operand_layouts")
    result_layouts = op.attrs.get("result_layouts")
    if isinstance(operand_layouts, M.ArrayAttr) and isinstance(result_layouts, M.ArrayAttr):
        shapes = [_layout_shape(v.type, lay, f"{op.name}: operand_layouts")
                  for v, lay in zip(op.operands, operand_layouts.items)]
        values["operand_layout_constraints"] = tuple(shapes)
        outs = [_layout_shape(v.type, lay, f"{op.name}: result_layouts")
                for v, lay in zip(op.results, result_layouts.items)]
        shape = outs[0] if len(outs) == 1 else Shape.tuple(outs)
    aliases = op.attrs.get("output_operand_aliases")
    if isinstance(aliases, M.ArrayAttr) and aliases.items:
        parts = []
        for a in aliases.items:
            f = struct_of(low.conv, a, f"{op.name}: output_operand_aliases")
            parts.append(f"{_ints(f.get('output_tuple_indices', ()))}: "
                         f"({f.get('operand_index', 0)}, "
                         f"{_ints(f.get('operand_tuple_indices', ()))})")
        texts["output_to_operand_aliasing"] = "{" + ", ".join(parts) + "}"
    inst = low.make("custom-call", low.operands(op), values, texts=texts, shape=shape, data=data)
    if op.results:
        low.bind(op, inst)


def _approx_top_k(low, op):
    """XLA's ApproxTopK custom call: on CPU (and with is_fallback) a sort of the inputs
    along the reduction dimension with the comparator, then the first k (ApproxTopKFallback
    with aggregate_to_topk; the result size is the declared one)."""
    cfg = op.attrs.get("mhlo.backend_config") or op.attrs.get("backend_config")
    if not isinstance(cfg, M.DictAttr):
        raise LocatedError(f"{op.name}: ApproxTopK needs a backend_config dictionary", op.pos)
    items = cfg.items
    try:
        dim = items["reduction_dim"].value
    except (KeyError, AttributeError):
        raise LocatedError(f"{op.name}: ApproxTopK: Missing reduction_dim attribute in "
                           "backend_config", cfg.pos) from None
    called = attr(op, "called_computations")
    comparator = low.conv.function(called.items[0].name, called.items[0].pos)
    low.cur_op = op
    xs = low.operands(op)
    n = len(xs) // 2
    inputs = xs[:n]
    sort_shape = Shape.tuple(x.shape for x in inputs) if n > 1 else inputs[0].shape
    sorted_ = low.make("sort", inputs, {"dimensions": (dim,), "to_apply": comparator},
                       shape=sort_shape)
    outs = []
    for i, v in enumerate(op.results):
        part = sorted_ if n == 1 else low.make("get-tuple-element", [sorted_], {"index": i})
        out = shape_of(v.type)
        text = "{" + ", ".join(f"[0:{d}:1]" for d in out.dimensions) + "}"
        outs.append(low.make("slice", [part], texts={"slice": text}, shape=out))
    for v, inst in zip(op.results, outs):
        low.values[id(v)] = inst


# -- collectives, communication ------------------------------------------------------------


def _collective_values(low, op, with_groups=True) -> tuple[dict, dict]:
    values, texts = {}, {}
    if with_groups:
        groups = op.attrs.get("replica_groups")
        if groups is None:
            texts["replica_groups"] = "{}"
        elif isinstance(groups, M.DenseAttr):
            arr = dense_array(groups)
            rows = [] if arr.size == 0 else [tuple(r) for r in arr.reshape(arr.shape[0], -1)]
            # -1 pads rows of unequal length (XLA's ConvertReplicaGroups drops them)
            texts["replica_groups"] = _groups([[x for x in r if x >= 0] for r in rows])
        else:
            raise LocatedError(f"{op.name}: replica_groups must be a dense integer tensor "
                               f"(mesh-axes replica groups are not supported)", groups.pos)
    ch = op.attrs.get("channel_handle")
    if ch is not None:
        f = struct_of(low.conv, ch, f"{op.name}: channel_handle")
        if f.get("handle", 0) > 0:
            values["channel_id"] = f["handle"]
    if a_bool(op, "use_global_device_ids"):
        values["use_global_device_ids"] = True
    return values, texts


def _all_reduce(low, op):
    body = _computation(low, op)
    low.cur_op = op
    values, texts = _collective_values(low, op)
    values["to_apply"] = body
    low.bind(op, low.make("all-reduce", low.operands(op), values, texts=texts,
                          shape=low.result_shape(op)))


def _all_gather(low, op):
    values, texts = _collective_values(low, op)
    values["dimensions"] = (a_int(op, "all_gather_dim"),)
    low.bind(op, low.make("all-gather", low.operands(op), values, texts=texts,
                          shape=low.result_shape(op)))


def _reduce_scatter(low, op):
    body = _computation(low, op)
    low.cur_op = op
    values, texts = _collective_values(low, op)
    values.update({"to_apply": body, "dimensions": (a_int(op, "scatter_dimension"),)})
    low.bind(op, low.make("reduce-scatter", low.operands(op), values, texts=texts,
                          shape=low.result_shape(op)))


def _all_to_all(low, op):
    values, texts = _collective_values(low, op)
    xs = low.operands(op)
    if len(xs) > 1:
        low.bind(op, low.make("all-to-all", xs, values, texts=texts,
                              shape=low.result_shape(op)))
        return
    (x,) = xs
    split, concat = a_int(op, "split_dimension"), a_int(op, "concat_dimension")
    count = a_int(op, "split_count")
    values["dimensions"] = (split,)
    a2a = low.make("all-to-all", [x], values, texts=texts, shape=x.shape)
    if split == concat:
        low.bind(op, a2a)
        return
    # XlaBuilder::AllToAllArray: the received blocks (sender-major along the split
    # dimension) are moved to the concat dimension.
    dims = list(x.shape.dimensions)
    sizes = []
    for i, d in enumerate(dims):
        sizes += [count, d // count] if i == split else [d]
    r = low.make("reshape", [a2a], shape=Shape.array(x.shape.element_type, sizes))
    perm = []
    for i in range(len(dims)):
        after = i + 1 if i >= split else i
        if i == concat:
            perm.append(split)
        perm.append(after)
    t = low.make("transpose", [r], {"dimensions": tuple(perm)})
    low.bind(op, low.make("reshape", [t], shape=low.result_shape(op)))


def _collective_permute(low, op):
    values, _ = _collective_values(low, op, with_groups=False)
    pairs = a_matrix(op, "source_target_pairs", 0)
    low.bind(op, low.make("collective-permute", low.operands(op), values,
                          texts={"source_target_pairs": _groups(pairs)},
                          shape=low.result_shape(op)))


def _collective_broadcast(low, op):
    values, texts = _collective_values(low, op)
    values.pop("use_global_device_ids", None)
    if a_bool(op, "has_dynamic_root"):
        values["has_dynamic_root"] = True
    low.bind(op, low.make("collective-broadcast", low.operands(op), values, texts=texts,
                          shape=low.result_shape(op)))


def _replica_id(opcode):
    def rule(low, op):
        low.bind(op, low.make(opcode, [], shape=low.result_shape(op)))
    return rule


def _after_all(low, op):
    low.bind(op, low.make("after-all", low.operands(op), shape=Shape.token()))


def _infeed(low, op):
    (token,) = low.operands(op)
    data_shapes = [shape_of(v.type) for v in op.results[:-1]]
    config = a_str(op, "infeed_config", "")
    layout = op.attrs.get("layout")
    if isinstance(layout, M.ArrayAttr):
        from xlapy.shape import Layout

        for i, lay in enumerate(layout.items):
            if i < len(data_shapes) and isinstance(lay, M.ArrayAttr) and data_shapes[i].rank:
                data_shapes[i] = data_shapes[i].with_layout(
                    Layout(ints_of(lay, f"{op.name}: layout")))
    shape = Shape.tuple([Shape.tuple(data_shapes), Shape.token()])
    inf = low.make("infeed", [token], {"infeed_config": config} if config else None, shape=shape)
    if data_shapes:
        data = low.make("get-tuple-element", [inf], {"index": 0})
        for i, v in enumerate(op.results[:-1]):
            low.values[id(v)] = low.make("get-tuple-element", [data], {"index": i})
    low.values[id(op.results[-1])] = low.make("get-tuple-element", [inf], {"index": 1})


def _outfeed(low, op):
    xs = low.operands(op)
    token = xs[-1]
    data = low.make("tuple", xs[:-1])
    config = a_str(op, "outfeed_config", "")
    values = {"outfeed_shape": data.shape}
    if config:
        values["outfeed_config"] = config
    low.bind(op, low.make("outfeed", [data, token], values, shape=Shape.token()))


def _channel(low, op) -> dict:
    f = struct_of(low.conv, attr(op, "channel_handle"), f"{op.name}: channel_handle")
    values = {"channel_id": f.get("handle", 0)}
    if a_bool(op, "is_host_transfer"):
        values["is_host_transfer"] = True
    return values


def _source_target_data(low, op) -> dict:
    data = low.op_data("send")
    pairs = op.attrs.get("source_target_pairs")
    if pairs is not None:
        rows = a_matrix(op, "source_target_pairs", 0)
        if rows:
            fe = dict(data.get("frontend_attributes", {}))
            fe["_xla_send_recv_source_target_pairs"] = _groups(rows)
            data["frontend_attributes"] = fe
    return data


def _send(low, op):
    xs = low.operands(op)
    token = xs[-1]
    payload = low.tuple_if_many(xs[:-1])
    values = _channel(low, op)
    data = _source_target_data(low, op)
    send = low.make("send", [payload, token], values, data=data)
    low.bind(op, low.make("send-done", [send], values, data=data))


def _recv(low, op):
    (token,) = low.operands(op)
    shapes = [shape_of(v.type) for v in op.results[:-1]]
    data_shape = shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)
    values = _channel(low, op)
    data = _source_target_data(low, op)
    recv = low.make("recv", [token], values, data=data,
                    shape=Shape.tuple([data_shape, Shape.scalar(dtypes.PrimitiveType.U32),
                                       Shape.token()]))
    done = low.make("recv-done", [recv], values, data=data)
    payload = low.make("get-tuple-element", [done], {"index": 0})
    if len(shapes) == 1:
        low.values[id(op.results[0])] = payload
    else:
        for i, v in enumerate(op.results[:-1]):
            low.values[id(v)] = low.make("get-tuple-element", [payload], {"index": i})
    low.values[id(op.results[-1])] = low.make("get-tuple-element", [done], {"index": 1})


# -- linear algebra, rng, fft, batch norm ---------------------------------------------------


def _cholesky(low, op):
    low.bind(op, low.make("cholesky", low.operands(op), {"lower": a_bool(op, "lower")},
                          shape=low.result_shape(op)))


def _triangular_solve(low, op):
    low.bind(op, low.make("triangular-solve", low.operands(op),
                          {"left_side": a_bool(op, "left_side"), "lower": a_bool(op, "lower"),
                           "unit_diagonal": a_bool(op, "unit_diagonal")},
                          texts={"transpose_a": a_enum(op, "transpose_a", "NO_TRANSPOSE")},
                          shape=low.result_shape(op)))


def _fft(low, op):
    low.bind(op, low.make("fft", low.operands(op), {"fft_length": a_ints(op, "fft_length")},
                          texts={"fft_type": a_enum(op, "fft_type")}, shape=low.result_shape(op)))


def _rng(low, op):
    a, b, _shape = low.operands(op)
    dist = a_enum(op, "rng_distribution")
    low.bind(op, low.make("rng", [a, b], texts={"distribution": f"rng_{dist.lower()}"},
                          shape=low.result_shape(op)))


def _rng_bit_generator(low, op):
    algo = a_enum(op, "rng_algorithm")
    text = {"DEFAULT": "rng_default", "THREE_FRY": "rng_three_fry",
            "PHILOX": "rng_philox"}.get(algo)
    if text is None:
        raise LocatedError(f"{op.name}: unknown rng_algorithm {algo}", op.pos)
    low.bind(op, low.make("rng-bit-generator", low.operands(op), texts={"algorithm": text},
                          shape=low.result_shape(op)))


def _batch_norm(opcode):
    def rule(low, op):
        low.bind(op, low.make(opcode, low.operands(op),
                              {"epsilon": a_float(op, "epsilon"),
                               "feature_index": a_int(op, "feature_index")},
                              shape=low.result_shape(op)))
    return rule


# -- dynamic ops with constant shapes -------------------------------------------------------


def _constant_value(low, op, index: int, what: str) -> np.ndarray:
    v = op.operands[index]
    owner = v.owner
    if not (isinstance(owner, M.Op) and owner.name in CONSTANT_OPS):
        raise LocatedError(f"{op.name}: the {what} must be a constant for HLO (XLA exports "
                           "only static or bounded shapes)", op.pos)
    return dense_array(owner.attrs["value"], low.conv.p.resources)


def _static_result(op) -> None:
    t = op.results[0].type
    if isinstance(t, M.TensorType) and any(d is None for d in t.dims):
        raise LocatedError(f"{op.name}: the result type {t} is not static", op.pos)


def _dynamic_broadcast_in_dim(low, op):
    _static_result(op)
    x = low.get(op.operands[0], op)
    low.bind(op, broadcast_in_dim(low, x, a_ints(op, "broadcast_dimensions"),
                                  low.result_shape(op)))


def _dynamic_iota(low, op):
    _static_result(op)
    _constant_value(low, op, 0, "output shape")
    _iota(low, op)


def _dynamic_reshape(low, op):
    _static_result(op)
    x = low.get(op.operands[0], op)
    low.bind(op, low.make("reshape", [x], shape=low.result_shape(op)))


def _dynamic_pad(low, op):
    _static_result(op)
    lo = _constant_value(low, op, 2, "edge_padding_low")
    hi = _constant_value(low, op, 3, "edge_padding_high")
    interior = _constant_value(low, op, 4, "interior_padding")
    x, v = low.get(op.operands[0], op), low.get(op.operands[1], op)
    text = "x".join(f"{a}_{b}_{c}" if c else f"{a}_{b}" for a, b, c in zip(lo, hi, interior))
    low.bind(op, low.make("pad", [x, v], texts={"padding": text or "{}"},
                          shape=low.result_shape(op)))


def _real_dynamic_slice(low, op):
    _static_result(op)
    starts = _constant_value(low, op, 1, "start_indices")
    limits = _constant_value(low, op, 2, "limit_indices")
    strides = _constant_value(low, op, 3, "strides")
    x = low.get(op.operands[0], op)
    text = "{" + ", ".join(f"[{a}:{b}:{c}]" for a, b, c in zip(starts, limits, strides)) + "}"
    low.bind(op, low.make("slice", [x], texts={"slice": text}, shape=low.result_shape(op)))


def _dynamic_gather(low, op):
    _static_result(op)
    sizes = _constant_value(low, op, 2, "slice_sizes")
    op.attrs.setdefault("slice_sizes", M.DenseArrayAttr("i64", tuple(int(s) for s in sizes)))
    saved = op.operands
    op.operands = saved[:2]
    try:
        _gather(low, op)
    finally:
        op.operands = saved


def _dynamic_conv(low, op):
    _static_result(op)
    pad = _constant_value(low, op, 2, "padding")
    op.attrs.setdefault("padding", M.ArrayAttr([M.DenseArrayAttr("i64", tuple(int(x) for x in r))
                                                for r in pad.reshape(-1, 2)]))
    saved = op.operands
    op.operands = saved[:2]
    try:
        _convolution(low, op)
    finally:
        op.operands = saved


# -- other dialects --------------------------------------------------------------------------


def _tensor_cast(low, op):
    t = op.operands[0].type
    if isinstance(t, M.TensorType) and any(d is None for d in t.dims) and t.bounds is None:
        raise LocatedError(f"{op.name}: requires static or bounded operand for HLO translation",
                           op.pos)
    low.values[id(op.results[0])] = low.get(op.operands[0], op)


def _sharding_constraint(low, op):
    data = low.op_data("custom-call")
    fe = dict(data.get("frontend_attributes", {}))
    sharding = op.attrs["sharding"]
    fe.pop("xla.sdy.sharding", None)
    fe["xla.sdy.sharding"] = "#sdy.sharding_per_value<[" + sharding.text[len("#sdy.sharding"):] \
        + "]>"
    data["frontend_attributes"] = fe
    from xlapy.stablehlo.convert import sdy_to_hlo_sharding

    hlo = sdy_to_hlo_sharding(low.conv, sharding)
    if hlo is not None:
        data["sharding"] = hlo
    low.bind(op, low.make("custom-call", low.operands(op), {"custom_call_target": "Sharding"},
                          shape=low.result_shape(op), data=data))


# -- Shardy ops as XLA's round-trip export writes them into HLO (sdy_round_trip/export_ops.cc,
# shard_map_export.cc); xlapy.passes.spmd.sdy_import reads that form back.


def _sdy_attr_text(op, key: str) -> str:
    a = attr(op, key)
    if isinstance(a, M.StrAttr):
        return a.value
    return a.text


def _sdy_marker(target: str, key: str, fe_key: str, enum: str):
    """``sdy.sharding_group`` / ``sdy.propagation_barrier``: a side-effecting custom call of
    ``target`` on the operand, the op's attribute ``key`` kept as the frontend attribute
    ``fe_key`` in MLIR's text (``0 : i64``, ``#sdy<propagation_direction BACKWARD>``: XLA's
    ShardingGroupPattern / PropagationBarrierPattern)."""

    def lower(low, op):
        data = low.op_data("custom-call")
        fe = dict(data.get("frontend_attributes", {}))
        a = attr(op, key)
        if isinstance(a, M.IntAttr):
            fe[fe_key] = f"{a.value} : i64" if a.text.strip().lstrip("-").isdigit() \
                else a.text
        elif isinstance(a, M.EnumAttr):
            fe[fe_key] = f"#sdy<{enum} {a.value}>"
        else:
            fe[fe_key] = a.text
        data["frontend_attributes"] = fe
        shape = low.result_shape(op) if op.results else Shape.tuple(())
        inst = low.make("custom-call", low.operands(op),
                        {"custom_call_target": target, "custom_call_has_side_effect": True},
                        shape=shape, data=data)
        if op.results:
            low.bind(op, inst)

    return lower


def _manual_computation(low, op):
    """``sdy.manual_computation`` (a shard_map) as XLA's export writes it: a custom call
    ``xla.sdy.GlobalToLocalShape`` from the global operands to the body's local ones (with
    ``xla.sdy.in_shardings`` and ``xla.sdy.manual_axes``), a ``call`` of the body as a
    computation named ``xla.sdy.manual_computation_body`` (not inlineable), and a custom
    call ``xla.sdy.LocalToGlobalShape`` back to the global results (``xla.sdy.out_shardings``)."""
    conv = low.conv
    data = low.op_data("custom-call")
    base = dict(data.get("frontend_attributes", {}))
    in_s = _sdy_attr_text(op, "in_shardings")
    out_s = _sdy_attr_text(op, "out_shardings")
    axes = _sdy_attr_text(op, "manual_axes")
    body_block = op.regions[0][0]
    local_in = [conv.shape(a.type, a.pos) for a in body_block.args]
    if len(local_in) != len(op.operands):
        raise LocatedError(f"{op.name}: {len(op.operands)} operands but the body takes "
                           f"{len(local_in)} arguments", op.pos)

    def boundary(target: str, operands, shapes, fe_key: str, fe_value: str):
        d = dict(data)
        d["frontend_attributes"] = {**base, fe_key: fe_value, "xla.sdy.manual_axes": axes}
        shape = shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)
        inst = low.make("custom-call", operands, {"custom_call_target": target,
                                                  "custom_call_has_side_effect": True},
                        shape=shape, data=d)
        if len(shapes) == 1:
            return [inst]
        return [low.make("get-tuple-element", [inst], {"index": i}, data={})
                for i in range(len(shapes))]

    operands = low.operands(op)
    if operands:
        operands = boundary("xla.sdy.GlobalToLocalShape", operands, local_in,
                            "xla.sdy.in_shardings", in_s)
    body = conv.region(low, op.regions[0], op, prefix="xla.sdy.manual_computation_body")
    low.cur_op = op
    local_out = [leaf for leaf in (body.root.shape.tuple_shapes if len(op.results) != 1
                                   else (body.root.shape,))]
    call_data = dict(data)
    call_data["frontend_attributes"] = {**base, "inlineable": "false"}
    call = low.make("call", operands, {"to_apply": body},
                    shape=local_out[0] if len(local_out) == 1 else Shape.tuple(local_out),
                    data=call_data)
    if not op.results:
        return
    locals_ = [call] if len(local_out) == 1 else [
        low.make("get-tuple-element", [call], {"index": i}, data={})
        for i in range(len(local_out))]
    results = boundary("xla.sdy.LocalToGlobalShape", locals_,
                       [conv.shape(v.type, op.pos) for v in op.results],
                       "xla.sdy.out_shardings", out_s)
    for v, inst in zip(op.results, results):
        low.values[id(v)] = inst


LOWERINGS = {f"stablehlo.{k}": _unary(v) for k, v in _UNARY.items()}
LOWERINGS.update({f"stablehlo.{k}": _binary(v) for k, v in _BINARY.items()})
LOWERINGS.update({
    "stablehlo.convert": _convert,
    "stablehlo.compare": _compare,
    "stablehlo.constant": _constant,
    "arith.constant": _constant,
    "chlo.constant": _constant,
    "stablehlo.iota": _iota,
    "stablehlo.reshape": _reshape,
    "stablehlo.transpose": _transpose,
    "stablehlo.broadcast_in_dim": _broadcast_in_dim,
    "stablehlo.broadcast": _broadcast,
    "stablehlo.slice": _slice,
    "stablehlo.dynamic_slice": _dynamic_slice,
    "stablehlo.dynamic_update_slice": _simple("dynamic-update-slice"),
    "stablehlo.bitcast_convert": _simple("bitcast-convert"),
    "stablehlo.concatenate": _concatenate,
    "stablehlo.pad": _pad,
    "stablehlo.reverse": _reverse,
    "stablehlo.get_tuple_element": _get_tuple_element,
    "stablehlo.tuple": _tuple,
    "stablehlo.optimization_barrier": _optimization_barrier,
    "stablehlo.reduce_precision": _reduce_precision,
    "stablehlo.get_dimension_size": _get_dimension_size,
    "stablehlo.set_dimension_size": _set_dimension_size,
    "stablehlo.dot_general": _dot_general,
    "stablehlo.dot": _dot,
    "stablehlo.convolution": _convolution,
    "stablehlo.reduce": _reduce,
    "stablehlo.reduce_window": _reduce_window,
    "stablehlo.select_and_scatter": _select_and_scatter,
    "stablehlo.sort": _sort,
    "stablehlo.map": _map,
    "stablehlo.gather": _gather,
    "stablehlo.scatter": _scatter,
    "stablehlo.while": _while,
    "stablehlo.if": _if,
    "stablehlo.case": _case,
    "func.call": _call,
    "stablehlo.composite": _composite,
    "stablehlo.custom_call": _custom_call,
    "stablehlo.all_reduce": _all_reduce,
    "stablehlo.all_gather": _all_gather,
    "stablehlo.reduce_scatter": _reduce_scatter,
    "stablehlo.all_to_all": _all_to_all,
    "stablehlo.collective_permute": _collective_permute,
    "stablehlo.collective_broadcast": _collective_broadcast,
    "stablehlo.replica_id": _replica_id("replica-id"),
    "stablehlo.partition_id": _replica_id("partition-id"),
    "stablehlo.after_all": _after_all,
    "stablehlo.create_token": _after_all,
    "stablehlo.infeed": _infeed,
    "stablehlo.outfeed": _outfeed,
    "stablehlo.send": _send,
    "stablehlo.recv": _recv,
    "stablehlo.cholesky": _cholesky,
    "stablehlo.triangular_solve": _triangular_solve,
    "stablehlo.fft": _fft,
    "stablehlo.rng": _rng,
    "stablehlo.rng_bit_generator": _rng_bit_generator,
    "stablehlo.batch_norm_training": _batch_norm("batch-norm-training"),
    "stablehlo.batch_norm_inference": _batch_norm("batch-norm-inference"),
    "stablehlo.batch_norm_grad": _batch_norm("batch-norm-grad"),
    "stablehlo.dynamic_broadcast_in_dim": _dynamic_broadcast_in_dim,
    "stablehlo.dynamic_iota": _dynamic_iota,
    "stablehlo.dynamic_reshape": _dynamic_reshape,
    "stablehlo.dynamic_pad": _dynamic_pad,
    "stablehlo.real_dynamic_slice": _real_dynamic_slice,
    "stablehlo.dynamic_gather": _dynamic_gather,
    "stablehlo.dynamic_conv": _dynamic_conv,
    "tensor.cast": _tensor_cast,
    "sdy.sharding_constraint": _sharding_constraint,
    "sdy.reshard": _sharding_constraint,
    "sdy.sharding_group": _sdy_marker("xla.sdy.ShardingGroup", "group_id",
                                       "xla.sdy.sharding_group_id", ""),
    "sdy.propagation_barrier": _sdy_marker("xla.sdy.PropagationBarrier", "allowed_direction",
                                            "xla.sdy.allowed_direction",
                                            "propagation_direction"),
    "sdy.manual_computation": _manual_computation,
})

#: Ops XLA's translation does not export, with the reason.
UNSUPPORTED = {
    "stablehlo.uniform_quantize": "quantized types have no HLO form (XLA does not export "
                                  "uniform_quantize either)",
    "stablehlo.uniform_dequantize": "quantized types have no HLO form (XLA does not export "
                                    "uniform_dequantize either)",
    "stablehlo.einsum": "einsum has no HLO op (XLA does not export it)",
    "stablehlo.unary_einsum": "unary_einsum has no HLO op (XLA does not export it)",
    "stablehlo.torch_index_select": "XLA does not export torch_index_select",
    "stablehlo.cross-replica-sum": "XLA does not export cross-replica-sum",
    "stablehlo.async_start": "async_start/async_done are not supported by xlapy's import",
    "stablehlo.async_done": "async_start/async_done are not supported by xlapy's import",
    "stablehlo.collective_reduce": "collective_reduce has no HLO op in this XLA version",
    "func.constant": "func.constant has no HLO form",
}
