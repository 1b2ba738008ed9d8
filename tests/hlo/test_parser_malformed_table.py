"""Malformed HLO text, ported from the error tests of XLA's xla/hlo/parser/hlo_parser_test.cc
(the ExpectHasSubstr / HasSubstr ones, and those that only expect a failure): every case
raises xlapy.errors.ParseError (never another exception) at the pinned line and column, with
xlapy's pinned message saying what was expected. Where xlapy keeps XLA's wording, ``xla``
is XLA's substring and must appear too; otherwise XLA's substring is in a comment.

The cases are read as XLA's tests read them, with ParseAndReturnUnverifiedModule
(``parse_hlo_module(text, verify=False)``), and the messages framed as XLA frames them
(``was parsing LINE:COLUMN: error: ...``). tools/xla_parser_tests.py runs XLA's own file.

Left out (xlapy deliberately differs):
- AsyncUpdate_AsyncStart_ShapeMismatch_Allowed, AsyncStartWith*Operands, ... (XLA accepts them
  unverified): not error tests; see roundtrip_rows_xla_other.py for those xlapy accepts.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest

from xlapy.errors import ParseError
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


class Case(NamedTuple):
    name: str
    text: str
    line: int
    column: int
    message: str  # regex, matched after "was parsing LINE:COLUMN: error: " (XLA's framing)
    xla: str | None = None  # XLA's expected substring: it must appear in the message


MALFORMED = [
    # XLA's text is of an old syntax (pred[]{} layouts); both reject it
    Case("WrongOpcode", r"""HloModule wrong_opcode:

ENTRY %blabla (x: f32[], y: f32[]) -> f32[] {
  %x = f32[]{} parameter(0)
  %y = f32[]{} parameter(1)
  %le = pred[]{} le(f32[]{} %x, f32[]{} %y)
}

""",
         4, 13, r"expects opcode, found '\{'"),
    Case("InvalidDebugLogMode", r"""HloModule module, entry_computation_layout={()->s32[1,3]{1,0}},
debug_attributes={
  {"constant"}:({log_mode=invalid_mode})
}

ENTRY %e () -> s32[1,3] {
  ROOT %c = s32[1,3]{1,0} constant({ { 0, 1, 2 } }), origin={{"constant"}}
}
""",
         3, 27, r"Invalid debug_log_mode value: invalid_mode \(expected default or fusion_debugger\)"),
    Case("WrongShape", r"""HloModule wrong_opcode:

ENTRY %blabla (x: g32[]) -> g32[] {
  %x = g32[]{} parameter(0)
}

""",
         3, 19, r"expected primitive type \(f32, bf16, s32, pred, token, \.\.\.\) or '\(' for a tuple, found 'g32'"),
    # old syntax, as WrongOpcode
    Case("WrongOperandsSize", r"""HloModule wrong_opcode:

ENTRY %blabla (x: f32[]) -> pred[] {
  %x = f32[]{} parameter(0)
  %eq = pred[]{} compare(f32[]{} %x), direction=EQ
}

""",
         4, 13, r"expects opcode, found '\{'"),
    # old syntax, as WrongOpcode
    Case("OperandNotFound", r"""HloModule operand_not_found:
ENTRY %blabla (x: f32[]) -> pred[] {
  %x = f32[]{} parameter(0)
  %eq = pred[]{} compare(f32[]{} %x, f32[]{} %y), direction=EQ
}
""",
         3, 13, r"expects opcode, found '\{'"),
    Case("CompactGteNonTuple", r"""HloModule test
ENTRY test {
  p0 = f32[10] parameter(0)
  ROOT root = f32[10] add(f32[10] %p0#0, f32[10] %p0#0)
}""",
         4, 39, r"GTE operand must be tuple, but has shape: f32\[10\]\{0\}", xla='GTE operand must be tuple'),
    Case("CompactGteIndexOutOfBounds", r"""HloModule test
ENTRY test {
  p0 = (f32[10], f16[10]) parameter(0)
  ROOT root = f32[10] add(f32[10] %p0#2, f32[10] %p0#2)
}""",
         4, 39, r"GTE index 2 out of bounds for shape: \(f32\[10\]\{0\}, f16\[10\]\{0\}\)", xla='GTE index 2 out of bounds'),
    Case("CompactGteInvalidIndex", r"""HloModule test
ENTRY test {
  p0 = (f32[10], f16[10]) parameter(0)
  ROOT root = f32[10] add(f32[10] %p0#a, f32[10] %p0#a)
}""",
         4, 39, r"expects integer \(a tuple index after '#'\), found 'a'", xla='expects integer'),
    Case("CompactGteNegativeIndex", r"""HloModule test
ENTRY test {
  p0 = (f32[10], f16[10]) parameter(0)
  ROOT root = f32[10] add(f32[10] %p0#-1, f32[10] %p0#-1)
}""",
         4, 39, r"GTE index -1 out of bounds for shape: \(f32\[10\]\{0\}, f16\[10\]\{0\}\)", xla='GTE index -1 out of bounds'),
    Case("MeshReplicaGroupInvalidAxisName", r"""HloModule m

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT a = f32[] add(lhs, rhs)
}

ENTRY e {
  p = f32[128,32] parameter(0)
  ROOT ar = f32[128,32] all-reduce(p), replica_groups=mesh['axis_0'=2,'axis_1'=2] {'bogus'}, to_apply=add
}""",
         11, 84, r"'bogus' is not a valid axis name or index of mesh mesh\['axis_0'=2,'axis_1'=2\]", xla='is not a valid axis name or index'),
    Case("MeshReplicaGroupAxisIndexOutOfBounds", r"""HloModule m

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT a = f32[] add(lhs, rhs)
}

ENTRY e {
  p = f32[128,32] parameter(0)
  ROOT ar = f32[128,32] all-reduce(p), replica_groups=mesh['axis_0'=2,'axis_1'=2] {'5'}, to_apply=add
}""",
         11, 84, r"axis index 5 is out of bounds for mesh mesh\['axis_0'=2,'axis_1'=2\]", xla='out of bounds for mesh'),
    Case("MeshReplicaGroupDeviceIdsCountMismatch", r"""HloModule m

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT a = f32[] add(lhs, rhs)
}

ENTRY e {
  p = f32[128,32] parameter(0)
  ROOT ar = f32[128,32] all-reduce(p), replica_groups=mesh['axis_0'=2,'axis_1'=2, device_ids=(0,1,2)] {'axis_0'}, to_apply=add
}""",
         11, 95, r"the mesh has 4 devices, but device_ids lists 3", xla='device_ids'),
    Case("AllGatherEmptyDimensions", r"""HloModule m
ENTRY e {
  input = f32[128,32]{0,1} parameter(0)
  ROOT ag = f32[128,128]{0,1} all-gather(input), replica_groups={}, dimensions={}
}""",
         4, 80, r"expected exactly one dimension, e\.g\. dimensions=\{0\}, got \{\}"),
    Case("ReduceScatterEmptyDimensions", r"""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  input = f32[8,4] parameter(0)
  ROOT rs = f32[4,4] reduce-scatter(input), replica_groups={}, to_apply=add, dimensions={}
}""",
         9, 89, r"expected exactly one dimension, e\.g\. dimensions=\{0\}, got \{\}"),
    Case("GetDimensionSizeEmptyDimensions", r"""HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT gds = get-dimension-size(p), dimensions={}
}""",
         4, 8, r"get-dimension-size: dimensions must name exactly one dimension, got \{\}\."),
    Case("ScanDimensionOutOfRange", r"""HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT a = f32[] add(x, y)
}
ENTRY main {
  input = f32[4] parameter(0)
  init = f32[] parameter(1)
  ROOT scan = scan(input, init), dimensions={-1}, num_carries=0, to_apply=add
}""",
         10, 8, r"scan: Scan dimension -1 should be non-negative"),
    Case("RecvNonTupleShape", r"""HloModule m
ENTRY e {
  tok = token[] after-all()
  ROOT recv = f32[10] recv(tok)
}""",
         4, 8, r"recv: recv must have a non-empty tuple shape, got f32\[10\]\{0\}"),
    Case("ConditionalNoOperands", r"""HloModule m
ENTRY e {
  ROOT c = f32[] conditional()
}""",
         3, 8, r"conditional: conditional requires at least one operand"),
    Case("RngBitGeneratorNoOperands", r"""HloModule m
ENTRY e {
  ROOT r = (u64[2], u32[4]) rng-bit-generator(), algorithm=rng_three_fry
}""",
         3, 8, r"rng-bit-generator: expects 1 operand, got 0"),
    Case("ReduceWindowNoOperands", r"""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  ROOT rw = reduce-window(), to_apply=add
}""",
         8, 8, r"reduce-window: reduce-window expects at least one input and init operand"),
    Case("CollectiveDeviceListIotaSizeMismatch", r"""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  ROOT ag = f32[16] all-gather(p), dimensions={0},
      replica_groups=[2,2]<=[16]
}""",
         5, 29, r"collective device list iota size 16 does not match the tile assignment dimensions product 4", xla='does not match the tile assignment dimensions product'),
    Case("WindowRhsReversalWrongSize", r"""HloModule m
ENTRY e {
  input = f32[1,2,2,1] parameter(0)
  filter = f32[1,1,1,1] parameter(1)
  ROOT conv = f32[1,2,2,1] convolution(input, filter),
      window={size=1x1 rhs_reversal=1}, dim_labels=b01f_01io->b01f
}""",
         6, 15, r"expects 'rhs_reversal=' has the same size as 'size='", xla='rhs_reversal'),
    Case("ConvDimLabelDigitExceedsSpatialDims", r"""HloModule m
ENTRY e {
  input = f32[1,2,1] parameter(0)
  filter = f32[1,1,1] parameter(1)
  ROOT conv = f32[1,2,1] convolution(input, filter),
      window={size=1}, dim_labels=9?????????_io->bf
}""",
         6, 35, r"expects \[0-0bf\?\] in lhs dimension numbers", xla='dimension numbers'),
    Case("LiteralDimensionsError", r"""HloModule some_2x3_module

ENTRY %some_2x3 () -> f32[2,3] {
  ROOT %constant = f32[2,3]{1,0} constant(}{1, 2, 3}, {4, 5, 6}})
}

""",
         4, 43, r"unexpected '\}' token \(expected '\{' to start a f32\[2,3\] literal, found '\}'\)", xla="unexpected '}' token"),
    Case("LiteralDimensionsMismatch_1", r"""HloModule some_2_module

ENTRY %some_2 () -> f32[2] {
  ROOT %constant = f32[2]{0} constant({1,{2}})
}

""",
         4, 42, r"expects nested array in rank 1, but sees larger", xla='expects nested array in rank 1, but sees larger'),
    Case("LiteralDimensionsMismatch_2", r"""HloModule some_2x3_module

ENTRY %some_2x3 () -> f32[2,3] {
  ROOT %constant = f32[2,3]{1,0} constant({1, 2, 3, 4, 5, 6})
}

""",
         4, 44, r"expects nested array in rank 2, but sees 1", xla='expects nested array in rank 2, but sees 1'),
    Case("LiteralDimensionsMismatch_3", r"""HloModule some_2x3x2_module

ENTRY %some_2x3x2 () -> f32[2,3,2] {
  ROOT %constant = f32[2,3,2]{2,1,0} constant({{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}}})
}

""",
         4, 73, r"expects 3 elements in the \[0\]th element, but sees 6 \(literal shape f32\[2,3,2\]\)", xla='expects 3 elements in the [0]th element'),
    Case("ConstantF16Overflow", r"""HloModule ConstantF16Overflow_module

ENTRY %ConstantF16Overflow.v4 () -> f16[] {
  ROOT %constant = f16[] constant(-65520)
}

""",
         4, 35, r"value -65520 is out of range for literal's primitive type F16 namely \[-65504, 65504\]\.", xla="is out of range for literal's primitive type F16"),
    Case("ConstantBf16Overflow", r"""
  HloModule test_module
  ENTRY test {
    ROOT c = bf16[] constant(1e100)
  }""",
         4, 30, r"value 1e\+100 is out of range for literal's primitive type BF16 namely \[-3\.38953e\+38, 3\.38953e\+38\]\.", xla='out of range'),
    Case("ConstantU4Underflow", r"""
      HloModule ConstantU4Underflow_module
      ENTRY %ConstantU4Underflow () -> u4[] {
        ROOT %constant = u4[] constant(-1)
      }""",
         4, 40, r"value -1 is out of range for literal's primitive type U4 namely \[0, 15\]\.", xla="is out of range for literal's primitive type U4"),
    Case("ConstantU4Overflow", r"""
      HloModule ConstantU4Overflow_module
      ENTRY %ConstantU4Overflow () -> u4[] {
        ROOT %constant = u4[] constant(16)
      }""",
         4, 40, r"value 16 is out of range for literal's primitive type U4 namely \[0, 15\]\.", xla="is out of range for literal's primitive type U4"),
    Case("ConstantS4Underflow", r"""
      HloModule ConstantS4Underflow_module
      ENTRY %ConstantS4Underflow () -> s4[] {
        ROOT %constant = s4[] constant(-9)
      }""",
         4, 40, r"value -9 is out of range for literal's primitive type S4 namely \[-8, 7\]\.", xla="is out of range for literal's primitive type S4"),
    Case("ConstantS4Overflow", r"""
      HloModule ConstantS4Overflow_module
      ENTRY %ConstantS4Overflow () -> s4[] {
        ROOT %constant = s4[] constant(8)
      }""",
         4, 40, r"value 8 is out of range for literal's primitive type S4 namely \[-8, 7\]\.", xla="is out of range for literal's primitive type S4"),
    Case("ConstantUnsignedOverflow", r"""
      HloModule ConstantUnsignedOverflow_module
      ENTRY %ConstantUnsignedOverflow () -> u32[] {
        ROOT %constant = u32[] constant(4294967296)
      }""",
         4, 41, r"value 4294967296 is out of range for literal's primitive type U32 namely \[0, 4294967295\]\.", xla="is out of range for literal's primitive type U32"),
    Case("ConstantC64Overflow", r"""
      HloModule test_module
      ENTRY test () -> c64[] {
        ROOT c = c64[] constant((1e100, 0))
      }""",
         4, 33, r"real part 1e\+100 is out of range for literal's primitive type C64, namely \[-3\.40282e\+38, 3\.40282e\+38\]\."),
    Case("ConstantC64Underflow", r"""
      HloModule test_module
      ENTRY test () -> c64[] {
        ROOT c = c64[] constant((0, -1e100))
      }""",
         4, 33, r"imaginary part -1e\+100 is out of range for literal's primitive type C64, namely \[-3\.40282e\+38, 3\.40282e\+38\]\."),
    Case("ConstantF64Overflow", r"""
      HloModule test_module
      ENTRY test {
        ROOT c = f64[] constant(1.8e308)
      }""",
         4, 33, r"Constant is out of range for double \(\+/-1\.79769e\+308\) and so is unparsable\."),
    Case("ConstantF64Underflow", r"""
      HloModule test_module
      ENTRY test {
        ROOT c = f64[] constant(-1.8e308)
      }""",
         4, 33, r"Constant is out of range for double \(\+/-1\.79769e\+308\) and so is unparsable\."),
    Case("InvalidNanPayloadBf16", r"""HloModule InvalidNanPayloadBf16_module, entry_computation_layout={()->bf16[1]{0}}

ENTRY %NanPayload () -> bf16[1] {
  ROOT %constant = bf16[1]{0} constant({nan(0x3ff)})
}

""",
         4, 41, r"tries to set NaN payload 0x3ff to a literal in shape bf16\[1\] at linear index 0, but the NaN payload is out of ", xla='tries to set NaN payload 0x3ff'),
    Case("InvalidNanPayloadF8e4m3fn", r"""HloModule InvalidNanPayloadF8e4m3fn_module, entry_computation_layout={()->f8e4m3fn[1]{0}}

ENTRY %NanPayload () -> f8e4m3fn[1] {
  ROOT %constant = f8e4m3fn[1]{0} constant({nan(0x1)})
}

""",
         4, 45, r"tries to set NaN payload 0x1 to a literal in shape f8e4m3fn\[1\] at linear index 0, but f8e4m3fn does not suppor", xla='tries to set NaN payload 0x1'),
    Case("InvalidNanPayloadF8e4m3b11fnuz", r"""HloModule InvalidNanPayloadF8e4m3b11fnuz_module, entry_computation_layout={()->f8e4m3b11fnuz[1]{0}}

ENTRY %NanPayload () -> f8e4m3b11fnuz[1] {
  ROOT %constant = f8e4m3b11fnuz[1]{0} constant({nan(0x1)})
}

""",
         4, 50, r"tries to set NaN payload 0x1 to a literal in shape f8e4m3b11fnuz\[1\] at linear index 0, but f8e4m3b11fnuz does ", xla='tries to set NaN payload 0x1'),
    Case("UnexpectedAttribute", r"""HloModule unexpected_attr_module

ENTRY %TwoSendRecvBothWayRecvFist.v3 () -> f32[] {
  %token0 = token[] after-all()
  %recv = (f32[], u32[], token[]) recv(token[] %token0), channel_id=15
  %recv-done = (f32[], token[]) recv-done((f32[], u32[], token[]) %recv), channel_id=15
  ROOT %constant = f32[] constant(2.1)
  %send = (f32[], u32[], token[]) send(f32[] %constant, token[] %token0), channel_id=16, calls=%recv
  %send-done = token[] send-done((f32[], u32[], token[]) %send), channel_id=16
}

""",
         8, 89, r'unexpected attribute "calls" for send\. Allowed attributes: channel_id, is_host_transfer, sharding, frontend_attributes, control-predecessors, statistics, origi', xla='unexpected attribute "calls"'),
    Case("PredecessorUndefined", r"""HloModule pre_not_found_module

ENTRY %TwoSendRecvBothWayRecvFist.v3 () -> f32[] {
  %token0 = token[] after-all()
  %recv = (f32[], u32[], token[]) recv(token[] %token0), channel_id=15
  %recv-done = (f32[], token[]) recv-done((f32[], u32[], token[]) %recv), channel_id=15
  ROOT %constant = f32[] constant(2.1)
  %send = (f32[], u32[], token[]) send(f32[] %constant, token[] %token0), channel_id=16, control-predecessors={%done}
  %send-done = token[] send-done((f32[], u32[], token[]) %send), channel_id=16
}

""",
         8, 112, r"instruction 'done' is not defined \(in computation 'TwoSendRecvBothWayRecvFist\.v3'\)", xla="'done' is not defined"),
    Case("PaddingConfigIsNotWindowPad", r"""HloModule window_pad_module

ENTRY %Convolve1D1Window_0.v3 (input: f32[1,2,1], filter: f32[1,1,1]) -> f32[1,2,1] {
  %input = f32[1,2,1]{2,1,0} parameter(0)
  %copy = f32[1,2,1]{2,0,1} copy(f32[1,2,1]{2,1,0} %input)
  %filter = f32[1,1,1]{2,1,0} parameter(1)
  ROOT %convolution = f32[1,2,1]{2,0,1} convolution(f32[1,2,1]{2,0,1} %copy, f32[1,1,1]{2,1,0} %filter), dim_labels=b0f_0io->b0f, window={pad=1_1_0 size=1}
}

""",
         7, 143, r"expects padding_low and padding_high separated by '_'", xla="expects padding_low and padding_high separated by '_'"),
    Case("ComputationShapeDoesNotMatchRootShape", r"""HloModule custom_call:

ENTRY %CustomCall () -> f32[1] {
  %constant = f32[1]{0} constant({12345})
  ROOT %foo = f32[1,2,3]{0,2,1} custom-call(f32[1]{0} %constant), custom_call_target="foo\"bar"
}""",
         3, 25, r"Shape of computation CustomCall, f32\[1\], is not compatible with that of its root instruction foo, f32\[1,2,3\]", xla='Shape of computation CustomCall, f32[1], is not compatible with that of its root instruction foo, f32[1,2,3]'),
    Case("UnterminatedComment", r"""HloModule unterminated_comment:
ENTRY c1 {
/* unterminated
  ROOT const1 = f32[1]{0} constant({12345})
}""",
         3, 1, r"expects name \(an instruction name\), found an unterminated /\* comment", xla='/* unterminated\n^'),
    Case("MultipleEntries", r"""HloModule multiple_entries:
ENTRY c1 {
  const1 = f32[1]{0} constant({12345})
}
ENTRY c2 {
  const2 = f32[1]{0} constant({67890})
}""",
         5, 1, r"expects only one ENTRY \(found 'c1' and 'c2'\)", xla='expects only one ENTRY'),
    Case("AliasingWrongIndex", r"""
HloModule Module, input_output_alias={ {0 : (0, {0}), {1}: (0, {1}) }

ENTRY entry {
  %p = (f32[], f32[]) parameter(0)
  %p0 = f32[] get-tuple-element((f32[], f32[]) %p), index=0
  %p1 = f32[] get-tuple-element((f32[], f32[]) %p), index=1
  ROOT %out = (f32[], f32[]) tuple(%p0, %p1)
}
  """,
         2, 43, r"Expects '\}' at the end of ShapeIndex, found ':'", xla="Expects '}' at the end of ShapeIndex"),
    Case("AliasingShapeIndexNotNumerical", r"""
HloModule Module, input_output_alias={ {0, a}: (0, {0}), {1}: (0, {1}) }

ENTRY entry {
  %p = (f32[], f32[]) parameter(0)
  %p0 = f32[] get-tuple-element((f32[], f32[]) %p), index=0
  %p1 = f32[] get-tuple-element((f32[], f32[]) %p), index=1
  ROOT %out = (f32[], f32[]) tuple(%p0, %p1)
}
  """,
         2, 44, r"expects integer \(a tuple index of the ShapeIndex\), found 'a'", xla='expects integer'),
    Case("AliasingWrongFormatNoColon", r"""
HloModule Module, input_output_alias={ {0, 0}: (0, {0}), (0, {1}) }

ENTRY entry {
  %p = (f32[], f32[]) parameter(0)
  %p0 = f32[] get-tuple-element((f32[], f32[]) %p), index=0
  %p1 = f32[] get-tuple-element((f32[], f32[]) %p), index=1
  ROOT %out = (f32[], f32[]) tuple(%p0, %p1)
}
  """,
         2, 58, r"Expects '\{' at the start of ShapeIndex, found '\('", xla="Expects '{' at the start of ShapeIndex"),
    Case("AliasingWrongFormatTwoColons", r"""
HloModule Module, input_output_alias={ {0}: (0, {0}): {0, 1}, {1}: (0, {1}) }

ENTRY entry {
  %p = (f32[], f32[]) parameter(0)
  %p0 = f32[] get-tuple-element((f32[], f32[]) %p), index=0
  %p1 = f32[] get-tuple-element((f32[], f32[]) %p), index=1
  ROOT %out = (f32[], f32[]) tuple(%p0, %p1)
}
  """,
         2, 53, r"Expects '\}' at the end of aliasing description \(or ',' before the next alias\), found ':'", xla="Expects '}' at the end of aliasing description"),
    Case("AliasingWrongFormatAlphaParam", r"""
HloModule Module, input_output_alias={ {0, a}: (zero, {0}), {1}: (0, {1}) }

ENTRY entry {
  %p = (f32[], f32[]) parameter(0)
  %p0 = f32[] get-tuple-element((f32[], f32[]) %p), index=0
  %p1 = f32[] get-tuple-element((f32[], f32[]) %p), index=1
  ROOT %out = (f32[], f32[]) tuple(%p0, %p1)
}
  """,
         2, 44, r"expects integer \(a tuple index of the ShapeIndex\), found 'a'", xla='expects integer'),
    Case("BufferDonorShapeIndexNotNumerical", r"""
HloModule Module, buffer_donor={ (0, {0, a}), (0, {1}) }

ENTRY entry {
  %p = (f32[], f32[]) parameter(0)
  %p0 = f32[] get-tuple-element((f32[], f32[]) %p), index=0
  %p1 = f32[] get-tuple-element((f32[], f32[]) %p), index=1
  ROOT %out = (f32[], f32[]) tuple(%p0, %p1)
}
  """,
         2, 42, r"expects integer \(a tuple index of the ShapeIndex\), found 'a'", xla='expects integer'),
    Case("BufferDonorWrongFormatAlphaParam", r"""
HloModule Module, buffer_donor={ (zero, {0}), (0, {1}) }

ENTRY entry {
  %p = (f32[], f32[]) parameter(0)
  %p0 = f32[] get-tuple-element((f32[], f32[]) %p), index=0
  %p1 = f32[] get-tuple-element((f32[], f32[]) %p), index=1
  ROOT %out = (f32[], f32[]) tuple(%p0, %p1)
}
  """,
         2, 35, r"expects integer \(a parameter number\), found 'zero'", xla='expects integer'),
    Case("MultipleRoots", r"""HloModule multiple_roots:
ENTRY consts {
  ROOT const1 = f32[1]{0} constant({12345})
  ROOT const2 = f32[1]{0} constant({12345})
}""",
         4, 3, r"one computation should have only one ROOT \('const1' and 'const2' in computation 'consts'\)", xla='one computation should have only one ROOT'),
    Case("ComputationExists", r"""HloModule comp_exists
comp {
  const1 = f32[1]{0} constant({12345})
}
comp {
  const2 = f32[1]{0} constant({67890})
}""",
         5, 1, r"computation already exists: comp", xla='was parsing 2:1: error: computation previously defined here\ncomp {\n^'),
    Case("CrossComputationLookup", r"""HloModule cross_computation_lookup:
tcalla (a: (s32[], s32[])) -> (s32[], s32[]) {
  ROOT aparam = (s32[], s32[]) parameter(0)
}

tcallb (b: (s32[], s32[])) -> s32[] {
  rparam = (s32[], s32[]) parameter(0)
  ROOT gte0 = s32[] get-tuple-element(aparam), index=0
}

ENTRY entry {
  param = (s32[], s32[]) parameter(0)
  call0 = (s32[], s32[]) call(param), to_apply=tcalla
  ROOT call1 = s32[] call(param), to_apply=tcallb
}""",
         8, 39, r"instruction does not exist: aparam", xla='was parsing 8:39: error: instruction does not exist: aparam'),
    Case("ParseDynamicReshapeMissingOperands", r"""
HloModule test_module
ENTRY %test_entry () -> f32[10,20] {
  ROOT %dynamic-reshape = f32[10,20]{1,0} dynamic-reshape()
}
""",
         4, 8, r"dynamic-reshape: DynamicReshape requires at least one operand\.", xla='DynamicReshape requires at least one operand.'),
    Case("ParseReshapeElementCountMismatch", r"""
HloModule test_module
ENTRY %test_entry {
  %a = f32[4,8] parameter(0)
  ROOT %result = f32[31] reshape(%a)
}
""",
         5, 8, r"reshape: Reshape operation has mismatched element counts: from=32 \(f32\[4,8\]\{1,0\}\) to=31 \(f32\[31\]\{0\}\)\.", xla='expects the same number of elements in result shape f32[31] and operand shape f32[4,8]'),
    Case("ParseDynamicReshapeElementCountMismatch", r"""
HloModule test_module
ENTRY %test_entry {
  %a = f32[4,<=8] parameter(0)
  %size = s32[] parameter(1)
  ROOT %result = f32[4,<=7] dynamic-reshape(%a, %size, %size)
}
""",
         6, 8, r"dynamic-reshape: Reshape operation has mismatched element counts: from=32 \(f32\[4,<=8\]\{1,0\}\) to=28 \(f32\[4,<=7\]\{", xla='expects the same number of elements in result shape f32[4,<=7] and operand shape f32[4,<=8]'),
    Case("ParseDynamicReshapeDimSizeOperandCountMismatch", r"""
HloModule test_module
ENTRY %test_entry {
  %a = f32[4,<=8] parameter(0)
  %size = s32[] parameter(1)
  ROOT %result = f32[4,<=8] dynamic-reshape(%a, %size)
}
""",
         6, 8, r"dynamic-reshape: expects one dim size operand per result dimension; got 1 for 2 result dimensions", xla='expects one dim size operand per result dimension; got 1 for 2 result dimensions'),
    Case("NontupleInfeed", r"""HloModule nontuple_infeed:
ENTRY nontuple_infeed {
  token0 = token[] after-all()
  ROOT infeed = pred[] infeed(token0)
}""",
         4, 8, r"infeed: infeed must have a non-empty tuple shape, got pred\[\]", xla='infeed must have a non-empty tuple shape'),
    Case("CustomCallWrongNumberofOperandConstraints", r"""HloModule CustomCallWrongNumberofOperandConstraints

ENTRY %CustomCallWrongNumberofOperandConstraints (p0: f32[42,2,3], p1: f32[123,4]) -> f32[1,2,3] {
  %p0 = f32[42,2,3]{0,1,2} parameter(0)
  %p1 = f32[123,4]{0,1} parameter(1)
  ROOT %custom-call = f32[1,2,3]{0,1,2} custom-call(f32[42,2,3]{0,1,2} %p0, f32[123,4]{0,1} %p1), custom_call_target="baz", operand_layout_constraints={f32[42,2,3]{0,1,2}}
}

""",
         6, 8, r"custom-call: Expected 2 operand layout constraints, 1 given", xla='Expected 2 operand layout constraints, 1 given'),
    Case("CustomCallIncompatibleOperandConstraints", r"""HloModule CustomCallIncompatibleOperandConstraints

ENTRY %CustomCallIncompatibleOperandConstraints (p0: f32[42,2,3], p1: f32[123,4]) -> f32[1,2,3] {
  %p0 = f32[42,2,3]{0,1,2} parameter(0)
  %p1 = f32[123,4]{0,1} parameter(1)
  ROOT %custom-call = f32[1,2,3]{0,1,2} custom-call(f32[42,2,3]{0,1,2} %p0, f32[123,4]{0,1} %p1), custom_call_target="baz", operand_layout_constraints={f32[42,2,3]{0,1,2}, f32[555,5]{1,0}}
}

""",
         6, 8, r"custom-call: Operand layout constraint shape f32\[555,5\]\{1,0\} for operand 1 is not compatible with operand shap", xla='operand 1 is not compatible with operand shape'),
    Case("CustomCallWithNonexistentVersion", r"""HloModule custom_call

ENTRY %CustomCall () -> f32[1,2,3] {
  %constant = f32[1]{0} constant({12345})
  ROOT %custom-call.1 = f32[1,2,3]{0,2,1} custom-call(f32[1]{0} %constant), custom_call_target="foo", api_version=API_VERSION_THAT_DOESNT_EXIST
}

""",
         5, 115, r"expects custom-call API version but sees: API_VERSION_THAT_DOESNT_EXIST, error: Unknown API version: API_VERSION_THAT_DOESNT_EXIST \(expected one of API_VERSION", xla='Unknown API version'),
    Case("CustomCallWithUnspecifiedVersion", r"""HloModule custom_call

ENTRY %CustomCall () -> f32[1,2,3] {
  %constant = f32[1]{0} constant({12345})
  ROOT %custom-call.1 = f32[1,2,3]{0,2,1} custom-call(f32[1]{0} %constant), custom_call_target="foo", api_version=API_VERSION_UNSPECIFIED
}

""",
         5, 8, r"custom-call: Invalid API version: API_VERSION_UNSPECIFIED", xla='Invalid API version'),
    Case("ShapeMismatchInOperand", r"""
HloModule foobar

ENTRY %entrycomp (p: f32[2,2]) -> f32[2,2] {
  %p = f32[2,2] parameter(0)
  %constant.1 = f32[2,2] constant({{1, 2}, {3, 4}})
  ROOT %add.1 = f32[2,2] add(f32[2,2] %p, f32[2,5] %constant.1)
}
""",
         7, 43, r"The declared operand shape f32\[2,5\]\{1,0\} is not compatible with the shape of the operand instruction f32\[2,2\]\{", xla='The declared operand shape f32[2,5]{1,0} is not compatible with the shape of the operand instruction f32[2,2]{1,0}.'),
    Case("DuplicateParameterNumberIsDetected", r"""
  ENTRY e {
    a = s8[] parameter(0)
    b = s8[] parameter(0)
    ROOT a = s8[] add(a, b)
  }
  """,
         4, 5, r"Duplicate parameter number 0", xla='Duplicate parameter number 0'),
    Case("CheckIndexedConditionalDimension", r"""
  HloModule Module

  branch0 {
    tparam = f32[4] parameter(0)
    ROOT tgte1 = f32[4] ceil(tparam)
  }

  branch1 {
    fparam = f32[4] parameter(0)
    ROOT fgte1 = f32[4] floor(fparam)
  }

  ENTRY entry {
    p0 = f32[4] parameter(0)
    b0 = s32[2] parameter(1)
    ROOT conditional = f32[4] conditional(b0, p0, p0),
      branch_computations={branch0, branch1}
  }
  """,
         17, 54, r"The first operand must be a scalar \(a conditional's branch index\), got s32\[2\]\{0\}", xla='The first operand must be a scalar'),
    Case("CheckIndexedConditionalElementType", r"""
  HloModule Module

  branch0 {
    tparam = f32[4] parameter(0)
    ROOT tgte1 = f32[4] ceil(tparam)
  }

  branch1 {
    fparam = f32[4] parameter(0)
    ROOT fgte1 = f32[4] floor(fparam)
  }

  ENTRY entry {
    p0 = f32[4] parameter(0)
    b0 = f32[] parameter(1)
    ROOT conditional = f32[4] conditional(b0, p0, p0),
      branch_computations={branch0, branch1}
  }
  """,
         17, 54, r"The first operand must be a scalar of PRED or S32 \(a conditional's branch index\), got f32\[\]", xla='The first operand must be a scalar of PRED or S32'),
    Case("CheckPredicatedConditionalRequiresTrueAndFalseComputation", r"""
  HloModule Module

  branch0 {
    tparam = f32[4] parameter(0)
    ROOT tgte1 = f32[4] ceil(tparam)
  }

  branch1 {
    fparam = f32[4] parameter(0)
    ROOT fgte1 = f32[4] floor(fparam)
  }

  ENTRY entry {
    p0 = f32[4] parameter(0)
    b0 = pred[] parameter(1)
    ROOT conditional = f32[4] conditional(b0, p0, p0),
      branch_computations={branch0, branch1}
  }
  """,
         17, 55, r'unexpected attribute "branch_computations" for conditional\. Allowed attributes: true_computation, false_computation, sharding, frontend_attributes, control-pre', xla='unexpected attribute "branch_computations"'),
    Case("TupleTypo", r"""HloModule TupleTypoTest
ENTRY TupleTypo {
  pow = s32[] constant(42)
  ROOT v = (s32[]) tuple(power)
}
""",
         4, 26, r"instruction does not exist: power", xla='instruction does not exist'),
    Case("NestedBroadcastWithoutDimensionsAttribute", r"""
HloModule test
ENTRY test {
    ROOT root = sqrt(f32[10,10] broadcast(f32[10] parameter(0)))
}
""",
         4, 22, r"broadcast: missing required attribute 'dimensions'", xla='dimensions'),
    Case("InvalidDimLevelType", r"""HloModule test

ENTRY test {
  ROOT root = f32[10,10]{1,0:D(X,C)} parameter(0)
}""",
         4, 32, r"expected a DimLevelType abbreviation \(D, C, or S\), found 'X'", xla='expected a DimLevelType abbreviation'),
    Case("RejectDensePhysicalShape", r"""HloModule test

ENTRY test {
  ROOT root = f32[10,10]{1,0:T(128,8)P(f32[10,10])} parameter(0)
}""",
         4, 38, r"Layout has physical shape, but is not for a sparse array", xla='Layout has physical shape, but is not for a sparse array'),
    Case("AsyncStart_WrongOperand_SubShape", r"""
HloModule Module

async_computation {
  p = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p), custom_call_target="foo"
}

ENTRY AsyncStart_WrongOperand_SubShape {
  p0 = f32[2,3] parameter(0)
  async-start = (f32[2,3], f32[3,2], s32[]) async-start(p0), calls=async_computation
  async-update = ((f32[2,3]), f32[3,2], s32[]) async-update(async-start), calls=async_computation
  ROOT async-done = f32[3,2] async-done(async-update), calls=async_computation
}
  """,
         11, 3, r"AsyncStart expects the op shape to be in the form of \(\(async-operands\), async-outputs, state\)\. AsyncStart and AsyncUpdate expect the shape to be in the for", xla='AsyncStart and AsyncUpdate expect the shape to be in the form of ((operand0_shape, operand1_shape, ...), output_shape, ...)'),
    Case("AsyncUpdate_WrongOperand_SubShape", r"""
HloModule Module

async_computation {
  p = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p), custom_call_target="foo"
}

ENTRY AsyncUpdate_WrongOperand_SubShape {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3]), f32[3,2], s32[]) async-start(p0), calls=async_computation
  async-update = (f32[2,3], f32[3,2], s32[]) async-update(async-start), calls=async_computation
  ROOT async-done = f32[3,2] async-done(async-update), calls=async_computation
}
  """,
         12, 3, r"AsyncUpdate expects the op shape to be the same as the operand shape\. AsyncStart and AsyncUpdate expect the shape to be in the form of \(\(operand0_shape, oper", xla='AsyncStart and AsyncUpdate expect the shape to be in the form of ((operand0_shape, operand1_shape, ...), output_shape, ...)'),
    Case("AsyncStart_Missing_Output_Type", r"""
HloModule Module

async_computation {
  p = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p), custom_call_target="foo"
}

ENTRY AsyncStart_Missing_Output_Type {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3])) async-start(p0), calls=async_computation
  ROOT async-done = f32[3,2] async-done(async-start), calls=async_computation
}
  """,
         11, 3, r"AsyncStart expects the op shape to be in the form of \(\(async-operands\), async-outputs, state\)\. AsyncStart and AsyncUpdate expect the shape to be in the for", xla='AsyncStart and AsyncUpdate expect the shape to be in the form of ((operand0_shape, operand1_shape, ...), output_shape, ...)'),
    Case("AsyncUpdate_Missing_Output_Type", r"""
HloModule Module

async_computation {
  p = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p), custom_call_target="foo"
}

ENTRY AsyncUpdate_Missing_Output_Type {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3]), f32[3,2]) async-start(p0), calls=async_computation
  async-update = ((f32[2,3])) async-update(async-start), calls=async_computation
  ROOT async-done = f32[3,2] async-done(async-update), calls=async_computation
}
  """,
         12, 3, r"AsyncUpdate expects the op shape to be the same as the operand shape\. AsyncStart and AsyncUpdate expect the shape to be in the form of \(\(operand0_shape, oper", xla='AsyncStart and AsyncUpdate expect the shape to be in the form of ((operand0_shape, operand1_shape, ...), output_shape, ...)'),
    Case("AsyncUpdateZeroOperandsRejected", r"""
HloModule Module

async_computation {
  p0 = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p0), custom_call_target="foo"
}

ENTRY AsyncUpdateZeroOperandsRejected {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3]), f32[3,2], s32[]) async-start(p0), calls=async_computation
  ROOT async-update = ((f32[2,3]), f32[3,2], s32[]) async-update()
}
  """,
         12, 53, r"AsyncUpdate and AsyncDone expect a single async op as their operand: No operand found for AsyncUpdate and AsyncDone", xla='No operand found for AsyncUpdate and AsyncDone'),
    Case("AsyncDoneZeroOperandsRejected", r"""
HloModule Module

async_computation {
  p0 = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p0), custom_call_target="foo"
}

ENTRY AsyncDoneZeroOperandsRejected {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3]), f32[3,2], s32[]) async-start(p0), calls=async_computation
  ROOT async-done = f32[3,2] async-done()
}
  """,
         12, 30, r"AsyncUpdate and AsyncDone expect a single async op as their operand: No operand found for AsyncUpdate and AsyncDone", xla='No operand found for AsyncUpdate and AsyncDone'),
    Case("AsyncDoneAsOperandToAsyncUpdateRejected", r"""
HloModule Module

async_computation {
  p0 = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p0), custom_call_target="foo"
}

ENTRY AsyncDoneAsOperandToAsyncUpdateRejected {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3]), f32[3,2], s32[]) async-start(p0), calls=async_computation
  async-done = f32[3,2] async-done(async-start)
  ROOT async-update = ((f32[2,3]), f32[3,2], s32[]) async-update(async-done)
}
  """,
         13, 53, r"AsyncUpdate and AsyncDone expect a single async op as their operand: AsyncUpdate and AsyncDone cannot have AsyncDone as operand\.", xla='AsyncUpdate and AsyncDone cannot have AsyncDone as operand.'),
    Case("AsyncDoneAsOperandToAsyncDoneRejected", r"""
HloModule Module

async_computation {
  p0 = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p0), custom_call_target="foo"
}

ENTRY AsyncDoneAsOperandToAsyncDoneRejected {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3]), f32[3,2], s32[]) async-start(p0), calls=async_computation
  async-done.0 = f32[3,2] async-done(async-start)
  ROOT async-done.1 = f32[3,2] async-done(async-done.0)
}
  """,
         13, 32, r"AsyncUpdate and AsyncDone expect a single async op as their operand: AsyncUpdate and AsyncDone cannot have AsyncDone as operand\.", xla='AsyncUpdate and AsyncDone cannot have AsyncDone as operand.'),
    Case("AsyncUpdateWithSyntaxSugarWrongOp", r"""
HloModule AsyncUpdateWithSyntaxSugarWrongOp

ENTRY %Entry (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-start(f32[10]{0} %p0), custom_call_target="foo"
  %async-update = ((f32[10]{0}), f32[20]{0}, s32[]) add-update(((f32[10]{0}), f32[20]{0}, s32[]) %async-start)
  ROOT %async-done = f32[20]{0} custom-call-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-update)
}
  """,
         7, 53, r"Expect async wrapped opcode to be custom-call, but got add", xla='Expect async wrapped opcode to be custom-call, but got add'),
    Case("AsyncDoneWithSyntaxSugarWrongOp", r"""
HloModule AsyncUpdateWithSyntaxSugarWrongOp

ENTRY %Entry (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-start(f32[10]{0} %p0), custom_call_target="foo"
  %async-update = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-update(((f32[10]{0}), f32[20]{0}, s32[]) %async-start)
  ROOT %async-done = f32[20]{0} add-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-update)
}
  """,
         8, 33, r"Expect async wrapped opcode to be custom-call, but got add", xla='Expect async wrapped opcode to be custom-call, but got add'),
    Case("AsyncUpdateWrongComputation", r"""
HloModule AsyncUpdateWrongComputation

%async_wrapped.0 (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %custom-call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}

%async_wrapped.1 (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %custom-call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}

ENTRY %Entry (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start = ((f32[10]{0}), f32[20]{0}, s32[]) async-start(f32[10]{0} %p0), calls=%async_wrapped.0
  %async-update = ((f32[10]{0}), f32[20]{0}, s32[]) async-update(((f32[10]{0}), f32[20]{0}, s32[]) %async-start), calls=%async_wrapped.1
  ROOT %async-done = f32[20]{0} async-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-update)
}
  """,
         17, 3, r"Expect async_wrapped_computation to be async_wrapped\.0, but got async_wrapped\.1", xla='Expect async_wrapped_computation to be async_wrapped.0, but got async_wrapped.1'),
    Case("AsyncDoneWrongComputation", r"""
HloModule AsyncDoneWrongComputation

%async_wrapped.0 (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %custom-call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}

%async_wrapped.1 (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %custom-call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}

ENTRY %Entry (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start = ((f32[10]{0}), f32[20]{0}, s32[]) async-start(f32[10]{0} %p0), calls=%async_wrapped.0
  %async-update = ((f32[10]{0}), f32[20]{0}, s32[]) async-update(((f32[10]{0}), f32[20]{0}, s32[]) %async-start)
  ROOT %async-done = f32[20]{0} async-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-update), calls=%async_wrapped.1
}
  """,
         18, 8, r"Expect async_wrapped_computation to be async_wrapped\.0, but got async_wrapped\.1", xla='Expect async_wrapped_computation to be async_wrapped.0, but got async_wrapped.1'),
    Case("AsyncUpdateWrongDefaultThread", r"""
HloModule AsyncUpdateWrongDefaultThread

ENTRY %Entry (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-start(f32[10]{0} %p0), custom_call_target="foo"
  %async-update = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-update(((f32[10]{0}), f32[20]{0}, s32[]) %async-start), async_execution_thread="foo_thread"
  ROOT %async-done = f32[20]{0} custom-call-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-update)
}
  """,
         7, 3, r"Expect async_execution_thread to be main, but got foo_thread", xla='Expect async_execution_thread to be main, but got foo_thread'),
    Case("AsyncDoneWrongDefaultThread", r"""
HloModule AsyncDoneWrongDefaultThread

ENTRY %Entry (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-start(f32[10]{0} %p0), custom_call_target="foo"
  %async-update = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-update(((f32[10]{0}), f32[20]{0}, s32[]) %async-start)
  ROOT %async-done = f32[20]{0} custom-call-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-update), async_execution_thread="foo_thread"
}
  """,
         8, 8, r"Expect async_execution_thread to be main, but got foo_thread", xla='Expect async_execution_thread to be main, but got foo_thread'),
    Case("TranscendentalAccuracyModeError", r"""
  HloModule exponential_hw

  ENTRY exponential_hw {
    %exponent = f32[] parameter(0)
    ROOT %exponential = f32[] exponential(f32[] %exponent), result_accuracy={mode=high}
  }
  """,
         6, 83, r"expects ResultAccuracy type but sees: high, error: Unknown accuracy mode \(expected default or highest\)", xla='expects ResultAccuracy type but sees: high'),
    Case("TranscendentalResultAccuracyInvalidName", r"""
  HloModule exponential_hw

  ENTRY exponential_hw {
    %exponent = f32[] parameter(0)
    ROOT %exponential = f32[] exponential(f32[] %exponent), result_accuracy={0.5}
  }
  """,
         6, 78, r"expects attribute name \(mode= or tolerance=\) in result_accuracy, found '0\.5'", xla='expects attribute name'),
    Case("TranscendentalAccuracyInvalidField", r"""
  HloModule exponential_hw

  ENTRY exponential_hw {
    %exponent = f32[] parameter(0)
    ROOT %exponential = f32[] exponential(f32[] %exponent), result_accuracy={foo=10.0}
  }
  """,
         6, 78, r"invalid attribute name: foo \(expected mode or tolerance\)", xla='invalid attribute name'),
    Case("TranscendentalAccuracyInvalidOp", r"""
HloModule bitcast_to_smaller

ENTRY main {
  p = s32[10] parameter(0)
  ROOT out = s8[10,4] bitcast-convert(p), result_accuracy={tolerance={rtol=0.5, atol=1.0, ulps=2}}
}
""",
         6, 42, r'unexpected attribute "result_accuracy" for bitcast-convert\. Allowed attributes: sharding, frontend_attributes, control-predecessors, statistics, origin, metada', xla='error: unexpected attribute "result_accuracy"'),
    Case("DesugarParsingTest_CopyUpdate_Invalid", r"""
HloModule test
ENTRY main {
  p0 = f32[128] parameter(0)
  start = (f32[128], f32[128], u32[]) copy-start(p0)
  update = (f32[128], f32[128], u32[]) copy-update(start)
  ROOT done = f32[128] copy-done(update)
}
  """,
         6, 40, r"expects opcode but sees: copy-update, error: Unknown opcode: copy-update \(copy has its own async opcodes and no '-update' async-wrapped form\)", xla='Unknown opcode: copy-update'),
    Case("DesugarParsingTest_SendStart_Invalid", r"""
HloModule test
ENTRY main {
  p0 = f32[128] parameter(0)
  t = token[] after-all()
  start = (f32[128], u32[], token[]) send-start(p0, t), channel_id=1
  ROOT done = token[] send-done(start)
}
  """,
         6, 38, r"expects opcode but sees: send-start, error: Unknown opcode: send-start \(send has its own async opcodes and no '-start' async-wrapped form\)", xla='Unknown opcode: send-start'),
    Case("DesugarParsingTest_SendUpdate_Invalid", r"""
HloModule test
ENTRY main {
  p0 = f32[128] parameter(0)
  t = token[] after-all()
  start = (f32[128], u32[], token[]) send(p0, t), channel_id=1
  update = (f32[128], u32[], token[]) send-update(start)
  ROOT done = token[] send-done(update), channel_id=1
}
  """,
         7, 39, r"expects opcode but sees: send-update, error: Unknown opcode: send-update \(send has its own async opcodes and no '-update' async-wrapped form\)", xla='Unknown opcode: send-update'),
    Case("DesugarParsingTest_RecvStart_Invalid", r"""
HloModule test
ENTRY main {
  t = token[] after-all()
  start = (f32[128], u32[], token[]) recv-start(t), channel_id=1
  ROOT done = (f32[128], token[]) recv-done(start), channel_id=1
}
  """,
         5, 38, r"expects opcode but sees: recv-start, error: Unknown opcode: recv-start \(recv has its own async opcodes and no '-start' async-wrapped form\)", xla='Unknown opcode: recv-start'),
    Case("DesugarParsingTest_RecvUpdate_Invalid", r"""
HloModule test
ENTRY main {
  t = token[] after-all()
  start = (f32[128], u32[], token[]) recv(t), channel_id=1
  update = (f32[128], u32[], token[]) recv-update(start)
  ROOT done = (f32[128], token[]) recv-done(update), channel_id=1
}
  """,
         6, 39, r"expects opcode but sees: recv-update, error: Unknown opcode: recv-update \(recv has its own async opcodes and no '-update' async-wrapped form\)", xla='Unknown opcode: recv-update'),
    # InvalidDimLabels, first case
    Case("InvalidDimLabels_NotUnique", r"""HloModule invalid_dim_labels_module

ENTRY %Convolve1D1Window_0.v3 (input: f32[1,2,1], filter: f32[1,1,1]) -> f32[1,2,1] {
  %input = f32[1,2,1]{2,1,0} parameter(0)
  %copy = f32[1,2,1]{2,0,1} copy(f32[1,2,1]{2,1,0} %input)
  %filter = f32[1,1,1]{2,1,0} parameter(1)
  ROOT %convolution = f32[1,2,1]{2,0,1} convolution(f32[1,2,1]{2,0,1} %copy, f32[1,1,1]{2,1,0} %filter), window={size=1},dim_labels=00_01->10
}
""",
         7, 133, r"expects unique lhs dimension numbers, but sees 00", xla='expects unique'),
    # InvalidDimLabels, second case
    Case("InvalidDimLabels_SpatialCount", r"""HloModule invalid_dim_labels_module

ENTRY %Convolve1D1Window_0.v3 (input: f32[1,2,1], filter: f32[1,1,1]) -> f32[1,2,1] {
  %input = f32[1,2,1]{2,1,0} parameter(0)
  %copy = f32[1,2,1]{2,0,1} copy(f32[1,2,1]{2,1,0} %input)
  %filter = f32[1,1,1]{2,1,0} parameter(1)
  ROOT %convolution = f32[1,2,1]{2,0,1} convolution(f32[1,2,1]{2,0,1} %copy, f32[1,1,1]{2,1,0} %filter), window={size=1},dim_labels=012_0123->210
}
""",
         7, 133, r"input, kernel, and output must have same number of spatial dimensions, but got 3, 4, 3, respectively\.", xla='must have same number of spatial dimensions'),
    # InvalidDimLabels, third case
    Case("InvalidDimLabels_Digit", r"""HloModule invalid_dim_labels_module

ENTRY %Convolve1D1Window_0.v3 (input: f32[1,2,1], filter: f32[1,1,1]) -> f32[1,2,1] {
  %input = f32[1,2,1]{2,1,0} parameter(0)
  %copy = f32[1,2,1]{2,0,1} copy(f32[1,2,1]{2,1,0} %input)
  %filter = f32[1,1,1]{2,1,0} parameter(1)
  ROOT %convolution = f32[1,2,1]{2,0,1} convolution(f32[1,2,1]{2,0,1} %copy, f32[1,1,1]{2,1,0} %filter), window={size=1},dim_labels=013_0123->210
}
""",
         7, 133, r"expects \[0-2bf\?\] in lhs dimension numbers", xla='expects [0-2bf?]'),
    Case("Empty", r"""""",
         1, 1, r"expected a computation \(e\.g\. 'ENTRY main \{ \.\.\. \}'\), found end of input"),
    Case("Garbage", r"""HloModule thi$ str1ng makes# N0 sen$e @all!*&^%$""",
         1, 14, r"expects name \(a computation name\), found '\$'"),
    # a lone instruction, as XLA's (ParseSingleInstruction)
    Case("NegativeParameterNumber", r"""par0 = f32[3,5] parameter(-1)""",
         1, 1, r"parameter number must be >= 0, got -1", xla='parameter number must be >= 0'),
    Case("WrongNumberOfParameterLeafBuffersInReplication",
         r"""par0 = (f32[3,5], f32[]) parameter(0), parameter_replication={true,false,true}""",
         1, 1, r"parameter: parameter has 2 leaf buffers, but parameter_replication has 3 elements\.", xla='parameter has 2 leaf buffers, but parameter_replication has 3 elements'),
    Case("DesugarParsingTest_AllReduceUpdate_Invalid", r"""HloModule test

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}

ENTRY main {
  p0 = f32[128] parameter(0)
  start = ((f32[128]), f32[128], u32[]) all-reduce-start(p0), to_apply=add
  update = ((f32[128]), f32[128], u32[]) all-reduce-update(start)
  ROOT done = f32[128] all-reduce-done(update)
}
""",
         12, 42, r"expects opcode but sees: all-reduce-update, error: Unknown opcode: all-reduce-update \(all-reduce has its own async opcodes and no '-update' async-wrapped form", xla='expects opcode but sees: all-reduce-update, error: Unknown opcode: all-reduce-update'),
    Case("DesugarParsingTest_AllGatherUpdate_Invalid", r"""HloModule test
ENTRY main {
  p0 = f32[128] parameter(0)
  start = ((f32[128]), f32[256], u32[]) all-gather-start(p0), dimensions={0}
  update = ((f32[128]), f32[256], u32[]) all-gather-update(start)
  ROOT done = f32[256] all-gather-done(update)
}
""",
         5, 42, r"expects opcode but sees: all-gather-update, error: Unknown opcode: all-gather-update \(all-gather has its own async opcodes and no '-update' async-wrapped form", xla='Unknown opcode: all-gather-update'),
    Case("DesugarParsingTest_CollectivePermuteUpdate_Invalid", r"""HloModule test
ENTRY main {
  p0 = f32[128] parameter(0)
  start = ((f32[128]), f32[128], u32[]) collective-permute-start(p0), source_target_pairs={{0,1}}
  update = ((f32[128]), f32[128], u32[]) collective-permute-update(start)
  ROOT done = f32[128] collective-permute-done(update)
}
""",
         5, 42, r"expects opcode but sees: collective-permute-update, error: Unknown opcode: collective-permute-update \(collective-permute has its own async opcodes and no '-upd", xla='Unknown opcode: collective-permute-update'),
    # single-instruction texts (XLA's ParseSingleInstruction) and async shapes
    Case("SingleOpNoShapeProducesError", r"""multiply(f32[2,4]{1,0} %broadcast, f32[2,4]{1,0} %x)""",
         1, 9, r"expects '=' in instruction \(after the name 'multiply'\), found '\('", xla="expects '=' in instruction"),
    Case("SingleOpNoOperandShapesProducesError", r"""%multiply = f32[2,4]{1,0} multiply(%broadcast, %x)""",
         1, 36, r"Operand had no shape in HLO text; cannot create parameter for single-instruction module \(operand 'broadcast'\)\.", xla='Operand had no shape in HLO text'),
    Case("SingleOpWithNested_DoesNotExist", r"""reduce = f32[] reduce(f32[10], f32[]), dimensions={0}, to_apply=
{
  result = f32[] add(f32[] x, f32[] y)
}""",
         3, 28, r"instruction does not exist: x", xla='does not exist: x'),
    Case("SingleOpWithNested_NoLhs", r"""reduce = f32[] reduce(f32[10], f32[]), dimensions={0}, to_apply=
{
  f32[] add(f32[] x, f32[] y)
}""",
         3, 3, r"expects name \(an instruction name\), found the keyword or type name 'f32'", xla='expects name'),
    Case("SingleOpWithNested_NoOperandName", r"""reduce = f32[] reduce(f32[10], f32[]), dimensions={0}, to_apply=
{
  result = f32[] add(f32[], f32[])
}""",
         3, 27, r"expects name \(an operand name after the operand shape f32\[\]\), found ','", xla='expects name'),
    Case("MultipleOpsProducesError", r"""
  param = f32[2,5,1,3] parameter(0)
  transpose = f32[1,5,2,3] transpose(param), dimensions={2,1,0,3}
""",
         3, 3, r'Expected eof after parsing single instruction\. Did you mean to write an HLO module and forget the "HloModule" header\?', xla='Expected eof'),
    Case("AsyncStartMissingOperandWrapper", r"""HloModule m
async_computation {
  p = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p), custom_call_target="foo"
}
ENTRY e {
  p0 = f32[2,3] parameter(0)
  async-start = (f32[2,3], f32[3,2], s32[]) async-start(p0), calls=async_computation
  ROOT async-done = f32[3,2] async-done(async-start), calls=async_computation
}
""",
         8, 3, r"AsyncStart expects the op shape to be in the form of \(\(async-operands\), async-outputs, state\)\. AsyncStart and AsyncUpdate expect the shape to be in the for", xla='AsyncStart expects the op shape to be in the form of ((async-operands), async-outputs, state).'),
    Case("AsyncUpdateMissingOperandWrapper", r"""HloModule m
async_computation {
  p = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p), custom_call_target="foo"
}
ENTRY e {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3]), f32[3,2], s32[]) async-start(p0), calls=async_computation
  async-update = (f32[2,3], f32[3,2], s32[]) async-update(async-start), calls=async_computation
  ROOT async-done = f32[3,2] async-done(async-update), calls=async_computation
}
""",
         9, 3, r"AsyncUpdate expects the op shape to be the same as the operand shape\. AsyncStart and AsyncUpdate expect the shape to be in the form of \(\(operand0_shape, oper", xla='AsyncUpdate expects the op shape to be the same as the operand shape.'),
    Case("AsyncOpTupleWrongType", r"""HloModule m
async_computation {
  p = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p), custom_call_target="foo"
}
ENTRY e {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3])) async-start(p0), calls=async_computation
  ROOT async-done = f32[3,2] async-done(async-start), calls=async_computation
}
""",
         8, 3, r"AsyncStart expects the op shape to be in the form of \(\(async-operands\), async-outputs, state\)\. AsyncStart and AsyncUpdate expect the shape to be in the for", xla='AsyncStart expects the op shape to be in the form of ((async-operands), async-outputs, state).'),
    Case("AsyncDoneNoAsyncStart", r"""HloModule m
ENTRY e {
  p0 = f32[2,3] parameter(0)
  p1 = u32[] parameter(1)
  tuple = ((f32[2,3]), f32[2,3], u32[]) tuple(p0, p0, p1)
  ROOT async-done = f32[2,3] custom-call-done(tuple)
}
""",
         6, 8, r"AsyncUpdate and AsyncDone expect a single async op as their operand\. \(%tuple, a tuple, does not carry an async op's value\.\)", xla='AsyncUpdate and AsyncDone expect a single async op as their operand.'),
    Case("AsyncUpdateAndAsyncDoneNoAsyncStart", r"""HloModule m
ENTRY e {
  p0 = f32[2,3] parameter(0)
  p1 = u32[] parameter(1)
  tuple = ((f32[2,3]), f32[2,3], u32[]) tuple(p0, p0, p1)
  async-update = ((f32[2,3]), f32[2,3], u32[]) custom-call-update(tuple)
  ROOT async-done = f32[2,3] custom-call-done(tuple)
}
""",
         6, 3, r"AsyncUpdate and AsyncDone expect a single async op as their operand\. \(%tuple, a tuple, does not carry an async op's value\.\)", xla='AsyncUpdate and AsyncDone expect a single async op as their operand.'),
    Case("AsyncOpSharedComputation", r"""HloModule m
%async_wrapped (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}
ENTRY %e (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start.0 = ((f32[10]{0}), f32[20]{0}, s32[]) async-start(f32[10]{0} %p0), calls=%async_wrapped
  %async-done.0 = f32[20]{0} async-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-start.0)
  %async-start.1 = ((f32[10]{0}), f32[20]{0}, s32[]) async-start(f32[10]{0} %p0), calls=%async_wrapped
  ROOT %async-done.1 = f32[20]{0} async-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-start.1)
}
""",
         10, 3, r"Computation async_wrapped is called by more than one async op \(%async-start\.0 and %async-start\.1\)\.", xla='Computation async_wrapped is called by more than one async op'),
]


def _parse_error(text: str) -> ParseError:
    """As XLA's tests: ParseAndReturnUnverifiedModule (shape checks left to the verifier)."""
    try:
        parse_hlo_module(text, verify=False)
    except ParseError as e:
        return e
    pytest.fail("parsed without error")


@pytest.mark.parametrize("case", MALFORMED, ids=[c.name for c in MALFORMED])
def test_malformed_text_raises_parse_error(case):
    err = _parse_error(case.text)
    first = str(err).splitlines()[0]
    assert first.startswith(f"was parsing {case.line}:{case.column}: error: "), first
    assert re.match(case.message, first.split(": error: ", 1)[1]), first
    assert (err.line, err.column) == (case.line, case.column)
    assert str(err).splitlines()[-1].strip() == "^"  # the caret excerpt
    if case.xla is not None:
        assert case.xla in str(err)


def test_case_names_are_unique():
    names = [c.name for c in MALFORMED]
    assert len(names) == len(set(names)) and len(names) >= 100


# XLA's DeeplyNested*ExceedsRecursionLimit set max_recursion_depth=10; here the default (500)
# against 3000 levels (the limits themselves are pinned in test_depth.py).
DEPTH = 3000


def _nested_operands(n: int) -> str:
    inner = "add(f32[] constant(0), f32[] " * n + "constant(0)" + ")" * n
    return f"HloModule m\nENTRY e {{\n  ROOT r = f32[] {inner}\n}}\n"


def _nested_shapes(n: int) -> str:
    s = "(" * n + "f32[]" + ")" * n
    return f"HloModule test\nENTRY entry (p0: {s}) -> {s} {{\n  ROOT %p0 = {s} parameter(0)\n}}"


def _nested_inline_computations(n: int) -> str:
    body = "x = f32[] parameter(0)\n  ROOT y = f32[] call(x), to_apply={\n  " * n
    return "HloModule m\nENTRY e {\n  " + body + "ROOT z = f32[] parameter(0)\n" + "}\n" * (n + 1)


@pytest.mark.parametrize("build", [_nested_operands, _nested_shapes, _nested_inline_computations])
def test_deep_nesting_is_a_parse_error(build):
    err = _parse_error(build(DEPTH))
    assert "maximum recursion depth exceeded" in str(err)
    parse_hlo_module(build(20))  # shallow nesting parses


# Shape texts (XLA's ParseShape cases).
SHAPE_CASES = [
    # ParseShapeStringWithTilingLayout, the wrong minor_to_major
    ("f32[123,456,789]{1:T(2, * , 128)}",
     r"shape:1:17: Dimensions size is 3, but minor to major size is 1\."),
    # ParseBufferEmptyElement, ParseBufferMoreThanOneElement: XLA's words.
    ("b()", r"shape:1:3: expected primitive type .* found '\)'"),
    ("b(s32[], f32[])", r"shape:1:8: expects '\)' at the end of buffer shape, found ','"),
]


@pytest.mark.parametrize("text,message", SHAPE_CASES)
def test_malformed_shape_raises_parse_error(text, message):
    with pytest.raises(ParseError) as info:
        parse_shape(text)
    assert re.match(message, str(info.value)), str(info.value)
