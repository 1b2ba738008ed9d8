"""Row fusion (xlapy/backends/cpu/row_fusion.py + xlapy/backends/cpu/row_reduction.py): row
reductions and the elementwise work around them run as one multi-output kernel per row,
against the interpreter, the fusion's structure pinned (its kernels, its outputs, its
loops): softmax and layer norm as jax writes them (f32, f64, bf16 through converts), rows of
every length (1, odd, longer than a vector, two column dimensions), values used outside the
group (outputs), sibling reductions (one loop), chained ones (mean then variance), column
and scalar reductions (per-block partial results), jax's forward+backward programs of both
(benchmarks/hlo/*_train.tiny.hlo, resized), what must stay out (a column broadcast of a row
value, a path leaving the group and coming back), inside a compiled while loop, thread
splits, and the aliasing rule."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import buffers
from xlapy.backends.cpu import control_flow as cf
from xlapy.backends.cpu.row_fusion import is_row_fusion
from xlapy.backends.cpu.row_reduction import Schedule
from xlapy.backends.cpu.steps import KernelStep
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

BENCH_HLO = Path(__file__).resolve().parents[3] / "benchmarks" / "hlo"
MAX = "mx {\n a = $T[] parameter(0)\n b = $T[] parameter(1)\n ROOT m = $T[] maximum(a, b)\n}\n"
ADD = "ad {\n a = $T[] parameter(0)\n b = $T[] parameter(1)\n ROOT s = $T[] add(a, b)\n}\n"
TYPES = [("f32", np.float32, 2e-6), ("f64", np.float64, 1e-13)]
#: (rows, cols): one row, one column, odd, a vector and a bit, more rows than blocks
SIZES = [(1, 1), (1, 1000), (7, 33), (64, 64), (300, 5), (5, 1), (33, 17), (130, 260)]


def _softmax(t, rows, cols):
    return ("HloModule softmax\n" + (MAX + ADD).replace("$T", t) +
            f"ENTRY e {{\n x = {t}[{rows},{cols}] parameter(0)\n"
            f" ninf = {t}[] constant(-inf)\n zero = {t}[] constant(0)\n"
            f" m = {t}[{rows}] reduce(x, ninf), dimensions={{1}}, to_apply=mx\n"
            f" mb = {t}[{rows},{cols}] broadcast(m), dimensions={{0}}\n"
            f" d = {t}[{rows},{cols}] subtract(x, mb)\n e = {t}[{rows},{cols}] exponential(d)\n"
            f" s = {t}[{rows}] reduce(e, zero), dimensions={{1}}, to_apply=ad\n"
            f" sb = {t}[{rows},{cols}] broadcast(s), dimensions={{0}}\n"
            f" ROOT r = {t}[{rows},{cols}] divide(e, sb)\n}}\n")


def _layernorm(t, rows, cols):
    return ("HloModule layernorm\n" + ADD.replace("$T", t) +
            f"ENTRY e {{\n x = {t}[{rows},{cols}] parameter(0)\n g = {t}[{cols}] parameter(1)\n"
            f" beta = {t}[{cols}] parameter(2)\n zero = {t}[] constant(0)\n"
            f" n = {t}[] constant({cols})\n eps = {t}[] constant(1e-5)\n"
            f" s = {t}[{rows}] reduce(x, zero), dimensions={{1}}, to_apply=ad\n"
            f" nb = {t}[{rows}] broadcast(n), dimensions={{}}\n"
            f" mean = {t}[{rows}] divide(s, nb)\n"
            f" mean2 = {t}[{rows},1] reshape(mean)\n mean1 = {t}[{rows}] reshape(mean2)\n"
            f" mb = {t}[{rows},{cols}] broadcast(mean1), dimensions={{0}}\n"
            f" xc = {t}[{rows},{cols}] subtract(x, mb)\n sq = {t}[{rows},{cols}] multiply(xc, xc)\n"
            f" v = {t}[{rows}] reduce(sq, zero), dimensions={{1}}, to_apply=ad\n"
            f" var = {t}[{rows}] divide(v, nb)\n epsb = {t}[{rows}] broadcast(eps), dimensions={{}}\n"
            f" ve = {t}[{rows}] add(var, epsb)\n inv = {t}[{rows}] rsqrt(ve)\n"
            f" ib = {t}[{rows},{cols}] broadcast(inv), dimensions={{0}}\n"
            f" y = {t}[{rows},{cols}] multiply(xc, ib)\n"
            f" gb = {t}[{rows},{cols}] broadcast(g), dimensions={{1}}\n"
            f" bb = {t}[{rows},{cols}] broadcast(beta), dimensions={{1}}\n"
            f" yg = {t}[{rows},{cols}] multiply(y, gb)\n"
            f" ROOT r = {t}[{rows},{cols}] add(yg, bb)\n}}\n")


def _jax_train(case, rows, cols, t="f32"):
    """jax's forward+backward program of ``case`` (benchmarks/hlo/<case>.tiny.hlo, dumped at
    [24,40]) for [rows,cols] of element type ``t``."""
    text = (BENCH_HLO / f"{case}.tiny.hlo").read_text()
    sizes = {24: rows, 40: cols}

    def dims(m):
        return "[" + ",".join(str(sizes.get(int(d), int(d))) for d in m.group(1).split(",")
                              if d) + "]"

    text = re.sub(r"\[([0-9,]*)\]", dims, text).replace("constant(40)", f"constant({cols})")
    return text.replace("f32", t)


def _program(text):
    return be.compile_module(parse_hlo_module(text))


def _steps(text):
    return [(type(s).__name__, s.instr.name) for s in _program(text).entry.steps]


def _kernels(program):
    return [s for s in program.entry.steps if isinstance(s, KernelStep)]


def _row_fusions(program):
    return [s.instr for s in program.entry.steps if is_row_fusion(s.instr)]


def _outputs(fusion):
    """(opcode, dimensions) of what a row fusion gives out, in order."""
    root = fusion.attrs["calls"].root
    outs = root.operands if root.opcode == "tuple" else [root]
    return [(o.opcode, tuple(o.shape.dimensions)) for o in outs]


def _schedule(fusion):
    return Schedule(fusion.attrs["calls"].root)


def _args(module, seed, dtype=np.float32, scale=3.0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(tuple(p.shape.dimensions)) * scale).astype(dtype)
            for p in module.entry.parameters]


def _check(text, *args, tol=2e-6):
    """The cpu backend against the interpreter, output by output: max |error| <= tol *
    max(1, max |want|) (reductions reassociate)."""
    module = parse_hlo_module(text)
    want = evaluate(module, *args)
    got = Client(backend="cpu").compile(module)(*args)
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    gots = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(gots) == len(wants)
    for g, w in zip(gots, wants):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        assert np.array_equal(np.isfinite(g64), np.isfinite(w64))
        finite = np.isfinite(w64)
        scale = max(1.0, float(np.max(np.abs(w64[finite]), initial=0.0)))
        err = float(np.max(np.abs(g64[finite] - w64[finite]), initial=0.0))
        assert err <= tol * scale, (err, scale)
    return gots


# -- one kernel: softmax and layer norm -------------------------------------------------------

@pytest.mark.parametrize("t,dt,tol", TYPES)
@pytest.mark.parametrize("rows,cols", SIZES)
def test_softmax_one_kernel(t, dt, tol, rows, cols):
    text = _softmax(t, rows, cols)
    program = _program(text)
    assert [(type(s).__name__, s.instr.name) for s in program.entry.steps] == \
        [("KernelStep", "row_fusion")]
    # max, sum of exponentials, division; the exponentials kept for the last loop in the
    # result's row
    s = _schedule(program.entry.steps[0].instr)
    assert s.n_loops == 3
    assert [(i.opcode, s.kept.get(id(i))) for i in s.order if id(i) in s.kept] == \
        [("exponential", "host")]
    assert list(s.host.values()) == [0]
    assert s.pipelined and s.pipe_loop == 3  # the next row read while dividing this one
    x = (np.random.default_rng(rows * cols).standard_normal((rows, cols)) * 5).astype(dt)
    _check(text, x, tol=tol)


@pytest.mark.parametrize("t,dt,tol", TYPES)
@pytest.mark.parametrize("rows,cols", SIZES)
def test_layernorm_one_kernel(t, dt, tol, rows, cols):
    text = _layernorm(t, rows, cols)
    program = _program(text)
    assert _steps(text) == [("KernelStep", "row_fusion")]  # gamma, beta: inputs
    s = _schedule(program.entry.steps[0].instr)
    assert s.n_loops == 3  # mean, variance, output
    assert s.pipelined and s.pipe_loop == 2  # the next row's sum with this row's variance
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((rows, cols)) * 3 + 1).astype(dt)
    g, b = rng.standard_normal(cols).astype(dt), rng.standard_normal(cols).astype(dt)
    _check(text, x, g, b, tol=10 * tol)


def test_bf16_softmax_through_converts():
    """bf16 in and out, f32 inside (as jax writes a bf16 softmax): the converts are
    members, the output is bf16."""
    text = ("HloModule sm16\n" + (MAX + ADD).replace("$T", "f32") +
            "ENTRY e {\n x = bf16[9,70] parameter(0)\n xf = f32[9,70] convert(x)\n"
            " ninf = f32[] constant(-inf)\n zero = f32[] constant(0)\n"
            " m = f32[9] reduce(xf, ninf), dimensions={1}, to_apply=mx\n"
            " mb = f32[9,70] broadcast(m), dimensions={0}\n d = f32[9,70] subtract(xf, mb)\n"
            " e = f32[9,70] exponential(d)\n"
            " s = f32[9] reduce(e, zero), dimensions={1}, to_apply=ad\n"
            " sb = f32[9,70] broadcast(s), dimensions={0}\n r = f32[9,70] divide(e, sb)\n"
            " ROOT h = bf16[9,70] convert(r)\n}\n")
    assert _steps(text) == [("KernelStep", "row_fusion")]
    x = np.random.default_rng(9).standard_normal((9, 70)).astype(ml_dtypes.bfloat16)
    _check(text, x, tol=1e-2)


def test_two_column_dimensions():
    text = ("HloModule r3\n" + ADD.replace("$T", "f32") +
            "ENTRY e {\n x = f32[5,6,7] parameter(0)\n zero = f32[] constant(0)\n"
            " s = f32[5] reduce(x, zero), dimensions={1,2}, to_apply=ad\n"
            " sb = f32[5,6,7] broadcast(s), dimensions={0}\n"
            " ROOT r = f32[5,6,7] subtract(x, sb)\n}\n")
    assert _steps(text) == [("KernelStep", "row_fusion")]
    _check(text, np.random.default_rng(1).standard_normal((5, 6, 7)).astype(np.float32),
           tol=1e-5)


# -- what must stay out ---------------------------------------------------------------------

def test_column_broadcast_of_a_row_value_is_not_fused():
    """rows == cols: broadcasting the row sums along the other dimension reads another
    row's value; no row fusion (the result still matches)."""
    text = ("HloModule cb\n" + ADD.replace("$T", "f32") +
            "ENTRY e {\n x = f32[16,16] parameter(0)\n zero = f32[] constant(0)\n"
            " s = f32[16] reduce(x, zero), dimensions={1}, to_apply=ad\n"
            " sb = f32[16,16] broadcast(s), dimensions={1}\n"
            " ROOT r = f32[16,16] subtract(x, sb)\n}\n")
    assert all(name != "row_fusion" for _, name in _steps(text))
    _check(text, np.random.default_rng(2).standard_normal((16, 16)).astype(np.float32),
           tol=1e-5)


def test_a_path_through_the_outside_splits_the_group():
    """y = x - rowsum(x) feeds a dot whose result is multiplied by y again: the product
    cannot be in y's fusion (the fusion would read its own output); y is an output."""
    text = ("HloModule path\n" + ADD.replace("$T", "f32") +
            "ENTRY e {\n x = f32[12,10] parameter(0)\n w = f32[10,10] parameter(1)\n"
            " zero = f32[] constant(0)\n"
            " s = f32[12] reduce(x, zero), dimensions={1}, to_apply=ad\n"
            " sb = f32[12,10] broadcast(s), dimensions={0}\n"
            " y = f32[12,10] subtract(x, sb)\n e = f32[12,10] exponential(y)\n"
            " z = f32[12,10] dot(e, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            " ROOT o = f32[12,10] multiply(y, z)\n}\n")
    program = _program(text)
    (fusion,) = _row_fusions(program)
    assert sorted(_outputs(fusion)) == [("exponential", (12, 10)), ("subtract", (12, 10))]
    module = parse_hlo_module(text)
    _check(text, *_args(module, 3, scale=1.0), tol=1e-5)


# -- multi-output fusions -------------------------------------------------------------------

def test_reduction_used_outside_is_an_output():
    text = ("HloModule out\n" + ADD.replace("$T", "f32") +
            "ENTRY e {\n x = f32[8,20] parameter(0)\n zero = f32[] constant(0)\n"
            " s = f32[8] reduce(x, zero), dimensions={1}, to_apply=ad\n"
            " sb = f32[8,20] broadcast(s), dimensions={0}\n"
            " d = f32[8,20] subtract(x, sb)\n"
            " ROOT t = (f32[8,20], f32[8]) tuple(d, s)\n}\n")
    program = _program(text)
    assert [type(s).__name__ for s in program.entry.steps] == \
        ["KernelStep", "ValueStep", "ValueStep", "ValueStep"]  # the fusion, 2 gtes, tuple
    (fusion,) = _row_fusions(program)
    assert _outputs(fusion) == [("reduce", (8,)), ("subtract", (8, 20))]
    _check(text, np.random.default_rng(3).standard_normal((8, 20)).astype(np.float32),
           tol=1e-5)


def test_a_broadcast_used_outside_gives_out_its_row_value():
    """The broadcast of the row maxima is also used by a dot: the fusion gives out the
    maxima (rows, not a full array), the dot reads a broadcast of them made outside."""
    text = ("HloModule bo\n" + MAX.replace("$T", "f32") +
            "ENTRY e {\n x = f32[6,10] parameter(0)\n w = f32[10,4] parameter(1)\n"
            " ninf = f32[] constant(-inf)\n"
            " m = f32[6] reduce(x, ninf), dimensions={1}, to_apply=mx\n"
            " mb = f32[6,10] broadcast(m), dimensions={0}\n d = f32[6,10] subtract(x, mb)\n"
            " z = f32[6,4] dot(mb, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            " ROOT t = (f32[6,10], f32[6,4]) tuple(d, z)\n}\n")
    (fusion,) = _row_fusions(_program(text))
    assert _outputs(fusion) == [("reduce", (6,)), ("subtract", (6, 10))]
    module = parse_hlo_module(text)
    _check(text, *_args(module, 4, scale=1.0), tol=1e-5)


def test_copies_of_inputs_used_outside_stay_outside():
    """Broadcasts of a constant and of a parameter, used inside and by dots: copied, not
    given out (the fusion writes d only)."""
    text = ("HloModule co\n" + MAX.replace("$T", "f32") +
            "ENTRY e {\n x = f32[6,10] parameter(0)\n g = f32[10] parameter(1)\n"
            " w = f32[10,3] parameter(2)\n two = f32[] constant(2)\n ninf = f32[] constant(-inf)\n"
            " cb = f32[6,10] broadcast(two), dimensions={}\n"
            " gb = f32[6,10] broadcast(g), dimensions={1}\n"
            " m = f32[6] reduce(x, ninf), dimensions={1}, to_apply=mx\n"
            " mb = f32[6,10] broadcast(m), dimensions={0}\n d0 = f32[6,10] subtract(x, mb)\n"
            " d1 = f32[6,10] multiply(d0, cb)\n d = f32[6,10] multiply(d1, gb)\n"
            " z1 = f32[6,3] dot(cb, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            " z2 = f32[6,3] dot(gb, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            " ROOT t = (f32[6,10], f32[6,3], f32[6,3]) tuple(d, z1, z2)\n}\n")
    (fusion,) = _row_fusions(_program(text))
    assert _outputs(fusion) == [("multiply", (6, 10))]
    _check(text, *_args(parse_hlo_module(text), 12, scale=1.0), tol=1e-5)


@pytest.mark.parametrize("t,dt,tol", TYPES)
@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 1000), (17, 9), (256, 64)])
def test_sibling_reductions_share_one_loop(t, dt, tol, rows, cols):
    """sum(x) and sum(x * x) of the same rows, and max(x): one loop reads each row once."""
    text = ("HloModule sib\n" + (MAX + ADD).replace("$T", t) +
            f"ENTRY e {{\n x = {t}[{rows},{cols}] parameter(0)\n zero = {t}[] constant(0)\n"
            f" ninf = {t}[] constant(-inf)\n"
            f" s = {t}[{rows}] reduce(x, zero), dimensions={{1}}, to_apply=ad\n"
            f" q = {t}[{rows},{cols}] multiply(x, x)\n"
            f" ss = {t}[{rows}] reduce(q, zero), dimensions={{1}}, to_apply=ad\n"
            f" m = {t}[{rows}] reduce(x, ninf), dimensions={{1}}, to_apply=mx\n"
            f" ROOT r = ({t}[{rows}], {t}[{rows}], {t}[{rows}]) tuple(s, ss, m)\n}}\n")
    program = _program(text)
    (fusion,) = _row_fusions(program)
    assert len(_kernels(program)) == 1
    assert _outputs(fusion) == [("reduce", (rows,))] * 3
    assert _schedule(fusion).n_loops == 1
    _check(text, *_args(parse_hlo_module(text), rows, dt), tol=tol)


@pytest.mark.parametrize("t,dt,tol", TYPES)
@pytest.mark.parametrize("rows,cols", [(1, 5), (7, 33), (100, 300)])
def test_chained_reductions(t, dt, tol, rows, cols):
    """mean then variance (a reduction of a value depending on a reduction), both given
    out with the centred values: two loops over each row."""
    text = ("HloModule chain\n" + ADD.replace("$T", t) +
            f"ENTRY e {{\n x = {t}[{rows},{cols}] parameter(0)\n zero = {t}[] constant(0)\n"
            f" n = {t}[] constant({cols})\n nb = {t}[{rows}] broadcast(n), dimensions={{}}\n"
            f" s = {t}[{rows}] reduce(x, zero), dimensions={{1}}, to_apply=ad\n"
            f" mean = {t}[{rows}] divide(s, nb)\n"
            f" mb = {t}[{rows},{cols}] broadcast(mean), dimensions={{0}}\n"
            f" xc = {t}[{rows},{cols}] subtract(x, mb)\n"
            f" q = {t}[{rows},{cols}] multiply(xc, xc)\n"
            f" v = {t}[{rows}] reduce(q, zero), dimensions={{1}}, to_apply=ad\n"
            f" var = {t}[{rows}] divide(v, nb)\n"
            f" ROOT r = ({t}[{rows}], {t}[{rows}], {t}[{rows},{cols}]) tuple(mean, var, xc)\n}}\n")
    program = _program(text)
    (fusion,) = _row_fusions(program)
    assert len(_kernels(program)) == 1
    assert _outputs(fusion) == [("divide", (rows,)), ("subtract", (rows, cols)),
                                ("divide", (rows,))]
    s = _schedule(fusion)
    assert s.n_loops == 2 and not s.kept  # the centred values: computed by the second
    x = (np.random.default_rng(rows).standard_normal((rows, cols)) * 2 + 3).astype(dt)
    _check(text, x, tol=10 * tol)


@pytest.mark.parametrize("rows,cols", [(1, 1), (9, 70), (200, 33)])
def test_a_costly_value_without_an_output_to_hold_it(rows, cols):
    """exp(x) feeds the row sums (loop 1) and the row maxima of exp(x) - sum (loop 2), and
    only row values are given out: exp(x) goes to a stack row, and as loop 1 writes it the
    next row's loop 1 cannot run inside loop 2 (not pipelined)."""
    text = ("HloModule st\n" + (MAX + ADD).replace("$T", "f32") +
            f"ENTRY e {{\n x = f32[{rows},{cols}] parameter(0)\n zero = f32[] constant(0)\n"
            f" ninf = f32[] constant(-inf)\n y = f32[{rows},{cols}] exponential(x)\n"
            f" s = f32[{rows}] reduce(y, zero), dimensions={{1}}, to_apply=ad\n"
            f" sb = f32[{rows},{cols}] broadcast(s), dimensions={{0}}\n"
            f" d = f32[{rows},{cols}] subtract(y, sb)\n"
            f" m = f32[{rows}] reduce(d, ninf), dimensions={{1}}, to_apply=mx\n"
            f" ROOT r = (f32[{rows}], f32[{rows}]) tuple(s, m)\n}}\n")
    (fusion,) = _row_fusions(_program(text))
    s = _schedule(fusion)
    assert [(i.opcode, s.kept[id(i)]) for i in s.order if id(i) in s.kept] == \
        [("exponential", "stack")]
    assert s.n_loops == 2 and not s.pipelined
    _check(text, *_args(parse_hlo_module(text), rows, scale=1.0), tol=1e-5)


@pytest.mark.parametrize("rows_only", [False, True])
def test_costly_bf16_values_are_kept_in_their_encoding(rows_only):
    """A bf16 exponential read by the sums' loop (through a convert) and by a later loop is
    kept, not computed again: in the bf16 result's row, or (only row values given out) in
    a stack row of bf16; excess precision off, so the bf16 value itself is what both read."""
    rows, cols = 33, 70
    tail = (" d = bf16[33,70] subtract(y, cb)\n df = f32[33,70] convert(d)\n"
            " m = f32[33] reduce(df, ninf), dimensions={1}, to_apply=mx\n"
            " ROOT r = (f32[33], f32[33]) tuple(s, m)\n" if rows_only else
            " ROOT q = bf16[33,70] divide(y, cb)\n")
    text = ("HloModule kb\n" + (MAX + ADD).replace("$T", "f32") +
            "ENTRY e {\n x = bf16[33,70] parameter(0)\n zero = f32[] constant(0)\n"
            " ninf = f32[] constant(-inf)\n y = bf16[33,70] exponential(x)\n"
            " yf = f32[33,70] convert(y)\n"
            " s = f32[33] reduce(yf, zero), dimensions={1}, to_apply=ad\n"
            " sh = bf16[33] convert(s)\n cb = bf16[33,70] broadcast(sh), dimensions={0}\n"
            + tail + "}\n")
    module = parse_hlo_module(text)
    program = be.compile_module(module, allow_excess_precision=False)
    (fusion,) = _row_fusions(program)
    sch = _schedule(fusion)
    kept = [(i.opcode, i.shape.element_type.name, sch.kept[id(i)]) for i in sch.order
            if id(i) in sch.kept]
    assert kept == [("exponential", "BF16", "stack" if rows_only else "host")]
    x = np.random.default_rng(rows).standard_normal((rows, cols)).astype(ml_dtypes.bfloat16)
    got = Client(backend="cpu", backend_options={"allow_excess_precision": False}
                 ).compile(module)(x)
    want = evaluate(module, x)
    for g, w in zip(*((list(v) if isinstance(v, (tuple, list)) else [v]) for v in (got, want))):
        g, w = np.asarray(g).astype(np.float64), np.asarray(w).astype(np.float64)
        np.testing.assert_allclose(g, w, rtol=1e-2 if not rows_only else 1e-5)


def _column_and_scalar(t, rows, cols):
    return ("HloModule cs\n" + (MAX + ADD).replace("$T", t) +
            f"ENTRY e {{\n x = {t}[{rows},{cols}] parameter(0)\n g = {t}[{cols}] parameter(1)\n"
            f" zero = {t}[] constant(0)\n ninf = {t}[] constant(-inf)\n"
            f" m = {t}[{rows}] reduce(x, ninf), dimensions={{1}}, to_apply=mx\n"
            f" mb = {t}[{rows},{cols}] broadcast(m), dimensions={{0}}\n"
            f" d = {t}[{rows},{cols}] subtract(x, mb)\n"
            f" gb = {t}[{rows},{cols}] broadcast(g), dimensions={{1}}\n"
            f" dg = {t}[{rows},{cols}] multiply(d, gb)\n"
            f" c = {t}[{cols}] reduce(dg, zero), dimensions={{0}}, to_apply=ad\n"
            f" cm = {t}[{cols}] reduce(x, ninf), dimensions={{0}}, to_apply=mx\n"
            f" e = {t}[{rows},{cols}] exponential(d)\n"
            f" a = {t}[] reduce(e, zero), dimensions={{0,1}}, to_apply=ad\n"
            f" ROOT r = ({t}[{rows},{cols}], {t}[{cols}], {t}[{cols}], {t}[]) "
            f"tuple(d, c, cm, a)\n}}\n")


@pytest.mark.parametrize("t,dt,tol", TYPES)
@pytest.mark.parametrize("rows,cols", [(1, 1), (1, 40), (5, 3), (31, 8), (32, 8), (33, 65),
                                       (1000, 7), (4097, 16)])
def test_column_and_scalar_reductions(t, dt, tol, rows, cols):
    """A column sum (of a value depending on the row maxima), a column max of the input and
    a sum of everything, in the row maxima's kernel: per-block partial results combined in
    block order."""
    text = _column_and_scalar(t, rows, cols)
    program = _program(text)
    (fusion,) = _row_fusions(program)
    assert len(_kernels(program)) == 1
    assert sorted(_outputs(fusion)) == [("reduce", ()), ("reduce", (cols,)),
                                        ("reduce", (cols,)), ("subtract", (rows, cols))]
    s = _schedule(fusion)
    assert s.n_loops == 2 and len(s.column) == 2 and len(s.scalar) == 1
    size, items = s.blocks()
    assert items <= 32 and (items - 1) * size < rows <= items * size
    module = parse_hlo_module(text)
    _check(text, *_args(module, rows + cols, dt, scale=1.0), tol=10 * tol)


@pytest.mark.parametrize("rows,cols", [(1, 3), (40, 7), (3000, 16)])
def test_init_values_are_combined_once(rows, cols):
    """Init values that are not the reducer's identity (XLA leaves that undefined; the
    interpreter combines them once per output, and so does the fusion): a row sum from
    1.5, a row max from 0.25, a column sum from -2, a sum of everything from 3."""
    text = _column_and_scalar("f32", rows, cols).replace(
        " zero = f32[] constant(0)\n ninf = f32[] constant(-inf)\n",
        " zero = f32[] constant(0)\n ninf = f32[] constant(0.25)\n"
        " m2 = f32[] constant(-2)\n three = f32[] constant(3)\n one5 = f32[] constant(1.5)\n")
    text = text.replace("reduce(dg, zero)", "reduce(dg, m2)").replace("reduce(e, zero)",
                                                                     "reduce(e, three)")
    text = text.replace(" e = f32", f" rs = f32[{rows}] reduce(x, one5), dimensions={{1}}, "
                        "to_apply=ad\n e = f32")
    text = text.replace("tuple(d, c, cm, a)", "tuple(d, c, cm, a, rs)").replace(
        f"f32[{cols}], f32[]) tuple", f"f32[{cols}], f32[], f32[{rows}]) tuple")
    (fusion,) = _row_fusions(_program(text))
    assert len(_outputs(fusion)) == 5
    _check(text, *_args(parse_hlo_module(text), rows, scale=1.0), tol=1e-5)


def test_results_do_not_depend_on_the_threads(monkeypatch):
    """Column and scalar partial results belong to fixed blocks of rows: the same bits
    whether the kernel runs on one thread or is split between several."""
    text = _column_and_scalar("f32", 3000, 64)
    module = parse_hlo_module(text)
    args = _args(module, 11, scale=1.0)
    program = Client(backend="cpu").compile(module)
    split = [np.asarray(v).copy() for v in program(*args)]
    monkeypatch.setattr(buffers, "THREADS", 1)
    one = [np.asarray(v) for v in program(*args)]
    for a, b in zip(split, one):
        assert np.array_equal(a, b)


# -- jax's forward+backward programs ------------------------------------------------------------

@pytest.mark.parametrize("t,dt,tol", TYPES)
@pytest.mark.parametrize("rows,cols", [(24, 40), (1, 1), (1, 300), (7, 3), (129, 67)])
def test_softmax_forward_backward(t, dt, tol, rows, cols):
    """jax.value_and_grad of sum(softmax(x) * t): the loss and the gradient in ONE kernel
    (max, sum of exponentials, the gradient's row sum, the loss's partial sums)."""
    text = _jax_train("softmax_train", rows, cols, t)
    program = _program(text)
    (fusion,) = _row_fusions(program)
    assert len(_kernels(program)) == 1
    assert _outputs(fusion) == [("reduce", ()), ("multiply", (rows, cols))]
    s = _schedule(fusion)
    assert s.n_loops == 4 or cols == 1  # one column: jax's [rows,1] reduces are row reduces
    assert [i.opcode for i in s.order if s.kept.get(id(i)) == "host"] == ["exponential"]
    assert s.pipelined and (s.pipe_loop == s.n_loops or cols == 1)
    module = parse_hlo_module(text)
    rng = np.random.default_rng(rows * 7 + cols)
    x = (rng.standard_normal((rows, cols)) * 3).astype(dt)
    _check(text, x, rng.uniform(0, 1, (rows, cols)).astype(dt), tol=tol)
    assert module.entry.root.opcode == "tuple"


@pytest.mark.parametrize("t,dt,tol", TYPES)
@pytest.mark.parametrize("rows,cols", [(24, 40), (1, 1), (1, 300), (7, 3), (129, 67)])
def test_layernorm_forward_backward(t, dt, tol, rows, cols):
    """jax.value_and_grad of sum(layernorm(x) * t) wrt x, gamma, beta: the loss, dx and the
    column sums of dgamma and dbeta in one kernel reading x and t once; what is left reads
    only the column sums (jax's reduces of [1,cols] over its unit dimension)."""
    text = _jax_train("layernorm_train", rows, cols, t)
    program = _program(text)
    (fusion,) = _row_fusions(program)
    assert sorted(_outputs(fusion)) == [("add", (rows, cols)), ("reduce", ()),
                                        ("reduce", (cols,)), ("reduce", (cols,))]
    s = _schedule(fusion)
    assert s.n_loops == 4 or cols == 1
    assert len(s.column) == 2 and len(s.scalar) == 1
    for step in _kernels(program):
        if step.instr is not fusion:  # small kernels on the column sums only
            assert all(int(np.prod(i.shape.dimensions)) == cols for i in step.instr.operands)
    rng = np.random.default_rng(rows + 5 * cols)
    x = (rng.standard_normal((rows, cols)) * 2 + 1).astype(dt)
    g = rng.uniform(0.5, 1.5, cols).astype(dt)
    b = rng.uniform(0, 1, cols).astype(dt)
    tt = rng.uniform(0.5, 1.5, (rows, cols)).astype(dt)
    _check(text, x, g, b, tt, tol=20 * tol)


def _stack(layers, rows=6, cols=8):
    """``layers`` times x = softmax(layernorm(x) @ w) + x, then sum(x * x)."""
    full, row = f"f32[{rows},{cols}]", f"f32[{rows}]"

    def bcast(v):
        return f"{full} broadcast({v}), dimensions={{0}}"

    lines = [f" x0 = {full} parameter(0)", f" w = f32[{cols},{cols}] parameter(1)",
             " zero = f32[] constant(0)", " ninf = f32[] constant(-inf)",
             f" n = f32[] constant({cols})", f" nb = {row} broadcast(n), dimensions={{}}"]
    for k in range(layers):
        x = f"x{k}"
        lines += [
            f" sm{k} = {row} reduce({x}, zero), dimensions={{1}}, to_apply=ad",
            f" mu{k} = {row} divide(sm{k}, nb)", f" mub{k} = {bcast(f'mu{k}')}",
            f" xc{k} = {full} subtract({x}, mub{k})", f" q{k} = {full} multiply(xc{k}, xc{k})",
            f" v{k} = {row} reduce(q{k}, zero), dimensions={{1}}, to_apply=ad",
            f" r{k} = {row} rsqrt(v{k})", f" rb{k} = {bcast(f'r{k}')}",
            f" ln{k} = {full} multiply(xc{k}, rb{k})",
            (f" d{k} = {full} dot(ln{k}, w), lhs_contracting_dims={{1}}, "
             "rhs_contracting_dims={0}"),
            f" m{k} = {row} reduce(d{k}, ninf), dimensions={{1}}, to_apply=mx",
            f" mb{k} = {bcast(f'm{k}')}", f" dm{k} = {full} subtract(d{k}, mb{k})",
            f" e{k} = {full} exponential(dm{k})",
            f" z{k} = {row} reduce(e{k}, zero), dimensions={{1}}, to_apply=ad",
            f" zb{k} = {bcast(f'z{k}')}", f" p{k} = {full} divide(e{k}, zb{k})",
            f" x{k + 1} = {full} add(p{k}, {x})"]
    lines += [f" sq = {full} multiply(x{layers}, x{layers})",
              " ROOT loss = f32[] reduce(sq, zero), dimensions={0,1}, to_apply=ad"]
    return "HloModule stack\n" + (MAX + ADD).replace("$T", "f32") + "ENTRY e {\n" + \
        "\n".join(lines) + "\n}\n"


def test_groups_stay_between_the_dots_of_a_deep_stack():
    """In a stack of layers (layer norm, dot, softmax, residual), a group never reaches
    across a dot: the first layer norm, then per layer its softmax with the residual sum
    and the next layer norm (the last with the loss)."""
    layers = 6
    text = _stack(layers)
    program = _program(text)
    fusions = _row_fusions(program)
    assert len(fusions) == layers + 1
    for f in fusions:  # at most one softmax and one layer norm each
        kinds = [i.attrs["to_apply"].root.opcode for i in f.attrs["calls"].instructions
                 if i.opcode == "reduce"]
        assert kinds.count("maximum") <= 1 and kinds.count("add") <= 3
    _check(text, *_args(parse_hlo_module(text), 5, scale=0.5), tol=1e-5)


# -- in loops, aliasing -----------------------------------------------------------------------

def test_inside_a_compiled_while():
    body = _softmax("f32", 4, 10).split("ENTRY")[0].replace("HloModule softmax\n", "")
    text = ("HloModule loop\n" + body +
            "c {\n s = (s32[], f32[4,10]) parameter(0)\n i = s32[] get-tuple-element(s), index=0\n"
            " k = s32[] constant(3)\n ROOT lt = pred[] compare(i, k), direction=LT\n}\n"
            "b {\n s = (s32[], f32[4,10]) parameter(0)\n i = s32[] get-tuple-element(s), index=0\n"
            " x = f32[4,10] get-tuple-element(s), index=1\n"
            " ninf = f32[] constant(-inf)\n zero = f32[] constant(0)\n"
            " m = f32[4] reduce(x, ninf), dimensions={1}, to_apply=mx\n"
            " mb = f32[4,10] broadcast(m), dimensions={0}\n d = f32[4,10] subtract(x, mb)\n"
            " e = f32[4,10] exponential(d)\n"
            " sm = f32[4] reduce(e, zero), dimensions={1}, to_apply=ad\n"
            " sb = f32[4,10] broadcast(sm), dimensions={0}\n r = f32[4,10] divide(e, sb)\n"
            " one = s32[] constant(1)\n i1 = s32[] add(i, one)\n"
            " ROOT t = (s32[], f32[4,10]) tuple(i1, r)\n}\n"
            "ENTRY e {\n x = f32[4,10] parameter(0)\n z = s32[] constant(0)\n"
            " init = (s32[], f32[4,10]) tuple(z, x)\n"
            " ROOT w = (s32[], f32[4,10]) while(init), condition=c, body=b\n}\n")
    steps = be.compile_module(parse_hlo_module(text)).entry.steps
    assert any(isinstance(s, cf.CompiledWhileStep) for s in steps)
    module = parse_hlo_module(text)
    x = np.random.default_rng(4).standard_normal((4, 10)).astype(np.float32)
    got = Client(backend="cpu").compile(module)(x)
    want = evaluate(module, x)
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), rtol=1e-6, atol=1e-6)


def test_multi_output_with_partials_inside_a_compiled_while():
    """A fusion with column and scalar reductions (scratch, a combining kernel) in a loop
    body that compiles whole."""
    inner = _column_and_scalar("f32", 6, 5)
    comps = inner.split("ENTRY")[0].replace("HloModule cs\n", "")
    state = "(s32[], f32[6,5], f32[5])"
    text = ("HloModule loop\n" + comps +
            f"c {{\n s = {state} parameter(0)\n i = s32[] get-tuple-element(s), index=0\n"
            " k = s32[] constant(4)\n ROOT lt = pred[] compare(i, k), direction=LT\n}\n"
            f"b {{\n s = {state} parameter(0)\n i = s32[] get-tuple-element(s), index=0\n"
            " x = f32[6,5] get-tuple-element(s), index=1\n"
            " g = f32[5] get-tuple-element(s), index=2\n"
            " zero = f32[] constant(0)\n ninf = f32[] constant(-inf)\n"
            " m = f32[6] reduce(x, ninf), dimensions={1}, to_apply=mx\n"
            " mb = f32[6,5] broadcast(m), dimensions={0}\n d = f32[6,5] subtract(x, mb)\n"
            " gb = f32[6,5] broadcast(g), dimensions={1}\n dg = f32[6,5] multiply(d, gb)\n"
            " c2 = f32[5] reduce(dg, zero), dimensions={0}, to_apply=ad\n"
            " e = f32[6,5] exponential(d)\n"
            " a = f32[] reduce(e, zero), dimensions={0,1}, to_apply=ad\n"
            " ab = f32[6,5] broadcast(a), dimensions={}\n x1 = f32[6,5] add(d, ab)\n"
            " one = s32[] constant(1)\n i1 = s32[] add(i, one)\n"
            f" ROOT t = {state} tuple(i1, x1, c2)\n}}\n"
            "ENTRY e {\n x = f32[6,5] parameter(0)\n g = f32[5] parameter(1)\n"
            " z = s32[] constant(0)\n"
            f" init = {state} tuple(z, x, g)\n"
            f" ROOT w = {state} while(init), condition=c, body=b\n}}\n")
    steps = be.compile_module(parse_hlo_module(text)).entry.steps
    assert any(isinstance(s, cf.CompiledWhileStep) for s in steps)
    module = parse_hlo_module(text)
    _check(text, *_args(module, 6, scale=0.5), tol=1e-5)


def test_results_held_by_the_caller_are_not_overwritten():
    text = _jax_train("softmax_train", 256, 128)
    program = Client(backend="cpu").compile(parse_hlo_module(text))
    rng = np.random.default_rng(5)
    x, t = (rng.standard_normal((256, 128)).astype(np.float32) for _ in range(2))
    first = [np.asarray(v) for v in program(x, t)]
    keep = [v.copy() for v in first]
    program(x * 2, t)
    for a, b in zip(first, keep):
        assert np.array_equal(a, b)
