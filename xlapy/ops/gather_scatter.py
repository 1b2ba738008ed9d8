"""Gather and scatter builder functions, with XLA's names and argument order, and the
dimension-number dataclasses (XLA's proto field names) they take."""

from __future__ import annotations

from typing import Sequence

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.gather_scatter import GatherDimensionNumbers, ScatterDimensionNumbers
from xlapy.ops.builder import XlaComputation, XlaOp, computation_of
from xlapy.ops.core import check_same_builder, int_list, op_list

__all__ = ["Gather", "Scatter", "GatherDimensionNumbers", "ScatterDimensionNumbers"]


def Gather(input: XlaOp, start_indices: XlaOp, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], indices_are_sorted: bool = False) -> XlaOp:
    """Slices of ``slice_sizes`` out of ``input`` at the positions in ``start_indices``.

    ``ops.Gather(x, idx, GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
    start_index_map=(0,), index_vector_dim=1), slice_sizes=(1, 48))`` gathers rows of an
    f32[64,48] ``x`` with s32[32] ``idx``: f32[32,48].
    """
    b = check_same_builder("Gather", [input, start_indices])
    return b.emit("gather", [input, start_indices], {
        "gather_dimension_numbers": dimension_numbers,
        "slice_sizes": int_list(slice_sizes, "slice_sizes", "Gather"),
        "indices_are_sorted": indices_are_sorted,
    }, op_name="Gather")


def Scatter(input, scatter_indices: XlaOp, updates, update_computation: XlaComputation,
            dimension_numbers: ScatterDimensionNumbers, indices_are_sorted: bool = False,
            unique_indices: bool = False) -> XlaOp:
    """``input`` with the slices at ``scatter_indices`` combined with ``updates`` by
    ``update_computation``. Variadic form: ``input`` and ``updates`` are lists of N ops,
    ``update_computation`` takes 2N scalars and the result is a tuple.

    ``ops.Scatter(x, idx, upd, add, ScatterDimensionNumbers(update_window_dims=(1,),
    inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), index_vector_dim=1))``
    adds the rows of f32[32,48] ``upd`` into rows ``idx`` (s32[32]) of f32[64,48] ``x``.
    """
    variadic = not isinstance(input, XlaOp)
    inputs = op_list(input, "input", "Scatter", one_allowed=True)
    if variadic and isinstance(updates, XlaOp):
        raise InvalidArgumentError("Scatter: with a list of inputs, updates must be a list too")
    updates = op_list(updates, "updates", "Scatter", one_allowed=not variadic)
    if not inputs:
        raise InvalidArgumentError("Scatter: Scatter inputs cannot be empty.")
    if len(inputs) != len(updates):
        raise InvalidArgumentError(f"Scatter: Scatter should have same number of inputs and "
                                   f"updates: "
                                   f"{len(inputs)} vs {len(updates)}.")
    operands = inputs + [scatter_indices] + updates
    b = check_same_builder("Scatter", operands)
    return b.emit("scatter", operands, {
        "scatter_dimension_numbers": dimension_numbers,
        "indices_are_sorted": indices_are_sorted,
        "unique_indices": unique_indices,
        "to_apply": computation_of(update_computation, "Scatter"),
    }, op_name="Scatter")
