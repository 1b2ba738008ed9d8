"""Bad protobuf input gets a clear xlapy error naming the message path and the problem:
never a DecodeError, UnicodeDecodeError or KeyError traceback."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.proto import (
    NotAnHloModuleError,
    ProtoError,
    load_hlo,
    parse_hlo_module_proto,
    parse_hlo_snapshot,
)

pytest.importorskip("google.protobuf")

TEXT = """HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT c = f32[] add(a, b) }
ENTRY e {
  p = f32[3] parameter(0)
  k = f32[3] constant({1, 2, 3})
  s = f32[3] add(p, k)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(s, z), dimensions={0}, to_apply=add
}"""


def _proto():
    return xlapy.module_to_proto(xlapy.parse_hlo_module(TEXT))


def _instruction(mp, name):
    for cp in mp.computations:
        for ip in cp.instructions:
            if ip.name == name:
                return ip
    raise KeyError(name)


@pytest.mark.parametrize("data", [
    b"\x00\x01\x02\xff\xfe\x80garbage",
    b"\xff\xfe\xfd not utf-8 and not a proto",
    bytes(range(256)) * 4,
])
def test_bytes_that_are_no_proto(data):
    with pytest.raises(NotAnHloModuleError, match=r"^in: not an HLO module \(binary data that "
                       r"is not a serialized HloSnapshot, HloProto"):
        load_hlo(data, "in")


def test_truncated_proto_is_not_a_module():
    data = _proto().SerializeToString()
    with pytest.raises(NotAnHloModuleError, match="not an HLO module"):
        parse_hlo_module_proto(data[: len(data) // 2])


def test_text_that_is_nothing():
    with pytest.raises(NotAnHloModuleError,
                       match=r"^in: not an HLO module \(text that is neither HLO text \(hlo:1:"):
        load_hlo("Memory Space: default (color=0)\nTotal bytes: 268\n", "in")
    with pytest.raises(NotAnHloModuleError, match="the file is empty"):
        load_hlo("   \n", "in")


def test_wrong_argument_types():
    with pytest.raises(ProtoError, match="load_hlo: expected bytes or str, got int"):
        load_hlo(123)
    with pytest.raises(NotAnHloModuleError, match="the data is HLO text, not a proto"):
        parse_hlo_module_proto(TEXT)
    with pytest.raises(ProtoError, match="the data holds HloModuleProto, not an HloSnapshot"):
        parse_hlo_snapshot(_proto().SerializeToString())


def _broken(edit) -> str:
    mp = _proto()
    edit(mp)
    with pytest.raises(ProtoError) as info:
        parse_hlo_module_proto(mp.SerializeToString())
    return str(info.value)


def test_unknown_opcode():
    msg = _broken(lambda mp: setattr(_instruction(mp, "s"), "opcode", "frobnicate"))
    assert msg.endswith(".instructions[2] (%s): unknown opcode 'frobnicate'")
    assert msg.startswith("proto: HloModuleProto.computations[1] (%e)")


def test_operand_that_does_not_exist():
    def edit(mp):
        _instruction(mp, "s").operand_ids[1] = 12345
    assert "(%s): operand id 12345 is not an earlier instruction of this computation" in \
        _broken(edit)


def test_missing_shape_and_root():
    assert "(%k): the instruction has no shape" in \
        _broken(lambda mp: _instruction(mp, "k").ClearField("shape"))
    assert "(%e): root_id 999 is not an instruction of the computation" in \
        _broken(lambda mp: setattr(mp.computations[1], "root_id", 999))


def test_literal_with_the_wrong_element_count():
    def edit(mp):
        del _instruction(mp, "k").literal.f32s[-1]
    assert "(%k).literal: a f32[3]{0} literal needs 3 f32s, got 2" in _broken(edit)


def test_shape_rule_rejects():
    def edit(mp):
        _instruction(mp, "s").shape.dimensions[0] = 4
    assert "(%s): add: the given shape f32[4]{0} is not compatible" in _broken(edit)


def test_called_computation_that_is_not_defined():
    def edit(mp):
        _instruction(mp, "r").called_computation_ids[0] = 77
    assert "(%r): called computation id 77 is not a computation defined before this one" in \
        _broken(edit)


def test_duplicate_parameter_numbers_and_names():
    def edit(mp):
        _instruction(mp, "a").name = "b"
    assert "instruction name 'b' is not unique" in _broken(edit)

    def edit2(mp):
        _instruction(mp, "b").parameter_number = 0
    assert "parameter number 0 is used twice" in _broken(edit2)


def test_fields_of_a_newer_xla_are_named_not_dropped():
    mp = _proto()
    data = bytearray(mp.SerializeToString())
    ip = _instruction(mp, "s")
    ip_bytes = ip.SerializeToString()
    # field 150, varint 1: an HloInstructionProto field xlapy does not declare
    patched = ip_bytes + bytes([0xB0, 0x09, 0x01])
    data = bytes(data).replace(ip_bytes, patched)
    # the instruction's length prefix grew by 3: rebuild through the message API instead
    from xlapy.proto.schema import message_class

    cls = message_class("HloInstructionProto")
    new_ip = cls()
    new_ip.ParseFromString(patched)
    ip.CopyFrom(new_ip)
    with pytest.raises(ProtoError, match=r"\(%s\): HloInstructionProto field\(s\) \[150\] are "
                       r"not fields xlapy knows \(a newer XLA\?\); refusing to drop them"):
        parse_hlo_module_proto(mp.SerializeToString())


def test_what_a_proto_cannot_hold_is_refused_on_writing():
    f6 = xlapy.parse_hlo_module("HloModule m\nENTRY e { ROOT c = f6e2m3fn[2] constant({1, 2}) }")
    with pytest.raises(ProtoError, match="LiteralProto has no field for f6e2m3fn elements"):
        xlapy.module_to_proto(f6)
    cb = xlapy.parse_hlo_module(
        "HloModule m\nENTRY e { p = f32[4] parameter(0) r = s32[1] parameter(1) "
        "ROOT c = f32[4] collective-broadcast(p, r), replica_groups={{0}}, "
        "has_dynamic_root=true }")
    with pytest.raises(ProtoError, match="collective-broadcast attribute has_dynamic_root=true "
                       "cannot be written to a proto"):
        xlapy.module_to_proto(cb)


def test_snapshot_with_a_bad_argument():
    from xlapy.proto import snapshot_to_proto

    module = xlapy.parse_hlo_module(TEXT)
    snap = snapshot_to_proto(module, [np.ones(3, np.float32)])
    del snap.arguments[0].f32s[0]
    with pytest.raises(ProtoError, match=r"arguments\[0\]: a f32\[3\]\{0\} literal needs 3 "
                       "f32s, got 2"):
        parse_hlo_snapshot(snap.SerializeToString())
    with pytest.raises(ProtoError, match="takes 1 arguments, got 2"):
        snapshot_to_proto(module, [np.ones(3, np.float32)] * 2)
