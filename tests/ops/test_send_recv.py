"""send, send-done, recv, recv-done and ops.Send / SendWithToken / Recv / RecvWithToken /
SendToHost / RecvFromHost, channel handles: shapes (spec 002 "Send"/"Recv", HloVerifier's
HandleSend/Recv), builder compositions, and XLA-printed texts (hlo_parser_test.cc)."""

import pytest
from collective_helpers import emitted, infer, parse_entry, printed_attrs

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape

CONTEXT = "(f32[8], u32[], token[])"


# -- shape rules ------------------------------------------------------------------------------------


def test_send_and_send_done():
    assert str(infer("send", "f32[8]", "token[]")) == "(f32[8]{0}, u32[], token[])"
    assert str(infer("send", "(f32[], s32[2])", "token[]")) == "((f32[], s32[2]{0}), u32[], token[])"
    assert str(infer("send-done", CONTEXT)) == "token[]"


def test_recv_and_recv_done():
    assert str(infer("recv", "token[]", result="(f32[2,3], u32[], token[])")) == \
        "(f32[2,3]{1,0}, u32[], token[])"
    assert str(infer("recv-done", CONTEXT)) == "(f32[8]{0}, token[])"


def test_token_operands():
    with pytest.raises(ShapeError, match=r"send: Expected operand 1 to be token-shaped, actual shape "
                                         r"is f32\[\]"):
        infer("send", "f32[8]", "f32[]")
    with pytest.raises(ShapeError, match="recv: Expected operand 0 to be token-shaped"):
        infer("recv", "f32[]", result="(f32[], u32[], token[])")


def test_recv_needs_its_tuple_result():
    # hlo_parser_test.cc RecvNonTupleShape.
    with pytest.raises(ShapeError, match=r"recv: recv must have a non-empty tuple shape, got f32\[10\]"):
        infer("recv", "token[]", result="f32[10]")
    with pytest.raises(ShapeError, match="recv: the result shape must be given"):
        infer("recv", "token[]")


def test_done_operands_must_be_contexts():
    with pytest.raises(ShapeError, match=r"send-done: the operand must be the \(data, u32\[\], "
                                         r"token\[\]\) tuple of a send, got f32\[8\]"):
        infer("send-done", "f32[8]")
    with pytest.raises(ShapeError, match=r"recv-done: the operand must be the .* tuple of a recv, "
                                         r"got \(f32\[8\]\{0\}, token\[\]\)"):
        infer("recv-done", "(f32[8], token[])")


# -- builder ------------------------------------------------------------------------------------------


def test_channel_handles_count_per_builder():
    b = XlaBuilder("c")
    assert ops.CreateChannelHandle(b) == ops.ChannelHandle(1)
    assert ops.CreateDeviceToHostChannelHandle(b) == ops.ChannelHandle(2, ops.ChannelType.DEVICE_TO_HOST)
    assert ops.CreateHostToDeviceChannelHandle(b).handle == 3
    assert ops.CreateChannelHandle(XlaBuilder("other")).handle == 1


def test_send_and_recv_make_tokens():
    b = XlaBuilder("send")
    x = ops.Parameter(b, 0, parse_shape("f32[8]"), "x")
    h = ops.CreateChannelHandle(b)
    assert ops.Send(x, h) is None  # void in XLA
    comp = b.build()
    assert emitted(comp) == [("after-all", "token[]"), ("send", "(f32[8]{0}, u32[], token[])"),
                             ("send-done", "token[]")]
    send = comp.computation.instructions[2]
    assert printed_attrs(send) == "channel_id=1"

    b = XlaBuilder("recv")
    y = ops.Recv(b, parse_shape("f32[8]"), ops.ChannelHandle(1))
    comp = b.build(y)
    assert str(comp.program_shape()) == "() -> f32[8]"
    assert emitted(comp) == [("after-all", "token[]"), ("recv", "(f32[8]{0}, u32[], token[])"),
                             ("recv-done", "(f32[8]{0}, token[])"),
                             ("get-tuple-element", "f32[8]{0}")]


def test_send_and_recv_with_tokens():
    b = XlaBuilder("tok")
    x = ops.Parameter(b, 0, parse_shape("s32[3]"), "x")
    tok = ops.Parameter(b, 1, parse_shape("token[]"), "tok")
    done = ops.SendWithToken(x, tok, ops.ChannelHandle(4))
    assert str(done.shape) == "token[]" and done.instruction.opcode == "send-done"
    assert printed_attrs(done.instruction) == "channel_id=4"
    r = ops.RecvWithToken(done, parse_shape("s32[3]"), 4)
    assert str(r.shape) == "(s32[3]{0}, token[])"


def test_channel_type_checks():
    b = XlaBuilder("types")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    tok = ops.Parameter(b, 1, parse_shape("token[]"), "tok")
    d2h = ops.ChannelHandle(1, ops.ChannelType.DEVICE_TO_HOST)
    with pytest.raises(InvalidArgumentError, match="Send must use a device-to-device channel"):
        ops.SendWithToken(x, tok, d2h)
    with pytest.raises(InvalidArgumentError, match="Recv must use a device-to-device channel"):
        ops.RecvWithToken(tok, parse_shape("f32[2]"), d2h)
    with pytest.raises(InvalidArgumentError, match="SendToHost must use a device-to-host channel"):
        ops.SendToHost(x, tok, parse_shape("f32[2]"), ops.ChannelHandle(2))
    with pytest.raises(InvalidArgumentError, match="RecvFromHost must use a host-to-device channel"):
        ops.RecvFromHost(tok, parse_shape("f32[2]"), d2h)


def test_host_transfers():
    b = XlaBuilder("host")
    x = ops.Parameter(b, 0, parse_shape("f32[2,3]"), "x")
    tok = ops.Parameter(b, 1, parse_shape("token[]"), "tok")
    sent = ops.SendToHost(x, tok, parse_shape("f32[2,3]{0,1}"), ops.CreateDeviceToHostChannelHandle(b))
    send = sent.instruction.operands[0]
    assert str(send.shape) == "(f32[2,3]{0,1}, u32[], token[])"
    assert printed_attrs(send) == "channel_id=1, is_host_transfer=true"
    got = ops.RecvFromHost(sent, parse_shape("s32[4]"), ops.CreateHostToDeviceChannelHandle(b))
    assert str(got.shape) == "(s32[4]{0}, token[])"
    assert printed_attrs(got.instruction) == "channel_id=2, is_host_transfer=true"
    with pytest.raises(InvalidArgumentError, match=r"SendToHost shape f32\[3,2\]\{1,0\} must be "
                                                   r"compatible with operand shape f32\[2,3\]"):
        ops.SendToHost(x, tok, parse_shape("f32[3,2]"), ops.ChannelHandle(1, "DEVICE_TO_HOST"))
    with pytest.raises(InvalidArgumentError, match="Shape passed to SendToHost must have a layout"):
        ops.SendToHost(x, tok, parse_shape("f32[2,3]", fill_missing_layouts=False),
                       ops.ChannelHandle(1, "DEVICE_TO_HOST"))
    with pytest.raises(InvalidArgumentError, match="RecvFromHost only supports array shapes"):
        ops.RecvFromHost(tok, parse_shape("(f32[2])"), ops.ChannelHandle(1, "HOST_TO_DEVICE"))


# -- text ---------------------------------------------------------------------------------------------


def test_xla_texts_print_back():
    # hlo_parser_test.cc SendRecv / SendRecvWithHostTransfer.
    body = """  token0 = token[] after-all()
  recv = (f32[], u32[], token[]) recv(token0), channel_id=15, is_host_transfer=true
  recv-done = (f32[], token[]) recv-done(recv), channel_id=15, is_host_transfer=true
  constant = f32[] parameter(0)
  send = (f32[], u32[], token[]) send(constant, token0), channel_id=16
  ROOT send-done = token[] send-done(send), channel_id=16"""
    instrs = parse_entry(body)
    assert printed_attrs(instrs["recv"]) == "channel_id=15, is_host_transfer=true"
    assert printed_attrs(instrs["recv-done"]) == "channel_id=15, is_host_transfer=true"
    assert printed_attrs(instrs["send"]) == "channel_id=16"
    assert str(instrs["send-done"].shape) == "token[]"


def test_text_recv_without_tuple_shape():
    with pytest.raises(ParseError, match="recv must have a non-empty tuple shape"):
        parse_entry("  tok = token[] after-all()\n  ROOT recv = f32[10] recv(tok)")
