"""The cpu backend's one worker pool (xlapy/backends/cpu/threads.py) and its BLAS threads:
work handed out item by item (a slowed thread takes fewer: the mechanism by which a busy
machine slows a call in proportion), errors reaching the caller, no nesting deadlock, kernels
covering their domain exactly once, BLAS bounded to one thread per pool thread unless the
user set OPENBLAS_NUM_THREADS / OMP_NUM_THREADS (then left exactly as set), GEMMs cut into
panels and batches over the pool with results as BLAS gives them whole."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from xlapy.backends.cpu import blas, buffers, library, threads

ROOT = Path(__file__).resolve().parents[3]


def test_every_item_once_and_errors_reach_the_caller():
    seen, lock = [], threading.Lock()

    def body(next_item, local):
        while (item := next_item()) is not None:
            with lock:
                seen.append(item)

    threads.parallel(range(100), body, 4)
    assert sorted(seen) == list(range(100))

    def failing(next_item, local):
        while (item := next_item()) is not None:
            if item == 7:
                raise ValueError("item 7")

    with pytest.raises(ValueError, match="item 7"):
        threads.parallel(range(50), failing)


@pytest.mark.skipif(threads.WORKERS < 2, reason="one core: the pool has no second thread")
def test_a_slowed_thread_takes_fewer_items():
    """One thread stalls (as on a core another process holds): the others take the rest of
    the work instead of waiting for its fixed share."""
    taken: dict[str, int] = {}
    stalled = threading.Event()

    def body(next_item, local):
        me = threading.current_thread().name
        while next_item() is not None:
            taken[me] = taken.get(me, 0) + 1
            if me != threading.main_thread().name and not stalled.is_set():
                stalled.set()
                time.sleep(0.3)
            else:
                time.sleep(0.001)

    started = time.perf_counter()
    threads.parallel(range(60), body)
    elapsed = time.perf_counter() - started
    main = taken[threading.main_thread().name]
    assert sum(taken.values()) == 60
    assert main >= 60 - sum(v for k, v in taken.items() if k != threading.main_thread().name)
    assert main > 30, taken  # the caller did most of it while the worker stalled
    assert elapsed < 1.0


def test_nested_work_runs_on_the_worker_itself():
    inner_threads = []

    def inner(next_item, local):
        while next_item() is not None:
            inner_threads.append(threading.current_thread().name)

    def outer(next_item, local):
        while next_item() is not None:
            threads.parallel(range(3), inner)

    threads.parallel(range(4), outer)
    assert len(inner_threads) == 12


def test_run_parallel_covers_the_domain_once():
    hits = np.zeros(100_003, np.int64)
    ranges = []

    def kernel(bufs, lo, hi):
        hits[lo:hi] += 1
        ranges.append((lo, hi))

    buffers.run_parallel(kernel, None, hits.size, hits.size * 100)
    assert (hits == 1).all()
    if threads.WORKERS >= 2:
        assert len(ranges) >= 2
    hits[:] = 0
    buffers.run_parallel(kernel, None, hits.size, 10)  # small work: the caller alone
    assert (hits == 1).all()


def test_blas_is_single_threaded_inside_the_pool(monkeypatch):
    calls = []
    monkeypatch.setattr(threads, "USER_BLAS_THREADS", None)
    monkeypatch.setattr(blas, "set_local_threads", lambda n: calls.append(n) or 5)
    with threads.blas_calls(), threads.blas_calls():  # nested: the bound is already there
        pass
    assert calls == [1, 5]  # bounded, then the previous bound restored
    calls.clear()
    monkeypatch.setattr(threads, "USER_BLAS_THREADS", "OPENBLAS_NUM_THREADS=3")
    with threads.blas_calls():
        pass
    assert calls == []  # the user's setting is left alone


def test_bound_is_undone_after_the_call():
    """After the backend's BLAS calls, BLAS's thread count is what it was (the user's own
    SciPy calls keep OpenBLAS's default)."""
    if blas.set_local_threads(0) is None:
        pytest.skip("this OpenBLAS has no per-thread bound")
    default = blas.library_info()["threads"]
    with threads.blas_calls():
        pass
    a = np.ones((1, 300, 300), np.float32)
    c = np.empty_like(a)
    library.batched_gemm(a, a, c)
    assert blas.library_info()["threads"] == default
    seen = []
    t = threading.Thread(target=lambda: seen.append(blas.set_local_threads(0)))
    t.start()
    t.join()
    assert seen == [default]


def test_overlapping_bounds_restore_blas_once_all_are_done():
    """OpenBLAS's "local" bound is one setting for the whole process in SciPy's builds: two
    threads inside blas_calls blocks at once share it, and the default comes back only when
    the last one leaves, whatever the order they leave in."""
    if blas.set_local_threads(0) is None or threads.USER_BLAS_THREADS is not None:
        pytest.skip("this OpenBLAS has no bound, or the user set BLAS's threads")
    default = blas.library_info()["threads"]
    inside, leave = threading.Event(), threading.Event()
    seen = []

    def other():
        with threads.blas_calls():
            inside.set()
            leave.wait(10)
            seen.append(blas.library_info()["threads"])

    t = threading.Thread(target=other)
    with threads.blas_calls():
        t.start()
        inside.wait(10)
        assert blas.library_info()["threads"] == 1
    assert blas.library_info()["threads"] == 1  # the other thread still calls BLAS
    leave.set()
    t.join()
    assert seen == [1]
    assert blas.library_info()["threads"] == default


def _run(code: str, **env) -> str:
    full = dict(os.environ)
    for name in threads.BLAS_THREAD_VARIABLES:
        full.pop(name, None)
    full.update(env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), full.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


_PROBE = """
import numpy as np
from xlapy.backends.cpu import blas, library, threads
calls = []
real = blas.set_local_threads
blas.set_local_threads = lambda n: calls.append(n) or real(n)
a = np.ones((2, 300, 300), np.float32)
c = np.empty_like(a)
library.batched_gemm(a, a, c)
assert (c == 300).all()
print(threads.USER_BLAS_THREADS, blas.library_info()["threads"], sorted(set(calls)))
"""


def test_user_setting_is_never_overridden():
    user, count, bounds = _run(_PROBE, OPENBLAS_NUM_THREADS="1").split(" ", 2)
    assert user == "OPENBLAS_NUM_THREADS=1" and count == "1" and bounds == "[]"
    user, _, bounds = _run(_PROBE, OMP_NUM_THREADS="1").split(" ", 2)
    assert user == "OMP_NUM_THREADS=1" and bounds == "[]"
    user, _, bounds = _run(_PROBE).split(" ", 2)
    assert user == "None"
    if blas.set_local_threads(0) is not None:
        assert "1" in bounds  # the backend bounded its BLAS calls itself


@pytest.mark.parametrize("bsz,m,k,n", [(64, 40, 30, 50), (1, 700, 64, 300), (1, 200, 64, 900),
                                       (3, 520, 33, 130)])
@pytest.mark.parametrize("transposed", [False, True])
def test_gemm_panels_and_batches(monkeypatch, bsz, m, k, n, transposed):
    """Batches and panels over the pool give BLAS's whole-matrix result (transposed
    operands read in place, through their leading dimensions)."""
    monkeypatch.setattr(library, "PARALLEL_GEMM", 1 << 10)
    rng = np.random.default_rng(bsz + m)
    if transposed:
        a = rng.standard_normal((bsz, k, m)).astype(np.float32).transpose(0, 2, 1)
        b = rng.standard_normal((bsz, n, k)).astype(np.float32).transpose(0, 2, 1)
    else:
        a = rng.standard_normal((bsz, m, k)).astype(np.float32)
        b = rng.standard_normal((bsz, k, n)).astype(np.float32)
    c = np.full((bsz, m, n), np.nan, np.float32)
    library.batched_gemm(a, b, c)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.skipif(threads.WORKERS < 2, reason="one core: every GEMM on the caller")
def test_gemm_split():
    """Small GEMMs on the calling thread; a batch giving every thread whole matrices is not
    cut; a big GEMM is cut along its longer output dimension into panels at least
    PANEL_MIN wide, at most PANELS_PER_THREAD per thread."""
    assert library.gemm_split(1, 64, 64, 64) == (0, 1, 0)
    assert library.gemm_split(64, 256, 256, 256) == (0, 1, 64)
    cores = threads.WORKERS
    axis, panels, per = library.gemm_split(1, 2048, 2048, 2048)
    assert axis == 1 and 1 < panels <= library.PANELS_PER_THREAD * cores and per == panels
    assert 2048 // panels >= library.PANEL_MIN
    axis, panels, per = library.gemm_split(1, 4096, 512, 256)  # tall: cut along the rows
    assert axis == 0 and panels > 1
    axis, panels, per = library.gemm_split(1, 64, 4096, 4096)  # wide: along the columns
    assert axis == 1 and panels > 1
