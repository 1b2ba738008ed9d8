"""batch-norm-training, batch-norm-inference, batch-norm-grad: InferBatchNorm*Shape with
XLA's messages, the unbounded cases of shape_inference_test.cc, hlo_parser_test texts and
the builder functions."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


def infer(opcode, *shapes, epsilon=0.001, feature_index=1):
    d = get_opdef(opcode)
    attrs = d.check_attrs({"epsilon": epsilon, "feature_index": feature_index})
    return str(d.infer_shape([parse_shape(s) for s in shapes], attrs))


def test_training():
    assert (infer("batch-norm-training", "f32[2,2,1,2]", "f32[2]", "f32[2]", feature_index=3)
            == "(f32[2,2,1,2]{3,2,1,0}, f32[2]{0}, f32[2]{0})")
    # UnboundedBatchNormTraining: the statistics take the feature dimension's size.
    assert (infer("batch-norm-training", "f32[?,?,7]", "f32[5]", "f32[5]")
            == "(f32[?,?,7]{2,1,0}, f32[?]{0}, f32[?]{0})")
    assert (infer("batch-norm-training", "bf16[4,<=3]", "f32[3]", "bf16[3]")
            == "(bf16[4,<=3]{1,0}, bf16[<=3]{0}, bf16[<=3]{0})")


def test_inference_and_grad():
    assert (infer("batch-norm-inference", "f32[2,2,2,2]", "f32[2]", "f32[2]", "f32[2]", "f32[2]",
                  feature_index=0) == "f32[2,2,2,2]{3,2,1,0}")
    assert (infer("batch-norm-inference", "f32[?,?,7]", "f32[5]", "f32[5]", "f32[5]", "f32[5]")
            == "f32[?,?,7]{2,1,0}")
    assert (infer("batch-norm-grad", "f32[2,2,2,2]", "f32[2]", "f32[2]", "f32[2]", "f32[2,2,2,2]",
                  feature_index=0) == "(f32[2,2,2,2]{3,2,1,0}, f32[2]{0}, f32[2]{0})")
    # UnboundedBatchNormGrad
    assert (infer("batch-norm-grad", "f32[?,?,7]", "f32[5]", "f32[?]", "f32[?]", "f32[5,?,7]")
            == "(f32[?,?,7]{2,1,0}, f32[?]{0}, f32[?]{0})")


@pytest.mark.parametrize("shapes,feature_index,message", [
    (("f32[2,3]", "f32[3]", "f32[3]"), 2,
     ("Expected feature_index of batch-norm-training to be smaller than the rank of "
     "operand_shape; got feature_index 2, and rank 2.")),
    (("f32[2,3]", "f32[3]", "f32[3]"), -1,
     "Expected feature_index of batch-norm-training to be a non-negative number, got -1."),
    (("f32[2,3]", "f32[3,1]", "f32[3]"), 1,
     "Scale input of batch-norm-training must have rank 1, but has rank 2."),
    (("f32[2,3]", "f32[3]", "f32[]"), 1,
     "Offset input of batch-norm-training must have rank 1, but has rank 0."),
    (("s32[2,3]", "s32[3]", "s32[3]"), 1,
     ("The operand to batch-norm-training must have a floating point element type, but the "
     "shape is S32.")),
    (("f32[2,3]", "s32[3]", "f32[3]"), 1,
     ("The inputs should have the same element type for batch-norm-training, but the shape of "
     "scale factor is S32 and the shape of operand is F32.")),
    (("f32[2,3]", "f32[3]", "f32[4]"), 1,
     ("The size of offset factor should be compatible with feature count, but the size of "
     "offset factor is 4 and the feature count is 3.")),
    (("f32[2,3]", "f32[2]", "f32[3]"), 1,
     "The size of scale factor should be compatible with feature count"),
    (("(f32[2,3])", "f32[3]", "f32[3]"), 1,
     r"Expected array argument for operand of batch norm training, but got \(f32\[2,3\]\{1,0\}\)."),
])
def test_training_errors(shapes, feature_index, message):
    with pytest.raises(ShapeError, match="^batch-norm-training: " + message):
        infer("batch-norm-training", *shapes, feature_index=feature_index)


@pytest.mark.parametrize("opcode,shapes,message", [
    ("batch-norm-inference", ("f32[2,3]", "f32[3]", "f32[3]", "f32[3]", "f32[3,1]"),
     "Variance input of batch-norm-inference must have rank 1, but has rank 2."),
    ("batch-norm-inference", ("f32[2,3]", "f32[3]", "f32[3]", "s32[3]", "f32[3]"),
     "the shape of mean is S32 and the shape of operand is F32"),
    ("batch-norm-inference", ("f32[2,3]", "f32[3]", "f32[3]", "f32[3]", "f32[2]"),
     ("The size of variance should be compatible with feature count, but the size of variance "
     "is 2 and the feature count is 3.")),
    ("batch-norm-grad", ("f32[2,3]", "f32[3]", "f32[3]", "f32[3]", "f32[2,3,1]"),
     (r"Expected operand_shape of batch-norm-grad to have the same rank as output_grad_shape; "
     r"got rank\(oprand_shape\) 2, and rank\(output_grad_shape\) 3.")),
    ("batch-norm-grad", ("f32[2,3]", "f32[3]", "f32[3]", "f32[3]", "s32[2,3]"),
     ("The output_grad to batch-norm-grad must have a floating point element type, but the "
     "shape is S32.")),
    ("batch-norm-grad", ("f32[2,3]", "f32[3]", "f32[3]", "f32[3]", "f32[2,4]"),
     ("The bounds of operand shape should be compatible with output_grad's, but the bound of "
     "operand_shape at dimension 1 is 3 and the bound of output_grad_shape is 4.")),
    ("batch-norm-grad", ("f32[2,3]", "f32[3]", "f32[3]", "f32[]", "f32[2,3]"),
     "Var input of batch-norm-grad must have rank 1, but has rank 0."),
    ("batch-norm-grad", ("f32[2,3]", "f32[3]", "f32[4]", "f32[3]", "f32[2,3]"),
     "The size of mean should be compatible with feature count"),
    ("batch-norm-grad", ("f32[2,3]", "f32[3]", "f32[3]", "c64[3]", "f32[2,3]"),
     "the element type of variance is C64 and the element type of operand is F32"),
])
def test_inference_and_grad_errors(opcode, shapes, message):
    with pytest.raises(ShapeError, match=f"^{opcode}: .*{message}"):
        infer(opcode, *shapes)


def test_attributes_are_required():
    d = get_opdef("batch-norm-grad")
    with pytest.raises(InvalidArgumentError, match="missing required attribute 'epsilon'"):
        d.check_attrs({"feature_index": 0})


def test_parsed_batch_norm_training_prints_back():
    text = """HloModule BasicTraining_module, entry_computation_layout={()->(f32[2,2,1,2]{3,2,1,0}, f32[2]{0}, f32[2]{0})}

ENTRY %BasicTraining.v4 () -> (f32[2,2,1,2], f32[2], f32[2]) {
  %constant = f32[2,2,1,2]{3,2,1,0} constant({ { /*i0=0*/ { /*i1=0*/ { 1, 2 } }, { /*i1=1*/ { 3, 4 } } }, { /*i0=1*/ { /*i1=0*/ { 5, 6 } }, { /*i1=1*/ { 7, 8 } } } })
  %constant.1 = f32[2]{0} constant({2, 3})
  %constant.2 = f32[2]{0} constant({1, 2})
  ROOT %batch-norm-training = (f32[2,2,1,2]{3,2,1,0}, f32[2]{0}, f32[2]{0}) batch-norm-training(f32[2,2,1,2]{3,2,1,0} %constant, f32[2]{0} %constant.1, f32[2]{0} %constant.2), epsilon=0.001, feature_index=3
}

"""
    module = parse_hlo_module(text)
    options = HloPrintOptions(print_operand_shape=True, print_large_constants=True)
    assert module_to_string(module, options) == text


def test_builder():
    b = XlaBuilder("bn")
    x = ops.Parameter(b, 0, parse_shape("f32[8,4,4,16]"), "x")
    gamma = ops.Parameter(b, 1, parse_shape("f32[16]"), "gamma")
    beta = ops.Parameter(b, 2, parse_shape("f32[16]"), "beta")
    dy = ops.Parameter(b, 3, parse_shape("f32[8,4,4,16]"), "dy")
    training = ops.BatchNormTraining(x, gamma, beta, 1e-5, 3)
    assert str(training.shape) == "(f32[8,4,4,16]{3,2,1,0}, f32[16]{0}, f32[16]{0})"
    mean = ops.GetTupleElement(training, 1)
    var = ops.GetTupleElement(training, 2)
    y = ops.BatchNormInference(x, gamma, beta, mean, var, 1e-5, 3)
    assert str(y.shape) == "f32[8,4,4,16]{3,2,1,0}"
    grads = ops.BatchNormGrad(x, gamma, mean, var, dy, 1e-5, 3)
    assert str(grads.shape) == "(f32[8,4,4,16]{3,2,1,0}, f32[16]{0}, f32[16]{0})"
    with pytest.raises(ShapeError, match="batch-norm-training: Expected feature_index"):
        ops.BatchNormTraining(x, gamma, beta, 1e-5, 4)
    text = module_to_string(b.build(grads).module, HloPrintOptions.short_parsable())
    assert ("batch-norm-grad(x, gamma, get-tuple-element, get-tuple-element.1, dy), "
            "epsilon=1e-05, feature_index=3") in text
