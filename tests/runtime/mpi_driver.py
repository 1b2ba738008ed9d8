"""Run under mpiexec by tests/runtime/test_mpi.py: every case of a directory in one MPI job.

    mpiexec -n 4 python mpi_driver.py CASE_DIR [BACKEND]

For each ``<name>.hlo`` (sorted) with ``<name>.npz`` (per-device inputs ``r<k>.arg<i>``) and
``<name>.json`` (``{"partitions": P, "timeout": s}``), every rank runs its device through
``xlapy.runtime.mpi_run.run_distributed`` with a fresh MpiCollectives, on BACKEND (default
cpu, with the exact HLO numerics the suite's in-process runs use); rank 0 writes
``<name>.out.npz`` (``r<k>.out<i>``, as ``xlapy run --replicas``) and ``<name>.stats.json``
(the communicator cache counters of rank 0's backend)."""

import json
import sys
from pathlib import Path

from xlapy.interpreter.values import TOKEN, flatten
from xlapy.npz import load_npz, save_npz
from xlapy.runtime.mpi_collectives import MpiCollectives
from xlapy.runtime.mpi_run import prepare_module, run_distributed


def arguments(module, arrays: dict, device: int) -> list:
    prefix = f"r{device}."
    count = [0]

    def take(shape):
        if shape.is_tuple():
            return tuple(take(s) for s in shape.tuple_shapes)
        key = f"{prefix}arg{count[0]}"
        count[0] += 1
        return arrays[key]

    return [take(p.shape) for p in module.entry.parameters]


#: The cpu backend with the exact HLO semantics (tests/conftest.py sets them in process).
EXACT = {"allow_excess_precision": False, "flush_denormals": False}


def main(case_dir: str, device_backend: str = "cpu") -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    for hlo in sorted(Path(case_dir).glob("*.hlo")):
        name = hlo.stem
        config = json.loads(hlo.with_suffix(".json").read_text())
        partitions = config.get("partitions", 1)
        timeout = config.get("timeout", 30.0)
        module = prepare_module(hlo.read_text(), comm.Get_size(), partitions)
        args = arguments(module, load_npz(hlo.with_suffix(".npz")), rank)
        backend = MpiCollectives(comm, num_partitions=partitions, timeout=timeout)
        results = run_distributed(module, *args, comm=comm, num_partitions=partitions,
                                  timeout=timeout, backend=backend, device_backend=device_backend,
                                  backend_options=EXACT if device_backend == "cpu" else None)
        if rank == 0:
            out = {}
            for k, result in enumerate(results):
                leaves = [leaf for leaf in flatten(result) if leaf is not TOKEN]
                out.update({f"r{k}.out{i}": leaf for i, leaf in enumerate(leaves)})
            save_npz(str(hlo.with_name(name + ".out.npz")), out)
            stats = backend.stats
            hlo.with_name(name + ".stats.json").write_text(json.dumps({
                "splits": stats.splits, "cache_hits": stats.cache_hits,
                "world_uses": stats.world_uses, "group_sets": stats.group_sets}))
        backend.free()


if __name__ == "__main__":
    main(*sys.argv[1:3])
