"""The two pictures ``xlapy layout`` draws, as in the figures of the Tiled layout page:

* the offset grid: each element of a 2-D slice, laid out by logical row and column,
  showing its linear offset (its position in the buffer, in elements);
* the memory grid: the buffer positions in order, in rows of one tile (or of the minor
  dimension), each cell naming the logical element stored there, ``.`` for padding.

Owns: ``offset_grid``, ``memory_grid`` and the plain-text table they share. Only the cells
shown are computed, so huge shapes stay cheap. Imports only the shape layer and NumPy.
"""

from __future__ import annotations

from math import prod

import numpy as np

from xlapy.shape.index import physical_plan
from xlapy.shape.layout import COMBINE_DIMENSION
from xlapy.shape.shape import Shape


def _table(col_labels: list[str], rows: list[tuple[str, list[str]]],
           indent: str = "  ") -> list[str]:
    """Right-aligned cells under column labels, each row as ``label | cells``."""
    cells = [c for _, row in rows for c in row]
    width = max(len(c) for c in cells + col_labels)
    label_width = max(len(label) for label, _ in rows)
    head = indent + " " * label_width + "   " + " ".join(c.rjust(width) for c in col_labels)
    lines = [head.rstrip()]
    for label, row in rows:
        line = f"{indent}{label.rjust(label_width)} | " + " ".join(c.rjust(width) for c in row)
        lines.append(line.rstrip())
    return lines


def offset_grid(shape: Shape, at: tuple[int, ...] | None = None, max_rows: int = 32,
                max_cols: int = 32, width: int = 120) -> list[str]:
    """Lines showing the linear offset of each element of the slice: rows are dimension
    rank-2, columns dimension rank-1, leading indices ``at`` (default all 0); at most
    ``max_cols`` columns and as many as fit in ``width`` characters."""
    plan = physical_plan(shape)
    dims = shape.dimensions
    rank = len(dims)
    if rank == 0:
        position = int(plan.linear([]))
        return [f"Linear offset: the single element () is at buffer position {position}."]
    leading = tuple(at) if at is not None else (0,) * max(0, rank - 2)
    if rank == 1:
        nr, nc = 1, dims[0]
        title = ("Linear offset of each element (its position in the buffer, in elements);\n"
                 "dimension 0 runs across:")
    else:
        nr, nc = dims[-2], dims[-1]
        title = ("Linear offset of each element (its position in the buffer, in elements);\n"
                 f"rows: dimension {rank - 2}, columns: dimension {rank - 1}")
        if rank > 2:
            where = ",".join(str(i) for i in leading) + ",:,:"
            source = "leading indices 0" if at is None else "from --at"
            title += f", in the slice [{where}] ({source})"
        title += ":"
    if nr * nc == 0:
        return [title, "  (no elements)"]
    sr, sc = min(nr, max_rows), min(nc, max_cols)
    if rank == 1:
        index = [np.arange(sc)]
    else:
        index = list(leading) + [np.arange(sr)[:, None], np.arange(sc)[None, :]]
    offsets = np.broadcast_to(np.asarray(plan.linear(index)), (sr, sc) if rank > 1 else (sc,))
    offsets = offsets.reshape(sr, sc)
    cell_width = max(len(str(int(offsets.max()))), len(str(sc - 1)))
    fit = max(1, (width - len(str(sr - 1)) - 5) // (cell_width + 1))
    if fit < sc:
        sc = fit
        offsets = offsets[:, :sc]
    row_labels = [""] if rank == 1 else [str(r) for r in range(sr)]
    rows = [(row_labels[r], [str(int(v)) for v in offsets[r]]) for r in range(sr)]
    lines = [title] + _table([str(c) for c in range(sc)], rows)
    if sr < nr:
        lines.append(f"  ... rows {sr}..{nr - 1} not shown ({nr} rows in all)")
    if sc < nc:
        lines.append(f"  ... columns {sc}..{nc - 1} not shown ({nc} columns in all)")
    return lines


def _cell_width(shape: Shape, positions: int) -> int:
    """Characters of the widest cell among the first ``positions`` buffer positions."""
    plan = physical_plan(shape)
    index, _ = plan.unravel(np.arange(min(positions, plan.elements), dtype=np.int64))
    widest = sum(len(str(int(np.max(ix)))) + 1 for ix in index) if plan.elements else 0
    return max(widest + 1, 2)


def _tile_name(dims: list[int]) -> str:
    return "x".join(str(d) for d in dims) if len(dims) > 1 else f"{dims[0]}-element"


def memory_row_width(shape: Shape, max_cols: int = 32, width: int = 120) -> tuple[int, str]:
    """How many buffer positions one row of the memory grid holds, and why: one whole tile
    if it fits in ``max_cols`` cells and ``width`` characters, else the largest halving of
    the tile's (or the array's) minor dimension that fits, else as many as fit."""
    plan = physical_plan(shape)
    cell = _cell_width(shape, 32 * max_cols)
    limit = max(1, min(max_cols, (width - 10) // (cell + 1)))
    tiles = shape.layout.tiles if shape.layout is not None else ()
    if tiles:
        first = [d for d in tiles[0].dimensions if d != COMBINE_DIMENSION]
        name = _tile_name(first)
        if prod(first) <= limit:
            return prod(first), f"one {name} tile per row"
        minor, what = first[-1], f"each {name} tile"
    else:
        minor, what = (plan.final[-1] if plan.final else 1), "the most minor dimension"
    m = minor
    while m > limit and m % 2 == 0:
        m //= 2
    if m == minor and minor > 0 and m <= limit and tiles:
        return m, f"one row of {what} per row"
    if m == minor and minor > 0 and m <= limit:
        return m, "one run of the most minor dimension per row"
    if 0 < m <= limit:
        return m, f"a row of {what} is {minor} positions: {minor // m} rows here"
    return limit, f"a row of {what} is {minor} positions"


#: Positions examined when looking for the end of a run of padding rows.
_SCAN_LIMIT = 1 << 20


def memory_grid(shape: Shape, max_rows: int = 32, max_cols: int = 32,
                width: int = 120) -> list[str]:
    """Lines showing buffer positions 0.. in order with the logical index stored at each;
    consecutive rows of padding only are folded into one line."""
    plan = physical_plan(shape)
    total = plan.elements
    if total == 0:
        return ["Memory order: the buffer is empty (0 positions)."]
    row_width, why = memory_row_width(shape, max_cols, width)
    nrows = -(-total // row_width)
    scanned_rows = min(nrows, max(max_rows, _SCAN_LIMIT // row_width))
    positions = np.arange(min(total, scanned_rows * row_width), dtype=np.int64)
    index, valid = plan.unravel(positions)
    valid = np.asarray(valid) & (positions < prod(plan.final))  # tail padding L(n)
    cols = [np.broadcast_to(np.asarray(ix), positions.shape) for ix in index]

    def cell(k: int) -> str:
        return "(" + ",".join(str(int(c[k])) for c in cols) + ")" if valid[k] else "."

    rows: list[tuple[str, list[str]]] = []
    folded: dict[int, str] = {}  # line number -> text of a folded run of padding rows
    r = 0
    while r < scanned_rows and len(rows) + len(folded) < max_rows:
        lo = r * row_width
        run_end = r
        while (run_end < scanned_rows
               and not valid[run_end * row_width : (run_end + 1) * row_width].any()):
            run_end += 1
        if run_end - r >= 2:
            hi = min(total, run_end * row_width) - 1
            more = " and on" if run_end == scanned_rows and run_end < nrows else ""
            folded[len(rows) + len(folded)] = f"{lo}..{hi}{more}: padding ({run_end - r} rows)"
            r = run_end
            continue
        row = [cell(k) for k in range(lo, min(lo + row_width, positions.size))]
        rows.append((str(lo), row + [""] * (row_width - len(row))))
        r += 1
    title = (f"Memory order: buffer positions 0..{total - 1} in rows of {row_width} ({why});\n"
             "each cell is the logical index stored there, '.' is padding:")
    table = _table([f"+{c}" for c in range(row_width)], rows) if rows else []
    lines = [title] + table[:1]
    body = iter(table[1:])
    for i in range(len(rows) + len(folded)):
        lines.append(f"  ... {folded[i]}" if i in folded else next(body))
    if r < nrows:
        lines.append(f"  ... positions {r * row_width}..{total - 1} not shown")
    return lines
