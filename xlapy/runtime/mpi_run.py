"""Running a module with one replica per MPI rank: the scale-out of the runtime.

Owns ``run_distributed`` (module, inputs, options -> every device's result on the root
rank) and the pieces of it a driver reuses (``prepare_module``, ``gather_results``,
``abort_with``). ``xlapy run MODULE --distributed mpi`` (xlapy/cli/run_mpi.py) calls it on
each rank. From Python, in a script started by ``mpiexec -n 4 python script.py``:

    from xlapy.runtime.mpi_run import run_distributed
    results = run_distributed(module_text, x)   # on rank 0: [replica 0's result, ...]

Every rank compiles the module with a runtime backend (``device_backend``: the compiled CPU
backend by default, as ``xlapy.Client()``; ``interpreter`` the reference) and runs it with
``EvalOptions(replica_id=<rank>, replica_count=<ranks>, collectives=MpiCollectives(comm))``:
device (replica r, partition p) is rank ``r * num_partitions + p``; the CPU backend's
collectives call the MpiCollectives from their steps (xlapy/backends/cpu/collectives.py). Every rank reads the same inputs; rank 0 gathers the
results. Channels (send/recv with the same channel id) pair as in the in-process runtime (``_xla_send_recv_source_target_pairs``
names the peer; without it send and recv run on the same device), over MPI point to point
when the peer is another rank (MpiChannels).

Errors: by default (``abort_on_error=True``) an exception on any rank is printed to stderr
as ``xlapy: rank N: <message>`` and the job is aborted with ``MPI_Abort``, so mpiexec exits
non-zero instead of the other ranks waiting forever; every collective also gives up after
``timeout`` seconds (the EvalOptions timeout) with an error naming what it waited for.

mpi4py is imported lazily (``pip install 'xlapy[mpi]'``). Imports the interpreter, the
backends' registry, xlapy.runtime.mpi_collectives and the error classes of
xlapy.runtime.threaded_collectives.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

from xlapy.backends.base import get_backend
from xlapy.errors import InvalidArgumentError
from xlapy.interpreter.evaluator import EvalOptions, module_of
from xlapy.interpreter.values import to_value
from xlapy.runtime.mpi_collectives import MpiChannels, MpiCollectives, import_mpi
from xlapy.runtime.threaded_collectives import CollectiveTimeoutError


def _check_counts(module, size: int, num_partitions: int) -> tuple[int, int]:
    if num_partitions < 1 or size % num_partitions:
        raise InvalidArgumentError(f"run_distributed: {size} MPI ranks do not split into "
                                   f"{num_partitions} partitions per replica")
    replicas = size // num_partitions
    declared_r, declared_p = module.replica_count, module.num_partitions
    if declared_p not in (1, num_partitions):
        raise InvalidArgumentError(
            f"run_distributed: the module declares num_partitions={declared_p} but the run has "
            f"{num_partitions} partition(s) per replica (pass num_partitions={declared_p})")
    if declared_r not in (1, replicas):
        raise InvalidArgumentError(
            f"run_distributed: the module declares replica_count={declared_r} but the MPI job "
            f"has {size} rank(s) = {replicas} replica(s) x {num_partitions} partition(s); "
            f"launch mpiexec -n {declared_r * num_partitions}")
    return replicas, num_partitions


def prepare_module(module, size: int, num_partitions: int = 1, verify: bool = True):
    """The Module to run on ``size`` ranks: parsed if text, its replica_count and
    num_partitions set to the run's (as Client.compile does), verified, and its collectives
    checked against the run (XLA's replica-group rules: uneven groups, groups that do not
    cover the run, shards that do not divide) - on every rank alike, before any rank
    communicates."""
    from xlapy.runtime.placement import check_collectives

    module = module_of(module, "run_distributed")
    replicas, partitions = _check_counts(module, size, num_partitions)
    if (module.replica_count, module.num_partitions) != (replicas, partitions):
        module = module.clone(suffix="")
        module.config["replica_count"] = replicas
        module.config["num_partitions"] = partitions
    if verify:
        from xlapy.verifier import verify_module

        verify_module(module)
    check_collectives(module, replicas, partitions)
    return module


def abort_with(comm, message: str, code: int = 1) -> None:
    """Print ``xlapy: rank N: message`` to stderr and abort every rank of the job."""
    sys.stderr.write(f"xlapy: rank {comm.Get_rank()}: {message}\n")
    sys.stderr.flush()
    time.sleep(0.05)  # let the message reach mpiexec before the job is torn down
    try:
        comm.Abort(code)
    finally:
        os._exit(code)  # should Abort return (another rank's abort already under way)


def gather_results(comm, result, root: int = 0, timeout: float | None = None) -> list | None:
    """Every rank's ``result`` on ``root`` (a list indexed by rank), None elsewhere; waits
    at most ``timeout`` seconds for the others."""
    import pickle

    MPI = import_mpi()
    data = np.frombuffer(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
    n, rank = comm.Get_size(), comm.Get_rank()
    sizes = np.empty(n, np.int64) if rank == root else None
    _timed(comm, [comm.Igather(np.array([data.size], np.int64), sizes, root=root)], timeout,
           "every rank's result size")
    if rank == root:
        displs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        buf = np.empty(int(sizes.sum()), np.uint8)
        recv = [buf, (sizes, displs), MPI.BYTE]
    else:
        recv = None
    _timed(comm, [comm.Igatherv([data, MPI.BYTE], recv, root=root)], timeout,
           "every rank's result")
    if rank != root:
        return None
    return [pickle.loads(buf[d:d + s].tobytes()) for d, s in zip(displs, sizes)]


def _timed(comm, requests, timeout, what) -> None:
    MPI = import_mpi()
    if timeout is None:
        MPI.Request.Waitall(requests)
        return
    deadline = time.monotonic() + timeout
    while not MPI.Request.Testall(requests):
        if time.monotonic() > deadline:
            raise CollectiveTimeoutError(
                f"rank {comm.Get_rank()} waited {timeout:g} s for {what}")
        time.sleep(1e-4)


#: The runtime backend a rank runs its device's program on by default (Client()'s).
DEFAULT_DEVICE_BACKEND = "cpu"


def run_distributed(module, *inputs, comm=None, num_partitions: int = 1,
                    timeout: float | None = 60.0, root: int = 0, abort_on_error: bool = True,
                    verify: bool = True, backend: MpiCollectives | None = None,
                    device_backend: str = DEFAULT_DEVICE_BACKEND,
                    backend_options: dict | None = None,
                    **option_values: Any) -> list | None:
    """Run ``module`` (a Module, an XlaComputation or HLO text) with one device per rank of
    ``comm`` (default MPI.COMM_WORLD) on the same ``inputs`` everywhere. Returns, on
    ``root``, the list of every device's result (index = rank = replica * num_partitions +
    partition; tuples for tuple results), and None on the other ranks.

    Call it on every rank of an MPI job (``mpiexec -n 4 python script.py``):

    >>> results = run_distributed(text, np.ones(4, np.float32))
    >>> if results is not None: print(results[1])      # replica 1's result, on rank 0

    ``timeout``: seconds any collective (and the final gather) may wait for the other ranks.
    ``abort_on_error``: an exception on a rank prints ``xlapy: rank N: ...`` and aborts the
    job (the others would otherwise wait forever); with False it is raised as is.
    ``device_backend`` / ``backend_options``: the runtime backend each rank compiles the
    module with (xlapy.backends.base.get_backend; default the compiled CPU backend).
    ``option_values``: further EvalOptions (rng_seed, custom_calls, infeed, ...)."""
    MPI = import_mpi()
    comm = MPI.COMM_WORLD if comm is None else comm
    try:
        module = prepare_module(module, comm.Get_size(), num_partitions, verify)
        replicas, partitions = module.replica_count, module.num_partitions
        if backend is None:
            backend = MpiCollectives(comm, num_partitions=partitions, timeout=timeout)
        option_values.setdefault("channels", MpiChannels(backend))
        options = EvalOptions(replica_id=backend.replica_id, partition_id=backend.partition_id,
                              replica_count=replicas, num_partitions=partitions,
                              collectives=backend, timeout=timeout, **option_values)
        program = get_backend(device_backend, "run_distributed", backend_options).compile(module)
        params = module.entry.parameters
        if len(inputs) != len(params):
            raise InvalidArgumentError(
                f"run_distributed: the entry computation %{module.entry.name} takes "
                f"{len(params)} arguments ({', '.join(str(p.shape) for p in params)}), got "
                f"{len(inputs)}")
        values = [to_value(a, p.shape, f"run_distributed: argument {i} (%{p.name})",
                           exact_dtype=True) for i, (a, p) in enumerate(zip(inputs, params))]
        result = program.run(values, options)
        backend.finish_sends(timeout)
        return gather_results(backend.results_comm, result, root=root, timeout=timeout)
    except BaseException as e:  # reported and the job aborted
        if not abort_on_error or isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        abort_with(comm, f"{type(e).__name__}: {e}")
        raise  # not reached: abort_with ends the process


__all__ = ["abort_with", "gather_results", "prepare_module", "run_distributed"]
