"""``xlapy opt MODULE.hlo``: run compiler passes (xlapy.passes) over an HLO module and print
the optimised module in XLA's text.

Owns: the ``opt`` subcommand (arguments, help, examples). The passes are xlapy.passes.
"""

from __future__ import annotations

import sys

from xlapy.cli.common import CommandError, add_command

_DESCRIPTION = """\
Optimise an HLO module with xlapy's passes and print the result as HLO text. Every pass is
exact: the printed module computes the same bits as the input (NaN, inf and -0 included).

passes (run in the order given; default: inline,simplify,constant-folding,cse,dce):
  inline            inline every call instruction (not composites)
  simplify          algebraic simplification (x*1 -> x, -(-x) -> x, copy(x) -> x, ...)
  constant-folding  evaluate instructions whose operands are all constants
  cse               merge identical instructions
  dce               remove dead instructions and unreachable computations

The module is verified after every pass that changed it; an error names the pass.
MODULE is a file or - for stdin."""

_EXAMPLES = [
    ("xlapy opt m.hlo", "the default pipeline, once"),
    ("xlapy opt m.hlo --fixed-point", "repeat the pipeline until nothing changes"),
    ("xlapy opt m.hlo --passes=cse,dce", "only these passes, in this order"),
    ("xlapy opt --list", "the passes and what they do"),
    ("xlapy opt m.hlo --stats", "instruction counts before/after on stderr"),
    ("cat m.hlo | xlapy opt - -o out.hlo", "module from stdin, result to a file"),
]

_SUMMARIES = {
    "inline": "inline every call instruction (not composites)",
    "simplify": "algebraic simplification by a table of exact rewrites",
    "constant-folding": "evaluate instructions whose operands are all constants",
    "cse": "merge identical instructions",
    "dce": "remove dead instructions and unreachable computations",
    "excess-precision": "XLA:CPU's default bf16 excess precision: f32 convert(bf16 op) "
                        "-> the op in f32 (changes results, as XLA:CPU does)",
}


def register(subparsers) -> None:
    """Add ``xlapy opt`` to the command line."""
    p = add_command(subparsers, "opt", summary="optimise an HLO module with xlapy's passes",
                    description=_DESCRIPTION, examples=_EXAMPLES, run=run)
    p.add_argument("module", metavar="MODULE", nargs="?",
                   help="HLO or StableHLO (MLIR) text, or XLA proto (.pb, .pbtxt) file, "
                        "or - for stdin")
    p.add_argument("--passes", metavar="P1,P2,...",
                   help="comma-separated pass names (default: inline,simplify,constant-folding,"
                   "cse,dce)")
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
        for name in PASSES:
            print(f"{name:<17} {_SUMMARIES.get(name, '')}")
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
