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
    # spatial dimensions split: gathered (halo exchange is not built)
    check(module("  x = f32[2,8,6,3] parameter(0), sharding={devices=[1,4,1,1]<=[4]}\n"
                 "  k = f32[3,3,3,5] parameter(1), sharding={replicated}\n"
                 "  ROOT c = f32[2,8,6,5] convolution(x, k), window={size=3x3 pad=1_1x1_1}, "
                 "dim_labels=b01f_01io->b01f, sharding={devices=[1,4,1,1]<=[4]}"), 4)


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
