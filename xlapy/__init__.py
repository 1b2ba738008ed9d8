"""xlapy: XLA in Python.

Public entry points of the foundation layer::

    import xlapy
    s = xlapy.parse_shape("f32[3,5]{1,0:T(2,2)}")
    xlapy.linear_index(s, (2, 3))      # 17
    xlapy.physical_size(s)             # 24 elements, tile padding included
    xlapy.byte_size(s)                 # 96
"""

from xlapy.errors import InvalidArgumentError, ParseError, XlaError
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

__version__ = "0.1.0"

__all__ = [
    "COMBINE_DIMENSION", "UNBOUNDED_SIZE", "InvalidArgumentError", "Layout", "PaddingValue",
    "ParseError", "PrimitiveType", "Shape", "SplitConfig", "Tile", "XlaError", "byte_size",
    "from_physical", "linear_index", "multi_index", "parse_layout", "parse_shape",
    "physical_size", "to_physical",
    "Literal", "parse_literal", "parse_literal_with_shape",
]
