"""The builder's op functions, with XLA's names and argument order (as the old
``xla_client.ops`` offered them): ``ops.Parameter(b, 0, shape, "x")``, ``ops.Add(x, y)``,
``ops.BroadcastInDim(x, out_dims, broadcast_dimensions)``, ``ops.Reduce(...)``...

One module per family; this package re-exports every public function.
"""

import importlib

_FAMILIES = (
    "core", "elementwise", "shape_ops", "reduction", "dot_conv", "gather_scatter",
    "control_flow", "collectives", "rng", "sort", "linalg", "misc",
)

__all__: list[str] = []

for _family in _FAMILIES:
    try:
        _module = importlib.import_module(f"xlapy.ops.{_family}")
    except ModuleNotFoundError as _e:  # a family not written yet
        if _e.name != f"xlapy.ops.{_family}":
            raise
        continue
    for _name in getattr(_module, "__all__", ()):
        globals()[_name] = getattr(_module, _name)
        __all__.append(_name)
