"""The IR's graph operations: post order, replace-all-uses, clone, dead code, unique names."""

import pytest

from xlapy import parse_hlo_module
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.ir import Computation, Module, NameUniquer
from xlapy.opdefs import make_instruction
from xlapy.shape import parse_shape


def param(comp, n, shape="f32[3]", name=None):
    return comp.add_instruction(make_instruction(
        "parameter", [], {"parameter_number": n}, shape=parse_shape(shape), name=name or f"p{n}"))


def add(comp, *operands, opcode="add"):
    return comp.add_instruction(make_instruction(opcode, list(operands)))


def small():
    c = Computation("c")
    x, y = param(c, 0), param(c, 1)
    a = add(c, x, y)
    m = add(c, a, x, opcode="multiply")
    c.set_root(m)
    return c, x, y, a, m


def test_users_operands_and_post_order():
    c, x, y, a, m = small()
    assert a.operands == [x, y] and x.users == [a, m] and m.users == []
    order = c.post_order()
    assert order.index(x) < order.index(a) < order.index(m) and order.index(y) < order.index(a)
    assert c.program_shape().parameters == [parse_shape("f32[3]")] * 2
    assert str(c.program_shape()) == "(p0: f32[3], p1: f32[3]) -> f32[3]"


def test_replace_all_uses_and_dead_code():
    c, x, y, a, m = small()
    s = add(c, x, y, opcode="subtract")
    a.replace_all_uses_with(s)
    assert m.operands == [s, x] and a.users == [] and s.users == [m]
    assert c.remove_dead_instructions() == 1 and a not in c.instructions
    # the root moves with replace_all_uses_with
    n = add(c, m, m)
    m.replace_all_uses_with(n)
    assert c.root is n


def test_side_effecting_and_parameters_are_kept():
    c, x, y, a, m = small()
    dead = add(c, y, y)
    assert c.remove_dead_instructions() == 1
    assert dead not in c.instructions and x in c.instructions and y in c.instructions


def test_remove_errors():
    c, x, y, a, m = small()
    with pytest.raises(InvalidArgumentError, match=r"cannot remove %add: it is used by %multiply"):
        c.remove_instruction(a)
    with pytest.raises(InvalidArgumentError, match=r"cannot remove %multiply: it is the root of %c"):
        c.remove_instruction(m)


def test_clone_is_deep_and_independent():
    c, x, y, a, m = small()
    a.add_control_dependency_to(m)
    d = c.clone()
    assert d.name == "c.clone" and [i.name for i in d.instructions] == [i.name for i in c.instructions]
    assert all(i is not j for i, j in zip(d.instructions, c.instructions))
    assert d.root.operands[0].opcode == "add" and d.root.control_predecessors[0].name == "add"
    d.root.operands[0].replace_all_uses_with(d.parameters[0])
    assert m.operands[0] is a  # the original is untouched


def test_instruction_clone_carries_every_field():
    # One clone (XLA's CloneWithNewOperands) for the module clone, fusion, inlining and the
    # bisection's single-instruction modules: every field travels, computations are mapped.
    text = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add, sharding={replicated}, frontend_attributes={k="v"}, metadata={op_name="sum"}, backend_config="cfg"
}
"""
    m = parse_hlo_module(text)
    r = m.entry.root
    r.extras["statistics"] = "{visualizing_index=1,stat-1=33}"
    x, z = r.operands
    other = m.computation("add").clone(suffix="copy")
    copy = r.clone([z, z], {id(m.computation("add")): other}, name="r2")
    assert copy.operands == [z, z] and z.users.count(copy) == 1 and copy.parent is None
    assert (copy.opcode, copy.shape, copy.name) == (r.opcode, r.shape, "r2")
    assert copy.attrs["to_apply"] is other and copy.attrs["dimensions"] == (0,)
    assert (copy.metadata, copy.sharding, copy.backend_config) == \
        (r.metadata, r.sharding, r.backend_config)
    assert copy.frontend_attributes == {"k": "v"} and copy.extras == r.extras
    assert copy.extras is not r.extras and copy.frontend_attributes is not r.frontend_attributes
    assert r.clone([x, z]).attrs["to_apply"] is m.computation("add")  # unmapped: shared
    assert copy.control_predecessors == [] and r.attrs["to_apply"] is m.computation("add")


def test_unique_names():
    u = NameUniquer()
    assert [u.get_unique_name(n) for n in ["add", "add", "add.5", "add", "add.5", "a b"]] == [
        "add", "add.1", "add.5", "add.2", "add.3", "a_b"]
    c = Computation("c")
    x = param(c, 0, name="x")
    names = [add(c, x, x).name for _ in range(3)]
    assert names == ["add", "add.1", "add.2"]


def test_module_computations_and_clone():
    c, *_ = small()
    m = Module("m")
    m.add_computation(c, entry=True)
    assert m.entry is c and m.computation("c") is c and m.post_order_computations() == [c]
    m2 = m.clone()
    assert m2.name == "m-clone" and m2.entry is not c and m2.entry.name == "c"
    with pytest.raises(InvalidArgumentError, match="module m has no computation %nope"):
        m.computation("nope")
