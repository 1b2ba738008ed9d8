"""``xlapy run MODULE --distributed mpi``: one device per MPI rank, through the runtime's
``run_distributed`` (xlapy/runtime/mpi_run.py). Launch with mpiexec:

    mpiexec -n 4 xlapy run module.hlo --distributed mpi --inputs in.npz --output out.npz

Reads the module and the inputs as ``xlapy run`` does (xlapy/cli/run_cmd.py) and prints and
writes the results as it does for several devices. mpi4py is imported lazily.
"""

from __future__ import annotations

import sys

from xlapy.cli.common import CommandError
from xlapy.errors import InvalidArgumentError
from xlapy.runtime.mpi_collectives import import_mpi
from xlapy.runtime.mpi_run import abort_with, run_distributed


def run_mpi(args) -> int:
    """``xlapy run MODULE --distributed mpi`` on one rank: rank 0 reads the module (so ``-``
    reads mpiexec's stdin) and broadcasts it; every rank reads the same ``--inputs`` (shared
    ``arg<i>`` or per-device ``r<k>.arg<i>`` keys, as the in-process run) and runs its device;
    rank 0 prints and writes ``--output`` exactly as ``xlapy run --replicas`` does
    (``r<k>.out<i>``; one rank: as a single-device ``xlapy run``). Devices: ``--replicas`` /
    ``--partitions`` or the module's header, else one replica per rank; their product must
    equal the number of ranks. ``--backend`` (default the compiled CPU backend) is what each
    rank runs its device's program on. Any error on any rank is printed (``xlapy: rank N:
    ...``) and aborts the job: mpiexec exits non-zero."""
    MPI = import_mpi()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    try:
        from xlapy.cli import run_cmd
        from xlapy.cli.module_files import read_module_bytes
        from xlapy.proto.files import load_hlo

        data = read_module_bytes(args.module) if rank == 0 else None
        data = comm.bcast(data, root=0)
        module = load_hlo(data, args.module).module  # HLO text or an XLA proto
        from xlapy.cli import spmd_run

        # a sharded module (e.g. a jax dump): partitioned alike on every rank
        module, args.spmd_run = spmd_run.partition_for_run(args, module, size)
        partitions = args.partitions if args.partitions is not None else module.num_partitions
        if args.replicas is not None:
            replicas = args.replicas
        elif module.replica_count > 1:
            replicas = module.replica_count
        else:
            replicas = max(size // max(partitions, 1), 1)
        if replicas < 1 or partitions < 1 or replicas * partitions != size:
            raise InvalidArgumentError(
                f"--distributed mpi runs one device per MPI rank: {replicas} replica(s) x "
                f"{partitions} partition(s) = {replicas * partitions} device(s), but the job "
                f"has {size} rank(s); launch mpiexec -n {replicas * partitions}")
        if module.replica_count != replicas or module.num_partitions != partitions:
            module = module.clone(suffix="")
            module.config["replica_count"] = replicas
            module.config["num_partitions"] = partitions
        inputs = run_cmd.device_inputs(module, args, size)[rank]
        results = run_distributed(module, *inputs, comm=comm, num_partitions=partitions,
                                  timeout=args.timeout, verify=not args.no_verify,
                                  device_backend=args.backend)
        if rank == 0:
            if size == 1:  # one device: xlapy run's single-device output (out<i>, no label)
                _report_single(module, args, results[0])
            else:
                run_cmd.report_devices(module, args, results, partitions)
            sys.stdout.flush()
        return 0
    except Exception as e:  # noqa: BLE001 - every failure aborts the whole job
        abort_with(comm, f"{type(e).__name__}: {e}" if not _is_command_error(e) else str(e))
        return 1  # not reached


def _report_single(module, args, result) -> None:
    from xlapy.cli.run_cmd import literal_text
    from xlapy.interpreter.values import TOKEN, flatten
    from xlapy.npz import save_npz

    if not args.quiet:
        print(literal_text(result, module.entry.root.shape, args))
    if args.output:
        leaves = [leaf for leaf in flatten(result) if leaf is not TOKEN]
        save_npz(args.output, {f"out{i}": leaf for i, leaf in enumerate(leaves)})


def _is_command_error(e: BaseException) -> bool:
    return isinstance(e, CommandError)


__all__ = ["run_mpi"]
