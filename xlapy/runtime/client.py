"""The in-process runtime: Client, Device, Buffer, Executable (PJRT's shape, in Python).

    client = xlapy.Client()                          # backend="cpu" (DEFAULT_BACKEND)
    exe = client.compile(module, replicas=2)         # Module, XlaComputation or HLO text
    outs = exe.execute([[x0], [x1]])                 # one argument list per device
    y = client.compile(other)(x)                     # one device: call it directly

Devices: an interpreter device is free, so a Client makes as many as an executable needs.
Replica r, partition p runs on device ``p * replicas + r`` (XLA's default assignment);
``execute`` takes and returns one entry per device in logical order ``r * partitions + p``
(PJRT's addressable-device order); see xlapy/runtime/placement.py.

Every device of an execution runs in its own thread (one device: the calling thread) with
its own EvalOptions: replica_id, partition_id, the counts, one ThreadedCollectives shared by
the execution, the Client's channels and feeds, the Client's timeout. When a device fails,
the others are released with an error and ``execute`` raises the first real error
(ExecutionError naming the device).

The timeout bounds how long a device waits for another: in a collective, on a channel or a
feed, and at the end of the execution (once one device has finished its program, every
other has ``timeout`` seconds to finish too, as the MPI runner's final gather). It never
cuts short a device that computes while nobody waits for it, so a single device runs until
its program ends, as on XLA. When a device fails or a wait times out, ``execute`` raises at
once (within a fraction of a second): it does not wait for devices still computing. The
error names them and what they were running; their threads cannot be killed, so they run
on, detached: their results are discarded, every collective, channel or feed they reach
fails at once, and interpreted while loops stop at their next iteration
(EvalOptions.cancel). Until the last of them has ended the executable is *broken*:
``Executable.broken`` says why and ``execute`` raises ExecutionError saying so.

Buffers stay on their device between calls: a Buffer holds its array (read-only), execute
passes it to the program without copying, and ``return_buffers=True`` gives results as
Buffers for the next call. Donation follows the module's ``input_output_alias``: a Buffer
passed for an aliased parameter is donated: the aliased output is written into the same
device memory (the result Buffer shares the donated Buffer's storage, pointer included) and
the donated Buffer is deleted; using it again raises InvalidArgumentError (PJRT's rule).

Backends: ``Client(backend=name)`` makes its backend with xlapy.backends.base.get_backend
(``interpreter``, ``cpu``, ``xla``, or any registered with ``register_backend``); a backend's
``compile(module)`` returns a DeviceProgram whose ``run(args, options)`` evaluates one
device's program with its EvalOptions; the default is ``cpu`` (DEFAULT_BACKEND).
Imports the backends' registry, the interpreter's values and options, the HLO layer and the
runtime's own modules.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from xlapy.backends.base import DeviceProgram, aligned_empty, get_backend
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.ir import Instruction, Module
from xlapy.interpreter.evaluator import EvalOptions, EvaluationError, module_of
from xlapy.interpreter.values import TOKEN, to_value
from xlapy.runtime.channels import (
    ChannelTable,
    DeviceChannels,
    WaitableQueue,
    channel_key,
    channel_text,
    host_transfer_hooks,
)
from xlapy.runtime.placement import check_collectives, default_device_assignment, logical_ids
from xlapy.runtime.threaded_collectives import (
    CollectiveTimeoutError,
    ExecutionState,
    RendezvousAbortedError,
    ThreadedCollectives,
    device_label,
)
from xlapy.shape import Shape, dtypes, parse_shape
from xlapy.shape.tree import flatten_tuples, map_shaped, path_text

DEFAULT_TIMEOUT = 60.0

#: The backend of ``Client()``, ``xlapy.jit``, ``xlapy.compare`` and ``xlapy run`` without one:
#: the compiled CPU backend (xlapy.backends.cpu), as XLA's default platform on a host is
#: XLA:CPU. ``"interpreter"`` is the reference: exact HLO semantics, slower.
DEFAULT_BACKEND = "cpu"

#: Seconds ``execute`` gives the devices a failure released (from a collective, a channel or
#: a feed) to stop, before it raises and leaves the ones still computing behind.
RELEASE_GRACE = 0.25


class ExecutionError(EvaluationError):
    """A device of a multi-device execution failed, or the executable cannot run.
    ``device``: the failed (replica, partition); ``errors``: every device's exception, by
    (replica, partition); ``unfinished``: the devices still running when ``execute`` gave
    up, by (replica, partition), with what they were running."""

    def __init__(self, message: str, device=None, errors=None, unfinished=None):
        super().__init__(message)
        self.device = device
        self.errors = dict(errors or {})
        self.unfinished = dict(unfinished or {})


# -- devices and buffers --------------------------------------------------------------------------


class Device:
    """One device of a Client (``id``: its number, as in XLA's device assignment)."""

    platform = "interpreter"

    def __init__(self, client: Client, device_id: int):
        self.client = client
        self.id = device_id

    def __repr__(self) -> str:
        return f"Device(id={self.id}, platform={self.client.platform!r})"


class _Storage:
    """Device memory: the array a Buffer handle points to (read-only while shared)."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _owned_copy(array) -> np.ndarray:
    """A read-only C-ordered copy of ``array`` in ALIGN-aligned memory (backends.base)."""
    array = np.asarray(array)
    copy = aligned_empty(array.shape, array.dtype)
    np.copyto(copy, array, casting="no")
    return _frozen(copy)


class Buffer:
    """An array on a device. ``to_numpy()`` copies it to the host; passing it to
    ``Executable.execute`` does not copy. A donated or deleted Buffer cannot be used."""

    def __init__(self, client: Client, device: Device, shape: Shape, storage: _Storage):
        self.client = client
        self.device = device
        self.shape = shape
        self._storage: _Storage | None = storage
        self._deleted_why = ""

    # PJRT-style accessors
    @property
    def dtype(self) -> np.dtype:
        return dtypes.to_dtype(self.shape.element_type)

    @property
    def dimensions(self) -> tuple[int, ...]:
        return tuple(self._live("dimensions").array.shape)

    def is_deleted(self) -> bool:
        return self._storage is None

    def delete(self) -> None:
        """Release the device memory; later uses raise."""
        self._mark_deleted("deleted")

    def _mark_deleted(self, why: str) -> None:
        self._storage = None
        self._deleted_why = why

    def _live(self, what: str) -> _Storage:
        if self._storage is None:
            raise InvalidArgumentError(f"Buffer.{what}: the {self.shape} buffer on device "
                                       f"{self.device.id} was {self._deleted_why}; it can no "
                                       f"longer be used")
        return self._storage

    def to_numpy(self) -> np.ndarray:
        """A host copy of the data."""
        return np.array(self._live("to_numpy").array, copy=True)

    def __array__(self, dtype=None, copy=None):
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype)

    def unsafe_buffer_pointer(self) -> int:
        """The address of the data (for checking that donation reused the memory)."""
        return int(self._live("unsafe_buffer_pointer").array.ctypes.data)

    def block_until_ready(self) -> Buffer:
        self._live("block_until_ready")
        return self

    def copy_to_device(self, device) -> Buffer:
        """A copy on another device of the same client."""
        target = self.client.device(device)
        return Buffer(self.client, target, self.shape,
                      _Storage(_owned_copy(self._live("copy_to_device").array)))

    def __repr__(self) -> str:
        state = "deleted" if self._storage is None else "on"
        return f"Buffer({self.shape} {state} device {self.device.id})"


# -- executables ----------------------------------------------------------------------------------


def _leaf(value, path: tuple[int, ...]):
    for i in path:
        value = value[i]
    return value


def _shape_at(shape: Shape, path: tuple[int, ...]) -> Shape:
    for i in path:
        shape = shape.tuple_shapes[i]
    return shape


def _same_array_shape(a: Shape, b: Shape) -> bool:
    return (a.is_array() and b.is_array() and a.element_type == b.element_type
            and tuple(a.dimensions) == tuple(b.dimensions))


class Executable:
    """A module compiled for ``replicas`` x ``partitions`` devices.

    ``devices``: the device of each execute entry (logical order r * partitions + p);
    ``device_assignment[r][p]``: the device id of replica r, partition p."""

    def __init__(self, client: Client, module: Module, program: DeviceProgram,
                 replicas: int, partitions: int, assignment):
        self.client = client
        self.module = module
        self.program = program
        self.num_replicas = replicas
        self.num_partitions = partitions
        self.device_assignment = assignment
        self.logical_ids = logical_ids(replicas, partitions)
        self.devices = [client.device(assignment[r][p]) for r, p in self.logical_ids]
        self.aliases = tuple(module.config.get("input_output_alias") or ())
        # Devices of failed executions still running: (device, thread, what it ran).
        self._stragglers: list[tuple[tuple[int, int], threading.Thread, str]] = []
        self._stragglers_lock = threading.Lock()

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    def hlo_text(self) -> str:
        return self.module.to_string()

    @property
    def broken(self) -> str | None:
        """Why this executable cannot run now, or None. It cannot while devices of an
        earlier execution, which ``execute`` gave up on when that execution failed, are
        still running (their threads cannot be stopped; see the module docstring)."""
        if not self._stragglers:
            return None
        with self._stragglers_lock:
            self._stragglers = [s for s in self._stragglers if s[1].is_alive()]
            left = list(self._stragglers)
        if not left:
            return None
        running = "; ".join(f"{self._label(self.logical_ids.index(d))} (running {what})"
                            for d, _, what in left)
        return (f"an earlier execution of {self.module.name} failed and left devices running: "
                f"{running}. They run on, detached, until their programs end (their results "
                f"are discarded); until then this executable cannot run")

    def __repr__(self) -> str:
        return (f"Executable({self.module.name}, replicas={self.num_replicas}, "
                f"partitions={self.num_partitions}, backend={self.client.backend.name!r})")

    def __call__(self, *args):
        """Run on the single device and return its result (arrays)."""
        if self.num_devices != 1:
            raise InvalidArgumentError(
                f"{self.module.name}: runs on {self.num_devices} devices ({self.num_replicas} "
                f"replicas x {self.num_partitions} partitions); call execute() with one "
                f"argument list per device")
        if self._plain_call(args):
            return self._call_plain(list(args))
        return self.execute([list(args)])[0]

    #: Opcodes that need the per-execution machinery of ``execute`` (feeds, channels, host
    #: transfers: queues and rendezvous state).
    _STATEFUL = frozenset({"infeed", "outfeed", "send", "send-done", "recv", "recv-done"})

    def _plain_module(self) -> bool:
        """One device and no feeds or channels: no queue or rendezvous state to set up."""
        plain = self.__dict__.get("_plain")
        if plain is None:
            plain = self.num_devices == 1 and not any(
                i.opcode in self._STATEFUL for c in self.module.computations
                for i in c.instructions)
            self._plain = plain
        return plain

    def _plain_call(self, args) -> bool:
        """A plain module (``_plain_module``) called with array arguments: nothing to
        donate either."""
        return self._plain_module() and not any(isinstance(a, (Buffer, tuple, list))
                                                 for a in args)

    def _call_plain(self, args: list):
        """``execute`` for a plain call (see _plain_call): convert, run, copy an output that
        shares memory with an input."""
        params = self.module.entry.parameters
        if len(args) != len(params):
            return self.execute([args])[0]  # raises the argument-count error
        label = self._label(0)
        values = [to_value(a, p.shape, f"execute: argument {p.parameter_number} (%{p.name}) "
                           f"of {label} (device {self.devices[0].id})", exact_dtype=True)
                  for a, p in zip(args, params)]
        options = EvalOptions(rng_seed=self.client.rng_seed, timeout=self.client.timeout)
        result = self.program.run(values, options)
        taken = _array_leaves(values)
        out = self._wrap(0, result, {}, False, taken)
        taken.clear()  # _wrap's closure cycle holds it (see execute)
        return out

    # -- arguments ----------------------------------------------------------------------------

    def _label(self, index: int) -> str:
        return device_label(self.logical_ids[index], self.num_partitions)

    def _prepare(self, index: int, args) -> tuple[list, dict]:
        """Argument values for entry ``index`` and the Buffers given, by (param, path)."""
        params = self.module.entry.parameters
        where_device = f"{self._label(index)} (device {self.devices[index].id})"
        if not isinstance(args, (list, tuple)):
            raise InvalidArgumentError(f"execute: the arguments of {where_device} must be a "
                                       f"list, got {type(args).__name__}")
        if len(args) != len(params):
            raise InvalidArgumentError(
                f"execute: {self.module.entry.name} takes {len(params)} arguments "
                f"({', '.join(str(p.shape) for p in params)}), {where_device} got {len(args)}")
        buffers: dict[tuple, Buffer] = {}

        def convert(arg, shape: Shape, key: tuple, where: str):
            """The value of one argument; tuples walked with a stack (map_shaped)."""
            if not shape.is_tuple() or isinstance(arg, Buffer):
                return convert_leaf(arg, shape, key, where)

            def check(value, s, path):
                if isinstance(value, Buffer):  # never a tuple: convert_leaf says why
                    convert_leaf(value, s, key + path, f"{where}{path_text(path)}")
                if not isinstance(value, (tuple, list)) or len(value) != len(s.tuple_shapes):
                    raise InvalidArgumentError(f"{where}{path_text(path)}: expected a tuple of "
                                               f"{len(s.tuple_shapes)} values for {s}")
                return value

            def leaf(value, s, path):
                return convert_leaf(value, s, key + path, f"{where}{path_text(path)}")

            return map_shaped(shape, arg, leaf, check)

        def convert_leaf(arg, shape: Shape, key: tuple, where: str):
            if isinstance(arg, Buffer):
                storage = arg._live("execute")
                if arg.device is not self.devices[index]:
                    raise InvalidArgumentError(
                        f"{where} is a Buffer on device {arg.device.id}, but {where_device} "
                        f"runs there; move it with buffer.copy_to_device({self.devices[index].id})")
                if not _same_array_shape(arg.shape, shape):
                    raise InvalidArgumentError(f"{where}: the Buffer holds {arg.shape}, the "
                                               f"parameter is {shape}")
                buffers[key] = arg
                return storage.array
            return to_value(arg, shape, where, exact_dtype=True)

        values = [convert(a, p.shape, (p.parameter_number,),
                          f"execute: argument {p.parameter_number} (%{p.name}) of "
                          f"{where_device}")
                  for a, p in zip(args, params)]
        return values, buffers

    def _donations(self, index: int, buffers: dict) -> dict[tuple, Buffer]:
        """Output path -> the Buffer donated to it."""
        out = {}
        for alias in self.aliases:
            key = (alias.parameter_number,) + tuple(alias.parameter_index)
            if key in buffers:
                out[tuple(alias.output_index)] = buffers[key]
        return out

    # -- running ------------------------------------------------------------------------------

    def _options(self, index: int, state: ExecutionState | None, backend, timeout) -> EvalOptions:
        client = self.client
        r, p = device = self.logical_ids[index]
        host_send, host_recv = host_transfer_hooks(client.channels, device, state, timeout,
                                                   self.num_partitions)
        return EvalOptions(
            replica_id=r, partition_id=p, replica_count=self.num_replicas,
            num_partitions=self.num_partitions,
            infeed=WaitableQueue(client.channels.infeed(device), state,
                                 f"infeed of {device_label(device, self.num_partitions)}"),
            outfeed=WaitableQueue(client.channels.outfeed(device), state,
                                  f"outfeed of {device_label(device, self.num_partitions)}"),
            channels=DeviceChannels(client.channels, device, state, self.num_partitions),
            host_send=host_send, host_recv=host_recv, rng_seed=client.rng_seed,
            collectives=backend, timeout=timeout, cancel=state)

    def _donated(self, donations: list[dict], prepared: list) -> list | None:
        """Per device, the (parameter number, parameter index) of the donated Buffers, when
        the program writes donated memory itself (``DeviceProgram.takes_donations``: the
        aliased result is written into the donated array, which ``_wrap`` then finds is
        the result); None when nothing is donated or the program does not."""
        if not any(donations) or not getattr(self.program, "takes_donations", False):
            return None
        out = []
        for d, (_, bufs) in zip(donations, prepared):
            given = {id(b) for b in d.values()}
            out.append(frozenset((key[0], tuple(key[1:])) for key, b in bufs.items()
                                 if id(b) in given))
        return out

    def _run(self, values: list[list], timeout, donated: list | None = None) -> list:
        n = self.num_devices

        def run(i, options):
            if donated is not None and donated[i]:
                return self.program.run(values[i], options, donated[i])
            return self.program.run(values[i], options)

        if self._plain_module():  # one device, no feeds or channels: run it here
            options = EvalOptions(rng_seed=self.client.rng_seed, timeout=timeout)
            return [run(0, options)]
        state = ExecutionState(self.logical_ids, self.num_partitions)
        backend = ThreadedCollectives(state)
        options = [self._options(i, state, backend, timeout) for i in range(n)]
        results: list[Any] = [None] * n
        errors: list[tuple[int, BaseException]] = []
        lock = threading.Lock()

        def work(i: int) -> None:
            device = self.logical_ids[i]
            try:
                results[i] = run(i, options[i])
            except BaseException as e:  # noqa: BLE001 - reported by execute
                with lock:
                    errors.append((i, e))
                state.finish(device, f"{type(e).__name__}: {e}")
                state.abort(f"{self._label(i)} failed ({type(e).__name__}: "
                            f"{_first_line(e)})")
                return
            state.finish(device)

        if n == 1:
            work(0)
            if errors:
                raise self._error(errors)
            return results
        threads = [threading.Thread(target=work, args=(i,), daemon=True,
                                    name=f"xlapy-{self._label(i)}") for i in range(n)]
        for t in threads:
            t.start()
        try:
            late = self._await(state, threads, timeout)
        except BaseException:  # e.g. KeyboardInterrupt: release the devices, then stop
            state.abort("the caller interrupted the execution")
            self._leave_behind(state, threads, [], lock)
            raise
        if late is None and not errors:
            return results
        if late:
            # The end of the execution is a rendezvous too: ``timeout`` seconds after the
            # first device finished, these had not (``_await`` aborted the execution).
            done = [d for d, e in state.finished.items() if e is None]
            first, what = next(iter(late.items()))
            timed_out = CollectiveTimeoutError(
                f"timed out: still running {what} {timeout:g} s after {_labels(done, self)} "
                f"finished")
            with lock:
                errors.insert(0, (self.logical_ids.index(first), timed_out))
        unfinished = self._leave_behind(state, threads, errors, lock)
        with lock:
            seen = list(errors)
        raise self._error(seen, unfinished)

    def _await(self, state: ExecutionState, threads: list, timeout) -> dict | None:
        """Wait for the devices: None when every one finished; {} as soon as one failed;
        when ``timeout`` seconds passed since the first finished, the unfinished devices
        with what they run (the execution is then aborted, so none of them can still
        finish as if in time)."""
        n = self.num_devices
        with state.cond:
            while True:
                if len(state.finished) == n:
                    return None
                if state.abort_reason is not None or any(
                        e is not None for e in state.finished.values()):
                    return {}
                wait = 0.1  # bounded, so that the caller's Ctrl-C gets through
                if state.first_finish is not None and timeout is not None:
                    left = state.first_finish + timeout - time.monotonic()
                    if left <= 0:
                        late = {d: _running(threads[i]) for i, d in enumerate(self.logical_ids)
                                if d not in state.finished}
                        done = [d for d in state.devices if d in state.finished]
                        state.abort(f"{_labels(late, self)} did not finish within "
                                    f"{timeout:g} s of {_labels(done, self)}")
                        return late
                    wait = min(wait, left)
                state.cond.wait(wait)

    def _leave_behind(self, state: ExecutionState, threads: list, errors: list,
                      lock: threading.Lock) -> dict:
        """After a failure (the execution is aborted): give the devices it released
        RELEASE_GRACE seconds to stop; record those still running as stragglers (the
        executable is broken until they end). Returns the devices that were computing when
        the failure was seen (not waiting for a peer), with what they ran: ``running ...``
        for the stragglers, ``stopped in ...`` for those the abort stopped."""
        computing = state.running_at_abort
        deadline = time.monotonic() + RELEASE_GRACE
        with state.cond:
            while len(state.finished) < self.num_devices:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                state.cond.wait(left)
            still = [d for d in self.logical_ids if d not in state.finished]
        out = {}
        for d in still:
            thread = threads[self.logical_ids.index(d)]
            out[d] = f"running {_running(thread)}"
            with self._stragglers_lock:
                self._stragglers.append((d, thread, out[d].removeprefix("running ")))
        with lock:
            reasons = {self.logical_ids[i]: e for i, e in errors}
        for d in computing:
            e = reasons.get(d)
            if d not in out and isinstance(e, RendezvousAbortedError):
                out[d] = f"stopped in {str(e).split(': abandoned because')[0]}"
        return out

    def _error(self, errors: list[tuple[int, BaseException]],
               unfinished: dict | None = None) -> BaseException:
        """The error ``execute`` raises: the first real one (not a release by another
        device's failure); ``unfinished``: see _leave_behind."""
        real = [(i, e) for i, e in errors if not isinstance(e, RendezvousAbortedError)]
        index, first = (real or errors)[0]
        if self.num_devices == 1:
            return first
        device = self.logical_ids[index]
        by_device = {self.logical_ids[i]: e for i, e in errors}
        message = f"{self._label(index)}: {first}"
        unfinished = unfinished or {}
        stopped = [f"{_labels([d], self)} ({what.removeprefix('stopped ')})"
                   for d, what in unfinished.items() if what.startswith("stopped")]
        left = [f"{_labels([d], self)} ({what})" for d, what in unfinished.items()
                if what.startswith("running")]
        if stopped:
            message += f"\nstopped when the execution failed: {'; '.join(stopped)}"
        if left:
            message += (f"\nleft running, detached (results discarded; see "
                        f"Executable.broken): {'; '.join(left)}")
        err = ExecutionError(message, device, by_device, unfinished)
        err.__cause__ = first
        return err

    def execute(self, args_per_device: Sequence[Sequence], *, return_buffers: bool = False,
                timeout: float | None | str = "client") -> list:
        """Run every device; ``args_per_device[i]`` are the arguments of entry i (logical
        order r * partitions + p): arrays, Buffers on that device, tuples for tuple
        parameters. Returns one result per device: NumPy arrays (a tuple for a tuple
        result), or Buffers with ``return_buffers=True``.

        >>> exe.execute([[np.float32([1, 2.5])], [np.float32([3, 5.25])]])
        """
        if timeout == "client":
            timeout = self.client.timeout
        fast = self._execute_buffers(args_per_device, return_buffers, timeout)
        if fast is not None:
            return fast
        if self._stragglers:
            broken = self.broken
            if broken is not None:
                raise ExecutionError(f"execute: {broken}")
        if not isinstance(args_per_device, (list, tuple)) or len(args_per_device) != self.num_devices:
            got = len(args_per_device) if isinstance(args_per_device, (list, tuple)) else \
                type(args_per_device).__name__
            raise InvalidArgumentError(
                f"execute: expected one argument list per device ({self.num_devices}: "
                f"{self.num_replicas} replicas x {self.num_partitions} partitions), got {got}")
        prepared = [self._prepare(i, a) for i, a in enumerate(args_per_device)]
        donations = [self._donations(i, bufs) for i, (_, bufs) in enumerate(prepared)]
        everyone = [b for _, bufs in prepared for b in bufs.values()]
        for d in donations:
            for b in d.values():
                if sum(o is b for o in everyone) > 1:
                    raise InvalidArgumentError(
                        "execute: a donated Buffer (input_output_alias parameter) is passed "
                        "more than once; a donated Buffer must be the only reference")
        donated = self._donated(donations, prepared)
        try:
            results = self._run([v for v, _ in prepared], timeout, donated)
        except BaseException:
            if donated is not None:  # the program may have written them: as on PJRT, gone
                for d in donations:
                    for b in d.values():
                        b._mark_deleted(f"donated to a failed execution of {self.module.name} "
                                        f"(its contents are undefined)")
            raise
        # Arrays that outputs must not share memory with: every input and output so far.
        taken = [b._storage.array for b in everyone]
        taken += [a for v, _ in prepared for a in _array_leaves(v)]
        outputs = [self._wrap(i, result, donations[i], return_buffers, taken)
                   for i, result in enumerate(results)]
        for d in donations:
            for b in d.values():
                b._mark_deleted(f"donated to an execution of {self.module.name}")
        # _wrap's recursive closure is a reference cycle holding ``taken`` until the garbage
        # collector runs: empty it, so outputs the caller drops are freed (and a backend's
        # recycled output memory is reusable) at once.
        taken.clear()
        return outputs

    def _execute_buffers(self, args_per_device, return_buffers: bool, timeout):
        """``execute`` for the common call, or None: one device, a plain module
        (``_plain_module``) without input_output_alias, every argument a live Buffer of
        that device holding an array of its parameter's shape, an array result. The
        checks are per signature: a Buffer's Shape object, once found to match, is
        remembered (per-call cost)."""
        if self._stragglers or self.aliases or type(args_per_device) is not list or \
                len(args_per_device) != 1 or self.num_devices != 1:
            return None
        args = args_per_device[0]
        signature = self.__dict__.get("_signature")
        if signature is None:
            signature = self._signature = self._buffer_signature()
        if signature is False or type(args) is not list or len(args) != len(signature):
            return None
        device = self.devices[0]
        values = []
        for arg, (param_shape, seen) in zip(args, signature):
            if type(arg) is not Buffer or arg._storage is None or arg.device is not device:
                return None
            shape = arg.shape
            if id(shape) not in seen:
                if not _same_array_shape(shape, param_shape):
                    return None
                if len(seen) < 8:
                    seen[id(shape)] = shape  # kept alive: its id stays its own
            values.append(arg._storage.array)
        options = self.__dict__.get("_plain_options")
        if options is None or options.rng_seed != self.client.rng_seed or \
                options.timeout != timeout:
            options = self._plain_options = EvalOptions(rng_seed=self.client.rng_seed,
                                                        timeout=timeout)
        result = self.program.run(values, options)
        root = self.module.entry.root.shape
        if root.is_tuple():
            return [self._fast_tuple(result, values, root, return_buffers, device)]
        if type(result) is not np.ndarray:
            result = np.asarray(result)
        if not self._fresh_results:
            for v in values:  # an output may not share memory with an input
                if np.may_share_memory(result, v):
                    result = np.array(result, copy=True)
                    break
        if not return_buffers:
            return [result]
        shape = root
        if tuple(shape.dimensions) != result.shape:
            shape = _runtime_shape(shape, result)
        result.flags.writeable = False
        return [Buffer(self.client, device, shape, _Storage(result))]

    def _fast_tuple(self, result, values: list, root: Shape, return_buffers: bool, device):
        """``_execute_buffers``'s result for a flat tuple of arrays: as ``_wrap`` makes it,
        an output sharing memory with an input (unless the program's results are fresh) or
        with an earlier output (one array returned twice, or views of one) copied."""
        fresh = self._fresh_results
        arrays = []
        for value in result:
            array = value if type(value) is np.ndarray else np.asarray(value)
            shared = any(other is array or (
                (other.base is not None or array.base is not None)  # two owners: distinct
                and np.may_share_memory(array, other)) for other in arrays)
            if not shared and not fresh:
                shared = any(np.may_share_memory(array, v) for v in values)
            arrays.append(np.array(array, copy=True) if shared else array)
        if not return_buffers:
            return tuple(arrays)
        client = self.client
        out = []
        for array, shape in zip(arrays, root.tuple_shapes):
            if tuple(shape.dimensions) != array.shape:
                shape = _runtime_shape(shape, array)
            array.flags.writeable = False
            out.append(Buffer(client, device, shape, _Storage(array)))
        return tuple(out)

    @property
    def _fresh_results(self) -> bool:
        """The program's results never share memory with its arguments (nothing donated)
        (``DeviceProgram.fresh_results``)."""
        return getattr(self.program, "fresh_results", False)

    def _buffer_signature(self):
        """[(parameter shape, {id(Shape): Shape} seen matching)] when the fast path of
        ``_execute_buffers`` applies to this executable, else False."""
        entry = self.module.entry
        root = entry.root.shape
        leaves = root.tuple_shapes if root.is_tuple() else [root]
        if not self._plain_module() or not all(s.is_array() and not s.is_dynamic()
                                               for s in leaves):
            return False
        params = entry.parameters
        if any(not p.shape.is_array() for p in params):
            return False
        return [(p.shape, {}) for p in params]

    def _wrap(self, index: int, result, donations: dict, return_buffers: bool, taken: list):
        device = self.devices[index]
        root_shape = self.module.entry.root.shape

        def wrap(value, shape: Shape, path: tuple):
            if value is TOKEN:
                return TOKEN
            array = np.asarray(value)
            donor = donations.get(path)
            if donor is not None:
                storage = donor._storage
                _write(storage, array)
                taken.append(storage.array)
                buf = Buffer(self.client, device, _runtime_shape(shape, storage.array), storage)
                return buf if return_buffers else buf.to_numpy()
            if any(np.may_share_memory(array, t) for t in taken):
                array = np.array(array, copy=True)
            taken.append(array)
            if not return_buffers:
                return array
            return Buffer(self.client, device, _runtime_shape(shape, array),
                          _Storage(_frozen(array)))

        if isinstance(result, tuple):  # nested tuples walked with a stack
            return map_shaped(root_shape, result, wrap)
        return wrap(result, root_shape, ())


#: HLO texts compiled lately, by SHA-256, and their parsed modules: compiling the same text
#: again (a cached compile) skips the parser. Executables compiled from one text share the
#: module (nothing in the runtime modifies it).
_PARSED: dict[str, Module] = {}
_PARSED_MAX = 16
_PARSED_LOCK = threading.Lock()


def _parsed(text: str) -> Module:
    import hashlib

    key = hashlib.sha256(text.encode()).hexdigest()
    with _PARSED_LOCK:
        module = _PARSED.get(key)
    if module is None:
        module = module_of(text, "compile")
        with _PARSED_LOCK:
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.pop(next(iter(_PARSED)))
            _PARSED[key] = module
    return module


def _array_leaves(values) -> list[np.ndarray]:
    return [v for v in flatten_tuples(tuple(values)) if isinstance(v, np.ndarray)]


def _write(storage: _Storage, array: np.ndarray) -> None:
    """Put ``array`` into donated memory (in place when the sizes match)."""
    target = storage.array
    if target.shape != array.shape or target.dtype != array.dtype:
        storage.array = _owned_copy(array)
        return
    if array is target:
        return
    if np.may_share_memory(array, target):
        array = np.array(array, copy=True)
    try:
        target.flags.writeable = True
    except ValueError:  # memory we do not own: take a fresh copy
        storage.array = _owned_copy(array)
        return
    np.copyto(target, array)
    target.flags.writeable = False


def _runtime_shape(shape: Shape, array: np.ndarray) -> Shape:
    if tuple(shape.dimensions) == tuple(array.shape):
        return shape
    return Shape.array(shape.element_type, tuple(array.shape), layout=shape.layout)


def _labels(devices, exe: Executable) -> str:
    names = [exe._label(exe.logical_ids.index(d)) for d in devices]
    return " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + " and " + names[-1]


def _running(thread: threading.Thread) -> str:
    """What a device thread is running: the instructions on its stack, innermost first
    (``custom-call %slow (in while %loop)``), read from its frames (only when an error is
    reported, so running costs nothing)."""
    frame = sys._current_frames().get(thread.ident)
    found: list[Instruction] = []
    while frame is not None:
        if "xlapy" in frame.f_code.co_filename:
            try:
                local = frame.f_locals
                instr = local.get("instr")
                if not isinstance(instr, Instruction):
                    instr = getattr(local.get("self"), "instr", None)
            except Exception:  # noqa: BLE001 - a frame changing under us: skip it
                instr = None
            if isinstance(instr, Instruction) and all(i is not instr for i in found):
                found.append(instr)
        frame = frame.f_back
    if not found:
        return "its program" if thread.is_alive() else "nothing (it has ended)"
    names = [f"{i.opcode} %{i.name}" + (f" \"{i.attrs['custom_call_target']}\""
                                        if i.opcode == "custom-call" else "")
             for i in found[:4]]
    return names[0] + ("" if len(names) == 1 else " (in " + ", in ".join(names[1:]) + ")")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().split("\n")[0]
    return text if len(text) <= 300 else text[:297] + "..."


# -- the client -------------------------------------------------------------------------------------


def _count(value, default: int, what: str) -> int:
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgumentError(f"compile: {what} must be a positive integer, got {value!r}")
    return int(value)


class Client:
    """Runs HLO on devices of one process. ``backend``: ``"cpu"`` (DEFAULT_BACKEND, the
    compiled CPU backend), ``"interpreter"`` (the reference) or another registered name
    (``xla``: real XLA:CPU through jax, one device). ``timeout``: seconds any device waits in a
    collective, a channel or a feed, and at the end of an execution for the other devices
    to finish, before giving up (None: forever; see the module docstring); ``rng_seed``:
    the seed of the ``rng`` op on every device; ``backend_options``: keyword arguments of
    the backend (cpu: ``allow_excess_precision``, see xlapy.backends.cpu.backend.CpuBackend).

    >>> client = Client()
    >>> client.compile(hlo_text)(np.ones(3, np.float32))
    """

    def __init__(self, backend: str = DEFAULT_BACKEND, *,
                 timeout: float | None = DEFAULT_TIMEOUT, rng_seed: int = 0, num_devices: int = 1,
                 backend_options: dict | None = None):
        self.backend = get_backend(backend, "Client", backend_options)
        self.platform = backend
        self.timeout = timeout
        self.rng_seed = rng_seed
        self.channels = ChannelTable()
        self._devices: list[Device] = []
        self._lock = threading.Lock()
        self.device(max(int(num_devices), 1) - 1)

    # -- devices ------------------------------------------------------------------------------

    @property
    def devices(self) -> list[Device]:
        with self._lock:
            return list(self._devices)

    def device_count(self) -> int:
        return len(self._devices)

    def device(self, device) -> Device:
        """Device number ``device`` (made on first use), or ``device`` itself."""
        if isinstance(device, Device):
            if device.client is not self:
                raise InvalidArgumentError("the device belongs to another Client")
            return device
        if isinstance(device, bool) or not isinstance(device, (int, np.integer)) or device < 0:
            raise InvalidArgumentError(f"expected a device number >= 0, got {device!r}")
        with self._lock:
            while len(self._devices) <= device:
                self._devices.append(Device(self, len(self._devices)))
            return self._devices[int(device)]

    # -- buffers --------------------------------------------------------------------------------

    def buffer_from_pyval(self, value, device=0, shape: Shape | str | None = None) -> Buffer:
        """Copy ``value`` (array-like) to ``device``; ``shape`` converts it to an element
        type / checks its dimensions."""
        target = self.device(device)
        if isinstance(value, Buffer):
            return value.copy_to_device(target)
        if shape is not None:
            shape = parse_shape(shape) if isinstance(shape, str) else shape
            array = to_value(value, shape, "buffer_from_pyval")
        else:
            array = np.asarray(value)
            try:
                element_type = dtypes.from_dtype(array.dtype)
            except (InvalidArgumentError, KeyError, ValueError, TypeError):
                raise InvalidArgumentError(f"buffer_from_pyval: NumPy dtype {array.dtype} has "
                                           f"no XLA element type") from None
            shape = Shape.array(element_type, tuple(array.shape))
        return Buffer(self, target, shape, _Storage(_owned_copy(array)))

    # -- compiling ----------------------------------------------------------------------------------

    def compile(self, computation, replicas: int | None = None, partitions: int | None = None,
                *, verify: bool = True, device_assignment=None,
                allow_mixed_precision: bool = False) -> Executable:
        """Compile a Module, XlaComputation or HLO text for ``replicas`` x ``partitions``
        devices (default: the module's replica_count and num_partitions). The verifier
        rejects operands mixing floating-point precisions unless ``allow_mixed_precision``
        (XLA's HloVerifier option)."""
        module = _parsed(computation) if isinstance(computation, str) else \
            module_of(computation, "compile")
        if module.entry is None:
            raise InvalidArgumentError(f"compile: module {module.name} has no entry computation")
        replicas = _count(replicas, module.replica_count, "replicas")
        partitions = _count(partitions, module.num_partitions, "partitions")
        if (module.replica_count, module.num_partitions) != (replicas, partitions):
            module = module.clone(suffix="")
            module.config["replica_count"] = replicas
            module.config["num_partitions"] = partitions
        # A backend that caches programs by content may already hold this module's program,
        # verified when it was first compiled: then the verifier need not run again.
        # lookup_keyed also gives the module's key, handed back to compile (the module is not
        # changed in between): the cpu backend then does not fingerprint it twice.
        keyed = getattr(self.backend, "lookup_keyed", None)
        if keyed is not None:
            cached, key = keyed(module)
        else:
            lookup = getattr(self.backend, "lookup", None)
            cached, key = (lookup(module) if lookup is not None else None), None
        if verify and not getattr(cached, "verified", False):
            from xlapy.verifier import verify_module

            verify_module(module, allow_mixed_precision=allow_mixed_precision)
        check_collectives(module, replicas, partitions)
        if device_assignment is None:
            assignment = default_device_assignment(replicas, partitions)
        else:
            assignment = tuple(tuple(int(d) for d in row) for row in device_assignment)
            flat = [d for row in assignment for d in row]
            if len(assignment) != replicas or any(len(row) != partitions for row in assignment) \
                    or len(set(flat)) != len(flat) or min(flat) < 0:
                raise InvalidArgumentError(
                    f"compile: device_assignment must be {replicas} rows of {partitions} "
                    f"distinct device numbers, got {device_assignment!r}")
        if cached is not None:
            program = cached
        elif key is not None:
            program = self.backend.compile(module, key=key)
        else:
            program = self.backend.compile(module)
        if verify and not allow_mixed_precision:  # passed the default (strict) verifier
            program.verified = True
        return Executable(self, module, program, replicas, partitions, assignment)

    # -- feeds and host transfers -----------------------------------------------------------------

    @staticmethod
    def _device_key(replica: int, partition: int) -> tuple[int, int]:
        return (int(replica), int(partition))

    def infeed(self, replica: int, value, *, partition: int = 0) -> None:
        """Queue ``value`` for the next ``infeed`` of (replica, partition)."""
        self.channels.infeed(self._device_key(replica, partition)).put(value)

    def outfeed(self, replica: int, *, partition: int = 0, timeout: float | None | str = "client"):
        """The next value an ``outfeed`` of (replica, partition) wrote, waiting up to
        ``timeout`` seconds."""
        return self._take(self.channels.outfeed(self._device_key(replica, partition)), timeout,
                          f"outfeed of {device_label((replica, partition), 2 if partition else 1)}")

    def send_to_device(self, channel_id: int, value, *, replica: int = 0,
                       partition: int = 0) -> None:
        """Give ``value`` to the ``recv ... is_host_transfer=true`` of channel ``channel_id``
        on (replica, partition); ``None`` names a recv without channel_id."""
        self.channels.to_device(channel_key(channel_id),
                                self._device_key(replica, partition)).put(value)

    def receive_from_device(self, channel_id: int, *, replica: int = 0, partition: int = 0,
                            timeout: float | None | str = "client"):
        """The next value the ``send ... is_host_transfer=true`` of channel ``channel_id`` on
        (replica, partition) sent, waiting up to ``timeout`` seconds; ``None`` names a send
        without channel_id."""
        q = self.channels.from_device(channel_key(channel_id),
                                      self._device_key(replica, partition))
        return self._take(q, timeout, f"host {channel_text(channel_id)} from "
                          f"{device_label((replica, partition), 2 if partition else 1)}")

    def _take(self, q: queue.Queue, timeout, what: str):
        if timeout == "client":
            timeout = self.timeout
        try:
            return q.get(timeout=timeout)
        except queue.Empty:
            raise EvaluationError(f"{what}: nothing arrived within {timeout:g} s") from None

    def __repr__(self) -> str:
        return f"Client(backend={self.platform!r}, devices={len(self._devices)})"


__all__ = ["DEFAULT_BACKEND", "Buffer", "Client", "Device", "Executable", "ExecutionError"]
