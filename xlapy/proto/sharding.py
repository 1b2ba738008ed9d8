"""Shardings and op metadata between XLA's text and its protos.

xlapy keeps an instruction's sharding as XLA's text (``{devices=[2,1]0,1}``); the proto holds
an OpSharding. Owns:

- ``sharding_to_proto(text, msg)``: the text read as XLA's parser reads it (ParseSharding
  builds exactly this OpSharding): ``{replicated}``, ``{manual}``, ``{unknown}``,
  ``{unreduced}``, ``{maximal device=N}``, ``{devices=[dims]d0,d1,...}``,
  ``{devices=[dims]<=[reshape]T(perm)}`` (iota), ``last_tile_dim_replicate``,
  ``last_tile_dims={manual, replicated}``, ``shard_as N`` / ``shard_like N``,
  ``metadata={...}`` (one or ``{{...}, {...}}``), and tuples ``{{...}, {...}}``.
- ``sharding_from_proto(msg)``: the text XLA prints for it (HloSharding::FromProto, then
  Print with metadata), including FromProto's canonical forms: one device is ``maximal``,
  a tiling whose data dimensions are all 1 and whose subgroups are all replicated (or all
  manual) is ``{replicated}`` (``{manual}``), iota reshapes canonicalised.
- ``metadata_to_proto`` / ``metadata_from_proto``: OpMetadata (module_data.OpMetadata).

Imports the HLO layer's value types and text helpers.
"""

from __future__ import annotations

import math
import re

from xlapy.hlo.attrs.collective import canonicalize_iota
from xlapy.hlo.attrs.numbers import read_balanced
from xlapy.hlo.module_data import OpMetadata
from xlapy.proto.shapes import ProtoError
from xlapy.shape.text import Scanner

# OpSharding.Type numbers (xla_data.proto).
REPLICATED, MAXIMAL, TUPLE, OTHER, MANUAL, UNKNOWN, UNREDUCED = range(7)
_SUBGROUP_TEXT = {MANUAL: "manual", MAXIMAL: "maximul", REPLICATED: "replicated"}
_SUBGROUP_BY_TEXT = {"manual": MANUAL, "maximal": MAXIMAL, "replicated": REPLICATED,
                     "unreduced": UNREDUCED}

_METADATA_INTS = ("source_line", "source_end_line", "source_column", "source_end_column",
                  "stack_frame_id")
_METADATA_STRINGS = ("op_type", "op_name", "source_file", "deduplicated_name",
                     "scheduling_name")


# -- metadata ----------------------------------------------------------------------------------


def metadata_to_proto(meta: OpMetadata, mp, payloads: dict[str, int] | None = None) -> None:
    """``payloads``: the module's table of metadata payloads (text -> index), which a
    ``metadata_payload`` is added to (None: payloads cannot be written here)."""
    for key in _METADATA_STRINGS + _METADATA_INTS:
        value = getattr(meta, key)
        if value:
            setattr(mp, key, value)
    mp.profile_type.extend(meta.profile_type)
    if meta.metadata_payload is not None:
        if payloads is None:
            raise ProtoError("metadata_payload is kept in the module's table: it cannot be "
                             "written in a sharding's metadata")
        index = payloads.setdefault(meta.metadata_payload, len(payloads))
        mp.metadata_payload.index = index


def metadata_from_proto(mp, payloads: list[str] | None = None) -> OpMetadata:
    values = {key: getattr(mp, key) for key in _METADATA_STRINGS + _METADATA_INTS}
    payload = None
    if mp.HasField("metadata_payload"):
        index = mp.metadata_payload.index
        if payloads is None or not 0 <= index < len(payloads):
            raise ProtoError(f"metadata_payload index {index} is not in the module's "
                             f"{len(payloads or [])} metadata_payloads")
        payload = payloads[index]
    return OpMetadata(profile_type=tuple(mp.profile_type), metadata_payload=payload, **values)


# -- text -> proto ------------------------------------------------------------------------------


def sharding_to_proto(text: str, msg) -> None:
    """Fill OpSharding ``msg`` from XLA's sharding text (a ParseError on bad text)."""
    sc = Scanner(text, "sharding")
    _read_sharding(sc, msg)
    sc.skip()
    if not sc.at_end():
        sc.error(f"unexpected text after the sharding: {sc.describe_next()}")


def _read_sharding(sc: Scanner, msg) -> None:
    sc.expect("{", "to start a sharding")
    sc.skip()
    if sc.peek() == "}" or sc.peek() == "{":  # a tuple sharding ({} is the empty tuple)
        msg.type = TUPLE
        if sc.eat("}"):
            return
        while True:
            _read_single(sc, msg.tuple_shardings.add())
            sc.skip()
            if sc.eat("}"):
                return
            sc.expect(",", "or '}' in a tuple sharding")
            sc.skip()
            if sc.text.startswith("/*", sc.pos):  # /*index=5*/
                end = sc.text.find("*/", sc.pos)
                sc.pos = end + 2 if end >= 0 else sc.error("unterminated comment")
    sc.pos -= 1
    _read_single(sc, msg)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _read_single(sc: Scanner, msg) -> None:
    start = sc.pos
    sc.expect("{", "to start a sharding")
    kind = None
    device = None
    dims: list[int] = []
    devices: list[int] = []
    iota: tuple[list[int], list[int]] | None = None
    last_tile_dim_replicate = False
    last_tile_dims: list[int] = []
    while True:
        sc.skip()
        if sc.eat("}"):
            break
        pos = sc.pos
        m = sc.peek_re(_WORD)
        if not m:
            sc.error(f"expected a sharding attribute, found {sc.describe_next()}")
        word = m.group(0)
        sc.pos = m.end()
        if word in ("replicated", "manual", "unknown", "unreduced", "maximal"):
            kind = word
        elif word == "device":
            sc.expect("=", "after 'device'")
            device = sc.read_int("a device number")
        elif word == "devices":
            sc.expect("=", "after 'devices'")
            dims = _int_list(sc, "[", "]")
            sc.skip()
            if sc.eat("<="):
                reshape = _int_list(sc, "[", "]")
                perm = list(range(len(reshape)))
                if sc.eat("T"):
                    perm = _int_list(sc, "(", ")")
                iota = (reshape, perm)
            else:
                devices.append(sc.read_int("a device number"))
                while sc.eat(","):
                    devices.append(sc.read_int("a device number"))
        elif word == "last_tile_dim_replicate":
            last_tile_dim_replicate = True
        elif word == "last_tile_dims":
            sc.expect("=", "after 'last_tile_dims'")
            sc.expect("{", "to start last_tile_dims")
            while True:
                sc.skip()
                tpos = sc.pos
                name = sc.read_ident()
                if name not in _SUBGROUP_BY_TEXT:
                    sc.error(f"expected manual, replicated, maximal or unreduced in "
                             f"last_tile_dims, found {name!r}", tpos)
                last_tile_dims.append(_SUBGROUP_BY_TEXT[name])
                if sc.eat("}"):
                    break
                sc.expect(",", "or '}' in last_tile_dims")
        elif word == "metadata":
            sc.expect("=", "after 'metadata'")
            sc.skip()
            if sc.text.startswith("{{", sc.pos) or re.match(r"\{\s*\{", sc.text[sc.pos:]):
                sc.expect("{")
                while True:
                    sc.skip()
                    metadata_to_proto(OpMetadata.read(sc), msg.metadata.add())
                    if sc.eat("}"):
                        break
                    sc.expect(",", "or '}' in a list of metadata")
            else:
                metadata_to_proto(OpMetadata.read(sc), msg.metadata.add())
        elif word in ("shard_as", "shard_like"):
            msg.is_shard_group = True
            msg.shard_group_type = 0 if word == "shard_as" else 1
            msg.shard_group_id = sc.read_int("a shard group id")
        else:
            sc.error(f"unknown sharding attribute '{word}'", pos)
    if kind == "replicated":
        msg.type = REPLICATED
    elif kind == "manual":
        msg.type = MANUAL
    elif kind == "unknown":
        msg.type = UNKNOWN
    elif kind == "unreduced":
        msg.type = UNREDUCED
    elif kind == "maximal":
        if device is None:
            sc.error("a maximal sharding needs device=N", start)
        msg.type = MAXIMAL  # XLA writes the device alone, without dimensions
        msg.tile_assignment_devices.append(device)
    else:
        if not dims:
            sc.error("a sharding needs replicated, manual, unknown, maximal or devices=[...]",
                     start)
        msg.type = OTHER
        msg.tile_assignment_dimensions.extend(dims)
        if iota is not None:
            msg.iota_reshape_dims.extend(iota[0])
            msg.iota_transpose_perm.extend(iota[1])
        else:
            if len(devices) != math.prod(dims):
                sc.error(f"devices=[{','.join(map(str, dims))}] needs {math.prod(dims)} "
                         f"devices, got {len(devices)}", start)
            msg.tile_assignment_devices.extend(devices)
        msg.replicate_on_last_tile_dim = last_tile_dim_replicate
        msg.last_tile_dims.extend(last_tile_dims)


def _int_list(sc: Scanner, open_: str, close: str) -> list[int]:
    sc.expect(open_)
    out = []
    if sc.eat(close):
        return out
    while True:
        out.append(sc.read_int())
        if sc.eat(close):
            return out
        sc.expect(",", f"or '{close}'")


# -- proto -> text ------------------------------------------------------------------------------


def sharding_from_proto(msg, where: str = "sharding") -> str:
    """XLA's text of OpSharding ``msg`` (metadata included)."""
    if msg.type == TUPLE:
        if msg.metadata:
            raise ProtoError(f"{where}: a tuple sharding cannot carry metadata")
        parts = [sharding_from_proto(e, f"{where}.tuple_shardings[{i}]")
                 for i, e in enumerate(msg.tuple_shardings)]
        out = "{"
        for i, part in enumerate(parts):
            if i:
                out += f", /*index={i}*/" if i % 5 == 0 else ", "
            out += part
        return out + "}"
    if msg.HasField("named_sharding"):
        raise ProtoError(f"{where}: named (Shardy) shardings are not supported")
    tail = _shard_group(msg) + _metadata_text(msg)
    simple = {REPLICATED: "replicated", MANUAL: "manual", UNKNOWN: "unknown",
              UNREDUCED: "unreduced"}
    if msg.type in simple:
        return "{" + simple[msg.type] + tail + "}"
    devices = list(msg.tile_assignment_devices)
    reshape = list(msg.iota_reshape_dims)
    if len(devices) == 1:
        return f"{{maximal device={devices[0]}{tail}}}"
    if reshape and all(d == 1 for d in reshape):
        return f"{{maximal device=0{tail}}}"
    if msg.type == MAXIMAL:
        raise ProtoError(f"{where}: a maximal sharding needs exactly one device, got "
                         f"{len(devices)}")
    if msg.type != OTHER:
        raise ProtoError(f"{where}: unknown sharding type {msg.type}")
    dims = list(msg.tile_assignment_dimensions)
    if not dims:
        raise ProtoError(f"{where}: a tiled sharding needs tile_assignment_dimensions")
    if reshape:
        perm = list(msg.iota_transpose_perm)
        if devices or len(perm) != len(reshape) or sorted(perm) != list(range(len(perm))) \
                or math.prod(reshape) != math.prod(dims):
            raise ProtoError(f"{where}: iota tile assignment {dims} <= {reshape} T{perm} is "
                             f"not valid")
        reshape, perm = canonicalize_iota(tuple(reshape), tuple(perm))
        tiles = f"devices=[{_ints(dims)}]<=[{_ints(reshape)}]"
        if list(perm) != list(range(len(perm))):
            tiles += f"T({_ints(perm)})"
    else:
        if len(devices) != math.prod(dims):
            raise ProtoError(f"{where}: tile_assignment_dimensions {dims} need "
                             f"{math.prod(dims)} devices, got {len(devices)}")
        tiles = f"devices=[{_ints(dims)}]{_ints(devices)}"
    subgroups = list(msg.last_tile_dims)
    if msg.replicate_on_last_tile_dim:
        subgroups = [REPLICATED]
    data_dims = dims[: len(dims) - len(subgroups)]
    if subgroups and math.prod(data_dims) == 1 and len(set(subgroups)) == 1:
        if subgroups[0] == REPLICATED:  # FromProto: PartialTile/Subgroup of nothing
            return "{replicated" + tail + "}"
        if subgroups[0] == MANUAL:
            return "{manual" + tail + "}"
    text = "{" + tiles
    if msg.replicate_on_last_tile_dim:
        text += " last_tile_dim_replicate"
    elif msg.last_tile_dims:
        text += " last_tile_dims={" + ", ".join(_SUBGROUP_TEXT.get(t, "error_type.")
                                                for t in msg.last_tile_dims) + "}"
    return text + tail + "}"


def _ints(values) -> str:
    return ",".join(str(v) for v in values)


def _shard_group(msg) -> str:
    if not msg.is_shard_group:
        return ""
    return f" {'shard_as' if msg.shard_group_type == 0 else 'shard_like'} {msg.shard_group_id}"


def _metadata_text(msg) -> str:
    texts = [metadata_from_proto(m).to_text() for m in msg.metadata]
    if not texts:
        return ""
    if len(texts) == 1:
        return " metadata={" + texts[0] + "}"
    return " metadata={" + ", ".join("{" + t + "}" for t in texts) + "}"


# -- domain -----------------------------------------------------------------------------------


def domain_shardings(text: str) -> tuple[str, str]:
    """The entry and exit sharding texts of a sharding domain's ``domain={kind="sharding",
    entry={...}, exit={...}}``; ProtoError for another kind of domain."""
    sc = Scanner(text, "domain")
    sc.expect("{")
    values: dict[str, str] = {}
    while not sc.eat("}"):
        sc.skip()
        key = sc.read_ident()
        sc.expect("=", f"after '{key}' in domain")
        sc.skip()
        values[key] = read_balanced(sc)
        sc.eat(",")
    if values.get("kind") != '"sharding"' or "entry" not in values or "exit" not in values:
        raise ProtoError(f"domain {text}: only sharding domains (kind=\"sharding\", entry=, "
                         f"exit=) have a proto form")
    return values["entry"], values["exit"]


def domain_text(entry: str, exit_: str) -> str:
    return f'{{kind="sharding", entry={entry}, exit={exit_}}}'


__all__ = ["domain_shardings", "domain_text", "metadata_from_proto", "metadata_to_proto",
           "sharding_from_proto", "sharding_to_proto"]
