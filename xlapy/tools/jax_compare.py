"""``xlapy.compare(f, *args)``: is XLA:CPU computing my jax function right, and if not,
where does it go wrong?

    report = xlapy.compare(f, x, w)                  # xlapy's interpreter against XLA:CPU
    print(report)                                    # per output: max abs/rel error, ulps
    report.ok, report.outputs, report.divergence

The function is lowered by jax (as ``jax.jit`` would, static arguments and pytrees
included; xlapy/jit.py), the module runs on real XLA:CPU (the reference, through jax:
xlapy.backends.xla) and on an xlapy backend (``backend="interpreter"`` by default: the
reference semantics; or ``cpu``), and every output leaf is compared (xlapy.tools.compare:
an element passes within ``abs_error`` or ``rel_error``; the largest error in ulps is
reported too). When an output differs, the bisection looks for the first entry instruction
(post order) whose value on the tested backend, fed XLA's values of its operands, differs
from XLA's value of it in the compiled module; the report shows the instruction and both
values. Keyword arguments of ``f`` go in ``kwargs=``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from xlapy.tools.compare import (
    DEFAULT_ABS_ERROR,
    DEFAULT_REL_ERROR,
    Divergence,
    LeafComparison,
    Tolerance,
    compare_values,
    run_on_backend,
)
from xlapy.tools.compare import (
    bisect as bisect_module,
)


@dataclass
class ComparisonReport:
    """The outcome of ``xlapy.compare``: one LeafComparison per output leaf (named by its
    jax pytree path), and the first divergent instruction when they differ."""

    module: Any
    backend: str
    tolerance: Tolerance
    outputs: list[LeafComparison]
    names: list[str] = field(default_factory=list)
    divergence: Divergence | None = None
    bisected: bool = False

    @property
    def ok(self) -> bool:
        return all(leaf.ok for leaf in self.outputs)

    def __str__(self) -> str:
        tol = self.tolerance
        lines = [f"compare {self.module.name}: {self.backend} against XLA:CPU (abs error "
                 f"{tol.abs_error:g}, rel error {tol.rel_error:g})"]
        for leaf, name in zip(self.outputs, self.names):
            lines.append("  " + leaf.text(name))
        bad = sum(not leaf.ok for leaf in self.outputs)
        n = len(self.outputs)
        if not bad:
            lines.append(f"OK: {n} output{'s' if n != 1 else ''} within the tolerances")
            return "\n".join(lines)
        lines.append(f"MISMATCH: {bad} of {n} output{'s' if n != 1 else ''} differ")
        if self.divergence is not None:
            lines.append(self.divergence.report())
        elif self.bisected:
            lines.append("bisection: every instruction matches when it runs alone on XLA's "
                         "values of its operands (the differences accumulate across "
                         "instructions)")
        return "\n".join(lines)


def compare(f: Callable, *args, backend: str = "interpreter",
            abs_error: float = DEFAULT_ABS_ERROR, rel_error: float = DEFAULT_REL_ERROR,
            bisect: bool = True, static_argnums: int | Sequence[int] | None = None,
            static_argnames: str | Sequence[str] | None = None, kwargs: dict | None = None,
            on_step=None) -> ComparisonReport:
    """Run jax function ``f`` on ``args`` on real XLA:CPU and on xlapy's ``backend``;
    compare every output and, when one differs, bisect to the first instruction."""
    import numpy as np

    from xlapy.backends.xla import lower_to_module
    from xlapy.interpreter.values import to_value
    from xlapy.jit import JitFunction

    kwargs = dict(kwargs or {})
    tol = Tolerance(abs_error, rel_error)
    jitted = JitFunction(f, backend, static_argnums=static_argnums,
                         static_argnames=static_argnames)
    _, leaves = jitted._key(args, kwargs)
    lowered = jitted._lowered(args, kwargs)
    module = lower_to_module(lowered)
    params = module.entry.parameters
    inputs = [to_value(np.asarray(leaf), p.shape, f"compare: argument {p.parameter_number}")
              for p, leaf in zip(params, leaves)]
    reference = run_on_backend(module, inputs, "xla").results[0]
    tested = run_on_backend(module, inputs, backend).results[0]
    outputs = compare_values(tested, reference, module.entry.root.shape, tol)
    report = ComparisonReport(module, backend, tol, outputs, _output_names(lowered.out_tree))
    if not report.ok and bisect:
        report.divergence = bisect_module(module, inputs, backend, "xla", tol, on_step=on_step)
        report.bisected = True
    return report


def _output_names(out_tree) -> list[str]:
    import jax

    placeholders = jax.tree_util.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
    paths = jax.tree_util.tree_flatten_with_path(placeholders)[0]
    return ["out" + (jax.tree_util.keystr(path) if path else "") for path, _ in paths]


__all__ = ["ComparisonReport", "compare"]
