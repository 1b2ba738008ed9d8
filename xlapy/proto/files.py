"""Reading an HLO file whatever its form: HLO text, a binary or text protobuf
(HloModuleProto, HloProto as ``--xla_dump_hlo_as_proto`` writes it, HloSnapshot,
HloUnoptimizedSnapshot, HloModuleProtoWithConfig), or something else.

Owns: ``load_hlo(data, name)`` -> ``LoadedHlo`` (the module, the arguments a snapshot
brings, what the file was) and ``NotAnHloModuleError``, raised for a file that holds no
module at all (XLA's dump folders keep buffer assignments, memory reports, debug options,
LLVM IR and object files next to the modules), so a caller running a glob can skip it.

Detection: bytes that decode as UTF-8 without NUL bytes are text: HLO text when they open
with ``HloModule`` or ``ENTRY``, else a text proto when one of the messages parses them
(``text_format``), else HLO text if it parses as such; other bytes (without the byte count
XLA puts in front of an unoptimized snapshot) are a
binary proto when one of the messages parses them with no unknown field at its top levels
and holds computations (a random file parsing as some message by accident would need to
pass both).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xlapy.hlo.ir import Module
from xlapy.proto.schema import TOP_LEVEL_MESSAGES, descriptor_pool, message_class
from xlapy.proto.shapes import ProtoError, literal_from_proto
from xlapy.shape.literal import Literal


class NotAnHloModuleError(ProtoError):
    """The data holds no HLO module (neither HLO text nor one of XLA's module protos)."""


@dataclass
class LoadedHlo:
    """What ``load_hlo`` read: the module, the snapshot's arguments (None for a file
    without them), its recorded result, and the form (``hlo-text``, ``binary-proto`` or
    ``text-proto``) and message (``HloSnapshot``, ``HloProto``...) it came in."""

    module: Module
    arguments: list[Literal] | None = None
    result: Literal | None = None
    form: str = "hlo-text"
    message: str = ""
    execution_platform: str = ""
    partitions: list[list[Literal]] = field(default_factory=list)


_HLO_TEXT = re.compile(r"\A\s*(?:HloModule|ENTRY)\b")


def looks_like_hlo_text(text: str) -> bool:
    """The text opens like an HLO module: its ``HloModule`` header or an ``ENTRY``
    computation (headerless text that starts with another computation is recognised by
    parsing it, after the text-proto attempt)."""
    return bool(_HLO_TEXT.match(_strip_comments(text)))


def _strip_comments(text: str) -> str:
    return re.sub(r"\A(?:\s*//[^\n]*\n|\s*/\*.*?\*/)*", "", text, flags=re.DOTALL)


def _decode_text(data: bytes) -> str | None:
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def load_hlo(data: bytes | str, name: str = "input") -> LoadedHlo:
    """Read HLO text or an HLO protobuf (binary or text). Raises NotAnHloModuleError for
    data that is neither, ParseError / ProtoError for a module that is malformed."""
    if isinstance(data, str):
        text = data
    elif isinstance(data, (bytes, bytearray, memoryview)):
        text = _decode_text(bytes(data))
    else:
        raise ProtoError(f"load_hlo: expected bytes or str, got {type(data).__name__}")
    if text is not None:
        if not text.strip():
            raise NotAnHloModuleError(f"{name}: not an HLO module (the file is empty)")
        if looks_like_hlo_text(text):
            from xlapy.parser import parse_hlo_module

            return LoadedHlo(parse_hlo_module(text), form="hlo-text")
        from xlapy.stablehlo import is_stablehlo_text, parse_stablehlo

        if is_stablehlo_text(text):
            return LoadedHlo(parse_stablehlo(text), form="stablehlo-text")
        found = _first_loadable(_parse_text_proto(text), "text-proto", name)
        if found is not None:
            return found
        from xlapy.errors import ParseError
        from xlapy.parser import parse_hlo_module

        try:  # text that does not open like HLO may still be HLO (or say why it is not)
            return LoadedHlo(parse_hlo_module(text), form="hlo-text")
        except ParseError as e:
            first = str(e).splitlines()[0]
        raise NotAnHloModuleError(
            f"{name}: not an HLO module (text that is neither HLO text ({first}) nor a text "
            f"proto of {', '.join(TOP_LEVEL_MESSAGES)})")
    data = bytes(data)
    found = _first_loadable(_parse_binary(_undelimited(data)), "binary-proto", name)
    if found is None:
        found = _delimited_snapshot(data, name)
    if found is None:
        raise NotAnHloModuleError(
            f"{name}: not an HLO module (binary data that is not a serialized "
            f"{', '.join(TOP_LEVEL_MESSAGES)})")
    return found


def _first_loadable(candidates, form: str, name: str) -> LoadedHlo | None:
    """The first candidate message that reads as a module (messages share wire layouts: an
    HloModuleProtoWithConfig also parses as an HloUnoptimizedSnapshot whose 'arguments' are
    nonsense); when none does, the first one's error (the file is a broken module)."""
    first_error = None
    for msg in candidates:
        try:
            return _loaded(msg, form, name)
        except ProtoError as e:
            first_error = first_error or e
    if first_error is not None:
        raise first_error
    return None


def _module_of(msg):
    """(HloModuleProto, HloModuleConfigProto or None, arguments, result) of a message."""
    kind = msg.DESCRIPTOR.name
    if kind == "HloSnapshot":
        return msg.hlo.hlo_module, None
    if kind == "HloUnoptimizedSnapshot":
        return msg.hlo_module, None
    if kind == "HloProto":
        return msg.hlo_module, None
    if kind == "HloModuleProtoWithConfig":
        return msg.hlo_module, msg.config
    return msg, None


def _plausible(msg) -> bool:
    """Holds a module: computations with instructions, each with an opcode, and no
    unknown fields in the wrapper, the module, or its computations and instructions."""
    from google.protobuf import unknown_fields

    mp, config = _module_of(msg)
    if not mp.computations:
        return False
    checked = [msg, mp] + ([config] if config is not None else [])
    for cp in mp.computations:
        if not cp.name or not cp.instructions:
            return False
        checked.append(cp)
        if any(not ip.opcode or not ip.name for ip in cp.instructions):
            return False
    # Instructions may carry fields of a newer XLA: decoding them names the fields.
    return all(len(unknown_fields.UnknownFieldSet(m)) == 0 for m in checked)


def _undelimited(data: bytes) -> bytes:
    """The message of a length-delimited file (a varint byte count, then exactly that many
    bytes: XLA writes its unoptimized snapshots so), else the data itself."""
    size = shift = 0
    for i, byte in enumerate(data[:10]):
        size |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return data[i + 1:] if size == len(data) - i - 1 and size > 0 else data
    return data


def _delimited_snapshot(data: bytes, name: str) -> LoadedHlo | None:
    """An unoptimized snapshot as jaxlib's XLA dumps it with --xla_dump_hlo_as_proto: the
    length-delimited message, then each argument's shape and raw bytes (see
    HloInputs.ArgumentDescriptor in schema.py); None when the data is not that."""
    from google.protobuf.message import DecodeError

    from xlapy.proto.shapes import raw_literal

    size = shift = 0
    for i, byte in enumerate(data[:10]):
        size |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            start = i + 1
            break
    else:
        return None
    if size <= 0 or start + size > len(data):
        return None
    msg = message_class("HloUnoptimizedSnapshot")()
    try:
        msg.ParseFromString(data[start:start + size])
    except (DecodeError, ValueError, RuntimeError):
        return None
    if not _plausible(msg) or not msg.partitions:
        return None
    loaded = _loaded(msg, "binary-proto", name)
    rest, at = data[start + size:], 0
    partitions = []
    for p, inputs in enumerate(msg.partitions):
        arguments = []
        for k, descriptor in enumerate(inputs.arguments_descriptors):
            where = f"{name}: HloUnoptimizedSnapshot.partitions[{p}] argument {k}"
            chunk = rest[at:at + descriptor.size]
            at += descriptor.size
            if len(chunk) != descriptor.size or descriptor.size < 8:
                raise ProtoError(f"{where}: the file ends inside the argument's data")
            shape_size = int.from_bytes(chunk[:8], "little")
            if 8 + shape_size > len(chunk):
                raise ProtoError(f"{where}: a shape of {shape_size} bytes does not fit the "
                                 f"argument's {descriptor.size} bytes")
            sp = message_class("ShapeProto")()
            try:
                sp.ParseFromString(chunk[8:8 + shape_size])
            except (DecodeError, ValueError, RuntimeError):
                raise ProtoError(f"{where}: the argument's shape is not a ShapeProto") from None
            arguments.append(raw_literal(sp, chunk[8 + shape_size:], where))
        partitions.append(arguments or loaded.partitions[p])
    if at != len(rest):
        raise ProtoError(f"{name}: {len(rest) - at} bytes after the snapshot's arguments")
    loaded.partitions = partitions
    loaded.arguments = partitions[0]
    return loaded


def _parse_binary(data: bytes) -> list:
    """Every top-level message kind that parses ``data`` and holds a plausible module."""
    from google.protobuf.message import DecodeError

    out = []
    for kind in TOP_LEVEL_MESSAGES:
        msg = message_class(kind)()
        try:
            msg.ParseFromString(data)
        except (DecodeError, ValueError, RuntimeError):
            continue
        if _plausible(msg):
            out.append(msg)
    return out


def _parse_text_proto(text: str) -> list:
    from google.protobuf import text_format

    out = []
    for kind in TOP_LEVEL_MESSAGES:
        msg = message_class(kind)()
        try:
            text_format.Parse(text, msg, descriptor_pool=descriptor_pool())
        except (text_format.ParseError, ValueError, TypeError, UnicodeError):
            continue
        if _plausible(msg):
            out.append(msg)
    return out


def _loaded(msg, form: str, name: str) -> LoadedHlo:
    from xlapy.proto.module import module_from_proto

    kind = msg.DESCRIPTOR.name
    mp, config = _module_of(msg)
    module = module_from_proto(mp, config, where=f"{name}: {kind}")
    out = LoadedHlo(module, form=form, message=kind)
    if config is not None and config.HasField("entry_computation_layout"):
        count = len(config.entry_computation_layout.parameters)
        if count != len(module.entry.parameters):
            raise ProtoError(f"{name}: {kind}.config: the entry computation layout has {count} "
                             f"parameters, the entry computation "
                             f"{len(module.entry.parameters)}")
    if kind == "HloSnapshot":
        out.arguments = [_argument(lp, module, i, name) for i, lp in enumerate(msg.arguments)]
        if msg.HasField("result"):
            out.result = literal_from_proto(msg.result, f"{name}: HloSnapshot.result")
        out.execution_platform = msg.execution_platform
    elif kind == "HloUnoptimizedSnapshot":
        out.partitions = [[_argument(lp, module, i, name) for i, lp in enumerate(p.arguments)]
                          for p in msg.partitions]
        if out.partitions:
            out.arguments = out.partitions[0]
    return out


def _argument(lp, module: Module, index: int, name: str) -> Literal:
    params = module.entry.parameters
    if index >= len(params):
        raise ProtoError(f"{name}: the snapshot holds more arguments than the "
                         f"{len(params)} parameters of {module.entry.name}")
    shape = params[index].shape if index < len(params) else None
    if shape is not None and shape.is_tuple():
        shape = None  # a tuple literal keeps its own element layouts
    try:
        return literal_from_proto(lp, f"{name}: HloSnapshot.arguments[{index}]", shape)
    except ProtoError:
        if shape is None:
            raise
        return literal_from_proto(lp, f"{name}: HloSnapshot.arguments[{index}]")


__all__ = ["LoadedHlo", "NotAnHloModuleError", "load_hlo", "looks_like_hlo_text"]
