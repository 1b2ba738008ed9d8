"""The collectives of devices running as threads of one process: ``ThreadedCollectives``
(a CollectivesBackend), the state one execution's devices share (``ExecutionState``: who
finished, who waits where, abort), and the pure combination helpers every backend can reuse
(``combine_*``: what a member receives, given every member's contribution in group order).

Rendezvous: each collective call deposits the caller's values in a slot keyed by
``(group.key, group.devices, occurrence)``. ``group.key`` names the instruction (opcode,
channel_id, instruction name); ``occurrence`` counts how many times this device has reached
that instruction in this execution, so a collective inside a while loop meets its peers once
per iteration. When every member has deposited, each member computes its own result from the
contributions (in group order, so every member gets the same bits).

Nothing waits forever. A waiting member gives up with an EvaluationError naming the
instruction (opcode and name) and the missing devices when
- a missing member finished its program without reaching the collective (immediately),
- every unfinished device of the execution waits in a collective that cannot complete
  (a deadlock, detected immediately),
- ``ctx.options.timeout`` seconds passed (a peer busy elsewhere, e.g. blocked on a feed),
- another device failed: the runtime calls ``abort`` and every waiter raises
  RendezvousAbortedError.

After ``abort`` every collective call fails at once (``check_abort``), so a device the
runtime left running when it gave up on the execution (a straggler, see Executable.execute)
can never meet a device of another execution or deliver stale data.

collective-permute is point to point: the sender leaves its values in a mailbox keyed by
(instruction, sender, receiver, occurrence) and goes on; the receiver waits for them.

Values: a member's contributions are read by the other members after the member's own call
may have returned (the last to arrive folds last; a permute's receiver reads the mailbox
later), so a caller must pass arrays it never writes afterwards. The interpreter's values
are never written in place; a caller passing views of memory it reuses (a compiled loop's
workspace) passes copies instead.

Compiled callers (the CPU backend's native collectives, xlapy/backends/cpu/collectives.py)
meet in memory of their own: ``shared(key, make)`` gives every device of the execution the
same object (made once), ``state`` is the ExecutionState they wait on when a peer is late,
and ``ExecutionState.on_abort`` tells them when the execution is given up.

Imports the interpreter only (never the client).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from xlapy.interpreter.collectives_backend import (
    CollectiveGroup,
    CollectivesBackend,
    Permutation,
    ragged_local_update,
)
from xlapy.interpreter.evaluator import EvaluationError

Device = tuple[int, int]  # (replica_id, partition_id)


class RendezvousAbortedError(EvaluationError):
    """A device stopped waiting because another device of the execution failed."""


class CollectiveTimeoutError(EvaluationError):
    """A collective, channel or feed waited longer than the execution's timeout, or a device
    did not finish within the timeout of another device finishing."""


class DeadlockError(EvaluationError):
    """Every unfinished device waits in a collective that can never complete."""


def device_label(device: Device, partitions: int) -> str:
    """``replica 1`` (one partition) or ``replica 1 partition 0``."""
    replica, partition = device
    if partitions <= 1:
        return f"replica {replica}"
    return f"replica {replica} partition {partition}"


def _labels(devices, partitions: int) -> str:
    names = [device_label(d, partitions) for d in devices]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def describe_instr(instr) -> str:
    return f"{instr.opcode} %{instr.name}"


# -- the state of one execution ----------------------------------------------------------------


@dataclass
class _Wait:
    what: str                      # "all-reduce %ar (for replica 1)"
    ready: Callable[[], bool]


class ExecutionState:
    """What the devices of one execution share. All fields are guarded by ``cond``.

    ``devices``: every (replica, partition) that runs; ``finished``: device -> None when its
    program completed, or the error text when it failed; ``first_finish``: when the first
    device completed its program (time.monotonic()); ``waiting``: device -> what it waits
    for; ``abort_reason``: set once by ``abort``."""

    def __init__(self, devices: Sequence[Device], partitions: int = 1):
        self.cond = threading.Condition()
        self.devices = tuple(devices)
        self.partitions = partitions
        self.finished: dict[Device, str | None] = {}
        self.first_finish: float | None = None
        self.waiting: dict[Device, _Wait] = {}
        self.abort_reason: str | None = None
        self.running_at_abort: tuple[Device, ...] = ()
        self._abort_hooks: list[Callable[[], None]] = []

    def label(self, device: Device) -> str:
        return device_label(device, self.partitions)

    def finish(self, device: Device, error: str | None = None) -> None:
        """``device`` completed its program (``error``: it failed with this message)."""
        with self.cond:
            self.finished[device] = error
            if error is None and self.first_finish is None:
                self.first_finish = time.monotonic()
            self.cond.notify_all()

    def abort(self, reason: str) -> None:
        """Release every waiter with a RendezvousAbortedError saying ``reason``. The devices
        neither finished nor waiting in a collective then (computing, or blocked on a
        channel or feed) are kept in ``running_at_abort``. The ``on_abort`` hooks run once,
        holding ``cond``."""
        with self.cond:
            if self.abort_reason is None:
                self.abort_reason = reason
                self.running_at_abort = tuple(d for d in self.devices if d not in self.finished
                                              and d not in self.waiting)
                for hook in self._abort_hooks:
                    hook()
            self.cond.notify_all()

    def on_abort(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` when the execution is aborted (at once if it was already)."""
        with self.cond:
            self._abort_hooks.append(hook)
            if self.abort_reason is not None:
                hook()

    def check_abort(self, what: str) -> None:
        if self.abort_reason is not None:
            raise RendezvousAbortedError(f"{what}: abandoned because {self.abort_reason}")

    def _deadlock(self) -> str | None:
        """A description of the deadlock, if every unfinished device waits and nobody's
        wait can be satisfied."""
        live = [d for d in self.devices if d not in self.finished]
        if not live or any(d not in self.waiting for d in live):
            return None
        if any(self.waiting[d].ready() for d in live):
            return None
        return "; ".join(f"{self.label(d)} waits in {self.waiting[d].what}" for d in live)

    def wait(self, device: Device, what: str, ready: Callable[[], bool],
             missing: Callable[[], list[Device]], timeout: float | None) -> None:
        """Block (holding ``cond``) until ``ready()``; ``missing()`` lists the devices whose
        part has not arrived. Raises instead of waiting forever (see the module docstring)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.waiting[device] = _Wait(f"{what} (for {_labels(missing(), self.partitions)})",
                                     ready)
        try:
            while not ready():
                self.check_abort(what)
                absent = missing()
                gone = [d for d in absent if d in self.finished]
                if gone:
                    failed = [d for d in gone if self.finished[d] is not None]
                    how = "failed before reaching it" if failed else \
                        "finished its program without reaching it" if len(gone) == 1 else \
                        "finished their programs without reaching it"
                    raise EvaluationError(
                        f"{what}: {_labels(gone, self.partitions)} {how}; "
                        f"{self.label(device)} waited for "
                        f"{_labels(absent, self.partitions)} (the devices executed this "
                        f"collective a different number of times)")
                self.waiting[device].what = f"{what} (for {_labels(absent, self.partitions)})"
                deadlock = self._deadlock()
                if deadlock is not None:
                    raise DeadlockError(f"{what}: deadlock: {deadlock}")
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise CollectiveTimeoutError(
                            f"{what}: timed out after {timeout:g} s on {self.label(device)} "
                            f"waiting for {_labels(absent, self.partitions)}")
                    self.cond.wait(remaining)
                else:
                    self.cond.wait()
        finally:
            del self.waiting[device]


# -- combination helpers (shared by every backend) -------------------------------------------


def reduce_values(ctx, reducer, arrays: Sequence[np.ndarray], what: str) -> np.ndarray:
    """Fold ``arrays`` (one per member, in group order) with the scalar computation
    ``reducer`` applied elementwise: ((a0 + a1) + a2) + ...; the result keeps the dtype and
    shape of ``arrays[0]``. A context with ``fold_values(reducer, arrays, what)`` (a compiled
    caller's: the same fold by its kernels) folds them itself unless that returns None."""
    from xlapy.interpreter.kernels.reduction import apply_computation

    fold = getattr(ctx, "fold_values", None)
    if fold is not None:
        got = fold(reducer, arrays, what)
        if got is not None:
            return got

    acc = np.asarray(arrays[0])
    for other in arrays[1:]:
        other = np.asarray(other)
        if other.shape != acc.shape:
            raise EvaluationError(f"{what}: members contributed arrays of dimensions "
                                  f"{list(acc.shape)} and {list(other.shape)}")
        (acc,) = apply_computation(ctx, reducer, [acc, other], acc.shape, what)[:1]
    return np.array(acc, dtype=np.asarray(arrays[0]).dtype, copy=True)


def combine_all_reduce(ctx, instr, reducer, contributions: Sequence[Sequence]) -> list:
    """Every operand reduced over the members (``contributions[j]``: member j's operand
    values)."""
    what = describe_instr(instr)
    return [reduce_values(ctx, reducer, [c[i] for c in contributions], what)
            for i in range(len(contributions[0]))]


def combine_all_gather(contributions: Sequence[Sequence], dimension: int) -> list:
    """Every operand concatenated along ``dimension`` in group order."""
    return [np.concatenate([np.asarray(c[i]) for c in contributions], axis=dimension)
            for i in range(len(contributions[0]))]


def split_blocks(instr, array, count: int, dimension: int) -> list[np.ndarray]:
    """``array`` cut into ``count`` equal blocks along ``dimension``."""
    array = np.asarray(array)
    size = array.shape[dimension]
    if size % count:
        raise EvaluationError(f"{describe_instr(instr)}: dimension {dimension} of size {size} "
                              f"does not split into {count} equal blocks")
    return np.split(array, count, axis=dimension)


def combine_reduce_scatter(ctx, instr, reducer, contributions, dimension: int,
                           rank: int) -> list:
    """All-reduce, then block ``rank`` of ``dimension`` cut into one block per member."""
    reduced = combine_all_reduce(ctx, instr, reducer, contributions)
    return [np.ascontiguousarray(split_blocks(instr, r, len(contributions), dimension)[rank])
            for r in reduced]


def combine_all_to_all(instr, contributions, rank: int, split_dimension: int | None) -> list:
    """Array form: block ``rank`` of every member's operand, concatenated along the split
    dimension in group order. Tuple form (None): value ``rank`` of every member."""
    size = len(contributions)
    if split_dimension is None:
        for c in contributions:
            if len(c) != size:
                raise EvaluationError(f"{describe_instr(instr)}: the tuple form needs one "
                                      f"operand per group member ({size}), got {len(c)}")
        return [np.asarray(c[rank]) for c in contributions]
    blocks = [split_blocks(instr, c[0], size, split_dimension)[rank] for c in contributions]
    return [np.concatenate(blocks, axis=split_dimension)]


def combine_collective_broadcast(contributions, root: int) -> list:
    """Every member receives the root's values."""
    return [np.array(v, copy=True) for v in contributions[root]]


def combine_ragged_all_to_all(instr, contributions, rank: int):
    """The receiver's output: its own output operand with every sender's rows for it."""
    return ragged_local_update(instr, contributions[rank], rank,
                               [(j, c) for j, c in enumerate(contributions)])


# -- the backend ----------------------------------------------------------------------------------


@dataclass
class _Slot:
    size: int
    values: list = field(default_factory=list)
    present: list = field(default_factory=list)
    left: int = 0

    def __post_init__(self):
        self.values = [None] * self.size
        self.present = [False] * self.size

    @property
    def complete(self) -> bool:
        return all(self.present)


class ThreadedCollectives(CollectivesBackend):
    """Collectives between the devices of one execution, each device a thread calling the
    same method with its own values. Create one per execution (the occurrence counters
    start at zero) around an ExecutionState; put it in every device's
    ``EvalOptions.collectives``.

    >>> state = ExecutionState([(0, 0), (1, 0)])
    >>> backend = ThreadedCollectives(state)
    """

    #: Every device runs in this process (compiled callers may meet in shared memory).
    in_process = True

    def __init__(self, state: ExecutionState):
        self.state = state
        self._slots: dict[tuple, _Slot] = {}
        self._mail: dict[tuple, list] = {}
        self._counters: dict[tuple, int] = {}
        self._shared: dict = {}

    def shared(self, key, make: Callable[[], object], what: str):
        """The object of this execution named ``key``: ``make()``'s result, made by the first
        device asking (every device asking with the same key gets the same object). ``what``
        names the asking instruction in the error raised once the execution was aborted."""
        with self.state.cond:
            self.state.check_abort(what)
            got = self._shared.get(key)
            if got is None:
                got = self._shared[key] = make()
            return got

    def _next(self, device: Device, key: tuple) -> int:
        n = self._counters.get((device, key), 0)
        self._counters[(device, key)] = n + 1
        return n

    def _rendezvous(self, ctx, instr, group: CollectiveGroup, values: list) -> list:
        """Every member's values, in group order."""
        state, me = self.state, group.me
        what = describe_instr(instr)
        base = (group.key, group.devices)
        with state.cond:
            state.check_abort(what)
            key = base + (self._next(me, base),)
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot(group.size)
            slot.values[group.rank] = list(values)
            slot.present[group.rank] = True
            state.cond.notify_all()

            def missing():
                return [d for d, here in zip(group.devices, slot.present) if not here]

            state.wait(me, what, lambda: slot.complete, missing, ctx.options.timeout)
            contributions = list(slot.values)
            slot.left += 1
            if slot.left == slot.size:
                del self._slots[key]
        return contributions

    # The CollectivesBackend interface.

    def all_reduce(self, ctx, instr, values, group, reducer):
        contributions = self._rendezvous(ctx, instr, group, values)
        return combine_all_reduce(ctx, instr, reducer, contributions)

    def all_gather(self, ctx, instr, values, group, dimension):
        return combine_all_gather(self._rendezvous(ctx, instr, group, values), dimension)

    def reduce_scatter(self, ctx, instr, values, group, dimension, reducer):
        contributions = self._rendezvous(ctx, instr, group, values)
        return combine_reduce_scatter(ctx, instr, reducer, contributions, dimension, group.rank)

    def all_to_all(self, ctx, instr, values, group, split_dimension):
        if split_dimension is None and len(values) != group.size:
            raise EvaluationError(f"{describe_instr(instr)}: the tuple form needs one operand "
                                  f"per group member ({group.size}), got {len(values)}")
        contributions = self._rendezvous(ctx, instr, group, values)
        return combine_all_to_all(instr, contributions, group.rank, split_dimension)

    def ragged_all_to_all(self, ctx, instr, values, group):
        contributions = self._rendezvous(ctx, instr, group, values)
        return combine_ragged_all_to_all(instr, contributions, group.rank)

    def collective_broadcast(self, ctx, instr, values, group, root):
        contributions = self._rendezvous(ctx, instr, group, values)
        return combine_collective_broadcast(contributions, root)

    def collective_permute(self, ctx, instr, values, perm: Permutation):
        state = self.state
        me = (perm.replica_id, perm.partition_id)
        what = describe_instr(instr)
        with state.cond:
            state.check_abort(what)
            target, source = perm.target, perm.source
            if target is not None:
                to = perm.device_of(target)
                n = self._next(me, (perm.key, "send", to))
                self._mail[(perm.key, me, to, n)] = list(values)
                state.cond.notify_all()
            if source is None:
                return None
            sender = perm.device_of(source)
            n = self._next(me, (perm.key, "recv", sender))
            key = (perm.key, sender, me, n)
            state.wait(me, what, lambda: key in self._mail,
                       lambda: [] if key in self._mail else [sender], ctx.options.timeout)
            return self._mail.pop(key)


__all__ = [
    "CollectiveTimeoutError",
    "DeadlockError",
    "ExecutionState",
    "RendezvousAbortedError",
    "ThreadedCollectives",
    "combine_all_gather",
    "combine_all_reduce",
    "combine_all_to_all",
    "combine_collective_broadcast",
    "combine_ragged_all_to_all",
    "combine_reduce_scatter",
    "describe_instr",
    "device_label",
    "reduce_values",
    "split_blocks",
]
