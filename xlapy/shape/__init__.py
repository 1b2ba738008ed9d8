"""The shape layer: element types, shapes, layouts, index arithmetic, physical buffers,
literals. Imports nothing above it (never xlapy.hlo, ops, builder, ...)."""

from xlapy.shape.dtypes import PrimitiveType, bit_width, byte_width, from_dtype, to_dtype, type_name
from xlapy.shape.index import (
    byte_size,
    element_size_in_bits,
    linear_index,
    linear_indices,
    multi_index,
    physical_plan,
    physical_size,
)
from xlapy.shape.layout import COMBINE_DIMENSION, MEMORY_SPACE_NAMES, Layout, PaddingValue, SplitConfig, Tile
from xlapy.shape.physical import from_physical, to_physical
from xlapy.shape.shape import UNBOUNDED_SIZE, Shape
from xlapy.shape.text import Scanner, parse_layout, parse_shape, read_layout, read_shape
from xlapy.shape.literal import Literal, parse_literal, parse_literal_with_shape

__all__ = [
    "COMBINE_DIMENSION", "MEMORY_SPACE_NAMES", "UNBOUNDED_SIZE", "Layout", "PaddingValue",
    "PrimitiveType", "Scanner", "Shape", "SplitConfig", "Tile", "bit_width", "byte_size",
    "byte_width", "element_size_in_bits", "from_dtype", "from_physical", "linear_index",
    "linear_indices", "multi_index", "parse_layout", "parse_shape", "physical_plan",
    "physical_size", "read_layout", "read_shape", "to_dtype", "to_physical", "type_name",
    "Literal", "parse_literal", "parse_literal_with_shape",
]
