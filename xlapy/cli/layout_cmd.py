"""``xlapy layout SHAPE``: explain a shape's layout to a person.

Owns: the ``layout`` subcommand (its arguments, help and examples) and the plain-text
rendering of the facts from ``layout_facts`` and the pictures from ``layout_grids``.
Output is deterministic; ``--json`` prints the facts without the pictures.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from xlapy.cli.common import CommandError, add_command, read_text_argument

_DESCRIPTION = """\
Explain how an array of the given shape sits in memory under its layout: element type and
bits, element count, physical size (elements the buffer holds, padding included), bytes,
padding overhead, memory space, each tiling level and what it does, tail padding L(n) and
element size E(n). Then two pictures, as in the figures of XLA's Tiled layout page:
  1. the linear offset of every element, laid out by logical row and column (for rank > 2,
     the 2-D slice of the two last dimensions at leading indices 0, or --at);
  2. the memory order: buffer positions 0.. in rows of one tile (or of the minor
     dimension), each cell the logical index stored there, '.' for padding.

Definitions:
  physical size     elements the buffer holds: tile padding of every tiling level
                    included, rounded up to the tail alignment L(n)
  bytes             physical size x bits per element (E(n), else the type's byte width),
                    rounded up to whole bytes
  padding overhead  (physical size - elements) / elements, in percent:
                    F32[3,5] with 2x2 tiles holds 24 positions for 15 elements -> 60.0%

SHAPE is XLA shape text ('-' reads it from stdin); a tuple shape explains each element.
Arrays written without a layout get XLA's default (major-to-minor) layout."""

_EXAMPLES = [
    ('xlapy layout "f32[3,5]{1,0:T(2,2)}"', "figure 1: 2x2 tiles, 60% padding"),
    ('xlapy layout "f32[4,8]{1,0:T(2,4)(2,1)}"', "figure 2: repeated tiling"),
    ('xlapy layout "f32[1,129]{1,0:T(8,128)}"', "8192 bytes for 516 bytes of data"),
    ('xlapy layout "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}"', "TPU bf16 in VMEM"),
    ('xlapy layout --at 3,0 "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}"', "slice [3,0,:,:]"),
    ('xlapy layout "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}"', "'*' combines dimensions"),
    ('xlapy layout "s4[4,6]{1,0:E(4)}"', "sub-byte packing"),
    ('echo "f32[3,5]{0,1}" | xlapy layout -', "shape text from stdin"),
    ('xlapy layout --json "f32[3,5]{1,0:T(2,2)}"', "the facts as JSON"),
    ('xlapy layout --svg fig1.svg "f32[3,5]{1,0:T(2,2)}"', "also draw the memory map as SVG"),
    ('xlapy layout --png fig2.png "f32[4,8]{1,0:T(2,4)(2,1)}"', "... as PNG (pip install 'xlapy[pictures]')"),
]

_LABEL_WIDTH = 17
_TEXT_WIDTH = 100


def register(subparsers) -> None:
    """Add ``xlapy layout`` to the command line."""
    parser = add_command(subparsers, "layout", summary="explain a shape's memory layout",
                         description=_DESCRIPTION, examples=_EXAMPLES, run=run)
    parser.add_argument("shape", metavar="SHAPE",
                        help="shape text, e.g. 'f32[3,5]{1,0:T(2,2)}', or - for stdin")
    parser.add_argument("--json", action="store_true", help="print the facts as JSON (no pictures)")
    parser.add_argument("--at", type=_index_list, metavar="I,J,...",
                        help="leading indices of the 2-D slice pictured for rank > 2 "
                        "(default 0,...)")
    parser.add_argument("--no-grids", action="store_true", help="facts only, no pictures")
    parser.add_argument("--max-rows", type=_positive, default=32, metavar="N",
                        help="rows shown per picture (default 32)")
    parser.add_argument("--max-cols", type=_positive, default=32, metavar="N",
                        help="columns shown per picture (default 32)")
    parser.add_argument("--width", type=_positive, default=120, metavar="N",
                        help="line width the pictures try to fit in (default 120)")
    parser.add_argument("--svg", metavar="FILE",
                        help="also draw the memory map (logical view and memory order, tiles "
                        "coloured, padding hatched) as an SVG file; '-' writes only the SVG "
                        "to stdout")
    parser.add_argument("--png", metavar="FILE",
                        help="the same picture as a PNG file (drawn by the resvg-py wheel: "
                        "pip install 'xlapy[pictures]'; else by rsvg-convert or the cairosvg "
                        "package when one is there)")


def _index_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        message = f"expected comma-separated integers, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"indices must be >= 0, got {text!r}")
    return values


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def run(args) -> int:
    from xlapy.cli.layout_facts import array_facts, to_json_dict
    from xlapy.shape import parse_shape

    text = read_text_argument(args.shape, "shape text")
    shape = parse_shape(text.strip(), fill_missing_layouts=False)
    if not shape.is_array() and not shape.is_tuple():
        raise CommandError(f"{shape} has no layout: only arrays (and tuples of arrays) have one")
    if args.svg or args.png:
        _write_pictures(shape, args)
        if args.svg == "-":
            return 0
    leaves = shape.leaves()
    facts = [(index, array_facts(leaf) if leaf.is_array() else None) for index, leaf in leaves]
    if args.json:
        if shape.is_tuple():
            from xlapy.shape.index import byte_size

            doc = {"shape": str(shape), "tuple": True, "byte_size": byte_size(shape),
                   "leaves": [dict({"index": list(index), "shape": str(leaf)},
                                   **(to_json_dict(f) if f else {}))
                              for (index, f), (_, leaf) in zip(facts, leaves, strict=True)]}
        else:
            doc = to_json_dict(facts[0][1])
        sys.stdout.write(_json_text(doc) + "\n")
        return 0
    out: list[str] = []
    if shape.is_tuple():
        out += _tuple_header(shape)
    for (index, f), (_, leaf) in zip(facts, leaves, strict=True):
        if shape.is_tuple():
            out += ["", f"== element {{{','.join(map(str, index))}}}: {leaf} =="]
        if f is None:
            out += ["", f"{leaf}: holds no data (0 bytes)"]
            continue
        out += explain(f)
        if not args.no_grids:
            out += _pictures(f.shape, args)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _tuple_header(shape) -> list[str]:
    from xlapy.shape.index import byte_size

    n = len(shape.tuple_shapes)
    return [str(shape),
            (f"a tuple of {n} element{'s' if n != 1 else ''}: its own buffer is a table of "
             f"{n} pointers,"),
            (f"{byte_size(shape)} bytes with 8-byte pointers; each array element has its own "
             "buffer, explained below.")]


def _write_pictures(shape, args) -> None:
    """--svg / --png: draw the memory map of an array shape (xlapy.cli.layout_svg)."""
    from xlapy.cli.layout_svg import PngConverterMissing, layout_svg, svg_to_png

    if not shape.is_array():
        raise CommandError(f"--svg/--png draw one array shape, got {shape}")
    _check_at(shape, args.at)
    svg = layout_svg(shape, args.at)
    if args.svg == "-":
        sys.stdout.write(svg)
    elif args.svg:
        _write_file(args.svg, svg.encode())
    if args.png:
        try:
            svg_to_png(svg, args.png)
        except PngConverterMissing as e:
            raise CommandError(str(e)) from None
        except OSError as e:
            raise CommandError(f"cannot write {args.png}: {e.strerror or e}") from None


def _write_file(path: str, data: bytes) -> None:
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise CommandError(f"cannot write {path}: {e.strerror or e}") from None


def _pictures(shape, args) -> list[str]:
    from xlapy.cli.layout_grids import memory_grid, offset_grid

    _check_at(shape, args.at)
    return ([""] + offset_grid(shape, args.at, args.max_rows, args.max_cols, args.width)
            + [""] + memory_grid(shape, args.max_rows, args.max_cols, args.width))


def _check_at(shape, at) -> None:
    """--at must give one in-range index per dimension before the last two (rank > 2)."""
    rank = len(shape.dimensions)
    if at is not None:
        if rank <= 2:
            raise CommandError(f"--at gives leading indices for rank > 2, but {shape} has "
                               f"rank {rank}")
        if len(at) != rank - 2:
            raise CommandError(f"--at needs {rank - 2} indices (the dimensions before the "
                               "last two) "
                               f"for {shape}, got {len(at)}")
        for d, (i, size) in enumerate(zip(at, shape.dimensions[:-2], strict=True)):
            if i >= size:
                raise CommandError(f"--at index {i} is out of range for dimension {d} "
                                   f"of size {size}")


def _json_text(value, indent: int = 0) -> str:
    """JSON with one key per line and lists of plain values on one line."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {_json_text(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [inner + _json_text(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value)


# -- the explanation ------------------------------------------------------------------------


def _wrap(lines, indent: int) -> list[str]:
    """Lines wrapped to _TEXT_WIDTH, continuation lines indented two more spaces."""
    out = []
    for line in lines:
        out += textwrap.wrap(line, _TEXT_WIDTH - indent, subsequent_indent="  ",
                             break_long_words=False, break_on_hyphens=False) or [""]
    return out


def _row(label: str, *lines: str) -> list[str]:
    pad = " " * (_LABEL_WIDTH + 2)
    body = _wrap(lines, _LABEL_WIDTH + 2)
    return [f"  {label.ljust(_LABEL_WIDTH)}{body[0]}"] + [pad + line for line in body[1:]]


def _dims(sizes) -> str:
    return "[" + ",".join(str(s) for s in sizes) + "]"


def _human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f" ({n / size:.1f} {unit})"
    return ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def explain(f) -> list[str]:
    """The facts of one array as text lines (no pictures)."""
    shape = f.shape
    rank = len(f.dimensions)
    note = "" if f.layout_written else "   (no layout written: XLA's default)"
    out = ["", str(shape) + note, ""]
    out += _row("element type", f"{f.type_name}: {f.type_description}, "
                f"{f.storage_bits} bits per element in the buffer")
    out += _row("dimensions", f"{_dims(f.dimensions)}: {_plural(f.elements, 'element')}",
                *f.dynamic)
    out += _order_rows(f, rank)
    space = f"S({f.memory_space}): {f.memory_space_meaning}"
    if f.memory_space == 0:
        space += " (the default; not printed)"
    out += _row("memory space", space)
    tiles = "".join(t.text for t in f.tiles)
    out += _row("tiles", f"T{tiles}: {_plural(len(f.tiles), 'level')}, see Tiling below"
                if f.tiles else "none (no T(...))")
    out += _tail_rows(f)
    out += _element_size_rows(f)
    out += _row("physical size", f"{_plural(f.physical_elements, 'element')} in the buffer "
                f"({f.elements} data + {f.padding_elements} padding)")
    bytes_lines = [(f"{f.byte_size}{_human_bytes(f.byte_size)} = {f.physical_elements} x "
                    f"{f.storage_bits} bits, rounded up to whole bytes")]
    if f.data_bytes and f.byte_size != f.data_bytes:
        bytes_lines.append(f"the {_plural(f.elements, 'element')} alone take {f.data_bytes} bytes: "
                           f"the buffer is {f.byte_size / f.data_bytes:.1f}x its data")
    out += _row("bytes", *bytes_lines)
    out += _padding_rows(f)
    for config in f.split_configs:
        dim, _, rest = config.strip("()").partition(":")
        out += _row("split config", f"SC{config}: physical dimension {dim} is split at index "
                    f"{rest} "
                    "(recorded; the offsets below ignore it)")
    if f.metadata_prefix_bytes:
        n = f.metadata_prefix_bytes
        out += _row("metadata prefix", f"M({n}): {n} bytes "
                    "of dynamic-shape metadata before the data (not counted in bytes above)")
    out += [""] + _tiling_section(f)
    return out


def _order_rows(f, rank: int) -> list[str]:
    m2m = "{" + ",".join(str(d) for d in f.shape.layout.minor_to_major) + "}"
    if rank == 0:
        return _row("dimension order", f"{m2m}: a scalar has no dimensions to order")
    order = ", ".join(f"d{d}" for d in f.major_to_minor)
    note = ""
    if f.major_to_minor == tuple(range(rank)):
        note = " (row-major, the default)" if rank > 1 else ""
    elif rank == 2:
        note = " (column-major)"
    return _row("dimension order",
                f"minor_to_major {m2m}: in memory, major to minor: {order}{note}",
                f"physical shape (logical sizes, major to minor): {_dims(f.physical_dims)}")


def _tail_rows(f) -> list[str]:
    a = f.tail_alignment
    if a == 1:
        return _row("tail padding", "none (no L(n))")
    if f.physical_elements == f.tiled_elements:
        return _row("tail padding", f"L({a}): {f.tiled_elements} is already a multiple of {a}; "
                    "nothing added")
    extra = f.physical_elements - f.tiled_elements
    return _row("tail padding", f"L({a}): {f.tiled_elements} elements rounded up to a multiple of "
                f"{a} -> {f.physical_elements} (+{extra} padding at the end)")


def _element_size_rows(f) -> list[str]:
    n = f.element_size_in_bits
    if not n:
        extra = ""
        if f.type_bits < f.storage_bits:
            extra = f" (its {f.type_bits}-bit values unpacked; E({f.type_bits}) would pack them)"
        return _row("element size", f"no E(n): each element takes {f.storage_bits} bits, "
                    f"the byte width of {f.type_name}{extra}")
    if n % 8 == 0:
        return _row("element size", f"E({n}): each element takes {n} bits ({n // 8} bytes)")
    lines = [f"E({n}): each element takes {n} bits, packed back to back, low bits first:",
             f"element k occupies bits [{n}k, {n}k+{n}) of the buffer"]
    if 8 % n == 0:
        lines[1] += f" ({8 // n} elements per byte)"
    return _row("element size", *lines)


def _padding_rows(f) -> list[str]:
    pct = f.padding_overhead_percent
    if f.padding_elements == 0:
        return _row("padding", "none: the buffer holds exactly the elements")
    if pct is None:
        return _row("padding", f"{f.padding_elements} positions, all padding (no elements)")
    share = 100.0 * f.padding_elements / f.physical_elements
    return _row("padding", f"{_plural(f.padding_elements, 'element')}: overhead {pct:.1f}% of the "
                f"{f.elements} logical elements;", f"{share:.1f}% of the buffer is padding")


def _tiling_section(f) -> list[str]:
    if not f.tiles:
        shape = _dims(f.physical_dims)
        return [f"Tiling: none; the buffer is the physical shape {shape} in row-major order."]
    out = ["Tiling: each tile splits the most minor dimensions of the current shape; the buffer",
           "is the final tiled shape in row-major order, so each tile's elements are contiguous.",
           "Names: dK = logical dimension K, dK/t = index of the tile, dK%t = index inside it."]
    for lvl in f.tiles:
        padded = (1,) * lvl.leading_ones + lvl.before
        head = f"covers {', '.join(s.dim for s in lvl.splits)} of {_dims(padded)}"
        lines = [head]
        if lvl.inside_previous:
            lines.append(f"(inside each T{f.tiles[lvl.level - 2].text} tile: it only reorders that "
                         "tile's elements)")
        elif lvl.level > 1:
            lines.append("(it also spans tile indices of earlier levels)")
        if lvl.leading_ones:
            added = ", ".join(lvl.added)
            lines.append(f"the tile has more dimensions than the shape {_dims(lvl.before)}: "
                         f"size-1 dimension(s) {added} put in front first")
        for c in lvl.combines:
            lines.append(f"'*' merges {c.major} ({c.major_size}) into {c.minor} ({c.minor_size}) "
                         f"-> {c.merged} of size {c.size}")
        for s in lvl.splits:
            pad = f" (+{s.padding} padding)" if s.padding else ""
            lines.append(f"{s.dim}: {s.size} -> {_plural(s.count, 'tile')} of {s.tile}{pad}")
        k = len(lvl.splits)
        count = 1
        for d in lvl.after[:-k]:
            count *= d
        tile_name = "x".join(str(s.tile) for s in lvl.splits)
        lines.append(f"-> {_dims(lvl.after)} = [{', '.join(lvl.after_labels)}]")
        lines.append(f"   {_plural(count, 'tile')} of {tile_name}")
        body = _wrap(lines, _LABEL_WIDTH + 2)
        out.append(f"  T{lvl.text}".ljust(_LABEL_WIDTH + 2) + body[0])
        out += [" " * (_LABEL_WIDTH + 2) + line for line in body[1:]]
    return out
