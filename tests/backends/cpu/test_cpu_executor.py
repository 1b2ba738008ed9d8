"""Native code calling out (xlapy.backends.cpu.executor): compiled while loops whose bodies
hold library calls (dots), kernels split over threads, conditionals and calls; errors and
cancellation returning from native code; results the caller holds never overwritten. Every
result is compared with the interpreter."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import control_flow as cf
from xlapy.backends.cpu import executor, native
from xlapy.interpreter.evaluator import EvalOptions, evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client
from xlapy.runtime.threaded_collectives import RendezvousAbortedError

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
import suite


def _steps(plan, seen=None):
    seen = set() if seen is None else seen
    for step in plan.steps:
        yield step
        for p in [getattr(step, "cond", None), getattr(step, "body", None)] + \
                list(getattr(step, "branches", [])):
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                yield from _steps(p, seen)


def _loops(program):
    steps = list(_steps(program.entry))
    return (sum(isinstance(s, cf.CompiledWhileStep) for s in steps),
            sum(type(s) is be.WhileStep for s in steps))


def _close(got, want, rtol=1e-5):
    got = got if isinstance(got, (tuple, list)) else [got]
    want = want if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        scale = max(float(np.max(np.abs(w))), 1e-30) if w.size else 1.0
        assert float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0)) <= rtol * scale


def test_lstm_scan_forward_and_backward_runs_natively():
    """jax's LSTM scan, forward and backward (benchmarks/hlo/lstm_scan.tiny.hlo): both loops
    compiled though their bodies hold dots (generated small GEMMs, calls out to the
    library)."""
    case = suite.CASES["lstm_scan"]
    module = parse_hlo_module(case.hlo_path("tiny").read_text())
    args = suite.make_inputs(case, "tiny")
    program = be.compile_module(module)
    assert _loops(program) == (2, 0)
    body_dots = [s for s in _steps(program.entry) if s.instr.opcode == "dot"]
    assert body_dots  # dots inside the loops: generated GEMMs or xGEMM called from native code
    loops = [s for s in program.entry.steps if isinstance(s, cf.CompiledWhileStep)]
    assert not [c for c in loops[0].host_table.calls if isinstance(c, executor.StepCall)]
    got = Client(backend="cpu").compile(module)(*args)
    _close(got, evaluate(module, *args), rtol=1e-4)
    _close(got, case.numpy(case.sizes["tiny"], *args), rtol=1e-4)


SCAN_DOT = """HloModule scandot
c {
  s = (s32[], f32[4,8], f32[5,4,8], f32[8,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[4,8], f32[5,4,8], f32[8,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[4,8] get-tuple-element(s), index=1
  st = f32[5,4,8] get-tuple-element(s), index=2
  w = f32[8,8] get-tuple-element(s), index=3
  z = f32[4,8] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zt = f32[4,8] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  h1 = f32[4,8] tanh(z)
  h2 = f32[4,8] add(h1, zt)
  h3 = f32[1,4,8] reshape(h2)
  zero = s32[] constant(0)
  st1 = f32[5,4,8] dynamic-update-slice(st, h3, i, zero, zero)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[4,8], f32[5,4,8], f32[8,8]) tuple(i1, h1, st1, w)
}
ENTRY e {
  h = f32[4,8] parameter(0)
  w = f32[8,8] parameter(1)
  zero = s32[] constant(0)
  z = f32[] constant(0)
  st = f32[5,4,8] broadcast(z), dimensions={}
  init = (s32[], f32[4,8], f32[5,4,8], f32[8,8]) tuple(zero, h, st, w)
  ROOT r = (s32[], f32[4,8], f32[5,4,8], f32[8,8]) while(init), condition=c, body=b
}
"""


def test_dots_and_updates_in_a_compiled_loop():
    rng = np.random.default_rng(1)
    h = rng.standard_normal((4, 8)).astype(np.float32)
    w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
    module = parse_hlo_module(SCAN_DOT)
    program = be.compile_module(module)
    assert _loops(program) == (1, 0)
    calls = program.entry.steps[-1].host_table.calls
    assert not [c for c in calls if not isinstance(c, executor.Polling)]  # native GEMMs both
    _close(Client(backend="cpu").compile(module)(h, w), evaluate(module, h, w))


COND_DOT = """HloModule conddot
even {
  p = (f32[4,4], f32[4,4]) parameter(0)
  a = f32[4,4] get-tuple-element(p), index=0
  w = f32[4,4] get-tuple-element(p), index=1
  ROOT d = f32[4,4] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
odd {
  p = (f32[4,4], f32[4,4]) parameter(0)
  a = f32[4,4] get-tuple-element(p), index=0
  ROOT n = f32[4,4] negate(a)
}
c {
  s = (s32[], f32[4,4], f32[4,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[4,4], f32[4,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[4,4] get-tuple-element(s), index=1
  w = f32[4,4] get-tuple-element(s), index=2
  two = s32[] constant(2)
  r = s32[] remainder(i, two)
  p = (f32[4,4], f32[4,4]) tuple(a, w)
  a1 = f32[4,4] conditional(r, p, p), branch_computations={even, odd}
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[4,4], f32[4,4]) tuple(i1, a1, w)
}
ENTRY e {
  a = f32[4,4] parameter(0)
  w = f32[4,4] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[4,4], f32[4,4]) tuple(zero, a, w)
  ROOT r = (s32[], f32[4,4], f32[4,4]) while(init), condition=c, body=b
}
"""


def test_a_dot_in_a_branch_inside_a_compiled_loop():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    w = (rng.standard_normal((4, 4)) * 0.5).astype(np.float32)
    module = parse_hlo_module(COND_DOT)
    assert _loops(be.compile_module(module)) == (1, 0)
    _close(Client(backend="cpu").compile(module)(a, w), evaluate(module, a, w))


FOREVER = """HloModule forever
ic {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT go = pred[] compare(i, i), direction=EQ
}
ib {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x1 = f32[4] sine(x)
  ROOT t = (s32[], f32[4]) tuple(i1, x1)
}
oc {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ob {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(init), condition=ic, body=ib
  x1 = f32[4] get-tuple-element(w), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[4]) tuple(i1, x1)
}
ENTRY e {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  ROOT r = (s32[], f32[4]) while(init), condition=oc, body=ob
}
"""


class _Cancel:
    """EvalOptions.cancel as the runtime's ExecutionState behaves."""

    reason = None

    def check_abort(self, what: str) -> None:
        if self.reason is not None:
            raise RendezvousAbortedError(f"{what}: abandoned because {self.reason}")


def test_cancel_stops_a_native_loop():
    """An endless loop nested in another, both compiled: the cancel poll (every
    POLL_PERIOD iterations) stops it, the error returns through both native functions."""
    module = parse_hlo_module(FOREVER)
    program = be.compile_module(module)
    assert _loops(program) == (2, 0)
    cancel = _Cancel()
    errors = []

    def work():
        try:
            program.run([np.float32([0.5, 1, 2, 3])], EvalOptions(cancel=cancel))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive()  # looping in native code
    cancel.reason = "the test gave up"
    thread.join(30)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], RendezvousAbortedError)
    assert "abandoned because the test gave up" in str(errors[0])
    assert "while %" in str(errors[0])
    # the thread's context is clean again: the program runs a finite loop afterwards
    assert executor.context().words[0] == 0


def test_results_the_caller_holds_are_never_overwritten():
    rng = np.random.default_rng(3)
    h = rng.standard_normal((4, 8)).astype(np.float32)
    w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
    client = Client(backend="cpu")
    exe = client.compile(parse_hlo_module(SCAN_DOT))
    first = exe(h, w)
    kept = [np.array(x, copy=True) for x in first]
    second = exe(h * 2, w)
    for a, b in zip(first, kept):
        assert np.array_equal(a, b)
    assert not np.array_equal(second[1], first[1])
    # one fusion on Buffers (the per-call fast path): the first result Buffer stays
    text = ("HloModule one\nENTRY e {\n  x = f32[16] parameter(0)\n  s = f32[16] sine(x)\n"
            "  ROOT r = f32[16] multiply(s, x)\n}\n")
    exe = client.compile(parse_hlo_module(text))
    x = client.buffer_from_pyval(np.arange(16, dtype=np.float32))
    r1 = exe.execute([[x]], return_buffers=True)[0]
    v1 = r1.to_numpy()
    r2 = exe.execute([[r1]], return_buffers=True)[0]
    assert np.array_equal(r1.to_numpy(), v1)
    _close(r2.to_numpy(), np.sin(v1) * v1)
    assert r2.unsafe_buffer_pointer() != r1.unsafe_buffer_pointer()


def test_per_call_fast_path_checks_its_arguments():
    """The Buffer fast path falls back to execute's full checks for anything unusual."""
    client = Client(backend="cpu")
    exe = client.compile(parse_hlo_module(
        "HloModule one\nENTRY e {\n  x = f32[16] parameter(0)\n"
        "  ROOT r = f32[16] negate(x)\n}\n"))
    wrong = client.buffer_from_pyval(np.zeros(8, np.float32))
    with pytest.raises(Exception, match="holds f32\\[8\\]"):
        exe.execute([[wrong]], return_buffers=True)
    gone = client.buffer_from_pyval(np.zeros(16, np.float32))
    gone.delete()
    with pytest.raises(Exception, match="deleted"):
        exe.execute([[gone]], return_buffers=True)


KEEP_OLD = """HloModule keepold
c {
  s = (s32[], f32[5,4,8], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[5,4,8], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  st = f32[5,4,8] get-tuple-element(s), index=1
  acc = f32[4,8] get-tuple-element(s), index=2
  fi = f32[] convert(i)
  u = f32[1,4,8] broadcast(fi), dimensions={}
  zero = s32[] constant(0)
  st1 = f32[5,4,8] dynamic-update-slice(st, u, i, zero, zero)
  last = s32[] constant(4)
  old = f32[1,4,8] dynamic-slice(st, last, zero, zero), dynamic_slice_sizes={1,4,8}
  old2 = f32[4,8] reshape(old)
  acc1 = f32[4,8] add(acc, old2)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[5,4,8], f32[4,8]) tuple(i1, st1, acc1)
}
ENTRY e {
  st = f32[5,4,8] parameter(0)
  acc = f32[4,8] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[5,4,8], f32[4,8]) tuple(zero, st, acc)
  ROOT r = (s32[], f32[5,4,8], f32[4,8]) while(init), condition=c, body=b
}
"""


TWO_STACKS = """HloModule twostacks
c {
  s = (s32[], f32[6,4,8], f32[6,4,8], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[6,4,8], f32[6,4,8], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  zero = s32[] constant(0)
  sa = f32[6,4,8] get-tuple-element(s), index=1
  acc = f32[4,8] get-tuple-element(s), index=3
  ua = f32[1,4,8] reshape(acc)
  sa1 = f32[6,4,8] dynamic-update-slice(sa, ua, i, zero, zero)
  sb = f32[6,4,8] get-tuple-element(s), index=2
  ex = f32[4,8] exponential(acc)
  ub = f32[1,4,8] reshape(ex)
  sb1 = f32[6,4,8] dynamic-update-slice(sb, ub, i, zero, zero)
  h = f32[] constant(0.5)
  hb = f32[4,8] broadcast(h), dimensions={}
  acc1 = f32[4,8] multiply(acc, hb)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[6,4,8], f32[6,4,8], f32[4,8]) tuple(i1, sa1, sb1, acc1)
}
ENTRY e {
  sa = f32[6,4,8] parameter(0)
  sb = f32[6,4,8] parameter(1)
  acc = f32[4,8] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[6,4,8], f32[6,4,8], f32[4,8]) tuple(zero, sa, sb, acc)
  ROOT r = (s32[], f32[6,4,8], f32[6,4,8], f32[4,8]) while(init), condition=c, body=b
}
"""


@pytest.mark.parametrize("text, aliased", [(SCAN_DOT, True), (KEEP_OLD, False),
                                           (TWO_STACKS, True)],
                         ids=["scan_dot", "keep_old", "two_stacks"])
def test_in_place_update_of_the_loop_state(monkeypatch, text, aliased):
    """A kernel declaring KernelSpec.in_place writes its operand's slot when that value dies
    with the step - the loop state included (SCAN_DOT: the stack is updated where it
    lies) - and a copy when the operand is read later (KEEP_OLD reads the old stack after
    the update). The generated dynamic-update-slice kernel writes every element from the
    same element of its operand, so declaring it in place is exact either way."""
    import xlapy.backends.cpu.backend as backend_module

    real_emit = backend_module.emit_loop

    def emit(module, name, roots, inputs, scalars):
        spec = real_emit(module, name, roots, inputs, scalars)
        if len(roots) == 1 and roots[0].opcode == "dynamic-update-slice":
            k = [j for j, x in enumerate(inputs) if x is roots[0].operands[0]]
            if k:  # the operand, read by element k of the output only
                spec.in_place = ((0, k[0]),)
        return spec

    chosen = []
    real_choice = native.Emitter._in_place_output

    def choice(self, step, k_out, k_in, ins):
        leaf = real_choice(self, step, k_out, k_in, ins)
        chosen.append(leaf is not None)
        return leaf

    monkeypatch.setattr(backend_module, "emit_loop", emit)
    monkeypatch.setattr(native.Emitter, "_in_place_output", choice)
    be.clear_cache()
    try:
        module = parse_hlo_module(text)
        rng = np.random.default_rng(5)
        args = [rng.standard_normal(tuple(p.shape.dimensions)).astype(np.float32)
                for p in module.entry.parameters]
        got = Client(backend="cpu").compile(module)(*args)
    finally:
        be.clear_cache()
    # every update in place, or none: the state tuple stops holding an element once its last
    # get-tuple-element is read, so a stack updated before another element is read (an
    # LSTM's saved activations) is written in place too
    assert chosen and all(c == aliased for c in chosen)
    _close(got, evaluate(module, *args))
