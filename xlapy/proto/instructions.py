"""One HLO instruction to and from HloInstructionProto.

Owns the mapping between xlapy's attribute values (each opcode's schema, xlapy.opdefs) and
the fields of XLA's HloInstructionProto, as XLA's HloInstruction::ToProto writes them and
CreateFromProto reads them: ``dimensions`` carries broadcast/reduce/transpose dimensions, the
one dimension of all-gather / all-to-all / reduce-scatter / concatenate / sort / iota and
reshape's inferred dimension; called computations go by id in XLA's order (a while loop's
body, then its condition; a conditional's branches; select, then scatter); replica groups
as a CollectiveDeviceListProto (explicit or iota); constants as LiteralProto; shardings,
metadata and frontend attributes in their messages; statistics and result accuracy from
their text.

``encode_instruction(instr, ip, ids)`` fills a proto; ``decode_instruction(ip, operands,
computations, where)`` builds the Instruction through ``xlapy.opdefs.make_instruction`` (so
the shape rule checks it). Fields newer than the hlo.proto xlapy's schema was read from
(convolution_kind, scan's attributes, iota replica groups, origin values) are encoded as
jaxlib 0.10.2's XLA writes them. An attribute xlapy models but that XLA's proto has no field
for (collective-broadcast's has_dynamic_root, a convolution's sparsity_config, topk's
is_stable: jaxlib 0.10.2's XLA parses none of them) cannot be written: ``encode_instruction``
raises ProtoError when one differs from its default rather than dropping it; a field xlapy
does not know in a proto being read is an error too (UNREPRESENTABLE, _IGNORED).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from xlapy.errors import XlaError
from xlapy.hlo.attrs import REQUIRED, ComputationKind, ComputationListKind
from xlapy.hlo.attrs import enums as E
from xlapy.hlo.attrs.collective import (
    CollectiveDeviceList,
    IotaReplicaGroupList,
    SingleDimensionKind,
)
from xlapy.hlo.attrs.custom_call import PaddingType
from xlapy.hlo.attrs.dot import (
    Algorithm,
    DotDimensionNumbers,
    PrecisionConfig,
    RaggedDotDimensionNumbers,
)
from xlapy.hlo.attrs.gather_scatter import GatherDimensionNumbers, ScatterDimensionNumbers
from xlapy.hlo.attrs.padding import PaddingConfig, PaddingDimension
from xlapy.hlo.attrs.slicing import SliceRanges
from xlapy.hlo.attrs.window import ConvolutionDimensionNumbers, Window, WindowDimension
from xlapy.hlo.ir import Instruction
from xlapy.proto.shapes import (
    ProtoError,
    literal_from_proto,
    literal_to_proto,
    shape_from_proto,
    shape_to_proto,
)
from xlapy.proto.sharding import (
    domain_shardings,
    domain_text,
    metadata_from_proto,
    metadata_to_proto,
    sharding_from_proto,
    sharding_to_proto,
)

_ABSENT = object()

#: Attributes XLA's HloInstructionProto has no field for: (opcode, attribute) -> why.
UNREPRESENTABLE = {
    ("collective-broadcast", "has_dynamic_root"): "no field in HloInstructionProto",
    ("convolution", "sparsity_config"): "no field xlapy knows in HloInstructionProto",
    ("topk", "is_stable"): "no field in HloInstructionProto",
}
#: Attributes XLA's text accepts and ignores (not kept by XLA either).
_IGNORED = {"mode"}


# -- helpers -----------------------------------------------------------------------------------


def _copy_dataclass(value, msg) -> None:
    """Fields of a frozen dataclass whose names are the proto's (dimension numbers); the
    message is marked present even when every field is empty, as XLA writes it."""
    msg.SetInParent()
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if isinstance(v, tuple):
            getattr(msg, f.name).extend(v)
        else:
            setattr(msg, f.name, v)


def _read_dataclass(cls, msg):
    values = {}
    for f in dataclasses.fields(cls):
        v = getattr(msg, f.name)
        values[f.name] = tuple(v) if not isinstance(v, (int, float, bool)) else v
    return cls(**values)


def _float32_text_value(x: float) -> float:
    """A proto float (f32) as the double of its shortest decimal (epsilon=0.001 stays 0.001)."""
    return float(str(np.float32(x)))


# -- replica groups ------------------------------------------------------------------------------


def _replica_groups_to_proto(value, ip) -> None:
    """As jaxlib 0.10.2's XLA writes them: explicit groups in collective_device_list, an iota
    list in field 92 (older XLA put it inside collective_device_list; both are read).
    Mesh-axes groups are written as their explicit groups (xlapy does not declare XLA's
    MeshAxesReplicaGroupListProto)."""
    if isinstance(value, IotaReplicaGroupList):
        iota = ip.iota_collective_device_list
        iota.num_replica_groups = value.num_replica_groups
        iota.num_devices_per_group = value.num_devices_per_group
        iota.iota_reshape_dims.extend(value.reshape_dims)
        iota.iota_transpose_perm.extend(value.transpose_perm)
    else:
        dl = ip.collective_device_list
        dl.SetInParent()
        for group in value.expand().groups:
            dl.replica_groups.add().replica_ids.extend(group)


def _iota_groups(iota, where: str) -> IotaReplicaGroupList:
    try:
        return IotaReplicaGroupList(iota.num_replica_groups, iota.num_devices_per_group,
                                    tuple(iota.iota_reshape_dims) or None,
                                    tuple(iota.iota_transpose_perm) or None)
    except XlaError as e:
        raise ProtoError(f"{where}: iota replica groups: {e}") from None


def _replica_groups_from_proto(ip, where: str):
    if ip.HasField("iota_collective_device_list"):
        return _iota_groups(ip.iota_collective_device_list, where)
    if ip.HasField("collective_device_list"):
        dl = ip.collective_device_list
        if dl.HasField("iota_replica_group_list"):
            return _iota_groups(dl.iota_replica_group_list, where)
        return CollectiveDeviceList(tuple(tuple(g.replica_ids) for g in dl.replica_groups))
    return CollectiveDeviceList(tuple(tuple(g.replica_ids) for g in ip.replica_groups))


# -- precision ------------------------------------------------------------------------------------

_PRECISION_NUMBER = {"DEFAULT": 0, "HIGH": 1, "HIGHEST": 2, "PACKED_NIBBLE": 3}
_PRECISION_BY_NUMBER = {v: k for k, v in _PRECISION_NUMBER.items()}
_ALGORITHM_NUMBER = {a.name: i for i, a in enumerate(Algorithm)}


def _precision_to_proto(value: PrecisionConfig, ip) -> None:
    pc = ip.precision_config
    pc.SetInParent()
    pc.operand_precision.extend(_PRECISION_NUMBER[p.name] for p in value.operand_precision)
    pc.algorithm = _ALGORITHM_NUMBER[value.algorithm.name]


def _precision_from_proto(ip, where: str) -> PrecisionConfig:
    pc = ip.precision_config
    precisions = []
    for p in pc.operand_precision:
        if p not in _PRECISION_BY_NUMBER:
            raise ProtoError(f"{where}: unknown operand precision {p}")
        precisions.append(E.Precision[_PRECISION_BY_NUMBER[p]])
    algorithms = list(Algorithm)
    if not 0 <= pc.algorithm < len(algorithms):
        raise ProtoError(f"{where}: unknown dot algorithm {pc.algorithm}")
    return PrecisionConfig(tuple(precisions), algorithms[pc.algorithm])


# -- enums stored by number ----------------------------------------------------------------------

_FFT = ["FFT", "IFFT", "RFFT", "IRFFT"]
_RNG_DIST = {1: "RNG_UNIFORM", 2: "RNG_NORMAL"}
_RNG_ALG = ["RNG_DEFAULT", "RNG_THREE_FRY", "RNG_PHILOX"]
_TRANSPOSE = {1: "NO_TRANSPOSE", 2: "TRANSPOSE", 3: "ADJOINT"}
_PADDING_TYPE = ["PADDING_INVALID", "PADDING_VALID", "PADDING_SAME"]
_SCHEDULE = ["SCHEDULE_NONE", "SCHEDULE_LATEST", "SCHEDULE_EARLIEST"]
_API = ["API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
        "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"]


def _number_of(names, member) -> int:
    if isinstance(names, dict):
        return {v: k for k, v in names.items()}[member.name]
    return names.index(member.name)


def _member(enum_cls, names, number: int, where: str, what: str):
    name = names.get(number) if isinstance(names, dict) else (
        names[number] if 0 <= number < len(names) else None)
    if name is None:
        raise ProtoError(f"{where}: {what} {number} is not a valid value")
    return enum_cls[name]


# -- attribute codecs ----------------------------------------------------------------------------
# Each attribute (by name, with opcode-specific entries first) has an encoder
# ``(value, instr, ip)`` and a decoder ``(ip, instr_opcode, operands, where) -> value|_ABSENT``.


def _set(field):
    def enc(value, instr, ip):
        setattr(ip, field, value)
    return enc


def _get(field):
    def dec(ip, opcode, operands, where):
        return getattr(ip, field)
    return dec


def _enc_dims(value, instr, ip):
    ip.dimensions.extend(value)


def _dec_dims(ip, opcode, operands, where):
    return tuple(ip.dimensions)


def _enc_single_dim(value, instr, ip):
    ip.dimensions.append(value)


def _dec_single_dim(ip, opcode, operands, where):
    if len(ip.dimensions) > 1:
        raise ProtoError(f"{where}: {opcode} takes one dimension, got {list(ip.dimensions)}")
    return ip.dimensions[0] if ip.dimensions else _ABSENT


def _dec_channel(ip, opcode, operands, where):
    return ip.channel_id if ip.channel_id > 0 else _ABSENT


def _enc_bytes(field):
    def enc(value, instr, ip):
        setattr(ip, field, value.encode("utf-8", "surrogateescape"))
    return enc


def _dec_bytes(field):
    def dec(ip, opcode, operands, where):
        return getattr(ip, field).decode("utf-8", "surrogateescape")
    return dec


def _enc_literal(value, instr, ip):
    literal_to_proto(value, ip.literal)


def _dec_literal(ip, opcode, operands, where, shape=None):
    if not ip.HasField("literal"):
        return _ABSENT
    return literal_from_proto(ip.literal, where + ".literal", shape)


def _enc_window(value, instr, ip):
    ip.window.SetInParent()  # XLA requires the window of a convolution, even an empty one
    for d in value.dimensions:
        _copy_dataclass(d, ip.window.dimensions.add())


def _dec_window(ip, opcode, operands, where):
    if not ip.HasField("window"):
        return _ABSENT
    return Window(tuple(_read_dataclass(WindowDimension, d) for d in ip.window.dimensions))


def _enc_conv_dnums(value, instr, ip):
    _copy_dataclass(value, ip.convolution_dimension_numbers)


def _dec_conv_dnums(ip, opcode, operands, where):
    if not ip.HasField("convolution_dimension_numbers"):
        return _ABSENT
    return _read_dataclass(ConvolutionDimensionNumbers, ip.convolution_dimension_numbers)


def _enc_group_count(field):
    def enc(value, instr, ip):
        setattr(ip, field, value)
    return enc


def _dec_group_count(field):
    def dec(ip, opcode, operands, where):
        return getattr(ip, field) or 1
    return dec


def _enc_aliasing(value, instr, ip):
    for output_index, (operand, operand_index) in value:
        entry = ip.output_operand_aliasing.add(operand_index=operand)
        entry.output_shape_index.extend(output_index)
        entry.operand_shape_index.extend(operand_index)


def _dec_aliasing(ip, opcode, operands, where):
    return tuple((tuple(e.output_shape_index), (e.operand_index, tuple(e.operand_shape_index)))
                 for e in ip.output_operand_aliasing)


def _enc_operand_layouts(value, instr, ip):
    ip.constrain_layout = True
    for shape in value:
        shape_to_proto(shape, ip.operand_shapes_with_layout.add())


def _dec_operand_layouts(ip, opcode, operands, where):
    if not ip.constrain_layout:
        return _ABSENT
    return tuple(shape_from_proto(s, f"{where}.operand_shapes_with_layout[{i}]")
                 for i, s in enumerate(ip.operand_shapes_with_layout))


def _enc_enum(field, names):
    def enc(value, instr, ip):
        setattr(ip, field, _number_of(names, value))
    return enc


def _dec_enum(field, enum_cls, names, what):
    def dec(ip, opcode, operands, where):
        return _member(enum_cls, names, getattr(ip, field), where, what)
    return dec


def _enc_options(msg_field, field):
    def enc(value, instr, ip):
        setattr(getattr(ip, msg_field), field, value)
    return enc


def _dec_options(msg_field, field):
    def dec(ip, opcode, operands, where):
        return getattr(getattr(ip, msg_field), field)
    return dec


def _enc_transpose(value, instr, ip):
    ip.triangular_solve_options.transpose_a = _number_of(_TRANSPOSE, value)


def _dec_transpose(ip, opcode, operands, where):
    number = ip.triangular_solve_options.transpose_a
    return _ABSENT if number == 0 else _member(E.Transpose, _TRANSPOSE, number, where,
                                               "transpose_a")


def _enc_source_target(value, instr, ip):
    for source, target in value:
        ip.source_target_pairs.add(source=source, target=target)


def _dec_source_target(ip, opcode, operands, where):
    return tuple((p.source, p.target) for p in ip.source_target_pairs)


def _enc_slice_sizes_list(value, instr, ip):
    for sizes in value:
        ip.dynamic_slice_sizes.extend(sizes)


def _dec_slice_sizes_list(ip, opcode, operands, where):
    """In-place collective-permute: the flat list split by the rank of the input."""
    flat = list(ip.dynamic_slice_sizes)
    if not flat:
        return _ABSENT
    # Each list has one size per dimension of the buffers (the input's first array leaf).
    leaves = [s for _, s in operands[0].shape.leaves() if s.is_array()] if operands else []
    rank = len(leaves[0].dimensions) if leaves else 0
    if rank == 0 or len(flat) % rank:
        raise ProtoError(f"{where}: dynamic_slice_sizes {flat} do not split into lists of "
                         f"{rank} (the input's rank)")
    return tuple(tuple(flat[i:i + rank]) for i in range(0, len(flat), rank))


def _enc_slice(value, instr, ip):
    for start, limit, stride in zip(value.starts, value.limits, value.strides):
        ip.slice_dimensions.add(start=start, limit=limit, stride=stride)


def _dec_slice(ip, opcode, operands, where):
    dims = ip.slice_dimensions
    return SliceRanges(tuple(d.start for d in dims), tuple(d.limit for d in dims),
                       tuple(d.stride for d in dims))


def _enc_padding(value, instr, ip):
    ip.padding_config.SetInParent()
    for d in value.dimensions:
        _copy_dataclass(d, ip.padding_config.dimensions.add())


def _dec_padding(ip, opcode, operands, where):
    return PaddingConfig(tuple(_read_dataclass(PaddingDimension, d)
                               for d in ip.padding_config.dimensions))


def _enc_message(field, write=_copy_dataclass):
    def enc(value, instr, ip):
        write(value, getattr(ip, field))
    return enc


def _dec_message(field, cls):
    def dec(ip, opcode, operands, where):
        if not ip.HasField(field):
            return _ABSENT
        return _read_dataclass(cls, getattr(ip, field))
    return dec


def _enc_ragged(value, instr, ip):
    r = ip.ragged_dot_dimension_numbers
    _copy_dataclass(value.dot_dimension_numbers, r.dot_dimension_numbers)
    r.lhs_ragged_dimensions.extend(value.lhs_ragged_dimensions)
    r.rhs_group_dimensions.extend(value.rhs_group_dimensions)


def _dec_ragged(ip, opcode, operands, where):
    if not ip.HasField("ragged_dot_dimension_numbers"):
        return _ABSENT
    r = ip.ragged_dot_dimension_numbers
    return RaggedDotDimensionNumbers(_read_dataclass(DotDimensionNumbers,
                                                     r.dot_dimension_numbers),
                                     tuple(r.lhs_ragged_dimensions),
                                     tuple(r.rhs_group_dimensions))


def _enc_comparison(field):
    def enc(value, instr, ip):
        setattr(ip, field, value.text)
    return enc


def _dec_comparison(field, enum_cls, what):
    def dec(ip, opcode, operands, where):
        text = getattr(ip, field)
        if not text:
            return _ABSENT
        try:
            return enum_cls(text)
        except ValueError:
            raise ProtoError(f"{where}: unknown {what} {text!r}") from None
    return dec


def _enc_fusion_kind(value, instr, ip):
    ip.fusion_kind = value.text


def _dec_fusion_kind(ip, opcode, operands, where):
    try:
        return E.FusionKind(ip.fusion_kind)
    except ValueError:
        raise ProtoError(f"{where}: unknown fusion_kind {ip.fusion_kind!r}") from None


def _enc_parameter_replication(value, instr, ip):
    ip.parameter_replication.replicated_at_leaf_buffers.extend(value)


def _dec_parameter_replication(ip, opcode, operands, where):
    values = tuple(ip.parameter_replication.replicated_at_leaf_buffers)
    return values if values else _ABSENT


def _enc_cross_program_prefetch(value, instr, ip):
    ip.cross_program_prefetch_index = value


def _dec_cross_program_prefetch(ip, opcode, operands, where):
    if ip.HasField("cross_program_prefetch_index"):
        return ip.cross_program_prefetch_index
    return _ABSENT


def _enc_reshape_inferred(value, instr, ip):
    if value != -1:
        ip.dimensions.append(value)


def _dec_reshape_inferred(ip, opcode, operands, where):
    return ip.dimensions[0] if ip.dimensions else _ABSENT


# XLA keeps a domain's printed ``exit=`` sharding in domain_entry_sharding and its
# ``entry=`` in domain_exit_sharding (as its own serialization shows).
def _enc_domain(value, instr, ip):
    entry, exit_ = domain_shardings(value)
    sharding_to_proto(exit_, ip.domain_entry_sharding)
    sharding_to_proto(entry, ip.domain_exit_sharding)


def _dec_domain(ip, opcode, operands, where):
    if not (ip.HasField("domain_entry_sharding") and ip.HasField("domain_exit_sharding")):
        return _ABSENT
    return domain_text(sharding_from_proto(ip.domain_exit_sharding, where + ".entry"),
                       sharding_from_proto(ip.domain_entry_sharding, where + ".exit"))


def _enc_thread(value, instr, ip):
    ip.async_execution_thread = value


def _dec_thread(ip, opcode, operands, where):
    if opcode != "async-start":
        return _ABSENT  # the chain's thread, printed on its async-start only
    return ip.async_execution_thread or "main"


_CONV_KIND = {0: "UNSET", 1: "FPROP", 2: "DGRAD", 3: "WGRAD"}


def _enc_conv_kind(value, instr, ip):
    ip.convolution_kind = _number_of(_CONV_KIND, value)


def _dec_conv_kind(ip, opcode, operands, where):
    if ip.convolution_field_98:
        raise ProtoError(f"{where}: field 98 of the convolution holds data xlapy does not know "
                         f"how to read")
    from xlapy.hlo.attrs.window import ConvolutionKind

    return _member(ConvolutionKind, _CONV_KIND, ip.convolution_kind, where, "convolution_kind")


def _enc_associative(value, instr, ip):
    ip.is_associative = 1 if value else 2


def _dec_associative(ip, opcode, operands, where):
    return {0: _ABSENT, 1: True, 2: False}.get(ip.is_associative, _ABSENT)


def _dec_epsilon(ip, opcode, operands, where):
    return _float32_text_value(ip.epsilon)


#: name -> (encoder, decoder); ``(opcode, name)`` entries win.
_CODECS = {
    "channel_id": (_set("channel_id"), _dec_channel),
    "replica_groups": (lambda v, i, ip: _replica_groups_to_proto(v, ip),
                       lambda ip, op, ops, where: _replica_groups_from_proto(ip, where)),
    "constrain_layout": (_set("constrain_layout"), _get("constrain_layout")),
    "use_global_device_ids": (_set("use_global_device_ids"), _get("use_global_device_ids")),
    "dimensions": (_enc_dims, _dec_dims),
    "async_execution_thread": (_enc_thread, _dec_thread),
    "output_to_operand_aliasing": (_enc_aliasing, _dec_aliasing),
    "epsilon": (_set("epsilon"), _dec_epsilon),
    "feature_index": (_set("feature_index"), _get("feature_index")),
    "is_composite": (_set("is_composite"), _get("is_composite")),
    "source_target_pairs": (_enc_source_target, _dec_source_target),
    "direction": (_enc_comparison("comparison_direction"),
                  _dec_comparison("comparison_direction", E.ComparisonDirection,
                                  "comparison_direction")),
    "type": (_enc_comparison("comparison_type"),
             _dec_comparison("comparison_type", E.ComparisonType, "comparison_type")),
    "literal": (_enc_literal, _dec_literal),
    "window": (_enc_window, _dec_window),
    "dim_labels": (_enc_conv_dnums, _dec_conv_dnums),
    "feature_group_count": (_enc_group_count("feature_group_count"),
                            _dec_group_count("feature_group_count")),
    "batch_group_count": (_enc_group_count("batch_group_count"),
                          _dec_group_count("batch_group_count")),
    "precision_config": (lambda v, i, ip: _precision_to_proto(v, ip),
                         lambda ip, op, ops, where: _precision_from_proto(ip, where)
                         if ip.HasField("precision_config") else _ABSENT),
    "cross_program_prefetch_index": (_enc_cross_program_prefetch, _dec_cross_program_prefetch),
    "padding_type": (_enc_enum("padding_type", _PADDING_TYPE),
                     _dec_enum("padding_type", PaddingType, _PADDING_TYPE, "padding_type")),
    "custom_call_target": (_set("custom_call_target"), _get("custom_call_target")),
    "operand_layout_constraints": (_enc_operand_layouts, _dec_operand_layouts),
    "custom_call_has_side_effect": (_set("custom_call_has_side_effect"),
                                    _get("custom_call_has_side_effect")),
    "schedule": (_enc_enum("custom_call_schedule", _SCHEDULE),
                 _dec_enum("custom_call_schedule", E.CustomCallSchedule, _SCHEDULE,
                           "custom_call_schedule")),
    "api_version": (_enc_enum("custom_call_api_version", _API),
                    _dec_enum("custom_call_api_version", E.CustomCallApiVersion, _API,
                              "custom_call_api_version")),
    "domain": (_enc_domain, _dec_domain),
    "dot_dimension_numbers": (_enc_message("dot_dimension_numbers"),
                              _dec_message("dot_dimension_numbers", DotDimensionNumbers)),
    "ragged_dot_dimension_numbers": (_enc_ragged, _dec_ragged),
    "dynamic_slice_sizes": (lambda v, i, ip: ip.dynamic_slice_sizes.extend(v),
                            lambda ip, op, ops, where: tuple(ip.dynamic_slice_sizes)),
    "fft_type": (_enc_enum("fft_type", _FFT), _dec_enum("fft_type", E.FftType, _FFT, "fft_type")),
    "fft_length": (lambda v, i, ip: ip.fft_length.extend(v),
                   lambda ip, op, ops, where: tuple(ip.fft_length)),
    "kind": (_enc_fusion_kind, _dec_fusion_kind),
    "gather_dimension_numbers": (_enc_message("gather_dimension_numbers"),
                                 _dec_message("gather_dimension_numbers",
                                              GatherDimensionNumbers)),
    "scatter_dimension_numbers": (_enc_message("scatter_dimension_numbers"),
                                  _dec_message("scatter_dimension_numbers",
                                               ScatterDimensionNumbers)),
    "indices_are_sorted": (_set("indices_are_sorted"), _get("indices_are_sorted")),
    "unique_indices": (_set("unique_indices"), _get("unique_indices")),
    "index": (_set("tuple_index"), _get("tuple_index")),
    "infeed_config": (_enc_bytes("infeed_config"), _dec_bytes("infeed_config")),
    "outfeed_config": (_enc_bytes("outfeed_config"), _dec_bytes("outfeed_config")),
    "outfeed_shape": (lambda v, i, ip: shape_to_proto(v, ip.outfeed_shape),
                      lambda ip, op, ops, where: shape_from_proto(ip.outfeed_shape,
                                                                  where + ".outfeed_shape")
                      if ip.HasField("outfeed_shape") else _ABSENT),
    "iota_dimension": (_enc_single_dim, _dec_single_dim),
    "padding": (_enc_padding, _dec_padding),
    "parameter_number": (_set("parameter_number"), _get("parameter_number")),
    "parameter_replication": (_enc_parameter_replication, _dec_parameter_replication),
    "is_host_transfer": (_set("is_host_transfer"), _get("is_host_transfer")),
    "exponent_bits": (_set("exponent_bits"), _get("exponent_bits")),
    "mantissa_bits": (_set("mantissa_bits"), _get("mantissa_bits")),
    "inferred_dimension": (_enc_reshape_inferred, _dec_reshape_inferred),
    "distribution": (_enc_enum("distribution", _RNG_DIST),
                     _dec_enum("distribution", E.RandomDistribution, _RNG_DIST, "distribution")),
    "algorithm": (_enc_enum("rng_algorithm", _RNG_ALG),
                  _dec_enum("rng_algorithm", E.RandomAlgorithm, _RNG_ALG, "rng_algorithm")),
    "delta": (_set("delta"), _get("delta")),
    "k": (_set("k"), _get("k")),
    "convolution_kind": (_enc_conv_kind, _dec_conv_kind),
    "num_carries": (_set("num_carries"), _get("num_carries")),
    "is_reverse": (_set("is_reverse"), _get("is_reverse")),
    "is_associative": (_enc_associative, _dec_associative),
    "largest": (_set("largest"), _get("largest")),
    "slice": (_enc_slice, _dec_slice),
    "is_stable": (_set("is_stable"), _get("is_stable")),
    "left_side": (_enc_options("triangular_solve_options", "left_side"),
                  _dec_options("triangular_solve_options", "left_side")),
    "unit_diagonal": (_enc_options("triangular_solve_options", "unit_diagonal"),
                      _dec_options("triangular_solve_options", "unit_diagonal")),
    "transpose_a": (_enc_transpose, _dec_transpose),
    ("cholesky", "lower"): (_enc_options("cholesky_options", "lower"),
                            _dec_options("cholesky_options", "lower")),
    ("triangular-solve", "lower"): (_enc_options("triangular_solve_options", "lower"),
                                    _dec_options("triangular_solve_options", "lower")),
    ("gather", "slice_sizes"): (lambda v, i, ip: ip.gather_slice_sizes.extend(v),
                                lambda ip, op, ops, where: tuple(ip.gather_slice_sizes)),
    ("collective-permute", "slice_sizes"): (_enc_slice_sizes_list, _dec_slice_sizes_list),
    ("collective-permute-start", "slice_sizes"): (_enc_slice_sizes_list, _dec_slice_sizes_list),
}


def _codec(opcode: str, name: str):
    return _CODECS.get((opcode, name)) or _CODECS.get(name)


def _single_dimension(spec) -> bool:
    return isinstance(spec.kind, SingleDimensionKind)


# -- called computations -------------------------------------------------------------------------


def called_computation_specs(opdef) -> list[str]:
    """The opcode's computation attributes in the order of XLA's called_computations()."""
    if opdef.opcode == "while":
        return ["body", "condition"]
    return [s.name for s in opdef.attrs
            if isinstance(s.kind, (ComputationKind, ComputationListKind))]


def _called_to_proto(instr: Instruction, ip, comp_ids: dict) -> None:
    for comp in instr.called_computations():
        ip.called_computation_ids.append(comp_ids[id(comp)])


def _called_from_proto(opdef, ip, operands, computations: dict, where: str) -> dict:
    called = []
    for cid in ip.called_computation_ids:
        comp = computations.get(cid)
        if comp is None:
            raise ProtoError(f"{where}: called computation id {cid} is not a computation "
                             f"defined before this one")
        called.append(comp)
    names = called_computation_specs(opdef)
    values: dict = {}
    if opdef.opcode == "conditional":
        pred = operands and operands[0].shape.is_array() and \
            operands[0].shape.element_type.name == "PRED"
        if pred and len(called) == 2:
            values["true_computation"], values["false_computation"] = called
        else:
            values["branch_computations"] = tuple(called)
        return values
    list_specs = [s for s in opdef.attrs if isinstance(s.kind, ComputationListKind)]
    if list_specs:  # custom-call: every id goes to called_computations
        values[list_specs[0].name] = tuple(called)
        return values
    if len(called) > len(names):
        raise ProtoError(f"{where}: {opdef.opcode} calls {len(names)} computation(s), the proto "
                         f"names {len(called)}")
    for name, comp in zip(names, called):
        values[name] = comp
    return values


# -- generic instruction data --------------------------------------------------------------------


def _statistics_to_proto(text: str, ip) -> None:
    body = text.strip()[1:-1]
    for item in filter(None, (s.strip() for s in body.split(","))):
        key, _, value = item.partition("=")
        if key == "visualizing_index":
            ip.statistics_viz.stat_index_to_visualize = int(value)
        else:
            ip.statistics_viz.statistics.add(stat_name=key, stat_val=float(value))


def _g(x: float) -> str:
    """absl::StrCat of a double: %g with 6 significant digits."""
    return f"{x:g}"


def _statistics_from_proto(sv) -> str | None:
    if not sv.statistics:
        return None
    items = [f"visualizing_index={sv.stat_index_to_visualize}"]
    items += [f"{s.stat_name}={_g(s.stat_val)}" for s in sv.statistics]
    return "{" + ",".join(items) + "}"


_TOLERANCE = re.compile(r"\{tolerance=\{atol=([^,]+),rtol=([^,]+),ulps=([^}]+)\}\}")


def _result_accuracy_to_proto(text: str, ip) -> None:
    if text == "{mode=highest}":
        ip.result_accuracy.mode = 1
        return
    m = _TOLERANCE.fullmatch(text)
    if not m:
        raise ProtoError(f"result_accuracy {text}: not a form xlapy can write")
    tol = ip.result_accuracy.tolerance
    tol.atol, tol.rtol, tol.ulps = float(m.group(1)), float(m.group(2)), int(m.group(3))


def _result_accuracy_from_proto(ra) -> str | None:
    which = ra.WhichOneof("specs")
    if which == "mode":
        return "{mode=highest}" if ra.mode == 1 else None
    if which == "tolerance":
        t = ra.tolerance
        return f"{{tolerance={{atol={t.atol:g},rtol={t.rtol:g},ulps={t.ulps}}}}}"
    return None


# -- original values (origin=) -------------------------------------------------------------------


def _origin_to_proto(text: str, shape, ovp) -> None:
    """``{({"a"}, {"b" {1}})}``, ``{{}}`` leaves, ``{[synthetic_call]}``: XLA's text of an
    OriginalValue, one element per leaf that names an original array."""
    from xlapy.hlo.attrs.numbers import read_string
    from xlapy.shape.text import Scanner

    sc = Scanner(text, "origin")
    sc.expect("{", "to start origin")
    sc.skip()
    if sc.eat("[synthetic_call]"):
        ovp.is_synthetic_call = True
    else:
        def tree(index: tuple[int, ...]) -> None:
            sc.skip()
            if sc.eat("("):
                i = 0
                while not sc.eat(")"):
                    tree(index + (i,))
                    i += 1
                    sc.skip()
                    sc.eat(",")
                return
            sc.expect("{", "to start an original value leaf")
            sc.skip()
            if sc.eat("}"):
                return
            name = read_string(sc)
            sc.skip()
            array_index: tuple[int, ...] = ()
            if sc.peek() == "{":
                from xlapy.hlo.attrs import read_int_list

                array_index = read_int_list(sc)
            sc.expect("}", "to end an original value leaf")
            element = ovp.elements.add()
            element.shape_index.extend(index)
            element.original_array.instruction_name = name
            element.original_array.shape_index.extend(array_index)

        tree(())
    sc.expect("}", "to end origin")


def _origin_from_proto(ovp, shape) -> str:
    from xlapy.hlo.attrs.numbers import c_escape

    if ovp.is_synthetic_call:
        return "{[synthetic_call]}"
    leaves = {tuple(e.shape_index): e.original_array for e in ovp.elements}

    def tree(s, index: tuple[int, ...]) -> str:
        if s.is_tuple():
            return "(" + ", ".join(tree(t, index + (i,)) for i, t in enumerate(s.tuple_shapes)) \
                + ")"
        array = leaves.get(index)
        if array is None:
            return "{}"
        out = '{"' + c_escape(array.instruction_name) + '"'
        if array.shape_index:
            out += " {" + ",".join(str(i) for i in array.shape_index) + "}"
        return out + "}"

    return "{" + tree(shape, ()) + "}"


# -- the instruction -----------------------------------------------------------------------------


def encode_instruction(instr: Instruction, ip, instr_ids: dict, comp_ids: dict,
                       payloads: dict[str, int] | None = None) -> None:
    """Fill HloInstructionProto ``ip`` from ``instr``; ``instr_ids``/``comp_ids`` map
    ``id(object)`` to the proto ids of instructions and computations."""
    from xlapy.opdefs import get_opdef

    opdef = get_opdef(instr.opcode)
    ip.name = instr.name
    ip.opcode = instr.opcode
    shape_to_proto(instr.shape, ip.shape)
    ip.id = instr_ids[id(instr)]
    ip.operand_ids.extend(instr_ids[id(o)] for o in instr.operands)
    ip.control_predecessor_ids.extend(instr_ids[id(p)] for p in instr.control_predecessors)
    _called_to_proto(instr, ip, comp_ids)
    where = f"%{instr.name}"
    computation_specs = set(called_computation_specs(opdef))
    for spec in opdef.attrs:
        if spec.name in computation_specs or spec.name in _IGNORED:
            continue
        value = instr.attrs.get(spec.name)
        if value is None:
            continue
        reason = UNREPRESENTABLE.get((instr.opcode, spec.name))
        if reason is not None:
            if spec.default is REQUIRED or value != spec.default:
                raise ProtoError(f"{where}: {instr.opcode} attribute {spec.name}="
                                 f"{spec.kind.to_text(value)} cannot be written to a proto "
                                 f"({reason})")
            continue
        codec = _codec(instr.opcode, spec.name)
        if _single_dimension(spec):
            codec = (_enc_single_dim, _dec_single_dim)
        if codec is None:
            raise ProtoError(f"{where}: no proto field for {instr.opcode} attribute "
                             f"'{spec.name}'")
        codec[0](value, instr, ip)
    if instr.metadata is not None and not instr.metadata.is_empty():
        try:
            metadata_to_proto(instr.metadata, ip.metadata, payloads)
        except ProtoError as e:
            raise ProtoError(f"{where}: {e}") from None
    if instr.frontend_attributes:
        for key, value in instr.frontend_attributes.items():
            ip.frontend_attributes.map[key] = value
    if instr.sharding is not None:
        sharding_to_proto(instr.sharding, ip.sharding)
    if instr.backend_config:
        ip.backend_config = instr.backend_config.encode("utf-8", "surrogateescape")
    extras = instr.extras
    if "statistics" in extras:
        _statistics_to_proto(extras["statistics"], ip)
    if "result_accuracy" in extras:
        _result_accuracy_to_proto(extras["result_accuracy"], ip)
    if "origin" in extras:
        _origin_to_proto(extras["origin"], instr.shape, ip.original_value)


def decode_instruction(ip, operands: list[Instruction], computations: dict,
                       where: str, payloads: list[str] | None = None) -> Instruction:
    """The Instruction of HloInstructionProto ``ip`` (operands already decoded)."""
    from google.protobuf import unknown_fields

    from xlapy.hlo.opcodes import OPCODE_NAMES
    from xlapy.opdefs import get_opdef, make_instruction

    unknown = sorted({f.field_number for f in unknown_fields.UnknownFieldSet(ip)})
    if unknown:
        raise ProtoError(f"{where}: HloInstructionProto field(s) {unknown} are not fields xlapy "
                         f"knows (a newer XLA?); refusing to drop them")
    opcode = ip.opcode
    if opcode not in OPCODE_NAMES:
        raise ProtoError(f"{where}: unknown opcode {opcode!r}")
    try:
        opdef = get_opdef(opcode)
    except XlaError as e:
        raise ProtoError(f"{where}: {e}") from None
    if not ip.HasField("shape"):
        raise ProtoError(f"{where}: the instruction has no shape")
    shape = shape_from_proto(ip.shape, where + ".shape")
    values = _called_from_proto(opdef, ip, operands, computations, where)
    computation_specs = set(called_computation_specs(opdef))
    for spec in opdef.attrs:
        if spec.name in computation_specs or spec.name in _IGNORED \
                or (opcode, spec.name) in UNREPRESENTABLE:
            continue
        if _single_dimension(spec):
            value = _dec_single_dim(ip, opcode, operands, where)
        elif spec.name == "literal":
            value = _dec_literal(ip, opcode, operands, where,
                                 shape if opcode == "constant" else None)
        else:
            codec = _codec(opcode, spec.name)
            if codec is None:
                raise ProtoError(f"{where}: no proto field for {opcode} attribute "
                                 f"'{spec.name}'")
            value = codec[1](ip, opcode, operands, where)
        if value is _ABSENT:
            continue
        if not spec.required and _same(value, spec.default) and spec.default is not None:
            continue
        values[spec.name] = value
    data: dict = {}
    if ip.HasField("metadata"):
        try:
            meta = metadata_from_proto(ip.metadata, payloads)
        except ProtoError as e:
            raise ProtoError(f"{where}.metadata: {e}") from None
        if meta != type(meta)():
            data["metadata"] = meta
    if ip.frontend_attributes.map:
        data["frontend_attributes"] = dict(ip.frontend_attributes.map)
    if ip.HasField("sharding"):
        data["sharding"] = sharding_from_proto(ip.sharding, where + ".sharding")
    if ip.backend_config:
        data["backend_config"] = ip.backend_config.decode("utf-8", "surrogateescape")
    extras = {}
    stats = _statistics_from_proto(ip.statistics_viz)
    if stats is not None:
        extras["statistics"] = stats
    if ip.HasField("result_accuracy"):
        text = _result_accuracy_from_proto(ip.result_accuracy)
        if text is not None:
            extras["result_accuracy"] = text
    if ip.HasField("original_value"):
        extras["origin"] = _origin_from_proto(ip.original_value, shape)
    if extras:
        data["extras"] = extras
    try:
        return make_instruction(opcode, operands, values, shape=shape, name=ip.name or opcode,
                                **data)
    except XlaError as e:
        raise ProtoError(f"{where}: {e}") from None


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (ValueError, TypeError):
        return False


__all__ = ["UNREPRESENTABLE", "called_computation_specs", "decode_instruction",
           "encode_instruction"]
