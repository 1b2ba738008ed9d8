"""NumPy kernels, one module per op family; importing this package registers them all."""

import importlib

FAMILIES = (
    "elementwise", "shape_ops", "gather_scatter", "sort", "reduction", "dot_conv", "linalg",
    "control_flow", "rng", "collectives", "misc",
)

for _family in FAMILIES:
    importlib.import_module(f"xlapy.interpreter.kernels.{_family}")
