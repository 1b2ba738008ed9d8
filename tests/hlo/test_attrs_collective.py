"""Collective attribute kinds: replica groups (explicit and iota forms), source-target
pairs, slice sizes, the single ``dimensions={d}``, channel handles and group modes.
Texts are XLA-printed ones from hlo_parser_test.cc; iota expansions follow
replica_group_test.cc / tile_assignment_test.cc."""

import numpy as np
import pytest

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.hlo.attrs.collective import (
    REPLICA_GROUPS,
    SINGLE_DIMENSION,
    SLICE_SIZES,
    SOURCE_TARGET_PAIRS,
    ChannelHandle,
    ChannelType,
    CollectiveDeviceList,
    CollectiveOpGroupMode,
    IotaReplicaGroupList,
    ReplicaGroup,
    canonicalize_iota,
    get_collective_op_group_mode,
    replica_groups_from,
)
from xlapy.shape.text import Scanner


def read(kind, text):
    sc = Scanner(text, "attr")
    value = kind.read(sc, None)
    assert sc.at_end(), f"unread text after {text!r}"
    return value


# -- replica groups: text round trips -----------------------------------------------------------

XLA_REPLICA_GROUPS = [
    "{}",
    "{{0}}",
    "{{0,1}}",
    "{{0,1},{2,3}}",
    "{{1,2},{3,0}}",
    "{{1,0},{2,3}}",
    "{{0,1,2,3,4,5,6,7}}",
    "[2,10]<=[20]",
    "[3,10]<=[6,5]T(1,0)",
    "[4,8]<=[4,8]T(1,0)",
    "[2,4]<=[4,2]T(1,0)",
    "[4,2]<=[2,2,2]T(0,2,1)",
    "[2,4]<=[2,2,2]T(1,0,2)",
]


@pytest.mark.parametrize("text", XLA_REPLICA_GROUPS)
def test_replica_groups_round_trip(text):
    value = read(REPLICA_GROUPS, text)
    assert REPLICA_GROUPS.to_text(value) == text
    assert REPLICA_GROUPS.check(value, "x") is value


def test_replica_groups_read_whitespace_and_print_compact():
    assert read(REPLICA_GROUPS, "{ {0, 1} , {2,3} }").to_text() == "{{0,1},{2,3}}"
    assert read(REPLICA_GROUPS, "[2, 2] <= [2, 2] T(1, 0)").to_text() == "[2,2]<=[2,2]T(1,0)"


def test_replica_groups_kind_is_always_printed():
    # XLA prints replica_groups={} on every collective: the printer honours the flag.
    assert REPLICA_GROUPS.always_printed


def test_explicit_list_accessors():
    groups = read(REPLICA_GROUPS, "{{0,2},{1,3}}")
    assert isinstance(groups, CollectiveDeviceList)
    assert groups.num_replica_groups == 2 and groups.num_devices_per_group == 2
    assert groups.replica_groups() == (ReplicaGroup((0, 2)), ReplicaGroup((1, 3)))
    assert groups.flattened_replica_groups() == ((0, 2), (1, 3))
    assert groups.expand() is groups
    empty = read(REPLICA_GROUPS, "{}")
    assert empty.is_empty() and empty.num_devices_per_group == 0


# -- iota form ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text, groups", [
    ("[2,10]<=[20]", [list(range(10)), list(range(10, 20))]),
    ("[2,2]<=[2,2]T(1,0)", [[0, 2], [1, 3]]),
    # replica_group_test.cc MaterializedReplicaGroupsMatchExpectedV2 (mesh a=8):
    ("[4,2]<=[2,4]T(1,0)", [[0, 4], [1, 5], [2, 6], [3, 7]]),
    ("[2,4]<=[4,2]T(1,0)", [[0, 2, 4, 6], [1, 3, 5, 7]]),
    ("[4,2]<=[2,2,2]T(0,2,1)", [[0, 2], [1, 3], [4, 6], [5, 7]]),
    ("[2,4]<=[2,2,2]T(1,0,2)", [[0, 1, 4, 5], [2, 3, 6, 7]]),
    ("[1,8]<=[8]", [list(range(8))]),
    ("[3,10]<=[6,5]T(1,0)", [[0, 5, 10, 15, 20, 25, 1, 6, 11, 16],
                             [21, 26, 2, 7, 12, 17, 22, 27, 3, 8],
                             [13, 18, 23, 28, 4, 9, 14, 19, 24, 29]]),
])
def test_iota_expansion(text, groups):
    value = read(REPLICA_GROUPS, text)
    assert isinstance(value, IotaReplicaGroupList)
    expanded = value.expand()
    assert isinstance(expanded, CollectiveDeviceList)
    assert [list(g) for g in expanded.groups] == groups
    assert value.num_replica_groups == len(groups)
    assert value.num_devices_per_group == len(groups[0])


@pytest.mark.parametrize("dims, perm, want", [
    # tile_assignment.cc's comment and tile_assignment_test.cc.
    ((3, 4, 5), (0, 1, 2), ((60,), (0,))),
    ((3, 4, 5), (2, 1, 0), ((3, 4, 5), (2, 1, 0))),
    ((3, 4, 5), (1, 2, 0), ((3, 20), (1, 0))),
    ((3, 4, 5), (1, 0, 2), ((3, 4, 5), (1, 0, 2))),
    ((3, 4, 5), (2, 0, 1), ((12, 5), (1, 0))),
    ((1, 3, 1, 4, 1, 5), (4, 3, 2, 5, 1, 0), ((3, 20), (1, 0))),
    ((3, 4), (0, 1), ((12,), (0,))),
    ((1, 1), (1, 0), ((1,), (0,))),
])
def test_canonicalize_iota(dims, perm, want):
    assert canonicalize_iota(dims, perm) == want


def test_iota_form_is_canonicalised_as_xla_prints_it():
    # XLA builds the list through IotaTileAssignment::Create, which canonicalises.
    assert read(REPLICA_GROUPS, "[2,2]<=[2,2]T(0,1)").to_text() == "[2,2]<=[4]"
    assert IotaReplicaGroupList(3, 20, (3, 4, 5), (1, 2, 0)).to_text() == "[3,20]<=[3,20]T(1,0)"
    assert IotaReplicaGroupList(2, 3).to_text() == "[2,3]<=[6]"
    # Equality is per representation, as XLA's: same groups, different kinds.
    iota = IotaReplicaGroupList(2, 2)
    assert iota != iota.expand() and iota.expand() == CollectiveDeviceList(((0, 1), (2, 3)))
    assert IotaReplicaGroupList(2, 2, (2, 2), (0, 1)) == iota
    assert hash(IotaReplicaGroupList(2, 2, (2, 2), (0, 1))) == hash(iota)


def test_iota_constructor_errors():
    with pytest.raises(InvalidArgumentError, match="iota size 8 does not match the tile "
                                                   "assignment dimensions product 4"):
        IotaReplicaGroupList(2, 2, (8,), (0,))
    with pytest.raises(InvalidArgumentError, match=r"T\(0,0\) must be a permutation of 0..1"):
        IotaReplicaGroupList(2, 2, (2, 2), (0, 0))
    with pytest.raises(InvalidArgumentError, match="num_devices_per_group must be >= 1, got 0"):
        IotaReplicaGroupList(2, 0)
    with pytest.raises(InvalidArgumentError,
                       match="num_replica_groups must be an integer, got 2.0"):
        IotaReplicaGroupList(2.0, 2)
    with pytest.raises(InvalidArgumentError,
                       match=rf"reshape_dims\[0\] must fit in 64 bits \(int64\), got {2**70}"):
        IotaReplicaGroupList(2, 2, (2**70,), (0,))


# -- replica groups: malformed text ---------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("[2,2]<=[16]", ("collective device list iota size 16 does not match the tile "
                     "assignment dimensions product 4")),
    ("[2,2]<=[2,2]", r"expected 'T\(' to start the iota transpose permutation"),
    ("[2,2]<=[2,2]T(0,2)", (r"Out of range iota minor_to_major value 2, expecting value in "
                            r"range \[0, 2\)")),
    ("[2,2]<=[2,2]T(1,1)", r"must be a permutation of 0..1"),
    ("[2,2,2]<=[8]", r"expected 2 dimensions \[num_replica_groups,num_devices_per_group\]"),
    ("[2,2]0,1,2,3", "expected '<=' after the replica group dimensions"),
    ("[2,2]<=[]", "expected non-empty iota_reshape_dims"),
    ("{0,1}", r"expected '\{' to start a replica group"),
    ("{{0,1}", r"expected ',' or '\}' in replica groups"),
    ("{{0,x}}", "expects integer, found 'x'"),
    ("mesh['a'=2] {'b'}", "'b' is not a valid axis name or index of mesh mesh\\['a'=2\\]"),
    ("mesh['a'=2,'b'=2] {'a'=2}", r"expected ',' or '\}' in a list of mesh axes"),
    ("maximal_mesh[device_id=1] {}", "MeshAxesReplicaGroupList must have more than one device "
                                     r"per group, but got 1 \(a maximal_mesh has no axes\)"),
    ("mesh['a'=2,'b'=2] {}", "must have more than one device per group, but got 1"),
    ("all", r"expected replica groups: \{\{0,1\},\{2,3\}\}, \{\} or the iota form"),
])
def test_replica_groups_parse_errors(text, message):
    with pytest.raises(ParseError, match=message):
        read(REPLICA_GROUPS, text)


def test_replica_groups_parse_error_points_at_the_text():
    with pytest.raises(ParseError) as info:
        read(REPLICA_GROUPS, "[2,2]<=[2,2]T(0,5)")
    assert info.value.line == 1 and info.value.column == 14
    assert "^" in str(info.value)


# -- replica groups: values from Python -----------------------------------------------------------


def test_replica_groups_from_python_values():
    assert replica_groups_from(()) == CollectiveDeviceList()
    assert replica_groups_from(None) == CollectiveDeviceList()
    assert replica_groups_from([[0, 1], [2, 3]]).to_text() == "{{0,1},{2,3}}"
    assert replica_groups_from([ReplicaGroup([1, 0])]).to_text() == "{{1,0}}"
    assert replica_groups_from("[2,2]<=[4]") == IotaReplicaGroupList(2, 2)
    iota = IotaReplicaGroupList(2, 2)
    assert replica_groups_from(iota) is iota
    assert REPLICA_GROUPS.check([(0,), (1,)], "w").to_text() == "{{0},{1}}"


def test_replica_groups_from_bad_values():
    with pytest.raises(InvalidArgumentError, match="must be a list of replica groups"):
        replica_groups_from(3)
    group = r"CollectiveDeviceList: groups\[0\] \(a replica group\) must be"
    with pytest.raises(InvalidArgumentError, match=group + r" a list of integers, got \[0, 1.5\]"):
        replica_groups_from([[0, 1.5]])
    with pytest.raises(InvalidArgumentError, match=group + " a list of integers, got 0"):
        replica_groups_from([0, 1])
    with pytest.raises(InvalidArgumentError, match=group + " a list of integers, got '01'"):
        replica_groups_from(["01"])
    with pytest.raises(InvalidArgumentError, match=r"\(a replica group\)\[1\] must fit in 64 bits"):
        replica_groups_from([[0, 2**70]])
    with pytest.raises(ParseError, match="iota size 3 does not match"):
        replica_groups_from("[2,2]<=[3]")


# -- source-target pairs, slice sizes, single dimension -----------------------------------------


@pytest.mark.parametrize("text", ["{{0,1},{1,2},{2,3}}", "{{0,1}}", "{}",
                                  "{{0,1},{1,2},{2,3},{0,3},{2,1},{3,2}}"])
def test_source_target_pairs_round_trip(text):
    assert SOURCE_TARGET_PAIRS.to_text(read(SOURCE_TARGET_PAIRS, text)) == text


def test_source_target_pairs_errors():
    with pytest.raises(ParseError, match="expects 'source_target_pairs=' to be a list of pairs, "
                                         r"got \{0,1,2\}"):
        read(SOURCE_TARGET_PAIRS, "{{0,1},{0,1,2}}")
    with pytest.raises(ParseError, match=r"expected '\{' to start an integer list"):
        read(SOURCE_TARGET_PAIRS, "{0,1}")
    assert SOURCE_TARGET_PAIRS.check([(0, 1), [1, 0]], "w") == ((0, 1), (1, 0))
    where = "collective-permute: attribute 'source_target_pairs'"
    with pytest.raises(InvalidArgumentError, match=r"'source_target_pairs' must be a list of "
                                                   r"\(source, target\) pairs, got \(0, 1, 2\) "
                                                   r"at index 0"):
        SOURCE_TARGET_PAIRS.check([(0, 1, 2)], where)
    with pytest.raises(InvalidArgumentError, match=r"'source_target_pairs'\[0\] must be a list of "
                                                   r"integers, got \(0, '1'\)"):
        SOURCE_TARGET_PAIRS.check([(0, "1")], where)


@pytest.mark.parametrize("text", ["{{128,32}}", "{{1,8,128},{1,8,128}}",
                                  "{{1,8,128},{1,8,128},{2,8,128},{2,8,128}}"])
def test_slice_sizes_round_trip(text):
    assert SLICE_SIZES.to_text(read(SLICE_SIZES, text)) == text


def test_slice_sizes_check_integers():
    assert SLICE_SIZES.check([(1, 8), [np.int32(2)]], "w") == ((1, 8), (2,))
    where = "collective-permute: attribute 'slice_sizes'"
    with pytest.raises(InvalidArgumentError, match=rf"'slice_sizes'\[1\]\[0\] must fit in 64 bits "
                                                   rf"\(int64\), got {2**70}"):
        SLICE_SIZES.check([(1, 8), (2**70,)], where)
    with pytest.raises(InvalidArgumentError, match=r"'slice_sizes'\[0\] must be a list of "
                                                   r"integers, got \(1, 2.5\)"):
        SLICE_SIZES.check([(1, 2.5)], where)
    with pytest.raises(InvalidArgumentError, match=r"'slice_sizes' must be a list of integer "
                                                   r"lists, got 3 at index 0"):
        SLICE_SIZES.check([3], where)


def test_single_dimension():
    assert read(SINGLE_DIMENSION, "{1}") == 1
    assert SINGLE_DIMENSION.to_text(1) == "{1}"
    assert SINGLE_DIMENSION.check((3,), "w") == 3 and SINGLE_DIMENSION.check(2, "w") == 2
    # hlo_parser_test.cc AllGatherEmptyDimensions / ReduceScatterEmptyDimensions.
    with pytest.raises(ParseError, match=r"expected exactly one dimension, e.g. dimensions=\{0\}, "
                                         r"got \{\}"):
        read(SINGLE_DIMENSION, "{}")
    with pytest.raises(ParseError, match=r"got \{0,1\}"):
        read(SINGLE_DIMENSION, "{0,1}")
    with pytest.raises(InvalidArgumentError, match="must be one dimension number"):
        SINGLE_DIMENSION.check((0, 1), "all-gather: attribute 'dimensions'")
    with pytest.raises(InvalidArgumentError, match="'dimensions' must fit in 64 bits"):
        SINGLE_DIMENSION.check((2**70,), "all-gather: attribute 'dimensions'")


# -- channels and group modes --------------------------------------------------------------------


def test_channel_handle():
    h = ChannelHandle(3)
    assert h.handle == 3 and h.type == ChannelType.DEVICE_TO_DEVICE
    assert ChannelHandle(2, "DEVICE_TO_HOST").type == ChannelType.DEVICE_TO_HOST
    assert ChannelHandle(2, 3).type == ChannelType.HOST_TO_DEVICE
    with pytest.raises(InvalidArgumentError, match="unknown channel type"):
        ChannelHandle(1, "SIDEWAYS")
    with pytest.raises(InvalidArgumentError, match="handle must be an integer"):
        ChannelHandle("1")


@pytest.mark.parametrize("has_channel, use_global, mode", [
    (False, None, CollectiveOpGroupMode.CROSS_REPLICA),
    (False, False, CollectiveOpGroupMode.CROSS_REPLICA),
    (True, None, CollectiveOpGroupMode.CROSS_PARTITION),
    (True, False, CollectiveOpGroupMode.CROSS_REPLICA_AND_PARTITION),
    (True, True, CollectiveOpGroupMode.FLATTENED_ID),
])
def test_group_mode(has_channel, use_global, mode):
    assert get_collective_op_group_mode(has_channel, use_global) is mode


def test_group_mode_error():
    with pytest.raises(InvalidArgumentError,
                       match="Cannot have use_global_device_ids=true without channel_id"):
        get_collective_op_group_mode(False, True)
