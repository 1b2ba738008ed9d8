"""Bad StableHLO input: a ParseError naming the line and column of the MLIR text, with the
offending line and a caret, as the HLO parser's errors do."""

from __future__ import annotations

import pytest

from xlapy import ParseError, parse_stablehlo


def _error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_stablehlo(text)
    return info.value


def _func(body: str, args="%a: tensor<2xf32>", results="tensor<2xf32>") -> str:
    return f"func.func @main({args}) -> {results} {{\n{body}\n}}"


@pytest.mark.parametrize("body,line,column,message", [
    ("  %0 = stablehlo.add %a, %b : tensor<2xf32>\n  return %0 : tensor<2xf32>",
     2, 26, "use of undefined value '%b'"),
    ("  %0 = stablehlo.frobnicate %a : tensor<2xf32>\n  return %0 : tensor<2xf32>",
     2, 8, "unknown op 'stablehlo.frobnicate'"),
    ("  %0 = stablehlo.negate %a : (tensor<2xf32>) -> tensor<3xf32>\n"
     "  return %0 : tensor<3xf32>",
     2, 3, "stablehlo.negate: negate: the given shape f32[3]{0} is not compatible with the "
           "inferred shape f32[2]{0}"),
    ("  %0 = stablehlo.negate %a : (tensor<2xi32>) -> tensor<2xf32>\n"
     "  return %0 : tensor<2xf32>",
     2, 30, "operand %a has type tensor<2xf32>, but 'stablehlo.negate' says tensor<2xi32>"),
    ("  %0, %1 = stablehlo.negate %a : tensor<2xf32>\n  return %0 : tensor<2xf32>",
     2, 34, "'stablehlo.negate' gives 1 type for 2 results"),
    ("  %0 = stablehlo.constant dense<[1, 300]> : tensor<2xi8>\n  return %a : tensor<2xf32>",
     2, 37, "integer 300 does not fit s8"),
    ("  %0 = stablehlo.constant dense<[1, 2]> : tensor<3xi8>\n  return %a : tensor<2xf32>",
     2, 27, "dense literal has 2 elements (shape 2) but its type is tensor<3xi8>"),
    ("  %0 = call @main(%a) : (tensor<2xf32>) -> tensor<2xf32>\n  return %0 : tensor<2xf32>",
     2, 13, "function @main calls itself"),
    ("  %0 = call @nope(%a) : (tensor<2xf32>) -> tensor<2xf32>\n  return %0 : tensor<2xf32>",
     2, 13, "call to unknown function @nope"),
    ('  %0 = "stablehlo.transpose"(%a) : (tensor<2xf32>) -> tensor<2xf32>\n'
     "  return %0 : tensor<2xf32>",
     2, 3, "stablehlo.transpose: missing attribute 'permutation'"),
    ("  %0:2 = \"stablehlo.optimization_barrier\"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> "
     "(tensor<2xf32>, tensor<2xf32>)\n  return %0#2 : tensor<2xf32>",
     3, 10, "'%0' has 2 results; #2 does not exist"),
    ("  %0 = stablehlo.negate %a : tensor<2xf32>",
     1, 1, "the region does not end with a return"),
])
def test_errors_point_at_the_mlir_text(body, line, column, message):
    err = _error(_func(body))
    assert (err.line, err.column) == (line, column), str(err)
    assert message in err.message
    assert str(err).startswith(f"stablehlo:{line}:{column}: ")
    assert str(err).splitlines()[2].index("^") == column - 1


def test_hlo_shape_rules_check_every_op():
    err = _error(_func("  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
                       "(tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>\n"
                       "  return %0 : tensor<2x5xf32>",
                       args="%a: tensor<2x3xf32>, %b: tensor<4x5xf32>",
                       results="tensor<2x5xf32>"))
    assert err.line == 2 and "Contracting dimension sizes are not compatible" in err.message


def test_ops_xla_does_not_translate_say_so():
    err = _error(_func("  %0 = stablehlo.uniform_quantize %a : (tensor<2xf32>) -> "
                       "tensor<2x!quant.uniform<i8:f32, 2.0:15>>\n  return %a : tensor<2xf32>"))
    assert (err.line, err.column) == (2, 8)
    assert "cannot be translated to HLO: quantized types have no HLO form" in err.message


def test_captured_values_outside_control_flow_regions():
    err = _error(_func("""  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %c) across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
   reducer(%x: tensor<f32>, %y: tensor<f32>) {
    %s = stablehlo.add %x, %a : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }
  return %0 : tensor<f32>""", results="tensor<f32>"))
    assert err.line == 5 and "'%a' is defined outside this region" in err.message


def test_types_and_syntax():
    err = _error("func.func @main(%a: tensor<2xq32>) -> tensor<2xf32> {\n"
                 "  return %a : tensor<2xf32>\n}")
    assert (err.line, err.column, err.message) == (1, 30, "expected a type, found 'q32'")
    err = _error("func.func @main(%a: tensor<*xf32>) -> tensor<2xf32> {\n}")
    assert "unranked tensors" in err.message
    err = _error("")
    assert "expected a module or a func.func" in err.message
    err = _error("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                 "  %0 = stablehlo.negate %a : tensor<2xf32>\n")
    assert (err.line, err.message) == (3, "expected '}' to end the region, found end of input")


def test_not_text():
    from xlapy import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="expected MLIR text"):
        parse_stablehlo(b"module {}")
