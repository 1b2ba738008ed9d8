"""All-reduce latency and bandwidth of xlapy's runtimes: in-process (devices as threads,
xlapy.Client with ThreadedCollectives) and MPI (one device per rank, MpiCollectives),
for 2 and 4 replicas, message sizes 4 B .. 64 MiB (powers of 4).

    python benchmarks/collectives_bench.py                    # the whole table
    python benchmarks/collectives_bench.py --max-size 1MiB --replicas 2
    python benchmarks/collectives_bench.py --dtype s32        # MPI's own MPI_SUM path

What is timed: one execution of an HLO module whose while loop runs ``iters`` all-reduces
(sum) of one array of the given size, divided by ``iters`` - so the figure is what a
collective costs inside a running program (the loop's counter and compare included), not a
bare MPI call. The devices run the module on ``--backend`` (default the compiled CPU
backend, where the loop is one native function and the all-reduce a step of it; the
interpreter: ``--backend interpreter``). Each point is the median of ``--reps`` executions;
for MPI every rank times the same execution between two barriers and the slowest rank
counts. GB/s is the algorithm bandwidth, bytes per replica / time (NCCL's "algbw"; its
"busbw" is algbw x 2(n-1)/n).

f32 sums (the default) are folded in group order on both runtimes (bit for bit the
interpreter's result). In-process (xlapy/backends/cpu/collectives.py) the device threads
meet in shared memory: every device folds all n operands into its own result, and from
256 KiB on each folds 1/n of the elements and writes them into every device's result.
Under MPI (xlapy/runtime/mpi_collectives.py, called by the compiled step) small arrays are
all-gathered and folded by each rank, arrays above 64 KiB are folded one piece per rank
(Ialltoall) and re-assembled (Iallgather); the folds run the CPU backend's compiled kernels.
Integer sums (--dtype s32) use MPI_SUM itself.

The XLA:CPU column is the same loop compiled by XLA through jax (a shard_map over N host
devices, ``--xla_force_host_platform_device_count``, whose body is a fori_loop of psums),
timed per execution as above; ``--no-xla`` leaves it out (jax is a test-only dependency).

The MPI part launches ``mpiexec -n N`` on this same script (``--mpi-worker``), so mpi4py
and mpiexec must be installed (``pip install 'xlapy[mpi]'``). Ranks and threads may
outnumber the cores: the figures then include time-slicing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

TYPES = {"f32": np.float32, "s32": np.int32}


def parse_size(text: str) -> int:
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "b": 1}
    low = text.strip().lower()
    for unit, factor in units.items():
        if low.endswith(unit):
            return int(float(low[: -len(unit)]) * factor)
    return int(low)


def size_text(n: int) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n // factor} {unit}"
    return f"{n} B"


def sizes(max_size: int) -> list[int]:
    out, s = [], 4
    while s <= max_size:
        out.append(s)
        s *= 4
    return out


def module_text(elements: int, t: str, iters: int) -> str:
    """A while loop of ``iters`` all-reduces (sum) of a ``t[elements]`` value."""
    return f"""HloModule allreduce_bench

add {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  ROOT s = {t}[] add(x, y)
}}

cond {{
  p = (s32[], {t}[{elements}]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({iters})
  ROOT lt = pred[] compare(i, n), direction=LT
}}

body {{
  p = (s32[], {t}[{elements}]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = {t}[{elements}] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  r = {t}[{elements}] all-reduce(v), replica_groups={{}}, to_apply=add
  ROOT out = (s32[], {t}[{elements}]) tuple(j, r)
}}

ENTRY e {{
  x = {t}[{elements}] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], {t}[{elements}]) tuple(zero, x)
  w = (s32[], {t}[{elements}]) while(init), condition=cond, body=body
  ROOT r = {t}[{elements}] get-tuple-element(w), index=1
}}
"""


def iterations(nbytes: int) -> int:
    """All-reduces per execution: many for small messages (latency), few for big ones."""
    return int(max(2, min(200, (16 << 20) // max(nbytes, 1))))


def value(elements: int, t: str, replica: int) -> np.ndarray:
    if t == "f32":
        # Small values: 200 sums of 4 replicas stay finite.
        return np.full(elements, 1e-3 * (replica + 1), np.float32)
    return np.full(elements, replica + 1, np.int32)


# -- in-process (threads) -------------------------------------------------------------------------


def bench_threads(n: int, size_list: list[int], t: str, reps: int,
                  backend: str = "cpu") -> dict[int, float]:
    from xlapy.runtime import Client

    client = Client(backend, timeout=600)
    out = {}
    itemsize = np.dtype(TYPES[t]).itemsize
    for nbytes in size_list:
        elements = max(nbytes // itemsize, 1)
        iters = iterations(nbytes)
        exe = client.compile(module_text(elements, t, iters), replicas=n)
        inputs = [[value(elements, t, k)] for k in range(n)]
        exe.execute(inputs)  # warm-up
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            exe.execute(inputs)
            times.append((time.perf_counter() - start) / iters)
        out[nbytes] = statistics.median(times)
    return out


# -- MPI --------------------------------------------------------------------------------------------


def mpi_worker(args) -> None:
    """One rank of the MPI benchmark (started by mpiexec); rank 0 prints a JSON line."""
    from mpi4py import MPI

    from xlapy.backends.base import get_backend
    from xlapy.interpreter.evaluator import EvalOptions
    from xlapy.runtime.mpi_collectives import MpiCollectives
    from xlapy.runtime.mpi_run import prepare_module

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    backend = MpiCollectives(comm, timeout=600, check_matching=not args.no_check)
    itemsize = np.dtype(TYPES[args.dtype]).itemsize
    out = {}
    for nbytes in sizes(args.max_size):
        elements = max(nbytes // itemsize, 1)
        iters = iterations(nbytes)
        module = prepare_module(module_text(elements, args.dtype, iters), n)
        program = get_backend(args.backend, "collectives_bench").compile(module)
        x = value(elements, args.dtype, rank)
        options = EvalOptions(replica_id=rank, replica_count=n, collectives=backend, timeout=600)
        program.run([x], options)  # warm-up
        times = []
        for _ in range(args.reps):
            comm.Barrier()
            start = time.perf_counter()
            program.run([x], options)
            elapsed = time.perf_counter() - start
            times.append(comm.allreduce(elapsed, op=MPI.MAX) / iters)
        out[nbytes] = statistics.median(times)
    if rank == 0:
        print("RESULT " + json.dumps({str(k): v for k, v in out.items()}), flush=True)


def mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec")
    if not found:
        sys.exit("collectives_bench: mpiexec not found; pip install 'xlapy[mpi]' "
                 "(or run with --no-mpi)")
    return found


def bench_mpi(n: int, args) -> dict[int, float]:
    cmd = [mpiexec(), "-n", str(n), sys.executable, str(Path(__file__).resolve()),
           "--mpi-worker", "--max-size", str(args.max_size), "--dtype", args.dtype,
           "--reps", str(args.reps), "--backend", args.backend] + \
        (["--no-check"] if args.no_check else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"collectives_bench: {' '.join(cmd)} failed (exit {proc.returncode}):\n"
                 f"{proc.stdout}\n{proc.stderr}")
    return {int(k): v for k, v in json.loads(lines[-1][len("RESULT "):]).items()}


# -- XLA:CPU through jax (a subprocess: the host device count is fixed when jax starts) -----------


def xla_worker(args) -> None:
    """The same loop of all-reduces compiled by XLA:CPU: a shard_map over ``n`` host devices
    whose body is a fori_loop of psums; prints a JSON line."""
    n = args.xla_worker
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
    import jax
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:n]), ("i",))
    itemsize = np.dtype(TYPES[args.dtype]).itemsize
    out = {}
    for nbytes in sizes(args.max_size):
        elements = max(nbytes // itemsize, 1)
        iters = iterations(nbytes)

        def body(v, iters=iters):
            return jax.lax.fori_loop(0, iters, lambda _, w: jax.lax.psum(w, "i"), v)

        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i"),
                                  check_vma=False))
        x = jax.device_put(np.concatenate([value(elements, args.dtype, k) for k in range(n)]),
                           jax.sharding.NamedSharding(mesh, P("i")))
        jax.block_until_ready(f(x))  # compile and warm up
        times = []
        for _ in range(args.reps):
            start = time.perf_counter()
            jax.block_until_ready(f(x))
            times.append((time.perf_counter() - start) / iters)
        out[nbytes] = statistics.median(times)
    print("RESULT " + json.dumps({str(k): v for k, v in out.items()}), flush=True)


def bench_xla(n: int, args) -> dict[int, float] | None:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--xla-worker", str(n),
           "--max-size", str(args.max_size), "--dtype", args.dtype, "--reps", str(args.reps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        print(f"collectives_bench: no XLA column (jax failed or is not installed):\n"
              f"{proc.stderr.strip().splitlines()[-1:] }", file=sys.stderr)
        return None
    return {int(k): v for k, v in json.loads(lines[-1][len("RESULT "):]).items()}


# -- the table ------------------------------------------------------------------------------------


def time_text(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds:8.3f} s "


def table(n: int, size_list, threads: dict | None, mpi: dict | None,
          xla: dict | None = None) -> str:
    head = f"{'size':>8} |"
    rule = "-" * 9 + "+"
    columns = (("in-process (threads)", threads), ("MPI", mpi), ("XLA:CPU (jax)", xla))
    for name, data in columns:
        if data is not None:
            head += f" {name + ' median':>24} {'GB/s':>8} |"
            rule += "-" * 35 + "+"
    lines = [f"all-reduce, {n} replicas", head, rule]
    for nbytes in size_list:
        row = f"{size_text(nbytes):>8} |"
        for _, data in columns:
            if data is not None:
                t = data[nbytes]
                row += f" {time_text(t):>24} {nbytes / t / 1e9:8.3f} |"
        lines.append(row)
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicas", type=int, nargs="+", default=[2, 4])
    p.add_argument("--max-size", type=parse_size, default=64 << 20,
                   help="largest message per replica (default 64MiB)")
    p.add_argument("--dtype", choices=sorted(TYPES), default="f32")
    p.add_argument("--reps", type=int, default=5, help="executions per point (median)")
    p.add_argument("--backend", default="cpu",
                   help="the runtime backend the devices run on (default cpu, the compiled "
                   "CPU backend; interpreter: the reference)")
    p.add_argument("--no-mpi", action="store_true", help="only the in-process runtime")
    p.add_argument("--no-threads", action="store_true", help="only the MPI runtime")
    p.add_argument("--no-check", action="store_true",
                   help="MPI: skip the instruction-matching exchange before each collective")
    p.add_argument("--no-xla", action="store_true",
                   help="skip the XLA:CPU column (jax, as many host devices as replicas)")
    p.add_argument("--mpi-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--xla-worker", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mpi_worker:
        mpi_worker(args)
        return 0
    if args.xla_worker:
        xla_worker(args)
        return 0
    size_list = sizes(args.max_size)
    print(f"xlapy all-reduce benchmark: {args.dtype} sum, sizes per replica "
          f"{size_text(size_list[0])} .. {size_text(size_list[-1])}, median of {args.reps}, "
          f"{os.cpu_count()} cores", flush=True)
    for n in args.replicas:
        threads = None if args.no_threads else bench_threads(n, size_list, args.dtype,
                                                             args.reps, args.backend)
        mpi = None if args.no_mpi else bench_mpi(n, args)
        xla = None if args.no_xla else bench_xla(n, args)
        print()
        print(table(n, size_list, threads, mpi, xla), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
