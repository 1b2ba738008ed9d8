"""Mesh-axes replica groups (``replica_groups=mesh[...] {axes}``): read, printed back, and
expanded to the groups XLA's MeshAxesReplicaGroupList materialises (the expected groups are
those of XLA's xla/hlo/ir/replica_group_test.cc); in a module they print back and run as
the explicit groups would. Error cases are in test_attrs_collective.py."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.hlo.attrs.collective import REPLICA_GROUPS
from xlapy.hlo.attrs.mesh import MeshAxesReplicaGroupList, read_mesh_replica_groups
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.verifier import verify_module
from xlapy.shape.text import Scanner


def groups(text: str) -> list[list[int]]:
    sc = Scanner(text, "replica_groups")
    value = read_mesh_replica_groups(sc)
    assert sc.at_end()
    return [list(g) for g in value.flattened_replica_groups()]


@pytest.mark.parametrize("text, expected", [
    ("mesh['x'=2,'y'=2] {'x'}", [[0, 2], [1, 3]]),
    ("mesh['x'=2,'y'=2] {'y'}", [[0, 1], [2, 3]]),
    ("mesh['x'=2,'y'=2] {'x','y'}", [[0, 1, 2, 3]]),
    # sub-axes of a 6x6 mesh
    ("mesh['a'=6,'b'=6] {'a':(1)3}", [[r, r + 12, r + 24] for r in range(12)]),
    ("mesh['a'=6,'b'=6] {'b':(1)3}", [[b + i, b + i + 2, b + i + 4] for b in range(0, 36, 6)
                                      for i in (0, 1)]),
    ("mesh['a'=6,'b'=6] {'b':(3)2}", [[i, i + 1] for i in range(0, 36, 2)]),
    ("mesh['a'=6,'b'=6] {'a':(1)2,'b':(1)2}",
     [[0, 3, 18, 21], [1, 4, 19, 22], [2, 5, 20, 23], [6, 9, 24, 27], [7, 10, 25, 28],
      [8, 11, 26, 29], [12, 15, 30, 33], [13, 16, 31, 34], [14, 17, 32, 35]]),
    ("mesh['a'=6,'b'=6] {'a':(3)2,'b':(3)2}",
     [[0, 1, 6, 7], [2, 3, 8, 9], [4, 5, 10, 11], [12, 13, 18, 19], [14, 15, 20, 21],
      [16, 17, 22, 23], [24, 25, 30, 31], [26, 27, 32, 33], [28, 29, 34, 35]]),
    # the device order of a mesh with device_ids
    ("mesh['x'=2,'y'=2], device_ids=(3,1,0,2) {'x'}", [[3, 0], [1, 2]]),
    ("mesh['x'=2,'y'=2], device_ids=(3,1,0,2) {'y'}", [[3, 1], [0, 2]]),
    # axes given by index (XLA prints them so without a mesh)
    ("mesh['x'=2,'y'=2] {'1'}", [[0, 1], [2, 3]]),
])
def test_mesh_axes_groups(text, expected):
    assert groups(text) == expected


@pytest.mark.parametrize("axes, iota", [
    # an 8-device axis: the same groups as these iota lists (XLA's MatchExpectedV2)
    ("'a':(1)2", "[4,2]<=[2,4]T(1,0)"),
    ("'a':(1)4", "[2,4]<=[4,2]T(1,0)"),
    ("'a':(2)2", "[4,2]<=[2,2,2]T(0,2,1)"),
    ("'a':(2)4", "[2,4]<=[8]"),
    ("'a':(4)2", "[4,2]<=[8]"),
    ("'a':(1)2,'a':(4)2", "[2,4]<=[2,2,2]T(1,0,2)"),
    ("'a':(4)2,'a':(1)2", "[2,4]<=[2,2,2]T(1,2,0)"),
    ("'a'", "[1,8]<=[8]"),
])
def test_mesh_axes_groups_match_iota_lists(axes, iota):
    sc = Scanner(iota)
    assert groups(f"mesh['a'=8] {{{axes}}}") == [
        list(g) for g in REPLICA_GROUPS.read(sc).flattened_replica_groups()]


@pytest.mark.parametrize("text", [
    "mesh['axis_0'=2,'axis_1'=2] {'axis_1'}",
    "mesh['a'=2,'b'=4,'c'=3] {'c','a'}",
    "mesh['a'=8] {'a':(2)2}",
    "mesh['x'=2,'y'=2], device_ids=(0,2,1,3) {'x'}",
    "mesh['a'=4,'b'=16], device_ids=([4,16]T(1,0)) {'a'}",
    "mesh['a.b'=2,'<axis> def'=4] {'<axis> def':(2)2}",
])
def test_mesh_axes_groups_print_back(text):
    sc = Scanner(text)
    value = REPLICA_GROUPS.read(sc)
    assert isinstance(value, MeshAxesReplicaGroupList)
    assert REPLICA_GROUPS.to_text(value) == text


MODULE = """HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, replica_count=4

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}

ENTRY e {
  input = f32[2]{0} parameter(0)
  ROOT all-reduce = f32[2]{0} all-reduce(input), replica_groups=%s, to_apply=add
}

"""


def test_mesh_axes_groups_in_a_module_print_back_and_run_as_explicit_groups():
    mesh_text = MODULE % "mesh['x'=2,'y'=2] {'x'}"
    module = parse_hlo_module(mesh_text)
    verify_module(module)
    assert module_to_string(module, HloPrintOptions.short_parsable()) == mesh_text
    explicit = parse_hlo_module(MODULE % "{{0,2},{1,3}}")
    args = [[np.array([r, 10 * r], np.float32)] for r in range(4)]
    client = xlapy.Client()
    got = client.compile(module).execute(args)
    want = client.compile(explicit).execute(args)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[0], [2, 20])  # replicas 0 and 2
