"""swap_last2 (backends/cpu/transposes.py): the transposing copies of the library's LAPACK
calls, through the compiled block transpose where it applies, NumPy elsewhere - the same
bits as np.swapaxes either way."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy.backends.cpu import transposes


def _sample(shape, dtype):
    rng = np.random.default_rng(40)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("shape,dtype,compiled", [
    ((256, 256), np.float32, True), ((3, 128, 64), np.float64, True),
    ((2, 96, 160), np.complex64, True), ((1, 80, 64), ml_dtypes.bfloat16, True),
    ((64, 128), np.int8, True), ((128, 128), np.complex128, False),  # 128-bit elements
    ((63, 129), np.float32, False),  # odd dimensions
    ((4, 8, 8), np.float32, False),  # small matrices: NumPy
    ((0, 64, 64), np.float32, False)])
def test_swap_last2_is_numpys_swapaxes(shape, dtype, compiled):
    x = _sample(shape, dtype)
    got = transposes.swap_last2(x)
    want = np.ascontiguousarray(np.swapaxes(x, -1, -2))
    assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    count = x.size // (shape[-1] * shape[-2]) if x.size else 0
    key = (8 * np.dtype(dtype).itemsize, count, shape[-2], shape[-1])
    assert (transposes._KERNELS.get(key) is not None) == compiled


def test_a_large_copy_runs_over_the_pool_and_strided_input_is_read_as_values():
    x = _sample((1024, 768), np.float32)
    got = transposes.swap_last2(x)
    assert np.array_equal(got, x.T)
    view = x[:, ::2]  # not contiguous: copied first
    assert np.array_equal(transposes.swap_last2(view), view.T)
