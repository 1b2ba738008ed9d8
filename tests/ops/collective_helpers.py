"""Helpers shared by the collective, channel, feed and RNG op tests: run a shape rule on
shape texts, make a reducer computation, parse HLO text and print an instruction's
attributes back as XLA would."""

from xlapy import ops
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.opdefs import get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


def shape(s):
    return parse_shape(s) if isinstance(s, str) else s


def infer(opcode, *shapes, result=None, **attrs):
    """The opcode's shape rule on operand shape texts (``result``: the declared shape)."""
    d = get_opdef(opcode)
    return d.infer_shape([shape(s) for s in shapes], d.check_attrs(attrs),
                         None if result is None else shape(result))


def reducer(element_type="f32", kind="add", name="add"):
    """An XlaComputation (x, y) -> x <kind> y on scalars of ``element_type``."""
    b = XlaBuilder(name)
    s = parse_shape(f"{element_type}[]")
    x = ops.Parameter(b, 0, s, "x")
    y = ops.Parameter(b, 1, s, "y")
    b.emit(kind, [x, y])
    return b.build()


ADD = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT sum = f32[] add(x, y)
}
"""


def parse_entry(body, computations=ADD, header="HloModule m"):
    """Parse ``body`` (instruction lines) as the entry computation; {name: instruction}."""
    text = f"{header}\n{computations}\nENTRY e {{\n{body}\n}}\n"
    module = parse_hlo_module(text)
    return {i.name: i for i in module.entry.instructions}


def printed_attrs(instr):
    """The ``key=value`` attributes XLA prints after the operands, joined by ', '."""
    return ", ".join(attribute_texts(instr, HloPrintOptions.default()))


def emitted(comp):
    """(opcode, shape text) of every non-parameter instruction of a built computation."""
    return [(i.opcode, str(i.shape)) for i in comp.computation.instructions
            if i.opcode != "parameter"]
