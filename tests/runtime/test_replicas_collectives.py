"""Replicas as threads with ThreadedCollectives: every collective on several replicas, with
list and iota replica groups, the spec page's worked examples (AllReduce, AllGather,
ReduceScatter, AllToAll), the behaviour doc's rules (replica_groups={} is every replica,
all-to-all concatenates in group order, collective-permute gives zeros without a source),
collectives in a loop (one rendezvous per iteration), the -start/-done forms, and the
compile-time checks of replica groups (uneven, incomplete, repeated, out of range)."""

import numpy as np
import pytest
from runtime_helpers import ADD, f32, hlo, run, same

from xlapy import InvalidArgumentError, ParseError, XlaBuilder, ops, parse_shape
from xlapy.runtime import Client

TWO = [[f32(1.0, 2.5)], [f32(3.0, 5.25)]]


def by_replica(n, make):
    return [[make(r)] for r in range(n)]


# -- all-reduce ---------------------------------------------------------------------------------


def test_spec_all_reduce_example():
    # Spec: [1.0, 2.5] and [3.0, 5.25] with the add computation give [4.0, 7.75] on both.
    text = hlo("  x = f32[2] parameter(0)\n"
               "  ROOT r = f32[2] all-reduce(x), replica_groups={}, to_apply=add")
    for got in run(text, TWO, replicas=2):
        same(got, f32(4.0, 7.75))


@pytest.mark.parametrize("groups", ["{{0,2},{1,3}}", "[2,2]<=[2,2]T(1,0)"])
def test_all_reduce_groups_list_and_iota(groups):
    # Both spellings are the groups {0,2} and {1,3}.
    text = hlo("  x = f32[2] parameter(0)\n"
               f"  ROOT r = f32[2] all-reduce(x), replica_groups={groups}, to_apply=add")
    got = run(text, by_replica(4, lambda r: f32(r, 10 * r)), replicas=4)
    for r in (0, 2):
        same(got[r], f32(2, 20))
    for r in (1, 3):
        same(got[r], f32(4, 40))


def test_all_reduce_iota_groups_without_transpose():
    # [2,2]<=[4] is {{0,1},{2,3}}.
    text = hlo("  x = s32[] parameter(0)\n"
               "  ROOT r = s32[] all-reduce(x), replica_groups=[2,2]<=[4], to_apply=add",
               ADD.replace("f32", "s32"))
    got = run(text, by_replica(4, lambda r: np.int32(1 << r)), replicas=4)
    assert [int(g) for g in got] == [3, 3, 12, 12]


def test_all_reduce_uneven_groups_are_allowed():
    # XLA lets all-reduce (only) have groups of different sizes.
    text = hlo("  x = f32[1] parameter(0)\n"
               "  ROOT r = f32[1] all-reduce(x), replica_groups={{0,1},{2}}, to_apply=add")
    got = run(text, by_replica(3, lambda r: f32(r + 1)), replicas=3)
    assert [float(g[0]) for g in got] == [3.0, 3.0, 3.0]


def test_all_reduce_tuple_operands_and_max():
    # Each operand is reduced on its own with the one (scalar) computation.
    comps = ADD.replace("add {", "mx {").replace("add(x, y)", "maximum(x, y)")
    text = hlo("  x = f32[2] parameter(0)\n  y = f32[3] parameter(1)\n"
               "  ROOT r = (f32[2], f32[3]) all-reduce(x, y), replica_groups={}, to_apply=mx",
               comps)
    inputs = [[f32(1, 9), f32(5, -1, 2)], [f32(4, 2), f32(0, 7, 2)]]
    for x, y in run(text, inputs, replicas=2):
        same(x, f32(4, 9))
        same(y, f32(5, 7, 2))


def test_all_reduce_folds_in_group_order():
    # Members are combined in group order: group {2,0,1} with subtract gives (x2 - x0) - x1.
    sub = ADD.replace("add {", "sub {").replace("add(x, y)", "subtract(x, y)")
    text = hlo("  x = f32[] parameter(0)\n"
               "  ROOT r = f32[] all-reduce(x), replica_groups={{2,0,1}}, to_apply=sub", sub)
    got = run(text, [[np.float32(1)], [np.float32(10)], [np.float32(100)]], replicas=3)
    assert [float(g) for g in got] == [89.0, 89.0, 89.0]


def test_all_reduce_bf16_keeps_its_type():
    import ml_dtypes

    text = hlo("  x = bf16[2] parameter(0)\n"
               "  ROOT r = bf16[2] all-reduce(x), replica_groups={}, to_apply=add",
               ADD.replace("f32", "bf16"))
    inputs = by_replica(2, lambda r: np.array([1.5, 256], ml_dtypes.bfloat16))
    for got in run(text, inputs, replicas=2):
        same(got, np.array([3, 512], ml_dtypes.bfloat16))


def test_all_reduce_in_a_loop_meets_once_per_iteration():
    # Three iterations, each an all-reduce of the running value: x -> 2x -> 4x -> 8x summed
    # over two replicas (x0 + x1) * 2^2 ... computed by the loop.
    comps = ADD + """
cond {
  p = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
body {
  p = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[2] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  s = f32[2] all-reduce(v), replica_groups={}, to_apply=add
  ROOT t = (s32[], f32[2]) tuple(j, s)
}
"""
    text = hlo("  x = f32[2] parameter(0)\n  zero = s32[] constant(0)\n"
               "  init = (s32[], f32[2]) tuple(zero, x)\n"
               "  w = (s32[], f32[2]) while(init), condition=cond, body=body\n"
               "  ROOT v = f32[2] get-tuple-element(w), index=1", comps)
    got = run(text, [[f32(1, 2)], [f32(3, 4)]], replicas=2)
    # iteration 1: (4, 6); 2: (8, 12); 3: (16, 24)
    for g in got:
        same(g, f32(16, 24))


def test_cross_replica_sum_builder():
    b = XlaBuilder("crs")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    comp = b.build(ops.CrossReplicaSum(x))
    exe = Client(timeout=5).compile(comp, replicas=2)
    for got in exe.execute(TWO):
        same(got, f32(4.0, 7.75))


# -- all-gather, reduce-scatter ------------------------------------------------------------------


def test_spec_all_gather_example():
    # Spec: [1.0, 2.5] and [3.0, 5.25] gathered along 0 give [1.0, 2.5, 3.0, 5.25] on both.
    text = hlo("  x = f32[2] parameter(0)\n"
               "  ROOT g = f32[4] all-gather(x), replica_groups={}, dimensions={0}")
    for got in run(text, TWO, replicas=2):
        same(got, f32(1.0, 2.5, 3.0, 5.25))


@pytest.mark.parametrize("groups", ["{{2,0},{3,1}}", "[2,2]<=[2,2]T(1,0)"])
def test_all_gather_group_order_along_dimension_1(groups):
    text = hlo("  x = s32[2,1] parameter(0)\n"
               f"  ROOT g = s32[2,2] all-gather(x), replica_groups={groups}, dimensions={{1}}")
    got = run(text, by_replica(4, lambda r: np.array([[r], [10 + r]], np.int32)), replicas=4)
    if groups.startswith("{{2"):
        # group {2,0}: replica 2's piece first
        same(got[0], np.array([[2, 0], [12, 10]], np.int32))
        same(got[3], np.array([[3, 1], [13, 11]], np.int32))
    else:  # the iota form is {{0,2},{1,3}}
        same(got[0], np.array([[0, 2], [10, 12]], np.int32))
        same(got[3], np.array([[1, 3], [11, 13]], np.int32))
    same(got[0], got[2])
    same(got[1], got[3])


def test_all_gather_tuple_operands():
    text = hlo("  x = f32[1] parameter(0)\n  y = s32[2] parameter(1)\n"
               "  ROOT g = (f32[2], s32[4]) all-gather(x, y), replica_groups={}, dimensions={0}")
    inputs = [[f32(1), np.array([1, 2], np.int32)], [f32(2), np.array([3, 4], np.int32)]]
    for x, y in run(text, inputs, replicas=2):
        same(x, f32(1, 2))
        same(y, np.array([1, 2, 3, 4], np.int32))


def test_spec_reduce_scatter_example():
    # Spec: [1.0, 2.25] and [3.0, 5.25] give [4.0] on the first replica, [7.5] on the second.
    text = hlo("  x = f32[2] parameter(0)\n"
               "  ROOT r = f32[1] reduce-scatter(x), replica_groups={}, dimensions={0}, "
               "to_apply=add")
    got = run(text, [[f32(1.0, 2.25)], [f32(3.0, 5.25)]], replicas=2)
    same(got[0], f32(4.0))
    same(got[1], f32(7.5))


@pytest.mark.parametrize("groups", ["{{1,3},{0,2}}", "[2,2]<=[2,2]T(1,0)"])
def test_reduce_scatter_groups(groups):
    # Member i of a group keeps block i of the reduced array.
    text = hlo("  x = f32[2,2] parameter(0)\n"
               f"  ROOT r = f32[2,1] reduce-scatter(x), replica_groups={groups}, "
               "dimensions={1}, to_apply=add")
    got = run(text, by_replica(4, lambda r: np.array([[r, 10 * r], [1, 1]], np.float32)),
              replicas=4)
    # groups {0,2} and {1,3}: sums [[2, 20], [2, 2]] and [[4, 40], [2, 2]]
    if groups.startswith("{{1"):
        ranks = {1: 0, 3: 1, 0: 0, 2: 1}
    else:
        ranks = {0: 0, 2: 1, 1: 0, 3: 1}
    sums = {0: np.array([[2, 20], [2, 2]], np.float32), 1: np.array([[4, 40], [2, 2]], np.float32)}
    for r in range(4):
        same(got[r], sums[r % 2][:, ranks[r]:ranks[r] + 1])


# -- all-to-all -----------------------------------------------------------------------------------


def test_spec_all_to_all_example():
    # Spec: AllToAll(x, split_dimension=1, concat_dimension=0, split_count=4) on f32[4,16]:
    # each core splits its operand into 4 blocks f32[4,4] along dimension 1, sends block i
    # to core i, and concatenates the received blocks along dimension 0: f32[16,4].
    b = XlaBuilder("alltoall")
    x = ops.Parameter(b, 0, parse_shape("f32[4,16]"), "x")
    comp = b.build(ops.AllToAll(x, 1, 0, 4))
    assert str(comp.program_shape().result) == "f32[16,4]{1,0}"
    inputs = [np.arange(64, dtype=np.float32).reshape(4, 16) + 100 * r for r in range(4)]
    got = Client(timeout=5).compile(comp, replicas=4).execute([[a] for a in inputs])
    for i in range(4):
        want = np.concatenate([inputs[j][:, 4 * i:4 * i + 4] for j in range(4)], axis=0)
        same(got[i], want)


def test_all_to_all_concatenates_in_group_order():
    # Behaviour doc: group {3,0}: replica 3's piece first.
    text = hlo("  x = f32[2] parameter(0)\n"
               "  ROOT a = f32[2] all-to-all(x), replica_groups={{3,0},{1,2}}, dimensions={0}")
    got = run(text, by_replica(4, lambda r: f32(10 * r, 10 * r + 1)), replicas=4)
    same(got[3], f32(30, 0))
    same(got[0], f32(31, 1))
    same(got[1], f32(10, 20))
    same(got[2], f32(11, 21))


def test_all_to_all_iota_groups_and_tuple_form():
    text = hlo("  a = s32[1] parameter(0)\n  b = s32[1] parameter(1)\n"
               "  ROOT t = (s32[1], s32[1]) all-to-all(a, b), replica_groups=[2,2]<=[4]")
    got = run(text, [[np.array([10 * r], np.int32), np.array([10 * r + 1], np.int32)]
                     for r in range(4)], replicas=4)
    # groups {0,1},{2,3}: member k receives operand k of each member, in group order
    assert [(int(a[0]), int(b[0])) for a, b in got] == [(0, 10), (1, 11), (20, 30), (21, 31)]


# -- collective-permute, collective-broadcast, ragged-all-to-all ----------------------------------


def test_collective_permute_ring():
    text = hlo("  x = f32[2] parameter(0)\n"
               "  ROOT p = f32[2] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,0}}")
    got = run(text, by_replica(3, lambda r: f32(r, -r)), replicas=3)
    same(got[0], f32(2, -2))
    same(got[1], f32(0, 0))
    same(got[2], f32(1, -1))


def test_collective_permute_without_source_gives_zeros():
    # Spec: a replica that is the target of no pair gets zeros of the operand's shape.
    text = hlo("  x = s32[3] parameter(0)\n"
               "  ROOT p = s32[3] collective-permute(x), source_target_pairs={{0,1}}")
    got = run(text, by_replica(2, lambda r: np.array([7, 8, 9], np.int32) * (r + 1)),
              replicas=2)
    same(got[0], np.zeros(3, np.int32))
    same(got[1], np.array([7, 8, 9], np.int32))


def test_collective_permute_in_a_loop():
    # A value travelling around a ring of 3 replicas for 3 steps comes back home.
    comps = """
cond {
  p = (s32[], f32[1]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[1]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[1] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  s = f32[1] collective-permute(v), source_target_pairs={{0,1},{1,2},{2,0}}
  ROOT t = (s32[], f32[1]) tuple(j, s)
}
"""
    text = hlo("  x = f32[1] parameter(0)\n  zero = s32[] constant(0)\n"
               "  init = (s32[], f32[1]) tuple(zero, x)\n"
               "  w = (s32[], f32[1]) while(init), condition=cond, body=body\n"
               "  ROOT v = f32[1] get-tuple-element(w), index=1", comps)
    got = run(text, by_replica(3, lambda r: f32(r)), replicas=3)
    assert [float(g[0]) for g in got] == [0.0, 1.0, 2.0]


def test_collective_broadcast_from_the_first_member():
    text = hlo("  x = f32[2] parameter(0)\n"
               "  ROOT b = f32[2] collective-broadcast(x), replica_groups={{1,0},{3,2}}")
    got = run(text, by_replica(4, lambda r: f32(r, r)), replicas=4)
    for r, root in ((0, 1), (1, 1), (2, 3), (3, 3)):
        same(got[r], f32(root, root))


def test_ragged_all_to_all_two_replicas():
    text = hlo("  inp = f32[4] parameter(0)\n  out = f32[4] parameter(1)\n"
               "  io = s64[2] parameter(2)\n  ss = s64[2] parameter(3)\n"
               "  oo = s64[2] parameter(4)\n  rs = s64[2] parameter(5)\n"
               "  ROOT r = f32[4] ragged-all-to-all(inp, out, io, ss, oo, rs), "
               "replica_groups={{0,1}}")

    def i64(*v):
        return np.array(v, np.int64)

    inputs = [
        # replica 0 sends input[0:1] to replica 0 at 0 and input[1:4] to replica 1 at 0
        [f32(1, 2, 3, 4), np.zeros(4, np.float32), i64(0, 1), i64(1, 3), i64(0, 0), i64(1, 2)],
        # replica 1 sends input[0:2] to replica 0 at 1 and input[2:3] to replica 1 at 3
        [f32(5, 6, 7, 8), np.zeros(4, np.float32), i64(0, 2), i64(2, 1), i64(1, 3), i64(3, 1)],
    ]
    got = run(text, inputs, replicas=2)
    same(got[0], f32(1, 5, 6, 0))
    same(got[1], f32(2, 3, 4, 7))


# -- -start / -done ------------------------------------------------------------------------------


def test_start_done_forms():
    text = hlo("  x = f32[2] parameter(0)\n"
               "  ars = f32[2] all-reduce-start(x), replica_groups={}, to_apply=add\n"
               "  ar = f32[2] all-reduce-done(ars)\n"
               "  ags = (f32[2], f32[4]) all-gather-start(x), replica_groups={}, dimensions={0}\n"
               "  ag = f32[4] all-gather-done(ags)\n"
               "  cps = (f32[2], f32[2]) collective-permute-start(x), "
               "source_target_pairs={{0,1},{1,0}}\n"
               "  cp = f32[2] collective-permute-done(cps)\n"
               "  ROOT t = (f32[2], f32[4], f32[2]) tuple(ar, ag, cp)")
    got = run(text, TWO, replicas=2)
    for r, (ar, ag, cp) in enumerate(got):
        same(ar, f32(4.0, 7.75))
        same(ag, f32(1.0, 2.5, 3.0, 5.25))
        same(cp, TWO[1 - r][0])


def test_replica_id_on_each_replica():
    text = hlo("  ROOT r = u32[] replica-id()")
    got = Client().compile(text, replicas=3).execute([[], [], []])
    assert [int(g) for g in got] == [0, 1, 2]


# -- compile-time checks of replica groups -------------------------------------------------------


@pytest.mark.parametrize("op, replicas, message", [
    # Rules of the op itself (shape inference, XLA's messages): rejected when the text is
    # parsed, before any device runs.
    ("f32[4] all-gather(x), replica_groups={{0,1},{2}}, dimensions={0}", 3,
     r"all-gather: Replica groups expected to be of uniform size, got groups of sizes 1, 2"),
    ("f32[1] reduce-scatter(x), replica_groups={{0,1},{2}}, dimensions={0}, to_apply=add", 3,
     r"reduce-scatter: Replica groups expected to be of uniform size"),
    ("f32[2] all-to-all(x), replica_groups={{0,1},{2}}, dimensions={0}", 3,
     r"all-to-all: Replica groups expected to be of uniform size"),
    ("f32[2] all-reduce(x), replica_groups={{0,1},{1,0}}, to_apply=add", 2,
     r"all-reduce: Replica 1 is repeated"),
    ("f32[2] all-reduce(x), replica_groups={{0,5}}, to_apply=add", 2,
     r"all-reduce: Replica 5 is out of range"),
])
def test_bad_replica_groups_are_rejected_when_parsed(op, replicas, message):
    text = hlo(f"  x = f32[2] parameter(0)\n  ROOT r = {op}")
    with pytest.raises(ParseError, match=message):
        Client().compile(text, replicas=replicas)


@pytest.mark.parametrize("op, replicas, message", [
    # Rules that depend on the device counts: rejected by compile (xlapy.runtime.placement,
    # XLA's verifier rules), naming the instruction.
    ("f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add", 4,
     (r"all-reduce %r: replica_groups=\{\{0,1\}\} name 2 replicas \(cross_replica mode\), but "
     r"the executable runs 4 replica\(s\) x 1 partition\(s\), i.e. 4 replicas")),
    ("f32[2] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add", 2,
     r"name 4 replicas"),
    ("f32[4] all-gather(x), replica_groups={}, dimensions={0}", 4,
     (r"all-gather %r: its shapes imply 2 shards along dimension 0 \(\[2\] -> \[4\]\), but each "
     r"replica group has 4 members")),
    ("f32[1] reduce-scatter(x), replica_groups={}, dimensions={0}, to_apply=add", 3,
     r"reduce-scatter %r: its shapes imply 2 shards"),
    ("f32[2] all-to-all(x), replica_groups={}, dimensions={0}", 3,
     r"all-to-all %r: dimension 0 of size 2 does not split into 3 blocks"),
    ("f32[2] collective-permute(x), source_target_pairs={{0,3}}", 2,
     (r"collective-permute %r: source_target_pairs name replica 3, but the executable runs 2 "
     r"replicas")),
])
def test_replica_groups_that_do_not_fit_the_devices_fail_at_compile_time(op, replicas, message):
    text = hlo(f"  x = f32[2] parameter(0)\n  ROOT r = {op}")
    with pytest.raises(InvalidArgumentError, match=message):
        Client().compile(text, replicas=replicas)


def test_flattened_ids_need_groups():
    text = hlo("  x = f32[2] parameter(0)\n  ROOT r = f32[2] all-reduce(x), channel_id=1, "
               "replica_groups={}, use_global_device_ids=true, to_apply=add")
    with pytest.raises(ParseError, match="Replica groups must be specified in flattened-id "
                       "mode"):
        Client().compile(text, replicas=2)
