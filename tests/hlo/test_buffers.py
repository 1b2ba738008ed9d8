"""Modules with buffer shapes (``b(...)``): read and printed as XLA prints them, through
XLA's protos, checked where XLA's verifier (VerifyBuffers) checks them, and run with XLA's
buffer custom calls: Pin (array -> buffer), Unpin (buffer -> array), CreateBuffer."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.errors import ParseError
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.proto import module_to_proto, parse_hlo_module_proto
from xlapy.runtime import Client
from xlapy.verifier import VerifierError, verify_module

PIN_UNPIN = """HloModule m
ENTRY e {
  a = f32[4,16] parameter(0)
  p = b(f32[4,16]) custom-call(a), custom_call_target="Pin", output_to_operand_aliasing={{}: (0, {})}
  c = b(f32[2,4]{0,1}) custom-call(), custom_call_target="CreateBuffer"
  u = f32[4,16] custom-call(p), custom_call_target="Unpin", output_to_operand_aliasing={{}: (0, {})}
  ROOT t = (f32[4,16], b(f32[2,4]{0,1})) tuple(u, c)
}"""

#: What XLA (jaxlib 0.10.2's hlo_module_from_text(PIN_UNPIN).to_string()) prints.
XLA_PRINTS = """HloModule m, entry_computation_layout={(f32[4,16]{1,0})->(f32[4,16]{1,0}, b(f32[2,4]{0,1}))}

ENTRY %e (a: f32[4,16]) -> (f32[4,16], b(f32[2,4])) {
  %a = f32[4,16]{1,0} parameter(0)
  %p = b(f32[4,16]{1,0}) custom-call(%a), custom_call_target="Pin", output_to_operand_aliasing={{}: (0, {})}
  %u = f32[4,16]{1,0} custom-call(%p), custom_call_target="Unpin", output_to_operand_aliasing={{}: (0, {})}
  %c = b(f32[2,4]{0,1}) custom-call(), custom_call_target="CreateBuffer"
  ROOT %t = (f32[4,16]{1,0}, b(f32[2,4]{0,1})) tuple(%u, %c)
}

"""


def test_module_prints_as_xla_and_reads_back():
    module = parse_hlo_module(PIN_UNPIN)
    verify_module(module)
    assert module.to_string() == XLA_PRINTS
    assert parse_hlo_module(XLA_PRINTS).to_string() == XLA_PRINTS


def test_buffers_through_xlas_protos():
    pytest.importorskip("google.protobuf")
    module = parse_hlo_module(PIN_UNPIN)
    proto = module_to_proto(module)
    shape = proto.computations[0].instructions[1].shape
    assert shape.element_type == 34 and len(shape.tuple_shapes) == 1  # BUFFER, its array
    again = parse_hlo_module_proto(proto.SerializeToString())
    assert again.to_string() == module.to_string()


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_pin_unpin_and_create_buffer_run(backend):
    x = np.arange(64, dtype=np.float32).reshape(4, 16)
    module = parse_hlo_module(PIN_UNPIN)
    if backend == "interpreter":
        unpinned, created = evaluate(module, x)
    else:
        unpinned, created = Client(backend="cpu").compile(module)(x)
    np.testing.assert_array_equal(unpinned, x)
    assert created.shape == (2, 4) and created.dtype == np.float32


def _module(body: str, params: str = "  a = f32[2] parameter(0)\n") -> str:
    return f"HloModule m\nENTRY e {{\n{params}{body}\n}}\n"


@pytest.mark.parametrize("body, params, message", [
    # no buffers outside the ops that take them
    ('  p = b(f32[2]) custom-call(a), custom_call_target="Pin", output_to_operand_aliasing='
     '{{}: (0, {})}\n  ROOT n = b(f32[2]) negate(p)', None,
     "Seen buffers while buffers aren't allowed in this context: negate %n"),
    ("  ROOT t = (b(f32[2])) tuple(a)", "  a = b(f32[2]) parameter(0)\n",
     "Seen buffers while buffers aren't allowed in this context: parameter %a"),
    ('  ROOT p = f32[2] custom-call(a), custom_call_target="Pin", output_to_operand_aliasing='
     '{{}: (0, {})}', None, "custom-call to Pin must have one buffer result"),
    ('  ROOT p = b(f32[3]) custom-call(a), custom_call_target="Pin"', None,
     "custom-call to Pin must have the same shape as the operand"),
    ('  ROOT p = b(f32[2]) custom-call(a), custom_call_target="Pin"', None,
     "custom-call to Pin must have one output-to-operand aliasing"),
    ('  ROOT c = b(f32[2]) custom-call(a), custom_call_target="CreateBuffer"', None,
     "custom-call to CreateBuffer can't have an operand"),
    ('  ROOT u = f32[2] custom-call(a), custom_call_target="Unpin"', None,
     "custom-call to Unpin must have one buffer operand"),
    ('  c = b(f32[2]) custom-call(), custom_call_target="CreateBuffer"\n'
     '  ROOT f = f32[2] custom-call(c), custom_call_target="foo"', None,
     r"buffer is used in operands but not in results: operand 0 ShapeIndex \{\}"),
    ('  ROOT f = b(f32[2]) custom-call(a), custom_call_target="foo"', None,
     r"buffer is used in results but not in operands: \{\}"),
])
def test_verifier_allows_buffers_where_xla_does(body, params, message):
    text = _module(body, params if params is not None else "  a = f32[2] parameter(0)\n")
    module = parse_hlo_module(text, verify=False)  # XLA's parser leaves these to the verifier
    with pytest.raises(VerifierError, match=message):
        verify_module(module)


def test_buffers_a_custom_call_aliases_and_dynamic_update_slice_into_a_buffer():
    text = _module(
        '  c = b(f32[4]) custom-call(), custom_call_target="CreateBuffer"\n'
        '  w = b(f32[4]) custom-call(c), custom_call_target="write", '
        'output_to_operand_aliasing={{}: (0, {})}\n'
        '  i = s32[] constant(1)\n'
        '  d = b(f32[4]) dynamic-update-slice(w, a, i)\n'
        '  ROOT u = f32[4] custom-call(d), custom_call_target="Unpin", '
        'output_to_operand_aliasing={{}: (0, {})}')
    verify_module(parse_hlo_module(text))
    bad = text.replace("  d = b(f32[4]) dynamic", "  d = f32[4] dynamic")
    with pytest.raises((ParseError, VerifierError)):
        verify_module(parse_hlo_module(bad, verify=False))


def test_a_shape_rule_keeps_buffers_apart_from_arrays():
    """With verification on while reading, an elementwise op cannot return a buffer."""
    text = _module("  ROOT n = b(f32[2]) negate(a)")
    with pytest.raises(ParseError, match=r"the given shape b\(f32\[2\]\{0\}\) is not compatible "
                                         r"with the inferred shape f32\[2\]\{0\}"):
        parse_hlo_module(text)
