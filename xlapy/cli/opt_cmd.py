"""``xlapy opt MODULE.hlo``: run compiler passes (xlapy.passes) over an HLO module and print
the optimised module in XLA's text.

Owns: the ``opt`` subcommand (arguments, help, examples). The passes are xlapy.passes.
"""

from __future__ import annotations

import sys

from xlapy.cli.common import CommandError, add_command

#: Every pass of xlapy.passes.PASSES, in its order, with what it does: the one list both
#: ``--help`` and ``--list`` print (a test checks that it names every registered pass).
_SUMMARIES = {
    "inline": "inline every call instruction (not composites)",
    "simplify": "algebraic simplification (x*1 -> x, -(-x) -> x, copy(x) -> x, ...) by a "
                "table of exact rewrites",
    "constant-folding": "evaluate instructions whose operands are all constants",
    "cse": "merge identical instructions",
    "dce": "remove dead instructions and unreachable computations",
    "fusion": "loop and input fusion: elementwise and data-movement producers join their "
              "consumer (or a reduce) in a fusion instruction, as XLA's InstructionFusion",
    "layout-assignment": "give every array shape a layout (XLA's default where none); entry "
                         "parameters and result take entry_computation_layout, with copies",
    "spmd-partition": "the SPMD partitioner: a sharded module (GSPMD or Shardy, e.g. a jax "
                      "dump) becomes the program of one partition (partitions: the module's "
                      "num_partitions, else the devices its shardings name)",
    "excess-precision": "XLA:CPU's default bf16 excess precision: f32 convert(bf16 op) -> the "
                        "op in f32 (changes results, as XLA:CPU does)",
    "map-inline": "a map whose computation is elementwise becomes that computation on whole "
                  "arrays (XLA's MapInliner)",
    "batch-norm-expander": "batch-norm-inference/-training/-grad become elementwise ops, "
                           "broadcasts and sums (XLA's BatchNormExpander)",
    "dot-upcast": "dots of bf16/f16/f8 become f32 dots between converts (XLA:CPU's "
                  "FloatNormalization / ChangeOpDataType for dots); integer dots whose sums "
                  "f32 or f64 hold exactly become such float dots (exact)",
    "reduce-window-rewriter": "cumulative reduce-windows (jnp.cumsum/cumprod/cummax) longer "
                              "than 16 become XLA:CPU's blocked tree of scans (XLA's "
                              "ReduceWindowRewriter; the interpreter evaluates them as that "
                              "tree too)",
}

#: The passes whose module does not compute the same bits as their input: what each gives.
_NOT_EXACT = {
    "spmd-partition": "the program of one partition",
    "excess-precision": "XLA:CPU's answers, not the HLO's exact roundings",
    "batch-norm-expander": "batch norms in the operand's precision, not in f64",
    "dot-upcast": "narrow-float dots summed in f32 and rounded once, not in f64",
}

#: What runs without --passes (xlapy.passes.DEFAULT_PASSES; a test checks they agree).
_DEFAULT = ("inline", "simplify", "constant-folding", "cse", "dce")


def _pass_table() -> str:
    """``name  what it does`` lines, wrapped under the description column."""
    import textwrap

    width = max(len(n) for n in _SUMMARIES) + 2
    lines = []
    for name, what in _SUMMARIES.items():
        wrapped = textwrap.wrap(what, 92 - width)
        lines.append(f"  {name.ljust(width)}{wrapped[0]}")
        lines.extend(" " * (width + 2) + more for more in wrapped[1:])
    return "\n".join(lines)


def _exactness() -> str:
    import textwrap

    names = list(_NOT_EXACT)
    inexact = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    return textwrap.fill(
        "Optimise an HLO module with xlapy's passes and print the result as HLO text. Every "
        f"pass but {inexact} is exact: the printed module computes the same "
        "bits as the input (NaN, inf and -0 included); "
        + "; ".join(f"{k} gives {v}" for k, v in _NOT_EXACT.items()) + ".", 92)


_DESCRIPTION = f"""\
{_exactness()}

passes (run in the order given; default: {','.join(_DEFAULT)}):
{_pass_table()}

The module is verified after every pass that changed it; an error names the pass.
MODULE is a file or - for stdin."""

_EXAMPLES = [
    ("xlapy opt m.hlo", "the default pipeline, once"),
    ("xlapy opt m.hlo --fixed-point", "repeat the pipeline until nothing changes"),
    ("xlapy opt m.hlo --passes=cse,dce", "only these passes, in this order"),
    ("xlapy opt m.hlo --passes=inline,simplify,fusion", "fuse as the CPU backend does"),
    ("xlapy opt --list", "the passes and what they do"),
    ("xlapy opt jax_dump.hlo --passes=spmd-partition",
     "the per-device program of a sharded module"),
    ("xlapy opt m.hlo --stats", "instruction counts before/after on stderr"),
    ("cat m.hlo | xlapy opt - -o out.hlo", "module from stdin, result to a file"),
]


def register(subparsers) -> None:
    """Add ``xlapy opt`` to the command line."""
    p = add_command(subparsers, "opt", summary="optimise an HLO module with xlapy's passes",
                    description=_DESCRIPTION, examples=_EXAMPLES, run=run)
    p.add_argument("module", metavar="MODULE", nargs="?",
                   help="HLO or StableHLO (MLIR) text, or XLA proto (.pb, .pbtxt) file, "
                        "or - for stdin")
    p.add_argument("--passes", metavar="P1,P2,...",
                   help=f"comma-separated pass names (default: {','.join(_DEFAULT)})")
    p.add_argument("--fixed-point", action="store_true",
                   help="repeat the passes until none changes the module")
    p.add_argument("--list", action="store_true", help="list the passes and exit")
    p.add_argument("--stats", action="store_true",
                   help="print instruction counts before and after, and the passes run, on stderr")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")


def _pass_names(text: str | None) -> list[str]:
    from xlapy.passes import DEFAULT_PASSES, PASSES

    if text is None:
        return list(DEFAULT_PASSES)
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise CommandError("--passes: expected pass names, e.g. --passes=cse,dce")
    for n in names:
        if n not in PASSES:
            raise CommandError(f"--passes: unknown pass '{n}' (known: {', '.join(PASSES)})")
    return names


def _count(module) -> int:
    return sum(len(c.instructions) for c in module.computations)


def run(args) -> int:
    from xlapy.cli.module_files import read_module
    from xlapy.passes import PASSES, PassError, make_pipeline

    if args.list:
        print(_pass_table())
        missing = [n for n in PASSES if n not in _SUMMARIES]
        for name in missing:  # registered since this list was written: say so, not blank
            print(f"  {name}  (no description in xlapy/cli/opt_cmd.py)")
        return 0
    if args.module is None:
        raise CommandError("expected MODULE (a file, or - for stdin), or --list")
    names = _pass_names(args.passes)
    module = read_module(args.module).module  # HLO text or an XLA proto
    before = _count(module)
    pipeline = make_pipeline(names, fixed_point=args.fixed_point)
    try:
        pipeline.run(module)
    except PassError as e:
        raise CommandError(str(e)) from e
    text = module.to_string()
    if not text.endswith("\n"):
        text += "\n"
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise CommandError(f"cannot write {args.output}: {e.strerror}") from None
    else:
        sys.stdout.write(text)
    if args.stats:
        changed = sorted({n for n, c in pipeline.log if c})
        print(f"instructions: {before} -> {_count(module)}; passes run: {len(pipeline.log)}; "
              f"changed by: {', '.join(changed) or 'none'}", file=sys.stderr)
    return 0
