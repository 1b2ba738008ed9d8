"""Resharding between shardings (xlapy/passes/spmd/reshard.py), through ``Sharding`` custom
calls in hand-written GSPMD modules: every path gives the unpartitioned module's values on
every device, and emits the collectives XLA emits for it (none for a refinement - a local
dynamic-slice -, collective-permute for the same tiles elsewhere, all-to-all when a
dimension's tiling moves, all-gather otherwise), uneven shards included."""

import numpy as np
import pytest
from spmd_helpers import check, collectives, module, ops


def reshard(shape: str, src: str, dst: str) -> str:
    return module(f"  p = {shape} parameter(0), sharding={src}\n"
                  f"  ROOT r = {shape} custom-call(p), custom_call_target=\"Sharding\", "
                  f"sharding={dst}")


@pytest.mark.parametrize("shape,src,dst,n,expect", [
    # replicated -> tiled: each device slices its own block
    ("f32[8,6]", "{replicated}", "{devices=[4,1]<=[4]}", 4, []),
    ("f32[8,6]", "{replicated}", "{devices=[2,2]0,3,1,2}", 4, []),
    # tiled -> replicated: all-gather
    ("f32[8,6]", "{devices=[4,1]<=[4]}", "{replicated}", 4, ["all-gather"]),
    ("f32[8,6]", "{devices=[2,2]<=[4]}", "{replicated}", 4, ["all-gather", "all-gather"]),
    # the same tiles on other devices: collective-permute
    ("f32[8,6]", "{devices=[4,1]<=[4]}", "{devices=[4,1]3,2,1,0}", 4, ["collective-permute"]),
    ("f32[8,6]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
     "{devices=[2,1,2]2,3,0,1 last_tile_dim_replicate}", 4, ["collective-permute"]),
    # the tiling moves from one dimension to another: all-to-all
    ("f32[8,8]", "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}", 4, ["all-to-all"]),
    ("f32[2,8,4]", "{devices=[1,1,4]<=[4]}", "{devices=[1,4,1]<=[4]}", 4, ["all-to-all"]),
    # x,y -> None,x: all-gather y, then all-to-all x (as XLA does)
    ("f32[8,8]", "{devices=[4,2]<=[8]}", "{devices=[1,4,2]<=[8] last_tile_dim_replicate}", 8,
     ["all-gather", "all-to-all"]),
    # finer -> coarser along a dimension: all-gather of pairs only
    ("f32[8,6]", "{devices=[4,1]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 4,
     ["all-gather"]),
    # coarser -> finer: a local slice
    ("f32[8,6]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{devices=[4,1]<=[4]}", 4,
     []),
    # uneven shards: 10 rows in 4 tiles of 3 (the last holds one row and padding)
    ("f32[10,3]", "{devices=[4,1]<=[4]}", "{replicated}", 4, ["all-gather"]),
    ("f32[10,3]", "{replicated}", "{devices=[4,1]<=[4]}", 4, []),
    ("f32[10,6]", "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}", 4, ["all-to-all"]),
    ("f32[7,5]", "{devices=[2,2]<=[4]}", "{devices=[2,2]<=[2,2]T(1,0)}", 4,
     ["collective-permute"]),
    ("f32[7,5]", "{devices=[2,2]<=[4]}", "{devices=[4,1]<=[4]}", 4, None),
    ("s32[9]", "{devices=[3]<=[3]}", "{devices=[3]2,0,1}", 3, ["collective-permute"]),
])
def test_reshard_paths(shape, src, dst, n, expect):
    m = check(reshard(shape, src, dst), n)
    if expect is not None:
        assert collectives(m) == expect


def test_refinement_slices_with_partition_id_offsets():
    m = check(reshard("f32[8,6]", "{replicated}", "{devices=[4,1]<=[4]}"), 4)
    assert "partition-id" in ops(m) and "dynamic-slice" in ops(m)
    # the per-device parameter is whole, the result a quarter
    assert m.entry.parameters[0].shape.dimensions == (8, 6)
    assert m.entry.root.shape.dimensions == (2, 6)


def test_all_to_all_is_xlas_reshape_transpose_form():
    m = check(reshard("f32[8,8]", "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}"), 4)
    a2a = next(i for i in m.entry.instructions if i.opcode == "all-to-all")
    assert a2a.attrs["dimensions"] == 0
    assert a2a.attrs["replica_groups"].to_text() == "[1,4]<=[4]"
    assert a2a.shape.dimensions == (4, 2, 2)


def test_replicas_times_partitions():
    # two replicas of two partitions: groups are expanded over replicas (global ids)
    text = reshard("f32[4,2]", "{devices=[2,1]<=[2]}", "{replicated}")
    m = check(text, 2, replicas=2)
    ag = next(i for i in m.entry.instructions if i.opcode == "all-gather")
    assert ag.attrs["use_global_device_ids"] is True
    assert [list(g) for g in ag.attrs["replica_groups"].expand().groups] == [[0, 1], [2, 3]]


def test_channel_ids_count_up_from_the_modules_largest():
    text = module(
        "  p = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n"
        "  a = f32[8] all-reduce(p), channel_id=7, replica_groups={{0,1,2,3}}, "
        "use_global_device_ids=true, to_apply=add, sharding={devices=[4]<=[4]}\n"
        "  ROOT r = f32[8] custom-call(a), custom_call_target=\"Sharding\", "
        "sharding={replicated}")
    from spmd_helpers import partitioned

    m = partitioned(text, 4)
    new = [i.attrs["channel_id"] for i in m.entry.instructions if i.opcode == "all-gather"]
    assert new and min(new) == 8 and len(set(new)) == len(new)


def test_values_exact_for_integers():
    args = [np.arange(24, dtype=np.int32).reshape(6, 4)]
    check(reshard("s32[6,4]", "{devices=[2,2]<=[4]}", "{devices=[1,4]3,1,2,0}"), 4, args)


def described(m) -> list:
    """Each collective with its result shape and its device groups (or pairs)."""
    out = []
    for comp in m.computations:
        for i in comp.instructions:
            if i.opcode in ("all-reduce", "all-gather", "all-to-all", "collective-permute",
                            "reduce-scatter"):
                groups = i.attrs.get("source_target_pairs") or tuple(
                    tuple(g) for g in i.attrs["replica_groups"].flattened_replica_groups())
                out.append((i.opcode, i.shape.dimensions, tuple(groups)))
    return out


ROWS2 = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"
SWAP = ((0, 0), (1, 2), (2, 1), (3, 3))


@pytest.mark.parametrize("src,dst,expect", [
    # (XLA's collectives for these, read from its post-partitioning modules for jax's
    # in/out shardings on a 2x2 mesh: P("x", None) -> P(None, ("x", "y")) and the like)
    # rows split 2 ways (replicated 2) -> columns 4 ways: each device's replica half of the
    # columns, an all-to-all in pairs, and a collective-permute into the target's order
    (ROWS2, "{devices=[1,4]<=[4]}",
     [("all-to-all", (2, 4, 2), ((0, 2), (1, 3))), ("collective-permute", (8, 2), SWAP)]),
    # ... no permute when the all-to-all's order is the target's
    (ROWS2, "{devices=[1,4]<=[2,2]T(1,0)}", [("all-to-all", (2, 4, 2), ((0, 2), (1, 3)))]),
    # rows 4 ways -> columns 4 ways in another order
    ("{devices=[4,1]<=[4]}", "{devices=[1,4]<=[2,2]T(1,0)}",
     [("all-to-all", (4, 2, 2), ((0, 1, 2, 3),)), ("collective-permute", (8, 2), SWAP)]),
    # columns 2 ways (replicated 2) -> rows 4 ways
    ("{devices=[1,2,2]<=[4] last_tile_dim_replicate}", "{devices=[4,1]<=[4]}",
     [("all-to-all", (2, 2, 4), ((0, 2), (1, 3))), ("collective-permute", (2, 8), SWAP)]),
])
def test_a_partially_replicated_tiling_moves_by_all_to_all_and_permute(src, dst, expect):
    m = check(reshard("f32[8,8]", src, dst), 4)
    assert described(m) == expect
