"""Halo exchange: the input of a windowed operation along a split dimension (XLA's
PartitionedHlo::ReshardAsWindowedInput, in its common form).

When an operation's output is split along dimension d as its input is, device k's output
block needs the input window ``[a_k, b_k)``: its own block, a few elements past either end
(the halos) and, beyond the array's ends, padding. Instead of gathering the dimension,
each device receives its left halo from the device before it and its right halo from the
device after it (one ``collective-permute`` per side: the border slices move one device
along d), concatenates them around its block, fills what lies outside the array with the
padding value, and - when the window does not start at the same place relative to every
block - takes its window with a ``dynamic-slice`` at partition-id based offsets. Halos
larger than a block (reaching past the neighbour) are left to the caller's fallback.

The window of output element j along d is input ``[j * stride - low, j * stride - low +
extent)``; slice, pad, reduce-window and convolution windows are all of this form (base
dilation and interior padding are not). Owns ``Window``, ``plan`` and ``exchange``.
Imports xlapy.passes.spmd.core.
"""

from __future__ import annotations

from dataclasses import dataclass

from xlapy.hlo.attrs.slicing import SliceRanges
from xlapy.passes.spmd.core import Builder, ceil_div, device_groups
from xlapy.passes.spmd.device_map import DeviceMap
from xlapy.shape import PrimitiveType, Shape


@dataclass(frozen=True)
class Window:
    """The input window of each output element along one dimension: ``out`` output
    elements, element j reading input ``[j * stride - low, j * stride - low + extent)``."""

    out: int
    stride: int
    low: int
    extent: int


@dataclass(frozen=True)
class Plan:
    """A halo exchange along one dimension: input size ``n`` split ``tiles`` ways (blocks of
    ``block``), the halos ``left`` and ``right``, the window ``length`` each device ends
    with, and per tile index its start within the extended block (``offsets``) and the
    global position the extended block starts at (``starts``)."""

    n: int
    tiles: int
    block: int
    left: int
    right: int
    length: int
    offsets: tuple[int, ...]
    starts: tuple[int, ...]

    @property
    def needs_mask(self) -> bool:
        size = self.left + self.block + self.right
        return any(s < 0 or s + size > self.n for s in self.starts)


def plan(n: int, tiles: int, w: Window) -> Plan | None:
    """The exchange for an input of ``n`` elements and its output both split ``tiles``
    ways, or None when a halo reaches past the neighbouring block."""
    if tiles < 2 or w.stride < 1 or w.extent < 1:
        return None
    block = ceil_div(n, tiles)
    out_block = ceil_div(w.out, tiles)
    firsts = [k * out_block * w.stride - w.low for k in range(tiles)]
    length = (out_block - 1) * w.stride + w.extent
    left = max(0, max(k * block - a for k, a in enumerate(firsts)))
    right = max(0, max(a + length - (k + 1) * block for k, a in enumerate(firsts)))
    if left > block or right > block:
        return None
    starts = tuple(k * block - left for k in range(tiles))
    offsets = tuple(a - s for a, s in zip(firsts, starts))
    return Plan(n, tiles, block, left, right, length, offsets, starts)


def _slice(b: Builder, x, dim: int, start: int, limit: int):
    dims = list(x.shape.dimensions)
    starts = [0] * len(dims)
    limits = list(dims)
    starts[dim], limits[dim] = start, limit
    dims[dim] = limit - start
    return b.add("slice", [x], {"slice": SliceRanges.of(starts, limits)},
                 shape=Shape.array(x.shape.element_type, dims))


def exchange(b: Builder, x, m: DeviceMap, dim: int, p: Plan, fill):
    """Each device's window along ``dim`` of the per-device ``x`` (tiled along ``dim`` as
    ``m`` says, the block ``p.block`` long there): halos from the neighbours, positions
    outside the array set to the scalar ``fill``, the window cut out. Returns the new
    per-device instruction (``p.length`` long along ``dim``)."""
    groups = device_groups(m, [dim])
    parts = []
    if p.left:
        pairs = [(g[i], g[i + 1]) for g in groups for i in range(len(g) - 1)]
        parts.append(b.collective_permute(_slice(b, x, dim, p.block - p.left, p.block), pairs))
    parts.append(x)
    if p.right:
        pairs = [(g[i + 1], g[i]) for g in groups for i in range(len(g) - 1)]
        parts.append(b.collective_permute(_slice(b, x, dim, 0, p.right), pairs))
    et = x.shape.element_type
    dims = list(x.shape.dimensions)
    dims[dim] = p.left + p.block + p.right
    if len(parts) > 1:
        x = b.add("concatenate", parts, {"dimensions": (dim,)}, shape=Shape.array(et, dims))
    tile = [int(m.index[d, dim]) for d in range(m.num_devices)]
    if p.needs_mask:
        s32 = PrimitiveType.S32
        iota = b.add("iota", [], {"iota_dimension": dim}, shape=Shape.array(s32, dims),
                     name="iota")
        start = b.broadcast_scalar(b.per_device([p.starts[k] for k in tile]), dims)
        pos = b.add("add", [iota, start], {})
        low = b.add("compare", [pos, b.broadcast_scalar(b.scalar(0), dims)],
                    {"direction": "GE"})
        high = b.add("compare", [pos, b.broadcast_scalar(b.scalar(p.n), dims)],
                     {"direction": "LT"})
        ok = b.add("and", [low, high], {})
        x = b.add("select", [ok, x, b.broadcast_scalar(fill, dims)], {})
    if set(p.offsets) == {0}:
        return _slice(b, x, dim, 0, p.length) if p.length != dims[dim] else x
    zero = b.scalar(0)
    index = [zero] * len(dims)
    index[dim] = b.per_device([p.offsets[k] for k in tile])
    sizes = list(dims)
    sizes[dim] = p.length
    return b.add("dynamic-slice", [x] + index, {"dynamic_slice_sizes": tuple(sizes)},
                 shape=Shape.array(et, sizes), name="dynamic-slice")


__all__ = ["Plan", "Window", "exchange", "plan"]
