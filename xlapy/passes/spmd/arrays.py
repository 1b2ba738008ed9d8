"""Global arrays and the per-device arrays of a partitioned program (what jax's
``device_put`` with a sharding and ``jax.Array``'s assembly do).

``SpmdLayout`` (kept on a partitioned module as ``module.spmd_layout``) records the global
shapes and the shardings of the entry's parameters and result. ``shard_arguments`` slices
global arguments into one argument list per device (uneven last shards padded with zeros,
the padding the partitioned program never reads); ``assemble_results`` builds each global
result from the device blocks that hold it. Devices are numbered as the runtime numbers
them: k = replica * partitions + partition.

Imports numpy, the sharding model and the spmd device maps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.sharding import HloSharding
from xlapy.passes.spmd.device_map import DeviceMap, device_map
from xlapy.shape import Shape


@dataclass
class SpmdLayout:
    param_shapes: list[Shape]
    param_shardings: list[HloSharding]
    result_shape: Shape
    result_sharding: HloSharding
    num_partitions: int


def _leaves(shape: Shape, sharding: HloSharding) -> list[tuple[Shape, HloSharding]]:
    if shape.is_tuple():
        out = []
        elements = sharding.elements if sharding.kind == "tuple" else None
        it = iter(elements) if elements is not None else None
        for s in _leaf_shapes(shape):
            out.append((s, next(it) if it is not None else sharding))
        return out
    return [(shape, sharding)]


def _leaf_shapes(shape: Shape) -> list[Shape]:
    if shape.is_tuple():
        return [leaf for s in shape.tuple_shapes for leaf in _leaf_shapes(s)]
    return [shape]


def _map(shape: Shape, sharding: HloSharding, n: int) -> DeviceMap:
    return device_map(sharding, len(shape.dimensions), n)


def _block(array: np.ndarray, shape: Shape, m: DeviceMap, device: int) -> np.ndarray:
    dims = shape.dimensions
    local = [-(-d // t) for d, t in zip(dims, m.tiles)]
    index = tuple(slice(int(m.index[device, i]) * local[i],
                        min((int(m.index[device, i]) + 1) * local[i], dims[i]))
                  for i in range(len(dims)))
    block = np.asarray(array)[index]
    if list(block.shape) != local:
        pad = [(0, w - h) for h, w in zip(block.shape, local)]
        block = np.pad(block, pad)
    return np.ascontiguousarray(block).reshape(block.shape)


def shard_value(value, shape: Shape, sharding: HloSharding, n: int, partition: int):
    """The block of a global value (array or nested tuple) partition ``partition`` holds."""
    if shape.is_tuple():
        elements = sharding.elements if sharding.kind == "tuple" else None
        out = []
        k = 0
        for i, s in enumerate(shape.tuple_shapes):
            count = len(_leaf_shapes(s))
            sub = HloSharding.tuple_(elements[k:k + count]) if elements is not None and \
                s.is_tuple() else (elements[k] if elements is not None else sharding)
            out.append(shard_value(value[i], s, sub, n, partition))
            k += count
        return tuple(out)
    if not shape.is_array():
        return value
    if sharding.v2().kind == "manual":
        raise InvalidArgumentError("a manual (shard_map) value has no global form; pass "
                                   "per-device arrays")
    return _block(value, shape, _map(shape, sharding, n), partition)


def shard_arguments(layout: SpmdLayout, args: list, replicas: int = 1) -> list[list]:
    """One argument list per device (replica-major) from the global ``args``."""
    n = layout.num_partitions
    if len(args) != len(layout.param_shapes):
        raise InvalidArgumentError(f"the program takes {len(layout.param_shapes)} arguments, "
                                   f"got {len(args)}")
    per_partition = [[shard_value(a, s, sh, n, p)
                      for a, s, sh in zip(args, layout.param_shapes, layout.param_shardings)]
                     for p in range(n)]
    return [list(per_partition[p]) for _ in range(replicas) for p in range(n)]


def assemble_value(blocks: list, shape: Shape, sharding: HloSharding, n: int):
    """The global value from each partition's block (``blocks[p]``)."""
    if shape.is_tuple():
        elements = sharding.elements if sharding.kind == "tuple" else None
        out = []
        k = 0
        for i, s in enumerate(shape.tuple_shapes):
            count = len(_leaf_shapes(s))
            sub = HloSharding.tuple_(elements[k:k + count]) if elements is not None and \
                s.is_tuple() else (elements[k] if elements is not None else sharding)
            out.append(assemble_value([b[i] for b in blocks], s, sub, n))
            k += count
        return tuple(out)
    if not shape.is_array():
        return blocks[0]
    if sharding.v2().kind == "manual":
        raise InvalidArgumentError("a manual (shard_map) result has no global form; ask for "
                                   "per-device arrays")
    from xlapy.shape import dtypes

    m = _map(shape, sharding, n)
    out = np.zeros(shape.dimensions, dtypes.to_dtype(shape.element_type))
    dims = shape.dimensions
    local = [-(-d // t) for d, t in zip(dims, m.tiles)]
    done = set()
    for d in range(n):
        key = tuple(int(v) for v in m.index[d])
        if key in done:
            continue
        done.add(key)
        index = tuple(slice(key[i] * local[i], min((key[i] + 1) * local[i], dims[i]))
                      for i in range(len(dims)))
        region = out[index]
        block = np.asarray(blocks[d])
        out[index] = block[tuple(slice(0, s) for s in region.shape)]
    return out


def assemble_results(layout: SpmdLayout, results: list, replica: int = 0):
    """The global result of ``replica`` from the per-device results (replica-major)."""
    n = layout.num_partitions
    blocks = results[replica * n:(replica + 1) * n]
    return assemble_value(blocks, layout.result_shape, layout.result_sharding, n)


__all__ = ["SpmdLayout", "assemble_results", "assemble_value", "shard_arguments",
           "shard_value"]
