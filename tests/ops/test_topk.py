"""topk: the shape rule (GoodTopK / FailTopKLargeK of shape_inference_test.cc), the TopK
builder function and the HLO text (XLA always prints k, largest and is_stable)."""

import pytest

from program_shapes import infer
from xlapy import ops
from xlapy.ops.builder import XlaBuilder
from xlapy.errors import InvalidArgumentError
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.opdefs import ShapeError
from xlapy.shape import parse_shape


def test_topk_shapes():
    assert infer("topk", "f32[3,4,5]", k=2) == parse_shape("(f32[3,4,2], s32[3,4,2])")
    assert infer("topk", "bf16[7]", k=7, largest=False) == parse_shape("(bf16[7], s32[7])")
    # The last dimension loses its dynamism; the others keep it.
    assert infer("topk", "f32[<=3,<=5]", k=2) == parse_shape("(f32[<=3,2], s32[<=3,2])")


def test_topk_errors():
    with pytest.raises(ShapeError, match="topk: k=10 is larger than the last dimension of "
                                         "size=5"):
        infer("topk", "f32[3,4,5]", k=10)
    with pytest.raises(ShapeError, match=r"topk: Expected array argument for operand of top-k "
                                         r"operation, but got \(f32\[2\]\{0\}\)"):
        infer("topk", "(f32[2])", k=1)
    with pytest.raises(ShapeError, match="topk: the operand must have at least one dimension"):
        infer("topk", "f32[]", k=1)
    with pytest.raises(InvalidArgumentError, match="topk: attribute 'k' must be >= 0"):
        infer("topk", "f32[3]", k=-1)


def test_topk_builder():
    b = XlaBuilder("t")
    x = ops.Parameter(b, 0, parse_shape("f32[8,1024]"), "x")
    top = ops.TopK(x, 24, largest=True, is_stable=False)
    assert top.shape == parse_shape("(f32[8,24], s32[8,24])")
    assert ", ".join(attribute_texts(top.instruction, HloPrintOptions.default())) == (
        "k=24, largest=true, is_stable=false")
    smallest = ops.TopK(x, 3, False)
    assert smallest.instruction.attrs["largest"] is False
    with pytest.raises(ShapeError, match="topk: k=2000 is larger"):
        ops.TopK(x, 2000)
    assert str(b.build(top).program_shape()) == "(x: f32[8,1024]) -> (f32[8,24], s32[8,24])"


@pytest.mark.parametrize("attrs", [
    "k=2, largest=true, is_stable=true",     # hlo_parser_test.cc "TopK"
    "k=2, largest=true, is_stable=false",    # "TopKUnstable"
])
def test_topk_hlo_text(attrs):
    text = ("HloModule m\n\nENTRY TopK {\n  x = f32[10,10]{0,1} parameter(0)\n"
            f"  ROOT topk = (f32[10,2]{{0,1}}, s32[10,2]{{0,1}}) topk(x), {attrs}\n}}\n")
    root = parse_hlo_module(text).entry.root
    assert ", ".join(attribute_texts(root, HloPrintOptions.default())) == attrs
    # Absent largest / is_stable mean true (XLA's parser defaults).
    bare = parse_hlo_module(text.replace(", " + attrs.split(", ", 1)[1], "")).entry.root
    assert bare.attrs["largest"] is None and bare.shape == root.shape
