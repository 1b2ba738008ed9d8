"""The verifier: each check, with messages that show the failing instruction in context."""

import pytest

from xlapy.hlo.ir import Instruction
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape
from xlapy.verifier import VerifierError, verify_module

TEXT = """HloModule m

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  r = f32[] reduce(x, z), dimensions={0}, to_apply=add_f32
  ROOT n = f32[] negate(r)
}
"""


def test_valid_module_verifies():
    verify_module(parse_hlo_module(TEXT))


def test_wrong_shape_shows_the_instruction_with_operands_and_users():
    m = parse_hlo_module(TEXT)
    r = m.entry.instruction("r")
    r.shape = parse_shape("f32[2]")
    with pytest.raises(VerifierError) as info:
        verify_module(m)
    text = str(info.value)
    assert "reduce: shape f32[2]{0} is not compatible with the shape its operands give, f32[]" in text
    assert "instruction %r in computation %main" in text
    assert "    >>> %r = f32[2]{0} reduce(%x, %z), dimensions={0}, to_apply=%add_f32" in text
    assert "operand: %x = f32[4]{0} parameter(0)" in text
    assert "user:    %n = f32[] negate(%r)" in text


def test_reducer_signature_is_checked():
    m = parse_hlo_module(TEXT)
    comp = m.computation("add_f32")
    comp.root.shape = parse_shape("f32[1]")  # reducer now returns f32[1]
    with pytest.raises(VerifierError, match="add"):
        verify_module(m)


def test_implicit_broadcast_is_rejected():
    text = TEXT.replace("ROOT n = f32[] negate(r)", "ROOT n = f32[4] add(x, r)")
    with pytest.raises(VerifierError, match=r"Implicit broadcast is not allowed in HLO\. Found "
                                            r"different shapes for instruction add: operand f32\[\]"):
        verify_module(parse_hlo_module(text))


def test_duplicate_names_across_computations():
    text = TEXT.replace("  x = f32[4] parameter(0)\n", "  x = f32[4] parameter(0)\n  a = f32[4] negate(x)\n")
    module = parse_hlo_module(text)
    # The parser makes names unique across the module as XLA's does (the later one is
    # renamed); a duplicate made afterwards is the verifier's to find.
    renamed = [i for i in module.entry.instructions if i.opcode == "negate"][0]
    assert renamed.name == "a.1"
    renamed.name = "a"
    with pytest.raises(VerifierError, match=r"instruction name %a is not unique: it is also used in computation %add_f32"):
        verify_module(module)


def test_parameter_numbers_must_be_dense():
    text = TEXT.replace("b = f32[] parameter(1)", "b = f32[] parameter(2)")
    with pytest.raises(VerifierError, match=r"parameter numbers must be 0\.\.1 with no repeats, got \[0, 2\]"):
        verify_module(parse_hlo_module(text))


def test_entry_computation_layout_must_match():
    text = TEXT.replace("HloModule m", "HloModule m, entry_computation_layout={(f32[5]{0})->f32[]}")
    with pytest.raises(VerifierError, match=r"Shape of entry computation parameter 0: f32\[4\]\{0\} is not "
                                            r"compatible with entry_computation_layout f32\[5\]\{0\}"):
        verify_module(parse_hlo_module(text))
    text = TEXT.replace("HloModule m", "HloModule m, entry_computation_layout={(f32[4]{0})->s32[]}")
    with pytest.raises(VerifierError, match="Shape of entry computation root"):
        verify_module(parse_hlo_module(text))


SEND_RECV = """HloModule m

ENTRY main {
  t = token[] after-all()
  d = f32[2] parameter(0)
  s = (f32[2], u32[], token[]) send(d, t), channel_id=1
  sd = token[] send-done(s), channel_id=1
  r = (f32[2], u32[], token[]) recv(t), channel_id=1
  rd = (f32[2], token[]) recv-done(r), channel_id=1
  ROOT g = f32[2] get-tuple-element(rd), index=0
}
"""


def test_send_recv_pair_by_channel():
    verify_module(parse_hlo_module(SEND_RECV))
    bad = SEND_RECV.replace("sd = token[] send-done(s), channel_id=1", "sd = token[] send-done(s), channel_id=2")
    with pytest.raises(VerifierError, match="send-done has channel_id=2 but its send has channel_id=1"):
        verify_module(parse_hlo_module(bad))
    extra = SEND_RECV.replace("  ROOT g", "  snd2 = (f32[2], u32[], token[]) send(d, t), channel_id=1\n"
                                          "  sd2 = token[] send-done(snd2), channel_id=1\n  ROOT g")
    with pytest.raises(VerifierError, match=r"channel 1 has 2 send\(s\) but 1 recv\(s\)"):
        verify_module(parse_hlo_module(extra))


def test_root_must_belong_to_the_computation():
    m = parse_hlo_module(TEXT)
    m.entry.root = Instruction("negate", parse_shape("f32[]"))
    with pytest.raises(VerifierError, match="computation %main has no root of its own"):
        verify_module(m)


# -- mixed precision: HloVerifier's allow_mixed_precision, false by default ----------------------

MIXED = """HloModule m

add_f32 {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY main {{
  p16 = f16[2] parameter(0)
  p32 = f32[2] parameter(1)
  pbf = bf16[2] parameter(2)
  pc = pred[2] parameter(3)
  {body}
}}
"""


@pytest.mark.parametrize("body,opcode,types", [
    ("ROOT c = f32[2] add(p16, p32)", "add", "f16[2]{0} and f32[2]{0}"),
    ("ROOT c = f32[2] multiply(pbf, p32)", "multiply", "bf16[2]{0} and f32[2]{0}"),
    ("ROOT c = pred[2] compare(p16, p32), direction=LT", "compare", "f16[2]{0} and f32[2]{0}"),
    ("ROOT c = f32[2] select(pc, p16, p32)", "select", "f16[2]{0} and f32[2]{0}"),
    ("z = f16[] constant(0)\n  ROOT r = f32[] reduce(p32, z), dimensions={0}, to_apply=add_f32",
     "reduce", "f32[2]{0} and f16[]"),
])
def test_mixed_precision_is_rejected_by_default(body, opcode, types):
    module = parse_hlo_module(MIXED.format(body=body))
    with pytest.raises(VerifierError) as info:
        verify_module(module)
    name = "r" if opcode == "reduce" else "c"
    assert str(info.value).startswith(
        f"Seen floating point types of different precisions in {opcode} %{name} ({types}), "
        f"but mixed precision is disallowed (verify_module(..., allow_mixed_precision=True) "
        f"allows it).\ninstruction %{name} in computation %main:")
    if opcode in ("add", "multiply", "compare", "select"):
        verify_module(module, allow_mixed_precision=True)


@pytest.mark.parametrize("body", [
    # XLA's allow-list: ops that pass data through or group it
    "ROOT t = (f16[2], f32[2]) tuple(p16, p32)",
    "ROOT d = f32[] dot(p16, p32), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
    "ROOT c = f32[2] custom-call(p16, p32), custom_call_target=\"foo\"",
    "t = (f16[2], f32[2]) tuple(p16, p32)\n  ROOT g = f16[2] get-tuple-element(t), index=0",
    # not floating point: integers and pred mix with anything
    "i = s32[2] convert(p16)\n  ROOT c = f16[2] select(pc, p16, p16)",
    # one operand: convert changes precision, it does not mix it
    "ROOT c = f32[2] convert(p16)",
])
def test_mixed_precision_exceptions(body):
    verify_module(parse_hlo_module(MIXED.format(body=body)))
