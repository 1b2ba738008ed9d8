"""collective-permute (plain, combined and in-place forms), collective-permute-start/-done,
collective-broadcast, and ops.CollectivePermute / MultiCollectivePermute /
CollectiveBroadcast: shape rules (spec 002 "CollectivePermute", shape_inference_test.cc), the
verifier's source-target and in-place checks, and XLA-printed texts."""

import pytest
from collective_helpers import infer, parse_entry, printed_attrs

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape

PAIRS = [(0, 1), (1, 2), (2, 3)]


def cp(*shapes, opcode="collective-permute", result=None, pairs=PAIRS, **attrs):
    return str(infer(opcode, *shapes, result=result, source_target_pairs=pairs, **attrs))


# -- collective-permute ------------------------------------------------------------------------------


def test_shapes_from_shape_inference_test():
    # CollectivePermute, CombinedCollectivePermute, UnboundedCollectivePermute.
    assert cp("f32[8,8]") == "f32[8,8]{1,0}"
    assert cp("f32[8,8]", "f32[16,16]") == "(f32[8,8]{1,0}, f32[16,16]{1,0})"
    assert cp("f32[?,10]") == "f32[?,10]{1,0}"


def test_in_place_form_gives_the_output_shape():
    # hlo_parser_test.cc CollectivePermuteInPlaceUpdate and ...3D.
    assert cp("f32[128,32]{0,1}", "f32[128,128]{0,1}", "(s32[], s32[])", "(s32[], s32[])",
              slice_sizes=[[128, 32]]) == "f32[128,128]{0,1}"
    assert cp("f32[128,128,32]", "f32[128,128,128]", "(s32[], s32[], s32[])",
              "(s32[], s32[], s32[])", slice_sizes=[[128, 128, 32]]) == "f32[128,128,128]{2,1,0}"


def test_in_place_form_with_several_offsets_allows_repeated_ids():
    # hlo_parser_test.cc CollectivePermuteInPlaceUpdateMultipleReadWrite: each source may
    # appear once per offset (2 here).
    idx = "(s32[], s32[], s32[])"
    two = f"({idx}, {idx})"
    pairs = [(0, 1), (1, 2), (2, 3), (0, 3), (2, 1), (3, 2)]
    assert cp("f32[8,8,128]", "f32[8,8,128]", two, two, pairs=pairs,
              slice_sizes=[[1, 8, 128], [1, 8, 128]]) == "f32[8,8,128]{2,1,0}"
    with pytest.raises(ShapeError, match=r"Source 0 appears more than 2 times in instruction's "
                                         r"source-target pairs"):
        cp("f32[8,8,128]", "f32[8,8,128]", two, two, pairs=pairs + [(0, 0)],
           slice_sizes=[[1, 8, 128], [1, 8, 128]])


def test_in_place_tuple_buffers():
    # hlo_parser_test.cc CollectivePermuteTupleInPlaceUpdate.
    buf_in, buf_out = "(f32[128,32], f32[128,32])", "(f32[128,128], f32[128,128])"
    offs = "((s32[], s32[]), (s32[], s32[]))"
    assert cp(buf_in, buf_out, offs, offs, slice_sizes=[[64, 32], [64, 32]]) == \
        "(f32[128,128]{1,0}, f32[128,128]{1,0})"
    with pytest.raises(ShapeError, match="Unmatching input buffers and output buffers"):
        cp(buf_in, "(f32[128,128])", offs, offs, slice_sizes=[[64, 32]])
    with pytest.raises(ShapeError, match="Unmatching input buffers and input offset"):
        cp(buf_in, buf_out, "((s32[], s32[]))", offs, slice_sizes=[[64, 32]])


def test_in_place_errors():
    with pytest.raises(ShapeError, match=r"collective-permute: the in-place form \(with slice_sizes\) "
                                         r"takes exactly four operands .* got 2"):
        cp("f32[8]", "f32[8]", slice_sizes=[[4]])
    with pytest.raises(ShapeError, match=r"output offset index \(s32\[\]\) should have the same "
                                         r"number of elements as the buffer's rank"):
        cp("f32[8,8]", "f32[8,8]", "(s32[], s32[])", "(s32[])", slice_sizes=[[4, 4]])
    with pytest.raises(ShapeError, match=r"input offset s32\[\] is not a tuple"):
        cp("f32[8]", "f32[8]", "s32[]", "(s32[])", slice_sizes=[[4]])


@pytest.mark.parametrize("pairs, message", [
    ([(0, 1), (0, 2)], (r"Source 0 appears more than once in instruction's source-target pairs: "
                       r"\{\{0,1\},\{0,2\}\}")),
    ([(0, 1), (2, 1)], "Target 1 appears more than once"),
    ([(-1, 1)], "Source -1 in the instruction's source-target pair must be >= 0"),
    ([(1, -2)], "Target -2 in the instruction's source-target pair must be >= 0"),
])
def test_source_target_pair_errors(pairs, message):
    with pytest.raises(ShapeError, match="collective-permute: " + message):
        cp("f32[8]", pairs=pairs)


def test_operands_must_be_arrays():
    with pytest.raises(ShapeError, match=r"Expected array argument for operand of collective-permute, "
                                         r"but got \(f32\[8\]\{0\}\)"):
        cp("(f32[8])")
    with pytest.raises(InvalidArgumentError, match="missing required attribute 'source_target_pairs'"):
        infer("collective-permute", "f32[8]")


# -- start / done ------------------------------------------------------------------------------------


def test_collective_permute_start_and_done():
    # shape_inference_test.cc CollectivePermuteStart / CombinedCollectivePermuteStart.
    assert cp("f32[8,8]", opcode="collective-permute-start") == "(f32[8,8]{1,0}, f32[8,8]{1,0})"
    assert cp("f32[8,8]", "f32[16,16]", opcode="collective-permute-start") == (
        "((f32[8,8]{1,0}, f32[16,16]{1,0}), (f32[8,8]{1,0}, f32[16,16]{1,0}))")
    # Context shapes come from the declared result (hlo_parser_test.cc CollectivePermuteStartAndDone).
    assert cp("f32[128,32]{0,1}", opcode="collective-permute-start",
              result="(f32[128,32]{0,1}, f32[128,32]{0,1}, u32[], u32[])") == \
        "(f32[128,32]{0,1}, f32[128,32]{0,1}, u32[], u32[])"
    # In place: (input, output, contexts...).
    assert cp("f32[128,32]{0,1}", "f32[128,128]{0,1}", "(s32[], s32[])", "(s32[], s32[])",
              opcode="collective-permute-start", slice_sizes=[[64, 32]],
              result="(f32[128,32]{0,1}, f32[128,128]{0,1}, u32[], u32[])") == \
        "(f32[128,32]{0,1}, f32[128,128]{0,1}, u32[], u32[])"
    assert str(infer("collective-permute-done", "(f32[8], f32[8], u32[], u32[])")) == "f32[8]{0}"
    with pytest.raises(ShapeError, match=r"collective-permute-done: the operand must be the tuple "
                                         r"result of a collective-permute-start, got f32\[8\]"):
        infer("collective-permute-done", "f32[8]")


# -- collective-broadcast -------------------------------------------------------------------------------


def test_collective_broadcast():
    # shape_inference_test.cc UnboundedCollectiveBroadcast / ...WithDynamicRoot.
    assert str(infer("collective-broadcast", "f32[?,10]")) == "f32[?,10]{1,0}"
    assert str(infer("collective-broadcast", "f32[?,10]", "s32[1]", has_dynamic_root=True)) == \
        "f32[?,10]{1,0}"
    assert str(infer("collective-broadcast", "f32[2]", "s32[3]", "s32[2]",
                     has_dynamic_root=True)) == "(f32[2]{0}, s32[3]{0})"


def test_collective_broadcast_errors():
    # ...WithMismatchedDynamicRootOperand.
    with pytest.raises(ShapeError, match=r"collective-broadcast: has_dynamic_root=true needs the "
                                         r"data operand\(s\) and a last operand with the roots"):
        infer("collective-broadcast", "f32[?,10]", has_dynamic_root=True)
    with pytest.raises(ShapeError, match=r"must be a 1-D array of S32 with the same number of "
                                         r"elements as the number of non-root operands, but got "
                                         r"s32\[2\]"):
        infer("collective-broadcast", "f32[4]", "s32[2]", has_dynamic_root=True)
    with pytest.raises(ShapeError, match="Replica 5 is out of range"):
        infer("collective-broadcast", "f32[4]", replica_groups=[[0, 5]])


# -- builder --------------------------------------------------------------------------------------------


def test_builder_collective_permute():
    b = XlaBuilder("cp")
    x = ops.Parameter(b, 0, parse_shape("f32[8]"), "x")
    y = ops.CollectivePermute(x, [(0, 1), (1, 0)], channel_id=ops.ChannelHandle(2))
    comp = b.build(y)
    assert str(comp.program_shape()) == "(x: f32[8]) -> f32[8]"
    assert printed_attrs(y.instruction) == "channel_id=2, source_target_pairs={{0,1},{1,0}}"


def test_builder_multi_collective_permute_and_errors():
    b = XlaBuilder("cp")
    x = ops.Parameter(b, 0, parse_shape("f32[8]"), "x")
    y = ops.Parameter(b, 1, parse_shape("s32[2,2]"), "y")
    t = ops.MultiCollectivePermute([x, y], [(0, 1)])
    assert str(t.shape) == "(f32[8]{0}, s32[2,2]{1,0})"
    with pytest.raises(InvalidArgumentError, match="MultiCollectivePermute: needs at least 2 operands"):
        ops.MultiCollectivePermute([x], [(0, 1)])
    with pytest.raises(InvalidArgumentError, match=r"source_target_pairs must be a list of "
                                                   r"\(source, target\) pairs, got \(0, 1, 2\)"):
        ops.CollectivePermute(x, [(0, 1, 2)])
    with pytest.raises(ShapeError, match="Target 1 appears more than once"):
        ops.CollectivePermute(x, [(0, 1), (2, 1)])


def test_builder_collective_broadcast():
    b = XlaBuilder("cb")
    x = ops.Parameter(b, 0, parse_shape("f32[8]"), "x")
    y = ops.CollectiveBroadcast(x, [[1, 0], [2, 3]])
    assert str(y.shape) == "f32[8]{0}"
    assert printed_attrs(y.instruction) == "replica_groups={{1,0},{2,3}}, has_dynamic_root=false"
    roots = ops.Parameter(b, 1, parse_shape("s32[1]"), "roots")
    z = ops.CollectiveBroadcast([x, roots], [[0, 1]], has_dynamic_root=True)
    assert str(z.shape) == "f32[8]{0}"
    assert printed_attrs(z.instruction) == "replica_groups={{0,1}}, has_dynamic_root=true"
    with pytest.raises(InvalidArgumentError, match="has_dynamic_root needs the list form"):
        ops.CollectiveBroadcast(x, [[0, 1]], has_dynamic_root=True)


# -- text -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("line, attrs", [
    (("ROOT root = f32[128,32]{0,1} collective-permute(input), "
     "source_target_pairs={{0,1},{1,2},{2,3}}"),
     "source_target_pairs={{0,1},{1,2},{2,3}}"),
    (("ROOT root = f32[128,32]{0,1} collective-permute(input), channel_id=9, "
     "source_target_pairs={{0,1}}"),
     "channel_id=9, source_target_pairs={{0,1}}"),
    (("start = (f32[128,32]{0,1}, f32[128,32]{0,1}, u32[], u32[]) collective-permute-start(input), "
     "source_target_pairs={{0,1},{1,2},{2,3}}\n"
     "  ROOT root = f32[128,32]{0,1} collective-permute-done(start)"), ""),
    (("ROOT root = f32[128,32]{0,1} collective-broadcast(input), replica_groups={{1,0},{2,3}}, "
     "has_dynamic_root=false"),
     "replica_groups={{1,0},{2,3}}, has_dynamic_root=false"),
])
def test_xla_texts_print_back(line, attrs):
    instrs = parse_entry("  input = f32[128,32]{0,1} parameter(0)\n  " + line)
    assert printed_attrs(instrs["root"]) == attrs


def test_in_place_text_prints_back():
    body = """  input = f32[128,32]{0,1} parameter(0)
  output = f32[128,128]{0,1} parameter(1)
  c0 = s32[] parameter(2)
  t1 = (s32[], s32[]) tuple(c0, c0)
  ROOT root = f32[128,128]{0,1} collective-permute(input, output, t1, t1), source_target_pairs={{0,1},{1,2},{2,3}}, slice_sizes={{128,32}}"""
    assert printed_attrs(parse_entry(body)["root"]) == (
        "source_target_pairs={{0,1},{1,2},{2,3}}, slice_sizes={{128,32}}")


def test_text_pairs_must_be_pairs():
    with pytest.raises(ParseError, match="expects 'source_target_pairs=' to be a list of pairs"):
        parse_entry("  input = f32[8] parameter(0)\n"
                    "  ROOT root = f32[8] collective-permute(input), source_target_pairs={{0,1,2}}")
