"""map-inline: a map whose computation is elementwise becomes its instructions on whole
arrays (scalar constants broadcast, parameters the map's operands); other maps stay; the
results keep their bits (pass_check.check: random inputs with NaN/inf/-0)."""

import numpy as np
import pytest
from pass_check import check, opcodes

import xlapy
from xlapy.backends.cpu import backend as be
from xlapy.passes import MapInliner
from xlapy.runtime import Client


def _module(body, t="f32", dims="4,6", n=2, extra=""):
    mapped = ",".join(str(d) for d in range(len(dims.split(",")))) if dims else ""
    params = "\n".join(f"  p{i} = {t}[{dims}] parameter({i})" for i in range(n))
    names = ", ".join(f"p{i}" for i in range(n))
    return f"""
HloModule m
{extra}
f {{
{body}
}}
ENTRY e {{
{params}
  ROOT r = {t}[{dims}] map({names}), dimensions={{{mapped}}}, to_apply=f
}}
"""


def test_an_elementwise_body_with_a_constant_is_inlined():
    body = ("  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  c = f32[] constant(0.5)\n"
            "  m = f32[] multiply(x, c)\n  cmp = pred[] compare(m, y), direction=LT\n"
            "  ROOT s = f32[] select(cmp, m, y)")
    m = check(_module(body), ["map-inline"])
    ops = opcodes(m)
    assert ops["map"] == 0 and ops["broadcast"] == 1 and ops["select"] == 1
    assert [c.name for c in m.computations] == ["e"]


@pytest.mark.parametrize("t", ["s32", "u32", "pred", "bf16", "f64"])
def test_types_and_a_root_that_is_a_parameter(t):
    op = "or" if t == "pred" else "maximum"
    body = (f"  x = {t}[] parameter(0)\n  y = {t}[] parameter(1)\n"
            f"  ROOT z = {t}[] {op}(x, y)")
    m = check(_module(body, t), ["map-inline"])
    assert opcodes(m)["map"] == 0
    body = f"  x = {t}[] parameter(0)\n  ROOT y = {t}[] parameter(1)"
    m = check(_module(body, t), ["map-inline"])
    assert opcodes(m)["map"] == 0


def test_a_scalar_map_and_a_converting_body():
    body = "  x = s32[] parameter(0)\n  ROOT y = s32[] convert(x)"
    text = _module(body.replace("ROOT y = s32[] convert", "v = f32[] convert")
                   + "\n  ROOT y = s32[] convert(v)", "s32", "", 1)
    m = check(text, ["map-inline"])
    assert opcodes(m)["map"] == 0 and opcodes(m)["convert"] == 2


def test_non_elementwise_bodies_stay():
    body = ("  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
            "  ROOT z = f32[] call(x, y), to_apply=g")
    extra = "g {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}"
    m = xlapy.parse_hlo_module(_module(body, extra=extra))
    assert not MapInliner().run(m)
    body = ("  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
            "  b = f32[2] broadcast(x), dimensions={}\n"
            "  ROOT z = f32[] reduce(b, y), dimensions={0}, to_apply=g")
    m = xlapy.parse_hlo_module(_module(body, extra=extra))
    assert not MapInliner().run(m)


def test_the_cpu_backend_compiles_a_map():
    body = ("  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  c = f32[] constant(2)\n"
            "  m = f32[] multiply(x, c)\n  ROOT s = f32[] add(m, y)")
    module = xlapy.parse_hlo_module(_module(body))
    program = be.compile_module(module)
    assert program.interpreted() == []
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    got = Client(backend="cpu").compile(module)(a, b)
    np.testing.assert_array_equal(np.asarray(got), xlapy.evaluate(module, a, b))
