"""The SPMD partitioner's rules (xlapy/passes/spmd/: handlers_shape.py, dot_conv.py,
gather_scatter.py, control_flow.py, partitioner.py): hand-written GSPMD modules, each
partitioned over several devices and run on threads, give the unpartitioned module's
results (uneven shards included), with the communication XLA's partitioner uses for them."""

import numpy as np
import pytest
from spmd_helpers import ADD, MAX, check, collectives, module, ops, partitioned

from xlapy.errors import XlaError
from xlapy.parser import parse_hlo_module
from xlapy.passes.spmd import partition, sharding_devices

T4 = "{devices=[4,1]<=[4]}"
C4 = "{devices=[1,4]<=[4]}"
R = "{replicated}"


def unary(shape: str, sharding: str, op_line: str, out: str, out_sharding: str = "") -> str:
    tail = f", sharding={out_sharding}" if out_sharding else ""
    return module(f"  p = {shape} parameter(0), sharding={sharding}\n"
                  f"  ROOT r = {out} {op_line}{tail}")


# -- elementwise and data movement --------------------------------------------------------------


def test_elementwise_keeps_the_sharding_and_needs_nothing():
    m = check(module(f"  a = f32[8,6] parameter(0), sharding={T4}\n"
                     f"  b = f32[8,6] parameter(1), sharding={T4}\n"
                     "  t = f32[8,6] tanh(a)\n"
                     "  ROOT r = f32[8,6] multiply(t, b)"), 4)
    assert collectives(m) == []
    assert m.entry.root.shape.dimensions == (2, 6)


def test_elementwise_operands_sharded_differently_meet():
    m = check(module(f"  a = f32[8,8] parameter(0), sharding={T4}\n"
                     f"  b = f32[8,8] parameter(1), sharding={C4}\n"
                     f"  ROOT r = f32[8,8] add(a, b), sharding={T4}"), 4)
    assert collectives(m) == ["all-to-all"]


@pytest.mark.parametrize("text", [
    unary("f32[8]", "{devices=[4]<=[4]}", "broadcast(p), dimensions={0}", "f32[8,3]"),
    unary("f32[8]", "{devices=[4]<=[4]}", "broadcast(p), dimensions={1}", "f32[3,8]"),
    unary("f32[8,6]", T4, "reshape(p)", "f32[4,2,6]"),
    unary("f32[8,6]", T4, "reshape(p)", "f32[48]"),
    unary("f32[4,2,6]", "{devices=[4,1,1]<=[4]}", "reshape(p)", "f32[8,6]"),
    unary("f32[8,6]", "{devices=[1,2,2]<=[4] last_tile_dim_replicate}", "reshape(p)",
          "f32[48]"),
    unary("f32[8,6]", T4, "transpose(p), dimensions={1,0}", "f32[6,8]"),
    unary("f32[8,6]", T4, "slice(p), slice={[1:7:2], [0:6]}", "f32[3,6]"),
    unary("f32[8,6]", T4, "slice(p), slice={[0:8], [2:5]}", "f32[8,3]"),
    unary("f32[8,6]", T4, "reverse(p), dimensions={0}", "f32[8,6]"),
    unary("f32[7,6]", T4, "reverse(p), dimensions={0,1}", "f32[7,6]"),
    module(f"  p = f32[8,6] parameter(0), sharding={T4}\n"
           "  z = f32[] constant(-1)\n"
           "  ROOT r = f32[10,9] pad(p, z), padding=1_1x0_3"),
    module(f"  a = f32[8,6] parameter(0), sharding={T4}\n"
           f"  b = f32[8,2] parameter(1), sharding={T4}\n"
           "  ROOT r = f32[8,8] concatenate(a, b), dimensions={1}"),
    module(f"  a = f32[8,6] parameter(0), sharding={T4}\n"
           f"  b = f32[4,6] parameter(1), sharding={T4}\n"
           f"  ROOT r = f32[12,6] concatenate(a, b), dimensions={{0}}, sharding={T4}"),
    module(f"  a = f32[8,6] parameter(0), sharding={T4}\n"
           "  i = s32[] parameter(1), sharding={replicated}\n"
           "  ROOT r = f32[3,6] dynamic-slice(a, i, i), dynamic_slice_sizes={3,6}"),
    module(f"  a = f32[8,6] parameter(0), sharding={T4}\n"
           f"  u = f32[8,2] parameter(1), sharding={T4}\n"
           "  i = s32[] parameter(2), sharding={replicated}\n"
           "  z = s32[] constant(0)\n"
           "  ROOT r = f32[8,6] dynamic-update-slice(a, u, z, i)"),
    module(f"  ROOT r = f32[8,6] iota(), iota_dimension=0, sharding={T4}"),
    module(f"  ROOT r = s32[6,10] iota(), iota_dimension=1, sharding={C4}"),
    module(f"  p = f32[8,6] parameter(0), sharding={T4}\n"
           "  c = f32[8,6] constant({...})\n"
           "  ROOT r = f32[8,6] add(p, c)".replace("{...}", "{" + ",".join(
               "{" + ",".join(str(i * 6 + j) for j in range(6)) + "}" for i in range(8)) + "}")),
])
def test_data_movement_matches_one_device(text):
    check(text, 4)


def test_uneven_shards_are_exact():
    # 10 rows over 4 devices: tiles of 3, the last holding 1 row and 2 rows of padding
    check(module("  a = f32[10,3] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                 "  b = f32[10,3] exponential(a)\n"
                 "  z = f32[] constant(0)\n"
                 "  s = f32[3] reduce(b, z), dimensions={0}, to_apply=add\n"
                 "  m = f32[] constant(-inf)\n"
                 "  x = f32[3] reduce(a, m), dimensions={0}, to_apply=max\n"
                 "  ROOT t = (f32[3], f32[3]) tuple(s, x)"), 4)


def test_reverse_of_a_split_dimension_is_a_collective_permute():
    m = check(unary("f32[8,6]", T4, "reverse(p), dimensions={0}", "f32[8,6]", T4), 4)
    assert collectives(m) == ["collective-permute"]


def test_sort_along_a_split_dimension_gathers_it():
    m = check(module(f"  p = f32[6,8] parameter(0), sharding={C4}\n"
                     "  ROOT s = f32[6,8] sort(p), dimensions={1}, to_apply=lt\n",
                     comps="lt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                           "  ROOT c = pred[] compare(a, b), direction=LT\n}\n"), 4)
    assert "all-gather" in collectives(m) or "all-to-all" in collectives(m)


def test_reduce_of_a_split_dimension_is_a_partial_reduce_and_an_all_reduce():
    m = check(module("  a = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                     "  z = f32[] constant(0)\n"
                     "  ROOT s = f32[6] reduce(a, z), dimensions={0}, to_apply=add"), 4)
    assert collectives(m) == ["all-reduce"]
    ar = next(i for i in m.entry.instructions if i.opcode == "all-reduce")
    assert ar.attrs["to_apply"].name == "add"


def test_variadic_reduce_argmax():
    comps = ("argmax {\n  a = f32[] parameter(0)\n  i = s32[] parameter(1)\n"
             "  b = f32[] parameter(2)\n  j = s32[] parameter(3)\n"
             "  g = pred[] compare(a, b), direction=GE\n"
             "  v = f32[] select(g, a, b)\n  k = s32[] select(g, i, j)\n"
             "  ROOT t = (f32[], s32[]) tuple(v, k)\n}\n")
    check(module("  a = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                 "  i = s32[8,6] iota(), iota_dimension=0\n"
                 "  m = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
                 "  ROOT r = (f32[6], s32[6]) reduce(a, i, m, z), dimensions={0}, "
                 "to_apply=argmax", comps=comps), 4)


def test_reduce_window_keeps_untouched_dimensions_split():
    check(module(f"  a = f32[8,6] parameter(0), sharding={T4}\n"
                 "  z = f32[] constant(0)\n"
                 "  ROOT r = f32[8,6] reduce-window(a, z), window={size=1x3 pad=0_0x1_1}, "
                 "to_apply=add"), 4)


# -- dot and convolution -------------------------------------------------------------------------


@pytest.mark.parametrize("lhs,rhs,out,expect", [
    # contracting dimension split on both: local dot, then all-reduce
    ("{devices=[1,4]<=[4]}", "{devices=[4,1]<=[4]}", "{replicated}", ["all-reduce"]),
    # non-contracting of lhs split, rhs replicated: nothing to communicate
    ("{devices=[4,1]<=[4]}", "{replicated}", "{devices=[4,1]<=[4]}", []),
    # rhs non-contracting split
    ("{replicated}", "{devices=[1,4]<=[4]}", "{devices=[1,4]<=[4]}", []),
    # lhs and rhs non-contracting on a 2x2 mesh: a 2-D tiled result
    ("{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
     "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}", "{devices=[2,2]<=[4]}", []),
    # contracting split, result split along rows: a reduce-scatter
    ("{devices=[1,4]<=[4]}", "{devices=[4,1]<=[4]}", "{devices=[4,1]<=[4]}",
     ["reduce-scatter"]),
    # mismatched: lhs contracting split, rhs replicated -> the rhs is sliced locally
    ("{devices=[1,4]<=[4]}", "{replicated}", "{replicated}", ["all-reduce"]),
])
def test_dot_cases(lhs, rhs, out, expect):
    m = check(module(f"  a = f32[8,12] parameter(0), sharding={lhs}\n"
                     f"  b = f32[12,4] parameter(1), sharding={rhs}\n"
                     f"  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={{1}}, "
                     f"rhs_contracting_dims={{0}}, sharding={out}"), 4)
    assert collectives(m) == expect


def test_batch_dot_split_on_batch_needs_nothing():
    m = check(module("  a = f32[4,6,5] parameter(0), sharding={devices=[4,1,1]<=[4]}\n"
                     "  b = f32[4,5,3] parameter(1), sharding={devices=[4,1,1]<=[4]}\n"
                     "  ROOT d = f32[4,6,3] dot(a, b), lhs_batch_dims={0}, "
                     "rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}"),
              4)
    assert collectives(m) == []


def test_dot_uneven_contracting_dimension_masks_the_padding():
    check(module("  a = f32[3,10] parameter(0), sharding={devices=[1,4]<=[4]}\n"
                 "  b = f32[10,2] parameter(1), sharding={devices=[4,1]<=[4]}\n"
                 "  ROOT d = f32[3,2] dot(a, b), lhs_contracting_dims={1}, "
                 "rhs_contracting_dims={0}"), 4)


def test_convolution_batch_and_feature_splits():
    conv = ("  ROOT c = f32[4,6,6,5] convolution(x, k), window={size=3x3 pad=1_1x1_1}, "
            "dim_labels=b01f_01io->b01f")
    m = check(module("  x = f32[4,6,6,3] parameter(0), sharding={devices=[4,1,1,1]<=[4]}\n"
                     "  k = f32[3,3,3,5] parameter(1), sharding={replicated}\n" + conv), 4)
    assert collectives(m) == []
    m = check(module("  x = f32[4,6,6,4] parameter(0), sharding={devices=[1,1,1,4]<=[4]}\n"
                     "  k = f32[3,3,4,5] parameter(1), sharding={devices=[1,1,4,1]<=[4]}\n"
                     + conv), 4)
    assert collectives(m) == ["all-reduce"]
    # a spatial dimension split: its borders by halo exchange (XLA's collectives for jax's
    # SAME convolution split along H: one collective-permute each way of one row)
    m = check(module("  x = f32[2,8,6,3] parameter(0), sharding={devices=[1,4,1,1]<=[4]}\n"
                     "  k = f32[3,3,3,5] parameter(1), sharding={replicated}\n"
                     "  ROOT c = f32[2,8,6,5] convolution(x, k), window={size=3x3 pad=1_1x1_1}, "
                     "dim_labels=b01f_01io->b01f, sharding={devices=[1,4,1,1]<=[4]}"), 4)
    assert halos(m) == [((2, 1, 6, 3), RIGHTWARD), ((2, 1, 6, 3), LEFTWARD)]


# -- halo exchange -------------------------------------------------------------------------------

RIGHTWARD = ((0, 1), (1, 2), (2, 3))  # each device's border to the next one
LEFTWARD = ((1, 0), (2, 1), (3, 2))


def halos(m):
    """(shape, pairs) of each collective-permute; None when another collective runs."""
    out = []
    for c in m.computations:
        for i in c.instructions:
            if i.opcode == "collective-permute":
                out.append((i.shape.dimensions, i.attrs["source_target_pairs"]))
            elif i.opcode in ("all-gather", "all-to-all", "all-reduce", "reduce-scatter"):
                return None
    return out


@pytest.mark.parametrize("shape,op,out,expect", [
    # a[1:]: each device needs the next one's first row
    ("f32[16,8]", "slice(p), slice={[1:16], [0:8]}", "f32[15,8]", [((1, 8), LEFTWARD)]),
    ("f32[16,8]", "slice(p), slice={[0:15], [0:8]}", "f32[15,8]", []),
    ("f32[16,8]", "slice(p), slice={[2:14], [0:8]}", "f32[12,8]",
     [((1, 8), RIGHTWARD), ((1, 8), LEFTWARD)]),
    ("f32[16,8]", "slice(p), slice={[1:16:2], [0:8]}", "f32[8,8]", []),
    ("f32[14,8]", "slice(p), slice={[1:13], [0:8]}", "f32[12,8]", [((2, 8), RIGHTWARD)]),
    # a window reaching past the neighbour's block: gathered
    ("f32[16,8]", "slice(p), slice={[8:16], [0:8]}", "f32[8,8]", None),
    ("f32[16,8]", "pad(p, z), padding=1_1x0_0", "f32[18,8]",
     [((1, 8), RIGHTWARD), ((3, 8), LEFTWARD)]),
    ("f32[16,8]", "pad(p, z), padding=-1_1x0_0", "f32[16,8]", [((1, 8), LEFTWARD)]),
    ("f32[14,8]", "pad(p, z), padding=2_0x0_0", "f32[16,8]", [((2, 8), RIGHTWARD)]),
    # interior padding is no window: gathered
    ("f32[16,8]", "pad(p, z), padding=1_1_1x0_0", "f32[33,8]", None),
    ("f32[16,8]", "reduce-window(p, zero), window={size=3x1 pad=1_1x0_0}, to_apply=add",
     "f32[16,8]", [((1, 8), RIGHTWARD), ((1, 8), LEFTWARD)]),
    ("f32[16,8]", "reduce-window(p, z), window={size=3x1}, to_apply=add", "f32[14,8]",
     [((2, 8), LEFTWARD)]),
    ("f32[16,8]", "reduce-window(p, z), window={size=2x1 stride=2x1}, to_apply=add", "f32[8,8]",
     []),
    ("f32[14,8]", "reduce-window(p, ninf), window={size=3x1 pad=1_1x0_0}, to_apply=max",
     "f32[14,8]", [((1, 8), RIGHTWARD), ((1, 8), LEFTWARD)]),
    ("f32[16,8]", ("reduce-window(p, zero), window={size=3x1 pad=2_2x0_0 rhs_dilate=2x1}, "
                   "to_apply=add"), "f32[16,8]", [((2, 8), RIGHTWARD), ((2, 8), LEFTWARD)]),
    # padding read with an init that is no identity (-1 for add): a window past the ends
    # reads nothing there, so the fill would add to it: gathered
    ("f32[16,8]", "reduce-window(p, z), window={size=3x1 pad=1_1x0_0}, to_apply=add",
     "f32[16,8]", None),
])
def test_windows_along_a_split_dimension_exchange_halos(shape, op, out, expect):
    text = module(f"  p = {shape} parameter(0), sharding={T4}\n  z = f32[] constant(-1)\n"
                  "  zero = f32[] constant(0)\n  ninf = f32[] constant(-inf)\n"
                  f"  ROOT r = {out} {op}, sharding={T4}")
    m = check(text, 4)
    assert halos(m) == expect


def test_halos_along_two_split_dimensions_carry_the_corners():
    m = check(module("  p = f32[16,8] parameter(0), sharding={devices=[2,2]<=[4]}\n"
                     "  z = f32[] constant(-inf)\n"
                     "  ROOT r = f32[16,8] reduce-window(p, z), window={size=3x3 pad=1_1x1_1}, "
                     "to_apply=max, sharding={devices=[2,2]<=[4]}"), 4)
    # rows first (blocks of 4 columns), then columns of the extended 10 rows
    assert halos(m) == [((1, 4), ((0, 2), (1, 3))), ((1, 4), ((2, 0), (3, 1))),
                        ((10, 1), ((0, 1), (2, 3))), ((10, 1), ((1, 0), (3, 2)))]


@pytest.mark.parametrize("x,sharding,window,out", [
    ("f32[2,14,8,3]", "{devices=[1,4,1,1]<=[4]}", "size=3x3 pad=1_1x1_1", "f32[2,14,8,4]"),
    ("f32[2,16,8,3]", "{devices=[1,4,1,1]<=[4]}", "size=3x3 stride=2x1 pad=1_1x1_1",
     "f32[2,8,8,4]"),
    ("f32[2,16,8,3]", "{devices=[1,4,1,1]<=[4]}", "size=3x3", "f32[2,14,6,4]"),
    ("f32[2,16,8,3]", "{devices=[1,2,2,1]<=[4]}", "size=3x3 pad=1_1x1_1", "f32[2,16,8,4]"),
    ("f32[4,16,8,3]", "{devices=[2,2,1,1]<=[4]}", "size=3x3 pad=1_1x1_1", "f32[4,16,8,4]"),
])
def test_convolution_split_spatially_exchanges_halos(x, sharding, window, out):
    m = check(module(f"  x = {x} parameter(0), sharding={sharding}\n"
                     "  k = f32[3,3,3,4] parameter(1), sharding={replicated}\n"
                     f"  ROOT c = {out} convolution(x, k), window={{{window}}}, "
                     f"dim_labels=b01f_01io->b01f, sharding={sharding}"), 4, rtol=1e-4)
    assert halos(m)  # collective-permutes only


# -- gather, scatter -----------------------------------------------------------------------------


def test_gather_passthrough_and_index_passthrough():
    g = ("gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
         "index_vector_dim=1, slice_sizes={1,8}")
    m = check(module(f"  t = f32[10,8] parameter(0), sharding={C4}\n"
                     "  i = s32[6] parameter(1), sharding={replicated}\n"
                     f"  ROOT r = f32[6,8] {g}, sharding={C4}"), 4)
    assert collectives(m) == []
    m = check(module("  t = f32[10,8] parameter(0), sharding={replicated}\n"
                     "  i = s32[8] parameter(1), sharding={devices=[4]<=[4]}\n"
                     f"  ROOT r = f32[8,8] {g}, sharding={T4}"), 4)
    assert collectives(m) == []


def test_scatter_into_a_column_split_table():
    comps = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT r = f32[] add(x, y)\n}\n"
    m = check(module(f"  t = f32[6,8] parameter(0), sharding={C4}\n"
                     "  i = s32[4,1] parameter(1), sharding={replicated}\n"
                     f"  u = f32[4,8] parameter(2), sharding={C4}\n"
                     "  ROOT r = f32[6,8] scatter(t, i, u), update_window_dims={1}, "
                     "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                     f"index_vector_dim=1, to_apply=add, sharding={C4}", comps=comps), 4,
              args=[np.ones((6, 8), np.float32), np.array([[0], [2], [2], [5]], np.int32),
                    np.arange(32, dtype=np.float32).reshape(4, 8)])
    assert collectives(m) == []


ROWS = "{devices=[4,1]<=[4]}"
TAKE = ("gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
        "index_vector_dim=1, slice_sizes={1,8}")


def _collectives_with_shapes(m):
    return [(i.opcode, i.shape.dimensions) for c in m.computations for i in c.instructions
            if i.opcode in ("all-gather", "all-to-all", "collective-permute", "all-reduce")]


@pytest.mark.parametrize("rows", [16, 14])  # 14: tiles of 4, the last holding 2 rows
def test_gather_from_a_row_split_table_is_local_masked_and_summed(rows):
    # XLA's operand-parallel gather (its post module for jnp.take on a row-split table:
    # local gather, select, all-reduce of the result); out-of-range ids clamp as XLA's gather
    ids = np.array([0, rows - 1, 3, 4, 11, -2, rows + 1, 7], np.int32)
    m = check(module(f"  t = f32[{rows},8] parameter(0), sharding={ROWS}\n"
                     "  i = s32[8] parameter(1), sharding={replicated}\n"
                     f"  ROOT r = f32[8,8] {TAKE}, sharding={R}"), 4,
              args=[np.arange(rows * 8, dtype=np.float32).reshape(rows, 8), ids])
    assert _collectives_with_shapes(m) == [("all-reduce", (8, 8))]
    gather = next(i for i in m.entry.instructions if i.opcode == "gather")
    assert gather.operands[0].shape.dimensions == (4, 8)


def test_gather_of_two_index_components_one_split():
    ids = np.array([[0, 0], [15, 4], [3, 9], [-1, 2], [8, 1]], np.int32)
    m = check(module(f"  t = f32[16,6] parameter(0), sharding={ROWS}\n"
                     "  i = s32[5,2] parameter(1), sharding={replicated}\n"
                     "  ROOT r = f32[5,3] gather(t, i), offset_dims={1}, "
                     "collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=1, "
                     f"slice_sizes={{1,3}}, sharding={R}"), 4,
              args=[np.arange(96, dtype=np.float32).reshape(16, 6), ids])
    assert _collectives_with_shapes(m) == [("all-reduce", (5, 3))]


def test_gather_rows_over_one_axis_ids_over_the_other():
    # a 2x2 mesh: table rows over model, ids over data: each device gathers its ids from its
    # rows, the sum runs over the model pairs (XLA's groups {0,1},{2,3})
    m = check(module("  t = f32[16,8] parameter(0), sharding={devices=[2,1,2]<=[2,2]T(1,0) "
                     "last_tile_dim_replicate}\n"
                     "  i = s32[8] parameter(1), sharding={devices=[2,2]<=[4] "
                     "last_tile_dim_replicate}\n"
                     "  ROOT r = f32[8,8] " + TAKE + ", sharding={devices=[2,1,2]<=[4] "
                     "last_tile_dim_replicate}"), 4,
              args=[np.arange(128, dtype=np.float32).reshape(16, 8),
                    np.array([3, 15, 0, 8, 9, 2, 7, 12], np.int32)])
    ar = next(i for i in m.entry.instructions if i.opcode == "all-reduce")
    assert ar.shape.dimensions == (4, 8)
    assert ar.attrs["replica_groups"].flattened_replica_groups() == ((0, 1), (2, 3))


def test_gather_into_a_split_result_larger_than_the_table_gathers_the_table():
    # a device would hold more with the all-reduce (the whole result) than with the table
    # whole and its quarter of the result: XLA gathers the table then
    m = check(module(f"  t = f32[16,8] parameter(0), sharding={ROWS}\n"
                     "  i = s32[32] parameter(1), sharding={replicated}\n"
                     f"  ROOT r = f32[32,8] {TAKE}, sharding={ROWS}"), 4,
              args=[np.arange(128, dtype=np.float32).reshape(16, 8),
                    np.arange(32, dtype=np.int32) % 17])
    assert _collectives_with_shapes(m) == [("all-gather", (16, 8))]


@pytest.mark.parametrize("rows", [16, 14])
def test_scatter_into_a_row_split_table_needs_nothing(rows):
    # each device applies the updates that fall in its rows (indices moved by its first row;
    # the others are out of bounds locally and skipped): XLA's module has no collective
    comps = ("add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
             "  ROOT r = f32[] add(x, y)\n}\n")
    ids = np.array([[0], [5], [5], [rows - 1], [9], [rows + 1], [-3], [12]], np.int32)
    m = check(module(f"  t = f32[{rows},8] parameter(0), sharding={ROWS}\n"
                     "  i = s32[8,1] parameter(1), sharding={replicated}\n"
                     "  u = f32[8,8] parameter(2), sharding={replicated}\n"
                     f"  ROOT r = f32[{rows},8] scatter(t, i, u), update_window_dims={{1}}, "
                     "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                     f"index_vector_dim=1, to_apply=add, sharding={ROWS}", comps=comps), 4,
              args=[np.ones((rows, 8), np.float32), ids,
                    np.arange(64, dtype=np.float32).reshape(8, 8)])
    assert collectives(m) == []
    scatter = next(i for i in m.entry.instructions if i.opcode == "scatter")
    assert scatter.shape.dimensions == (4, 8)


# -- control flow ---------------------------------------------------------------------------------


def test_while_loop_with_sharded_state():
    comps = """
cond {
  s = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8,4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[8,4] sine(x)
  ROOT t = (s32[], f32[8,4]) tuple(j, y)
}
"""
    m = check(module(f"  x = f32[8,4] parameter(0), sharding={T4}\n"
                     "  z = s32[] constant(0)\n"
                     "  t = (s32[], f32[8,4]) tuple(z, x)\n"
                     "  w = (s32[], f32[8,4]) while(t), condition=cond, body=body\n"
                     "  ROOT r = f32[8,4] get-tuple-element(w), index=1", comps=comps), 4)
    assert collectives(m) == []
    body = next(c for c in m.computations if c.name.startswith("body"))
    assert body.parameters[0].shape.tuple_shapes[1].dimensions == (2, 4)


def test_conditional_branches_are_partitioned():
    comps = """
neg {
  p = f32[8,4] parameter(0)
  ROOT n = f32[8,4] negate(p)
}

ex {
  p = f32[8,4] parameter(0)
  ROOT e = f32[8,4] exponential(p)
}
"""
    for pred in (True, False):
        check(module(f"  x = f32[8,4] parameter(0), sharding={T4}\n"
                     "  b = pred[] parameter(1), sharding={replicated}\n"
                     "  ROOT c = f32[8,4] conditional(b, x, x), true_computation=neg, "
                     "false_computation=ex", comps=comps), 4,
              args=[np.arange(32, dtype=np.float32).reshape(8, 4) / 10, np.bool_(pred)])


# -- manual code (shard_map in GSPMD form) -------------------------------------------------------


def test_full_to_shard_and_back_with_a_psum():
    text = module(
        "  x = f32[8,3] parameter(0)\n"
        "  s = f32[8,3] custom-call(x), custom_call_target=\"Sharding\", "
        "sharding={devices=[4,1]<=[4]}\n"
        "  l = f32[2,3] custom-call(s), custom_call_target=\"SPMDFullToShardShape\", "
        "sharding={manual}\n"
        "  a = f32[2,3] all-reduce(l), channel_id=1, replica_groups={{0,1,2,3}}, "
        "use_global_device_ids=true, to_apply=add\n"
        "  c = f32[] constant(2)\n  b = f32[2,3] broadcast(c), dimensions={}\n"
        "  m = f32[2,3] multiply(a, b)\n"
        "  k = f32[2,3] custom-call(m), custom_call_target=\"Sharding\", sharding={manual}\n"
        "  ROOT g = f32[8,3] custom-call(k), custom_call_target=\"SPMDShardToFullShape\", "
        "sharding={devices=[4,1]<=[4]}")
    m = partitioned(text, 4)
    assert collectives(m) == ["all-reduce"]
    from spmd_helpers import run_partitioned

    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    got = run_partitioned(m, [x])[0]
    want = np.tile(x.reshape(4, 2, 3).sum(0), (4, 1)) * 2
    np.testing.assert_allclose(got, want)


def test_a_shard_map_without_operands_and_op_shardings_from_stablehlo():
    # a shard_map that takes nothing: its manual axes are read from LocalToGlobalShape; an
    # op's own sdy.sharding is its result sharding
    text = """module @m attributes {mhlo.num_partitions = 4 : i32} {
      sdy.mesh @mesh = <["i"=4]>
      func.func @main(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
        %0 = sdy.manual_computation() in_shardings=[] out_shardings=[<@mesh, [{"i"}, {}]>] manual_axes={"i"} () {
          %p = stablehlo.partition_id : tensor<ui32>
          %f = stablehlo.convert %p : (tensor<ui32>) -> tensor<f32>
          %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
          sdy.return %b : tensor<2x4xf32>
        } : () -> tensor<8x4xf32>
        %1 = stablehlo.add %0, %x {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"i"}]>]>} : tensor<8x4xf32>
        return %1 : tensor<8x4xf32>
      }
    }"""
    m = partitioned(text, 4)
    add = next(i for i in m.entry.instructions if i.opcode == "add")
    assert add.shape.dimensions == (8, 1)  # split by columns, as its sdy.sharding says
    from spmd_helpers import run_partitioned

    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    got = run_partitioned(m, [x])[0]
    np.testing.assert_array_equal(got, x + np.repeat(np.arange(4, dtype=np.float32), 2)[:, None])


# -- the pass as a whole -------------------------------------------------------------------------


def test_partition_counts():
    text = unary("f32[8,6]", T4, "negate(p)", "f32[8,6]")
    assert sharding_devices(parse_hlo_module(text)) == 4
    m = parse_hlo_module(text)
    partition(m)  # the devices the shardings name
    assert m.num_partitions == 4
    with pytest.raises(XlaError, match="name 4 devices, but it is partitioned for 2"):
        partition(parse_hlo_module(text), 2)


def test_one_partition_removes_the_shardings():
    text = module("  x = f32[8,3] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                  "  ROOT s = f32[8,3] custom-call(x), custom_call_target=\"Sharding\", "
                  "sharding={replicated}")
    m = parse_hlo_module(text)
    partition(m, 1)
    assert "custom-call" not in ops(m) and m.entry.parameters[0].sharding is None


def test_an_unknown_opcode_runs_whole():
    spd = np.eye(4, dtype=np.float32) * 4 + 1 + np.arange(8, dtype=np.float32)[:, None, None]
    m = check(module("  a = f32[8,4,4] parameter(0), sharding={devices=[4,1,1]<=[4]}\n"
                     "  ROOT c = f32[8,4,4] cholesky(a), lower=true, sharding={replicated}"), 4,
              args=[spd], rtol=1e-4)
    assert "all-gather" in collectives(m)


def test_per_device_module_is_ordinary_hlo():
    m = partitioned(unary("f32[8,6]", T4, "negate(p)", "f32[8,6]"), 4)
    text = m.to_string()
    assert "num_partitions=4" in text and "ENTRY %e_spmd" in text
    assert "sharding={devices=[4,1]<=[4]}" in text


# -- rng, transposes and reshapes that move the split, calls ------------------------------------


def test_replicated_rng_is_drawn_once_and_broadcast():
    text = module("  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
                  "  ROOT r = f32[8,3] rng(lo, hi), distribution=rng_uniform, "
                  "sharding={replicated}")
    m = check(text, 4, args=[])
    assert collectives(m) == ["all-reduce"]
    assert "partition-id" in ops(m) and "select" in ops(m)


def test_tiled_rng_blocks_are_the_one_device_values():
    m = check(module("  lo = s32[] constant(0)\n  hi = s32[] constant(100)\n"
                     "  ROOT r = s32[8,3] rng(lo, hi), distribution=rng_uniform, "
                     f"sharding={T4}"), 4, args=[])
    assert collectives(m) == []


def test_transpose_keeping_the_split_dimension_index_is_an_all_to_all():
    m = check(unary("f32[8,8]", T4, "transpose(p), dimensions={1,0}", "f32[8,8]", T4), 4)
    assert collectives(m) == ["all-to-all"]


def test_reshape_that_cannot_keep_the_split_reshards():
    m = check(unary("f32[4,8]", C4, "reshape(p)", "f32[32]", "{devices=[4]<=[4]}"), 4)
    assert collectives(m)
    m = check(unary("f32[8,6]", T4, "reshape(p)", "f32[2,24]", "{devices=[1,4]<=[4]}"), 4)
    assert collectives(m)


@pytest.mark.parametrize("shape,src,out,dst,expect", [
    # (XLA's collectives for each, from its post-partitioning modules for jax reshapes with
    # these in/out shardings on 4 devices)
    # f32[48] split 4 ways -> f32[6,8] by columns: pairs of tiles gathered (rows then split
    # 2 ways), an all-to-all in pairs moving that split into the columns, a permute
    ("f32[48]", "{devices=[4]<=[4]}", "f32[6,8]", C4,
     [("all-gather", (24,)), ("all-to-all", (2, 3, 2)), ("collective-permute", (6, 2))]),
    ("f32[48]", "{devices=[4]<=[4]}", "f32[2,24]", C4,
     [("all-to-all", (2, 1, 6)), ("collective-permute", (2, 6))]),
    # merges: the split moves to the major dimension first (all-to-all), then a local reshape
    ("f32[4,12]", C4, "f32[48]", "{devices=[4]<=[4]}", [("all-to-all", (4, 1, 3))]),
    ("f32[16,6]", T4, "f32[4,4,6]", "{devices=[1,4,1]<=[4]}", [("all-to-all", (4, 1, 1, 6))]),
    # split of the sharded dimension into major pieces: local
    ("f32[48]", "{devices=[4]<=[4]}", "f32[8,6]", T4, []),
    # 1.5 rows per tile: nothing carries over, XLA gathers it whole too
    ("f32[6,8]", C4, "f32[48]", "{devices=[4]<=[4]}", [("all-gather", (6, 8))]),
])
def test_reshape_of_a_split_dimension(shape, src, out, dst, expect):
    m = check(unary(shape, src, "reshape(p)", out, dst), 4)
    got = [(i.opcode, i.shape.dimensions) for c in m.computations for i in c.instructions
           if i.opcode in ("all-gather", "all-to-all", "collective-permute", "all-reduce")]
    assert got == expect


def test_a_tiling_of_a_minor_dimension_is_not_contiguous_in_the_flat_view():
    # [4,8] split on columns holds strided elements of the flat [32]: no local reshape to
    # [2,16] carries it (a reshape that did gave other devices' elements)
    from xlapy.hlo.attrs.sharding import parse_sharding
    from xlapy.passes.spmd.device_map import device_map, reshape_map

    cols = device_map(parse_sharding(C4), 2, 4)
    assert reshape_map(cols, (4, 8), (32,)) is None
    assert reshape_map(cols, (4, 8), (2, 16)) is None
    assert reshape_map(cols, (1, 8), (8,)).tiles == (4,)
    check(unary("f32[4,8]", C4, "reshape(p)", "f32[2,16]",
                "{devices=[1,2,2]<=[4] last_tile_dim_replicate}"), 4)


def test_calls_are_inlined_and_partitioned():
    comps = ADD + MAX + """
scale {
  x = f32[8,6] parameter(0)
  two = f32[] constant(2)
  b = f32[8,6] broadcast(two), dimensions={}
  ROOT m = f32[8,6] multiply(x, b)
}
"""
    m = check(module(f"  p = f32[8,6] parameter(0), sharding={T4}\n"
                     f"  ROOT c = f32[8,6] call(p), to_apply=scale, sharding={T4}",
                     comps), 4)
    assert "call" not in ops(m) and collectives(m) == []
    assert m.entry.root.shape.dimensions == (2, 6)


def test_every_elementwise_opcode_is_partitioned_as_elementwise(monkeypatch):
    """The elementwise handler covers every opcode whose definition has the ELEMENTWISE trait
    (and copy, map), read from the op definitions: a new elementwise op needs nothing here."""
    from xlapy.opdefs import REGISTRY, all_opdefs
    from xlapy.opdefs.registry import ELEMENTWISE, OpDef
    from xlapy.passes.spmd import handlers_shape
    from xlapy.passes.spmd.partitioner import HANDLERS

    traits = [o for o, d in all_opdefs().items() if d.has(ELEMENTWISE)]
    assert len(traits) > 50
    for opcode in traits + ["copy", "map"]:
        assert HANDLERS[opcode] is handlers_shape.elementwise, opcode
    new = OpDef("frobnicate", shape_rule=None, traits=frozenset({ELEMENTWISE}))
    monkeypatch.setitem(REGISTRY, "frobnicate", new)
    assert "frobnicate" in handlers_shape.elementwise_opcodes()
