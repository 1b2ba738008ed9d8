"""Host memory of the CPU backend: every buffer a kernel reads or writes in bulk starts on a
cache line (``backends.base.ALIGN``, 64 bytes, as XLA:CPU aligns its buffers) - the pool's
blocks, native workspaces, and the copies ``buffer_from_pyval`` makes - and the pool still
hands a block out again only when nothing refers to it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy.backends.base import ALIGN, aligned_empty
from xlapy.backends.cpu import buffers
from xlapy.runtime import Client


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_alignment_is_a_cache_line():
    assert ALIGN == 64


@pytest.mark.parametrize("shape,dtype", [((3, 5), np.float32), ((0, 7), np.float64),
                                         ((), np.int8), ((1001,), np.bool_),
                                         ((17, 3), ml_dtypes.bfloat16)])
def test_aligned_empty(shape, dtype):
    a = aligned_empty(shape, dtype)
    assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous
    assert a.size == 0 or address(a) % ALIGN == 0  # an empty array has no data
    a[...] = 1  # writable, all of it
    assert np.all(a == 1)


def test_pool_blocks_are_aligned_and_reused_only_when_free():
    pool = buffers.BufferPool()
    n = buffers.POOL_MIN_BYTES // 4 + 3  # f32 elements: an odd byte count past the minimum
    a = pool.empty((n,), np.float32)
    assert address(a) % ALIGN == 0
    view = a[5:]  # a view keeps the block taken
    del a
    b = pool.empty((n,), np.float32)
    assert address(b) % ALIGN == 0 and address(b) != address(view) - 20
    first = address(view) - 20
    del view
    c = pool.empty((n,), np.int32)  # the first block is free again: handed out
    assert address(c) == first
    del b, c
    small = pool.empty((4,), np.float32)  # below the pool's minimum: np.empty's memory
    assert small.shape == (4,)


@pytest.mark.parametrize("nbytes", [0, 1, 100, 4096, buffers.POOL_MIN_BYTES,
                                    3 * buffers.POOL_MIN_BYTES + 5])
def test_workspaces_are_aligned(nbytes):
    ws, at = buffers.workspace(nbytes)
    start = address(ws)
    assert at % ALIGN == 0 and start <= at and at + nbytes <= start + ws.nbytes


@pytest.mark.parametrize("value", [np.arange(12, dtype=np.float32).reshape(3, 4),
                                   np.arange(70000, dtype=np.float64)[::2],  # strided
                                   np.ones((2, 3), ml_dtypes.bfloat16), np.float32(2.5),
                                   np.zeros((0, 4), np.int32), [[1, 2], [3, 4]]])
def test_device_buffers_are_aligned_copies(value):
    c = Client(backend="cpu")
    buf = c.buffer_from_pyval(value)
    array = buf._storage.array
    assert (array.size == 0 or address(array) % ALIGN == 0) and not array.flags.writeable
    np.testing.assert_array_equal(buf.to_numpy(), np.asarray(value))


def test_large_results_are_aligned():
    c = Client(backend="cpu")
    text = """HloModule m
ENTRY e {
  x = f32[300,257] parameter(0)
  ROOT y = f32[300,257] multiply(x, x)
}"""
    exe = c.compile(text)
    x = np.random.default_rng(0).standard_normal((300, 257)).astype(np.float32)
    out = exe.execute([[c.buffer_from_pyval(x)]], return_buffers=True)[0]  # replica 0's
    array = out._storage.array
    assert address(array) % ALIGN == 0
    np.testing.assert_array_equal(out.to_numpy(), x * x)
