"""``xlapy run MODULE.hlo``: parse, verify and run a module on a runtime backend (default the
compiled CPU backend, ``cpu``, as ``xlapy.Client()``; ``--backend interpreter`` the reference);
print the results as XLA literals, optionally read inputs from and write outputs to .npz.
MODULE is HLO text or one of XLA's protos (xlapy.proto; an HloSnapshot runs on its own
arguments unless --inputs is given); a file a glob found that holds no module is skipped.

npz keys: ``arg0, arg1, ...`` in parameter order (a tuple-shaped parameter takes its leaves as
consecutive keys, depth first); results ``out0, out1, ...`` (a tuple result flattened depth
first). bf16/f8/int4... are stored as raw bits with ``__dtype__<key>`` (see xlapy.npz). Each
array must have its parameter's element type and dimensions, or the run stops with exit 2
naming both; ``--cast-inputs`` converts other element types as HLO ``convert`` does (complex
to real stays refused). A file that is no .npz of numeric arrays, or an ``--output`` that
cannot be written, is exit 2 too.

Several devices (``--replicas N``, ``--partitions P``, or the module's replica_count /
num_partitions): the runtime (xlapy.Client) runs every device as a thread. Device k is
replica ``k // P``, partition ``k % P`` (k = replica * P + partition, PJRT's execution
order). Every device gets ``arg<i>`` unless the file holds per-device keys ``r<k>.arg<i>``
(then every device needs its own); results are written as ``r<k>.out<i>`` and printed under
a ``replica r`` (``replica r partition p``) heading. ``run_devices`` is the whole
multi-device path.

XLA's run_hlo_module: ``--backend B`` runs on a registered runtime backend (default the compiled
CPU backend, ``cpu``; ``interpreter`` is the reference); ``--reference R`` also runs on R and
compares every output leaf (an element passes if ``|a-b| <= --abs-error`` or ``|a-b| <=
--rel-error * |b|``, NaN equals NaN, integers and pred exactly), prints a summary per output
and, when they differ on one device, bisects: the first instruction whose output differs when it
runs alone fed the reference values of its operands (xlapy/tools/compare.py). Several files or
globs run one after the other. ``--iterations N`` times each backend; ``--print-literals``
prints the inputs (and with --reference the outputs of both backends). Arrays over 1000
elements print summarised (NumPy's rule: first and last 3 entries of each dimension, ``...``
between) unless ``--print-all``. A progress line is drawn
on stderr when it is a terminal. Exit codes: 0 equal (or no comparison), 1 a mismatch, 2 bad
input (with several modules, every module runs; 2 wins over 1)."""

from __future__ import annotations

import argparse

from xlapy.cli.common import CommandError, add_command, check_output_path
from xlapy.errors import XlaError

#: The backend of ``xlapy run`` without --backend: the runtime's (``Client()``'s) default, the
#: compiled CPU backend. Kept in one place: xlapy.runtime.client.DEFAULT_BACKEND.
DEFAULT_BACKEND = "cpu"


def register(subparsers) -> None:
    p = add_command(
        subparsers, "run",
        summary="run an HLO module (on the CPU backend) and print its results",
        description="Parse, verify and run an HLO module (XLA's text or proto, e.g. a jax dump) on "
        f"xlapy's compiled CPU backend (--backend {DEFAULT_BACKEND}, the default, as "
        "xlapy.Client(); --backend interpreter: the reference interpreter), and print the "
        "results as XLA literals (arrays over 1000 elements elided; --print-all for every "
        "element). Without "
        "--inputs, deterministic random arguments are made from --seed (index operands kept in "
        "bounds, as XLA's run_hlo_module does).",
        examples=[
            ("xlapy run examples/mlp.hlo", "random inputs, print the results"),
            ("xlapy run m.hlo --inputs in.npz --output out.npz", "arrays in and out as .npz"),
            ("cat m.hlo | xlapy run -", "module text from stdin"),
            ("xlapy run f.mlir", ("StableHLO text (jax's lower(...).as_text()), told apart by "
             "content")),
            ("xlapy run snapshot.pb", "an HloSnapshot, run on the arguments it holds"),
            ("xlapy run 'dump/*before_optimizations*' --reference xla",
             "every module of an XLA dump against real XLA:CPU (jax)"),
            ("xlapy run ar.hlo --replicas 2 --inputs in.npz",
             "two replicas; in.npz holds arg0.. for all or r0.arg0, r1.arg0.. per replica"),
            ("mpiexec -n 4 xlapy run ar.hlo --distributed mpi",
             "four replicas, one per MPI rank"),
            ("xlapy run m.hlo --backend cpu --reference interpreter",
             "compare two backends; bisect to the first differing instruction"),
            ("xlapy run 'dumps/*.hlo' --backend cpu --reference interpreter --rel-error 1e-2",
             "compare every module of a dump"),
            ("xlapy run m.hlo --iterations 20", "min/median time of 20 runs"),
            ("xlapy run m.hlo --print-literals", "print the (random) inputs too"),
        ],
        run=run,
    )
    p.add_argument("modules", nargs="+", metavar="MODULE",
                   help="HLO or StableHLO (MLIR) text, or XLA proto files (.pb/.pbtxt: "
                   "HloModuleProto, HloProto dumps, HloSnapshot with its arguments), globs "
                   "('dumps/*'; files that hold no module are skipped), or - for stdin")
    p.add_argument("--inputs", metavar="NPZ",
                   help="arguments: keys arg0, arg1, ...; each array must have its "
                   "parameter's element type and dimensions (else exit 2, naming both)")
    p.add_argument("--cast-inputs", action="store_true",
                   help="convert --inputs arrays of another element type to the parameter's, "
                   "as HLO convert does (floats to integers round toward zero and saturate, "
                   "NaN gives 0; integers wrap to narrower ones; complex to real is refused)")
    p.add_argument("--output", metavar="FILE", help="write the results as .npz to exactly this "
                   "file name (no suffix added): keys out0, out1, ...; bf16/f8/int4 as raw bits "
                   "with a __dtype__<key> entry (xlapy.npz.load_npz reads it back)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random arguments (default 0)")
    p.add_argument("--no-verify", action="store_true", help="skip the HLO verifier")
    p.add_argument("--quiet", action="store_true", help="do not print the results")
    p.add_argument("--replicas", type=int, metavar="N",
                   help="run N replicas (default: the module's replica_count)")
    p.add_argument("--partitions", type=int, metavar="P",
                   help="run P partitions per replica (default: the module's num_partitions)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="with several devices: how long a device waits in a collective, "
                   "channel or feed, or for the others to finish, before failing "
                   "(default 60)")
    p.add_argument("--distributed", choices=["mpi"],
                   help="mpi: one device per MPI rank; launch with mpiexec -n N "
                   "(pip install 'xlapy[mpi]'; see xlapy/cli/run_mpi.py)")
    p.add_argument("--backend", default=None, metavar="NAME",
                   help=f"runtime backend to run on (default {DEFAULT_BACKEND}; "
                   "interpreter: the reference interpreter)")
    p.add_argument("--xla_allow_excess_precision", type=_flag_bool, default=None,
                   metavar="true|false",
                   help="cpu backend (the only one with this option; an error for a run with "
                   "no cpu backend): XLA:CPU's default bf16 numerics (true, the default: a "
                   "bf16 operation converted to f32 gives its f32 value unrounded) or the HLO's "
                   "exact roundings, the interpreter's answers (false); XLA's flag of that name")
    p.add_argument("--flush-denormals", type=_flag_bool, default=None, metavar="true|false",
                   help="denormal inputs and results of float arithmetic are zeros, as on "
                   "XLA:CPU (true) or kept, the exact HLO semantics (false); for the cpu and "
                   "interpreter backends of the run (--backend, --reference); default: each "
                   "backend's own (cpu true, interpreter false)")
    p.add_argument("--fma-contraction", type=_flag_bool, default=None, metavar="true|false",
                   help="cpu backend: a multiply feeding an add or subtract in the same kernel "
                   "is one fused multiply-add, rounded once, as XLA:CPU compiles it (true, the "
                   "default) or two roundings, the exact HLO semantics (false)")
    p.add_argument("--reference", metavar="NAME",
                   help="also run on this backend and compare the results (exit 1 if they "
                   "differ); a difference is bisected to its first instruction; xla: real "
                   "XLA:CPU through jax")
    p.add_argument("--abs-error", type=float, default=1e-3, metavar="X",
                   help="absolute error bound of the comparison (default 1e-3)")
    p.add_argument("--rel-error", type=float, default=1e-3, metavar="X",
                   help="relative error bound of the comparison (default 1e-3); an element "
                   "passes if within either bound")
    p.add_argument("--no-bisect", action="store_true",
                   help="with --reference: do not bisect a difference")
    p.add_argument("--iterations", type=int, metavar="N",
                   help="run N times; print each backend's min/median time")
    p.add_argument("--print-literals", action="store_true",
                   help="print the inputs (and both backends' outputs) as literals")
    p.add_argument("--print-all", action="store_true",
                   help=f"print every element of every array (default: arrays over "
                   f"{SUMMARIZE_OVER} elements show the first and last {SUMMARY_EDGE} entries "
                   f"of each dimension, as NumPy does)")
    p.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="progress line on stderr (a run over 2 s: elapsed time, and on the "
                   "interpreter instructions and while iterations; with --iterations or "
                   "--reference: runs done): auto (default) = only when stderr is a terminal")
    from xlapy.cli import spmd_run

    spmd_run.add_options(p)


#: The numerics flags: flag -> (its argparse name, the backend option it sets).
NUMERICS_FLAGS = {"--xla_allow_excess_precision": ("xla_allow_excess_precision",
                                                   "allow_excess_precision"),
                  "--flush-denormals": ("flush_denormals", "flush_denormals"),
                  "--fma-contraction": ("fma_contraction", "fma_contraction")}


def _numerics_options(backend: str) -> tuple[dict, dict] | None:
    """(the options a backend made without options reads, the backend's own defaults) of a
    backend with numerics options (cpu, interpreter), else None."""
    if backend == "cpu":
        from xlapy.backends.cpu import backend as cpu

        return cpu.DEFAULT_OPTIONS, cpu.XLA_CPU_DEFAULTS
    if backend == "interpreter":
        from xlapy.backends import interpreter

        return interpreter.DEFAULT_OPTIONS, interpreter.INTERPRETER_DEFAULTS
    return None


def _set_numerics(args) -> None:
    """The numerics flags set their option on every backend of the run that has it
    (--backend, --reference); a flag that no backend of the run has is an error, never
    ignored. A flag not given leaves each backend its own default."""
    backends = list(dict.fromkeys([args.backend] + ([args.reference] if args.reference else [])))
    for flag, (dest, option) in NUMERICS_FLAGS.items():
        value = getattr(args, dest)
        having = [n for n in map(_numerics_options, backends) if n and option in n[1]]
        if value is not None and not having:
            owners = [b for b in ("cpu", "interpreter") if option in _numerics_options(b)[1]]
            many = len(backends) > 1
            raise CommandError(
                f"{flag}: the backend{'s' if many else ''} of this run ({', '.join(backends)}) "
                f"ha{'ve' if many else 's'} no such option; only {' and '.join(owners)} "
                f"{'has' if len(owners) == 1 else 'have'} it")
        for defaults, own in having:
            defaults[option] = own[option] if value is None else value


def _flag_bool(text: str) -> bool:
    """true/false as XLA_FLAGS spells booleans (also 1/0)."""
    value = {"true": True, "1": True, "false": False, "0": False}.get(text.strip().lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value


def _arguments_from_npz(module, path: str, arrays: dict | None = None,
                        prefix: str = "", cast: bool = False) -> list:
    """The entry's arguments from the npz ``arrays`` (``path`` read when None): leaves in
    parameter order, each checked against its parameter's shape - the same element type
    (or converted as HLO convert does with ``cast``) and dimensions."""
    from xlapy.npz import load_npz

    if arrays is None:
        arrays = load_npz(path)
    if prefix:
        arrays = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
    args = []
    counter = [0]

    def take(shape, where):
        if shape.is_tuple():  # leaf by leaf with a stack (build_shaped): no recursion
            from xlapy.shape.tree import build_shaped, path_text

            return build_shaped(shape, lambda s, path: take(s, f"{where}{path_text(path)}"))
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
        return _input_array(arrays[key], shape, f"{path}: {prefix}{key}", where, cast)

    for p in module.entry.parameters:
        args.append(take(p.shape, f"parameter {p.parameter_number} %{p.name}"))
    taken = {f"arg{i}" for i in range(counter[0])}
    extra = sorted({k for k in arrays if k.startswith("arg")} - taken)
    if extra:
        raise CommandError(f"{path}: {', '.join(prefix + e for e in extra)} match no parameter "
                           f"(the module takes {counter[0]} arrays)")
    return args


def _input_array(array, shape, what: str, where: str, cast: bool):
    """``array`` for a parameter leaf of ``shape``: the same dimensions and element type,
    or, with ``cast``, converted as HLO ``convert`` converts (the interpreter's convert)."""
    import numpy as np

    from xlapy.shape import dtypes

    try:
        got_type = dtypes.from_dtype(array.dtype)
    except (XlaError, KeyError, TypeError, ValueError):
        raise CommandError(f"{what} has NumPy dtype {array.dtype}, which is no XLA element "
                           f"type; {where} is {shape}") from None
    got = f"{dtypes.type_name(got_type)}[{','.join(str(d) for d in array.shape)}]"
    from xlapy.interpreter.values import check_dims

    try:
        check_dims(tuple(array.shape), shape, where)
    except XlaError:
        raise CommandError(f"{what} is {got}, but {where} is {shape}: the dimensions differ"
                           ) from None
    want = dtypes.to_dtype(shape.element_type)
    if array.dtype == want:
        return array
    want_name = dtypes.type_name(shape.element_type)
    if not cast:
        raise CommandError(f"{what} is {got}, but {where} is {shape}: the element types "
                           f"differ ({dtypes.type_name(got_type)} vs {want_name}); pass "
                           f"--cast-inputs to convert it as HLO convert does")
    if dtypes.is_complex(got_type) and not dtypes.is_complex(shape.element_type):
        raise CommandError(f"{what} is {got}, but {where} is {shape}: --cast-inputs converts "
                           f"as HLO convert does, and convert does not take complex to real "
                           f"({dtypes.type_name(got_type)} => {want_name})")
    from xlapy.interpreter.kernels.numeric import convert

    return np.asarray(convert(np.asarray(array), want))


def run(args) -> int:
    import sys

    from xlapy.errors import XlaError
    from xlapy.tools.compare import Progress

    paths = expand_module_arguments(args.modules)
    globbed = set(paths) - set(args.modules)  # found by a glob: skipped if not HLO modules
    args.module = paths[0]  # the single-module name the MPI path reads
    _check_options(args, paths)
    if args.distributed == "mpi":  # one device per MPI rank (xlapy/cli/run_mpi.py)
        from xlapy.cli.run_mpi import run_mpi

        return run_mpi(args)
    enabled = {"always": True, "never": False}.get(args.progress)
    per_module = (args.iterations or 1) * (2 if args.reference else 1)
    progress = Progress(len(paths) * per_module, enabled=enabled)
    if len(paths) == 1 and not globbed:
        try:
            return _run_module(args, paths[0], progress)
        finally:
            progress.clear()
    from xlapy.cli.module_files import NotAnHloModuleError

    codes = []
    for path in paths:
        print(f"== {path}")
        try:
            codes.append(_run_module(args, path, progress))
        except NotAnHloModuleError as e:
            if path not in globbed:
                raise
            print(f"skipped {path}: not an HLO module ({str(e).split('(', 1)[-1]}")
        except (XlaError, CommandError) as e:
            if args.debug:
                raise
            progress.clear()
            sys.stdout.flush()
            from xlapy.cli.common import error_text

            print(error_text("xlapy run", f"{path}: {e}"), file=sys.stderr)
            codes.append(2)
        sys.stdout.flush()
    progress.clear()
    if args.reference:
        skipped = len(paths) - len(codes)
        print(f"{len(codes)} modules: {codes.count(0)} match, {codes.count(1)} differ, "
              f"{codes.count(2)} failed" + (f" ({skipped} skipped)" if skipped else ""))
    return 2 if 2 in codes else (1 if 1 in codes else 0)


def expand_module_arguments(patterns: list[str]) -> list[str]:
    """Module arguments with globs the shell did not expand replaced by their matches
    (sorted); an existing file or ``-`` is kept as it is."""
    import glob
    import os

    out = []
    for pattern in patterns:
        if pattern == "-" or os.path.exists(pattern) or not any(c in pattern for c in "*?["):
            out.append(pattern)
            continue
        matches = sorted(glob.glob(pattern, recursive=True))
        if not matches:
            raise CommandError(f"no file matches {pattern}")
        out.extend(matches)
    return out


def _check_options(args, paths: list[str]) -> None:
    from xlapy.backends.base import check_backend

    if args.iterations is not None and args.iterations < 1:
        raise CommandError(f"--iterations must be at least 1, got {args.iterations}")
    for name in ("abs_error", "rel_error"):
        value = getattr(args, name)
        if not value >= 0:
            raise CommandError(f"--{name.replace('_', '-')} must be >= 0, got {value}")
    if args.backend is None:
        args.backend = DEFAULT_BACKEND
    check_backend(args.backend)
    if args.reference is not None:
        check_backend(args.reference)
    _set_numerics(args)
    if args.output:
        check_output_path(args.output, "--output")
    if len(paths) > 1:
        for flag, value in (("--inputs", args.inputs), ("--output", args.output),
                            ("--distributed", args.distributed)):
            if value:
                raise CommandError(f"{flag} takes a single module, got {len(paths)} "
                                   f"({', '.join(paths[:3])}{', ...' if len(paths) > 3 else ''})")
        if "-" in paths:
            raise CommandError("- (stdin) cannot be combined with other modules")
    if args.distributed and (args.reference or args.iterations is not None):
        raise CommandError("--distributed mpi runs the module once; it does not take "
                           "--reference or --iterations")


def _run_module(args, path: str, progress) -> int:
    from xlapy.cli.module_files import read_module
    from xlapy.verifier import verify_module

    loaded = read_module(path)  # HLO text, or a proto (an HloSnapshot brings its arguments)
    module = loaded.module
    args.snapshot_arguments = loaded.arguments
    if not args.no_verify:
        verify_module(module)
    from xlapy.cli import spmd_run

    module, args.spmd_run = spmd_run.partition_for_run(args, module)  # a sharded module
    replicas, partitions = device_counts(module, args)
    if args.reference is not None:
        return compare_module(args, path, module, replicas, partitions, progress)
    simple = args.iterations is None and not args.print_literals
    if replicas * partitions > 1 and simple:
        return run_devices(args, module, replicas, partitions)
    if simple:
        return _run_single(args, module)
    return _run_timed(args, path, module, replicas, partitions, progress)


def _run_single(args, module) -> int:
    """One device, once, on ``--backend``."""
    from xlapy.runtime import Client

    if args.inputs:
        inputs = _arguments_from_npz(module, args.inputs, cast=args.cast_inputs)
    else:
        inputs = _default_arguments(module, args)
    from xlapy.cli.run_progress import RunTicker

    with RunTicker(_what(args, module), args.progress):
        result = Client(backend=args.backend, timeout=args.timeout).compile(
            module, verify=False)(*inputs)
    if not args.quiet:
        print(literal_text(result, module.entry.root.shape, args))
    if args.output:
        _save_results(args.output, [result])
    return 0


#: Array leaves with more elements than this print summarised (NumPy's threshold): the first
#: and last SUMMARY_EDGE entries of each longer dimension; --print-all prints every element.
SUMMARIZE_OVER = 1000
SUMMARY_EDGE = 3


def literal_text(value, shape, args) -> str:
    """``value`` as an XLA literal, large arrays summarised unless ``--print-all``; the first
    summary of a run adds a note on stderr saying how to get every element."""
    import sys

    from xlapy.interpreter.values import value_to_literal

    literal = value_to_literal(value, shape)
    limit = None if getattr(args, "print_all", False) else SUMMARIZE_OVER
    if literal.is_summarized(limit) and not getattr(args, "summary_noted", False):
        args.summary_noted = True
        print(f"note: arrays over {SUMMARIZE_OVER} elements are summarised (first and last "
              f"{SUMMARY_EDGE} of each dimension); --print-all prints every element, "
              f"--output writes them to .npz", file=sys.stderr)
    return literal.to_string(summarize_over=limit, edge_items=SUMMARY_EDGE)


def _what(args, module, devices: int = 1) -> str:
    """What the progress line says runs: ``%name on BACKEND`` (and the device count)."""
    many = f" x {devices} devices" if devices > 1 else ""
    return f"{module.name} on {args.backend}{many}"


def _default_arguments(module, args) -> list:
    """Without --inputs: an HloSnapshot's own arguments, else random ones from --seed."""
    from xlapy.interpreter.fake_args import make_fake_arguments
    from xlapy.interpreter.values import literal_to_value

    snapshot = getattr(args, "snapshot_arguments", None)
    if snapshot is None:
        return make_fake_arguments(module, args.seed)
    params = module.entry.parameters
    if len(snapshot) != len(params):
        raise CommandError(f"the snapshot holds {len(snapshot)} arguments; "
                           f"{module.entry.name} takes {len(params)}")
    return [literal_to_value(a) for a in snapshot]


def _save_results(path: str, results: list) -> None:
    """``out<i>`` for one device, ``r<k>.out<i>`` for several."""
    from xlapy.interpreter.values import TOKEN, flatten
    from xlapy.npz import save_npz

    out = {}
    for k, result in enumerate(results):
        prefix = f"r{k}." if len(results) > 1 else ""
        leaves = [leaf for leaf in flatten(result) if leaf is not TOKEN]
        out.update({f"{prefix}out{i}": leaf for i, leaf in enumerate(leaves)})
    save_npz(path, out)


def _print_inputs(module, inputs: list[list], partitions: int, args) -> None:
    from xlapy.interpreter.values import to_value
    from xlapy.runtime.threaded_collectives import device_label

    for k, device_args in enumerate(inputs):
        if len(inputs) > 1:
            print(f"{device_label((k // partitions, k % partitions), partitions)}:")
        for p, arg in zip(module.entry.parameters, device_args):
            value = to_value(arg, p.shape, f"argument {p.parameter_number}")
            print(f"input {p.parameter_number} %{p.name}: "
                  f"{literal_text(value, p.shape, args)}")


def _print_outputs(module, results: list, partitions: int, title: str, args) -> None:
    from xlapy.runtime.threaded_collectives import device_label

    shape = module.entry.root.shape
    for k, result in enumerate(results):
        label = title
        if len(results) > 1:
            label += " " + device_label((k // partitions, k % partitions), partitions)
        print(f"{label}: {literal_text(result, shape, args)}")


def _execute(args, path, module, backend, inputs, replicas, partitions, progress):
    import os

    from xlapy.tools.compare import run_on_backend

    iterations = args.iterations or 1
    name = os.path.basename(path) if path != "-" else "stdin"

    def step(i: int) -> None:
        progress.step(f"{name}: {backend} run {i + 1}/{iterations}")

    progress.show(f"{name}: compiling for {backend}", force=True)
    return run_on_backend(module, [], backend, replicas=replicas, partitions=partitions,
                          iterations=iterations, timeout=args.timeout, per_device_inputs=inputs,
                          on_iteration=step)


def _run_timed(args, path, module, replicas, partitions, progress) -> int:
    """Another backend, --iterations or --print-literals without a reference."""
    inputs = device_inputs(module, args, replicas * partitions)
    run_result = _execute(args, path, module, args.backend, inputs, replicas, partitions,
                          progress)
    progress.clear()
    if args.print_literals:
        _print_inputs(module, inputs, partitions, args)
    if getattr(args, "spmd_run", None) is not None:  # whole results, printed and written
        report_devices(module, args, run_result.results, partitions)
    else:
        if not args.quiet:
            if replicas * partitions > 1:
                report_devices(module, args, run_result.results, partitions)
            else:
                print(literal_text(run_result.results[0], module.entry.root.shape, args))
        if args.output:
            _save_results(args.output, run_result.results)
    if args.iterations is not None:
        print(f"time {run_result.timing_text()}")
    return 0


def compare_module(args, path, module, replicas: int, partitions: int, progress) -> int:
    """``--reference``: run on both backends, print the comparison; bisect a difference."""
    from xlapy.runtime.threaded_collectives import device_label
    from xlapy.tools.compare import Tolerance, bisect, compare_values

    tol = Tolerance(args.abs_error, args.rel_error)
    count = replicas * partitions
    inputs = device_inputs(module, args, count)
    tested = _execute(args, path, module, args.backend, inputs, replicas, partitions, progress)
    ref = _execute(args, path, module, args.reference, inputs, replicas, partitions, progress)
    progress.clear()
    if args.print_literals:
        _print_inputs(module, inputs, partitions, args)
        _print_outputs(module, tested.results, partitions, f"output ({args.backend})", args)
        _print_outputs(module, ref.results, partitions, f"output ({args.reference}, reference)",
                       args)
    print(f"compare {path}: {args.backend} against reference {args.reference} (abs error "
          f"{args.abs_error:g}, rel error {args.rel_error:g})")
    shape = module.entry.root.shape
    bad = total = 0
    for k in range(count):
        prefix = ""
        if count > 1:
            prefix = device_label((k // partitions, k % partitions), partitions) + " "
        for leaf in compare_values(tested.results[k], ref.results[k], shape, tol):
            total += 1
            bad += not leaf.ok
            print(f"  {prefix}{leaf.text()}")
    if args.iterations is not None:
        print(f"  time {tested.timing_text()}")
        print(f"  time {ref.timing_text()}")
    if args.output:
        _save_results(args.output, tested.results)
    if not bad:
        print(f"OK: {total} output{'s' if total != 1 else ''} within the tolerances")
        return 0
    print(f"MISMATCH: {bad} of {total} output{'s' if total != 1 else ''} differ")
    if args.no_bisect:
        return 1
    if count > 1:
        print("bisection skipped: it runs single-device modules only")
        return 1
    _flush_stdout()

    def step(i: int, n: int) -> None:
        label = f"bisect: instruction {min(i + 1, n)}/{n}"
        if i == 0:
            progress.add_total(n)
            progress.show(label, force=True)
        else:
            progress.step(label)

    found = bisect(module, inputs[0], args.backend, args.reference, tol, on_step=step)
    progress.clear()
    if found is None:
        print("bisection: every instruction matches when it runs alone on the reference "
              "values of its operands (the differences accumulate across instructions)")
    else:
        print(found.report())
    return 1


def _flush_stdout() -> None:
    import sys

    sys.stdout.flush()


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
    from xlapy.npz import load_npz

    run = getattr(args, "spmd_run", None)
    if run is not None:  # a partitioned module: whole arrays sliced per device
        from xlapy.cli import spmd_run

        per_device = spmd_run.device_inputs(run, module, args, count)
        if per_device is not None:
            return per_device
    if not args.inputs:
        shared = _default_arguments(module, args)
        return [list(shared) for _ in range(count)]
    arrays = load_npz(args.inputs)
    per_device = sorted({k.split(".", 1)[0] for k in arrays if k.startswith("r") and "." in k})
    if not per_device:
        shared = _arguments_from_npz(module, args.inputs, arrays, cast=args.cast_inputs)
        return [list(shared) for _ in range(count)]
    shared_keys = sorted(k for k in arrays if k.startswith("arg"))
    if shared_keys:
        raise CommandError(f"{args.inputs}: mixes shared keys ({', '.join(shared_keys)}) with "
                           f"per-device keys ({', '.join(per_device)}.arg...); use one kind")
    unknown = [p for p in per_device if not p[1:].isdigit() or int(p[1:]) >= count]
    if unknown:
        raise CommandError(f"{args.inputs}: keys {', '.join(u + '.*' for u in unknown)} name no "
                           f"device (devices r0..r{count - 1})")
    return [_arguments_from_npz(module, args.inputs, arrays, prefix=f"r{k}.",
                                cast=args.cast_inputs)
            for k in range(count)]


def execute_devices(module, inputs: list[list], replicas: int, partitions: int,
                    timeout: float | None, backend: str = "interpreter") -> list:
    """Run the module on every device (in-process threads); results in device order."""
    from xlapy.runtime import Client

    client = Client(backend=backend, timeout=timeout)
    exe = client.compile(module, replicas=replicas, partitions=partitions, verify=False)
    return exe.execute(inputs)


def report_devices(module, args, results: list, partitions: int) -> None:
    """Print each device's result under its label; write ``r<k>.out<i>``."""
    from xlapy.interpreter.values import TOKEN, flatten
    from xlapy.npz import save_npz
    from xlapy.runtime.threaded_collectives import device_label

    run = getattr(args, "spmd_run", None)
    if run is not None:
        from xlapy.cli import spmd_run

        if spmd_run.report(run, args, results):  # assembled whole results
            return
    shape = module.entry.root.shape
    if not args.quiet:
        for k, result in enumerate(results):
            label = device_label((k // partitions, k % partitions), partitions)
            print(f"{label}:")
            print(literal_text(result, shape, args))
    if args.output:
        out = {}
        for k, result in enumerate(results):
            leaves = [leaf for leaf in flatten(result) if leaf is not TOKEN]
            out.update({f"r{k}.out{i}": leaf for i, leaf in enumerate(leaves)})
        save_npz(args.output, out)


def run_devices(args, module, replicas: int, partitions: int) -> int:
    """The multi-device path of ``xlapy run``: inputs per device, execute, report."""
    from xlapy.cli.run_progress import RunTicker

    inputs = device_inputs(module, args, replicas * partitions)
    with RunTicker(_what(args, module, replicas * partitions), args.progress):
        results = execute_devices(module, inputs, replicas, partitions, args.timeout,
                                  args.backend)
    report_devices(module, args, results, partitions)
    return 0
