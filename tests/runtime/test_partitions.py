"""Partitions (SPMD modules): replicas x partitions devices, execute's logical order
(entry r * P + p, PJRT's), XLA's default device assignment (device p * R + r), and the
devices each collective spans in the four group modes (cross_replica without channel_id,
cross_partition for all-to-all / collective-permute / collective-broadcast with channel_id,
cross_replica_and_partition for all-reduce with channel_id, flattened ids with
use_global_device_ids=true), as jax's shard_map writes them."""

import numpy as np
import pytest
from runtime_helpers import f32, hlo, run, same

from xlapy import InvalidArgumentError
from xlapy.runtime import Client, default_device_assignment

R, P = 2, 2
DEVICES = [(r, p) for r in range(R) for p in range(P)]  # execute's order


def per_device(make):
    return [[make(r, p)] for r, p in DEVICES]


def test_ids_order_and_device_assignment():
    text = hlo("  r = u32[] replica-id()\n  p = u32[] partition-id()\n"
               "  ROOT t = (u32[], u32[]) tuple(r, p)")
    exe = Client().compile(text, replicas=R, partitions=P)
    got = exe.execute([[] for _ in DEVICES])
    assert [(int(a), int(b)) for a, b in got] == DEVICES
    # XLA's ComputationPlacer: replica r, partition p on device p * R + r.
    assert exe.device_assignment == ((0, 2), (1, 3))
    assert [d.id for d in exe.devices] == [0, 2, 1, 3]
    assert default_device_assignment(3, 2) == ((0, 3), (1, 4), (2, 5))


def test_counts_default_to_the_module_header():
    text = hlo("  ROOT p = u32[] partition-id()", header=", replica_count=1, num_partitions=4")
    exe = Client().compile(text)
    assert (exe.num_replicas, exe.num_partitions) == (1, 4)
    assert [int(g) for g in exe.execute([[]] * 4)] == [0, 1, 2, 3]


def test_cross_replica_all_reduce_keeps_the_partition():
    # No channel_id: replica ids; each partition reduces over the replicas on its own.
    text = hlo("  x = f32[] parameter(0)\n"
               "  ROOT s = f32[] all-reduce(x), replica_groups={}, to_apply=add")
    got = run(text, per_device(lambda r, p: np.float32(10 ** (2 * p + r))), replicas=R,
              partitions=P)
    assert [float(g) for g in got] == [11.0, 1100.0, 11.0, 1100.0]


@pytest.mark.parametrize("groups, want", [
    # every replica with every partition
    ("{}", [1111.0] * 4),
    # {0} and {1}: each replica with all its partitions
    ("{{0},{1}}", [101.0, 101.0, 1010.0, 1010.0]),
])
def test_cross_replica_and_partition_all_reduce(groups, want):
    # channel_id without use_global_device_ids: replica ids, each with every partition.
    text = hlo("  x = f32[] parameter(0)\n"
               f"  ROOT s = f32[] all-reduce(x), channel_id=1, replica_groups={groups}, "
               "to_apply=add")
    got = run(text, per_device(lambda r, p: np.float32(10 ** (2 * p + r))), replicas=R,
              partitions=P)
    assert [float(g) for g in got] == want


@pytest.mark.parametrize("groups", ["{{0,3},{1,2}}", "[2,2]<=[2,2]T(1,0)"])
def test_flattened_id_all_reduce(groups):
    # use_global_device_ids=true: ids r * P + p. {{0,3},{1,2}}: (0,0)+(1,1), (0,1)+(1,0).
    # The iota form is {{0,2},{1,3}}: (0,0)+(1,0), (0,1)+(1,1).
    text = hlo("  x = f32[] parameter(0)\n"
               f"  ROOT s = f32[] all-reduce(x), channel_id=1, replica_groups={groups}, "
               "use_global_device_ids=true, to_apply=add")
    values = per_device(lambda r, p: np.float32(10 ** (r * P + p)))  # 1, 10, 100, 1000
    got = [float(g) for g in run(text, values, replicas=R, partitions=P)]
    if groups.startswith("{{"):
        assert got == [1001.0, 110.0, 110.0, 1001.0]
    else:
        assert got == [101.0, 1010.0, 101.0, 1010.0]


def test_shard_map_all_gather_over_partitions():
    # What jax's shard_map writes: num_partitions in the header, channel_id=1,
    # use_global_device_ids=true, the partition id used to pick data.
    text = hlo("  x = f32[2] parameter(0)\n  p = u32[] partition-id()\n"
               "  pf = f32[] convert(p)\n  b = f32[2] broadcast(pf), dimensions={}\n"
               "  y = f32[2] add(x, b)\n"
               "  ROOT g = f32[8] all-gather(y), channel_id=1, replica_groups={{0,1,2,3}}, "
               "use_global_device_ids=true, dimensions={0}",
               comps="", header=", num_partitions=4")
    got = Client(timeout=5).compile(text).execute([[f32(0, 10)] for _ in range(4)])
    for g in got:
        same(g, f32(0, 10, 1, 11, 2, 12, 3, 13))


def test_all_to_all_with_channel_id_spans_partitions():
    text = hlo("  x = s32[2] parameter(0)\n"
               "  ROOT a = s32[2] all-to-all(x), channel_id=1, replica_groups={{0,1}}, "
               "dimensions={0}", comps="")
    got = run(text, per_device(lambda r, p: np.array([100 * r + 10 * p, 100 * r + 10 * p + 1],
                                                    np.int32)), replicas=R, partitions=P)
    same(got[0], np.array([0, 10], np.int32))      # replica 0 partition 0
    same(got[1], np.array([1, 11], np.int32))      # replica 0 partition 1
    same(got[2], np.array([100, 110], np.int32))   # replica 1 partition 0
    same(got[3], np.array([101, 111], np.int32))   # replica 1 partition 1


def test_collective_permute_with_channel_id_names_partitions():
    text = hlo("  x = f32[] parameter(0)\n"
               "  ROOT c = f32[] collective-permute(x), channel_id=1, "
               "source_target_pairs={{0,1}}", comps="")
    got = run(text, per_device(lambda r, p: np.float32(1 + 10 * r + p)), replicas=R,
              partitions=P)
    # within each replica partition 0 -> 1; partition 0 has no source: zeros
    assert [float(g) for g in got] == [0.0, 1.0, 0.0, 11.0]


def test_collective_broadcast_with_channel_id_spans_partitions():
    text = hlo("  x = f32[] parameter(0)\n"
               "  ROOT b = f32[] collective-broadcast(x), channel_id=1, replica_groups={{1,0}}",
               comps="")
    got = run(text, per_device(lambda r, p: np.float32(10 * r + p)), replicas=R, partitions=P)
    assert [float(g) for g in got] == [1.0, 1.0, 11.0, 11.0]


def test_reduce_scatter_over_flattened_ids():
    text = hlo("  x = f32[4] parameter(0)\n"
               "  ROOT r = f32[1] reduce-scatter(x), channel_id=1, replica_groups={{0,1,2,3}}, "
               "use_global_device_ids=true, dimensions={0}, to_apply=add")
    got = run(text, per_device(lambda r, p: f32(1, 2, 3, 4) * (r * P + p + 1)), replicas=R,
              partitions=P)
    # sum = [10, 20, 30, 40]; member i keeps block i
    assert [float(g[0]) for g in got] == [10.0, 20.0, 30.0, 40.0]


def test_groups_must_cover_the_partitions():
    text = hlo("  x = f32[] parameter(0)\n"
               "  ROOT a = f32[] all-reduce(x), channel_id=1, replica_groups={{0,1}}, "
               "use_global_device_ids=true, to_apply=add")
    with pytest.raises(InvalidArgumentError, match=r"name 2 flattened device ids "
                       r"\(flattened_id mode\), but the executable runs 2 replica\(s\) x 2 "
                       r"partition\(s\), i.e. 4 flattened device ids"):
        Client().compile(text, replicas=2, partitions=2)


def test_execute_wants_one_list_per_device():
    exe = Client().compile(hlo("  ROOT p = u32[] partition-id()", comps=""), partitions=2)
    with pytest.raises(InvalidArgumentError, match=r"expected one argument list per device "
                       r"\(2: 1 replicas x 2 partitions\), got 1"):
        exe.execute([[]])
    with pytest.raises(InvalidArgumentError, match="runs on 2 devices"):
        exe()
