"""The CPU backend's dot-operands pass (backends/cpu/dot_operands.py): a dot whose operand
neither the generated GEMMs nor BLAS can read in place gets that operand transposed to
[batch, free, contracting] or [batch, contracting, free] (whichever keeps its innermost
dimension innermost); readable operands and dots the kernels take are left alone. Results
against the interpreter, bit for bit (integer-valued floats: every sum exact)."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.backends.cpu.dot_operands import DotOperands, readable, rewrite
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client


def _dot_text(t, lhs, rhs, out, numbers):
    return f"""HloModule m
ENTRY e {{
  a = {t}[{','.join(map(str, lhs))}] parameter(0)
  b = {t}[{','.join(map(str, rhs))}] parameter(1)
  ROOT d = {t}[{','.join(map(str, out))}] dot(a, b), {numbers}
}}"""


def _ints(rng, shape, t=np.float32):
    return rng.integers(-4, 5, shape).astype(t)


# einsum('bhqd,hde->bqhe') as jax lowers it: dot(w, x), the rhs's free dimensions b and q
# apart (h between them)
EINSUM = _dot_text("f32", (8, 64, 64), (16, 8, 128, 64), (8, 64, 16, 128),
                   "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={1}, "
                   "rhs_contracting_dims={3}")


def test_readable():
    # [m, k] row-major and [k, m]: both BLAS matrices; batch anywhere it collapses
    assert readable([5, 7], [], [0], [1], True) and readable([7, 5], [], [1], [0], True)
    # free dimensions that do not read as one strided dimension
    assert not readable([16, 8, 128, 64], [1], [0, 2], [3], False)
    # a trailing batch dimension: the matrices have neither contiguous rows nor columns
    assert not readable([6, 5, 3], [2], [0], [1], True)
    # contracting dimensions in the dot's order must collapse in that order
    assert readable([2, 3, 4], [], [], [0, 1, 2], True)
    assert not readable([2, 3, 4], [], [], [1, 0, 2], True)


def test_the_unreadable_operand_is_transposed_the_other_kept():
    module = parse_hlo_module(EINSUM)
    assert rewrite(module.entry.root)
    assert DotOperands().run(module)
    dot = module.entry.root
    assert dot.opcode == "dot" and dot.operands[0].opcode == "parameter"
    t = dot.operands[1]
    # the rhs's innermost dimension is contracting: [batch h, free b, free q, contracting d]
    assert t.opcode == "transpose" and tuple(t.attrs["dimensions"]) == (1, 0, 2, 3)
    dn = dot.attrs["dot_dimension_numbers"]
    assert (tuple(dn.rhs_batch_dimensions), tuple(dn.rhs_contracting_dimensions)) == ((0,), (3,))
    assert (tuple(dn.lhs_batch_dimensions), tuple(dn.lhs_contracting_dimensions)) == ((0,), (1,))
    assert not rewrite(dot) and not DotOperands().run(module)


def _check(text, *args):
    module = parse_hlo_module(text)
    got = np.asarray(Client(backend="cpu").compile(module)(*args))
    want = np.asarray(evaluate(module, *args))
    np.testing.assert_array_equal(got, want)
    return got


def test_einsum_with_a_transposing_rhs():
    rng = np.random.default_rng(30)
    w, x = _ints(rng, (8, 64, 64)), _ints(rng, (16, 8, 128, 64))
    got = _check(EINSUM, w, x)
    np.testing.assert_array_equal(got, np.einsum("hde,bhqd->hebq", w, x))


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_trailing_batch_dimension_and_free_dimensions_apart(t):
    """lhs [m, k, batch] (innermost: batch, so free and contracting go [batch, k, m]), rhs
    [n1, batch, k, n2] (free dimensions apart)."""
    dt = np.float32 if t == "f32" else np.float64
    text = _dot_text(t, (6, 5, 3), (4, 3, 5, 2), (3, 6, 4, 2),
                     "lhs_batch_dims={2}, lhs_contracting_dims={1}, rhs_batch_dims={1}, "
                     "rhs_contracting_dims={2}")
    module = parse_hlo_module(text)
    assert DotOperands().run(module)
    lhs, rhs = module.entry.root.operands
    assert tuple(lhs.attrs["dimensions"]) == (2, 1, 0)
    assert tuple(rhs.attrs["dimensions"]) == (1, 2, 0, 3)
    rng = np.random.default_rng(31)
    a, b = _ints(rng, (6, 5, 3), dt), _ints(rng, (4, 3, 5, 2), dt)
    got = _check(text, a, b)
    np.testing.assert_array_equal(got, np.einsum("mkb,nbkp->bmnp", a, b))


def test_dots_the_kernels_read_are_left_alone():
    plain = _dot_text("f32", (64, 32), (32, 48), (64, 48),
                      "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    transposed = _dot_text("f32", (32, 64), (48, 32), (64, 48),
                           "lhs_contracting_dims={0}, rhs_contracting_dims={1}")
    batched = _dot_text("f32", (4, 64, 32), (4, 32, 48), (4, 64, 48),
                        "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                        "rhs_contracting_dims={1}")
    for text in (plain, transposed, batched):
        module = parse_hlo_module(text)
        assert not DotOperands().run(module)


def test_the_pass_is_in_the_cpu_pipeline():
    from xlapy.backends.cpu import backend as be

    assert be.PIPELINE.index("dot-upcast") < be.PIPELINE.index("dot-operands") < \
        be.PIPELINE.index("fusion")
    program = be.compile_module(parse_hlo_module(EINSUM))
    ops = [s.instr.opcode for s in program.entry.steps]
    assert ops == ["transpose", "dot"]
