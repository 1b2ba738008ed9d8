"""No device waits forever (the spec's AllReduce warning: a replica that executes a
collective more times than another waits forever in XLA). A peer that finished without
reaching the collective and a real deadlock are reported at once, naming the instruction
and the missing replicas; a peer busy elsewhere makes the waiter time out after the
Client's timeout; a failing device releases the others. Every test runs the execution
under a watchdog so a regression fails instead of hanging."""

import re
import threading
import time

import numpy as np
import pytest
from runtime_helpers import ADD, f32, hlo

import xlapy
from xlapy.interpreter import EvalOptions, evaluate
from xlapy.interpreter.custom_calls import unregister_custom_call
from xlapy.runtime import (
    Client,
    CollectiveTimeoutError,
    DeadlockError,
    ExecutionError,
    ExecutionState,
    ThreadedCollectives,
)


def within(seconds: float, fn):
    """Run ``fn`` in a thread; fail if it has not returned after ``seconds``. Returns
    (result or raised exception, elapsed seconds)."""
    out = []

    def target():
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out.append(e)

    start = time.monotonic()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: a hang"
    return out[0], time.monotonic() - start


LOOP = ADD + """
cond {
  p = (s32[], f32[2], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] get-tuple-element(p), index=2
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[2], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[2] get-tuple-element(p), index=1
  n = s32[] get-tuple-element(p), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ars = f32[2] all-reduce(v), replica_groups={}, to_apply=add
  ROOT t = (s32[], f32[2], s32[]) tuple(j, ars, n)
}
"""


def loop_module(trip_count: str) -> str:
    """A while loop with an all-reduce in its body, running ``trip_count`` iterations
    (instruction lines ending in %n)."""
    return hlo(f"  x = f32[2] parameter(0)\n{trip_count}\n  zero = s32[] constant(0)\n"
               "  init = (s32[], f32[2], s32[]) tuple(zero, x, n)\n"
               "  w = (s32[], f32[2], s32[]) while(init), condition=cond, body=body\n"
               "  ROOT v = f32[2] get-tuple-element(w), index=1", LOOP)


def test_replica_looping_longer_is_told_at_once():
    # Replica r runs r + 1 iterations: replica 1's second all-reduce has no partner.
    text = loop_module("  rid = u32[] replica-id()\n  r = s32[] convert(rid)\n"
                       "  one = s32[] constant(1)\n  n = s32[] add(r, one)")
    exe = Client(timeout=30).compile(text, replicas=2)
    err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)], [f32(3, 4)]]))
    assert isinstance(err, ExecutionError), err
    assert str(err) == ("replica 1: all-reduce %ars: replica 0 finished its program without "
                        "reaching it; replica 1 waited for replica 0 (the devices executed this "
                        "collective a different number of times)")
    assert elapsed < 3  # not the 30 s timeout


def test_spec_scenario_loop_condition_from_infeed():
    # The spec: a while loop whose condition depends on infeed data that makes one replica
    # iterate more often than another.
    text = loop_module("  t = token[] after-all()\n  in = (s32[], token[]) infeed(t)\n"
                       "  n = s32[] get-tuple-element(in), index=0")
    client = Client(timeout=30)
    exe = client.compile(text, replicas=3)
    for replica, n in enumerate((2, 3, 2)):
        client.infeed(replica, np.int32(n))
    err, elapsed = within(10, lambda: exe.execute([[f32(1, 1)]] * 3))
    assert isinstance(err, ExecutionError)
    # whichever of replicas 0 and 2 is seen finished first is named
    assert re.match(r"replica 1: all-reduce %ars: replica [02]( and replica 2)? finished "
                    r"(its program|their programs) without reaching it; replica 1 waited for "
                    r"replica 0 and replica 2", str(err)), str(err)
    assert elapsed < 3


def test_different_collectives_deadlock_is_reported():
    # Replica 0 takes the branch with %ar_a, replica 1 the one with %ar_b: neither can
    # complete, which is seen as soon as both wait.
    comps = ADD + """
branch_a {
  a = f32[2] parameter(0)
  ROOT ar_a = f32[2] all-reduce(a), replica_groups={}, to_apply=add
}
branch_b {
  b = f32[2] parameter(0)
  ROOT ar_b = f32[2] all-reduce(b), replica_groups={}, to_apply=add
}
"""
    text = hlo("  x = f32[2] parameter(0)\n  rid = u32[] replica-id()\n"
               "  zero = u32[] constant(0)\n  first = pred[] compare(rid, zero), direction=EQ\n"
               "  ROOT c = f32[2] conditional(first, x, x), true_computation=branch_a, "
               "false_computation=branch_b", comps)
    exe = Client(timeout=30).compile(text, replicas=2)
    err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)], [f32(3, 4)]]))
    assert isinstance(err, ExecutionError)
    assert isinstance(err.__cause__, DeadlockError)
    message = str(err)
    assert "deadlock: " in message
    assert "replica 0 waits in all-reduce %ar_a (for replica 1)" in message
    assert "replica 1 waits in all-reduce %ar_b (for replica 0)" in message
    assert elapsed < 3


def test_collective_permute_without_its_sender():
    comps = """
permute {
  a = f32[2] parameter(0)
  ROOT cp = f32[2] collective-permute(a), source_target_pairs={{0,1}}
}
identity {
  ROOT b = f32[2] parameter(0)
}
"""
    text = hlo("  x = f32[2] parameter(0)\n  rid = u32[] replica-id()\n"
               "  one = u32[] constant(1)\n  second = pred[] compare(rid, one), direction=EQ\n"
               "  ROOT c = f32[2] conditional(second, x, x), true_computation=permute, "
               "false_computation=identity", comps)
    exe = Client(timeout=30).compile(text, replicas=2)
    err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)], [f32(3, 4)]]))
    assert str(err).startswith("replica 1: collective-permute %cp: replica 0 finished its "
                               "program without reaching it")
    assert elapsed < 3


def test_busy_peer_times_out_naming_the_collective():
    def slow(x, ctx):
        if ctx.options.replica_id == 1:
            time.sleep(1.0)
        return x

    xlapy.register_custom_call("test_deadlock_slow", slow)
    try:
        text = hlo("  x = f32[2] parameter(0)\n"
                   "  cc = f32[2] custom-call(x), custom_call_target=\"test_deadlock_slow\"\n"
                   "  ROOT ar = f32[2] all-reduce(cc), replica_groups={}, to_apply=add")
        exe = Client(timeout=0.2).compile(text, replicas=2)
        err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)], [f32(3, 4)]]))
        assert isinstance(err, ExecutionError)
        assert isinstance(err.__cause__, CollectiveTimeoutError)
        assert str(err).startswith("replica 0: all-reduce %ar: timed out after 0.2 s on "
                                   "replica 0 waiting for replica 1\n")
        # execute did not wait for replica 1's sleep (tests/runtime/test_stragglers.py)
        assert err.unfinished == {(1, 0): 'running custom-call %cc "test_deadlock_slow"'}
        assert elapsed < 1
        # once its sleep is over, replica 1 reaches the all-reduce and is released at once
        deadline = time.monotonic() + 5
        while exe.broken is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert exe.broken is None
    finally:
        unregister_custom_call("test_deadlock_slow")


def test_failure_releases_peers_even_without_timeout():
    def boom(x, ctx):
        if ctx.options.replica_id == 2:
            raise RuntimeError("boom")
        return x

    xlapy.register_custom_call("test_deadlock_boom", boom)
    try:
        text = hlo("  x = f32[2] parameter(0)\n"
                   "  cc = f32[2] custom-call(x), custom_call_target=\"test_deadlock_boom\"\n"
                   "  ROOT ar = f32[2] all-reduce(cc), replica_groups={}, to_apply=add")
        exe = Client(timeout=None).compile(text, replicas=3)
        err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)]] * 3))
        assert str(err).startswith("replica 2: custom-call 'test_deadlock_boom'")
        assert elapsed < 3
    finally:
        unregister_custom_call("test_deadlock_boom")


def test_blocked_recv_is_released_when_a_peer_fails():
    # Replica 0 waits on a channel nobody sends on; replica 1 fails: replica 0 stops waiting.
    text = hlo("  x = f32[2] parameter(0)\n  t = token[] after-all()\n"
               "  r = (f32[2], u32[], token[]) recv(t), channel_id=5\n"
               "  d = (f32[2], token[]) recv-done(r), channel_id=5\n"
               "  v = f32[2] get-tuple-element(d), index=0\n"
               "  ROOT y = f32[2] custom-call(v), custom_call_target=\"test_deadlock_missing\"",
               comps="")
    exe = Client(timeout=30).compile(text, replicas=2)
    client = exe.client
    # replica 1 gets its value and then fails on the unregistered custom call
    client.channels.device_channel(5, (1, 0), (1, 0)).put(f32(0, 0))
    err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)]] * 2))
    assert str(err).startswith("replica 1: custom-call: no custom-call target named "
                               "'test_deadlock_missing'")
    assert "abandoned because replica 1 failed" in str(err.errors[(0, 0)])
    assert elapsed < 3


def test_threaded_collectives_with_evaluate_directly():
    # The backend on its own: two evaluations in threads share one ThreadedCollectives; a
    # replica that never starts makes the other time out with a clear message.
    text = hlo("  x = f32[2] parameter(0)\n"
               "  ROOT ar = f32[2] all-reduce(x), replica_groups={}, to_apply=add")
    module = xlapy.parse_hlo_module(text)

    def replica(backend, r, x, results):
        results[r] = evaluate(module, x, options=EvalOptions(
            replica_id=r, replica_count=2, collectives=backend, timeout=5))

    backend = ThreadedCollectives(ExecutionState([(0, 0), (1, 0)]))
    results = {}
    threads = [threading.Thread(target=replica, args=(backend, r, f32(r, 1), results))
               for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    np.testing.assert_array_equal(results[0], f32(1, 2))
    np.testing.assert_array_equal(results[1], f32(1, 2))

    lonely = ThreadedCollectives(ExecutionState([(0, 0), (1, 0)]))
    start = time.monotonic()
    with pytest.raises(CollectiveTimeoutError, match=r"all-reduce %ar: timed out after 0.3 s "
                       r"on replica 0 waiting for replica 1"):
        evaluate(module, f32(1, 2), options=EvalOptions(replica_count=2, collectives=lonely,
                                                        timeout=0.3))
    assert time.monotonic() - start < 2
