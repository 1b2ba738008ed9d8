"""Collectives in the interpreter: the single-replica meaning of every collective (a group
of one: all-reduce applies the reducer to one contribution, i.e. gives the value itself,
for tuple operands too; all-gather / reduce-scatter / all-to-all have one shard;
collective-permute copies on a (0,0) pair and gives zeros without a source;
collective-broadcast's root is the caller), the -start/-done forms, replica-id and
partition-id, the error for groups naming other replicas, and the pluggable backend
(ctx.options.collectives): a small threaded backend written here runs the spec's
two-replica examples of AllReduce, AllGather and ReduceScatter."""

import threading

import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_same, run, sample

from xlapy.interpreter import EvalOptions, EvaluationError, evaluate
from xlapy.interpreter.collectives_backend import CollectivesBackend, collective_group
from xlapy.parser import parse_hlo_module


def module(root_line: str, params: str, comps: str = "", header: str = "") -> str:
    return f"""
HloModule m{header}
{comps}
ENTRY e {{
{params}
  {root_line}
}}
"""


ADD = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""


def add_of(type_name: str) -> str:
    return ADD.replace("f32", type_name)


# -- all-reduce ---------------------------------------------------------------------------------


@pytest.mark.parametrize("groups", ["{}", "{{0}}"])
def test_all_reduce_single_replica_is_the_value(groups):
    # Spec: the reduction over one replica's contribution; the result has the input's shape.
    text = module(f"ROOT r = f32[2] all-reduce(x), replica_groups={groups}, to_apply=add",
                  "  x = f32[2] parameter(0)", ADD)
    x = np.array([1.0, 2.5], np.float32)
    assert_same(run(text, x), x)


@pytest.mark.parametrize("type_name", [t for t in ALL_TYPES if t not in ("pred", "s1", "u1")])
def test_all_reduce_every_type(type_name):
    text = module(f"ROOT r = {type_name}[3] all-reduce(x), replica_groups={{}}, to_apply=add",
                  f"  x = {type_name}[3] parameter(0)", add_of(type_name))
    x = sample(type_name, (3,))
    assert_same(run(text, x), x)


def test_all_reduce_tuple_operands_flattened_ids():
    # Several operands reduce each; channel_id + use_global_device_ids (jax's shard_map).
    text = module("ROOT r = (f32[2], f32[3]) all-reduce(x, y), channel_id=1, "
                  "replica_groups={{0}}, use_global_device_ids=true, to_apply=add",
                  "  x = f32[2] parameter(0)\n  y = f32[3] parameter(1)", ADD)
    x, y = np.array([1, 2], np.float32), np.array([3, 4, 5], np.float32)
    gx, gy = run(text, x, y)
    assert_same(gx, x)
    assert_same(gy, y)


def test_all_reduce_start_done():
    text = module("ROOT d = f32[2] all-reduce-done(s)",
                  "  x = f32[2] parameter(0)\n"
                  "  s = f32[2] all-reduce-start(x), replica_groups={}, to_apply=add", ADD)
    x = np.array([7, 8], np.float32)
    assert_same(run(text, x), x)


def test_all_reduce_with_other_replicas_needs_the_runtime():
    text = module("ROOT r = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add",
                  "  x = f32[2] parameter(0)", ADD)
    with pytest.raises(EvaluationError, match=r"all-reduce needs replicas \{0,1\}; run with the "
                                              r"runtime \(xlapy.Client\) for multi-replica "
                                              r"execution"):
        run(text, np.zeros(2, np.float32))


def test_empty_groups_mean_every_replica_of_the_module():
    text = module("ROOT r = f32[2] all-reduce(x), replica_groups={}, to_apply=add",
                  "  x = f32[2] parameter(0)", ADD, header=", replica_count=4")
    with pytest.raises(EvaluationError, match=r"all-reduce needs replicas \{0,1,2,3\}"):
        run(text, np.zeros(2, np.float32))


def test_caller_outside_every_group():
    text = module("ROOT r = f32[2] all-reduce(x), replica_groups={{0},{1}}, to_apply=add",
                  "  x = f32[2] parameter(0)", ADD)
    with pytest.raises(EvaluationError, match=r"replica 5 is in no replica group of "
                                              r"replica_groups=\{\{0\},\{1\}\}"):
        evaluate(parse_hlo_module(text), np.zeros(2, np.float32), replica_id=5)


# -- all-gather, reduce-scatter, all-to-all ------------------------------------------------------


def test_all_gather_single_replica():
    text = module("ROOT g = f32[1,2] all-gather(x), replica_groups={{0}}, dimensions={0}",
                  "  x = f32[1,2] parameter(0)")
    x = np.array([[1.0, 2.5]], np.float32)
    assert_same(run(text, x), x)


def test_all_gather_start_done():
    text = module("ROOT d = f32[2,2] all-gather-done(s)",
                  "  x = f32[2,2] parameter(0)\n"
                  "  s = (f32[2,2], f32[2,2]) all-gather-start(x), replica_groups={}, "
                  "dimensions={1}")
    x = np.array([[1, 2], [3, 4]], np.float32)
    assert_same(run(text, x), x)


def test_reduce_scatter_single_replica():
    text = module("ROOT r = f32[4] reduce-scatter(x), replica_groups={}, dimensions={0}, "
                  "to_apply=add", "  x = f32[4] parameter(0)", ADD)
    x = np.array([1, 2.25, 3, 5.25], np.float32)
    assert_same(run(text, x), x)


def test_all_to_all_array_and_tuple_forms():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    text = module("ROOT a = s32[2,3] all-to-all(x), replica_groups={{0}}, dimensions={1}",
                  "  x = s32[2,3] parameter(0)")
    assert_same(run(text, x), x)
    text = module("ROOT a = (s32[2,3]) all-to-all(x), replica_groups={{0}}",
                  "  x = s32[2,3] parameter(0)")
    (got,) = run(text, x)
    assert_same(got, x)


def test_ragged_all_to_all_single_replica_copies_its_rows():
    # Rows input[1:3] go to output rows 2..3 of the same (only) replica.
    text = module("ROOT r = f32[5,2] ragged-all-to-all(inp, out, io, ss, oo, rs), "
                  "replica_groups={{0}}",
                  "  inp = f32[4,2] parameter(0)\n  out = f32[5,2] parameter(1)\n"
                  "  io = s64[1] parameter(2)\n  ss = s64[1] parameter(3)\n"
                  "  oo = s64[1] parameter(4)\n  rs = s64[1] parameter(5)")
    inp = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = np.full((5, 2), -1, np.float32)
    got = run(text, inp, out, np.array([1]), np.array([2]), np.array([2]), np.array([2]))
    want = out.copy()
    want[2:4] = inp[1:3]
    assert_same(got, want)


# -- collective-permute, collective-broadcast -----------------------------------------------------


def test_collective_permute_self_pair_copies():
    text = module("ROOT p = f32[2] collective-permute(x), channel_id=1, "
                  "source_target_pairs={{0,0}}", "  x = f32[2] parameter(0)")
    x = np.array([3, 4], np.float32)
    assert_same(run(text, x), x)


def test_collective_permute_without_source_gives_zeros():
    # Spec: "If a replica id is not a target in any pair, then the output on that replica
    # is a tensor consisting of 0(s) with the same shape as the input."
    text = module("ROOT p = s32[3] collective-permute(x), source_target_pairs={}",
                  "  x = s32[3] parameter(0)")
    assert_same(run(text, np.array([5, 6, 7], np.int32)), np.zeros(3, np.int32))


def test_collective_permute_to_another_replica_needs_the_runtime():
    text = module("ROOT p = f32[2] collective-permute(x), source_target_pairs={{0,1},{1,0}}",
                  "  x = f32[2] parameter(0)")
    with pytest.raises(EvaluationError, match=r"collective-permute needs replicas \{0,1\}"):
        run(text, np.zeros(2, np.float32))


def test_collective_permute_in_place_form():
    # (input, output, input offsets, output offsets) with slice_sizes: the 2x2 slice of the
    # input at (1, 0) lands in the output at (2, 0) on the target (here the caller).
    text = module("ROOT p = f32[4,2] collective-permute(inp, out, io, oo), "
                  "source_target_pairs={{0,0}}, slice_sizes={{2,2}}",
                  "  inp = f32[4,2] parameter(0)\n  out = f32[4,2] parameter(1)\n"
                  "  z = s32[] constant(0)\n  one = s32[] constant(1)\n"
                  "  two = s32[] constant(2)\n  io = (s32[], s32[]) tuple(one, z)\n"
                  "  oo = (s32[], s32[]) tuple(two, z)")
    inp = np.arange(8, dtype=np.float32).reshape(4, 2)
    got = run(text, inp, np.full((4, 2), -1, np.float32))
    assert_same(got, np.array([[-1, -1], [-1, -1], [2, 3], [4, 5]], np.float32))


def test_collective_permute_start_done():
    text = module("ROOT d = f32[2] collective-permute-done(s)",
                  "  x = f32[2] parameter(0)\n"
                  "  s = (f32[2], f32[2]) collective-permute-start(x), "
                  "source_target_pairs={{0,0}}")
    x = np.array([1, -1], np.float32)
    assert_same(run(text, x), x)


def test_collective_broadcast_single_replica():
    text = module("ROOT b = f32[2] collective-broadcast(x), replica_groups={{0}}",
                  "  x = f32[2] parameter(0)")
    x = np.array([9, 8], np.float32)
    assert_same(run(text, x), x)


def test_collective_broadcast_outside_every_group_gives_zeros():
    # XLA (CreateCollectiveBroadcast): "If a replica id is not a in any replica group, the
    # output on that replica is a tensor consists of 0(s)".
    text = module("ROOT b = f32[2] collective-broadcast(x), replica_groups={{0},{1},{2}}",
                  "  x = f32[2] parameter(0)")
    got = evaluate(parse_hlo_module(text), np.array([9, 8], np.float32), replica_id=3)
    assert_same(got, np.zeros(2, np.float32))


# -- ids ----------------------------------------------------------------------------------------


def test_replica_and_partition_ids():
    text = module("ROOT t = (u32[], u32[]) tuple(r, p)",
                  "  r = u32[] replica-id()\n  p = u32[] partition-id()")
    r, p = run(text)
    assert_same(r, np.uint32(0))
    assert_same(p, np.uint32(0))
    r, p = evaluate(parse_hlo_module(text), replica_id=3, partition_id=5)
    assert_same(r, np.uint32(3))
    assert_same(p, np.uint32(5))


# -- a pluggable backend --------------------------------------------------------------------------


class ThreadedBackend(CollectivesBackend):
    """Replicas as threads: each deposits its values at its rank and waits for the
    group, then computes its own result (enough for the spec's examples)."""

    def __init__(self, size: int):
        self.barrier = threading.Barrier(size)
        self.lock = threading.Lock()
        self.slots: dict = {}

    def _exchange(self, group, values):
        with self.lock:
            self.slots.setdefault(group.key, [None] * group.size)[group.rank] = values
        self.barrier.wait()
        everyone = list(self.slots[group.key])
        self.barrier.wait()
        return everyone

    def all_reduce(self, ctx, instr, values, group, reducer):
        everyone = self._exchange(group, values)
        out = []
        for i in range(len(values)):
            acc = everyone[0][i]
            for other in everyone[1:]:
                acc = ctx.call(reducer, [acc, other[i]])  # elementwise on whole arrays
            out.append(acc)
        return out

    def all_gather(self, ctx, instr, values, group, dimension):
        everyone = self._exchange(group, values)
        return [np.concatenate([v[i] for v in everyone], axis=dimension)
                for i in range(len(values))]

    def reduce_scatter(self, ctx, instr, values, group, dimension, reducer):
        reduced = self.all_reduce(ctx, instr, values, group, reducer)
        return [np.array_split(r, group.size, axis=dimension)[group.rank] for r in reduced]


def run_replicas(text: str, inputs: list) -> list:
    backend = ThreadedBackend(len(inputs))
    results: list = [None] * len(inputs)
    errors: list = []

    def replica(i):
        try:
            results[i] = evaluate(parse_hlo_module(text), inputs[i], options=EvalOptions(
                replica_id=i, replica_count=len(inputs), collectives=backend, timeout=10))
        except Exception as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    if errors:
        raise errors[0]
    return results


def test_spec_all_reduce_two_replicas_through_a_backend():
    # Spec: [1.0, 2.5] and [3.0, 5.25] summed over two replicas give [4.0, 7.75] on both.
    text = module("ROOT r = f32[2] all-reduce(x), replica_groups={}, to_apply=add",
                  "  x = f32[2] parameter(0)", ADD)
    got = run_replicas(text, [np.array([1.0, 2.5], np.float32), np.array([3.0, 5.25], np.float32)])
    for g in got:
        assert_same(g, np.array([4.0, 7.75], np.float32))


def test_spec_all_gather_two_replicas_through_a_backend():
    # Spec: [1.0, 2.5] and [3.0, 5.25] gathered along 0 give [1.0, 2.5, 3.0, 5.25].
    text = module("ROOT g = f32[4] all-gather(x), replica_groups={}, dimensions={0}",
                  "  x = f32[2] parameter(0)")
    got = run_replicas(text, [np.array([1.0, 2.5], np.float32), np.array([3.0, 5.25], np.float32)])
    for g in got:
        assert_same(g, np.array([1.0, 2.5, 3.0, 5.25], np.float32))


def test_spec_reduce_scatter_two_replicas_through_a_backend():
    # Spec: [1.0, 2.25] and [3.0, 5.25] give [4.0] on replica 0 and [7.5] on replica 1.
    text = module("ROOT r = f32[1] reduce-scatter(x), replica_groups={}, dimensions={0}, "
                  "to_apply=add", "  x = f32[2] parameter(0)", ADD)
    got = run_replicas(text, [np.array([1.0, 2.25], np.float32), np.array([3.0, 5.25], np.float32)])
    assert_same(got[0], np.array([4.0], np.float32))
    assert_same(got[1], np.array([7.5], np.float32))


@pytest.mark.parametrize("op, replica, partition, want", [
    # cross_replica: replica ids, the caller's partition.
    ("all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add", 2, 1, ((2, 1), (3, 1))),
    # cross_partition (channel_id on an op without use_global_device_ids): partition ids.
    ("collective-broadcast(x), channel_id=1, replica_groups={{1,0}}", 1, 0, ((1, 1), (1, 0))),
    # cross_replica_and_partition: each replica with every partition.
    ("all-reduce(x), channel_id=1, replica_groups={{0,1},{2,3}}, to_apply=add", 1, 1,
     ((0, 0), (0, 1), (1, 0), (1, 1))),
    # flattened ids: replica * num_partitions + partition.
    ("all-reduce(x), channel_id=1, replica_groups={{3,0},{1,2}}, use_global_device_ids=true,"
     + " to_apply=add", 1, 1, ((1, 1), (0, 0))),
])
def test_group_modes_resolve_devices(op, replica, partition, want):
    text = module(f"ROOT r = f32[2] {op}", "  x = f32[2] parameter(0)", ADD,
                  header=", replica_count=4, num_partitions=2")
    parsed = parse_hlo_module(text)

    class Ctx:
        module = parsed
        options = EvalOptions(replica_id=replica, partition_id=partition)

    group = collective_group(Ctx, parsed.entry.root)
    assert group.devices == want
    assert group.me == (replica, partition)
