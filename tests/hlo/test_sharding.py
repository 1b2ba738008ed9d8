"""The sharding attribute: read and checked as XLA's parser reads it (ParseSingleSharding's
checks and messages, and HloSharding::FromProto's device count, which rejects the module
when it reaches XLA's compiler), validated against the shape by the verifier
(HloSharding::Validate), printed back as written."""

import pytest

from xlapy.errors import ParseError
from xlapy.hlo.attrs.sharding import parse_sharding
from xlapy.parser import parse_hlo_module
from xlapy.verifier import VerifierError, verify_module


def module(sharding: str, shape: str = "f32[4,4]") -> str:
    return f"HloModule m\nENTRY e {{\n  ROOT x = {shape} parameter(0), sharding={sharding}\n}}\n"


@pytest.mark.parametrize("sharding", [
    "{replicated}", "{manual}", "{unknown}", "{unreduced}", "{maximal device=3}",
    "{devices=[2,2]0,1,2,3}", "{devices=[2,2]3,1,2,0}", "{devices=[2,2]<=[4]}",
    "{devices=[2,2]<=[2,2]T(1,0)}", "{devices=[4,1]<=[2,2]T(1,0)}",
    "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
    "{devices=[2,2,2]<=[8] last_tile_dims={manual}}",
    "{devices=[2,2]0,1,2,3 metadata={op_name=\"a\"}}", "{devices=[2,2]<=[4] shard_as 1}",
    "{replicated shard_like 2}",
])
def test_valid_shardings_print_back(sharding):
    m = parse_hlo_module(module(sharding))
    verify_module(m)
    assert f"sharding={sharding}" in m.to_string()


@pytest.mark.parametrize("sharding,message", [
    # the device count must match the tile assignment (HloSharding::FromProto)
    ("{devices=[2,2]0,1,2,3,4,5,6,7,8,9}",
     "the tile assignment [2,2] holds 4 devices, but the device list has 10"),
    ("{devices=[2,2]<=[16]}", ("the tile assignment [2,2] holds 4 devices, but the iota <=[16] "
                              "has 16")),
    ("{devices=[2,2]0,1,2}", ("the tile assignment [2,2] holds 4 devices, but the device list "
                             "has 3")),
    ("{devices=[2,2]<=[2,3]T(1,0)}", ("the tile assignment [2,2] holds 4 devices, but the iota "
                                     "<=[2,3] has 6")),
    ("{devices=[2,-2]<=[4]}", "the sharding devices shape [2,-2] has a dimension below 1"),
    # ParseSingleSharding's own checks
    ("{maximal}", "maximal shardings should have exactly one device assigned"),
    ("{replicated device=1}", "replicated shardings should not have any devices assigned"),
    ("{manual devices=[2]0,1}", "manual shardings should not have any devices assigned"),
    ("{devices=[1]0}", "non-maximal shardings must have more than one device assigned"),
    ("{last_tile_dim_replicate}", ("non-maximal shardings must have a tile assignment list "
                                  "including dimensions")),
    ("{devices=[2,2]<=[2,2]T(0,2)}", ("Out of range iota minor_to_major value 2, expecting value "
                                     "in range [0, 2)")),
    ("{devices=[2,2]<=[2,2]}", "expected 'T(' to start sharding devices iota_transpose_perm"),
    ("{foo}", ("unknown attribute in sharding: expected device=, devices= metadata= or "
              "last_tile_dims=")),
    ("{devices=[2,2]0,1,2,3 last_tile_dims={sideways}}",
     ("expected a sharding type (replicated, manual, unreduced, maximal, unknown, other) in "
     "last_tile_dims, found sideways")),
])
def test_invalid_shardings_are_parse_errors(sharding, message):
    with pytest.raises(ParseError) as info:
        parse_hlo_module(module(sharding))
    assert info.value.message == message
    assert info.value.line == 3


@pytest.mark.parametrize("sharding,shape,message", [
    ("{devices=[4]0,1,2,3}", "f32[4,4]",
     ("Number of tile assignment dimensions (excluding subgroups) is different than the input "
     "rank. sharding={devices=[4]0,1,2,3}, input_shape=f32[4,4] Note: While validating "
     "sharding {devices=[4]0,1,2,3} against shape f32[4,4]")),
    ("{devices=[2,2]0,0,1,2}", "f32[4,4]", "device 0 is not unique in tile assignment"),
    ("{devices=[2,2]0,-1,1,2}", "f32[4,4]", "device -1 is negative in tile assignment"),
    ("{maximal device=-1}", "f32[4,4]", "device -1 is negative in tile assignment"),
    ("{{replicated}, {replicated}}", "(f32[4,4], f32[2], f32[])",
     "Shape (f32[4,4], f32[2], f32[]) has 3 leaf nodes while this sharding has 2"),
    ("{{replicated}, {devices=[2]0,1}}", "(f32[4,4], f32[2,2])",
     ("Number of tile assignment dimensions (excluding subgroups) is different than the input "
     "rank. sharding={devices=[2]0,1}, input_shape=f32[2,2] Note: While validating sharding "
     "tuple element {1} which is {devices=[2]0,1}")),
])
def test_verifier_validates_sharding_against_the_shape(sharding, shape, message):
    m = parse_hlo_module(module(sharding, shape))
    with pytest.raises(VerifierError) as info:
        verify_module(m)
    assert str(info.value).startswith("Invalid sharding for instruction %x: ")
    assert message in str(info.value)


def test_single_sharding_on_a_tuple_applies_to_every_leaf():
    m = parse_hlo_module(module("{devices=[2,2]0,1,2,3}", "(f32[4,4], f32[2,2])"))
    verify_module(m)
    assert m.entry.root.sharding == "{{devices=[2,2]0,1,2,3}, {devices=[2,2]0,1,2,3}}"


def test_parse_sharding_structure():
    s = parse_sharding("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")
    assert (s.kind, s.tile_dims, s.iota_dims, s.subgroups) == ("tiled", (2, 1, 2), (4,), 1)
    t = parse_sharding("{{maximal device=1}, {replicated}}")
    assert [e.kind for e in t.elements] == ["maximal", "replicated"]
    assert parse_sharding("{}").elements == []
