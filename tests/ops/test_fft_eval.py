"""The fft kernel: FFT, IFFT, RFFT and IRFFT over the innermost 1-3 dimensions (the page's
table and its multi-dimensional FFT: RFFT transforms the innermost axis first, IRFFT last),
values from XLA:CPU, the Hermitian parts IRFFT ignores, odd lengths, leading batch
dimensions, c64 and c128, fft_length shorter or longer than the data (XLA's evaluator cuts
or zero-pads), and size 0."""

import numpy as np
import pytest

from xlapy import ops
from xlapy.hlo.attrs.enums import FftType
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape


def run(text, *args):
    return evaluate(parse_hlo_module(text), *args)


def dims(shape):
    return "[" + ",".join(map(str, shape)) + "]"


def fft_module(in_t, in_shape, out_t, out_shape, fft_type, lengths):
    return f"""
HloModule m
ENTRY e {{
  x = {in_t}{dims(in_shape)} parameter(0)
  ROOT f = {out_t}{dims(out_shape)} fft(x), fft_type={fft_type}, fft_length={{{",".join(map(str, lengths))}}}
}}
"""


def close(got, want, dtype, rtol=None):
    got = np.asarray(got)
    assert got.dtype == dtype
    assert got.shape == np.shape(want)
    rtol = rtol or (2e-6 if dtype in (np.complex64, np.float32) else 1e-13)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def test_fft_and_ifft_from_xla():
    # jnp.fft.fft / ifft of [1, i, -1, -i] on XLA:CPU (jax 0.10.2): [0, 4, 0, 0] and [0, 0, 0, 1]
    z = np.array([1, 1j, -1, -1j], np.complex64)
    close(run(fft_module("c64", [4], "c64", [4], "FFT", [4]), z), [0, 4, 0, 0], np.complex64)
    close(run(fft_module("c64", [4], "c64", [4], "IFFT", [4]), z), [0, 0, 0, 1], np.complex64)


def test_rfft_from_xla():
    x = np.array([1, 2, 3, 4, 0, -1], np.float32)
    want = [9, -3.999999761581421 - 5.196152210235596j, 2.999999761581421, -1]  # XLA:CPU
    close(run(fft_module("f32", [6], "c64", [4], "RFFT", [6]), x), want, np.complex64)


def test_irfft_ignores_imaginary_dc_and_nyquist():
    # jnp.fft.irfft(c, n=8) on XLA:CPU: the imaginary parts of c[0] and c[4] (DC and
    # Nyquist) cannot belong to a real signal's spectrum and are ignored.
    c = np.array([1 + 5j, 2 - 1j, 0.5j, -1, 2 + 3j], np.complex64)
    want = [0.625, 0.4571067690849304, 0.625, -0.3535533547401428, 0.125, -0.9571067690849304,
            0.125, 0.3535533547401428]
    close(run(fft_module("c64", [5], "f32", [8], "IRFFT", [8]), c), want, np.float32)


def test_irfft_odd_length_from_xla():
    # n = 9: c[4] is not a Nyquist term, its imaginary part counts
    c = np.array([1 + 5j, 2 - 1j, 0.5j, -1, 2 + 3j], np.complex64)
    want = [0.7777777910232544, -0.04954952746629715, 1.2492324113845825, -0.8442306518554688,
            0.6857218146324158, -0.9222058057785034, -0.26688042283058167, 0.03049437142908573,
            0.3396400511264801]
    close(run(fft_module("c64", [5], "f32", [9], "IRFFT", [9]), c), want, np.float32)


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("cdt,rdt,ct,rt", [(np.complex64, np.float32, "c64", "f32"),
                                          (np.complex128, np.float64, "c128", "f64")])
def test_multidimensional_transforms(rank, cdt, rdt, ct, rt):
    rng = np.random.default_rng(rank)
    shape = (2, 3, 4, 5)  # a batch dimension, then up to three transformed ones
    axes = tuple(range(4 - rank, 4))
    lengths = [shape[a] for a in axes]
    z = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(cdt)
    x = rng.standard_normal(shape).astype(rdt)
    wide = z.astype(np.complex128)
    close(run(fft_module(ct, shape, ct, shape, "FFT", lengths), z),
          np.fft.fftn(wide, axes=axes), cdt)
    close(run(fft_module(ct, shape, ct, shape, "IFFT", lengths), z),
          np.fft.ifftn(wide, axes=axes), cdt)
    half = shape[:3] + (3,)
    close(run(fft_module(rt, shape, ct, half, "RFFT", lengths), x),
          np.fft.rfftn(x.astype(np.float64), axes=axes), cdt)
    spectrum = np.fft.rfftn(x.astype(np.float64), axes=axes).astype(cdt)
    close(run(fft_module(ct, half, rt, shape, "IRFFT", lengths), spectrum),
          np.fft.irfftn(spectrum.astype(np.complex128), s=lengths, axes=axes), rdt,
          rtol=1e-5 if rdt == np.float32 else None)


def test_rfft_then_irfft_round_trip():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    spectrum = run(fft_module("f64", [3, 4], "c128", [3, 3], "RFFT", [3, 4]), x)
    back = run(fft_module("c128", [3, 3], "f64", [3, 4], "IRFFT", [3, 4]), spectrum)
    close(back, x, np.float64)


def test_builder_fft():
    b = XlaBuilder("m")
    x = ops.Parameter(b, 0, Shape.array(PrimitiveType.C64, (4,)), "x")
    ops.Fft(x, FftType.FFT, [4])
    got = evaluate(b.build(), np.array([1, 1j, -1, -1j], np.complex64))
    close(got, [0, 4, 0, 0], np.complex64)


def test_fft_length_shorter_than_the_data():
    # XLA's evaluator reads fft_length elements and zero-fills the rest of the output
    z = np.array([1, 2, 3, 4, 5, 6], np.complex64)
    got = run(fft_module("c64", [6], "c64", [6], "FFT", [4]), z)
    want = np.concatenate([np.fft.fft(z[:4].astype(np.complex128)), [0, 0]])
    close(got, want, np.complex64)


def test_fft_length_longer_than_the_data():
    # missing input elements are zeros; the output keeps the operand's shape
    z = np.array([1, 2, 3], np.complex64)
    got = run(fft_module("c64", [3], "c64", [3], "FFT", [5]), z)
    want = np.fft.fft(np.array([1, 2, 3, 0, 0], np.complex128))[:3]
    close(got, want, np.complex64)


def test_size_zero():
    z = np.zeros((0, 4), np.complex64)
    close(run(fft_module("c64", [0, 4], "c64", [0, 4], "FFT", [4]), z), z, np.complex64)
    x = np.zeros((2, 0), np.float32)
    got = run(fft_module("f32", [2, 0], "c64", [2, 0], "RFFT", [0]), x)
    close(got, np.zeros((2, 0), np.complex64), np.complex64)
    z = np.zeros((3, 1), np.complex64)  # fft_length 0 on a non-empty operand: empty result
    got = run(fft_module("c64", [3, 1], "f32", [3, 0], "IRFFT", [0]), z)
    close(got, np.zeros((3, 0), np.float32), np.float32)
