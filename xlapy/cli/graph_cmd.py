"""``xlapy graph MODULE.hlo``: draw an HLO module, one computation, or the neighbourhood of
one instruction, as Graphviz DOT text, SVG, PNG or a self-contained HTML page.

Owns: the ``graph`` subcommand (arguments, help, examples, where the output goes). The
drawing is ``xlapy.tools.graph``; SVG, PNG and HTML need Graphviz's ``dot`` program.
"""

from __future__ import annotations

import argparse
import sys

from xlapy.cli.common import CommandError, add_command

_DESCRIPTION = """\
Draw an HLO module (XLA's text, e.g. a jax dump) as a graph: one node per instruction with
its opcode, name, key attributes (dimensions, window, dim_labels, direction, slice,
custom_call_target, index, ...) and result shape; an edge from each operand to its user,
labelled with the operand index when the user has several. Parameters (orange) and
constants (blue) have their own fills, the root is bold; colors follow XLA's
hlo_graph_dumper. By default the entry computation is drawn, with the computations it calls
(while bodies and conditions, called computations, branches) as dashed clusters; trivial
ones (a reduction's add) are named in the caller's label. A fusion is one node showing its
kind and fused op count; --expand-fusions draws the fused computation inside a cluster.

Output: DOT text (the default, on stdout or -o FILE) needs nothing else. svg, png and html
need Graphviz's 'dot' program (apt-get install graphviz, brew install graphviz, conda install
graphviz); html is one self-contained page with the SVG inline (no network, no scripts).
MODULE is a file or - for stdin."""

_EXAMPLES = [
    ("xlapy graph examples/mlp.hlo", "DOT text of the entry computation"),
    ("xlapy graph examples/mlp.hlo --format svg -o mlp.svg", "an SVG picture (needs Graphviz)"),
    ("xlapy graph examples/mlp.hlo --format html -o mlp.html", "one HTML page, SVG inline"),
    ("xlapy graph m.hlo --expand-fusions --format png -o m.png", "fusions drawn inside"),
    ("xlapy graph m.hlo --computation region_0.2", "one computation"),
    ("xlapy graph m.hlo --instruction add.15 --radius 2", "what is near one instruction"),
    ("xlapy graph examples/mlp.hlo | dot -Tpdf > mlp.pdf", "any format Graphviz has"),
    ("cat m.hlo | xlapy graph -", "module text from stdin"),
]

FORMATS = ("dot", "svg", "png", "html")


def register(subparsers) -> None:
    """Add ``xlapy graph`` to the command line."""
    p = add_command(subparsers, "graph", summary="draw an HLO module as a graph (DOT, SVG, "
                    "PNG, HTML)", description=_DESCRIPTION, examples=_EXAMPLES, run=run)
    p.add_argument("module", metavar="MODULE",
                   help="HLO or StableHLO (MLIR) text, or XLA proto (.pb, .pbtxt) file, "
                        "or - for stdin")
    p.add_argument("--format", "-f", choices=FORMATS, default="dot",
                   help="dot (default), or svg/png/html with Graphviz installed")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write here (default: stdout, for dot and svg only)")
    p.add_argument("--computation", "-c", metavar="NAME",
                   help="draw this computation instead of the entry")
    p.add_argument("--instruction", "-i", metavar="NAME",
                   help="draw the neighbourhood of this instruction (operands and users)")
    p.add_argument("--radius", "-r", type=_non_negative, default=2, metavar="N",
                   help="with --instruction: steps from it (default 2)")
    p.add_argument("--expand-fusions", action="store_true",
                   help="draw each fusion's fused computation inside a cluster")
    p.add_argument("--no-calls", action="store_true",
                   help="do not draw called computations as clusters")
    p.add_argument("--shardings", choices=["written", "propagated"], default="written",
                   help="label nodes with the shardings the module carries (written, the "
                   "default) or with every instruction's sharding after the SPMD partitioner's "
                   "Shardy import and sharding propagation (propagated)")


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def run(args) -> int:
    from xlapy.cli.module_files import read_module
    from xlapy.tools import graph

    if args.format in ("png", "html") and not args.output:
        raise CommandError(f"--format {args.format} writes a file: give -o FILE")
    if args.radius != 2 and args.instruction is None:
        raise CommandError("--radius applies to --instruction NAME only")
    if args.format != "dot":
        import shutil

        if shutil.which("dot") is None:  # say so before parsing a large module
            raise CommandError(f"--format {args.format} needs Graphviz's 'dot' program, "
                               f"which is not on PATH: {graph.INSTALL_HINT}")
    module = read_module(args.module).module  # HLO text or an XLA proto
    if args.shardings == "propagated":
        from xlapy.errors import XlaError
        from xlapy.passes.spmd import annotate_shardings

        try:
            annotate_shardings(module)
        except XlaError as e:
            raise CommandError(str(e)) from e
    if args.instruction is not None:
        dot_text = graph.neighborhood_to_dot(module, args.instruction, args.radius,
                                             computation=args.computation,
                                             expand_fusions=args.expand_fusions)
    else:
        dot_text = graph.module_to_dot(module, args.computation,
                                       expand_fusions=args.expand_fusions,
                                       draw_calls=not args.no_calls)
    if args.format == "dot":
        data = dot_text.encode("utf-8")
    elif args.format == "html":
        svg = graph.render(dot_text, "svg").decode("utf-8")
        title = dot_text.split('label="', 1)[1].split('";', 1)[0].replace('\\"', '"')
        data = graph.html_page(svg, title.replace("\\\\", "\\")).encode("utf-8")
    else:
        data = graph.render(dot_text, args.format)
    if args.output and args.output != "-":
        try:
            with open(args.output, "wb") as f:
                f.write(data)
        except OSError as e:
            raise CommandError(f"cannot write {args.output}: {e.strerror}") from None
        print(f"wrote {args.output} ({len(data)} bytes, {args.format})", file=sys.stderr)
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    return 0
