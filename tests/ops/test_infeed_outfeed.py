"""infeed, outfeed, replica-id, partition-id and ops.Infeed / InfeedWithToken / Outfeed /
OutfeedWithToken / ReplicaId / PartitionId: shapes (spec 002 "Infeed", "ReplicaId";
HloVerifier's HandleInfeed/HandleOutfeed), builder compositions and XLA-printed texts."""

import pytest
from collective_helpers import emitted, infer, parse_entry, printed_attrs

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape

# -- infeed ------------------------------------------------------------------------------------------


def test_infeed_rule():
    assert str(infer("infeed", "token[]", result="(f32[3], token[])")) == "(f32[3]{0}, token[])"
    assert str(infer("infeed", "token[]", result="((u32[3]{0}, pred[]), token[])")) == \
        "((u32[3]{0}, pred[]), token[])"
    # The data layout is the declared one.
    assert str(infer("infeed", "token[]", result="(f32[2,3]{0,1}, token[])")) == \
        "(f32[2,3]{0,1}, token[])"


def test_infeed_errors():
    with pytest.raises(ShapeError, match=r"infeed: Expected operand 0 to be token-shaped, actual "
                                         r"shape is f32\[\]"):
        infer("infeed", "f32[]", result="(f32[3], token[])")
    with pytest.raises(ShapeError, match=r"infeed: infeed must have a non-empty tuple shape, got "
                                         r"f32\[3\]"):
        infer("infeed", "token[]", result="f32[3]")
    with pytest.raises(ShapeError, match="infeed: the result shape must be given"):
        infer("infeed", "token[]")
    # Spec: nested tuple shapes are not supported.
    with pytest.raises(ShapeError, match="nested tuple shapes are not supported by infeed"):
        infer("infeed", "token[]", result="(((f32[]), s32[]), token[])")


def test_builder_infeed_chains_implicit_tokens():
    b = XlaBuilder("feed")
    x = ops.Infeed(b, parse_shape("f32[2,3]{0,1}"), "cfg")
    y = ops.Infeed(b, parse_shape("s32[]"))
    comp = b.build(ops.Tuple(b, [x, y]))
    assert str(comp.program_shape()) == "() -> (f32[2,3], s32[])"
    assert emitted(comp) == [
        ("after-all", "token[]"), ("infeed", "(f32[2,3]{0,1}, token[])"),
        ("get-tuple-element", "token[]"), ("get-tuple-element", "f32[2,3]{0,1}"),
        ("infeed", "(s32[], token[])"), ("get-tuple-element", "token[]"),
        ("get-tuple-element", "s32[]"), ("tuple", "(f32[2,3]{0,1}, s32[])")]
    first, second = [i for i in comp.computation.instructions if i.opcode == "infeed"]
    # The second infeed is ordered after the first one through its token.
    assert second.operands[0].operands[0] is first
    assert printed_attrs(first) == 'infeed_config="cfg"'
    assert printed_attrs(second) == ""


def test_builder_infeed_with_token():
    b = XlaBuilder("feed")
    tok = ops.Parameter(b, 0, parse_shape("token[]"), "tok")
    r = ops.InfeedWithToken(tok, parse_shape("(f32[2], s32[])"))
    assert str(r.shape) == "((f32[2]{0}, s32[]), token[])"
    with pytest.raises(InvalidArgumentError, match="Given shape to Infeed must have a layout"):
        ops.InfeedWithToken(tok, parse_shape("f32[2,2]", fill_missing_layouts=False))
    with pytest.raises(InvalidArgumentError, match="InfeedWithToken: shape must be a Shape"):
        ops.InfeedWithToken(tok, "f32[2]")


# -- outfeed ----------------------------------------------------------------------------------------


def test_outfeed_rule():
    assert str(infer("outfeed", "f32[3]", "token[]")) == "token[]"
    assert str(infer("outfeed", "(u32[3], pred[])", "token[]",
                     outfeed_shape=parse_shape("(u32[3]{0}, pred[])"))) == "token[]"


def test_outfeed_errors():
    with pytest.raises(ShapeError, match=r"outfeed: Expected outfeed shape to be equal to operand's "
                                         r"shape f32\[3\]\{0\}, actual shape is f32\[4\]\{0\}"):
        infer("outfeed", "f32[3]", "token[]", outfeed_shape=parse_shape("f32[4]"))
    with pytest.raises(ShapeError, match="outfeed: Expected operand 1 to be token-shaped"):
        infer("outfeed", "f32[3]", "f32[3]")


def test_builder_outfeed():
    b = XlaBuilder("out")
    x = ops.Parameter(b, 0, parse_shape("f32[2,3]"), "x")
    assert ops.Outfeed(x, parse_shape("f32[2,3]{0,1}"), "") is None  # void in XLA
    ops.Outfeed(x, x.shape, "second")
    comp = b.build()
    assert emitted(comp) == [("after-all", "token[]"), ("outfeed", "token[]"), ("tuple", "()"),
                             ("outfeed", "token[]"), ("tuple", "()")]
    first, second = [i for i in comp.computation.instructions if i.opcode == "outfeed"]
    assert second.operands[1] is first  # chained through the first outfeed's token
    assert printed_attrs(first) == "outfeed_shape=f32[2,3]{0,1}"
    assert printed_attrs(second) == 'outfeed_shape=f32[2,3]{1,0}, outfeed_config="second"'


def test_builder_outfeed_with_token_and_errors():
    b = XlaBuilder("out")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    tok = ops.Parameter(b, 1, parse_shape("token[]"), "tok")
    t = ops.OutfeedWithToken(x, tok, x.shape, "")
    assert str(t.shape) == "token[]" and t.instruction.opcode == "outfeed"
    with pytest.raises(InvalidArgumentError, match=r"Outfeed shape f32\[3\]\{0\} must be compatible "
                                                   r"with operand shape f32\[2\]\{0\}"):
        ops.OutfeedWithToken(x, tok, parse_shape("f32[3]"), "")
    with pytest.raises(InvalidArgumentError, match="Given shape to Outfeed must have a layout"):
        ops.Outfeed(x, parse_shape("f32[2]", fill_missing_layouts=False), "")


def test_feed_texts_print_back():
    # hlo_parser_test.cc InfeedOutfeed.
    body = """  token0 = token[] after-all()
  infeed = ((u32[3]{0}, pred[]), token[]) infeed(token0)
  infeed.data = (u32[3]{0}, pred[]) get-tuple-element(infeed), index=0
  outfeed = token[] outfeed(infeed.data, token0), outfeed_shape=(u32[3]{0}, pred[])
  infeed.1 = ((u32[3]{0}, pred[]), token[]) infeed(token0), infeed_config="abc"
  ROOT outfeed.1 = token[] outfeed(infeed.data, token0), outfeed_shape=(u32[3]{0}, pred[]), outfeed_config="x\\"y\""""
    instrs = parse_entry(body)
    assert printed_attrs(instrs["infeed"]) == ""
    assert printed_attrs(instrs["outfeed"]) == "outfeed_shape=(u32[3]{0}, pred[])"
    assert printed_attrs(instrs["infeed.1"]) == 'infeed_config="abc"'
    assert printed_attrs(instrs["outfeed.1"]) == \
        'outfeed_shape=(u32[3]{0}, pred[]), outfeed_config="x\\"y"'


def test_feed_text_errors():
    with pytest.raises(ParseError, match="infeed must have a non-empty tuple shape"):
        parse_entry("  tok = token[] after-all()\n  ROOT i = f32[3] infeed(tok)")


# -- replica-id / partition-id ------------------------------------------------------------------------


def test_ids():
    assert str(infer("replica-id")) == "u32[]"
    assert str(infer("partition-id")) == "u32[]"
    with pytest.raises(ShapeError, match="replica-id: expects 0 operands, got 1"):
        infer("replica-id", "u32[]")
    b = XlaBuilder("ids")
    r = ops.ReplicaId(b)
    p = ops.PartitionId(b)
    comp = b.build(ops.Tuple(b, [r, p]))
    assert str(comp.program_shape()) == "() -> (u32[], u32[])"
    with pytest.raises(InvalidArgumentError, match="ReplicaId: expected an XlaBuilder"):
        ops.ReplicaId(r)


def test_id_texts():
    instrs = parse_entry("  r = u32[] replica-id()\n  ROOT id = u32[] partition-id()")
    assert str(instrs["r"].shape) == "u32[]" and printed_attrs(instrs["id"]) == ""
    with pytest.raises(ParseError, match=r"replica-id: the given shape s32\[\] is not compatible"):
        parse_entry("  ROOT r = s32[] replica-id()")
