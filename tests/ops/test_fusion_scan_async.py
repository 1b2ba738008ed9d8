"""fusion, scan and the async wrappers (async-start/update/done): their rules (XLA has no
Infer* function for them; the checks are the verifier's HandleFusion, HandleScan and
CheckAsyncOp*, and the scan shape the HLO parser infers), their messages, and HLO texts from
xla/hlo/parser/hlo_parser_test.cc."""

import pytest

from program_shapes import comp, infer
from xlapy.errors import ParseError
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.opdefs import ShapeError
from xlapy.shape import parse_shape


def attr_text(instr):
    return ", ".join(attribute_texts(instr, HloPrintOptions.default()))


# -- fusion ---------------------------------------------------------------------------------


def test_fusion_shape_is_the_fused_root():
    fused = comp(["f32[3,2]", "f32[2]"], "f32[3,2]")
    assert infer("fusion", "f32[3,2]", "f32[2]", kind="kLoop", calls=fused) == parse_shape(
        "f32[3,2]")
    # Fewer fused parameters than operands is allowed (the verifier's check is '>').
    assert infer("fusion", "f32[3,2]", "f32[2]", kind="kInput",
                 calls=comp(["f32[3,2]"], "s32[]")) == parse_shape("s32[]")


def test_fusion_errors():
    fused = comp(["f32[3,2]", "f32[2]"], "f32[3,2]")
    with pytest.raises(ShapeError, match=r"fusion: Fused parameter count \(2\) is greater than "
                                         r"the number of operands \(1\)"):
        infer("fusion", "f32[3,2]", kind="kLoop", calls=fused)
    with pytest.raises(ShapeError, match=r"fusion: Shape mismatch between parameter number 1 "
                                         r"and its operand. \(f32\[2\]\{0\} != f32\[3\]\{0\}\)"):
        infer("fusion", "f32[3,2]", "f32[3]", kind="kLoop", calls=fused)
    with pytest.raises(ShapeError, match=r"fusion: Fused computation shape \(f32\[3,2\]\{1,0\}\) "
                                         r"is not equal to the fusion shape \(f32\[2,3\]"):
        infer("fusion", "f32[3,2]", "f32[2]", kind="kLoop", calls=fused, result="f32[2,3]")
    with pytest.raises(Exception, match="kLoop, kInput, kOutput, kCustom"):
        infer("fusion", "f32[3,2]", "f32[2]", kind="kBogus", calls=fused)


def test_fusion_aliasing():
    fused = comp(["(f32[2,2], f32[42,2,3])", "f32[123,4]"], "(f32[123,4], f32[2,2], f32[1,2,3])")
    operands = ("(f32[2,2], f32[42,2,3])", "f32[123,4]")
    ok = infer("fusion", *operands, kind="kLoop", calls=fused,
               output_to_operand_aliasing=[((0,), (1, ())), ((1,), (0, (0,)))])
    assert ok.is_tuple()
    for aliasing, message in [
        ([((0,), (2, ()))], "Invalid aliasing operand index: 2"),
        ([((0,), (1, (0,)))], r"Invalid aliasing operand shape index: \{0\} in f32\[123,4\]"),
        ([((3,), (1, ()))], r"Invalid aliasing output shape index: \{3\}"),
        ([((2,), (1, ()))], r"Different aliasing shapes: f32\[123,4\]\{1,0\} vs "
                            r"f32\[1,2,3\]\{2,1,0\}"),
    ]:
        with pytest.raises(ShapeError, match="fusion: " + message):
            infer("fusion", *operands, kind="kLoop", calls=fused,
                  output_to_operand_aliasing=aliasing)


FUSION_HLO = """HloModule FusionWithAliasing

%FusedComp (p0: (f32[2,2], f32[42,2,3]), p1: f32[123,4]) -> (f32[123,4], f32[2,2], f32[1,2,3]) {
  %p1 = f32[123,4]{0,1} parameter(1)
  %p0 = (f32[2,2]{0,1}, f32[42,2,3]{0,1,2}) parameter(0)
  %elem1 = f32[2,2]{0,1} get-tuple-element((f32[2,2]{0,1}, f32[42,2,3]{0,1,2}) %p0), index=0
  %constant0 = f32[] constant(1)
  %broadcast0 = f32[1,2,3]{0,1,2} broadcast(f32[] %constant0), dimensions={}
  ROOT %tuple = (f32[123,4]{0,1}, f32[2,2]{0,1}, f32[1,2,3]{0,1,2}) tuple(f32[123,4]{0,1} %p1, f32[2,2]{0,1} %elem1, f32[1,2,3]{0,1,2} %broadcast0)
}

ENTRY %FusionWithAliasing (p0.1: (f32[2,2], f32[42,2,3]), p1.1: f32[123,4]) -> (f32[123,4], f32[2,2], f32[1,2,3]) {
  %p0.1 = (f32[2,2]{0,1}, f32[42,2,3]{0,1,2}) parameter(0)
  %p1.1 = f32[123,4]{0,1} parameter(1)
  ROOT %fusion = (f32[123,4]{0,1}, f32[2,2]{0,1}, f32[1,2,3]{0,1,2}) fusion((f32[2,2]{0,1}, f32[42,2,3]{0,1,2}) %p0.1, f32[123,4]{0,1} %p1.1), {attrs}
}
"""


@pytest.mark.parametrize("attrs", [
    "kind=kLoop, output_to_operand_aliasing={{0}: (1, {}), {1}: (0, {0})}, calls=%FusedComp",
    "kind=kOutput, calls=%FusedComp",
])
def test_fusion_hlo_text(attrs):
    root = parse_hlo_module(FUSION_HLO.replace("{attrs}", attrs)).entry.root
    assert attr_text(root) == attrs


# -- scan -----------------------------------------------------------------------------------


def test_scan_shapes():
    step = comp(["f32[]", "f32[]"], "(f32[], f32[])")
    # hlo_parser_test "Scan": one input, one carry: (outputs stacked, final carry).
    assert infer("scan", "f32[4]", "f32[]", dimensions=[0], num_carries=1, is_reverse=True,
                 is_associative=True, to_apply=step) == parse_shape("(f32[4], f32[])")
    # No carries and a non-tuple root: the one stacked output.
    assert infer("scan", "f32[3,4]", dimensions=[1], num_carries=0,
                 to_apply=comp(["f32[3]"], "s32[3]")) == parse_shape("s32[3,4]")
    # Two inputs scanned along dimension 0, a carry, two outputs.
    got = infer("scan", "f32[5,2]", "s32[5]", "f32[2]", dimensions=[0], num_carries=1,
                to_apply=comp(["f32[2]", "s32[]", "f32[2]"], "(f32[], pred[2], f32[2])"))
    assert got == parse_shape("(f32[5], pred[5,2], f32[2])")
    # A declared result is checked, not inferred.
    assert infer("scan", "f32[4]", "f32[]", dimensions=[0], num_carries=1, to_apply=step,
                 result="(f32[4], f32[])") == parse_shape("(f32[4], f32[])")


@pytest.mark.parametrize("operands, kwargs, result, message", [
    (["f32[4]", "f32[]"], dict(dimensions=[-1], num_carries=0), None,
     "Scan dimension -1 should be non-negative"),
    (["f32[4]", "f32[]"], dict(dimensions=[0, 1], num_carries=1), None,
     "expects exactly one dimension"),
    (["f32[4]", "f32[]"], dict(dimensions=[0], num_carries=3), None,
     "expects at least 3 operands to match the number of carries, but has 2 operands"),
    (["f32[4]"], dict(dimensions=[0], num_carries=0), None,
     "expects 1 operands to match the number of parameters of to_apply, but to_apply has 2 "
     "parameters"),
    (["f32[]", "f32[]"], dict(dimensions=[0], num_carries=2), None,
     "Cannot infer shape for scan with no inputs"),
    (["f32[4]", "f32[]"], dict(dimensions=[1], num_carries=1), None,
     "scan dimension 1 is out of range for operand of rank 1"),
    (["f32[4]", "f32[]"], dict(dimensions=[0], num_carries=1), "(f32[5], f32[])",
     "Scan dimension 0 has size 5, expected 4"),
    (["f32[4]", "f32[]"], dict(dimensions=[0], num_carries=1), "(f32[4], f32[], f32[])",
     "Scan instruction has 3 results, but the to_apply computation has 2 results."),
    (["f32[4]", "s32[]"], dict(dimensions=[0], num_carries=1), None,
     r"Shapes of operand 1 and to_apply computation parameter are inconsistent"),
])
def test_scan_errors(operands, kwargs, result, message):
    step = comp(["f32[]", "f32[]"], "(f32[], f32[])")
    with pytest.raises(ShapeError, match="scan: " + message):
        infer("scan", *operands, to_apply=step, result=result, **kwargs)


def test_scan_carry_must_match_root():
    step = comp(["f32[]", "f32[]"], "(f32[], s32[])")
    with pytest.raises(ShapeError, match="scan: Shapes of parameter 0 and root in to_apply "
                                         "computation are inconsistent"):
        infer("scan", "f32[4]", "f32[]", dimensions=[0], num_carries=1, to_apply=step)


SCAN_HLO = """HloModule scan_module

add_F32 {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  add = f32[] add(lhs, rhs)
  ROOT t = (f32[], f32[]) tuple(add, add)
}

ENTRY Scan {
  input = f32[4]{0} parameter(0)
  init = f32[] constant(0)
  ROOT scan = (f32[4]{0}, f32[]) scan(input, init), {attrs}
}
"""


@pytest.mark.parametrize("attrs", [
    "dimensions={0}, num_carries=1, is_reverse=true, is_associative=true, to_apply=%add_F32",
    "dimensions={0}, num_carries=1, is_associative=false, to_apply=%add_F32",
    "dimensions={0}, num_carries=1, to_apply=%add_F32",
])
def test_scan_hlo_text(attrs):
    root = parse_hlo_module(SCAN_HLO.replace("{attrs}", attrs)).entry.root
    assert attr_text(root) == attrs


def test_scan_hlo_negative_dimension():
    # hlo_parser_test.cc: scan with dimensions={-1} must not parse.
    text = SCAN_HLO.replace("{attrs}", "dimensions={-1}, num_carries=1, to_apply=%add_F32")
    with pytest.raises(ParseError, match="Scan dimension -1 should be non-negative"):
        parse_hlo_module(text)


# -- async ----------------------------------------------------------------------------------

WRAPPED = comp(["f32[10]"], "f32[20]", "async_wrapped")
START = "((f32[10]), f32[20], s32[])"


def test_async_start():
    assert infer("async-start", "f32[10]", calls=WRAPPED, result=START) == parse_shape(START)
    # Without a declared shape: ((operands), result), no context.
    assert infer("async-start", "f32[10]", calls=WRAPPED) == parse_shape("((f32[10]), f32[20])")
    # Operands may bind a prefix of the parameters (the rest come with async-update).
    two = comp(["f32[2,3]", "f32[2,3]"], "f32[3,2]")
    assert infer("async-start", calls=two, result="((), f32[3,2], s32[])").is_tuple()


@pytest.mark.parametrize("operands, result, message", [
    (["f32[10]"], "(f32[10], f32[20], s32[])",
     r"expects the async shape to be in the form of \(\(op0_shape, op1_shape, ...\), "
     r"output_shape, ...\), found"),
    (["f32[10]", "f32[10]"], START, "expects 1 operands, found 2."),
    (["f32[11]"], "((f32[11]), f32[20], s32[])",
     r"expects the async shape at index \{0\} to be a tuple with shapes that match the prefix "
     r"of the async computation parameter shape"),
    (["f32[10]"], "((f32[10]), f32[21], s32[])",
     r"expects the async shape at index \{1\} to be a tuple with shapes that match the prefix "
     r"of the async computation result shape"),
    (["f32[11]"], START, r"expects the shape of operand 0 to match the async shape at index "
                         r"\{0, 0\}"),
])
def test_async_start_errors(operands, result, message):
    with pytest.raises(ShapeError, match="async-start: " + message):
        infer("async-start", *operands, calls=WRAPPED, result=result)


def test_async_start_thread_and_aliasing():
    with pytest.raises(ShapeError, match=r"expects same async thread name as wrapped "
                                         r"computation's thread name \(other vs main\)"):
        infer("async-start", "f32[10]", calls=WRAPPED, result=START,
              async_execution_thread="other")
    ident = comp(["f32[10]"], "f32[10]")
    assert infer("async-start", "f32[10]", calls=ident, result="((f32[10]), f32[10])",
                 output_to_operand_aliasing=[((1,), (0, ()))]).is_tuple()
    with pytest.raises(ShapeError, match="Operand number 1 in aliasing config is out of bounds"):
        infer("async-start", "f32[10]", calls=ident, result="((f32[10]), f32[10])",
              output_to_operand_aliasing=[((1,), (1, ()))])
    with pytest.raises(ShapeError, match="Output index should not be empty"):
        infer("async-start", "f32[10]", calls=ident, result="((f32[10]), f32[10])",
              output_to_operand_aliasing=[((), (0, ()))])


def test_async_update_and_done():
    assert infer("async-update", START, result=START) == parse_shape(START)
    assert infer("async-update", START) == parse_shape(START)
    # async-update binding the remaining parameters (hlo_parser_test "AsyncUpdate..."):
    two = comp(["f32[2,3]", "f32[2,3]"], "f32[3,2]")
    got = infer("async-update", "((), f32[3,2], s32[])", "f32[2,3]", "f32[2,3]", calls=two)
    assert got == parse_shape("((f32[2,3], f32[2,3]), f32[3,2], s32[])")
    assert infer("async-done", START) == parse_shape("f32[20]")
    assert infer("async-done", START, calls=WRAPPED) == parse_shape("f32[20]")
    with pytest.raises(ShapeError, match=r"async-update: has 1 new operands, but the shape "
                                         r"indicates 0 new bound parameters."):
        infer("async-update", START, "f32[10]", result=START)
    with pytest.raises(ShapeError, match=r"async-update: expects the parameter shape of operand "
                                         r"to be a prefix of the output parameter shape"):
        infer("async-update", START, result="((f32[9,9]), f32[20], s32[])")
    with pytest.raises(ShapeError, match=r"async-done: expects operand 0 \(an async-start or "
                                         r"async-update\) to be in the form of"):
        infer("async-done", "f32[20]")
    with pytest.raises(ShapeError, match=r"async-done: expects its shape to match the async "
                                         r"computation result shape"):
        infer("async-done", START, calls=comp(["f32[10]"], "f32[21]"))


ASYNC_HLO = """HloModule AsyncOpSharedComputation

%async_wrapped (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}

ENTRY %Entry (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start.0 = ((f32[10]{0}), f32[20]{0}, s32[]) async-start(f32[10]{0} %p0), calls=%async_wrapped
  %async-update = ((f32[10]{0}), f32[20]{0}, s32[]) async-update(((f32[10]{0}), f32[20]{0}, s32[]) %async-start.0)
  ROOT %async-done.0 = f32[20]{0} async-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-update)
}
"""


def test_async_hlo_text():
    module = parse_hlo_module(ASYNC_HLO)
    start = module.entry.instruction("async-start.0")
    # With XLA's default syntax_sugar_async_ops, a one-instruction async computation
    # prints as the wrapped op's attributes (custom-call-start(...)); without it, calls=.
    assert attr_text(start) == 'custom_call_target="foo"'
    no_sugar = HloPrintOptions(syntax_sugar_async_ops=False)
    assert ", ".join(attribute_texts(start, no_sugar)) == "calls=%async_wrapped"
    assert attr_text(module.entry.instruction("async-update")) == ""
    assert module.entry.root.shape == parse_shape("f32[20]")
    bad = ASYNC_HLO.replace("async-start.0 = ((f32[10]{0}), f32[20]{0}, s32[])",
                            "async-start.0 = (f32[10]{0}, f32[20]{0}, s32[])")
    with pytest.raises(ParseError, match="AsyncStart and AsyncUpdate expect the shape to be "
                                         "in the form of"):
        parse_hlo_module(bad)
