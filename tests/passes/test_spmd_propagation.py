"""Sharding propagation (xlapy/passes/spmd/propagation.py, XLA's ShardingPropagation in its
plain form) and the Shardy import (sdy_import.py): the shardings ``annotate_shardings``
gives instructions that had none - forward through elementwise, broadcast, reshape,
transpose, dot and reduce, into while bodies and conditions, backward from a user - and
jax's Shardy form of every fixture importing to the shardings of its GSPMD form."""

import json
from pathlib import Path

import pytest
from spmd_helpers import module

from xlapy.hlo.attrs.sharding import parse_sharding
from xlapy.parser import parse_hlo_module
from xlapy.passes.spmd import annotate_shardings

T4 = "{devices=[4,1]<=[4]}"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "spmd"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())


def shardings(text: str, n: int = 4) -> dict[str, str]:
    m = annotate_shardings(parse_hlo_module(text), n)
    return {i.name: i.sharding for c in m.computations for i in c.instructions}


def test_forward_through_the_common_instructions():
    got = shardings(module(
        f"  p = f32[8,6] parameter(0), sharding={T4}\n"
        "  v = f32[8] parameter(1), sharding={devices=[4]<=[4]}\n"
        "  w = f32[6,5] parameter(2), sharding={replicated}\n"
        "  th = f32[8,6] tanh(p)\n"
        "  bc = f32[8,3] broadcast(v), dimensions={0}\n"
        "  rs = f32[4,2,6] reshape(th)\n"
        "  tr = f32[6,8] transpose(th), dimensions={1,0}\n"
        "  d = f32[8,5] dot(th, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  z = f32[] constant(0)\n"
        "  r1 = f32[8] reduce(th, z), dimensions={1}, to_apply=add\n"
        "  r0 = f32[6] reduce(th, z), dimensions={0}, to_apply=add\n"
        "  q = f32[8,5] negate(d)\n"
        "  ROOT t = (f32[8,3], f32[4,2,6], f32[6,8], f32[8,5], f32[8], f32[6]) "
        "tuple(bc, rs, tr, q, r1, r0)"))
    assert got["th"] == T4 and got["bc"] == T4 and got["d"] == T4 and got["q"] == T4
    assert got["rs"] == "{devices=[4,1,1]<=[4]}"
    assert got["tr"] == "{devices=[1,4]<=[4]}"
    assert got["r1"] == "{devices=[4]<=[4]}" and got["r0"] == "{replicated}"
    assert got["z"] == "{replicated}"


def test_dot_result_takes_both_operands_dimensions():
    got = shardings(module(
        "  a = f32[8,6] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
        "  b = f32[6,4] parameter(1), sharding={devices=[1,2,2]<=[2,2]T(1,0) "
        "last_tile_dim_replicate}\n"
        "  d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  ROOT n = f32[8,4] negate(d)"))
    assert parse_sharding(got["d"]) == parse_sharding("{devices=[2,2]<=[4]}")


LOOP = """HloModule w
cond {
  s = (s32[], f32[8,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8,6] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[8,6] tanh(x)
  ROOT t = (s32[], f32[8,6]) tuple(j, y)
}
ENTRY e {
  p = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}
  z = s32[] constant(0)
  s = (s32[], f32[8,6]) tuple(z, p)
  ROOT w = (s32[], f32[8,6]) while(s), condition=cond, body=body
}
"""


def test_into_while_bodies_and_conditions():
    m = annotate_shardings(parse_hlo_module(LOOP), 4)
    state = "{{replicated}, " + T4 + "}"
    body = next(c for c in m.computations if c.name == "body")
    cond = next(c for c in m.computations if c.name == "cond")
    assert body.parameters[0].sharding == state == cond.parameters[0].sharding
    assert body.root.sharding == state == m.entry.root.sharding
    assert [i.sharding for i in body.instructions if i.opcode == "tanh"] == [T4]
    assert [i.sharding for i in cond.instructions if i.opcode == "compare"] == ["{replicated}"]


def test_backward_from_a_user():
    got = shardings(module("  p = f32[8,6] parameter(0), sharding={replicated}\n"
                           "  e = f32[8,6] exponential(p)\n"
                           f"  ROOT n = f32[8,6] negate(e), sharding={T4}"))
    assert got["e"] == T4 and got["p"] == "{replicated}"


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_shardy_import_gives_the_gspmd_forms_shardings(name):
    n = MANIFEST[name]["devices"]
    seen = []
    for form in ("shardy", "gspmd"):
        m = annotate_shardings(parse_hlo_module(
            (FIXTURES / f"{name}.{form}.pre.hlo").read_text()), n)
        seen.append(([parse_sharding(p.sharding) for p in m.entry.parameters],
                     parse_sharding(m.entry.root.sharding)))
    assert seen[0] == seen[1]
