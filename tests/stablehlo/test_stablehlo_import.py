"""xlapy.parse_stablehlo: the MLIR syntax it reads and the HLO it makes, pinned against
what XLA's translation makes (the expected attributes below are XLA's, read from jax's
``as_text(dialect="hlo")`` for the same programs)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy import evaluate, parse_stablehlo, verify_module
from xlapy.shape import PrimitiveType as P


def module(text: str, **kw):
    m = parse_stablehlo(text, **kw)
    verify_module(m)
    return m


def run(text: str, *args):
    return evaluate(module(text), *args)


def ops(m) -> list[str]:
    return [i.opcode for i in m.entry.instructions]


def test_detection_by_content():
    assert xlapy.is_stablehlo_text("module @m {\n}")
    assert xlapy.is_stablehlo_text("// comment\n#loc = loc(unknown)\nfunc.func @main() {}")
    assert xlapy.is_stablehlo_text("module attributes {mhlo.num_replicas = 1 : i32} {}")
    assert not xlapy.is_stablehlo_text("HloModule m\nENTRY e { ROOT c = f32[] constant(1) }")
    assert not xlapy.is_stablehlo_text("ENTRY e { ROOT c = f32[] constant(1) }")


# -- syntax: the generic form and the custom forms give the same program -------------------

PRETTY = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [DEFAULT, HIGHEST] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = stablehlo.compare GT, %0, %0, FLOAT : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  %2 = stablehlo.select %1, %0, %0 : tensor<2x4xi1>, tensor<2x4xf32>
  %3 = stablehlo.add %2, %0 : tensor<2x4xf32>
  return %3 : tensor<2x4xf32>
}
"""
GENERIC = """
"func.func"() <{function_type = (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>, sym_name = "main"}> ({
^bb0(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>):
  %0 = "stablehlo.dot_general"(%a, %b) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision HIGHEST>]}> : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = "stablehlo.compare"(%0, %0) <{comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type FLOAT>}> : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  %2 = "stablehlo.select"(%1, %0, %0) : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = "stablehlo.add"(%2, %0) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  "func.return"(%3) : (tensor<2x4xf32>) -> ()
}) : () -> ()
"""


def _body(m) -> list[str]:
    return [line.split("=", 1)[1].strip() for line in m.to_string().splitlines()
            if " = " in line and "parameter(" not in line and "HloModule" not in line]


def test_generic_and_custom_syntax_agree():
    pretty, generic = module(PRETTY), module(GENERIC)
    assert _body(pretty) == _body(generic)
    text = pretty.to_string()
    assert "dot(%Arg_0, %Arg_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, " \
           "operand_precision={default,highest}" in text
    assert "direction=GT" in text and "type=" not in text.split("direction=GT")[1][:10]


def test_reduce_compact_and_region_forms():
    compact = """func.func @main(%x: tensor<4x3xf32>) -> tensor<3xf32> {
      %c = stablehlo.constant dense<0.0> : tensor<f32>
      %0 = stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [0] : (tensor<4x3xf32>, tensor<f32>) -> tensor<3xf32>
      return %0 : tensor<3xf32>
    }"""
    region = """func.func @main(%x: tensor<4x3xf32>) -> tensor<3xf32> {
      %c = stablehlo.constant dense<0.0> : tensor<f32>
      %0 = stablehlo.reduce(%x init: %c) across dimensions = [0] : (tensor<4x3xf32>, tensor<f32>) -> tensor<3xf32>
       reducer(%a: tensor<f32>, %b: tensor<f32>)  {
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }
      return %0 : tensor<3xf32>
    }"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for text in (compact, region):
        np.testing.assert_array_equal(run(text, x), x.sum(0))


def test_variadic_reduce_and_while_with_custom_syntax():
    text = """func.func @main(%x: tensor<5xf32>) -> (tensor<f32>, tensor<i32>, tensor<i32>) {
      %c = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %i0 = stablehlo.constant dense<0> : tensor<i32>
      %idx = stablehlo.iota dim = 0 : tensor<5xi32>
      %m:2 = stablehlo.reduce(%x init: %c), (%idx init: %i0) across dimensions = [0] : (tensor<5xf32>, tensor<5xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
       reducer(%a: tensor<f32>, %c2: tensor<f32>) (%b: tensor<i32>, %d: tensor<i32>)  {
        %gt = stablehlo.compare GT, %a, %c2 : (tensor<f32>, tensor<f32>) -> tensor<i1>
        %v = stablehlo.select %gt, %a, %c2 : tensor<i1>, tensor<f32>
        %j = stablehlo.select %gt, %b, %d : tensor<i1>, tensor<i32>
        stablehlo.return %v, %j : tensor<f32>, tensor<i32>
      }
      %ten = stablehlo.constant dense<10> : tensor<i32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %w = stablehlo.while(%k = %i0) : tensor<i32>
       cond {
        %lt = stablehlo.compare LT, %k, %ten : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %k1 = stablehlo.add %k, %one : tensor<i32>
        stablehlo.return %k1 : tensor<i32>
      }
      return %m#0, %m#1, %w : tensor<f32>, tensor<i32>, tensor<i32>
    }"""
    x = np.float32([1, 7, 3, 5, 2])
    v, i, k = run(text, x)
    assert (float(v), int(i), int(k)) == (7.0, 1, 10)


def test_slice_pad_transpose_concatenate_iota_custom_syntax():
    text = """func.func @main(%x: tensor<3x4xi32>) -> tensor<7x3xi32> {
      %0 = stablehlo.slice %x [0:3, 1:4:2] : (tensor<3x4xi32>) -> tensor<3x2xi32>
      %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<3x2xi32>) -> tensor<2x3xi32>
      %z = stablehlo.constant dense<-1> : tensor<i32>
      %2 = stablehlo.pad %1, %z, low = [1, 0], high = [0, 0], interior = [1, 0] : (tensor<2x3xi32>, tensor<i32>) -> tensor<4x3xi32>
      %3 = stablehlo.iota dim = 1 : tensor<3x3xi32>
      %4 = stablehlo.concatenate %2, %3, dim = 0 : (tensor<4x3xi32>, tensor<3x3xi32>) -> tensor<7x3xi32>
      return %4 : tensor<7x3xi32>
    }"""
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = x[:, 1::2].T
    want = np.concatenate([np.stack([[-1] * 3, t[0], [-1] * 3, t[1]]),
                           np.tile(np.arange(3, dtype=np.int32), (3, 1))])
    np.testing.assert_array_equal(run(text, x), want)


def test_convolution_custom_syntax():
    text = """func.func @main(%x: tensor<1x5x5x2xf32>, %w: tensor<3x3x2x4xf32>) -> tensor<1x3x3x4xf32> {
      %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 2], pad = [[1, 1], [1, 1]], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x5x5x2xf32>, tensor<3x3x2x4xf32>) -> tensor<1x3x3x4xf32>
      return %0 : tensor<1x3x3x4xf32>
    }"""
    conv = [i for i in module(text).entry.instructions if i.opcode == "convolution"][0]
    text_ = conv.parent.module.to_string()
    assert "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f" in text_


# -- types and literals ---------------------------------------------------------------------


@pytest.mark.parametrize("mlir,hlo", [
    ("i1", P.PRED), ("i2", P.S2), ("i4", P.S4), ("i8", P.S8), ("si16", P.S16), ("i32", P.S32),
    ("i64", P.S64), ("ui2", P.U2), ("ui4", P.U4), ("ui8", P.U8), ("ui64", P.U64),
    ("f16", P.F16), ("bf16", P.BF16), ("f32", P.F32), ("f64", P.F64),
    ("f8E4M3FN", P.F8E4M3FN), ("f8E5M2", P.F8E5M2), ("f8E4M3FNUZ", P.F8E4M3FNUZ),
    ("f8E5M2FNUZ", P.F8E5M2FNUZ), ("f8E4M3B11FNUZ", P.F8E4M3B11FNUZ), ("f8E4M3", P.F8E4M3),
    ("f8E3M4", P.F8E3M4), ("f8E8M0FNU", P.F8E8M0FNU), ("f4E2M1FN", P.F4E2M1FN),
    ("f6E2M3FN", P.F6E2M3FN), ("f6E3M2FN", P.F6E3M2FN),
    ("complex<f32>", P.C64), ("complex<f64>", P.C128),
])
def test_every_element_type(mlir, hlo):
    m = module(f"func.func @main(%x: tensor<2x{mlir}>) -> tensor<2x{mlir}> {{\n"
               f"  return %x : tensor<2x{mlir}>\n}}")
    assert m.entry.root.shape.element_type == hlo


def test_dense_literals():
    text = """func.func @main() -> (tensor<3xf32>, tensor<2x2xi32>, tensor<4xbf16>, tensor<3xi4>,
                              tensor<2xcomplex<f32>>, tensor<3xi1>, tensor<2xf8E4M3FN>,
                              tensor<0xf32>, tensor<2xui8>, tensor<2xf32>) {
      %a = stablehlo.constant dense<[1.5, -0.000000e+00, 0x7F800000]> : tensor<3xf32>
      %b = stablehlo.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi32>
      %c = stablehlo.constant dense<[0x7FC0, 1.0, -2.5, 0x0001]> : tensor<4xbf16>
      %d = stablehlo.constant dense<"0x07F80F"> : tensor<3xi4>
      %e = stablehlo.constant dense<[(1.0, -2.0), (0.5, 0x7F800000)]> : tensor<2xcomplex<f32>>
      %f = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>
      %g = stablehlo.constant dense<[448.0, 0x81]> : tensor<2xf8E4M3FN>
      %h = stablehlo.constant dense<> : tensor<0xf32>
      %i = stablehlo.constant dense<255> : tensor<2xui8>
      %j = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
      return %a, %b, %c, %d, %e, %f, %g, %h, %i, %j : tensor<3xf32>, tensor<2x2xi32>, tensor<4xbf16>, tensor<3xi4>, tensor<2xcomplex<f32>>, tensor<3xi1>, tensor<2xf8E4M3FN>, tensor<0xf32>, tensor<2xui8>, tensor<2xf32>
    }"""
    a, b, c, d, e, f, g, h, i, j = run(text)
    assert a.tolist() == [1.5, 0.0, np.inf] and np.signbit(a[1])
    assert b.tolist() == [[1, -2], [3, 4]]
    assert np.isnan(float(c[0])) and c[1:3].astype(np.float32).tolist() == [1.0, -2.5]
    assert c.view(np.uint16)[3] == 1
    assert d.dtype == ml_dtypes.int4 and d.astype(np.int8).tolist() == [7, -8, -1]
    assert e.tolist() == [1 - 2j, complex(0.5, np.inf)]
    assert f.tolist() == [True, False, True]
    assert g.view(np.uint8).tolist() == [0x7E, 0x81]
    assert h.shape == (0,)
    assert i.tolist() == [255, 255]
    assert j.tolist() == [1.0, 2.0]


def test_dense_resource_blobs():
    text = """func.func @main() -> tensor<2xi32> {
      %0 = stablehlo.constant dense_resource<blob1> : tensor<2xi32>
      return %0 : tensor<2xi32>
    }
    {-#
      dialect_resources: {
        builtin: {
          blob1: "0x040000000500000006000000"
        }
      }
    #-}"""
    assert run(text).tolist() == [5, 6]


def test_large_splats_are_a_broadcast_small_ones_a_constant():
    big = module("""func.func @main() -> tensor<4x8xf32> {
      %0 = stablehlo.constant dense<2.0> : tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    }""")
    assert ops(big) == ["constant", "broadcast"] and big.entry.root.opcode == "broadcast"
    small = module("""func.func @main() -> tensor<4x7xf32> {
      %0 = stablehlo.constant dense<2.0> : tensor<4x7xf32>
      return %0 : tensor<4x7xf32>
    }""")
    assert ops(small) == ["constant"]


def test_bounded_dynamic_dimensions():
    m = module("""func.func @main(%x: tensor<?x4xf32, #stablehlo.bounds<8, ?>>) -> tensor<?x4xf32, #stablehlo.bounds<8, ?>> {
      %0 = stablehlo.negate %x : tensor<?x4xf32, #stablehlo.bounds<8, ?>>
      return %0 : tensor<?x4xf32, #stablehlo.bounds<8, ?>>
    }""")
    assert str(m.entry.root.shape) == "f32[<=8,4]{1,0}"


# -- module, functions, regions --------------------------------------------------------------


def test_module_and_argument_attributes():
    m = module("""
    module @jit_f attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 3 : i32,
                              mhlo.frontend_attributes = {a = "b"}} {
      func.func public @main(%arg0: tensor<4xf32> {tf.aliasing_output = 1 : i32, mhlo.sharding = "{replicated}", mhlo.frontend_attributes = {k = "v"}},
                             %arg1: tensor<4xf32> {jax.buffer_donor = true}) -> (tensor<4xf32> {jax.result_info = "r0", mhlo.sharding = "{maximal device=0}"}, tensor<4xf32>) {
        return %arg1, %arg0 : tensor<4xf32>, tensor<4xf32>
      }
    }""")
    text = m.to_string()
    assert text.startswith("HloModule jit_f, input_output_alias={ {1}: (0, {}, may-alias) }, "
                           "buffer_donor={ (1, {}) }")
    assert "replica_count=3, num_partitions=2" in text
    assert 'frontend_attributes={a="b"}' in text.splitlines()[0]
    p0 = m.entry.parameter(0)
    assert p0.sharding == "{replicated}" and p0.frontend_attributes == {"k": "v"}
    assert m.entry.root.opcode == "tuple"
    assert m.entry.root.sharding == "{{maximal device=0}, {replicated}}"


def test_a_single_output_is_not_a_tuple_and_aliases_index_it_with_empty():
    m = module("""func.func @main(%arg0: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {
      return %arg0 : tensor<4xf32>
    }""")
    assert m.entry.root.opcode == "parameter"
    assert "input_output_alias={ {}: (0, {}, may-alias) }" in m.to_string()


@pytest.mark.parametrize("spec,mesh,want", [  # XLA's shardings for jax's specs
    ('[{"x"}, {}]', '["x"=2, "y"=4]', "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
    ('[{"y"}, {"x"}]', '["x"=2, "y"=4]', "{devices=[4,2]<=[2,4]T(1,0)}"),
    ('[{}, {"y"}]', '["x"=2, "y"=4]', "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"),
    ('[{"x", "y"}, {}]', '["x"=2, "y"=4]', "{devices=[8,1]<=[8]}"),
    ('[{"x"}, {}]', '["x"=1]', "{replicated}"),
    ('[{}, {}]', '["x"=4]', "{replicated}"),
])
def test_shardy_shardings(spec, mesh, want):
    m = module(f"""module @m {{
      sdy.mesh @mesh = <{mesh}>
      func.func @main(%arg0: tensor<8x8xf32> {{sdy.sharding = #sdy.sharding<@mesh, {spec}>}}) -> tensor<8x8xf32> {{
        %0 = sdy.sharding_constraint %arg0 <@mesh, {spec}> : tensor<8x8xf32>
        return %0 : tensor<8x8xf32>
      }}
    }}""")
    p0 = m.entry.parameter(0)
    assert p0.sharding == want
    assert p0.frontend_attributes["xla.sdy.sharding"] == f"#sdy.sharding<@mesh, {spec}>"
    root = m.entry.root
    assert root.attrs["custom_call_target"] == "Sharding" and root.sharding == want
    assert root.frontend_attributes["xla.sdy.sharding"] == \
        f"#sdy.sharding_per_value<[<@mesh, {spec}>]>"
    assert m.config["frontend_attributes"]["xla.sdy.meshes"] == \
        f"{{mesh = #sdy.mesh<{mesh}>}}"


SHARD_MAP = """module @m attributes {mhlo.num_partitions = 8 : i32} {
  sdy.mesh @mesh = <["x"=4, "y"=2]>
  func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<4x4xf32>) -> (tensor<8x8xf32>, tensor<4x4xf32>) {
    %0:2 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{}, {"y"}]>] manual_axes={"x", "y"} (%arg2: tensor<2x4xf32>, %arg3: tensor<4x2xf32>) {
      %1 = stablehlo.negate %arg2 : tensor<2x4xf32>
      sdy.return %1, %arg3 : tensor<2x4xf32>, tensor<4x2xf32>
    } : (tensor<8x8xf32>, tensor<4x4xf32>) -> (tensor<8x8xf32>, tensor<4x4xf32>)
    return %0#0, %0#1 : tensor<8x8xf32>, tensor<4x4xf32>
  }
}"""

SHARD_MAP_GENERIC = """module @m attributes {mhlo.num_partitions = 8 : i32} {
  sdy.mesh @mesh = <["x"=4, "y"=2]>
  func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<4x4xf32>) -> (tensor<8x8xf32>, tensor<4x4xf32>) {
    %0:2 = "sdy.manual_computation"(%arg0, %arg1) <{in_shardings = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{}, {"y"}]>]>, manual_axes = #sdy<manual_axes{"x", "y"}>, out_shardings = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{}, {"y"}]>]>}> ({
    ^bb0(%arg2: tensor<2x4xf32>, %arg3: tensor<4x2xf32>):
      %1 = stablehlo.negate %arg2 : tensor<2x4xf32>
      "sdy.return"(%1, %arg3) : (tensor<2x4xf32>, tensor<4x2xf32>) -> ()
    }) : (tensor<8x8xf32>, tensor<4x4xf32>) -> (tensor<8x8xf32>, tensor<4x4xf32>)
    return %0#0, %0#1 : tensor<8x8xf32>, tensor<4x4xf32>
  }
}"""


def test_a_shard_map_is_written_as_xlas_round_trip_writes_it():
    # the HLO jax's as_text(dialect="hlo") holds for a shard_map: GlobalToLocalShape, a call
    # of the body (not inlineable), LocalToGlobalShape, the shardings kept as frontend
    # attributes
    m = module(SHARD_MAP)
    entry = m.entry
    g2l, l2g = (i for i in entry.instructions if i.opcode == "custom-call")
    assert g2l.attrs["custom_call_target"] == "xla.sdy.GlobalToLocalShape"
    assert str(g2l.shape) == "(f32[2,4]{1,0}, f32[4,2]{1,0})"
    assert g2l.attrs["custom_call_has_side_effect"]
    assert g2l.frontend_attributes == {
        "xla.sdy.in_shardings": '#sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>, '
                                '<@mesh, [{}, {"y"}]>]>',
        "xla.sdy.manual_axes": '#sdy<manual_axes{"x", "y"}>'}
    call = next(i for i in entry.instructions if i.opcode == "call")
    body = call.attrs["to_apply"]
    assert body.name.startswith("xla.sdy.manual_computation_body")
    assert [str(p.shape) for p in body.parameters] == ["f32[2,4]{1,0}", "f32[4,2]{1,0}"]
    assert call.frontend_attributes == {"inlineable": "false"}
    assert all(o.opcode == "get-tuple-element" and o.operands[0] is g2l for o in call.operands)
    assert l2g.attrs["custom_call_target"] == "xla.sdy.LocalToGlobalShape"
    assert str(l2g.shape) == "(f32[8,8]{1,0}, f32[4,4]{1,0})"
    assert l2g.frontend_attributes["xla.sdy.out_shardings"] == \
        '#sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{}, {"y"}]>]>'
    assert [o.operands[0] for o in entry.root.operands] == [l2g, l2g]


def test_the_generic_form_of_a_shard_map_reads_the_same():
    assert module(SHARD_MAP_GENERIC).to_string() == module(SHARD_MAP).to_string()


def test_shardy_markers_and_result_shardings():
    m = module("""module @m {
      sdy.mesh @mesh = <["i"=4]>
      func.func @main(%arg0: tensor<8xf32>) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}]>}) {
        %0 = sdy.reshard %arg0 <@mesh, [{"i"}]> : tensor<8xf32>
        sdy.sharding_group %0 group_id=2 : tensor<8xf32>
        %1 = sdy.propagation_barrier %0 allowed_direction=BACKWARD : tensor<8xf32>
        return %1 : tensor<8xf32>
      }
    }""")
    calls = {i.attrs["custom_call_target"]: i for i in m.entry.instructions
             if i.opcode == "custom-call"}
    assert calls["Sharding"].sharding == "{devices=[4]<=[4]}"
    assert calls["xla.sdy.ShardingGroup"].frontend_attributes == {
        "xla.sdy.sharding_group_id": "2 : i64"}
    assert str(calls["xla.sdy.ShardingGroup"].shape) == "()"
    assert calls["xla.sdy.PropagationBarrier"].frontend_attributes == {
        "xla.sdy.allowed_direction": "#sdy<propagation_direction BACKWARD>"}
    result = calls["xla.sdy.FuncResultSharding"]
    assert result.operands[0] is calls["xla.sdy.PropagationBarrier"]
    assert result.frontend_attributes == {
        "xla.sdy.sharding": '#sdy.sharding_per_value<[<@mesh, [{"i"}]>]>'}
    # one result with a sharding: a tuple and get-tuple-element carry it (XLA's translation)
    root = m.entry.root
    assert root.opcode == "get-tuple-element" and root.sharding == "{devices=[4]<=[4]}"
    assert root.operands[0].operands == [result]


def test_a_shard_map_body_is_isolated_and_checked():
    with pytest.raises(xlapy.ParseError, match="use of undefined value '%arg0'"):
        module(SHARD_MAP.replace("stablehlo.negate %arg2", "stablehlo.negate %arg0"))
    with pytest.raises(xlapy.ParseError, match="2 operands but the body takes 1"):
        module(SHARD_MAP.replace(", %arg3: tensor<4x2xf32>) {", ") {").replace(
            "sdy.return %1, %arg3 : tensor<2x4xf32>, tensor<4x2xf32>",
            "sdy.return %1, %1 : tensor<2x4xf32>, tensor<2x4xf32>"))
    with pytest.raises(xlapy.ParseError, match="expected 'manual_axes'"):
        module(SHARD_MAP.replace(' manual_axes={"x", "y"}', ""))


def test_calls_between_functions_and_composites():
    m = module("""
    func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = call @helper(%x, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %1 = func.call @helper(%0, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %2 = stablehlo.composite "my.op" %1 {composite_attributes = {n = 2 : i64}, decomposition = @impl, version = 3 : i32} : (tensor<3xf32>) -> tensor<3xf32>
      return %2 : tensor<3xf32>
    }
    func.func private @helper(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
      %0 = stablehlo.multiply %a, %b : tensor<3xf32>
      return %0 : tensor<3xf32>
    }
    func.func private @impl(%a: tensor<3xf32>) -> tensor<3xf32> {
      %0 = stablehlo.negate %a : tensor<3xf32>
      return %0 : tensor<3xf32>
    }""")
    calls = [i for i in m.entry.instructions if i.opcode == "call"]
    assert [c.attrs["to_apply"].name for c in calls] == ["helper", "helper", "impl"]
    comp = calls[2]
    assert comp.attrs["is_composite"] is True
    assert comp.frontend_attributes == {"composite.attributes": "{n = 2 : i64}",
                                        "composite.name": "my.op", "composite.version": "3"}
    x = np.float32([1, 2, 3])
    np.testing.assert_array_equal(evaluate(m, x), -(x * x * x))


def test_case_and_if_pass_captured_values_as_branch_operands():
    text = """func.func @main(%i: tensor<i32>, %x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
      %0 = "stablehlo.case"(%i) ({
        %c = stablehlo.constant dense<1.0> : tensor<3xf32>
        %s = stablehlo.add %x, %c : tensor<3xf32>
        stablehlo.return %s : tensor<3xf32>
      }, {
        %s = stablehlo.multiply %x, %y : tensor<3xf32>
        stablehlo.return %s : tensor<3xf32>
      }, {
        %c = stablehlo.constant dense<7.0> : tensor<3xf32>
        stablehlo.return %c : tensor<3xf32>
      }) : (tensor<i32>) -> tensor<3xf32>
      %p = stablehlo.constant dense<true> : tensor<i1>
      %1 = "stablehlo.if"(%p) ({
        stablehlo.return %x : tensor<3xf32>
      }, {
        stablehlo.return %y : tensor<3xf32>
      }) : (tensor<i1>) -> tensor<3xf32>
      return %0, %1 : tensor<3xf32>, tensor<3xf32>
    }"""
    m = module(text)
    case = [i for i in m.entry.instructions if i.opcode == "conditional"][0]
    branches = case.attrs["branch_computations"]
    # one capture: the value itself; two: a tuple; none: the empty tuple
    assert [b.parameter(0).shape.to_string(False) for b in branches] == \
        ["f32[3]", "(f32[3], f32[3])", "()"]
    assert [b.parameter(0).name.split(".")[0] for b in branches] == \
        ["Arg_", "arg_tuple", "arg_empty_tuple"]
    x, y = np.float32([1, 2, 3]), np.float32([4, 5, 6])
    for index, want in [(0, x + 1), (1, x * y), (2, np.full(3, 7, np.float32)),
                        (5, np.full(3, 7, np.float32))]:
        got, got_if = evaluate(m, np.int32(index), x, y)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_if, x)


def test_while_carries_captured_values():
    text = """func.func @main(%x: tensor<f32>, %step: tensor<f32>) -> tensor<f32> {
      %c10 = stablehlo.constant dense<10.0> : tensor<f32>
      %w = stablehlo.while(%v = %x) : tensor<f32>
       cond {
        %lt = stablehlo.compare LT, %v, %c10 : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %n = stablehlo.add %v, %step : tensor<f32>
        stablehlo.return %n : tensor<f32>
      }
      return %w : tensor<f32>
    }"""
    m = module(text)
    loop = [i for i in m.entry.instructions if i.opcode == "while"][0]
    assert loop.operands[0].opcode == "tuple" and len(loop.operands[0].operands) == 2
    assert float(evaluate(m, np.float32(0), np.float32(3))) == 12.0


def test_locations_name_instructions():
    text = """#loc1 = loc("x")
    module @m {
      func.func @main(%arg0: tensor<2xf32> loc("x")) -> tensor<2xf32> {
        %0 = stablehlo.sine %arg0 : tensor<2xf32> loc(#loc4)
        return %0 : tensor<2xf32> loc(#loc)
      } loc(#loc)
    } loc(#loc)
    #loc = loc(unknown)
    #loc2 = loc("f.py":3:4 to :9)
    #loc3 = loc(callsite(#loc2 at #loc2))
    #loc4 = loc("jit(f)/sin"(#loc3))
    """
    m = module(text)
    assert m.entry.parameter(0).name == "x"
    sin = m.entry.root
    assert sin.name == "sin" and sin.metadata.op_name == "jit(f)/sin"


def test_custom_calls():
    m = module("""func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
      %0 = stablehlo.custom_call @foo(%x) {backend_config = "some text", has_side_effect = true} : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %1 = stablehlo.custom_call @bar(%0) {api_version = 4 : i32, backend_config = {n = 1 : i64}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %2 = stablehlo.custom_call @lapack_ffi(%x) {backend_config = "", mhlo.backend_config = {uplo = 76 : ui8}, mhlo.frontend_attributes = {num_batch_dims = "0"}, sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=2, j=3}, custom>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
      return %2, %1 : tensor<2x3xf32>, tensor<2x3xf32>
    }""")
    text = m.to_string()
    assert 'custom_call_target="foo", custom_call_has_side_effect=true, ' \
           'backend_config="some text"' in text
    assert ('custom-call(%custom-call), custom_call_target="bar", operand_layout_constraints='
            '{f32[2,3]{0,1}}, output_to_operand_aliasing={{}: (0, {})}, '
            'api_version=API_VERSION_TYPED_FFI, backend_config={n = 1 : i64}') in text
    # jax's typed-FFI calls: the dictionary becomes the config (as in the linalg fixtures)
    assert ('custom_call_target="lapack_ffi", api_version=API_VERSION_TYPED_FFI, '
            'frontend_attributes={num_batch_dims="0",xla.sdy.sharding_rule="#sdy.op_sharding_rule'
            '<([i, j])->([i, j]) {i=2, j=3}, custom>"}, backend_config={uplo = 76 : ui8}') in text


def test_chlo_broadcasting_ops():
    text = """func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>) {
      %0 = chlo.broadcast_add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %1 = chlo.broadcast_multiply %a, %c {broadcast_dimensions = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
      %2 = chlo.broadcast_compare %a, %b {comparison_direction = #chlo<comparison_direction LT>} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
      return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>
    }"""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b, c = np.float32([10, 2, 3]), np.float32([-1, 2])
    s, p, lt = run(text, a, b, c)
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(p, a * c[:, None])
    np.testing.assert_array_equal(lt, a < b)


def test_chlo_high_level_ops_are_hlo_ops():
    m = module("""func.func @main(%x: tensor<4x10xf32>) -> (tensor<4x10xf32>, tensor<4x3xf32>, tensor<4x3xi32>) {
      %0 = chlo.erf %x : tensor<4x10xf32> -> tensor<4x10xf32>
      %values, %indices = chlo.top_k(%x, k = 3) : tensor<4x10xf32> -> (tensor<4x3xf32>, tensor<4x3xi32>)
      return %0, %values, %indices : tensor<4x10xf32>, tensor<4x3xf32>, tensor<4x3xi32>
    }""")
    assert {"erf", "topk"} <= set(ops(m))
    x = np.random.default_rng(0).standard_normal((4, 10)).astype(np.float32)
    _, v, i = evaluate(m, x)
    np.testing.assert_array_equal(v, -np.sort(-x, axis=1)[:, :3])
    np.testing.assert_array_equal(np.take_along_axis(x, i, 1), v)


def test_entry_choice():
    two = """func.func @f(%x: tensor<f32>) -> tensor<f32> { return %x : tensor<f32> }
    func.func @g(%x: tensor<f32>) -> tensor<f32> {
      %0 = stablehlo.negate %x : tensor<f32>
      return %0 : tensor<f32>
    }"""
    assert float(evaluate(module(two, entry="g"), np.float32(2))) == -2.0
    with pytest.raises(xlapy.ParseError, match=r"`main` function .* 2: @f, @g"):
        parse_stablehlo(two)
