"""xlapy: XLA in Python.

Shapes and layouts::

    import xlapy
    s = xlapy.parse_shape("f32[3,5]{1,0:T(2,2)}")
    xlapy.linear_index(s, (2, 3))      # 17
    xlapy.physical_size(s)             # 24 elements, tile padding included
    xlapy.byte_size(s)                 # 96

HLO text, StableHLO text, XLA's protos and the builder::

    m = xlapy.parse_hlo_module(text)   # any module XLA prints
    m = xlapy.parse_stablehlo(mlir)    # jax.jit(f).lower(x).as_text(), as XLA translates it
    m = xlapy.parse_hlo_module_proto(open("module.hlo.pb", "rb").read())  # or HloSnapshot
    data = xlapy.module_to_proto(m).SerializeToString()
    xlapy.verify_module(m)
    print(m.to_string(print_operand_shape=True))

    from xlapy import ops
    b = xlapy.XlaBuilder("f")
    x = ops.Parameter(b, 0, xlapy.parse_shape("f32[3]"), "x")
    comp = b.build(ops.Add(x, x))

The reference interpreter::

    xlapy.evaluate(comp, np.ones(3, np.float32))   # array([2., 2., 2.], dtype=float32)
"""

from xlapy.errors import InvalidArgumentError, ParseError, ResourceExhaustedError, XlaError
from xlapy.shape import (
    COMBINE_DIMENSION,
    UNBOUNDED_SIZE,
    Layout,
    PaddingValue,
    PrimitiveType,
    Shape,
    SplitConfig,
    Tile,
    byte_size,
    from_physical,
    linear_index,
    multi_index,
    parse_layout,
    parse_shape,
    physical_size,
    to_physical,
)
from xlapy.shape.literal import Literal, parse_literal, parse_literal_with_shape
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions
from xlapy.verifier import VerifierError, verify_module
from xlapy.stablehlo import is_stablehlo_text, parse_stablehlo
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder, XlaComputation, XlaOp
from xlapy import ops
from xlapy.interpreter import EvalOptions, EvaluationError, evaluate

__version__ = "0.1.0"

__all__ = [
    "COMBINE_DIMENSION", "UNBOUNDED_SIZE", "InvalidArgumentError", "Layout", "PaddingValue",
    "ParseError", "PrimitiveType", "ResourceExhaustedError", "Shape", "SplitConfig", "Tile",
    "XlaError", "byte_size",
    "from_physical", "linear_index", "multi_index", "parse_layout", "parse_shape",
    "physical_size", "to_physical",
    "Literal", "parse_literal", "parse_literal_with_shape",
    "Computation", "HloPrintOptions", "Instruction", "Module", "ShapeError", "VerifierError",
    "XlaBuilder", "XlaComputation", "XlaOp", "ops", "parse_hlo_module", "verify_module",
    "is_stablehlo_text", "parse_stablehlo",
    "EvalOptions", "EvaluationError", "evaluate",
]

# XLA's protobuf forms (xlapy/proto): HloModuleProto, HloProto, HloSnapshot, binary and text.
from xlapy.proto import module_to_proto, parse_hlo_module_proto, parse_hlo_snapshot

__all__ += ["module_to_proto", "parse_hlo_module_proto", "parse_hlo_snapshot"]

# The runtime (xlapy/runtime): clients, executables, replicas, custom-call targets.
from xlapy.runtime import Client, register_custom_call, register_custom_call_library

__all__ += ["Client", "register_custom_call", "register_custom_call_library"]

# jax users (xlapy/jit.py, xlapy/tools/jax_compare.py; jax is imported only when called).
from xlapy.jit import jit
from xlapy.tools.jax_compare import compare

__all__ += ["compare", "jit"]
