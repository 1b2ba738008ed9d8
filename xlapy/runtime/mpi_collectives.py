"""Collectives over MPI: a CollectivesBackend for runs with one device per MPI rank.

Owns ``MpiCollectives`` (the backend the MPI runner, xlapy/runtime/mpi_run.py, plugs into
``EvalOptions.collectives``), its communicator cache, and the timed waits that keep one
failing or stuck rank from hanging the others forever.

Devices and ranks: device (replica r, partition p) runs on rank ``r * num_partitions + p``
of the backend's communicator (so with one partition, replica r is rank r, and a flattened
device id is the rank).

Communicators: an instruction's replica groups, resolved for every device of the run with
the same rules as the in-process runtime (``collectives_backend.collective_group``), give a
*group set* (a tuple of rank tuples, in group order). The first collective over a group set
makes one sub-communicator per group with ``comm.Split(color=group index, key=position in
the group)`` - so rank ``i`` of the sub-communicator is member ``i`` of the group in the
instruction's order - and caches it per group set; later instructions over the same groups
reuse it (``stats`` counts splits and cache hits). One group of every rank in rank order
(``replica_groups={}``) is the communicator itself (no split). Before a split, the ranks
meet in a timed non-blocking barrier, so a rank that never arrives is reported instead of
blocking ``Split``.

Matching: MPI matches the n-th collective call on a communicator with every member's n-th
call, whatever instruction made it. So that members that reached different collectives
(diverging control flow) fail instead of exchanging mismatched data, each collective
carries a hash of its instruction (``check_matching``, on by default): inside the data of
small all-gathers and folded all-reduces, else as one extra 8-byte ``Iallgather`` first.
collective-permute uses the hash as its message tag.

How each collective maps onto MPI (all data moves as raw bytes, so every element type -
bf16, f8, int4, pred - travels unchanged):

- all-reduce: when the reduction computation is one of add, multiply, maximum, minimum,
  and, or, xor of its two parameters and MPI's built-in operation is exact for the element
  type, ``Iallreduce`` with MPI_SUM/PROD/MAX/MIN/BAND/BOR/BXOR: integer add (and 32/64-bit
  multiply) on the unsigned view of the bits (two's complement wrap-around, as XLA),
  integer max/min, bitwise ops on integers and pred. Any other computation (floats - whose
  sum depends on the order -, float max/min - NaN and -0 -, custom reducers) is evaluated
  by the interpreter in group order, as the in-process runtime does, so the results are
  bit for bit the same: a left fold ``((v0 op v1) op v2) ...`` of the members' values per
  element. Small arrays are all-gathered (``Iallgather``) and folded by every rank; large
  ones (above ``chunked_threshold`` bytes) are folded in pieces: ``Ialltoall`` gives
  member j the j-th of n equal pieces of every member's value (zero-padded to a multiple
  of n elements), member j folds it in group order, and ``Iallgather`` assembles the
  reduced pieces (the per-element fold order is unchanged).
- all-gather: ``Iallgather``, concatenated along the dimension in group order.
- reduce-scatter: ``Ireduce_scatter_block`` with a built-in op where exact, else
  ``Ialltoall`` of the blocks and a group-order fold of the block each member keeps.
- all-to-all: ``Ialltoall`` of the blocks (array form) or of the operands (tuple form).
- ragged-all-to-all: every member's operands are all-gathered, then each applies the
  updates addressed to it (``ragged_local_update``, shared with the in-process runtime).
- collective-permute: non-blocking send to the target and receive from the source
  (a Sendrecv pair split in two halves, on a duplicated communicator so it never matches
  channel traffic); a device that no pair targets gets zeros (the kernel does that).
- collective-broadcast: ``Ibcast`` from the root over the group's communicator.

Checks (each raised as an EvaluationError naming the instruction, on every rank alike, so
no rank waits for one that failed): groups naming devices outside the run, a device in two
groups or in none, groups of different sizes (XLA's verifier allows that only for
all-reduce), a dimension that does not split into the group size. (The runner applies the
in-process runtime's compile-time checks first, so most of these never get this far.)

Timeouts: every wait polls its non-blocking requests and gives up after
``ctx.options.timeout`` seconds (None: a blocking wait) with an EvaluationError saying what
it waited for; the MPI runner then aborts the whole job (``MPI_Abort``), so ``mpiexec``
exits non-zero with the message printed. After such an error the communicators of this
backend are in an undefined state: do not reuse it. Polling spins for ``spin`` seconds
(0.2 ms; 0 when this host runs more ranks than the process has cores, where spinning only
steals the core from the rank being waited for), then sleeps between tests.

Bounded-dynamic operands (the array's shape is the runtime shape) are exchanged as pickled
arrays, so members may hold different runtime sizes.

mpi4py is imported lazily (``pip install xlapy[mpi]``): importing this module works
without it. Imports numpy, the interpreter core, the collectives interface and the CPU
backend's buffer pool.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.interpreter.collectives_backend import (
    CollectiveGroup,
    CollectivesBackend,
    Permutation,
    collective_group,
    ragged_local_update,
)
from xlapy.interpreter.evaluator import EvaluationError

#: Opcodes whose replica groups may differ in size (XLA's verifier: all-reduce only).
_NON_UNIFORM_OK = {"all-reduce", "all-reduce-start"}


def import_mpi():
    """mpi4py's MPI module, or an InvalidArgumentError saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise InvalidArgumentError(
            "the MPI runtime needs mpi4py and an MPI library: pip install 'xlapy[mpi]' "
            f"(mpi4py and the mpich wheel, which provides mpiexec); import failed: {e}"
        ) from None
    return MPI


# -- raw bytes ---------------------------------------------------------------------------------


def as_bytes(a) -> np.ndarray:
    """A C-contiguous array's storage as a flat uint8 array (a view when possible)."""
    a = np.ascontiguousarray(a)
    return a.reshape(-1).view(np.uint8)


def contiguous(value) -> np.ndarray:
    """``value`` as a C-contiguous array of its own shape (``np.ascontiguousarray`` turns a
    0-d array into shape (1,), which would make scalar collectives return 1-element
    arrays)."""
    return np.ascontiguousarray(value).reshape(np.shape(value))


def empty_like_bytes(shape: tuple[int, ...], dtype) -> tuple[np.ndarray, np.ndarray]:
    """A new array and its flat byte view (the receive buffer). Large ones come from the
    CPU backend's buffer pool (xlapy/backends/cpu/buffers.py: recycled once nobody holds
    them, so a collective in a loop does not fault in fresh pages every time)."""
    from xlapy.backends.cpu.buffers import POOL

    out = POOL.empty(shape, dtype)
    return out, out.reshape(-1).view(np.uint8)


# -- exact MPI reductions ---------------------------------------------------------------------

_BINARY_REDUCERS = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")


_OPCODE_OF: dict[int, tuple] = {}  # id(reducer) -> (reducer, its opcode or None)


def reducer_opcode(reducer) -> str | None:
    """The opcode when ``reducer`` is ``op(p0, p1)`` (or ``op(p1, p0)``) of its two
    parameters and nothing else, for one of the commutative ops MPI has; else None
    (remembered per computation: collectives in loops ask every time)."""
    if reducer is None:
        return None
    got = _OPCODE_OF.get(id(reducer))
    if got is not None and got[0] is reducer:
        return got[1]
    op = None
    if reducer.num_parameters == 2:
        root = reducer.root
        if root.opcode in _BINARY_REDUCERS and len(reducer.instructions) == 3:
            numbers = sorted(o.parameter_number for o in root.operands
                             if o.opcode == "parameter")
            op = root.opcode if numbers == [0, 1] else None
    if len(_OPCODE_OF) >= 256:
        _OPCODE_OF.clear()
    _OPCODE_OF[id(reducer)] = (reducer, op)  # holds the reducer: its id stays its own
    return op


def _is_numpy_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu" and dtype.type.__module__ == "numpy" and dtype.itemsize in (1, 2, 4, 8)


def exact_mpi_reduction(reducer, dtype) -> tuple[str, np.dtype] | None:
    """(MPI op name, dtype to view the data as) when MPI's built-in operation gives exactly
    XLA's result for ``reducer`` on ``dtype``, else None (the interpreter folds instead).

    Integer add runs as MPI_SUM on the unsigned view (wrap-around is defined for unsigned C
    types and gives the two's complement bits); multiply likewise for 32/64-bit (narrower
    unsigned types are promoted to int in C, where overflow is undefined); max/min on the
    signed or unsigned type itself; and/or/xor bitwise. pred: and/min = BAND, or/max = BOR,
    xor = BXOR on the 0/1 bytes. Floats never: the order of a sum changes its rounding, and
    MPI's max/min do not propagate NaN or order -0 and +0 as XLA does."""
    op = reducer_opcode(reducer)
    if op is None:
        return None
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        name = {"and": "BAND", "minimum": "BAND", "or": "BOR", "maximum": "BOR",
                "xor": "BXOR"}.get(op)
        return None if name is None else (name, np.dtype(np.uint8))
    if not _is_numpy_int(dtype):
        return None
    unsigned = np.dtype(f"u{dtype.itemsize}")
    if op == "add":
        return "SUM", unsigned
    if op == "multiply":
        return ("PROD", unsigned) if dtype.itemsize >= 4 else None
    if op in ("maximum", "minimum"):
        return ("MAX" if op == "maximum" else "MIN"), dtype
    return {"and": "BAND", "or": "BOR", "xor": "BXOR"}[op], unsigned


# -- group sets ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupSet:
    """Every group of one instruction as MPI ranks (in group order), and where this rank
    is: ``index`` of its group and its ``position`` in it."""

    groups: tuple[tuple[int, ...], ...]
    index: int
    position: int

    @property
    def mine(self) -> tuple[int, ...]:
        return self.groups[self.index]


@dataclass
class Stats:
    """Counters of the communicator cache (evidence that each group set splits once)."""

    splits: int = 0
    cache_hits: int = 0
    world_uses: int = 0
    group_sets: list = field(default_factory=list)


def resolve_group_set(module, instr, size: int, num_partitions: int, rank: int) -> GroupSet:
    """The groups of ``instr`` as ranks of a ``size``-rank run (device (r, p) = rank
    r * num_partitions + p), resolved for every device with the interpreter's own rules
    (``collective_group``), and where ``rank`` is. Raises an EvaluationError naming the
    instruction - identically on every rank - when the groups do not fit the run: ids
    outside it, a device in two groups or in none, groups of different sizes (XLA's
    verifier allows that only for all-reduce). Needs no MPI."""
    replicas = max(size // num_partitions, module.replica_count if module is not None else 1)
    partitions = max(num_partitions, module.num_partitions if module is not None else 1)
    if replicas * partitions != size:
        raise EvaluationError(
            f"{instr.opcode}: the module runs {replicas} replica(s) x {partitions} "
            f"partition(s) but the MPI job has {size} ranks (instruction %{instr.name}); "
            f"launch mpiexec -n {replicas * partitions}")
    groups_attr = instr.attrs["replica_groups"]
    where = f"replica_groups={groups_attr.to_text()} (instruction %{instr.name})"
    run = f"the run of {replicas} replica(s) x {partitions} partition(s) ({size} MPI ranks)"
    named = [int(i) for g in groups_attr.expand().groups for i in g]
    limit = {"replicas": replicas, "partitions": partitions}.get(_id_kind(instr), size)
    outside = sorted({i for i in named if not 0 <= i < limit})
    if outside:
        raise EvaluationError(f"{instr.opcode}: {where} names id(s) {outside} outside {run}")
    by_rank: list[tuple[int, ...] | None] = []
    for r in range(size):
        replica, partition = divmod(r, partitions)
        fake = SimpleNamespace(module=module, options=SimpleNamespace(
            replica_id=replica, partition_id=partition, replica_count=replicas,
            num_partitions=partitions))
        group = collective_group(fake, instr, allow_outside=True)
        by_rank.append(None if group is None else
                       tuple(rep * partitions + part for rep, part in group.devices))
    groups: list[tuple[int, ...]] = []
    for ranks in by_rank:
        if ranks is not None and ranks not in groups:
            groups.append(ranks)
    seen: set[int] = set()
    for g in groups:
        for r in g:
            if r in seen or g.count(r) > 1:
                raise EvaluationError(
                    f"{instr.opcode}: rank {r} is in more than one replica group of {where}")
            seen.add(r)
    missing = [r for r, g in enumerate(by_rank) if g is None]
    if missing:
        raise EvaluationError(f"{instr.opcode}: rank(s) {missing} of {run} are in no replica "
                              f"group of {where}")
    if len({len(g) for g in groups}) > 1 and instr.opcode not in _NON_UNIFORM_OK:
        raise EvaluationError(
            f"{instr.opcode}: replica groups must all have the same size (XLA's verifier: only "
            f"all-reduce allows uneven groups); {where} has groups of sizes "
            f"{', '.join(str(len(g)) for g in groups)}")
    mine = by_rank[rank]
    return GroupSet(tuple(groups), groups.index(mine), mine.index(rank))


class MpiCollectives(CollectivesBackend):
    """The collectives of one device per MPI rank (see the module docstring).

    >>> backend = MpiCollectives()            # MPI.COMM_WORLD, one partition
    >>> evaluate(module, x, options=EvalOptions(replica_id=backend.rank,
    ...          replica_count=backend.size, collectives=backend))
    """

    #: all-reduces of more bytes than this (per member) fold in pieces (see the docstring).
    chunked_threshold = 1 << 16

    def __init__(self, comm=None, *, num_partitions: int = 1, timeout: float | None = 60.0,
                 check_matching: bool = True, spin: float | None = None,
                 poll_interval: float = 2e-4):
        mpi = import_mpi()
        self.MPI = mpi
        self.comm = mpi.COMM_WORLD if comm is None else comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        if num_partitions < 1 or self.size % num_partitions:
            raise InvalidArgumentError(
                f"MpiCollectives: {self.size} MPI ranks do not split into {num_partitions} "
                f"partitions per replica")
        self.num_partitions = num_partitions
        self.replica_count = self.size // num_partitions
        self.poll_interval = poll_interval
        # Waiting: spin on MPI_Testall for ``spin`` seconds (fast when every rank has a core),
        # then sleep between tests. With more ranks on this host than cores, spinning only
        # steals the core from the rank being waited for: sleep at once.
        self.spin = (0.0 if _oversubscribed(self.size) else 2e-4) if spin is None else spin
        self.check_matching = check_matching
        # Own communicators (Idup + a timed wait: a rank that never starts is an error here
        # rather than a hang): collective-permute's point-to-point traffic, channels
        # (MpiChannels), and the runner's final gather of the results, so none of them can
        # ever match another's messages or a collective of the program.
        dups = [self.comm.Idup() for _ in range(3)]
        (self.p2p, _), (self.channel_comm, _), (self.results_comm, _) = dups
        self.wait_requests([r for _, r in dups], timeout, lambda: EvaluationError(
            f"MpiCollectives: rank {self.rank} waited {timeout:g} s for the other ranks to "
            f"start (duplicating the communicator)"))
        self.pending_sends: list = []  # (request, buffer, description) of channel sends
        self._comms: dict[tuple, Any] = {}
        self._group_sets: dict[int, tuple[Any, GroupSet]] = {}
        self._hashes: dict[int, tuple[Any, bytes]] = {}
        self.stats = Stats()

    # -- ranks and groups --------------------------------------------------------------------

    def device_rank(self, device: tuple[int, int]) -> int:
        replica, partition = device
        return replica * self.num_partitions + partition

    @property
    def replica_id(self) -> int:
        return self.rank // self.num_partitions

    @property
    def partition_id(self) -> int:
        return self.rank % self.num_partitions

    def group_set(self, ctx, instr) -> GroupSet:
        """The instruction's groups for every device of the run (cached per instruction)."""
        cached = self._group_sets.get(id(instr))
        if cached is not None and cached[0] is instr:
            return cached[1]
        gs = self._resolve_group_set(ctx, instr)
        self._group_sets[id(instr)] = (instr, gs)  # keeps instr alive, so its id stays unique
        return gs

    def _resolve_group_set(self, ctx, instr) -> GroupSet:
        return resolve_group_set(ctx.module, instr, self.size, self.num_partitions, self.rank)

    def group_comm(self, ctx, instr, gs: GroupSet):
        """The communicator of this rank's group (rank i = member i), made by one
        ``comm.Split`` per group set and cached."""
        key = gs.groups
        comm = self._comms.get(key)
        if comm is not None:
            self.stats.cache_hits += 1
            return comm
        if key == (tuple(range(self.size)),):
            comm = self.comm
            self.stats.world_uses += 1
        else:
            # Every rank takes part in Split: meet first in a timed barrier so a rank that never
            # comes is an error, not a hang.
            self.wait(ctx, instr, [self.comm.Ibarrier()],
                      "every rank to reach this instruction (to split its communicator)")
            comm = self.comm.Split(gs.index, gs.position)
            self.stats.splits += 1
            self.stats.group_sets.append(key)
        self._comms[key] = comm
        return comm

    def _enter(self, ctx, instr, group: CollectiveGroup, fused: bool = False):
        """(group set, group communicator) of this collective; with ``check_matching``, the
        members first exchange a hash of the instruction (one small Iallgather), so members
        that reached different collectives fail with a message instead of exchanging
        mismatched data (MPI would match any two collectives on one communicator).
        ``fused``: the caller's data exchange carries the hash itself (``gather_array``)."""
        gs = self.group_set(ctx, instr)
        if gs.position != group.rank or len(gs.mine) != group.size:
            raise EvaluationError(
                f"{instr.opcode}: internal error: rank {self.rank} resolved its group as "
                f"{gs.mine} but the kernel gave {group.devices} (instruction %{instr.name})")
        comm = self.group_comm(ctx, instr, gs)
        if self.check_matching and not fused and comm.Get_size() > 1:
            everyone = np.empty(8 * comm.Get_size(), np.uint8)
            mine = np.frombuffer(self._hash_bytes(instr), np.uint8)
            self.wait(ctx, instr, [comm.Iallgather([mine, self.MPI.BYTE],
                                                   [everyone, self.MPI.BYTE])],
                      "the other members to reach this collective")
            self._check_hashes(ctx, instr, comm, everyone.tobytes())
        return gs, comm

    def _hash_bytes(self, instr) -> bytes:
        """``_instr_hash`` as 8 bytes (cached per instruction)."""
        cached = self._hashes.get(id(instr))
        if cached is None or cached[0] is not instr:
            cached = self._hashes[id(instr)] = (instr, _instr_hash(instr).to_bytes(8, "little"))
        return cached[1]

    def _check_hashes(self, ctx, instr, comm, hashes: bytes) -> None:
        """``hashes``: every member's 8-byte instruction hash, concatenated."""
        if hashes == self._hash_bytes(instr) * comm.Get_size():
            return
        names = self.allgather_objects(ctx, instr, comm, f"{instr.opcode} %{instr.name}")
        group = self.group_set(ctx, instr).mine
        where = ", ".join(f"rank {r} in {name}" for r, name in zip(group, names))
        raise EvaluationError(f"{instr.opcode}: the members of the group reached different "
                              f"collectives: {where}")

    def _fuses_check(self, values) -> bool:
        """Whether the data exchange carries the matching check (small all-gathers)."""
        return all(np.asarray(v).nbytes <= self.chunked_threshold for v in values)

    def gather_array(self, ctx, instr, comm, value, what: str) -> np.ndarray:
        """Every member's ``value`` stacked in group order (shape (n, *value.shape)) by one
        Iallgather; with ``check_matching`` each contribution carries the instruction's hash
        in front, checked on arrival (so the check costs no extra collective)."""
        value = contiguous(value)
        n = comm.Get_size()
        if not self.check_matching or n == 1:
            gathered, gbytes = empty_like_bytes((n,) + value.shape, value.dtype)
            self.wait(ctx, instr, [comm.Iallgather([as_bytes(value), self.MPI.BYTE],
                                                   [gbytes, self.MPI.BYTE])], what)
            return gathered
        size = value.nbytes + 8
        send = np.empty(size, np.uint8)
        send[:8] = np.frombuffer(self._hash_bytes(instr), np.uint8)
        send[8:] = as_bytes(value)
        recv = np.empty((n, size), np.uint8)
        self.wait(ctx, instr, [comm.Iallgather([send, self.MPI.BYTE], [recv, self.MPI.BYTE])],
                  what)
        self._check_hashes(ctx, instr, comm, recv[:, :8].tobytes())
        gathered, gbytes = empty_like_bytes((n,) + value.shape, value.dtype)
        gbytes.reshape(n, value.nbytes)[...] = recv[:, 8:]
        return gathered

    # -- waiting ------------------------------------------------------------------------------

    def wait(self, ctx, instr, requests: list, what: str) -> None:
        """Wait for ``requests``, at most ``ctx.options.timeout`` seconds."""
        timeout = getattr(ctx.options, "timeout", None)
        self.wait_requests(requests, timeout, lambda: EvaluationError(
            f"{instr.opcode}: rank {self.rank} waited {timeout:g} s for {what} (instruction "
            f"%{instr.name}); another rank failed, is stuck, or runs a different program"),
            lambda e: EvaluationError(f"{instr.opcode}: MPI error on rank {self.rank}: {e} "
                                      f"(instruction %{instr.name})"))

    def wait_requests(self, requests: list, timeout: float | None, on_timeout,
                      on_error=None) -> None:
        """Poll ``requests`` until all complete; after ``timeout`` seconds raise
        ``on_timeout()``. Spins for ``self.spin`` seconds, then gives up the core between
        tests (``sleep(0)``), then after 10 ms backs off to ``poll_interval`` sleeps."""
        MPI = self.MPI
        try:
            if timeout is None:
                MPI.Request.Waitall(requests)
                return
            if MPI.Request.Testall(requests):
                return
            start = time.monotonic()
            deadline = start + timeout
            spin_until = start + self.spin
            while not MPI.Request.Testall(requests):
                now = time.monotonic()
                if now > deadline:
                    raise on_timeout()
                if now >= spin_until:
                    time.sleep(0 if now - start < 0.01 else self.poll_interval)
        except MPI.Exception as e:
            if on_error is None:
                raise
            raise on_error(e) from None

    # -- object exchange (dynamic shapes, ragged-all-to-all) -----------------------------------

    def allgather_objects(self, ctx, instr, comm, obj) -> list:
        """Every member's ``obj`` (pickled), in rank order, with timeouts."""
        data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
        n = comm.Get_size()
        sizes = np.empty(n, np.int64)
        self.wait(ctx, instr, [comm.Iallgather(np.array([data.size], np.int64), sizes)],
                  "the sizes of the other members' values")
        displs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        recv = np.empty(int(sizes.sum()), np.uint8)
        B = self.MPI.BYTE
        self.wait(ctx, instr, [comm.Iallgatherv([data, B], [recv, (sizes, displs), B])],
                  "the other members' values")
        return [pickle.loads(recv[d:d + s].tobytes()) for d, s in zip(displs, sizes)]

    # -- reductions ---------------------------------------------------------------------------

    @staticmethod
    def fold(ctx, instr, reducer, parts: list) -> np.ndarray:
        """``((parts[0] op parts[1]) op parts[2]) ...`` elementwise: the group-order fold of the
        in-process runtime (its own helper, so the bits are the same)."""
        from xlapy.runtime.threaded_collectives import describe_instr, reduce_values

        return reduce_values(ctx, reducer, parts, describe_instr(instr))

    def _allreduce_one(self, ctx, instr, comm, value, reducer) -> np.ndarray:
        MPI = self.MPI
        value = contiguous(value)
        n = comm.Get_size()
        if n == 1:
            return value
        exact = exact_mpi_reduction(reducer, value.dtype)
        if exact is not None:
            op_name, view = exact
            out = np.empty_like(value)
            self.wait(ctx, instr, [comm.Iallreduce(value.reshape(-1).view(view),
                                                   out.reshape(-1).view(view), getattr(MPI, op_name))],
                      "the other members' contributions")
            return out
        if value.nbytes <= self.chunked_threshold:
            gathered = self.gather_array(ctx, instr, comm, value,
                                         "the other members' contributions")
            return self.fold(ctx, instr, reducer, list(gathered))
        # Large: member j folds piece j of everyone's value, then the pieces are re-assembled.
        # Equal pieces (the value zero-padded to a multiple of n elements; the padding's
        # results are dropped): MPICH's Ialltoall/Iallgather move large blocks in a few
        # progress calls, its -v variants need thousands.
        flat = value.reshape(-1)
        per = -(-flat.size // n)
        if per * n != flat.size:
            padded = np.zeros(per * n, value.dtype)
            padded[:flat.size] = flat
            flat = padded
        pieces, pbytes = empty_like_bytes((n, per), value.dtype)
        self.wait(ctx, instr, [comm.Ialltoall([as_bytes(flat), MPI.BYTE], [pbytes, MPI.BYTE])],
                  "the other members' pieces")
        reduced = np.ascontiguousarray(self.fold(ctx, instr, reducer, list(pieces)))
        out, obytes = empty_like_bytes((n * per,), value.dtype)
        self.wait(ctx, instr, [comm.Iallgather([as_bytes(reduced), MPI.BYTE],
                                               [obytes, MPI.BYTE])],
                  "the other members' reduced pieces")
        return out[:value.size].reshape(value.shape)

    # -- the backend interface ------------------------------------------------------------------

    def all_reduce(self, ctx, instr, values, group, reducer):
        # The check rides on the data when every operand is all-gathered and folded here.
        fused = not _dynamic(instr) and self._fuses_check(values) and all(
            exact_mpi_reduction(reducer, np.asarray(v).dtype) is None for v in values)
        _, comm = self._enter(ctx, instr, group, fused=fused and len(values) > 0)
        if _dynamic(instr):
            everyone = self.allgather_objects(ctx, instr, comm, list(values))
            return [self.fold(ctx, instr, reducer, [v[i] for v in everyone])
                    for i in range(len(values))]
        return [self._allreduce_one(ctx, instr, comm, v, reducer) for v in values]

    def all_gather(self, ctx, instr, values, group, dimension):
        fused = not _dynamic(instr) and self._fuses_check(values) and len(values) > 0
        _, comm = self._enter(ctx, instr, group, fused=fused)
        if _dynamic(instr):
            everyone = self.allgather_objects(ctx, instr, comm, list(values))
            return [np.concatenate([v[i] for v in everyone], axis=dimension)
                    for i in range(len(values))]
        out = []
        for value in values:
            if fused:
                gathered = self.gather_array(ctx, instr, comm, value, "the other members' shards")
            else:
                value = contiguous(value)
                gathered, gbytes = empty_like_bytes((comm.Get_size(),) + value.shape,
                                                    value.dtype)
                self.wait(ctx, instr, [comm.Iallgather([as_bytes(value), self.MPI.BYTE],
                                                       [gbytes, self.MPI.BYTE])],
                          "the other members' shards")
            out.append(np.concatenate(list(gathered), axis=dimension))
        return out

    def reduce_scatter(self, ctx, instr, values, group, dimension, reducer):
        gs, comm = self._enter(ctx, instr, group)
        n = comm.Get_size()
        if _dynamic(instr):
            everyone = self.allgather_objects(ctx, instr, comm, list(values))
            out = []
            for i in range(len(values)):
                reduced = self.fold(ctx, instr, reducer, [v[i] for v in everyone])
                out.append(_blocks(instr, reduced, dimension, n)[gs.position])
            return out
        MPI = self.MPI
        out = []
        for value in values:
            blocks = np.ascontiguousarray(_blocks(instr, np.asarray(value), dimension, n,
                                                  stacked=True))
            block_shape = blocks.shape[1:]
            exact = exact_mpi_reduction(reducer, value.dtype)
            if exact is not None:
                op_name, view = exact
                mine = np.empty(block_shape, value.dtype)
                self.wait(ctx, instr, [comm.Ireduce_scatter_block(
                    blocks.reshape(-1).view(view), mine.reshape(-1).view(view),
                    getattr(MPI, op_name))], "the other members' blocks")
            else:
                received, rbytes = empty_like_bytes(blocks.shape, value.dtype)
                self.wait(ctx, instr, [comm.Ialltoall([as_bytes(blocks), MPI.BYTE],
                                                      [rbytes, MPI.BYTE])],
                          "the other members' blocks")
                mine = self.fold(ctx, instr, reducer, list(received))
            out.append(np.moveaxis(mine, 0, dimension))
        return out

    def all_to_all(self, ctx, instr, values, group, split_dimension):
        gs, comm = self._enter(ctx, instr, group)
        n = comm.Get_size()
        MPI = self.MPI
        if split_dimension is None:  # tuple form: value j goes to member j
            if len(values) != n:
                raise EvaluationError(
                    f"all-to-all: the tuple form sends one operand per member, got "
                    f"{len(values)} operands for a group of {n} (instruction %{instr.name})")
            if _dynamic(instr):
                everyone = self.allgather_objects(ctx, instr, comm, list(values))
                return [v[gs.position] for v in everyone]
            # XLA's shape rule gives every operand one shape: blocks of one size.
            arrays = [contiguous(v) for v in values]
            sbytes = np.concatenate([as_bytes(a) for a in arrays])
            mine = arrays[gs.position]  # every member sends me its operand number <my rank>
            received, rbytes = empty_like_bytes((n,) + mine.shape, mine.dtype)
            self.wait(ctx, instr, [comm.Ialltoall([sbytes, MPI.BYTE], [rbytes, MPI.BYTE])],
                      "the other members' operands")
            return list(received)
        out = []
        for value in values:
            value = np.asarray(value)
            if _dynamic(instr):
                everyone = self.allgather_objects(ctx, instr, comm, value)
                pieces = [_blocks(instr, v, split_dimension, n)[gs.position] for v in everyone]
                out.append(np.concatenate(pieces, axis=split_dimension))
                continue
            blocks = np.ascontiguousarray(_blocks(instr, value, split_dimension, n, stacked=True))
            received, rbytes = empty_like_bytes(blocks.shape, value.dtype)
            self.wait(ctx, instr, [comm.Ialltoall([as_bytes(blocks), MPI.BYTE],
                                                  [rbytes, MPI.BYTE])],
                      "the other members' blocks")
            joined = received.reshape((-1,) + received.shape[2:])
            out.append(np.moveaxis(joined, 0, split_dimension))
        return out

    def ragged_all_to_all(self, ctx, instr, values, group):
        gs, comm = self._enter(ctx, instr, group)
        everyone = self.allgather_objects(ctx, instr, comm, [np.asarray(v) for v in values])
        return ragged_local_update(instr, values, rank=gs.position,
                                   sources=list(enumerate(everyone)))

    def collective_permute(self, ctx, instr, values, perm: Permutation):
        me = self.rank
        source, target = perm.source, perm.target
        limit = self.num_partitions if perm.id_kind == "partitions" else self.replica_count
        for i in (source, target):
            if i is not None and not 0 <= i < limit:
                raise EvaluationError(
                    f"{instr.opcode}: source_target_pairs name {perm.id_kind[:-1]} {i}, outside "
                    f"the run's {limit} {perm.id_kind} (instruction %{instr.name})")
        arrays = [contiguous(v) for v in values]
        if source == perm.me and target == perm.me:
            return [a.copy() for a in arrays]
        src_rank = None if source is None else self.device_rank(perm.device_of(source))
        dst_rank = None if target is None else self.device_rank(perm.device_of(target))
        dynamic = _dynamic(instr)
        tag = _instr_hash(instr) % 30000  # a permute only ever matches the same instruction
        requests, received = [], None
        if dst_rank is not None:
            if dynamic:
                payload = np.frombuffer(pickle.dumps(arrays), np.uint8)
                requests.append(self.p2p.Isend([payload, self.MPI.BYTE], dst_rank, tag))
            else:
                for a in arrays:
                    requests.append(self.p2p.Isend([as_bytes(a), self.MPI.BYTE], dst_rank,
                                                   tag))
        if src_rank is not None and not dynamic:
            received = []
            for a in arrays:
                buf, b = empty_like_bytes(a.shape, a.dtype)
                received.append(buf)
                requests.append(self.p2p.Irecv([b, self.MPI.BYTE], src_rank, tag))
        if src_rank is not None and dynamic:
            received = self._recv_object(ctx, instr, src_rank, tag,
                                         f"the value of rank {src_rank}")
        self.wait(ctx, instr, requests,
                  f"the exchange with rank(s) {sorted({r for r in (src_rank, dst_rank) if r is not None})} "
                  f"(me: rank {me})")
        return received

    def _recv_object(self, ctx, instr, source: int, tag: int, what: str):
        MPI = self.MPI
        status = MPI.Status()
        timeout = getattr(ctx.options, "timeout", None)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.p2p.Iprobe(source, tag, status):
            if deadline is not None and time.monotonic() > deadline:
                raise EvaluationError(f"{instr.opcode}: rank {self.rank} waited {timeout:g} s "
                                      f"for {what} (instruction %{instr.name})")
            time.sleep(0)
        buf = np.empty(status.Get_count(MPI.BYTE), np.uint8)
        self.p2p.Recv([buf, MPI.BYTE], source, tag)
        return pickle.loads(buf.tobytes())

    def collective_broadcast(self, ctx, instr, values, group, root):
        gs, comm = self._enter(ctx, instr, group)
        out = []
        for a in values:
            buf = np.array(a, copy=True, order="C") if gs.position == root else \
                np.empty(np.shape(a), np.asarray(a).dtype)
            self.wait(ctx, instr, [comm.Ibcast([buf.reshape(-1).view(np.uint8), self.MPI.BYTE],
                                               root=root)],
                      f"the broadcast from member {root}")
            out.append(buf)
        return out

    def finish_sends(self, timeout: float | None) -> None:
        """Wait until every channel send of this rank was received (at most ``timeout``
        seconds): the end of a run. A send nobody receives is an error."""
        if not self.pending_sends:
            return
        pending, self.pending_sends = self.pending_sends, []
        what = "; ".join(d for _, _, d in pending)
        self.wait_requests([r for r, _, _ in pending], timeout, lambda: EvaluationError(
            f"rank {self.rank}: channel data was never received within {timeout:g} s: {what}"))

    def free(self) -> None:
        """Free the cached communicators (not the one given to the constructor)."""
        for comm in self._comms.values():
            if comm is not self.comm:
                comm.Free()
        self._comms.clear()
        for comm in (self.p2p, self.channel_comm, self.results_comm):
            comm.Free()


# -- channels ----------------------------------------------------------------------------------------


class MpiChannels(dict):
    """``EvalOptions.channels`` of one rank: send/recv pair as in the in-process runtime
    (xlapy/runtime/channels.py): with the frontend attribute
    ``_xla_send_recv_source_target_pairs`` a send goes to the device its pairs name
    (replica ids when channel_id=0, partition ids of the same replica otherwise; no pair:
    the send drops its data and the recv gets zeros), without it the send and the recv of a
    channel run on the same device. Data for another rank travels as a pickled value with
    ``Isend`` on the backend's channel communicator, tagged with the channel id; the
    receiver probes for it until the timeout (then the recv-done kernel reports that
    nothing arrived). Sends to the rank itself use a local queue."""

    def __init__(self, backend: MpiCollectives):
        super().__init__()
        self.backend = backend
        self.device = (backend.replica_id, backend.partition_id)
        self._local: dict[int, Any] = {}
        self.tag_ub = _tag_upper_bound(backend)

    def queue_for(self, ctx, instr):
        import queue

        from xlapy.runtime.channels import channel_key, channel_peer

        channel_id = channel_key(instr.attrs.get("channel_id"))
        peer = channel_peer(instr, self.device)
        if peer is None:
            return None
        peer_rank = self.backend.device_rank(peer)
        if peer_rank == self.backend.rank:
            return self._local.setdefault(channel_id, queue.Queue())
        if not 0 <= peer_rank < self.backend.size:
            raise EvaluationError(f"{instr.opcode}: channel {channel_id} pairs this device with "
                                  f"{peer}, outside the {self.backend.size}-rank MPI run "
                                  f"(instruction %{instr.name})")
        if channel_id is None:  # no channel_id: MPI's largest tag, kept for it
            return _RemoteEnd(self.backend, self.tag_ub, peer_rank, instr)
        if not 0 <= channel_id < self.tag_ub:
            raise EvaluationError(f"{instr.opcode}: channel id {channel_id} is not below MPI's "
                                  f"largest tag {self.tag_ub}, which xlapy keeps for sends and "
                                  f"recvs without channel_id (instruction %{instr.name})")
        return _RemoteEnd(self.backend, channel_id, peer_rank, instr)


def _tag_upper_bound(backend) -> int:
    value = backend.channel_comm.Get_attr(backend.MPI.TAG_UB)
    return int(value) if value else 32767


class _RemoteEnd:
    """One end of a channel whose other end is another rank (queue-like: put / get)."""

    def __init__(self, backend: MpiCollectives, channel_id: int, peer: int, instr):
        self.backend = backend
        self.channel_id = channel_id
        self.peer = peer
        self.instr = instr

    def put(self, item, block: bool = True, timeout: float | None = None) -> None:
        b = self.backend
        payload = np.frombuffer(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
        request = b.channel_comm.Isend([payload, b.MPI.BYTE], self.peer, self.channel_id)
        what = f"%{self.instr.name} on channel {self.channel_id} to rank {self.peer}"
        b.pending_sends.append((request, payload, what))

    def get(self, block: bool = True, timeout: float | None = None):
        import queue

        b = self.backend
        MPI = b.MPI
        status = MPI.Status()
        deadline = None if timeout is None else time.monotonic() + timeout
        start = time.monotonic()
        while not b.channel_comm.Iprobe(self.peer, self.channel_id, status):
            now = time.monotonic()
            if deadline is not None and now > deadline:
                raise queue.Empty
            time.sleep(0 if now - start < 0.01 else b.poll_interval)
        buf = np.empty(status.Get_count(MPI.BYTE), np.uint8)
        b.channel_comm.Recv([buf, MPI.BYTE], self.peer, self.channel_id)
        return pickle.loads(buf.tobytes())


# -- helpers --------------------------------------------------------------------------------------


def _id_kind(instr) -> str:
    from xlapy.interpreter.collectives_backend import _ID_KIND, _mode

    return _ID_KIND[_mode(instr)]


def _oversubscribed(size: int) -> bool:
    """Whether this host runs more ranks than this process may use cores (mpiexec's
    MPI_LOCALNRANKS, else every rank is taken to be local)."""
    import os

    local = int(os.environ.get("MPI_LOCALNRANKS", size) or size)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return local > cores


def _instr_hash(instr) -> int:
    """A stable number naming an instruction (the same on every rank)."""
    import zlib

    return zlib.crc32(f"{instr.opcode} {instr.name}".encode())




_DYNAMIC: dict[int, tuple] = {}  # id(instr) -> (instr, whether it is dynamic)


def _dynamic(instr) -> bool:
    """Whether any operand has a bounded-dynamic dimension (runtime sizes may differ);
    remembered per instruction."""
    got = _DYNAMIC.get(id(instr))
    if got is not None and got[0] is instr:
        return got[1]
    dynamic = any(leaf.is_array() and leaf.is_dynamic()
                  for o in instr.operands
                  for _, leaf in (o.shape.leaves() if o.shape.is_tuple() else [((), o.shape)]))
    if len(_DYNAMIC) >= 1024:
        _DYNAMIC.clear()
    _DYNAMIC[id(instr)] = (instr, dynamic)
    return dynamic


def _blocks(instr, value: np.ndarray, dimension: int, n: int, stacked: bool = False):
    """``value`` split into ``n`` equal blocks along ``dimension``: a list, or (stacked) one
    array of shape (n, block along dimension, the other dimensions in order)."""
    size = value.shape[dimension]
    if size % n:
        raise EvaluationError(
            f"{instr.opcode}: dimension {dimension} of size {size} does not split into "
            f"{n} equal blocks for the group of {n} (instruction %{instr.name})")
    if not stacked:
        return np.split(value, n, axis=dimension)
    moved = np.moveaxis(value, dimension, 0)
    return moved.reshape((n, size // n) + moved.shape[1:])


__all__ = [
    "GroupSet",
    "MpiChannels",
    "MpiCollectives",
    "Stats",
    "as_bytes",
    "exact_mpi_reduction",
    "import_mpi",
    "reducer_opcode",
    "resolve_group_set",
]
