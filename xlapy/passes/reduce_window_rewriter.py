"""The ``reduce-window-rewriter`` pass: XLA's ReduceWindowRewriter (run to a fixed point;
XLA:CPU's base length 16), cumulative reduce-windows (``jnp.cumsum``/``cumprod``/``cummax``:
one window dimension as long as the operand's, padded for a scan) longer than the base length
rewritten into XLA:CPU's blocked tree of scans. The rewrite, its match and the tree are
described in ``xlapy.interpreter.scan_tree``, where they live because the interpreter
evaluates the same tree: the CPU backend runs this pass first, so the backend, the
interpreter and XLA:CPU agree bit for bit on cumulative reduce-windows.
"""

from __future__ import annotations

from xlapy.hlo.ir import Module
from xlapy.interpreter.scan_tree import (
    CPU_BASE_LENGTH,
    rewrite,
    rewrite_all,
    scan_window,
    tree_scan,
)
from xlapy.passes.pass_manager import HloPass


class ReduceWindowRewriter(HloPass):
    """Rewrites cumulative reduce-windows into blocked tree scans, to a fixed point (module
    docstring); ``base_length`` is the block length (XLA:CPU's 16 by default)."""

    name = "reduce-window-rewriter"

    def __init__(self, base_length: int = CPU_BASE_LENGTH):
        self.base_length = int(base_length)

    def run(self, module: Module) -> bool:
        """Rewrite every matching reduce-window of the module's computations (fusion
        computations aside); whether any was."""
        comps = [c for c in module.computations
                 if not getattr(c, "is_fusion_computation", False)]
        return rewrite_all(comps, self.base_length)


__all__ = ["CPU_BASE_LENGTH", "ReduceWindowRewriter", "rewrite", "scan_window", "tree_scan"]
