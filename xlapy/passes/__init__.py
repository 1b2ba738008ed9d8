"""Compiler passes over HLO modules (the pass layer of the compiled CPU backend).

    from xlapy.passes import PassPipeline, make_pipeline
    make_pipeline(["inline", "simplify", "constant-folding", "cse", "dce"]).run(module)

Every pass is exact: the optimised module computes the same bits as the original (see
each module's docstring for what it leaves alone to stay so) - except ``excess-precision``,
which gives XLA:CPU's default bf16 numbers (xla_allow_excess_precision) on purpose,
``dot-upcast``, whose narrow-float dots sum in f32 (as the CPU backend's dots always did; its
integer dots in a float are exact), and
``batch-norm-expander``, whose expansion computes in the operand's precision (f32 for the
narrow floats) where the interpreter's batch norms compute in f64.
``PASSES`` maps the ``--passes`` names of ``xlapy opt`` to the pass classes.
"""

from __future__ import annotations

from collections.abc import Iterable

from xlapy.passes.batch_norm_expander import BatchNormExpander
from xlapy.passes.constant_folding import ConstantFolding
from xlapy.passes.cse import Cse
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.dot_upcast import DotUpcast
from xlapy.passes.excess_precision import ExcessPrecision
from xlapy.passes.fusion import InstructionFusion
from xlapy.passes.inline_calls import CallInliner, inline_call
from xlapy.passes.layout_assignment import LayoutAssignment
from xlapy.passes.map_inliner import MapInliner
from xlapy.passes.pass_manager import HloPass, PassError, PassPipeline
from xlapy.passes.reduce_window_rewriter import ReduceWindowRewriter
from xlapy.passes.simplify import TABLE, AlgebraicSimplifier, Rewrite
from xlapy.passes.spmd import SpmdPartition

#: Pass name -> class: DEFAULT_PASSES first, in their order, then the optional passes.
PASSES: dict[str, type[HloPass]] = {
    "inline": CallInliner,
    "simplify": AlgebraicSimplifier,
    "constant-folding": ConstantFolding,
    "cse": Cse,
    "dce": DeadCodeElimination,
    "fusion": InstructionFusion,
    "layout-assignment": LayoutAssignment,
    "spmd-partition": SpmdPartition,
    "excess-precision": ExcessPrecision,
    "map-inline": MapInliner,
    "batch-norm-expander": BatchNormExpander,
    "dot-upcast": DotUpcast,
    "reduce-window-rewriter": ReduceWindowRewriter,
}

#: What ``xlapy opt`` runs without ``--passes``.
DEFAULT_PASSES = ("inline", "simplify", "constant-folding", "cse", "dce")


def make_pass(name: str) -> HloPass:
    """A new pass by its ``--passes`` name; PassError for an unknown name."""
    try:
        return PASSES[name]()
    except KeyError:
        raise PassError(f"unknown pass '{name}' (known: {', '.join(PASSES)})") from None


def make_pipeline(names: Iterable[str] = DEFAULT_PASSES, *, fixed_point: bool = False,
                  verify: bool = True) -> PassPipeline:
    """A PassPipeline of the named passes, in the given order."""
    return PassPipeline([make_pass(n) for n in names], fixed_point=fixed_point, verify=verify)


def optimize(module, names: Iterable[str] = DEFAULT_PASSES, *, fixed_point: bool = True) -> bool:
    """Run the named passes over ``module`` in place (to a fixed point by default)."""
    return make_pipeline(names, fixed_point=fixed_point).run(module)


__all__ = [
    "DEFAULT_PASSES",
    "PASSES",
    "TABLE",
    "AlgebraicSimplifier",
    "BatchNormExpander",
    "CallInliner",
    "ConstantFolding",
    "Cse",
    "DeadCodeElimination",
    "ExcessPrecision",
    "HloPass",
    "InstructionFusion",
    "LayoutAssignment",
    "MapInliner",
    "PassError",
    "PassPipeline",
    "ReduceWindowRewriter",
    "Rewrite",
    "SpmdPartition",
    "inline_call",
    "make_pass",
    "make_pipeline",
    "optimize",
]
