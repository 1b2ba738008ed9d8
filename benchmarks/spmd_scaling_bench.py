"""Scaling of a partitioned program: one SGD step of a 2-layer MLP (forward, backward, update;
the program of tests/fixtures/spmd/mlp_train_step, larger) as jax lowers it for 1, 2 and 4
devices, partitioned by xlapy's SPMD partitioner and run with one MPI rank per device.

    python benchmarks/spmd_scaling_bench.py                  # 1, 2, 4 ranks
    python benchmarks/spmd_scaling_bench.py --ranks 1,2 --batch 256 --reps 5

Meshes: 1 rank: one device; 2 ranks: data parallel (batch split, gradients all-reduced);
4 ranks: a 2x2 (data, model) mesh (batch over data, the hidden layer over model), and the
4-way data parallel mesh. For each: time per step (median of ``--reps`` runs after a warm-up;
every rank times the same run between barriers, the slowest rank counts; each rank runs its
per-device program compiled by the CPU backend, as ``mpiexec xlapy run --distributed mpi``
does; one BLAS thread per rank unless ``--threads``), the
collectives of the per-device program, and the bytes they move per device per step, counted
as a ring algorithm moves them (NCCL's bus bytes: all-reduce 2(g-1)/g x size, all-gather and
reduce-scatter (g-1)/g x the gathered size, all-to-all (g-1)/g x size, collective-permute
the size; g = group size). The XLA column is jax's compiled step on as many host devices
(``--xla_force_host_platform_device_count``), in the same run.

jax is needed to lower the programs (a test-only dependency, imported by this script and
never by xlapy); mpi4py and mpiexec to run them. Ranks beyond the machine's cores time-slice.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {  # name -> (ranks, data, model)
    "1 device": (1, 1, 1),
    "2 data": (2, 2, 1),
    "4 data": (4, 4, 1),
    "2x2 data,model": (4, 2, 2),
}


# -- lowering with jax (a subprocess: the host device count is fixed at jax's start) -------------


def lower(out: Path, name: str, data: int, model: int, sizes: dict, reps: int) -> dict:
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={data * model}"
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:data * model]).reshape(data, model), ("data", "model"))

    def ns(*spec):
        return NamedSharding(mesh, P(*spec))

    def loss_fn(params, x, y):
        w1, b1, w2 = params
        h = jax.nn.relu(x @ w1 + b1)
        return jnp.mean((h @ w2 - y) ** 2)

    def step(w1, b1, w2, x, y):
        loss, grads = jax.value_and_grad(loss_fn)((w1, b1, w2), x, y)
        return (*[p - 0.1 * g for p, g in zip((w1, b1, w2), grads)], loss)

    shard = (ns(None, "model"), ns("model"), ns("model", None), ns("data", None),
             ns("data", None))
    f = jax.jit(step, in_shardings=shard, out_shardings=shard[:3] + (ns(),))
    rng = np.random.default_rng(0)
    b, d, h, o = sizes["batch"], sizes["d"], sizes["hidden"], sizes["out"]
    args = [rng.standard_normal(s).astype(np.float32) * 0.1
            for s in ((d, h), (h,), (h, o), (b, d), (b, o))]
    (out / f"{name}.hlo").write_text(f.lower(*args).as_text(dialect="hlo"))
    np.savez(out / f"{name}.npz", *args)
    placed = [jax.device_put(a, s) for a, s in zip(args, shard)]
    jax.block_until_ready(f(*placed))
    times = []
    for _ in range(max(reps, 5)):
        t = time.perf_counter()
        jax.block_until_ready(f(*placed))
        times.append(time.perf_counter() - t)
    return {"xla_s": statistics.median(times)}


# -- one MPI job ----------------------------------------------------------------------------------


def bus_bytes(module) -> tuple[int, list[str]]:
    """Bytes each device moves per step (ring accounting) and the collectives' text."""
    from math import prod

    from xlapy.shape import dtypes

    total, names = 0, []
    for comp in module.computations:
        for instr in comp.instructions:
            op = instr.opcode
            if op not in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                          "collective-permute"):
                continue
            shape = instr.shape
            size = prod(shape.dimensions) * dtypes.byte_width(shape.element_type)
            if op == "collective-permute":
                total += size
            else:
                groups = instr.attrs["replica_groups"].flattened_replica_groups()
                g = len(groups[0]) if groups else 1
                if op == "all-reduce":
                    total += 2 * (g - 1) * size // g
                elif op == "reduce-scatter":
                    total += (g - 1) * size
                else:
                    total += (g - 1) * size // g
            names.append(f"{op} {shape}")
    return total, names


def mpi_worker(case: Path, reps: int, result: Path) -> None:
    from mpi4py import MPI

    from xlapy.parser import parse_hlo_module
    from xlapy.passes.spmd import partition
    from xlapy.passes.spmd.arrays import shard_arguments
    from xlapy.runtime.mpi_collectives import MpiCollectives
    from xlapy.runtime.mpi_run import prepare_module, run_distributed

    comm = MPI.COMM_WORLD
    n, rank = comm.Get_size(), comm.Get_rank()
    module = parse_hlo_module(case.with_suffix(".hlo").read_text())
    arrays = np.load(case.with_suffix(".npz"))
    args = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
    partition(module, n)
    # one partition: the shardings are removed and the arguments are the global arrays
    per_device = shard_arguments(module.spmd_layout, args)[rank] if n > 1 else args
    moved, names = bus_bytes(module)
    module = prepare_module(module, n, n)
    backend = MpiCollectives(comm, num_partitions=n, timeout=600)
    times = []
    for i in range(reps + 1):
        comm.Barrier()
        t = time.perf_counter()
        run_distributed(module, *per_device, comm=comm, num_partitions=n, timeout=600,
                        backend=backend, verify=False)
        comm.Barrier()
        if i:  # the first run is the warm-up
            times.append(time.perf_counter() - t)
    slowest = comm.reduce(statistics.median(times), op=MPI.MAX, root=0)
    if rank == 0:
        result.write_text(json.dumps({"step_s": slowest, "bytes": moved,
                                      "collectives": names}))
    backend.free()


def mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if not found:
        raise SystemExit("mpiexec not found (pip install 'xlapy[mpi]')")
    return found


def size_text(n: int) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n} B"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="1,2,4", help="rank counts to run (default 1,2,4)")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--out", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads per rank (and for jax's lowering job; default 1)")
    parser.add_argument("--lower", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--mpi-worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = {"batch": args.batch, "d": args.d, "hidden": args.hidden, "out": args.out}
    if args.lower:
        out, name, data, model = args.lower
        print(json.dumps(lower(Path(out), name, int(data), int(model), sizes, args.reps)))
        return 0
    if args.mpi_worker:
        mpi_worker(Path(args.mpi_worker[0]), args.reps, Path(args.mpi_worker[1]))
        return 0
    wanted = {int(r) for r in args.ranks.split(",")}
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # one BLAS thread per rank: k ranks use k cores (more threads per rank would make the
    # ranks of one job compete for the same cores)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    print(f"MLP training step: batch {args.batch}, {args.d} -> {args.hidden} -> {args.out}, "
          f"f32; median of {args.reps} steps")
    print(f"{'mesh':<16} {'ranks':>5} {'xlapy ms/step':>14} {'speed-up':>9} "
          f"{'XLA ms/step':>12} {'moved/device':>13}  collectives")
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for name, (ranks, data, model) in CONFIGS.items():
            if ranks not in wanted:
                continue
            case = Path(tmp) / name.replace(" ", "_").replace(",", "_")
            low = subprocess.run([sys.executable, __file__, "--lower", tmp, case.name,
                                  str(data), str(model), "--reps", str(args.reps),
                                  *[f"--{k}={v}" for k, v in sizes.items()]],
                                 capture_output=True, text=True, env=env, check=False)
            if low.returncode:
                sys.stderr.write(low.stderr)
                return 1
            xla = json.loads(low.stdout.strip().splitlines()[-1])["xla_s"]
            result = case.with_suffix(".json")
            job = subprocess.run([mpiexec(), "-n", str(ranks), sys.executable, __file__,
                                  "--mpi-worker", str(case), str(result), "--reps",
                                  str(args.reps)], capture_output=True, text=True, env=env,
                                 check=False)
            if job.returncode:
                sys.stderr.write(job.stdout + job.stderr)
                return 1
            r = json.loads(result.read_text())
            base = base or r["step_s"]
            kinds = sorted({c.split(" ")[0] for c in r["collectives"]})
            print(f"{name:<16} {ranks:>5} {r['step_s'] * 1e3:>14.1f} "
                  f"{base / r['step_s']:>8.2f}x {xla * 1e3:>12.2f} "
                  f"{size_text(r['bytes']):>13}  {len(r['collectives'])} "
                  f"({', '.join(kinds) or 'none'})")
    print(f"(this machine: {os.cpu_count()} cores; ranks beyond them time-slice, and other "
          f"jobs share them: figures are noisy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
