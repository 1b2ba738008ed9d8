"""Sort and TopK builder functions, with XLA's names and argument order."""

from __future__ import annotations

from typing import Sequence

from xlapy.errors import InvalidArgumentError
from xlapy.ops.builder import XlaComputation, XlaOp, computation_of
from xlapy.ops.core import check_same_builder, int_arg, op_list

__all__ = ["Sort", "TopK"]


def Sort(operands: Sequence[XlaOp] | XlaOp, comparator: XlaComputation, dimension: int = -1,
         is_stable: bool = False) -> XlaOp:
    """Sorts ``operands`` together along ``dimension`` (-1: the last) with ``comparator``
    (2N scalars -> pred[]: parameters 2k, 2k+1 are the two elements of operand k).

    ``ops.Sort([keys, values], lt_f32)`` gives the tuple (sorted keys, values permuted alike).
    """
    operand_list = op_list(operands, "operands", "Sort", one_allowed=True)
    if not operand_list:
        raise InvalidArgumentError("Sort: needs at least one operand")
    b = check_same_builder("Sort", operand_list)
    dimension = int_arg(dimension, "dimension", "Sort")
    if dimension == -1:
        keys = operand_list[0].shape
        if not keys.is_array():
            raise InvalidArgumentError(f"Sort: operand 0 must be an array, got {keys}")
        dimension = keys.rank - 1
    return b.emit("sort", operand_list, {
        "dimensions": (dimension,),
        "is_stable": is_stable,
        "to_apply": computation_of(comparator, "Sort"),
    }, op_name="Sort")


def TopK(operand: XlaOp, k: int, largest: bool = True, is_stable: bool = True) -> XlaOp:
    """The ``k`` largest (``largest=False``: smallest) values along the last dimension and
    their indices: ``ops.TopK(x, 2)`` on f32[3,5] gives (f32[3,2], s32[3,2])."""
    b = check_same_builder("TopK", [operand])
    return b.emit("topk", [operand], {"k": k, "largest": largest, "is_stable": is_stable},
                  op_name="TopK")
