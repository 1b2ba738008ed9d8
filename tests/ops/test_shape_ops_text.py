"""Shape ops in HLO text: a module using every shape opcode reads and prints back byte for
byte (attribute syntax: dimensions, slice, padding, dynamic_slice_sizes, index,
iota_dimension, inferred_dimension), and the builder's BroadcastInDim prints as XLA's does."""

from xlapy import ops
from xlapy.hlo.printer import module_to_string
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape

MODULE = """\
HloModule m, entry_computation_layout={(f32[3,3,4,4]{3,2,1,0}, f32[1,25,7,7,10]{4,3,2,1,0}, s32[2,2,258]{2,1,0}, s32[], f32[2]{0}, /*index=5*/s32[1,1,25,1]{3,2,1,0}, s32[1,1,2,1]{3,2,1,0}, s32[4]{0})->(f32[3,3,2,4]{3,2,1,0}, f32[1,15,6,3,35]{4,3,2,1,0}, s32[2,2,258]{2,1,0}, f32[<=2]{0}, s32[], /*index=5*/f32[106]{0}, s32[1,1,25,1]{3,2,1,0})}

ENTRY %e (p0: f32[3,3,4,4], input: f32[1,25,7,7,10], op: s32[2,2,258], i: s32[], v: f32[2], big: s32[1,1,25,1], upd: s32[1,1,2,1], idx: s32[4]) -> (f32[3,3,2,4], f32[1,15,6,3,35], s32[2,2,258], f32[<=2], s32[], /*index=5*/f32[106], s32[1,1,25,1]) {
  %p0 = f32[3,3,4,4]{3,2,1,0} parameter(0)
  %slice = f32[3,3,2,4]{3,2,1,0} slice(f32[3,3,4,4]{3,2,1,0} %p0), slice={[0:3:1], [0:3:1], [0:4:2], [0:4:1]}
  %input = f32[1,25,7,7,10]{4,3,2,1,0} parameter(1)
  %constant = f32[] constant(0)
  %pad = f32[1,15,6,3,35]{4,3,2,1,0} pad(f32[1,25,7,7,10]{4,3,2,1,0} %input, f32[] %constant), padding=0_0_0x0_-10_0x0_-1_0x-2_-2_0x-1_-1_3
  %op = s32[2,2,258]{2,1,0} parameter(2)
  %i = s32[] parameter(3)
  %dynamic-slice = s32[2,2,258]{2,1,0} dynamic-slice(s32[2,2,258]{2,1,0} %op, s32[] %i, s32[] %i, s32[] %i), dynamic_slice_sizes={2,2,258}
  %v = f32[2]{0} parameter(4)
  %set-dimension-size = f32[<=2]{0} set-dimension-size(f32[2]{0} %v, s32[] %i), dimensions={0}
  %get-dimension-size = s32[] get-dimension-size(f32[<=2]{0} %set-dimension-size), dimensions={0}
  %s = s32[] slice(s32[] %get-dimension-size), slice={}
  %p = s32[] pad(s32[] %s, s32[] %i), padding=
  %broadcast = f32[3,2,1,1]{3,2,1,0} broadcast(f32[2]{0} %v), dimensions={1}
  %reshape = f32[6]{0} reshape(f32[3,2,1,1]{3,2,1,0} %broadcast), inferred_dimension=0
  %iota = f32[100]{0} iota(), iota_dimension=0
  %concatenate = f32[106]{0} concatenate(f32[6]{0} %reshape, f32[100]{0} %iota), dimensions={0}
  %t = (f32[106]{0}, f32[]) tuple(f32[106]{0} %concatenate, f32[] %constant)
  %get-tuple-element = f32[106]{0} get-tuple-element((f32[106]{0}, f32[]) %t), index=0
  %reverse = f32[106]{0} reverse(f32[106]{0} %get-tuple-element), dimensions={0}
  %transpose = f32[1,1,2,3]{1,0,2,3} transpose(f32[3,2,1,1]{3,2,1,0} %broadcast), dimensions={3,2,1,0}
  %bitcast = f32[6]{0} bitcast(f32[1,1,2,3]{1,0,2,3} %transpose)
  %dynamic-update-slice = f32[106]{0} dynamic-update-slice(f32[106]{0} %reverse, f32[6]{0} %bitcast, s32[] %i)
  %big = s32[1,1,25,1]{3,2,1,0} parameter(5)
  %upd = s32[1,1,2,1]{3,2,1,0} parameter(6)
  %idx = s32[4]{0} parameter(7)
  %dynamic-update-slice.1 = s32[1,1,25,1]{3,2,1,0} dynamic-update-slice(s32[1,1,25,1]{3,2,1,0} %big, s32[1,1,2,1]{3,2,1,0} %upd, s32[4]{0} %idx)
  ROOT %t.1 = (f32[3,3,2,4]{3,2,1,0}, f32[1,15,6,3,35]{4,3,2,1,0}, s32[2,2,258]{2,1,0}, f32[<=2]{0}, s32[], /*index=5*/f32[106]{0}, s32[1,1,25,1]{3,2,1,0}) tuple(f32[3,3,2,4]{3,2,1,0} %slice, f32[1,15,6,3,35]{4,3,2,1,0} %pad, s32[2,2,258]{2,1,0} %dynamic-slice, f32[<=2]{0} %set-dimension-size, s32[] %p, /*index=5*/f32[106]{0} %dynamic-update-slice, s32[1,1,25,1]{3,2,1,0} %dynamic-update-slice.1)
}

"""


def test_shape_ops_module_round_trips():
    module = parse_hlo_module(MODULE)
    assert module_to_string(module, print_operand_shape=True) == MODULE
    by_name = {i.name: i for i in module.entry.instructions}
    assert by_name["slice"].attrs["slice"].strides == (1, 1, 2, 1)
    assert by_name["pad"].attrs["padding"].dimensions[4].interior_padding == 3
    assert by_name["reshape"].attrs["inferred_dimension"] == 0
    assert str(by_name["set-dimension-size"].shape) == "f32[<=2]{0}"


def test_builder_broadcast_in_dim_prints_as_xla():
    b = XlaBuilder("bid")
    x = ops.Parameter(b, 0, parse_shape("f32[1,2]"), "x")
    comp = b.build(ops.BroadcastInDim(x, [4, 3, 2], [1, 2]))
    assert comp.as_hlo_text() == """\
HloModule bid, entry_computation_layout={(f32[1,2]{1,0})->f32[4,3,2]{2,1,0}}

ENTRY %bid (x: f32[1,2]) -> f32[4,3,2] {
  %x = f32[1,2]{1,0} parameter(0)
  %broadcast = f32[4,1,2]{2,1,0} broadcast(%x), dimensions={1,2}
  %reshape = f32[4,2]{1,0} reshape(%broadcast)
  ROOT %broadcast.1 = f32[4,3,2]{2,1,0} broadcast(%reshape), dimensions={0,2}
}

"""
