"""Loop kernels (xlapy.backends.cpu.loop_emitter) against the interpreter, bit for bit: a
concatenate read at the output's own position cuts its dimension's loop into one loop per
operand (``_segments``: along the last dimension, a middle one and the work items' own
dimension split over threads; two concatenates with different boundaries), and is left to
the clamped candidates when it is also read elsewhere (through a transpose); rank-0 inputs
(a dynamic slice's starts) are loaded once, before the loops."""

from __future__ import annotations

import numpy as np
import pytest
from indexing_kernel_helpers import same_bits

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import loop_emitter as le
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client


def _fusion(params: list[tuple[str, str]], body: str, root_shape: str) -> str:
    """A module whose entry calls one loop fusion of ``body`` (its root named ``r``) on
    parameters ``params`` ((name, shape))."""
    fparams = "\n".join(f"  {n} = {s} parameter({k})" for k, (n, s) in enumerate(params))
    eparams = "\n".join(f"  {n} = {s} parameter({k})" for k, (n, s) in enumerate(params))
    names = ", ".join(n for n, _ in params)
    return f"""HloModule m
fused {{
{fparams}
{body}
}}
ENTRY e {{
{eparams}
  ROOT f = {root_shape} fusion({names}), kind=kLoop, calls=fused
}}
"""


def _segments_of(text: str):
    module = parse_hlo_module(text)
    comp = next(c for c in module.computations if c.name == "fused")
    root = comp.root
    params = [i for i in comp.instructions if i.opcode == "parameter"]
    members = le.members_of([root], params)
    dims = tuple(root.shape.dimensions)
    split = next((d for d, size in enumerate(dims) if size > 1), 0)
    return le._segments([root], members, dims, split)


def _run(text: str, *args):
    module = parse_hlo_module(text)
    got = Client(backend="cpu").compile(module)(*args)
    same_bits(np.asarray(got), np.asarray(evaluate(module, *args)))
    return np.asarray(got)


def _normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_concatenate_along_the_last_dimension_is_cut_into_segments():
    text = _fusion([("a", "f32[6,5]"), ("b", "f32[6,3]"), ("d", "f32[6,9]"),
                    ("e", "f32[6,17]")],
                   "  c = f32[6,17] concatenate(a, b, d), dimensions={1}\n"
                   "  x = f32[6,17] multiply(c, c)\n"
                   "  ROOT r = f32[6,17] add(x, e)", "f32[6,17]")
    axis, cuts = _segments_of(text)
    assert axis == 1 and [(s, t) for s, t, _ in cuts] == [(0, 5), (5, 8), (8, 17)]
    assert [list(chosen.values()) for _, _, chosen in cuts] == [[0], [1], [2]]
    rng = np.random.default_rng(0)
    a, b, d, e = _normal(rng, 6, 5), _normal(rng, 6, 3), _normal(rng, 6, 9), _normal(rng, 6, 17)
    got = _run(text, a, b, d, e)
    c = np.concatenate([a, b, d], 1)
    np.testing.assert_array_equal(got, c * c + e)


def test_concatenate_along_a_middle_dimension():
    text = _fusion([("a", "f32[3,2,7]"), ("b", "f32[3,4,7]")],
                   "  c = f32[3,6,7] concatenate(a, b), dimensions={1}\n"
                   "  ROOT r = f32[3,6,7] negate(c)", "f32[3,6,7]")
    axis, cuts = _segments_of(text)
    assert axis == 1 and len(cuts) == 2
    rng = np.random.default_rng(1)
    a, b = _normal(rng, 3, 2, 7), _normal(rng, 3, 4, 7)
    np.testing.assert_array_equal(_run(text, a, b), -np.concatenate([a, b], 1))


def test_concatenate_along_the_work_items_split_over_threads():
    """The segments of the work items' own dimension meet the ranges the pool hands out."""
    rows_a, rows_b, cols = 3001, 4999, 40  # 320,000 elements: split over the pool
    text = _fusion([("a", f"f32[{rows_a},{cols}]"), ("b", f"f32[{rows_b},{cols}]"),
                    ("y", f"f32[{rows_a + rows_b},{cols}]")],
                   f"  c = f32[{rows_a + rows_b},{cols}] concatenate(a, b), dimensions={{0}}\n"
                   f"  ROOT r = f32[{rows_a + rows_b},{cols}] multiply(c, y)",
                   f"f32[{rows_a + rows_b},{cols}]")
    axis, cuts = _segments_of(text)
    assert axis == 0 and [(s, t) for s, t, _ in cuts] == [(0, rows_a),
                                                          (rows_a, rows_a + rows_b)]
    program = be.compile_module(parse_hlo_module(text))
    (step,) = program.entry.steps
    assert not step._serial  # the rows are split over the pool's threads
    rng = np.random.default_rng(2)
    a, b = _normal(rng, rows_a, cols), _normal(rng, rows_b, cols)
    y = _normal(rng, rows_a + rows_b, cols)
    np.testing.assert_array_equal(_run(text, a, b, y), np.concatenate([a, b]) * y)


def test_two_concatenates_with_different_boundaries():
    text = _fusion([("a", "f32[4,3]"), ("b", "f32[4,5]"), ("x", "f32[4,6]"), ("y", "f32[4,2]")],
                   "  c1 = f32[4,8] concatenate(a, b), dimensions={1}\n"
                   "  c2 = f32[4,8] concatenate(x, y), dimensions={1}\n"
                   "  ROOT r = f32[4,8] subtract(c1, c2)", "f32[4,8]")
    axis, cuts = _segments_of(text)
    assert [(s, t) for s, t, _ in cuts] == [(0, 3), (3, 6), (6, 8)]
    assert [sorted(chosen.values()) for _, _, chosen in cuts] == [[0, 0], [0, 1], [1, 1]]
    rng = np.random.default_rng(3)
    a, b, x, y = _normal(rng, 4, 3), _normal(rng, 4, 5), _normal(rng, 4, 6), _normal(rng, 4, 2)
    np.testing.assert_array_equal(_run(text, a, b, x, y),
                                  np.concatenate([a, b], 1) - np.concatenate([x, y], 1))


@pytest.mark.parametrize("through", ["transpose", "reverse"])
def test_concatenate_read_elsewhere_keeps_its_candidates(through):
    """Read at the output's position and, through a transpose or reverse, at others: one
    operand per segment would be wrong for the other reads, so no segments."""
    attr = "dimensions={1,0}" if through == "transpose" else "dimensions={1}"
    text = _fusion([("a", "f32[8,5]"), ("b", "f32[8,3]")],
                   "  c = f32[8,8] concatenate(a, b), dimensions={1}\n"
                   f"  t = f32[8,8] {through}(c), {attr}\n"
                   "  n = f32[8,8] negate(c)\n"
                   "  ROOT r = f32[8,8] add(n, t)", "f32[8,8]")
    assert _segments_of(text) is None
    rng = np.random.default_rng(4)
    a, b = _normal(rng, 8, 5), _normal(rng, 8, 3)
    c = np.concatenate([a, b], 1)
    other = c.T if through == "transpose" else c[:, ::-1]
    np.testing.assert_array_equal(_run(text, a, b), -c + other)


def test_a_dynamic_slice_loads_its_starts_before_the_loops():
    from llvmlite import ir

    text = """HloModule m
ENTRY e {
  x = f32[16,8,32] parameter(0)
  i = s32[] parameter(1)
  z = s32[] constant(0)
  ROOT r = f32[1,8,32] dynamic-slice(x, i, z, z), dynamic_slice_sizes={1,8,32}
}
"""
    module = parse_hlo_module(text)
    root = module.entry.root
    x, i = root.operands[0], root.operands[1]
    z = root.operands[2]
    irmod = ir.Module(name="t")
    le.emit_loop(irmod, "k", [root], [x, i, z], {})
    fn = irmod.get_global("k")
    entry = fn.blocks[0]
    loads = [str(instr) for instr in entry.instructions if isinstance(instr, ir.LoadInstr)]
    assert any('"i.ptr"' in line or "%i.ptr" in line for line in loads), loads
    assert any('"z.ptr"' in line or "%z.ptr" in line for line in loads), loads
    rng = np.random.default_rng(5)
    data = _normal(rng, 16, 8, 32)
    for start in (-4, 0, 7, 15, 40):
        got = _run(text, data, np.int32(start))
        s = min(max(start, 0), 15)
        np.testing.assert_array_equal(got, data[s:s + 1])


# -- block transposes -------------------------------------------------------------------------


def _transpose_text(t: str, dims, perm) -> str:
    out = [dims[p] for p in perm]
    return f"""HloModule m
ENTRY e {{
  x = {t}[{','.join(map(str, dims))}] parameter(0)
  ROOT t = {t}[{','.join(map(str, out))}] transpose(x), dimensions={{{','.join(map(str, perm))}}}
}}"""


def _block_form(text: str):
    module = parse_hlo_module(text)
    root = module.entry.root
    return le._block_transpose([root], [root], list(root.operands),
                               tuple(int(d) for d in root.shape.dimensions))


@pytest.mark.parametrize("t,lanes", [("f32", 16), ("s32", 16), ("f64", 8), ("c64", 8),
                                     ("bf16", 16), ("f16", 16), ("s8", 16), ("pred", 16),
                                     ("f8e4m3fn", 16)])
@pytest.mark.parametrize("dims,perm", [((32, 48), (1, 0)), ((2, 16, 3, 32), (2, 3, 0, 1)),
                                       ((16, 2, 16, 16), (3, 2, 1, 0)),
                                       ((4, 32, 1, 16), (0, 3, 2, 1))])
def test_block_transposes_move_every_element_type_as_bits(t, lanes, dims, perm):
    """A transpose moving the minor dimension runs as lanes x lanes blocks transposed in
    registers (the element's bits, whatever its type; lanes = 512 bits' worth, at most 16),
    bit for bit the interpreter's result."""
    text = _transpose_text(t, dims, perm)
    form = _block_form(text)
    assert form is not None and form[3] == lanes
    rng = np.random.default_rng(20)
    if t == "pred":
        x = rng.random(dims) < 0.5
    elif t == "c64":
        x = (_normal(rng, *dims) + 1j * _normal(rng, *dims)).astype(np.complex64)
    else:
        from movement_eval_helpers import sample

        x = sample(t, dims)
    got = _run(text, x)
    same_bits(got, np.ascontiguousarray(np.transpose(x, perm)))


@pytest.mark.parametrize("dims,perm,lanes", [((40, 24), (1, 0), 8), ((12, 20), (1, 0), 4),
                                             ((6, 16), (1, 0), None), ((16, 16), (0, 1), None),
                                             ((8, 4, 16), (0, 2, 1), 4)])
def test_block_lanes_divide_both_transposed_dimensions(dims, perm, lanes):
    """lanes halves until it divides both walked dimensions (at least 4); otherwise, and for
    a transpose keeping the minor dimension, the element-wise nest runs."""
    text = _transpose_text("f32", dims, perm)
    form = _block_form(text)
    assert (form[3] if form else None) == lanes
    x = _normal(np.random.default_rng(21), *dims)
    same_bits(_run(text, x), np.ascontiguousarray(np.transpose(x, perm)))


def test_block_transpose_split_over_threads_and_a_single_block():
    rng = np.random.default_rng(22)
    big = _transpose_text("f32", (512, 768), (1, 0))  # 48 blocks of rows: items over threads
    x = _normal(rng, 512, 768)
    same_bits(_run(big, x), np.ascontiguousarray(x.T))
    one = _transpose_text("f32", (16, 16), (1, 0))  # one block: the kernel has no loop
    y = _normal(rng, 16, 16)
    same_bits(_run(one, y), np.ascontiguousarray(y.T))


def test_a_concatenate_of_many_operands_is_cut_into_as_many_segments():
    """jnp.concatenate of 40 arrays (then scaled): 40 loops, one per operand, up to
    MAX_SEGMENTS; past it, the candidates."""
    n = 40
    assert n <= le.MAX_SEGMENTS
    params = [(f"p{k}", "f32[6,3]") for k in range(n)]
    names = ", ".join(p for p, _ in params)
    body = (f"  c = f32[6,{3 * n}] concatenate({names}), dimensions={{1}}\n"
            f"  two = f32[] constant(2)\n  b = f32[6,{3 * n}] broadcast(two), dimensions={{}}\n"
            f"  ROOT r = f32[6,{3 * n}] multiply(c, b)")
    text = _fusion(params, body, f"f32[6,{3 * n}]")
    axis, segments = _segments_of(text)
    assert axis == 1 and len(segments) == n
    rng = np.random.default_rng(23)
    args = [_normal(rng, 6, 3) for _ in range(n)]
    got = _run(text, *args)
    np.testing.assert_array_equal(got, 2 * np.concatenate(args, axis=1))


@pytest.mark.parametrize("start", [-3, 0, 5, 97])
def test_a_dynamic_slice_fuses_with_its_consumer(start):
    """The fusion pass fuses a dynamic-slice (XLA:CPU does): its starts (clamped so the
    slice fits) are loaded once, the slice generated inside its consumer's loop."""
    from xlapy.backends.cpu import backend as be

    text = """HloModule m
ENTRY e {
  x = f32[100,64] parameter(0)
  i = s32[] parameter(1)
  z = s32[] constant(0)
  d = f32[8,64] dynamic-slice(x, i, z), dynamic_slice_sizes={8,64}
  two = f32[] constant(2)
  b = f32[8,64] broadcast(two), dimensions={}
  ROOT r = f32[8,64] multiply(d, b)
}"""
    steps = be.compile_module(parse_hlo_module(text)).entry.steps
    assert [s.instr.opcode for s in steps if type(s).__name__ == "KernelStep"] == ["fusion"]
    x = _normal(np.random.default_rng(24), 100, 64)
    got = _run(text, x, np.int32(start))
    s = min(max(start, 0), 92)
    np.testing.assert_array_equal(got, 2 * x[s:s + 8])
