"""The builder (``builder``: XlaBuilder, XlaOp, XlaComputation) and its op functions, with
XLA's names and argument order (as the old ``xla_client.ops`` offered them):
``ops.Parameter(b, 0, shape, "x")``, ``ops.Add(x, y)``,
``ops.BroadcastInDim(x, out_dims, broadcast_dimensions)``, ``ops.Reduce(...)``...

One module per family of op functions; this package re-exports every public function, each
wrapped by ``core.public_op`` (in its family module too, so that one op calling another goes
through it) so that every error names the op the user called; the value classes it exports
(dimension numbers, channel handles...) get the same for their constructors.
"""

import enum
import importlib
import inspect

from xlapy.ops.core import public_op, public_value_type

_FAMILIES = (
    "core", "elementwise", "shape_ops", "reduction", "dot_conv", "gather_scatter",
    "control_flow", "collectives", "rng", "sort", "linalg", "misc",
)

__all__: list[str] = []

for _family in _FAMILIES:
    _module = importlib.import_module(f"xlapy.ops.{_family}")
    for _name in getattr(_module, "__all__", ()):
        _obj = getattr(_module, _name)
        if inspect.isfunction(_obj) and not getattr(_obj, "__xlapy_public_op__", False):
            _obj = public_op(_name, _obj)
            setattr(_module, _name, _obj)
        elif isinstance(_obj, type) and not issubclass(_obj, enum.Enum):
            public_value_type(_name, _obj)
        globals()[_name] = _obj
        __all__.append(_name)
