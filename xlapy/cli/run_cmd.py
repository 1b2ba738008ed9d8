"""``xlapy run MODULE.hlo``: parse, verify and run a module on the reference interpreter;
print the results as XLA literals, optionally read inputs from and write outputs to .npz.

npz keys: ``arg0, arg1, ...`` in parameter order (a tuple-shaped parameter takes its leaves as
consecutive keys, depth first); results ``out0, out1, ...`` (a tuple result flattened depth
first). bf16/f8/int4... are stored as raw bits with ``__dtype__<key>`` (see xlapy.npz).

Several devices (``--replicas N``, ``--partitions P``, or the module's replica_count /
num_partitions): the runtime (xlapy.Client) runs every device as a thread. Device k is
replica ``k // P``, partition ``k % P`` (k = replica * P + partition, PJRT's execution
order). Every device gets ``arg<i>`` unless the file holds per-device keys ``r<k>.arg<i>``
(then every device needs its own); results are written as ``r<k>.out<i>`` and printed under
a ``replica r`` (``replica r partition p``) heading. ``run_devices`` is the whole
multi-device path."""

from __future__ import annotations

from xlapy.cli.common import CommandError, add_command


def register(subparsers) -> None:
    p = add_command(
        subparsers, "run",
        summary="run an HLO module on the interpreter and print its results",
        description="Parse, verify and run an HLO module (XLA's text, e.g. a jax dump) on "
        "xlapy's reference interpreter, and print the results as XLA literals. Without "
        "--inputs, deterministic random arguments are made from --seed (index operands kept in "
        "bounds, as XLA's run_hlo_module does).",
        examples=[
            ("xlapy run examples/mlp.hlo", "random inputs, print the results"),
            ("xlapy run m.hlo --inputs in.npz --output out.npz", "arrays in and out as .npz"),
            ("cat m.hlo | xlapy run -", "module text from stdin"),
            ("xlapy run ar.hlo --replicas 2 --inputs in.npz",
             "two replicas; in.npz holds arg0.. for all or r0.arg0, r1.arg0.. per replica"),
            ("mpiexec -n 4 xlapy run ar.hlo --distributed mpi",
             "four replicas, one per MPI rank"),
        ],
        run=run,
    )
    p.add_argument("module", help="HLO text file, or - for stdin")
    p.add_argument("--inputs", metavar="NPZ", help="arguments: keys arg0, arg1, ...")
    p.add_argument("--output", metavar="NPZ", help="write the results: keys out0, out1, ...")
    p.add_argument("--seed", type=int, default=0, help="seed of the random arguments (default 0)")
    p.add_argument("--no-verify", action="store_true", help="skip the HLO verifier")
    p.add_argument("--quiet", action="store_true", help="do not print the results")
    p.add_argument("--replicas", type=int, metavar="N",
                   help="run N replicas (default: the module's replica_count)")
    p.add_argument("--partitions", type=int, metavar="P",
                   help="run P partitions per replica (default: the module's num_partitions)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="with several devices: how long a device waits in a collective, "
                   "channel or feed before failing (default 60)")
    p.add_argument("--distributed", choices=["mpi"],
                   help="mpi: one device per MPI rank; launch with mpiexec -n N "
                   "(pip install 'xlapy[mpi]'; see xlapy/runtime/mpi_run.py)")


def _read_module_text(path: str) -> str:
    import sys

    if path == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise CommandError(f"cannot read {path}: {e.strerror}") from None
    if not text.strip():
        raise CommandError(f"{path}: the module text is empty")
    return text


def _arguments_from_npz(module, path: str, arrays: dict | None = None,
                        prefix: str = "") -> list:
    from xlapy.npz import load_npz

    if arrays is None:
        arrays = load_npz(path)
    if prefix:
        arrays = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
    args = []
    counter = [0]

    def take(shape, where):
        if shape.is_tuple():
            return tuple(take(s, f"{where}[{i}]") for i, s in enumerate(shape.tuple_shapes))
        if shape.is_token():
            from xlapy.interpreter.values import TOKEN

            return TOKEN
        key = f"arg{counter[0]}"
        counter[0] += 1
        if key not in arrays:
            has = ", ".join(prefix + k for k in sorted(arrays)) or \
                (f"no {prefix}* arrays" if prefix else "no arrays")
            raise CommandError(f"{path}: missing {prefix}{key} for {where} ({shape}); the file "
                               f"has {has}")
        return arrays[key]

    for p in module.entry.parameters:
        args.append(take(p.shape, f"parameter {p.parameter_number} %{p.name}"))
    extra = sorted({k for k in arrays if k.startswith("arg")} - {f"arg{i}" for i in range(counter[0])})
    if extra:
        raise CommandError(f"{path}: {', '.join(prefix + e for e in extra)} match no parameter "
                           f"(the module takes {counter[0]} arrays)")
    return args


def run(args) -> int:
    from xlapy.hlo.parser import parse_hlo_module
    from xlapy.hlo.verifier import verify_module
    from xlapy.interpreter import evaluate
    from xlapy.interpreter.fake_args import make_fake_arguments
    from xlapy.interpreter.values import flatten, value_to_literal
    from xlapy.npz import save_npz

    if args.distributed == "mpi":  # one device per MPI rank (xlapy/runtime/mpi_run.py)
        from xlapy.runtime.mpi_run import run_command

        return run_command(args)
    module = parse_hlo_module(_read_module_text(args.module))
    if not args.no_verify:
        verify_module(module)
    replicas, partitions = device_counts(module, args)
    if replicas * partitions > 1:
        return run_devices(args, module, replicas, partitions)
    if args.inputs:
        inputs = _arguments_from_npz(module, args.inputs)
    else:
        inputs = make_fake_arguments(module, args.seed)
    result = evaluate(module, *inputs)
    if not args.quiet:
        print(value_to_literal(result, module.entry.root.shape).to_string())
    if args.output:
        from xlapy.interpreter.values import TOKEN

        leaves = [leaf for leaf in flatten(result) if leaf is not TOKEN]
        save_npz(args.output, {f"out{i}": leaf for i, leaf in enumerate(leaves)})
    return 0


# -- several devices (--replicas / --partitions) --------------------------------------------------


def device_counts(module, args) -> tuple[int, int]:
    """(replicas, partitions): the flags, else the module's header."""
    replicas = module.replica_count if args.replicas is None else args.replicas
    partitions = module.num_partitions if args.partitions is None else args.partitions
    for name, value in (("--replicas", replicas), ("--partitions", partitions)):
        if value < 1:
            raise CommandError(f"{name} must be at least 1, got {value}")
    return replicas, partitions


def device_inputs(module, args, count: int) -> list[list]:
    """One argument list per device: ``r<k>.arg<i>`` when the file has per-device keys,
    else the same ``arg<i>`` (or the same random arguments) for every device."""
    from xlapy.interpreter.fake_args import make_fake_arguments
    from xlapy.npz import load_npz

    if not args.inputs:
        shared = make_fake_arguments(module, args.seed)
        return [list(shared) for _ in range(count)]
    arrays = load_npz(args.inputs)
    per_device = sorted({k.split(".", 1)[0] for k in arrays if k.startswith("r") and "." in k})
    if not per_device:
        shared = _arguments_from_npz(module, args.inputs, arrays)
        return [list(shared) for _ in range(count)]
    shared_keys = sorted(k for k in arrays if k.startswith("arg"))
    if shared_keys:
        raise CommandError(f"{args.inputs}: mixes shared keys ({', '.join(shared_keys)}) with "
                           f"per-device keys ({', '.join(per_device)}.arg...); use one kind")
    unknown = [p for p in per_device if not p[1:].isdigit() or int(p[1:]) >= count]
    if unknown:
        raise CommandError(f"{args.inputs}: keys {', '.join(u + '.*' for u in unknown)} name no "
                           f"device (devices r0..r{count - 1})")
    return [_arguments_from_npz(module, args.inputs, arrays, prefix=f"r{k}.")
            for k in range(count)]


def execute_devices(module, inputs: list[list], replicas: int, partitions: int,
                    timeout: float | None) -> list:
    """Run the module on every device (in-process threads); results in device order."""
    from xlapy.runtime import Client

    client = Client(timeout=timeout)
    exe = client.compile(module, replicas=replicas, partitions=partitions, verify=False)
    return exe.execute(inputs)


def report_devices(module, args, results: list, partitions: int) -> None:
    """Print each device's result under its label; write ``r<k>.out<i>``."""
    from xlapy.interpreter.values import TOKEN, flatten, value_to_literal
    from xlapy.npz import save_npz
    from xlapy.runtime.threaded_collectives import device_label

    shape = module.entry.root.shape
    if not args.quiet:
        for k, result in enumerate(results):
            label = device_label((k // partitions, k % partitions), partitions)
            print(f"{label}:")
            print(value_to_literal(result, shape).to_string())
    if args.output:
        out = {}
        for k, result in enumerate(results):
            leaves = [leaf for leaf in flatten(result) if leaf is not TOKEN]
            out.update({f"r{k}.out{i}": leaf for i, leaf in enumerate(leaves)})
        save_npz(args.output, out)


def run_devices(args, module, replicas: int, partitions: int) -> int:
    """The multi-device path of ``xlapy run``: inputs per device, execute, report."""
    inputs = device_inputs(module, args, replicas * partitions)
    results = execute_devices(module, inputs, replicas, partitions, args.timeout)
    report_devices(module, args, results, partitions)
    return 0
