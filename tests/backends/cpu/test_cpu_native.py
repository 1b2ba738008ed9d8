"""The entry computation as one native function (xlapy.backends.cpu.native): results written
into the caller's buffers, intermediates in one workspace, in-place updates over dead values
(never over a live value or a parameter that is not donated), donation writing the donated
array itself, results held across calls never overwritten, host calls from the entry
(interpreted instructions, library calls, kernels split over threads, Python loops,
collectives) and their errors, nesting, tuples, zero-sized arrays, every kernel element
type. Every result is compared with the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import control_flow as cf
from xlapy.backends.cpu import denormals, executor, native
from xlapy.interpreter.custom_calls import unregister_custom_call
from xlapy.interpreter.evaluator import EvalOptions, evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

MB = 1 << 20


def _same(got, want) -> None:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, tuple):
            _same(g, w)
            continue
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w, equal_nan=g.dtype.kind in "fc"), (g, w)


def _native(text: str):
    program = be.compile_module(parse_hlo_module(text))
    assert program.native is not None
    return program


def _run(text: str, *args):
    """The backend's result (through a Client) after checking the program is native."""
    _native(text)
    got = Client(backend="cpu").compile(text)(*args)
    _same(got, evaluate(parse_hlo_module(text), *args))
    return got


# -- buffer assignment ----------------------------------------------------------------------

#: A CNN training step as jax lowers it (benchmarks/memory_bench.py's cnn, small): padded
#: convolutions, a max pool and its gradient (select-and-scatter), the kernel gradients.
#: Best fit in emission order leaves a gap no later value fits (17% over the live bytes).
CNN_STEP = """HloModule jit_cnn, entry_computation_layout={(f32[2,16,16,3]{3,2,1,0}, f32[3,3,3,8]{3,2,1,0}, f32[3,3,8,16]{3,2,1,0}, f32[1024,10]{1,0}, f32[2,10]{1,0})->(f32[3,3,3,8]{3,2,1,0}, f32[3,3,8,16]{3,2,1,0}, f32[1024,10]{0,1})}

relu.1 {
  Arg_0.1 = f32[2,16,16,8]{3,2,1,0} parameter(0)
  constant.7 = f32[] constant(0)
  max.2 = f32[2,16,16,8]{3,2,1,0} broadcast(constant.7), dimensions={}
  ROOT max.3 = f32[2,16,16,8]{3,2,1,0} maximum(Arg_0.1, max.2)
}

region_0.2 {
  reduce_window_max.3 = f32[] parameter(0)
  reduce_window_max.4 = f32[] parameter(1)
  ROOT reduce_window_max.5 = f32[] maximum(reduce_window_max.3, reduce_window_max.4)
}

relu_0.3 {
  Arg_0.3 = f32[2,8,8,16]{3,2,1,0} parameter(0)
  constant.9 = f32[] constant(0)
  max.6 = f32[2,8,8,16]{3,2,1,0} broadcast(constant.9), dimensions={}
  ROOT max.7 = f32[2,8,8,16]{3,2,1,0} maximum(Arg_0.3, max.6)
}

region_1.4 {
  select_and_scatter.2 = f32[] parameter(0)
  select_and_scatter.3 = f32[] parameter(1)
  ROOT ge.1 = pred[] compare(select_and_scatter.2, select_and_scatter.3), direction=GE
}

region_2.5 {
  select_and_scatter.6 = f32[] parameter(0)
  select_and_scatter.7 = f32[] parameter(1)
  ROOT add.1 = f32[] add(select_and_scatter.6, select_and_scatter.7)
}

ENTRY main.6 {
  x.1 = f32[2,16,16,3]{3,2,1,0} parameter(0)
  k1.1 = f32[3,3,3,8]{3,2,1,0} parameter(1)
  conv_general_dilated.5 = f32[2,16,16,8]{3,2,1,0} convolution(x.1, k1.1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  constant.14 = f32[] constant(0)
  broadcast.7 = f32[2,16,16,8]{3,2,1,0} broadcast(constant.14), dimensions={}
  gt.2 = pred[2,16,16,8]{3,2,1,0} compare(conv_general_dilated.5, broadcast.7), direction=GT
  jit_relu_.2 = f32[2,16,16,8]{3,2,1,0} call(conv_general_dilated.5), to_apply=relu.1
  constant.13 = f32[] constant(-inf)
  reduce_window_max.7 = f32[2,8,8,8]{3,2,1,0} reduce-window(jit_relu_.2, constant.13), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=region_0.2
  k2.1 = f32[3,3,8,16]{3,2,1,0} parameter(2)
  conv_general_dilated.6 = f32[2,8,8,16]{3,2,1,0} convolution(reduce_window_max.7, k2.1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  constant.12 = f32[] constant(0)
  broadcast.6 = f32[2,8,8,16]{3,2,1,0} broadcast(constant.12), dimensions={}
  gt.3 = pred[2,8,8,16]{3,2,1,0} compare(conv_general_dilated.6, broadcast.6), direction=GT
  jit_relu_.3 = f32[2,8,8,16]{3,2,1,0} call(conv_general_dilated.6), to_apply=relu_0.3
  reshape.2 = f32[2,1024]{1,0} reshape(jit_relu_.3)
  w.1 = f32[1024,10]{1,0} parameter(3)
  dot_general.3 = f32[2,10]{1,0} dot(reshape.2, w.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  y.1 = f32[2,10]{1,0} parameter(4)
  sub.1 = f32[2,10]{1,0} subtract(dot_general.3, y.1)
  constant.11 = f32[] constant(2)
  broadcast.5 = f32[2,10]{1,0} broadcast(constant.11), dimensions={}
  mul.1 = f32[2,10]{1,0} multiply(sub.1, broadcast.5)
  constant.10 = f32[] constant(0.05)
  broadcast.4 = f32[2,10]{1,0} broadcast(constant.10), dimensions={}
  broadcast_in_dim.1 = f32[2,10]{1,0} multiply(mul.1, broadcast.4)
  dot_general.5 = f32[2,1024]{1,0} dot(broadcast_in_dim.1, w.1), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  reshape.3 = f32[2,8,8,16]{3,2,1,0} reshape(dot_general.5)
  select_n.2 = f32[2,8,8,16]{3,2,1,0} select(gt.3, reshape.3, broadcast.6)
  rev.1 = f32[3,3,8,16]{3,2,1,0} reverse(k2.1), dimensions={0,1}
  conv_general_dilated.8 = f32[2,8,8,8]{3,2,1,0} convolution(select_n.2, rev.1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01oi->b01f
  constant.15 = f32[] constant(0)
  select_and_scatter.9 = f32[2,16,16,8]{3,2,1,0} select-and-scatter(jit_relu_.2, conv_general_dilated.8, constant.15), window={size=1x2x2x1 stride=1x2x2x1}, select=region_1.4, scatter=region_2.5
  select_n.3 = f32[2,16,16,8]{3,2,1,0} select(gt.2, select_and_scatter.9, broadcast.7)
  conv_general_dilated.9 = f32[3,3,3,8]{3,2,1,0} convolution(x.1, select_n.3), window={size=16x16 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf
  conv_general_dilated.7 = f32[3,3,8,16]{3,2,1,0} convolution(reduce_window_max.7, select_n.2), window={size=8x8 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf
  dot_general.4 = f32[10,1024]{1,0} dot(broadcast_in_dim.1, reshape.2), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  transpose.1 = f32[1024,10]{0,1} transpose(dot_general.4), dimensions={1,0}
  ROOT tuple.1 = (f32[3,3,3,8]{3,2,1,0}, f32[3,3,8,16]{3,2,1,0}, f32[1024,10]{0,1}) tuple(conv_general_dilated.9, conv_general_dilated.7, transpose.1)
}
"""


def _workspace_program(name: str) -> str:
    return {"cnn": CNN_STEP, "chain": CHAIN, "fori": FORI_WS}[name]


FORI_WS = """HloModule fori
cond {
  s = (s32[], f32[65536], f32[16384]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[65536], f32[16384]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  a = f32[65536] get-tuple-element(s), index=1
  b = f32[16384] get-tuple-element(s), index=2
  e = f32[65536] exponential(a)
  t = f32[65536] tanh(e)
  h = f32[16384] slice(t), slice={[0:16384]}
  c = f32[16384] add(b, h)
  ROOT r = (s32[], f32[65536], f32[16384]) tuple(j, t, c)
}
ENTRY e {
  x = f32[65536] parameter(0)
  y = f32[16384] parameter(1)
  z = s32[] constant(0)
  w = (s32[], f32[65536], f32[16384]) while((s32[], f32[65536], f32[16384]) tuple(z, x, y)),
      condition=cond, body=body
  ROOT o = f32[16384] get-tuple-element(w), index=2
}
"""


@pytest.mark.parametrize("name", ["cnn", "chain", "fori"])
def test_workspace_is_the_most_bytes_live_at_once(name):
    """Offsets are assigned once every live range is known (native._Arena): the workspace
    stays within a small slack of the largest sum of bytes live at one point."""
    program = _native(_workspace_program(name))
    ws, live = program.native.ws_bytes, program.native.ws_live
    assert live <= ws <= live + live // 16 + native.ALIGN, (ws, live)


def test_cnn_training_step_matches_the_interpreter_over_runs(monkeypatch):
    """... and the convolutions' padded-input pool holds one block (the largest padded
    input) after each run, not one per layer, nor more per run."""
    from xlapy.backends.cpu import library

    pool = library._BufferPool(256 << 20)
    monkeypatch.setattr(library, "_PADDED", pool)
    module = parse_hlo_module(CNN_STEP)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in
            ((2, 16, 16, 3), (3, 3, 3, 8), (3, 3, 8, 16), (1024, 10), (2, 10))]
    want = evaluate(module, *args)
    exe = Client(backend="cpu").compile(CNN_STEP)
    for _ in range(3):  # workspace and scratch reused between runs
        got = exe(*args)
        for g, w in zip(got, want):
            g, w = np.asarray(g), np.asarray(w)  # f32 sums against the interpreter's f64
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))
        # the largest padded input: conv2's output gradient padded, f32[2,10,10,16]
        assert len(pool.free) == 1 and pool.bytes == 2 * 10 * 10 * 16 * 4


# -- in place at the entry -------------------------------------------------------------------

CHAIN = """HloModule chain
ENTRY e {
  u = f32[1000] parameter(0)
  i = s32[] parameter(1)
  z = f32[] constant(0.5)
  b = f32[1048576] broadcast(z), dimensions={}
  d1 = f32[1048576] dynamic-update-slice(b, u, i)
  one = s32[] constant(7000)
  j = s32[] add(i, one)
  d2 = f32[1048576] dynamic-update-slice(d1, u, j)
  ROOT n = f32[1048576] negate(d2)
}
"""


def test_updates_over_dead_values_are_in_place():
    """b dies at d1, d1 at d2: both updates write the one buffer (the workspace holds one
    table, not three)."""
    program = _native(CHAIN)
    assert program.native.ws_bytes < 2 * 4 * MB
    u = np.arange(1000, dtype=np.float32)
    _run(CHAIN, u, np.int32(5))
    _run(CHAIN, u, np.int32(1048000))  # clamped starts


def test_a_chain_of_updates_is_computed_in_the_result_buffer():
    """The result is the last update: the broadcast it starts from is written into the
    result buffer, and every update after it writes there (no workspace copy at all)."""
    text = CHAIN.replace("ROOT n = f32[1048576] negate(d2)", "ROOT n = f32[1048576] copy(d2)")
    text = text.replace("  ROOT n = f32[1048576] copy(d2)\n", "").replace(
        "  d2 = f32[1048576]", "  ROOT d2 = f32[1048576]")
    program = _native(text)
    assert program.native.ws_bytes < MB
    _run(text, np.arange(1000, dtype=np.float32), np.int32(77))


def test_an_update_of_a_live_value_is_a_copy():
    text = CHAIN.replace("ROOT n = f32[1048576] negate(d2)",
                         "n = f32[1048576] negate(d2)\n"
                         "  ROOT t = (f32[1048576], f32[1048576], f32[1048576]) "
                         "tuple(n, b, d1)")
    u = np.arange(1000, dtype=np.float32) + 1
    _, b, d1 = _run(text, u, np.int32(3))
    assert np.all(b == 0.5) and np.array_equal(d1[3:1003], u)


def test_a_parameter_not_donated_is_never_written():
    text = """HloModule p
ENTRY e {
  t = f32[262144] parameter(0)
  u = f32[100] parameter(1)
  i = s32[] parameter(2)
  ROOT d = f32[262144] dynamic-update-slice(t, u, i)
}
"""
    t = np.random.default_rng(0).standard_normal(262144).astype(np.float32)
    kept = t.copy()
    got = _run(text, t, np.ones(100, np.float32), np.int32(9))
    assert np.array_equal(t, kept) and not np.shares_memory(got, t)
    program = be.compile_module(parse_hlo_module(text))
    again = program.run([t, np.ones(100, np.float32), np.int32(9)], EvalOptions())
    assert np.array_equal(t, kept) and not np.shares_memory(again, t)


def test_results_held_across_calls_are_never_overwritten():
    text = CHAIN
    exe = Client(backend="cpu").compile(text)
    u = np.arange(1000, dtype=np.float32)
    first = exe(u, np.int32(1))
    kept = first.copy()
    for k in range(3):
        later = exe(u * (k + 2), np.int32(k * 1000))
        assert not np.shares_memory(later, first)
    assert np.array_equal(first, kept)


# -- donation ----------------------------------------------------------------------------------

DONATE = """HloModule donate, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  t = f32[262144] parameter(0)
  u = f32[100] parameter(1)
  i = s32[] parameter(2)
  ROOT d = f32[262144] dynamic-update-slice(t, u, i)
}
"""


def test_donation_writes_the_donated_array_in_place():
    """The donated array is the result (no new buffer, no copy: the update writes 100
    elements of it); without donation the same program leaves it alone."""
    program = _native(DONATE)
    t = np.zeros(262144, np.float32)
    u = np.arange(100, dtype=np.float32)
    got = program.run([t, u, np.int32(10)], EvalOptions(), frozenset({(0, ())}))
    assert got is t and np.array_equal(t[10:110], u) and not t[:10].any()
    t2 = np.zeros(262144, np.float32)
    got2 = program.run([t2, u, np.int32(10)], EvalOptions())
    assert got2 is not t2 and not t2.any() and np.array_equal(got2, t)


def test_donated_buffers_through_the_client():
    client = Client(backend="cpu")
    exe = client.compile(DONATE)
    acc = client.buffer_from_pyval(np.zeros(262144, np.float32))
    address = acc.unsafe_buffer_pointer()
    want = np.zeros(262144, np.float32)
    for k in range(3):
        u = np.full(100, k + 1, np.float32)
        (acc,) = exe.execute([[acc, u, np.int32(100 * k)]], return_buffers=True)
        want[100 * k:100 * k + 100] = u
        assert acc.unsafe_buffer_pointer() == address
    assert np.array_equal(acc.to_numpy(), want)


def test_a_donated_parameter_still_read_is_not_overwritten_early():
    """The aliased result is computed while the parameter is still needed (it is also a
    result, and read after the update): the result goes through the workspace and the
    parameter is moved out before its memory is written."""
    text = """HloModule late, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  t = f32[65536] parameter(0)
  u = f32[100] parameter(1)
  i = s32[] parameter(2)
  d = f32[65536] dynamic-update-slice(t, u, i)
  s = f32[65536] add(d, t)
  ROOT r = (f32[65536], f32[65536], f32[65536]) tuple(d, t, s)
}
"""
    program = _native(text)
    t = np.random.default_rng(1).standard_normal(65536).astype(np.float32)
    args = [t.copy(), np.ones(100, np.float32), np.int32(7)]
    want = evaluate(parse_hlo_module(text), t, *args[1:])
    got = program.run(args, EvalOptions(), frozenset({(0, ())}))
    assert got[0] is args[0]
    _same(got, want)


def test_donated_parameters_swapped():
    """Each parameter becomes the other's result: both moved through temporaries."""
    text = """HloModule swap, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }
ENTRY e {
  a = f32[4096] parameter(0)
  b = f32[4096] parameter(1)
  ROOT r = (f32[4096], f32[4096]) tuple(b, a)
}
"""
    program = _native(text)
    a = np.arange(4096, dtype=np.float32)
    b = -a
    args = [a.copy(), b.copy()]
    got = program.run(args, EvalOptions(), frozenset({(0, ()), (1, ())}))
    assert got[0] is args[0] and got[1] is args[1]
    _same(got, (b, a))


def test_donation_into_a_loop_updates_in_place():
    """A while loop updating a donated table: the table is the loop's state and its
    result, updated where it lies."""
    text = """HloModule loop, input_output_alias={ {}: (0, {}, may-alias) }
c {
  s = (s32[], f32[1048576]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(100)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[1048576]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  t = f32[1048576] get-tuple-element(s), index=1
  f = f32[] convert(i)
  u = f32[64] broadcast(f), dimensions={}
  k = s32[] constant(64)
  at = s32[] multiply(i, k)
  t1 = f32[1048576] dynamic-update-slice(t, u, at)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], f32[1048576]) tuple(i1, t1)
}
ENTRY e {
  t = f32[1048576] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[1048576]) tuple(zero, t)
  w = (s32[], f32[1048576]) while(init), condition=c, body=b
  ROOT r = f32[1048576] get-tuple-element(w), index=1
}
"""
    program = _native(text)
    (loop,) = [s for s in program.entry.steps if isinstance(s, cf.CompiledWhileStep)]
    assert loop.resident == [1]
    assert program.native.ws_bytes < 4 * MB  # no copy of the table in the workspace
    t = np.full(1048576, -1, np.float32)
    want = evaluate(parse_hlo_module(text), t)
    got = program.run([t], EvalOptions(), frozenset({(0, ())}))
    assert got is t
    _same(got, want)


# -- host calls from the entry ---------------------------------------------------------------

HOSTS = """HloModule hosts
ENTRY e {
  x = f32[512,512] parameter(0)
  y = f32[512,512] parameter(1)
  xi = s32[512,512] convert(x)
  xs = s32[1,512,512,1] reshape(xi)
  k = s32[1,1,1,1] constant({{{{3}}}})
  c = s32[1,512,512,1] convolution(xs, k), window={size=1x1}, dim_labels=b01f_01io->b01f
  cr = s32[512,512] reshape(c)
  m = f32[512,512] convert(cr)
  d = f32[512,512] dot(m, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  big = f32[512,512] tanh(d)
  ROOT r = (f32[512,512], f32[512,512]) tuple(big, m)
}
"""


def test_host_calls_from_the_entry():
    """An interpreted instruction (an integer convolution) is a call out from the one
    native function; the rest of the program runs around it."""
    program = _native(HOSTS)
    calls = program.native.host_table.calls
    kinds = {type(c).__name__ for c in calls}
    assert "StepCall" in kinds
    assert "convolution" in [c.instr.opcode for c in calls if isinstance(c, executor.StepCall)]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((512, 512)).astype(np.float32)
    y = (rng.standard_normal((512, 512)) * 0.05).astype(np.float32)
    got = Client(backend="cpu").compile(HOSTS)(x, y)
    want = evaluate(parse_hlo_module(HOSTS), x, y)
    _same(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_a_python_loop_is_a_host_call_of_the_entry(monkeypatch):
    """A while loop that does not compile runs in Python, called from the native entry."""
    monkeypatch.setattr(be._control_flow, "compile_while", lambda planner, step: None)
    be.clear_cache()
    try:
        text = """HloModule pyloop
c {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  y = f32[8] multiply(x, x)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], f32[8]) tuple(i1, y)
}
ENTRY e {
  x = f32[8] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, x)
  w = (s32[], f32[8]) while(init), condition=c, body=b
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"""
        program = _native(text)
        assert any(isinstance(c, executor.StepCall) and c.instr.opcode == "while"
                   for c in program.native.host_table.calls)
        x = np.linspace(0.5, 1.1, 8).astype(np.float32)
        _same(Client(backend="cpu").compile(text)(x), evaluate(parse_hlo_module(text), x))
    finally:
        be.clear_cache()


def test_an_error_in_a_host_call_returns_through_native_code():
    def fail(x):
        raise ValueError("the test's custom call failed")

    xlapy.register_custom_call("test_native_fail", fail)
    try:
        text = """HloModule err
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] negate(x)
  z = f32[4] custom-call(y), custom_call_target="test_native_fail"
  ROOT r = f32[4] add(z, x)
}
"""
        _native(text)
        exe = Client(backend="cpu").compile(text)
        for _ in range(2):
            with pytest.raises(Exception, match="the test's custom call failed"):
                exe(np.ones(4, np.float32))
            assert executor.context().words[0] == 0  # the thread's context is clean
    finally:
        unregister_custom_call("test_native_fail")


def test_collectives_and_device_identity_from_the_entry_and_a_loop(monkeypatch):
    """replica-id and all-reduce in the entry, collective-permute and all-reduce in a
    compiled loop: native calls of the entry's and the loop's functions (no host call runs
    them; the run table is set for the entry's native call, else they would take the
    generic path, made to fail here)."""
    from xlapy.backends.cpu import collectives as co

    def generic(self, values, plan_ctx):
        raise AssertionError(f"{self.instr.name}: generic path")

    monkeypatch.setattr(co.CollectiveStep, "compute", generic)
    text = """HloModule coll
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
c {
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(20)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[64] get-tuple-element(s), index=1
  p = f32[64] collective-permute(x), source_target_pairs={{0,1},{1,0}}
  r = f32[64] all-reduce(p), replica_groups={}, to_apply=sum
  h = f32[] constant(0.5)
  hb = f32[64] broadcast(h), dimensions={}
  y = f32[64] multiply(r, hb)
  z = f32[64] add(y, p)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[64]) tuple(i1, z)
}
ENTRY e {
  x = f32[64] parameter(0)
  id = u32[] replica-id()
  f = f32[] convert(id)
  fb = f32[64] broadcast(f), dimensions={}
  x1 = f32[64] add(x, fb)
  zero = s32[] constant(0)
  init = (s32[], f32[64]) tuple(zero, x1)
  w = (s32[], f32[64]) while(init), condition=c, body=b
  v = f32[64] get-tuple-element(w), index=1
  ROOT r = f32[64] all-reduce(v), replica_groups={}, to_apply=sum
}
"""
    program = _native(text)
    steps = [c.step for c in program.native.host_table.calls if isinstance(c, executor.StepCall)]
    assert not [s for s in steps if isinstance(s, co.CollectiveStep)]
    assert sum(isinstance(k, co.CollectiveStep) for k in program.kernels) == 4
    args = [[np.linspace(0, 1, 64).astype(np.float32) * (r + 1)] for r in range(2)]
    exe = Client(backend="cpu").compile(text, replicas=2)
    want = Client(backend="interpreter").compile(text, replicas=2).execute(args)
    for _ in range(3):
        got = exe.execute(args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


PERMUTE_AHEAD = """HloModule ahead
c {
  s = (s32[], f32[4096], f32[4096]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(40)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[4096], f32[4096]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4096] get-tuple-element(s), index=1
  acc = f32[4096] get-tuple-element(s), index=2
  one = f32[] constant(1)
  ob = f32[4096] broadcast(one), dimensions={}
  x1 = f32[4096] add(x, ob)
  got = f32[4096] collective-permute(x1), source_target_pairs={{0,1}}
  acc1 = f32[4096] add(acc, got)
  k = s32[] constant(1)
  i1 = s32[] add(i, k)
  ROOT t = (s32[], f32[4096], f32[4096]) tuple(i1, x1, acc1)
}
ENTRY e {
  x = f32[4096] parameter(0)
  z = f32[] constant(0)
  acc = f32[4096] broadcast(z), dimensions={}
  zero = s32[] constant(0)
  init = (s32[], f32[4096], f32[4096]) tuple(zero, x, acc)
  w = (s32[], f32[4096], f32[4096]) while(init), condition=c, body=b
  ROOT r = f32[4096] get-tuple-element(w), index=2
}
"""


@pytest.mark.parametrize("path", ["native", "generic", "host-call"])
def test_a_value_sent_ahead_is_a_copy(monkeypatch, path):
    """Replica 0 sends and goes on at once (nothing to receive): its loop overwrites the
    memory of what it sent while replica 1 has not read it yet - unless what replica 1
    reads is still there: the native permute's departure barrier (native), or a copy
    handed to the runtime's collectives by the step (the generic path its native function
    calls out to, or the step itself called out when it has no native function: a
    ``device_safe`` step, which StepCall does not copy for)."""
    from xlapy.backends.cpu import collectives as co

    if path == "generic":
        monkeypatch.setattr(co, "_libc_addresses", lambda: None)
    elif path == "host-call":
        monkeypatch.setattr(co, "_native_form", lambda instr: None)
    generic = []
    compute = co.CollectiveStep.compute

    def counted(self, values, plan_ctx):
        generic.append(self.instr.name)
        return compute(self, values, plan_ctx)

    monkeypatch.setattr(co.CollectiveStep, "compute", counted)
    be.clear_cache()  # plans made with the patched module, dropped again below
    try:
        args = [[np.arange(4096, dtype=np.float32) * (r + 1)] for r in range(2)]
        exe = Client(backend="cpu").compile(PERMUTE_AHEAD, replicas=2)
        assert exe.program.native is not None
        calls = exe.program.native.host_table.calls
        called_out = [c.step for c in calls if isinstance(c, executor.StepCall)]
        assert {s.instr.opcode for s in called_out} == \
            ({"collective-permute"} if path == "host-call" else set())
        want = Client(backend="interpreter").compile(PERMUTE_AHEAD, replicas=2).execute(args)
        for _ in range(5):
            got = exe.execute(args)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
        assert bool(generic) == (path != "native")
    finally:
        be.clear_cache()


def test_programs_with_tokens_keep_the_python_plan():
    text = """HloModule feed
ENTRY e {
  t = token[] after-all()
  in = (f32[3], token[]) infeed(t)
  ROOT y = f32[3] get-tuple-element(in), index=0
}
"""
    assert be.compile_module(parse_hlo_module(text)).native is None


# -- nesting, tuples, sizes, types -------------------------------------------------------------


def test_nested_loops_and_conditionals_in_the_entry():
    text = """HloModule nest
ic {
  s = (s32[], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ib {
  s = (s32[], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[6] get-tuple-element(s), index=1
  y = f32[6] sine(x)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], f32[6]) tuple(i1, y)
}
oc {
  s = (s32[], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ob {
  s = (s32[], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[6] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  init = (s32[], f32[6]) tuple(zero, x)
  w = (s32[], f32[6]) while(init), condition=ic, body=ib
  y = f32[6] get-tuple-element(w), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], f32[6]) tuple(i1, y)
}
yes {
  p = f32[6] parameter(0)
  ROOT n = f32[6] negate(p)
}
no {
  p = f32[6] parameter(0)
  ROOT e = f32[6] exponential(p)
}
ENTRY e {
  x = f32[6] parameter(0)
  k = pred[] parameter(1)
  c = f32[6] conditional(k, x, x), true_computation=yes, false_computation=no
  zero = s32[] constant(0)
  init = (s32[], f32[6]) tuple(zero, c)
  w = (s32[], f32[6]) while(init), condition=oc, body=ob
  y = f32[6] get-tuple-element(w), index=1
  ROOT r = (f32[6], f32[6]) tuple(y, c)
}
"""
    x = np.linspace(-1, 1, 6).astype(np.float32)
    for k in (True, False):
        _run(text, x, np.bool_(k))


def test_tuple_parameters_and_results():
    text = """HloModule tup
ENTRY e {
  p = (f32[3], (s32[2], f32[3])) parameter(0)
  q = f32[3] parameter(1)
  a = f32[3] get-tuple-element(p), index=0
  inner = (s32[2], f32[3]) get-tuple-element(p), index=1
  b = s32[2] get-tuple-element(inner), index=0
  c = f32[3] get-tuple-element(inner), index=1
  s = f32[3] add(a, c)
  m = f32[3] multiply(s, q)
  ROOT r = ((f32[3], s32[2]), f32[3], (f32[3], f32[3])) tuple(tuple(m, b), q, tuple(a, m))
}
"""
    p = (np.float32([1, 2, 3]), (np.int32([4, 5]), np.float32([0.5, 0.25, 2])))
    _run(text, p, np.float32([3, 2, 1]))


def test_zero_sized_arrays():
    text = """HloModule zero
ENTRY e {
  x = f32[0,3] parameter(0)
  y = f32[4] parameter(1)
  n = f32[0,3] negate(x)
  z = f32[0] constant({})
  u = f32[4] dynamic-update-slice(y, z, i)
  i = s32[] constant(2)
  ROOT r = (f32[0,3], f32[4], f32[0]) tuple(n, u, z)
}
""".replace("  u = f32[4] dynamic-update-slice(y, z, i)\n  i = s32[] constant(2)\n",
            "  i = s32[] constant(2)\n  u = f32[4] dynamic-update-slice(y, z, i)\n")
    _run(text, np.zeros((0, 3), np.float32), np.float32([1, 2, 3, 4]))


TYPES = ["pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32",
         "f64", "c64", "c128"]


@pytest.mark.parametrize("t", TYPES)
def test_every_element_type(t):
    import ml_dtypes

    np_type = {"bf16": ml_dtypes.bfloat16, "pred": np.bool_}.get(t, None) or \
        np.dtype({"s8": "i1", "s16": "i2", "s32": "i4", "s64": "i8", "u8": "u1", "u16": "u2",
                  "u32": "u4", "u64": "u8", "f16": "f2", "f32": "f4", "f64": "f8",
                  "c64": "c8", "c128": "c16"}[t]).type
    text = f"""HloModule types
ENTRY e {{
  a = {t}[5,7] parameter(0)
  b = {t}[5,7] parameter(1)
  s = {t}[5,7] select(k, a, b)
  k = pred[5,7] parameter(2)
  u = {t}[2,7] slice(a), slice={{[1:3], [0:7]}}
  i = s32[] constant(3)
  z = s32[] constant(0)
  d = {t}[5,7] dynamic-update-slice(s, u, i, z)
  ROOT r = ({t}[5,7], {t}[5,7], {t}[2,7]) tuple(d, a, u)
}}
""".replace(f"  s = {t}[5,7] select(k, a, b)\n  k = pred[5,7] parameter(2)\n",
            f"  k = pred[5,7] parameter(2)\n  s = {t}[5,7] select(k, a, b)\n")
    rng = np.random.default_rng(3)
    a = (rng.integers(0, 2, (5, 7)) if t == "pred" else rng.integers(-3, 9, (5, 7)))
    b = (rng.integers(0, 2, (5, 7)) if t == "pred" else rng.integers(-3, 9, (5, 7)))
    k = rng.integers(0, 2, (5, 7)).astype(bool)
    _run(text, a.astype(np_type), b.astype(np_type), k)


def test_a_flushing_run_restores_the_threads_mxcsr():
    if not denormals.supported():
        pytest.skip("no MXCSR")
    text = """HloModule ftz
ENTRY e {
  x = f32[256] parameter(0)
  ROOT t = f32[256] tanh(x)
}
"""
    program = be.compile_module(parse_hlo_module(text), flush_denormals=True)
    assert program.native is not None
    _, get, _ = denormals._access()
    before = get()
    program.run([np.linspace(-1, 1, 256).astype(np.float32)], EvalOptions())
    assert get() == before


def test_workspace_slots_are_reused():
    """A chain of big temporaries: liveness lets the workspace hold two at a time."""
    lines = ["  x = f32[262144] parameter(0)"]
    prev = "x"
    for k in range(8):
        lines.append(f"  t{k} = f32[262144] sort({prev}), dimensions={{0}}, to_apply=lt")
        lines.append(f"  n{k} = f32[262144] negate(t{k})")
        prev = f"n{k}"
    text = ("HloModule chain\nlt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  ROOT c = pred[] compare(a, b), direction=LT\n}\nENTRY e {\n" +
            "\n".join(lines) + f"\n  ROOT r = f32[262144] negate({prev})\n}}\n")
    program = _native(text)
    assert program.native.ws_bytes <= 3 * 262144 * 4
    x = np.random.default_rng(4).standard_normal(262144).astype(np.float32)
    _run(text, x)


def test_the_emitter_is_shared():
    """Compiled whiles are the entry's emitter with a loop around it."""
    assert issubclass(cf.WhileEmitter, native.Emitter)


@pytest.mark.parametrize("packed", [False, True])
def test_a_big_transposed_dot_runs_natively_from_the_entry(request, monkeypatch, packed):
    """transpose(dot(a, b)) computed as the swapped dot (the simplifier's transpose-dot
    rewrite), its operands in the swapped dot's order: big enough to be cut over the worker pool, it is still one native call (no host
    call): the pool's GEMM driver over BLAS, or the generated packed GEMM where the host's
    vectors are wider than BLAS's (forced here: 512-bit vectors, a 256-bit BLAS; LLVM
    splits the vectors on a narrower host)."""
    from xlapy.backends.cpu import gemm_kernel

    request.addfinalizer(be.clear_cache)  # plans made with the patched rule
    if packed:
        monkeypatch.setattr(gemm_kernel, "BITS", 512)
        monkeypatch.setattr(gemm_kernel, "blas_vector_bits", lambda: 256)
    else:
        monkeypatch.setattr(gemm_kernel, "PACKED", False)
    be.clear_cache()
    text = """HloModule t
ENTRY e {
  a = f32[256,160] parameter(0)
  b = f32[256,96] parameter(1)
  d = f32[160,96] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = f32[96,160] transpose(d), dimensions={1,0}
}
"""
    program = _native(text)
    assert [type(s).__name__ for s in program.steps()] == \
        ["KernelStep" if packed else "LibraryStep"]
    assert [o.name for o in program.steps()[0].instr.operands] == ["b", "a"]
    assert not program.native.host_table.calls
    rng = np.random.default_rng(6)
    a = rng.standard_normal((256, 160)).astype(np.float32)
    b = rng.standard_normal((256, 96)).astype(np.float32)
    got = Client(backend="cpu").compile(text)(a, b)
    np.testing.assert_allclose(got, (a.T @ b).T, rtol=1e-4, atol=1e-4)
