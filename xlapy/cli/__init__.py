"""The ``xlapy`` console command: ``main(argv=None)``, the list of subcommands, and the one
place where an exception becomes an error message and an exit code.

A subcommand is a module of this package with ``register(subparsers)`` (use
``common.add_command``); adding one is a new module plus one line in ``COMMAND_MODULES``.
Command modules must be cheap to import: heavy imports belong inside their run function.

Exit codes: 0 success, 2 bad input (argparse errors, ParseError, InvalidArgumentError,
CommandError), 1 an unexpected exception (a bug; ``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from xlapy.cli.common import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK, CommandError, error_text
from xlapy.errors import XlaError

#: Subcommand modules, in the order ``xlapy --help`` lists them.
COMMAND_MODULES = (
    "xlapy.cli.run_cmd",
    "xlapy.cli.layout_cmd",
    "xlapy.cli.graph_cmd",
    "xlapy.cli.opt_cmd",
    "xlapy.cli.bench_cmd",
)

_EPILOG = """\
examples:
  xlapy run examples/mlp.hlo                  # run an HLO module on the CPU backend
  xlapy run m.hlo --backend B --reference interpreter   # compare backends, bisect
  xlapy graph examples/mlp.hlo --format svg -o mlp.svg  # draw a module
  xlapy layout "f32[3,5]{1,0:T(2,2)}"        # explain a tiled layout
  echo "bf16[8,128]{1,0:T(8,128)(2,1)}" | xlapy layout -
  xlapy layout --help                         # options and examples of one command

exit codes: 0 ok, 2 bad input, 1 internal error (rerun with --debug for a traceback)"""


class _VersionAction(argparse.Action):
    """``--version``: xlapy/cli/version_info.py finds the facts only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from xlapy.cli.version_info import version_text

        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered subcommand."""
    from xlapy import __version__

    parser = argparse.ArgumentParser(
        prog="xlapy",
        description="xlapy: XLA in Python. Run HLO modules (on the compiled CPU backend or the "
        "reference interpreter, across replicas, over MPI), compare backends, optimise and "
        "draw modules, time the benchmark suite, and explain shapes and layouts.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error")
    parser.add_argument("--version", action=_VersionAction,
                        help=f"print xlapy's version ({__version__}), the versions of Python, "
                        "numpy, ml_dtypes, scipy, llvmlite/LLVM, the BLAS in use and the host "
                        "CPU's vector features, and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``xlapy`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    >>> main(["layout", "f32[3,5]{1,0:T(2,2)}"])   # prints the explanation, returns 0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error argparse has printed
        if isinstance(e.code, int):
            return e.code
        return EXIT_OK if e.code is None else EXIT_BAD_INPUT
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    prog = f"xlapy {args.command}"
    try:
        return args.run(args) or EXIT_OK
    except (XlaError, CommandError) as e:
        if args.debug:
            traceback.print_exc()
        print(error_text(prog, str(e)), file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader went away (`xlapy layout ... | head`): not an error. Point stdout at
        # devnull so the interpreter's final flush does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - a bug: one line unless asked for the traceback
        if args.debug:
            traceback.print_exc()
        hint = "" if args.debug else " (rerun with --debug for a traceback)"
        print(error_text(prog, f"internal error: {type(e).__name__}: {e}{hint}"), file=sys.stderr)
        return EXIT_INTERNAL
