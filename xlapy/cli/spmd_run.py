"""``xlapy run`` of a sharded module (what jax dumps for a multi-device program: GSPMD
``sharding=`` attributes or Shardy ``xla.sdy.*`` ones): partition it with the SPMD
partitioner (xlapy.passes.spmd), then run the per-device program on the in-process
runtime or over MPI.

Owns the ``--spmd`` and ``--arrays`` options and the run state ``SpmdRun``:

- ``--spmd auto`` (default) partitions when the module carries shardings and is no XLA
  post-optimisation dump (``is_scheduled=true``: already per device); ``on`` / ``off``
  force it. The partition count is ``--partitions``, else the module's num_partitions, else
  the number of devices its shardings name.
- ``--arrays global`` (the default for a module xlapy partitioned): ``--inputs`` holds each
  argument whole (``arg<i>``, the unpartitioned module's shapes), sliced to each device by
  its parameter's sharding; results are assembled by the result's sharding and printed and
  written (``out<i>``) once, as the unpartitioned module on one device would give them
  (per replica when there are several). ``--arrays per-device``: ``r<k>.arg<i>`` /
  ``r<k>.out<i>`` hold each device's own blocks (the per-device program's shapes).

Random arguments (no ``--inputs``) are made for the unpartitioned module and sliced, so the
printed results equal the unpartitioned module's on one device.
Imports xlapy.passes.spmd lazily.
"""

from __future__ import annotations

from dataclasses import dataclass

from xlapy.cli.common import CommandError
from xlapy.errors import XlaError


@dataclass
class SpmdRun:
    layout: object  # xlapy.passes.spmd.arrays.SpmdLayout
    global_args: list | None  # random global arguments (no --inputs)
    arrays: str  # "global" or "per-device"


def add_options(p) -> None:
    p.add_argument("--spmd", choices=["auto", "on", "off"], default="auto",
                   help="partition a sharded module (GSPMD or Shardy, e.g. a jax dump) with "
                   "the SPMD partitioner before running it; auto: when it has shardings and "
                   "is not already per-device (default auto)")
    p.add_argument("--arrays", choices=["global", "per-device"], default=None,
                   help="with a partitioned module: --inputs/--output hold whole arrays "
                   "(arg<i>/out<i>, sliced and assembled by their shardings; the default) or "
                   "each device's blocks (r<k>.arg<i>/r<k>.out<i>)")


def wants_partitioning(args, module) -> bool:
    from xlapy.passes.spmd import has_shardings

    mode = getattr(args, "spmd", "auto")
    if mode == "off":
        return False
    if mode == "on":
        return True
    return has_shardings(module) and not module.config.get("is_scheduled")


def partition_for_run(args, module, default_partitions: int | None = None):
    """``(module, SpmdRun)``: the partitioned module (in place) and its run state, or
    ``(module, None)`` when the module is not partitioned."""
    from xlapy.interpreter.fake_args import make_fake_arguments
    from xlapy.passes.spmd import partition, sharding_devices

    if not wants_partitioning(args, module):
        if getattr(args, "arrays", None) == "global":
            raise CommandError("--arrays global needs a module the SPMD partitioner "
                               "partitions (it has no shardings, or --spmd off)")
        return module, None
    partitions = args.partitions
    if partitions is None:
        partitions = module.num_partitions if module.num_partitions > 1 else \
            (sharding_devices(module) or default_partitions or 1)
    arrays = args.arrays or "global"
    global_args = None
    if not args.inputs and arrays == "global":
        snapshot = getattr(args, "snapshot_arguments", None)
        if snapshot is None:
            global_args = make_fake_arguments(module, args.seed)
        else:
            from xlapy.interpreter.values import literal_to_value

            global_args = [literal_to_value(a) for a in snapshot]
    try:
        partition(module, partitions, args.replicas)
    except XlaError as e:
        raise CommandError(f"spmd-partition: {e}" if "spmd-partition" not in str(e)
                           else str(e)) from e
    if partitions == 1:  # shardings removed: an ordinary one-device module
        return module, None
    return module, SpmdRun(module.spmd_layout, global_args, arrays)


def device_inputs(run: SpmdRun, module, args, count: int) -> list[list] | None:
    """Per-device argument lists in global mode (None: per-device mode, the caller's
    ordinary path)."""
    if run.arrays != "global":
        return None
    from xlapy.passes.spmd.arrays import shard_arguments

    layout = run.layout
    if args.inputs:
        global_args = _global_arguments(layout, args)
    else:
        global_args = run.global_args
    replicas = max(count // layout.num_partitions, 1)
    return shard_arguments(layout, global_args, replicas)


def _global_arguments(layout, args) -> list:
    """``arg<i>`` of --inputs, checked against the unpartitioned parameter shapes."""
    from xlapy.cli import run_cmd
    from xlapy.npz import load_npz

    arrays = load_npz(args.inputs)
    per_device = sorted(k for k in arrays if k.startswith("r") and "." in k)
    if per_device:
        raise CommandError(f"{args.inputs}: holds per-device keys ({', '.join(per_device[:3])}"
                           f"...); with --arrays global (the default for a partitioned "
                           f"module) it holds whole arrays arg0, arg1, ...; pass --arrays "
                           f"per-device for device blocks")

    class _Params:  # the unpartitioned entry's parameters, for run_cmd's checks
        def __init__(self, shapes):
            self.entry = self
            self.parameters = [_Param(i, s) for i, s in enumerate(shapes)]

    return run_cmd._arguments_from_npz(_Params(layout.param_shapes), args.inputs, arrays,
                                       cast=args.cast_inputs)


class _Param:
    def __init__(self, number: int, shape):
        self.parameter_number = number
        self.shape = shape
        self.name = f"arg{number}"


def report(run: SpmdRun, args, results: list) -> bool:
    """Print and write the global results (True), or leave per-device reporting to the
    caller (False)."""
    if run.arrays != "global":
        return False
    from xlapy.interpreter.values import TOKEN, flatten, value_to_literal
    from xlapy.npz import save_npz
    from xlapy.passes.spmd.arrays import assemble_results

    layout = run.layout
    replicas = max(len(results) // layout.num_partitions, 1)
    try:
        values = [assemble_results(layout, results, r) for r in range(replicas)]
    except XlaError as e:
        raise CommandError(str(e)) from e
    if not args.quiet:
        for r, value in enumerate(values):
            if replicas > 1:
                print(f"replica {r}:")
            print(value_to_literal(value, layout.result_shape).to_string())
    if args.output:
        out = {}
        for r, value in enumerate(values):
            prefix = f"r{r}." if replicas > 1 else ""
            leaves = [leaf for leaf in flatten(value) if leaf is not TOKEN]
            out.update({f"{prefix}out{i}": leaf for i, leaf in enumerate(leaves)})
        save_npz(args.output, out)
    return True


__all__ = ["SpmdRun", "add_options", "device_inputs", "partition_for_run", "report",
           "wants_partitioning"]
