"""The worker pool in native code (xlapy.backends.cpu.workers): kernels and GEMMs split over
threads from native code - the entry computation and compiled loops - with no Python per
call; results as the interpreter gives them and independent of the thread count; the
publisher's MXCSR on every thread (flushed denormals); nested and concurrent use without
deadlock; errors and cancellation reaching the caller."""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import denormals, executor, threads
from xlapy.interpreter.evaluator import EvalOptions, evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime.threaded_collectives import RendezvousAbortedError

_PIECE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def _jobs() -> int:
    return threads.pool().counters()[0]


def _native(text: str, **options):
    program = be.compile_module(parse_hlo_module(text), **options)
    assert program.native is not None
    return program


def _run(program, args, options=None):
    got = program.run(list(args), options or EvalOptions())
    return tuple(np.asarray(g) for g in got) if isinstance(got, tuple) else np.asarray(got)


@pytest.mark.parametrize("count", [1, 2, 3, 5])
@pytest.mark.parametrize("per_thread", [1, 4])
def test_parallel_for_covers_the_domain_once(count, per_thread):
    hits = np.zeros(10_007, np.int64)
    lock = threading.Lock()
    ranges = []

    def piece(_, lo, hi):
        with lock:
            hits[lo:hi] += 1
            ranges.append((lo, hi))

    fn = _PIECE(piece)
    with threads.using(count):
        threads.pool().parallel_for(ctypes.cast(fn, ctypes.c_void_p).value, None, hits.size,
                                    per_thread)
    assert (hits == 1).all()
    assert len(ranges) == (1 if count == 1 else min(hits.size, count * per_thread))


# A program of kernels each big enough to be split over the pool: elementwise, a row
# reduction, a column reduction (chunked partial sums, then a combining kernel).
KERNELS = """HloModule kernels
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[512,1024] parameter(0)
  y = f32[512,1024] parameter(1)
  t = f32[512,1024] tanh(x)
  m = f32[512,1024] multiply(t, y)
  zero = f32[] constant(0)
  rows = f32[512] reduce(m, zero), dimensions={1}, to_apply=add
  cols = f32[1024] reduce(m, zero), dimensions={0}, to_apply=add
  e = f32[512,1024] exponential(m)
  ROOT r = (f32[512,1024], f32[512], f32[1024]) tuple(e, rows, cols)
}
"""


def _kernel_inputs():
    rng = np.random.default_rng(5)
    return [rng.standard_normal((512, 1024)).astype(np.float32) for _ in range(2)]


def test_kernels_split_from_native_code_match_the_interpreter_at_any_thread_count():
    program = _native(KERNELS)
    assert not program.native.host_table.calls  # no call out: the pool is called natively
    args = _kernel_inputs()
    want = evaluate(parse_hlo_module(KERNELS), *args)
    results = {}
    for count in (1, 2, 3, 4):
        with threads.using(count):
            before = _jobs()
            results[count] = _run(program, args)
            if count > 1:
                assert _jobs() > before  # jobs published on the pool by native code
    for count, got in results.items():
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-5 * np.abs(w).max())
        for g, w in zip(got, results[1]):
            assert np.array_equal(g, w), count  # the split does not change a bit


LOOP = """HloModule loop
c {
  s = (s32[], f32[256,1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(20)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[256,1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[256,1024] get-tuple-element(s), index=1
  h = f32[] constant(0.5)
  hb = f32[256,1024] broadcast(h), dimensions={}
  x1 = f32[256,1024] multiply(x, hb)
  x2 = f32[256,1024] sine(x1)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[256,1024]) tuple(i1, x2)
}
ENTRY e {
  x = f32[256,1024] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[256,1024]) tuple(zero, x)
  ROOT r = (s32[], f32[256,1024]) while(init), condition=c, body=b
}
"""


def test_a_compiled_loop_splits_its_kernels_without_python():
    program = _native(LOOP)
    calls = program.native.host_table.calls
    assert not [c for c in calls if isinstance(c, executor.StepCall)]
    x = np.random.default_rng(6).standard_normal((256, 1024)).astype(np.float32)
    want = evaluate(parse_hlo_module(LOOP), x)
    with threads.using(2):
        before = _jobs()
        got = _run(program, [x])
        assert _jobs() - before >= 20  # a job per iteration at least, from native code
    with threads.using(1):
        alone = _run(program, [x])
    assert got[0] == want[0] == 20
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    assert np.array_equal(got[1], alone[1])


GEMMS = """HloModule gemms
ENTRY e {
  a = f32[8,96,300] parameter(0)
  b = f32[8,300,200] parameter(1)
  w = f32[600,300] parameter(2)
  d = f32[8,96,200] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  x = f32[768,300] reshape(a)
  p = f32[768,600] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  q = f32[600,768] dot(w, x), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT r = (f32[8,96,200], f32[768,600], f32[600,768]) tuple(d, p, q)
}
"""


def test_gemms_called_natively_over_the_pool_at_any_thread_count():
    """Batched and transposed dots: one native call of the GEMM driver each (no host
    call), cut into panels or batches over the pool as library.gemm_split says."""
    program = _native(GEMMS)
    assert not program.native.host_table.calls
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(s).astype(np.float32)
            for s in ((8, 96, 300), (8, 300, 200), (600, 300))]
    want = evaluate(parse_hlo_module(GEMMS), *args)
    for count in (1, 2, 3):
        with threads.using(count):
            got = _run(program, args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


@pytest.mark.skipif(not denormals.supported(), reason="no MXCSR")
def test_pool_threads_run_a_flushing_program_flushed():
    """A denormal input times 2 reads as 0 under DAZ: on every piece of a kernel split over
    the pool, whichever thread runs it; unflushed it doubles."""
    text = """HloModule ftz
ENTRY e {
  x = f32[1048576] parameter(0)
  y = f32[1048576] parameter(1)
  ROOT m = f32[1048576] multiply(x, y)
}
"""
    x = np.full(1 << 20, 1e-40, np.float32)
    two = np.full(1 << 20, 2, np.float32)
    flushed = _native(text, flush_denormals=True)
    kept = _native(text, flush_denormals=False)
    with threads.using(max(2, threads.WORKERS)):
        for _ in range(3):
            assert not _run(flushed, [x, two]).any()
            assert (_run(kept, [x, two]) == x * two).all()


def test_nested_and_concurrent_use_does_not_deadlock():
    """Programs splitting kernels run from inside a pool job (nested: the board is taken,
    the pool thread runs the kernel alone) and from several threads at once (the later
    ones run alone while the board is taken)."""
    program = _native(KERNELS)
    args = _kernel_inputs()
    want = _run(program, args)
    got, lock = [], threading.Lock()

    def body(next_item, local):
        while next_item() is not None:
            out = _run(program, args)
            with lock:
                got.append(out)

    threads.parallel(range(4), body)
    callers = [threading.Thread(target=lambda: threads.parallel(range(3), body))
               for _ in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(120)
    assert not any(t.is_alive() for t in callers)
    assert len(got) == 4 + 9
    for out in got:
        for g, w in zip(out, want):
            assert np.array_equal(g, w)


FOREVER = """HloModule forever
c {
  s = (s32[], f32[256,1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT go = pred[] compare(i, i), direction=EQ
}
b {
  s = (s32[], f32[256,1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[256,1024] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x1 = f32[256,1024] sine(x)
  ROOT t = (s32[], f32[256,1024]) tuple(i1, x1)
}
ENTRY e {
  x = f32[256,1024] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[256,1024]) tuple(zero, x)
  ROOT r = (s32[], f32[256,1024]) while(init), condition=c, body=b
}
"""


class _Cancel:
    reason = None

    def check_abort(self, what: str) -> None:
        if self.reason is not None:
            raise RendezvousAbortedError(f"{what}: abandoned because {self.reason}")


def test_cancel_stops_a_loop_of_split_kernels():
    program = _native(FOREVER)
    cancel, errors = _Cancel(), []

    def work():
        try:
            program.run([np.ones((256, 1024), np.float32)], EvalOptions(cancel=cancel))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    before = _jobs()
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive()
    cancel.reason = "the test gave up"
    thread.join(30)
    assert not thread.is_alive()
    assert len(errors) == 1 and "abandoned because the test gave up" in str(errors[0])
    if threads.threads_in_use() > 1:
        assert _jobs() > before
    # the pool is free again: a split kernel runs on it at once
    program2 = _native(KERNELS)
    args = _kernel_inputs()
    _run(program2, args)


def test_errors_of_python_jobs_reach_the_caller_and_the_pool_goes_on():
    def failing(next_item, local):
        while (item := next_item()) is not None:
            if item == 3:
                raise KeyError("item 3")
            time.sleep(0.001)

    with pytest.raises(KeyError, match="item 3"):
        threads.parallel(range(20), failing)
    seen = []
    threads.parallel(range(20), lambda nxt, local: seen.extend(iter(nxt, None)))
    assert sorted(seen) == list(range(20))


def test_errors_of_python_kernels_split_over_the_pool_reach_the_caller():
    """run_parallel with a Python callable as the kernel: an error in a piece (on whichever
    thread runs it) is raised in the caller; the pool goes on."""
    def kernel(bufs, lo, hi):
        if lo <= 500 < hi:
            raise ValueError("piece with item 500")
        bufs[lo:hi] += 1

    hits = np.zeros(1000, np.int64)
    with threads.using(2), pytest.raises(ValueError, match="item 500"):
        threads.run_parallel(kernel, hits, hits.size, 1 << 30, min_work=1)
    hits[:] = 0
    with threads.using(2):
        threads.run_parallel(lambda b, lo, hi: b.__setitem__(slice(lo, hi), b[lo:hi] + 1),
                             hits, hits.size, 1 << 30, min_work=1)
    assert (hits == 1).all()


BATCHED_LOOP = """HloModule bloop
c {
  s = (s32[], f32[16,64,128]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[16,64,128]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[16,64,128] get-tuple-element(s), index=1
  g = f32[16,64,64] dot(x, x), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  y = f32[16,64,128] dot(g, x), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  k = f32[] constant(0.005)
  kb = f32[16,64,128] broadcast(k), dimensions={}
  y1 = f32[16,64,128] multiply(y, kb)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[16,64,128]) tuple(i1, y1)
}
ENTRY e {
  x = f32[16,64,128] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[16,64,128]) tuple(zero, x)
  ROOT r = (s32[], f32[16,64,128]) while(init), condition=c, body=b
}
"""


def test_batched_dots_inside_a_compiled_loop_run_natively():
    """Batched dots in a loop body (one transposed): GEMM-driver calls from the compiled
    loop, no call out; results as the interpreter's at any thread count."""
    program = _native(BATCHED_LOOP)
    calls = program.native.host_table.calls
    assert not [c for c in calls if isinstance(c, executor.StepCall)]
    x = np.random.default_rng(8).standard_normal((16, 64, 128)).astype(np.float32)
    want = evaluate(parse_hlo_module(BATCHED_LOOP), x)
    for count in (1, 2):
        with threads.using(count):
            got = _run(program, [x])
        assert got[0] == want[0] == 3
        assert np.isfinite(want[1]).all()
        np.testing.assert_allclose(got[1], want[1], rtol=1e-3,
                                   atol=1e-4 * np.abs(want[1]).max())
