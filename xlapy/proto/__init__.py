"""XLA's protobuf forms of HLO: HloModuleProto, HloProto, HloSnapshot, binary and text.

    m = xlapy.parse_hlo_module_proto(open("module.hlo.pb", "rb").read())  # or text proto
    pb = xlapy.module_to_proto(m)                  # an xla.HloModuleProto message
    data = pb.SerializeToString()
    snap = xlapy.parse_hlo_snapshot(open("snapshot.pb", "rb").read())
    snap.module, snap.arguments                    # Module, [Literal, ...]

The messages are declared in xlapy/proto/schema.py with XLA's field numbers and built
with the ``protobuf`` package (no protoc). ``load_hlo`` (xlapy/proto/files.py) reads any of
the forms, or HLO text, and tells a file that holds no module apart (NotAnHloModuleError).
Errors are ProtoError (an InvalidArgumentError) naming the message path of the problem.
"""

from __future__ import annotations

from dataclasses import dataclass

from xlapy.proto.files import LoadedHlo, NotAnHloModuleError, load_hlo, looks_like_hlo_text
from xlapy.proto.shapes import ProtoError


def _require_protobuf() -> None:
    try:
        import google.protobuf  # noqa: F401
    except ImportError:  # pragma: no cover - protobuf is a dependency of xlapy
        raise ProtoError("reading and writing HLO protos needs the protobuf package "
                         "(pip install protobuf)") from None


def parse_hlo_module_proto(data: bytes | str):
    """The Module held by a serialized (or text-format) HloModuleProto, HloProto,
    HloSnapshot, HloUnoptimizedSnapshot or HloModuleProtoWithConfig."""
    _require_protobuf()
    loaded = load_hlo(data, "proto")
    if loaded.form == "hlo-text":
        raise NotAnHloModuleError("parse_hlo_module_proto: the data is HLO text, not a proto "
                                  "(use xlapy.parse_hlo_module)")
    return loaded.module


@dataclass
class HloSnapshot:
    """An HloSnapshot: the module, its arguments (Literals), the recorded result (or
    None) and the platform it ran on."""

    module: object
    arguments: list
    result: object = None
    execution_platform: str = ""


def parse_hlo_snapshot(data: bytes | str) -> HloSnapshot:
    """Read a serialized (or text-format) HloSnapshot with its arguments."""
    _require_protobuf()
    loaded = load_hlo(data, "snapshot")
    if loaded.message not in ("HloSnapshot", "HloUnoptimizedSnapshot"):
        raise ProtoError(f"parse_hlo_snapshot: the data holds {loaded.message or 'HLO text'}, "
                         f"not an HloSnapshot")
    return HloSnapshot(loaded.module, list(loaded.arguments or []), loaded.result,
                       loaded.execution_platform)


def module_to_proto(module, *, with_config: bool = False):
    """An ``xla.HloModuleProto`` message of ``module`` (``HloModuleProtoWithConfig``, which
    also keeps replica_count and num_partitions, with ``with_config``)."""
    _require_protobuf()
    from xlapy.proto.module import module_to_proto as convert

    return convert(module, with_config=with_config)


def snapshot_to_proto(module, arguments, result=None, execution_platform: str = ""):
    """An ``xla.HloSnapshot`` message: the module (as an HloProto) and its arguments
    (Literals or NumPy arrays, converted to the entry parameters' shapes)."""
    _require_protobuf()
    from xlapy.proto.schema import message_class
    from xlapy.proto.shapes import literal_to_proto

    snap = message_class("HloSnapshot")()
    snap.hlo.hlo_module.CopyFrom(module_to_proto(module))
    params = module.entry.parameters
    if len(arguments) != len(params):
        raise ProtoError(f"snapshot_to_proto: {module.entry.name} takes {len(params)} "
                         f"arguments, got {len(arguments)}")
    for p, arg in zip(params, arguments):
        literal_to_proto(_as_literal(arg, p.shape, f"argument {p.parameter_number}"),
                         snap.arguments.add())
    if result is not None:
        literal_to_proto(_as_literal(result, module.entry.root.shape, "result"), snap.result)
    snap.execution_platform = execution_platform
    return snap


def _as_literal(value, shape, where: str):
    from xlapy.interpreter.values import to_value, value_to_literal
    from xlapy.shape.literal import Literal

    if isinstance(value, Literal):
        return value
    return value_to_literal(to_value(value, shape, f"snapshot_to_proto: {where}"), shape)


def to_text_proto(message) -> str:
    """The protobuf text format of a message (what ``.pbtxt`` files hold)."""
    _require_protobuf()
    from google.protobuf import text_format

    return text_format.MessageToString(message)


__all__ = ["HloSnapshot", "LoadedHlo", "NotAnHloModuleError", "ProtoError", "load_hlo",
           "looks_like_hlo_text", "module_to_proto", "parse_hlo_module_proto",
           "parse_hlo_snapshot", "snapshot_to_proto", "to_text_proto"]
