"""Channels, host transfers and feeds of the in-process runtime.

A Client owns one ``ChannelTable``: every queue that outlives a single execution.

- Device-to-device ``send``/``recv`` pair by channel id, one queue per (channel id, sender
  device, receiver device), so executions of two different computations (a sender and a
  receiver) and several replicas never mix their data. Which device a send goes to:
  * with the frontend attribute ``_xla_send_recv_source_target_pairs="{{0,1},{1,2}}"`` (what
    XLA writes on send/recv it makes from collective-permute), as XLA's GPU runtime reads
    it: the pairs name replica ids when ``channel_id=0`` and partition ids (within the
    sender's replica) otherwise; a send whose device is no source drops its data, a recv
    whose device is no target receives zeros;
  * without it, the send and the recv of a channel run on the same device (replica and
    partition), possibly in different computations or executions (the spec: "a Send in
    another computation sharing the same channel handle").
- Host transfers (``is_host_transfer=true``): the device's ``send`` puts its value on a
  queue the caller reads with ``Client.receive_from_device(channel_id, replica)``; the
  device's ``recv`` reads what the caller put with ``Client.send_to_device(channel_id,
  value, replica)``. One queue per (channel id, device) and direction.
- Infeed and outfeed: one queue per device (``Client.infeed(replica, value)``,
  ``Client.outfeed(replica)``).

Every blocking read waits at most the execution's timeout and gives up at once when
another device of the execution failed (``WaitableQueue``). Once an execution is aborted,
its devices can neither read nor write any of these queues: a device left running after
its execution failed must not take values meant for a later execution nor leave stale ones.
Imports the interpreter and threaded_collectives only.
"""

from __future__ import annotations

import queue
import re
import threading
import time

from xlapy.interpreter.evaluator import EvaluationError
from xlapy.runtime.threaded_collectives import (
    CollectiveTimeoutError,
    ExecutionState,
    RendezvousAbortedError,
    device_label,
)

Device = tuple[int, int]
PAIRS_ATTRIBUTE = "_xla_send_recv_source_target_pairs"
_POLL = 0.02  # seconds between checks of the abort flag while blocked on a queue


class WaitableQueue:
    """A queue.Queue seen by one device of one execution: ``get(timeout)`` raises
    queue.Empty after the timeout (the kernels turn that into their own message);
    ``get`` and ``put`` raise RendezvousAbortedError once the execution is aborted."""

    def __init__(self, q: queue.Queue, state: ExecutionState | None, what: str):
        self.queue = q
        self.state = state
        self.what = what

    def _check_abort(self) -> None:
        if self.state is not None and self.state.abort_reason is not None:
            raise RendezvousAbortedError(
                f"{self.what}: abandoned because {self.state.abort_reason}")

    def put(self, item, block: bool = True, timeout: float | None = None) -> None:
        self._check_abort()
        self.queue.put(item, block, timeout)

    def get(self, block: bool = True, timeout: float | None = None):
        self._check_abort()
        if self.state is None or not block:
            return self.queue.get(block, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = _POLL if deadline is None else min(_POLL, max(0.0, deadline - time.monotonic()))
            try:
                return self.queue.get(True, wait)
            except queue.Empty:
                pass
            self._check_abort()
            if deadline is not None and time.monotonic() >= deadline:
                raise queue.Empty

    def get_nowait(self):
        self._check_abort()
        return self.queue.get_nowait()

    def empty(self) -> bool:
        return self.queue.empty()

    def qsize(self) -> int:
        return self.queue.qsize()


def parse_pairs(text: str, instr) -> list[tuple[int, int]]:
    """``{{0,1},{1,2}}`` -> [(0, 1), (1, 2)]."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise EvaluationError(f"{instr.opcode} %{instr.name}: {PAIRS_ATTRIBUTE}={text!r} is not "
                              f"a list of {{source,target}} pairs")
    inner = body[1:-1].strip()
    pairs = re.findall(r"\{[ \t\n\r]*([0-9]+)[ \t\n\r]*,[ \t\n\r]*([0-9]+)[ \t\n\r]*\}", inner)
    rebuilt = ",".join(f"{{{s},{t}}}" for s, t in pairs)
    if rebuilt != re.sub(r"[ \t\n\r]+", "", inner):
        raise EvaluationError(f"{instr.opcode} %{instr.name}: {PAIRS_ATTRIBUTE}={text!r} is not "
                              f"a list of {{source,target}} pairs")
    return [(int(s), int(t)) for s, t in pairs]


def channel_peer(instr, me: Device) -> Device | None:
    """The device at the other end of send/recv ``instr`` run by device ``me``: the peer
    ``_xla_send_recv_source_target_pairs`` names (replica ids when channel_id is 0, partition
    ids otherwise, as XLA reads them), ``me`` itself when there are no pairs, None when the
    pairs give this device no peer (a send then drops its data, a recv gets zeros)."""
    text = _pairs_text(instr)
    if text is None:
        return me
    pairs = parse_pairs(text, instr)
    by_partition = (instr.attrs.get("channel_id") or 0) > 0
    mine = me[1] if by_partition else me[0]
    if instr.opcode in ("send", "send-done"):
        found = [t for s, t in pairs if s == mine]
    else:
        found = [s for s, t in pairs if t == mine]
    if not found:
        return None
    return (me[0], found[0]) if by_partition else (found[0], me[1])


def _pairs_text(instr) -> str | None:
    """The source-target pairs of a send/recv(-done): on the instruction itself or, for a
    -done, on the send/recv it completes."""
    text = instr.frontend_attributes.get(PAIRS_ATTRIBUTE)
    if text is None and instr.opcode in ("recv-done", "send-done") and instr.operands:
        start = instr.operands[0]
        if start.opcode in ("recv", "send"):
            text = start.frontend_attributes.get(PAIRS_ATTRIBUTE)
    return text


def channel_key(channel_id) -> int | None:
    """The key of a channel: its id, or None for a send/recv without ``channel_id`` (the
    attribute is optional in XLA's parser; those pair with each other, in replica mode as
    an absent channel id means in XLA's collectives)."""
    return None if channel_id is None else int(channel_id)


def channel_text(channel_id) -> str:
    return "the channel without channel_id" if channel_id is None else f"channel {channel_id}"


class ChannelTable:
    """The queues of a Client (see the module docstring). Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queues: dict[tuple, queue.Queue] = {}

    def queue(self, *key) -> queue.Queue:
        with self._lock:
            q = self._queues.get(key)
            if q is None:
                q = self._queues[key] = queue.Queue()
            return q

    def device_channel(self, channel_id: int, sender: Device, receiver: Device) -> queue.Queue:
        return self.queue("channel", channel_id, sender, receiver)

    def to_device(self, channel_id: int, device: Device) -> queue.Queue:
        """Host -> device values for a ``recv ... is_host_transfer=true``."""
        return self.queue("host-to-device", channel_id, device)

    def from_device(self, channel_id: int, device: Device) -> queue.Queue:
        """Device -> host values of a ``send ... is_host_transfer=true``."""
        return self.queue("device-to-host", channel_id, device)

    def infeed(self, device: Device) -> queue.Queue:
        return self.queue("infeed", device)

    def outfeed(self, device: Device) -> queue.Queue:
        return self.queue("outfeed", device)


class DeviceChannels(dict):
    """``EvalOptions.channels`` of one device in one execution: the send/recv kernels call
    ``queue_for(ctx, instr)`` (xlapy/interpreter/kernels/collectives.py). Still a dict, so
    code that uses plain channel-id keys keeps working."""

    def __init__(self, table: ChannelTable, device: Device, state: ExecutionState | None,
                 partitions: int = 1):
        super().__init__()
        self.table = table
        self.device = device
        self.state = state
        self.partitions = partitions

    def queue_for(self, ctx, instr) -> WaitableQueue | None:
        channel_id = channel_key(instr.attrs.get("channel_id"))
        sending = instr.opcode in ("send", "send-done")
        me = self.device
        peer = channel_peer(instr, me)
        if peer is None:
            return None
        sender, receiver = (me, peer) if sending else (peer, me)
        q = self.table.device_channel(channel_id, sender, receiver)
        what = (f"{instr.opcode} %{instr.name} on {channel_text(channel_id)} "
                f"({device_label(sender, self.partitions)} -> "
                f"{device_label(receiver, self.partitions)})")
        return WaitableQueue(q, self.state, what)


def host_transfer_hooks(table: ChannelTable, device: Device, state: ExecutionState | None,
                        timeout: float | None, partitions: int = 1):
    """``(host_send, host_recv)`` for EvalOptions: host transfers through the table's
    per-device host queues."""
    label = device_label(device, partitions)

    def host_send(channel_id, value):
        WaitableQueue(table.from_device(channel_key(channel_id), device), state,
                      f"send on host {channel_text(channel_id)}").put(value)

    def host_recv(channel_id, shape):
        q = WaitableQueue(table.to_device(channel_key(channel_id), device), state,
                          f"recv-done on host {channel_text(channel_id)}")
        try:
            return q.get(timeout=timeout)
        except queue.Empty:
            replica, partition = device
            where = f"{replica}" if partitions <= 1 else f"{replica}, partition={partition}"
            raise CollectiveTimeoutError(
                f"recv-done: nothing arrived from the host on {channel_text(channel_id)} for "
                f"{label} within {timeout:g} s (expected {shape.to_string(print_layout=False)};"
                f" the host sends with Client.send_to_device({channel_id}, value, "
                f"replica={where}))") from None

    return host_send, host_recv


__all__ = ["PAIRS_ATTRIBUTE", "ChannelTable", "DeviceChannels", "WaitableQueue", "channel_key",
           "channel_peer", "channel_text", "host_transfer_hooks", "parse_pairs"]
