"""Channels, host transfers and feeds through a Client: send/recv between two computations
(the spec: "a Send in another computation sharing the same channel handle"), between
replicas and partitions (XLA's _xla_send_recv_source_target_pairs), host transfers
(Client.send_to_device / receive_from_device), infeed/outfeed per replica, and the
timeouts when nothing arrives."""

import threading
import time

import numpy as np
import pytest
from runtime_helpers import f32, same

from xlapy import EvaluationError
from xlapy.interpreter import TOKEN
from xlapy.runtime import Client

SENDER = """HloModule sender
ENTRY e {
  x = f32[3] parameter(0)
  t = token[] after-all()
  s = (f32[3], u32[], token[]) send(x, t), channel_id=7
  ROOT sd = token[] send-done(s), channel_id=7
}
"""

RECEIVER = """HloModule receiver
ENTRY e {
  t = token[] after-all()
  r = (f32[3], u32[], token[]) recv(t), channel_id=7
  d = (f32[3], token[]) recv-done(r), channel_id=7
  ROOT v = f32[3] get-tuple-element(d), index=0
}
"""


def exchange(pairs: str, channel_id: int | None) -> str:
    """Every device sends x on the channel, then receives (the pairs say who to whom);
    channel_id None: no channel_id attribute (optional in XLA's parser)."""
    attr = f'frontend_attributes={{_xla_send_recv_source_target_pairs="{pairs}"}}'
    if channel_id is not None:
        attr = f"channel_id={channel_id}, {attr}"
    return f"""HloModule exchange
ENTRY e {{
  x = f32[2] parameter(0)
  t = token[] after-all()
  s = (f32[2], u32[], token[]) send(x, t), {attr}
  sd = token[] send-done(s), {attr}
  r = (f32[2], u32[], token[]) recv(sd), {attr}
  d = (f32[2], token[]) recv-done(r), {attr}
  ROOT v = f32[2] get-tuple-element(d), index=0
}}
"""


# -- send / recv ----------------------------------------------------------------------------------


def test_send_recv_between_two_computations():
    client = Client(timeout=5)
    sender, receiver = client.compile(SENDER), client.compile(RECEIVER)
    assert sender(f32(1, 2, 3)) is TOKEN
    same(receiver(), f32(1, 2, 3))


def test_receiver_waits_for_a_sender_running_later():
    client = Client(timeout=5)
    sender, receiver = client.compile(SENDER), client.compile(RECEIVER)
    got = []
    thread = threading.Thread(target=lambda: got.append(receiver()))
    thread.start()
    time.sleep(0.1)
    sender(f32(4, 5, 6))
    thread.join(5)
    same(got[0], f32(4, 5, 6))


def test_channels_of_replicas_do_not_mix():
    # Without source-target pairs a channel stays on its device: replica r's receiver gets
    # replica r's value.
    client = Client(timeout=5)
    sender = client.compile(SENDER, replicas=2)
    receiver = client.compile(RECEIVER, replicas=2)
    sender.execute([[f32(0, 0, 0)], [f32(1, 1, 1)]])
    got = receiver.execute([[], []])
    same(got[0], f32(0, 0, 0))
    same(got[1], f32(1, 1, 1))


def test_send_recv_between_replicas():
    # channel_id=0: the pairs name replicas. Replica 0 sends to replica 1; replica 0 is the
    # target of no pair and receives zeros; replica 1's send has no target and is dropped.
    exe = Client(timeout=5).compile(exchange("{{0,1}}", 0), replicas=2)
    got = exe.execute([[f32(1, 2)], [f32(3, 4)]])
    same(got[0], f32(0, 0))
    same(got[1], f32(1, 2))


def test_send_recv_ring_of_three_replicas():
    exe = Client(timeout=5).compile(exchange("{{0,1},{1,2},{2,0}}", 0), replicas=3)
    got = exe.execute([[f32(r, r)] for r in range(3)])
    assert [float(g[0]) for g in got] == [2.0, 0.0, 1.0]


def test_send_recv_between_partitions():
    # channel_id > 0: the pairs name partitions (within the sender's replica), as XLA's
    # GPU runtime reads them.
    exe = Client(timeout=5).compile(exchange("{{0,1},{1,0}}", 1), replicas=2, partitions=2)
    got = exe.execute([[f32(10 * r + p, 0)] for r in range(2) for p in range(2)])
    assert [float(g[0]) for g in got] == [1.0, 0.0, 11.0, 10.0]


# -- without channel_id (optional in XLA's parser): one unnamed channel, replica mode -----------

NO_CHANNEL = """HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  t = token[] after-all()
  s = (f32[2], u32[], token[]) send(x, t)
  sd = token[] send-done(s)
  r = (f32[2], u32[], token[]) recv(sd)
  d = (f32[2], token[]) recv-done(r)
  ROOT v = f32[2] get-tuple-element(d), index=0
}
"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_send_recv_without_channel_id(backend):
    from xlapy.parser import parse_hlo_module
    from xlapy.verifier import verify_module

    module = parse_hlo_module(NO_CHANNEL)
    verify_module(module)
    text = module.to_string()
    assert "channel_id" not in text
    assert parse_hlo_module(text).to_string() == text
    same(Client(backend=backend, timeout=5).compile(NO_CHANNEL)(f32(1, 2)), f32(1, 2))


def test_send_recv_without_channel_id_between_replicas():
    # no channel_id: the pairs name replicas, as an absent channel id means cross-replica
    exe = Client(timeout=5).compile(exchange("{{0,1},{1,0}}", None), replicas=2)
    got = exe.execute([[f32(1, 2)], [f32(3, 4)]])
    same(got[0], f32(3, 4))
    same(got[1], f32(1, 2))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_host_transfers_without_channel_id(backend):
    text = NO_CHANNEL
    for op in ("send(x, t)", "send-done(s)", "recv(sd)", "recv-done(r)"):
        text = text.replace(op, op + ", is_host_transfer=true")
    client = Client(backend=backend, timeout=5)
    client.send_to_device(None, f32(5, 6))
    same(client.compile(text)(f32(1, 2)), f32(5, 6))
    same(client.receive_from_device(None), f32(1, 2))


def test_recv_without_channel_id_times_out_naming_it():
    text = NO_CHANNEL.replace("  s = (f32[2], u32[], token[]) send(x, t)\n  sd = token[] "
                              "send-done(s)\n", "").replace("recv(sd)", "recv(t)")
    with pytest.raises(EvaluationError, match="nothing arrived on the channel without channel_id"):
        Client(timeout=0.2).compile(text)(f32(1, 2))


def test_recv_without_sender_times_out_quickly():
    exe = Client(timeout=0.3).compile(RECEIVER)
    start = time.monotonic()
    with pytest.raises(EvaluationError, match=r"recv-done: nothing arrived on channel 7 within "
                       r"0.3 s \(instruction %d expects f32\[3\]\)"):
        exe()
    assert time.monotonic() - start < 2


# -- host transfers ----------------------------------------------------------------------------------

HOST = """HloModule host
ENTRY e {
  x = f32[2] parameter(0)
  t = token[] after-all()
  r = (s32[], u32[], token[]) recv(t), channel_id=3, is_host_transfer=true
  d = (s32[], token[]) recv-done(r), channel_id=3, is_host_transfer=true
  k = s32[] get-tuple-element(d), index=0
  kf = f32[] convert(k)
  b = f32[2] broadcast(kf), dimensions={}
  y = f32[2] multiply(x, b)
  t2 = token[] get-tuple-element(d), index=1
  s = (f32[2], u32[], token[]) send(y, t2), channel_id=2, is_host_transfer=true
  sd = token[] send-done(s), channel_id=2, is_host_transfer=true
  ROOT v = f32[2] add(y, y)
}
"""


def test_host_transfers_both_ways():
    client = Client(timeout=5)
    exe = client.compile(HOST)
    client.send_to_device(3, np.int32(5))
    same(exe(f32(1, 2)), f32(10, 20))
    same(np.asarray(client.receive_from_device(2)), f32(5, 10))


def test_host_transfers_per_replica():
    client = Client(timeout=5)
    exe = client.compile(HOST, replicas=2)
    client.send_to_device(3, 2, replica=0)
    client.send_to_device(3, 3, replica=1)
    exe.execute([[f32(1, 1)], [f32(1, 1)]])
    same(np.asarray(client.receive_from_device(2, replica=0)), f32(2, 2))
    same(np.asarray(client.receive_from_device(2, replica=1)), f32(3, 3))


def test_host_recv_timeout_says_how_to_send():
    exe = Client(timeout=0.2).compile(HOST)
    with pytest.raises(EvaluationError, match=r"recv-done: nothing arrived from the host on "
                       r"channel 3 for replica 0 within 0.2 s .*Client.send_to_device\(3, "):
        exe(f32(1, 2))


def test_receive_from_device_timeout():
    with pytest.raises(EvaluationError, match=r"host channel 9 from replica 0: nothing "
                       r"arrived within 0.05 s"):
        Client().receive_from_device(9, timeout=0.05)


# -- infeed / outfeed ---------------------------------------------------------------------------------

FEEDS = """HloModule feeds
ENTRY e {
  t = token[] after-all()
  in = ((f32[2], s32[]), token[]) infeed(t)
  data = (f32[2], s32[]) get-tuple-element(in), index=0
  x = f32[2] get-tuple-element(data), index=0
  n = s32[] get-tuple-element(data), index=1
  t2 = token[] get-tuple-element(in), index=1
  y = f32[2] add(x, x)
  o = token[] outfeed(y, t2)
  ROOT r = s32[] multiply(n, n)
}
"""


def test_infeed_outfeed_round_trip_per_replica():
    client = Client(timeout=5)
    exe = client.compile(FEEDS, replicas=2)
    client.infeed(0, (f32(1, 2), np.int32(3)))
    client.infeed(1, (f32(5, 6), np.int32(4)))
    got = exe.execute([[], []])
    assert [int(g) for g in got] == [9, 16]
    same(client.outfeed(0), f32(2, 4))
    same(client.outfeed(1), f32(10, 12))


def test_infeed_queue_feeds_successive_executions():
    client = Client(timeout=5)
    exe = client.compile(FEEDS)
    for n in (1, 2, 3):
        client.infeed(0, (f32(n, n), np.int32(n)))
    assert [int(exe()) for _ in range(3)] == [1, 4, 9]
    assert [float(client.outfeed(0)[0]) for _ in range(3)] == [2.0, 4.0, 6.0]


def test_infeed_fed_while_running():
    client = Client(timeout=5)
    exe = client.compile(FEEDS)
    feeder = threading.Timer(0.1, lambda: client.infeed(0, (f32(1, 1), np.int32(7))))
    feeder.start()
    assert int(exe()) == 49
    feeder.join()


def test_empty_infeed_times_out():
    exe = Client(timeout=0.2).compile(FEEDS)
    start = time.monotonic()
    with pytest.raises(EvaluationError, match=r"infeed: nothing arrived on the infeed queue"):
        exe()
    assert time.monotonic() - start < 2


def test_empty_outfeed_times_out():
    with pytest.raises(EvaluationError, match=r"outfeed of replica 1: nothing arrived within "
                       r"0.05 s"):
        Client().outfeed(1, timeout=0.05)
