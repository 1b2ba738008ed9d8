"""A stuck replica does not hold ``execute`` past the timeout (issue 12, item 6).

A replica still computing while another waits for it (in a collective, or at the end of the
execution) makes ``execute`` raise its timeout error on time, naming the replica and what it
runs. The replica's thread cannot be killed: it runs on, detached, its results discarded,
every collective, channel or feed it reaches failing at once, interpreted while loops
stopping at their next iteration; until it ends, the executable says it is broken and
refuses to run. One device is never cut short (nobody waits for it).

A blocking custom call (released by the test) plays the stuck replica; every execution runs
under a watchdog so that a regression fails instead of hanging."""

import threading
import time

import numpy as np
import pytest
from runtime_helpers import ADD, f32, hlo, same

import xlapy
from xlapy.interpreter.custom_calls import unregister_custom_call
from xlapy.runtime import Client, CollectiveTimeoutError, ExecutionError


def within(seconds: float, fn):
    """(what ``fn`` returned or raised, elapsed seconds); fails if it runs past ``seconds``."""
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


def wait_until(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def blocker():
    """The custom-call target "test_straggler_block": replica 1 blocks in it until the test
    sets ``release`` (at most 20 s); the other replicas pass through."""
    release = threading.Event()

    def block(x, ctx):
        if ctx.options.replica_id == 1:
            release.wait(20)
        return x

    xlapy.register_custom_call("test_straggler_block", block)
    try:
        yield release
    finally:
        release.set()
        unregister_custom_call("test_straggler_block")


BLOCKED = '  cc = f32[2] custom-call(x), custom_call_target="test_straggler_block"\n'


def test_replica_stuck_before_a_collective(blocker):
    text = hlo("  x = f32[2] parameter(0)\n" + BLOCKED
               + "  ROOT ar = f32[2] all-reduce(cc), replica_groups={}, to_apply=add")
    exe = Client(timeout=1).compile(text, replicas=2)
    err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)], [f32(3, 4)]]))
    assert elapsed < 2  # the 1 s timeout and a short grace, not the 20 s block
    assert isinstance(err, ExecutionError) and isinstance(err.__cause__, CollectiveTimeoutError)
    assert str(err) == (
        "replica 0: all-reduce %ar: timed out after 1 s on replica 0 waiting for replica 1\n"
        "left running, detached (results discarded; see Executable.broken): replica 1 "
        "(running custom-call %cc \"test_straggler_block\")")
    assert err.device == (0, 0)
    assert err.unfinished == {(1, 0): 'running custom-call %cc "test_straggler_block"'}

    # The executable says it is broken, and refuses to run, while replica 1 runs on.
    assert exe.broken == (
        "an earlier execution of m failed and left devices running: replica 1 (running "
        "custom-call %cc \"test_straggler_block\"). They run on, detached, until their "
        "programs end (their results are discarded); until then this executable cannot run")
    with pytest.raises(ExecutionError, match=r"^execute: an earlier execution of m failed and "
                       r"left devices running: replica 1 \(running custom-call %cc"):
        exe.execute([[f32(1, 2)], [f32(3, 4)]])

    # Released, replica 1 reaches the all-reduce: it fails at once (no wait for the timeout)
    # instead of meeting anyone; then the executable runs again.
    blocker.set()
    assert wait_until(lambda: exe.broken is None, 0.8)
    outs = exe.execute([[f32(1, 2)], [f32(3, 4)]])
    same(outs[0], f32(4, 6))
    same(outs[1], f32(4, 6))


def test_replica_stuck_at_the_end(blocker):
    # No collective: the end of the execution is where replica 0 waits for replica 1.
    text = hlo("  x = f32[2] parameter(0)\n" + BLOCKED
               + "  ROOT y = f32[2] add(cc, x)", comps="")
    exe = Client(timeout=1).compile(text, replicas=2)
    err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)], [f32(3, 4)]]))
    assert elapsed < 2
    assert isinstance(err, ExecutionError) and isinstance(err.__cause__, CollectiveTimeoutError)
    assert str(err).startswith(
        "replica 1: timed out: still running custom-call %cc \"test_straggler_block\" 1 s "
        "after replica 0 finished\n")
    assert err.device == (1, 0)
    assert "replica 1 (running custom-call" in exe.broken
    blocker.set()
    assert wait_until(lambda: exe.broken is None, 2)


def test_a_straggler_takes_and_leaves_nothing_in_feeds(blocker):
    # Replica 1 is left behind before its outfeed and infeed: when it goes on, both fail at
    # once, so the value queued for the next execution stays and no stale output appears.
    text = hlo("  x = f32[2] parameter(0)\n" + BLOCKED
               + "  t = token[] after-all()\n"
               "  out = token[] outfeed(cc, t), outfeed_shape=f32[2]{0}\n"
               "  in = (f32[2], token[]) infeed(out)\n"
               "  ROOT v = f32[2] get-tuple-element(in), index=0", comps="")
    client = Client(timeout=0.5)
    exe = client.compile(text, replicas=2)
    client.infeed(0, f32(5, 6))
    err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)], [f32(3, 4)]]))
    assert isinstance(err, ExecutionError) and elapsed < 1.5
    same(client.outfeed(0), f32(1, 2))
    client.infeed(1, f32(7, 8))  # for a later execution
    blocker.set()
    assert wait_until(lambda: exe.broken is None, 2)
    assert client.channels.outfeed((1, 0)).empty()
    assert client.channels.infeed((1, 0)).qsize() == 1


ENDLESS = ADD + """
forever {
  p = s32[] parameter(0)
  r = u32[] replica-id()
  one = u32[] constant(1)
  ROOT go = pred[] compare(r, one), direction=EQ
}
step {
  p = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT q = s32[] add(p, one)
}
"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_endless_replica_is_stopped(backend):
    # Replica 1 loops forever, replica 0 waits in the all-reduce after the loop: execute
    # returns after the timeout, and replica 1's loop stops at its next iteration.
    text = hlo("  x = f32[2] parameter(0)\n  z = s32[] constant(0)\n"
               "  w = s32[] while(z), condition=forever, body=step\n"
               "  wf = f32[] convert(w)\n  wb = f32[2] broadcast(wf), dimensions={}\n"
               "  y = f32[2] add(x, wb)\n"
               "  ROOT ar = f32[2] all-reduce(y), replica_groups={}, to_apply=add", ENDLESS)
    exe = Client(backend, timeout=1).compile(text, replicas=2)
    err, elapsed = within(10, lambda: exe.execute([[f32(1, 2)], [f32(3, 4)]]))
    assert elapsed < 2
    assert str(err) == (
        "replica 0: all-reduce %ar: timed out after 1 s on replica 0 waiting for replica 1\n"
        "stopped when the execution failed: replica 1 (in while %w)")
    assert err.unfinished == {(1, 0): "stopped in while %w"}
    assert "abandoned because replica 0 failed" in str(err.errors[(1, 0)])
    assert exe.broken is None
    assert not [t for t in threading.enumerate() if t.name.startswith("xlapy-replica")]


def test_one_device_is_not_cut_short():
    # Nobody waits for a single device: the timeout does not bound its computing.
    def slow(x):
        time.sleep(0.5)
        return x

    xlapy.register_custom_call("test_straggler_slow", slow)
    try:
        text = hlo("  x = f32[2] parameter(0)\n"
                   '  ROOT cc = f32[2] custom-call(x), custom_call_target="test_straggler_slow"',
                   comps="")
        exe = Client(timeout=0.1).compile(text)
        same(exe(f32(1, 2)), f32(1, 2))
        same(exe.execute([[f32(1, 2)]])[0], f32(1, 2))
    finally:
        unregister_custom_call("test_straggler_slow")


def test_balanced_devices_are_not_cut_short():
    # Two replicas computing longer than the timeout, finishing together, are fine.
    def slow(x):
        time.sleep(0.6)
        return x

    xlapy.register_custom_call("test_straggler_both", slow)
    try:
        text = hlo("  x = f32[2] parameter(0)\n"
                   '  cc = f32[2] custom-call(x), custom_call_target="test_straggler_both"\n'
                   "  ROOT ar = f32[2] all-reduce(cc), replica_groups={}, to_apply=add")
        outs = Client(timeout=0.3).compile(text, replicas=2).execute([[f32(1, 2)],
                                                                      [f32(3, 4)]])
        same(outs[0], f32(4, 6))
    finally:
        unregister_custom_call("test_straggler_both")


def test_results_of_a_straggler_are_discarded(blocker):
    # Two executions of one module: the first's straggler, released while the second runs on
    # a fresh executable, changes nothing of the second's results.
    text = hlo("  x = f32[2] parameter(0)\n" + BLOCKED
               + "  ROOT ar = f32[2] all-reduce(cc), replica_groups={}, to_apply=add")
    client = Client(timeout=0.5)
    first = client.compile(text, replicas=2)
    err, _ = within(10, lambda: first.execute([[f32(1, 2)], [f32(3, 4)]]))
    assert isinstance(err, ExecutionError)
    second = client.compile(text, replicas=2)
    assert second.broken is None
    blocker.set()
    outs = second.execute([[np.float32([10, 20])], [np.float32([30, 40])]])
    same(outs[0], f32(40, 60))
    same(outs[1], f32(40, 60))
    assert wait_until(lambda: first.broken is None, 2)
