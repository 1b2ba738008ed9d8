"""Miscellaneous ops: parameter (and, added by their owners, constant, tokens and the
remaining ops that fit no other family)."""

from __future__ import annotations

from xlapy.hlo.attrs import AttrSpec, IntKind
from xlapy.opdefs.common import require_result
from xlapy.opdefs.registry import OpCall, op
from xlapy.shape import Shape


@op("parameter", attrs=[AttrSpec("parameter_number", IntKind(minimum=0), in_parens=True)])
def _parameter(call: OpCall) -> Shape:
    """Input number ``parameter_number`` of the computation; its shape is the declared one."""
    return require_result(call, "a parameter's shape is its declared shape")
