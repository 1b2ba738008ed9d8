"""``xlapy run MODULE.hlo``: parse, verify and run a module on the reference interpreter;
print the results as XLA literals, optionally read inputs from and write outputs to .npz.

npz keys: ``arg0, arg1, ...`` in parameter order (a tuple-shaped parameter takes its leaves as
consecutive keys, depth first); results ``out0, out1, ...`` (a tuple result flattened depth
first). bf16/f8/int4... are stored as raw bits with ``__dtype__<key>`` (see xlapy.npz)."""

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
        ],
        run=run,
    )
    p.add_argument("module", help="HLO text file, or - for stdin")
    p.add_argument("--inputs", metavar="NPZ", help="arguments: keys arg0, arg1, ...")
    p.add_argument("--output", metavar="NPZ", help="write the results: keys out0, out1, ...")
    p.add_argument("--seed", type=int, default=0, help="seed of the random arguments (default 0)")
    p.add_argument("--no-verify", action="store_true", help="skip the HLO verifier")
    p.add_argument("--quiet", action="store_true", help="do not print the results")


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


def _arguments_from_npz(module, path: str) -> list:
    from xlapy.npz import load_npz

    arrays = load_npz(path)
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
            raise CommandError(f"{path}: missing {key} for {where} ({shape}); the file has "
                               f"{', '.join(sorted(arrays)) or 'no arrays'}")
        return arrays[key]

    for p in module.entry.parameters:
        args.append(take(p.shape, f"parameter {p.parameter_number} %{p.name}"))
    extra = sorted(set(k for k in arrays if k.startswith("arg")) - {f"arg{i}" for i in range(counter[0])})
    if extra:
        raise CommandError(f"{path}: {', '.join(extra)} match no parameter (the module takes "
                           f"{counter[0]} arrays)")
    return args


def run(args) -> int:
    from xlapy.hlo.parser import parse_hlo_module
    from xlapy.hlo.verifier import verify_module
    from xlapy.interpreter import evaluate
    from xlapy.interpreter.fake_args import make_fake_arguments
    from xlapy.interpreter.values import flatten, value_to_literal
    from xlapy.npz import save_npz

    module = parse_hlo_module(_read_module_text(args.module))
    if not args.no_verify:
        verify_module(module)
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
