"""Infeed, outfeed, send/recv in the interpreter: the Infeed/Outfeed round trip (spec 002
Infeed: one value per infeed, tuples allowed, an empty tuple reads nothing), Send/Recv
between two computations sharing a channel (spec: "receives data ... from a Send
instruction in another computation that shares the same channel handle"), host transfers
through callables, and the clear errors when nothing arrives within the timeout."""

import queue
import threading

import numpy as np
import pytest
from movement_eval_helpers import assert_same

from xlapy import ops
from xlapy.interpreter import TOKEN, EvalOptions, EvaluationError, evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape

ECHO = """
HloModule echo
ENTRY e {
  t = token[] after-all()
  in = ((f32[2], s32[]), token[]) infeed(t)
  data = (f32[2], s32[]) get-tuple-element(in), index=0
  t2 = token[] get-tuple-element(in), index=1
  x = f32[2] get-tuple-element(data), index=0
  n = s32[] get-tuple-element(data), index=1
  two = f32[] constant(2)
  twos = f32[2] broadcast(two), dimensions={}
  y = f32[2] multiply(x, twos)
  ROOT o = token[] outfeed(y, t2)
}
"""


def test_infeed_outfeed_round_trip():
    infeed, outfeed = queue.Queue(), queue.Queue()
    infeed.put((np.array([1.5, -2], np.float32), np.int32(3)))
    got = evaluate(parse_hlo_module(ECHO), infeed=infeed, outfeed=outfeed)
    assert got is TOKEN
    assert_same(outfeed.get_nowait(), np.array([3, -4], np.float32))
    assert infeed.empty()


def test_infeed_values_are_converted_to_the_declared_shape():
    infeed, outfeed = queue.Queue(), queue.Queue()
    infeed.put(([1, 2], 5))  # Python lists and ints, converted to f32[2] and s32[]
    evaluate(parse_hlo_module(ECHO), infeed=infeed, outfeed=outfeed)
    assert_same(outfeed.get_nowait(), np.array([2, 4], np.float32))


def test_infeeds_read_in_order_inside_a_loop():
    # Spec: several infeeds in a computation are read in their (total) order; here a loop
    # sums three values read one per iteration.
    text = """
HloModule m
cond {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = f32[] get-tuple-element(s), index=1
  t = token[] after-all()
  in = (f32[], token[]) infeed(t)
  v = f32[] get-tuple-element(in), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ten = f32[] constant(10)
  scaled = f32[] multiply(acc, ten)
  sum = f32[] add(scaled, v)
  ROOT r = (s32[], f32[]) tuple(next, sum)
}
ENTRY e {
  zero = s32[] constant(0)
  z = f32[] constant(0)
  init = (s32[], f32[]) tuple(zero, z)
  ROOT w = (s32[], f32[]) while(init), condition=cond, body=body
}
"""
    infeed = queue.Queue()
    for v in (1, 2, 3):
        infeed.put(np.float32(v))
    _, total = evaluate(parse_hlo_module(text), infeed=infeed)
    assert_same(total, np.float32(123))  # read 1, then 2, then 3


def test_infeed_of_an_empty_tuple_reads_nothing():
    text = """
HloModule m
ENTRY e {
  t = token[] after-all()
  in = ((), token[]) infeed(t)
  ROOT d = () get-tuple-element(in), index=0
}
"""
    infeed = queue.Queue()
    infeed.put("left alone")
    assert evaluate(parse_hlo_module(text), infeed=infeed) == ()
    assert infeed.qsize() == 1


def test_infeed_timeout_names_the_infeed():
    with pytest.raises(EvaluationError, match=r"infeed: nothing arrived on the infeed queue "
                                              r"\(EvalOptions.infeed\) within 0.05 s "
                                              r"\(instruction %in expects \(f32\[2\], s32\[\]\)\)"):
        evaluate(parse_hlo_module(ECHO), timeout=0.05)


def test_infeed_wrong_value_is_an_error():
    infeed = queue.Queue()
    infeed.put(np.zeros(3, np.float32))
    with pytest.raises(EvaluationError, match=r"infeed %in: the value from the infeed queue: "
                                              r"expected a tuple of 2 values"):
        evaluate(parse_hlo_module(ECHO), infeed=infeed, timeout=1)


def test_builder_infeed_outfeed():
    b = XlaBuilder("feeds")
    token = ops.CreateToken(b)
    data = ops.InfeedWithToken(token, parse_shape("s32[3]"))
    value = ops.GetTupleElement(data, 0)
    ops.OutfeedWithToken(ops.Neg(value), ops.GetTupleElement(data, 1), parse_shape("s32[3]"), "")
    comp = b.build(value)
    infeed, outfeed = queue.Queue(), queue.Queue()
    infeed.put(np.array([1, 2, 3], np.int32))
    assert_same(evaluate(comp, infeed=infeed, outfeed=outfeed), np.array([1, 2, 3], np.int32))
    assert_same(outfeed.get_nowait(), np.array([-1, -2, -3], np.int32))


# -- send / recv --------------------------------------------------------------------------------

SENDER = """
HloModule sender
ENTRY e {
  x = f32[3] parameter(0)
  t = token[] after-all()
  s = (f32[3], u32[], token[]) send(x, t), channel_id=7
  ROOT d = token[] send-done(s), channel_id=7
}
"""

RECEIVER = """
HloModule receiver
ENTRY e {
  t = token[] after-all()
  r = (f32[3], u32[], token[]) recv(t), channel_id=7
  d = (f32[3], token[]) recv-done(r), channel_id=7
  v = f32[3] get-tuple-element(d), index=0
  ROOT y = f32[3] add(v, v)
}
"""


def test_send_recv_between_two_computations_sharing_a_channel():
    channels: dict = {}
    x = np.array([1, 2, 3], np.float32)
    assert evaluate(parse_hlo_module(SENDER), x, channels=channels) is TOKEN
    assert_same(evaluate(parse_hlo_module(RECEIVER), channels=channels), 2 * x)


def test_send_recv_concurrently_in_threads():
    # The receiver starts first and blocks in recv-done until the sender's value arrives.
    options = EvalOptions(timeout=10)
    got = {}
    receiver = threading.Thread(target=lambda: got.setdefault(
        "y", evaluate(parse_hlo_module(RECEIVER), options=options)))
    receiver.start()
    evaluate(parse_hlo_module(SENDER), np.array([4, 5, 6], np.float32), options=options)
    receiver.join(10)
    assert_same(got["y"], np.array([8, 10, 12], np.float32))


def test_send_recv_in_one_computation():
    text = """
HloModule m
ENTRY e {
  x = s32[2] parameter(0)
  t = token[] after-all()
  s = (s32[2], u32[], token[]) send(x, t), channel_id=1
  sd = token[] send-done(s), channel_id=1
  r = (s32[2], u32[], token[]) recv(sd), channel_id=1
  d = (s32[2], token[]) recv-done(r), channel_id=1
  ROOT v = s32[2] get-tuple-element(d), index=0
}
"""
    x = np.array([9, -9], np.int32)
    assert_same(evaluate(parse_hlo_module(text), x), x)


def test_recv_timeout_names_the_channel():
    with pytest.raises(EvaluationError, match=r"recv-done: nothing arrived on channel 7 within "
                                              r"0.05 s \(instruction %d expects f32\[3\]\)"):
        evaluate(parse_hlo_module(RECEIVER), timeout=0.05)


def test_host_transfers_use_the_callables():
    text = """
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  t = token[] after-all()
  s = (f32[2], u32[], token[]) send(x, t), channel_id=2, is_host_transfer=true
  sd = token[] send-done(s), channel_id=2, is_host_transfer=true
  r = (s32[], u32[], token[]) recv(sd), channel_id=3, is_host_transfer=true
  d = (s32[], token[]) recv-done(r), channel_id=3, is_host_transfer=true
  ROOT v = s32[] get-tuple-element(d), index=0
}
"""
    sent = []
    got = evaluate(parse_hlo_module(text), np.array([1, 2], np.float32),
                   host_send=lambda channel, value: sent.append((channel, value)),
                   host_recv=lambda channel, shape: 40 + channel)
    assert_same(got, np.int32(43))
    assert sent[0][0] == 2
    assert_same(sent[0][1], np.array([1, 2], np.float32))


def test_host_transfers_without_callables_use_the_channel_queues():
    text = SENDER.replace("channel_id=7", "channel_id=7, is_host_transfer=true")
    channels: dict = {}
    evaluate(parse_hlo_module(text), np.array([1, 2, 3], np.float32), channels=channels)
    assert_same(channels[7].get_nowait(), np.array([1, 2, 3], np.float32))
