"""One OpDef per HLO opcode, grouped by family. Importing this package registers them all.

Families: elementwise, shape_ops, reduction, dot_conv, gather_scatter, control_flow,
collectives, rng, sort, linalg, misc. Imports shape and hlo; never the builder, parser or
a backend.
"""

import importlib

from xlapy.opdefs.registry import (
    REGISTRY,
    OpCall,
    OpDef,
    ShapeError,
    all_opdefs,
    get_opdef,
    make_instruction,
    result_shape,
)

FAMILIES = (
    "elementwise", "shape_ops", "reduction", "dot_conv", "gather_scatter", "control_flow",
    "collectives", "rng", "sort", "linalg", "misc",
)

for _family in FAMILIES:
    importlib.import_module(f"xlapy.opdefs.{_family}")

__all__ = ["REGISTRY", "OpCall", "OpDef", "ShapeError", "all_opdefs", "get_opdef",
           "make_instruction", "result_shape"]
