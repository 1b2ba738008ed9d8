"""The memory map of a layout as an SVG picture, as the figures of XLA's Tiled layout page
draw it (``xlapy layout --svg`` / ``--png``):

* left, the logical view: a 2-D slice (rows: dimension rank-2, columns: dimension rank-1,
  leading indices ``at``) with each element's linear index written in, plus the padding
  cells that complete the tiles, hatched;
* right, the memory view: buffer positions 0.. in order, in rows of whole tiles, each
  element cell showing its linear index (its position), padding cells hatched;
* in both, every first-level tile is one colour with a dark boundary, and every
  second-level tile (``(2,1)`` in ``T(2,4)(2,1)``) is outlined in red.

Owns: ``layout_svg(shape, at=None)`` -> SVG text, ``svg_to_png`` (through the resvg-py wheel
of the ``pictures`` extra, else ``rsvg-convert`` or ``cairosvg``) and ``find_png_converter``. Everything drawn is computed from the shape
layer (``physical_plan``: ``linear`` and ``unravel``); padding cells of the logical view
are the out-of-range indices whose buffer position maps back to them. Only the first
``max_rows`` x ``max_cols`` cells of each view are drawn; the caption says what is shown.
No dependency beyond NumPy; SVG is built as plain strings.
"""

from __future__ import annotations

import colorsys
import shutil
import subprocess
from dataclasses import dataclass
from html import escape
from math import prod

import numpy as np

from xlapy.shape.index import physical_plan
from xlapy.shape.layout import COMBINE_DIMENSION
from xlapy.shape.shape import Shape

#: Cells drawn at most per view: rows x columns (logical view) and the memory view's rows;
#: the memory view puts at most MEMORY_COLS positions in a row.
MAX_ROWS = 64
MAX_COLS = 64
MEMORY_COLS = 32

_PAD_FILL = "#d9d9d9"
_TAIL_FILL = "#bdbdbd"
_TILE_STROKE = "#222222"
_SUBTILE_STROKE = "#d62728"
_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
_HATCH_DEFS = ('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
               'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff" '
               'fill-opacity="0.45"/><line x1="0" y1="0" x2="0" y2="6" stroke="#555555" '
               'stroke-width="1.5"/></pattern></defs>')


class PngConverterMissing(Exception):
    """No SVG-to-PNG converter is available (message says what to install)."""


@dataclass(frozen=True)
class _Cell:
    row: int
    col: int
    pos: int  # buffer position (linear index)
    element: bool  # False: padding
    index: tuple[int, ...] | None  # logical index of an element
    tail: bool = False  # tail padding L(n): past every tile


def tile_block_sizes(shape: Shape) -> tuple[int, int]:
    """Consecutive buffer positions of one first-level tile and of one second-level tile
    (0 when there is no such level)."""
    tiles = shape.layout.tiles if shape.layout is not None else ()
    sizes = [prod(d for d in t.dimensions if d != COMBINE_DIMENSION) for t in tiles[:2]]
    sizes += [0] * (2 - len(sizes))
    return sizes[0], sizes[1]


def tile_colour(block: int) -> str:
    """A light colour for tile number ``block``; neighbouring numbers get far-apart hues
    (golden-ratio steps), so every tile drawn has its own colour."""
    hue = (block * 0.6180339887498949) % 1.0
    light = 0.80 if block % 2 == 0 else 0.70
    r, g, b = colorsys.hls_to_rgb(hue, light, 0.65)
    return "#" + "".join(f"{round(v * 255):02x}" for v in (r, g, b))


# -- the cells of each view --------------------------------------------------------------


def _logical_cells(shape: Shape, at, max_rows: int, max_cols: int):
    """Cells of the logical view, (rows, cols) of the logical slice, and the drawn extent."""
    plan = physical_plan(shape)
    dims = shape.dimensions
    rank = len(dims)
    if rank == 0:
        pos = int(plan.linear([]))
        return [_Cell(0, 0, pos, True, ())], (1, 1), (1, 1)
    lead = list(at) if at is not None else [0] * max(0, rank - 2)
    nr, nc = (1, dims[0]) if rank == 1 else (dims[-2], dims[-1])
    # Candidate window: the slice plus room for tile padding, capped.
    cr = min(max_rows, nr + max_rows) if rank > 1 else 1
    cc = min(max_cols, nc + max_cols)
    rr, cc_ = np.meshgrid(np.arange(cr, dtype=np.int64), np.arange(cc, dtype=np.int64),
                          indexing="ij")
    index = ([cc_] if rank == 1 else
             [np.full_like(rr, i) for i in lead] + [rr, cc_])
    pos = np.asarray(plan.linear(index), dtype=np.int64)
    pos = np.broadcast_to(pos, rr.shape)
    inside = (rr < nr) & (cc_ < nc)
    in_buffer = (pos >= 0) & (pos < plan.elements)
    back, valid = plan.unravel(np.where(in_buffer, pos, 0))
    back = [np.broadcast_to(np.asarray(b), rr.shape) for b in back]
    valid = np.broadcast_to(np.asarray(valid), rr.shape)
    same = in_buffer.copy()
    for b, want in zip(back, index, strict=True):
        same &= b == want
    padding = ~inside & same & ~valid  # an index past the array that the tiling pads for
    cells = []
    for r, c in zip(*np.nonzero(inside | padding), strict=True):
        r, c = int(r), int(c)
        element = bool(inside[r, c])
        logical = tuple(int(i) for i in (lead + ([r, c] if rank > 1 else [c]))) if element else None
        cells.append(_Cell(r, c, int(pos[r, c]), element, logical))
    drawn_r = max(c.row for c in cells) + 1 if cells else 0
    drawn_c = max(c.col for c in cells) + 1 if cells else 0
    return cells, (nr, nc), (drawn_r, drawn_c)


def memory_row_width(shape: Shape, memory_cols: int = MEMORY_COLS) -> tuple[int, str]:
    """Positions per row of the memory view, and why: as many whole tiles as fit in
    ``memory_cols``, else the largest halving of the tile's (or array's) minor dimension."""
    plan = physical_plan(shape)
    total = plan.elements
    block, _ = tile_block_sizes(shape)
    tiles = shape.layout.tiles if shape.layout is not None else ()
    if block and block <= memory_cols:
        width = block * (memory_cols // block)
        if total <= width:
            return max(total, 1), "the whole buffer in one row"
        n = width // block
        return width, f"{n} tile{'s' if n > 1 else ''} per row"
    if tiles:
        minor = [d for d in tiles[0].dimensions if d != COMBINE_DIMENSION][-1]
        what = "a tile row"
    else:
        minor = plan.final[-1] if plan.final else 1
        what = "the most minor dimension"
    if 0 < minor <= memory_cols:
        width = minor * (memory_cols // minor)
        if total <= width:
            return max(total, 1), "the whole buffer in one row"
        return width, f"{width // minor} run{'s' if width // minor > 1 else ''} of {what} per row"
    m = minor
    while m > memory_cols and m % 2 == 0:
        m //= 2
    m = min(m, memory_cols)
    return max(m, 1), f"{what} is {minor} positions, split over rows of {m}"


def _memory_cells(shape: Shape, max_rows: int, memory_cols: int):
    plan = physical_plan(shape)
    total = plan.elements
    width, why = memory_row_width(shape, memory_cols)
    nrows = -(-total // width) if total else 0
    shown = min(total, min(nrows, max_rows) * width)
    positions = np.arange(shown, dtype=np.int64)
    index, valid = plan.unravel(positions)
    index = [np.broadcast_to(np.asarray(i), positions.shape) for i in index]
    valid = np.broadcast_to(np.asarray(valid), positions.shape)
    tiled = prod(plan.final)
    cells = []
    for p in range(shown):
        element = bool(valid[p])
        logical = tuple(int(i[p]) for i in index) if element else None
        cells.append(_Cell(p // width, p % width, p, element, logical, tail=p >= tiled))
    return cells, width, why, nrows, shown


# -- drawing -------------------------------------------------------------------------------


def _font_size(cell: float, label: str) -> float:
    return round(min(cell * 0.45, cell * 1.5 / max(len(label), 1)), 1)


def _draw_cells(out: list[str], cells, x0: float, y0: float, cell: float, block: int,
                sub: int, view: str) -> None:
    """Rects, labels, tile boundaries and sub-tile outlines of one view."""
    def tile_of(c: _Cell) -> int:
        return -1 if c.tail else (c.pos // block if block else 0)

    for c in cells:
        x, y = x0 + c.col * cell, y0 + c.row * cell
        fill = _TAIL_FILL if c.tail else tile_colour(tile_of(c))
        if not c.element and not block:
            fill = _PAD_FILL
        kind = "elem" if c.element else "pad"
        what = (f"element ({','.join(map(str, c.index))}) at position {c.pos}" if c.element
                else ("tail padding" if c.tail else "padding") + f" at position {c.pos}")
        attrs = (f'class="cell {kind}" data-view="{view}" data-pos="{c.pos}" '
                 f'data-tile="{tile_of(c)}"')
        if c.element:
            attrs += f' data-index="{",".join(map(str, c.index))}"'
        out.append(f'<rect {attrs} x="{x:g}" y="{y:g}" width="{cell:g}" height="{cell:g}" '
                   f'fill="{fill}" stroke="#ffffff" stroke-width="1">'
                   f"<title>{escape(what)}</title></rect>")
        if not c.element:
            out.append(f'<rect class="hatch" x="{x:g}" y="{y:g}" width="{cell:g}" '
                       f'height="{cell:g}" fill="url(#hatch)" pointer-events="none"/>')
        else:
            label = str(c.pos)
            out.append(f'<text class="label" data-view="{view}" data-pos="{c.pos}" '
                       f'x="{x + cell / 2:g}" y="{y + cell / 2:g}" '
                       f'font-size="{_font_size(cell, label)}" text-anchor="middle" '
                       f'dominant-baseline="central">{label}</text>')
    at = {(c.row, c.col): c for c in cells}
    if sub:
        _outline_groups(out, at, lambda c: (-1, c.pos) if c.tail else (0, c.pos // sub),
                        x0, y0, cell, _SUBTILE_STROKE, 2.0, inset=2.5, kind="subtile")
    _outline_groups(out, at, tile_of, x0, y0, cell, _TILE_STROKE, 2.5, inset=0.0,
                    kind="tile")


def _outline_groups(out, at: dict, group, x0, y0, cell, stroke, width, inset, kind) -> None:
    """Outline each group of cells: an (inset) rectangle when the group's cells fill their
    bounding box, else its boundary edges."""
    groups: dict = {}
    for (r, c), cl in at.items():
        groups.setdefault(group(cl), []).append((r, c))
    for key, members in groups.items():
        rows = [r for r, _ in members]
        cols = [c for _, c in members]
        r0, r1, c0, c1 = min(rows), max(rows) + 1, min(cols), max(cols) + 1
        if (r1 - r0) * (c1 - c0) == len(members):
            x, y = x0 + c0 * cell + inset, y0 + r0 * cell + inset
            out.append(f'<rect class="{kind}" data-group="{escape(str(key))}" x="{x:g}" '
                       f'y="{y:g}" width="{(c1 - c0) * cell - 2 * inset:g}" '
                       f'height="{(r1 - r0) * cell - 2 * inset:g}" fill="none" '
                       f'stroke="{stroke}" stroke-width="{width}"/>')
            continue
        mine = set(members)
        segs = []
        for r, c in members:
            x, y = x0 + c * cell, y0 + r * cell
            if (r - 1, c) not in mine:
                segs.append(f"M{x:g},{y:g}h{cell:g}")
            if (r + 1, c) not in mine:
                segs.append(f"M{x:g},{y + cell:g}h{cell:g}")
            if (r, c - 1) not in mine:
                segs.append(f"M{x:g},{y:g}v{cell:g}")
            if (r, c + 1) not in mine:
                segs.append(f"M{x + cell:g},{y:g}v{cell:g}")
        out.append(f'<path class="{kind}" data-group="{escape(str(key))}" d="{"".join(segs)}" '
                   f'fill="none" stroke="{stroke}" stroke-width="{width}"/>')


def _cell_size(cols: int, rows: int) -> int:
    n = max(cols, rows)
    return 34 if n <= 16 else 24 if n <= 32 else 16


def _text(out, x, y, text, size=13, weight="normal", anchor="start", cls="caption") -> None:
    out.append(f'<text class="{cls}" x="{x:g}" y="{y:g}" font-size="{size}" '
               f'font-weight="{weight}" text-anchor="{anchor}">{escape(text)}</text>')


def caption_lines(shape: Shape) -> list[str]:
    """The facts under the title: counts, physical size, bytes and padding overhead."""
    from xlapy.cli.layout_facts import array_facts

    f = array_facts(shape)
    lines = [f"{f.elements} element{'s' if f.elements != 1 else ''}; physical size "
             f"{f.physical_elements} ({f.padding_elements} padding); "
             f"{f.byte_size} bytes for {f.data_bytes} bytes of data"
             + (f" ({f.byte_size / f.data_bytes:.1f}x)" if f.data_bytes
                and f.byte_size != f.data_bytes else "")]
    pct = f.padding_overhead_percent
    if pct is not None:
        lines[0] += f"; padding overhead {pct:.1f}%"
    return lines


def layout_svg(shape: Shape, at: tuple[int, ...] | None = None, max_rows: int = MAX_ROWS,
               max_cols: int = MAX_COLS, memory_cols: int = MEMORY_COLS) -> str:
    """SVG text of the memory map of array ``shape`` (see the module docstring).

    >>> svg = layout_svg(parse_shape("f32[3,5]{1,0:T(2,2)}"))   # figure 1 of the page
    """
    if not shape.is_array():
        raise ValueError(f"layout_svg draws one array shape, got {shape}")
    plan = physical_plan(shape)
    rank = len(shape.dimensions)
    block, sub = tile_block_sizes(shape)
    lcells, (nr, nc), (dr, dc) = _logical_cells(shape, at, max_rows, max_cols)
    mcells, width, why, mrows, shown = _memory_cells(shape, max_rows, memory_cols)
    lcell = _cell_size(dc, dr)
    mcell = _cell_size(width, 0)
    margin, gap = 20, 60
    tiles = shape.layout.tiles if shape.layout is not None else ()

    head = [str(shape)] + caption_lines(shape)
    notes: list[str] = []
    if rank > 2:
        lead = at if at is not None else (0,) * (rank - 2)
        notes.append(f"Logical view: the slice [{','.join(map(str, lead))},:,:] of the two most "
                     f"minor dimensions (rows: dimension {rank - 2}, columns: dimension "
                     f"{rank - 1}){'' if at is not None else '; --at picks another'}")
    elif rank == 1:
        notes.append("Logical view: dimension 0 runs across")
    shown_r, shown_c = min(nr, max_rows), min(nc, max_cols)
    if shown_r < nr or shown_c < nc:
        notes.append(f"Logical view shows rows 0..{shown_r - 1} of {nr} and columns "
                     f"0..{shown_c - 1} of {nc} (at most {max_rows}x{max_cols} cells)")
    if shown < plan.elements:
        notes.append(f"Memory view shows positions 0..{shown - 1} of {plan.elements} "
                     f"({min(mrows, max_rows)} of {mrows} rows)")
    legend = []
    if tiles:
        legend.append(f"colour: one {tiles[0]} tile ({block} consecutive positions); "
                      "dark lines: tile boundaries")
        if sub:
            legend.append(f"red outline: one {tiles[1]} sub-tile ({sub} consecutive positions)")
    else:
        legend.append("no tiles: the buffer is the physical shape in row-major order")
    legend.append("hatched: padding (no element); numbers: linear index = buffer position")

    line_h = 18
    top = margin + 22 + line_h * (len(head) - 1 + len(notes) + len(legend)) + 30
    lw, lh = dc * lcell, dr * lcell
    mx = margin + max(lw, 120) + gap
    mw, mh = width * mcell, -(-shown // width) * mcell if shown else 0
    total_w = max(mx + mw + margin, 760)
    total_h = top + max(lh, mh) + margin
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:g}" height="{total_h:g}" '
            f'viewBox="0 0 {total_w:g} {total_h:g}" font-family="{_FONT}">'),
           _HATCH_DEFS,
           f'<rect width="{total_w:g}" height="{total_h:g}" fill="#ffffff"/>']
    y = margin + 14
    _text(out, margin, y, head[0], size=16, weight="bold", cls="title")
    for line in head[1:] + notes + legend:
        y += line_h
        _text(out, margin, y, line)
    _text(out, margin, top - 10, f"Logical view ({nr}x{nc}" + (" slice)" if rank > 2 else ")"),
          size=13, weight="bold", cls="heading")
    _text(out, mx, top - 10, f"Memory order: rows of {width} ({why})", size=13,
          weight="bold", cls="heading")
    out.append('<g id="logical">')
    _draw_cells(out, lcells, margin, top, lcell, block, sub, "logical")
    out.append("</g>")
    out.append('<g id="memory">')
    _draw_cells(out, mcells, mx, top, mcell, block, sub, "memory")
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


# -- PNG -----------------------------------------------------------------------------------


def find_png_converter() -> str | None:
    """``"resvg"`` if the resvg-py wheel is importable (the ``pictures`` extra: no system
    library), else ``"rsvg-convert"`` if that program is on PATH, else ``"cairosvg"`` if
    importable (it needs the system's cairo), else None."""
    import importlib.util

    if importlib.util.find_spec("resvg_py") is not None:
        return "resvg"
    if shutil.which("rsvg-convert"):
        return "rsvg-convert"
    try:
        import cairosvg  # noqa: F401
    except (ImportError, OSError):  # OSError: cairosvg installed, libcairo missing
        return None
    return "cairosvg"


def svg_to_png(svg: str, path: str) -> str:
    """Write ``svg`` as a PNG file; returns the converter used. Raises PngConverterMissing
    when none is available."""
    converter = find_png_converter()
    if converter is None:
        raise PngConverterMissing(
            "--png needs an SVG converter and found none: pip install 'xlapy[pictures]' (the "
            "resvg-py wheel, no system library), or rsvg-convert (Debian/Ubuntu: apt-get "
            "install librsvg2-bin) or the cairosvg Python package; --svg writes the SVG "
            "without one")
    if converter == "resvg":
        from xlapy.tools.graph_svg import png_bytes

        data = png_bytes(svg)
        with open(path, "wb") as f:
            f.write(data)
    elif converter == "rsvg-convert":
        done = subprocess.run(["rsvg-convert", "--format", "png", "--output", path],
                              input=svg.encode(), capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"rsvg-convert failed: {done.stderr.decode().strip()}")
    else:
        import cairosvg

        cairosvg.svg2png(bytestring=svg.encode(), write_to=path)
    return converter
