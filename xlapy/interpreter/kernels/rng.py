"""Kernels of the random-number ops: rng (RngUniform / RngNormal), rng-bit-generator and
rng-get-and-update-state.

rng-bit-generator is bit-exact with XLA: the algorithms and the way their 32-bit words
fill the output follow XLA's RngBitGeneratorExpander and xla/hlo/builder/lib/prng.cc
(facts, not code):
- state u64[n]: word 0 is the key. ThreeFry: word 1 is a 64-bit counter. Philox: with 3
  words the 128-bit counter is (low = word 1, high = word 2); with 2 words it is
  (low = word 1, high = word 0); the new state keeps the key and stores the advanced
  counter (with 2 words only its low half).
- ThreeFry2x32 (20 rounds, rotations 13 15 26 6 / 17 29 16 24, parity 0x1BD11BDA) maps the
  counter (low, high words) to two words. For outputs of <= 32 bits, the shape is split
  in halves along its first even dimension (else its largest): element j of that
  dimension is word j % 2 of the counter for j // 2, counters numbered row-major over
  the half shape; the state advances by the number of counters. 64-bit outputs use one
  counter per element, value = word0 | word1 << 32.
- Philox4x32 (10 rounds, multipliers 0xD2511F53 / 0xCD9E8D57, key increments
  0x9E3779B9 / 0xBB67AE85) maps a 128-bit counter to four words; ceil(N / 4) counters
  (N = number of 32-bit words needed) give words in counter order, word k of counter i
  being stream element 4 i + k. A 64-bit element is two consecutive words (low first).
- Narrow outputs (< 32 bits) take the low bits of one word per element; floating-point
  outputs are the bits reinterpreted.
- rng_default is Philox on CPU (the behaviour doc; the golden fixture rng_bit_generator).

rng (RngUniform/RngNormal) draws from ``ctx.rng`` (a NumPy Generator seeded with
``EvalOptions.rng_seed``): reproducible for one seed, but not XLA's internal generator.
rng-get-and-update-state keeps one 128-bit state per instruction, starting at XLA:CPU's
initial value 0x7012395 (plus ``rng_seed``), returns it as u64[2] (low, high) and adds
``delta``: with the default seed a fresh evaluation gives XLA:CPU's first execution.
Imports the interpreter core only.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from xlapy.hlo.attrs.enums import RandomAlgorithm, RandomDistribution
from xlapy.interpreter.evaluator import EvaluationError, UnimplementedError
from xlapy.interpreter.registry import kernel
from xlapy.shape import dtypes

U32 = np.uint32
U64 = np.uint64
_MASK32 = U64(0xFFFFFFFF)
_SHIFT32 = U64(32)

# -- the counter-based generators ----------------------------------------------------------------

_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_THREEFRY_PARITY = 0x1BD11BDA


def _rotl(v, distance: int):
    return (v << U32(distance)) | (v >> U32(32 - distance))


def threefry2x32(x0, x1, k0: int, k1: int):
    """ThreeFry2x32 with 20 rounds on u32 arrays ``x0``, ``x1`` and key words k0, k1."""
    with np.errstate(over="ignore"):
        ks = (U32(k0), U32(k1), U32(_THREEFRY_PARITY ^ k0 ^ k1))
        x0 = x0.astype(U32) + ks[0]
        x1 = x1.astype(U32) + ks[1]
        for block in range(5):
            for r in _THREEFRY_ROTATIONS[block % 2]:
                x0 = x0 + x1
                x1 = _rotl(x1, r)
                x1 = x0 ^ x1
            x0 = x0 + ks[(block + 1) % 3]
            x1 = x1 + ks[(block + 2) % 3] + U32(block + 1)
    return x0, x1


_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)


def philox4x32(x, k0: int, k1: int):
    """Philox4x32 with 10 rounds on four u32 arrays ``x`` and key words k0, k1."""
    x0, x1, x2, x3 = (np.asarray(v, U32) for v in x)
    with np.errstate(over="ignore"):
        for _ in range(10):
            p0 = x0.astype(U64) * U64(_PHILOX_M[0])
            p1 = x2.astype(U64) * U64(_PHILOX_M[1])
            x0, x1, x2, x3 = ((p1 >> _SHIFT32).astype(U32) ^ x1 ^ U32(k0), (p1 & _MASK32).astype(U32),
                              (p0 >> _SHIFT32).astype(U32) ^ x3 ^ U32(k1), (p0 & _MASK32).astype(U32))
            k0 = (k0 + _PHILOX_W[0]) & 0xFFFFFFFF
            k1 = (k1 + _PHILOX_W[1]) & 0xFFFFFFFF
    return x0, x1, x2, x3


def _lo_hi(u64_values):
    v = np.asarray(u64_values, U64)
    return (v & _MASK32).astype(U32), (v >> _SHIFT32).astype(U32)


def _join(lo, hi):
    return lo.astype(U64) | (hi.astype(U64) << _SHIFT32)


def threefry_bits(key: int, counter: int, dims: tuple[int, ...], wide: bool):
    """(u32 or u64 array of ``dims``, new counter) by XLA's ThreeFry bit generator."""
    k0, k1 = key & 0xFFFFFFFF, key >> 32
    n = math.prod(dims)
    with np.errstate(over="ignore"):
        if wide:
            lo, hi = _lo_hi(U64(counter) + np.arange(n, dtype=U64))
            x0, x1 = threefry2x32(lo, hi, k0, k1)
            return _join(x0, x1).reshape(dims), (counter + n) & 0xFFFFFFFFFFFFFFFF
        if not dims:
            lo, hi = _lo_hi(np.array([counter], U64))
            x0, _ = threefry2x32(lo, hi, k0, k1)
            return x0.reshape(()), (counter + 1) & 0xFFFFFFFFFFFFFFFF
        split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
        if split is None:
            split = int(np.argmax(dims))
        half = list(dims)
        half[split] = -(-dims[split] // 2)
        count = math.prod(half)
        lo, hi = _lo_hi(U64(counter) + np.arange(count, dtype=U64))
        x0, x1 = threefry2x32(lo, hi, k0, k1)
        pair = np.stack([x0.reshape(half), x1.reshape(half)], axis=split + 1)
        full = list(dims)
        full[split] = 2 * half[split]
        bits = pair.reshape(full)
        bits = bits[tuple(slice(0, d) for d in dims)]
        return np.ascontiguousarray(bits), (counter + count) & 0xFFFFFFFFFFFFFFFF


def _add_u128(lo: int, hi: int, n):
    """(lo, hi) + n for an int or a u64 array n (wrapping at 2^128)."""
    with np.errstate(over="ignore"):
        new_lo = U64(lo) + np.asarray(n, U64)
        carry = (new_lo < U64(lo)).astype(U64)
        new_hi = U64(hi) + carry
    return new_lo, new_hi


def philox_bits(key: int, counter_lo: int, counter_hi: int, dims: tuple[int, ...], wide: bool):
    """(u32 or u64 array of ``dims``, new counter (lo, hi)) by XLA's Philox bit
    generator."""
    k0, k1 = key & 0xFFFFFFFF, key >> 32
    n = math.prod(dims)
    words = 2 * n if wide else n
    vectors = -(-words // 4)
    lo, hi = _add_u128(counter_lo, counter_hi, np.arange(vectors, dtype=U64))
    lo0, lo1 = _lo_hi(lo)
    hi0, hi1 = _lo_hi(hi)
    out = philox4x32((lo0, lo1, hi0, hi1), k0, k1)
    if wide:
        stream = np.stack([_join(out[0], out[1]), _join(out[2], out[3])], axis=1).reshape(-1)
    else:
        stream = np.stack(out, axis=1).reshape(-1)
    new_lo, new_hi = _add_u128(counter_lo, counter_hi, vectors)
    return stream[:n].reshape(dims), (int(new_lo), int(new_hi))


# -- rng-bit-generator ----------------------------------------------------------------------------


def bits_to_dtype(bits, element_type):
    """Raw bits (u32 or u64 words) to an array of ``element_type``: narrow types keep the
    low bits of each word; floats reinterpret them."""
    dtype = dtypes.to_dtype(element_type)
    width = dtypes.bit_width(element_type)
    if width == 64:
        return bits.astype(U64).view(dtype) if dtype != U64 else bits.astype(U64)
    low = bits.astype(U32) & U32((1 << width) - 1) if width < 32 else bits.astype(U32)
    if width >= 8:
        unsigned = {8: np.uint8, 16: np.uint16, 32: np.uint32}[width]
        return low.astype(unsigned).view(dtype)
    # Sub-byte types: build the values from their bit patterns.
    if dtypes.is_integral(element_type):
        values = low.astype(np.int64)
        if dtypes.is_signed_integral(element_type):
            values = np.where(values >= 1 << (width - 1), values - (1 << width), values)
        return values.astype(dtype)
    table = _sub_byte_float_table(dtype, width)
    return table[low.astype(np.int64)]


def _sub_byte_float_table(dtype, width: int):
    """Every value of a sub-byte float type, indexed by its bit pattern."""
    patterns = np.arange(1 << width, dtype=np.uint8)
    try:
        return patterns.view(dtype).copy()
    except (TypeError, ValueError):  # pragma: no cover - depends on ml_dtypes
        raise UnimplementedError(f"rng-bit-generator: cannot produce {dtype} bits") from None


@kernel("rng-bit-generator")
def _rng_bit_generator(ctx, instr, args):
    (state,) = args
    state = np.asarray(state, U64)
    algorithm = instr.attrs["algorithm"]
    if algorithm == RandomAlgorithm.RNG_DEFAULT:
        algorithm = RandomAlgorithm.RNG_PHILOX  # XLA:CPU's default
    bits_shape = instr.shape.tuple_shapes[1]
    et = bits_shape.element_type
    width = dtypes.bit_width(et)
    if width > 64 or not (dtypes.is_integral(et) or dtypes.is_floating(et)):
        raise UnimplementedError(f"rng-bit-generator: cannot generate {bits_shape} "
                                 f"(instruction %{instr.name})")
    dims = tuple(int(d) for d in bits_shape.dimensions)
    wide = width == 64
    words = [int(w) for w in state]
    if algorithm == RandomAlgorithm.RNG_THREE_FRY:
        if len(words) != 2:
            raise EvaluationError(f"rng-bit-generator: rng_three_fry needs a u64[2] state, got "
                                  f"{len(words)} words (instruction %{instr.name})")
        bits, counter = threefry_bits(words[0], words[1], dims, wide)
        new_state = np.array([words[0], counter], U64)
    elif algorithm == RandomAlgorithm.RNG_PHILOX:
        if len(words) == 2:
            bits, (lo, _) = philox_bits(words[0], words[1], words[0], dims, wide)
            new_state = np.array([words[0], lo], U64)
        elif len(words) >= 3:
            bits, (lo, hi) = philox_bits(words[0], words[1], words[2], dims, wide)
            new_state = np.array([words[0], lo, hi] + words[3:], U64)
        else:
            raise EvaluationError(f"rng-bit-generator: rng_philox needs a u64[2] or u64[3] "
                                  f"state, got {len(words)} words (instruction %{instr.name})")
    else:
        raise UnimplementedError(f"rng-bit-generator: unsupported algorithm {algorithm} "
                                 f"(instruction %{instr.name})")
    return (new_state, bits_to_dtype(bits, et))


# -- rng-get-and-update-state --------------------------------------------------------------------

#: XLA:CPU's RngState initial value (xla/backends/cpu/runtime/rng_state_lib.cc).
RNG_STATE_INITIAL_VALUE = 0x7012395


@kernel("rng-get-and-update-state")
def _rng_get_and_update_state(ctx, instr, args):
    key = id(instr)
    state = ctx.rng_states.get(key, RNG_STATE_INITIAL_VALUE + int(ctx.options.rng_seed))
    ctx.rng_states[key] = (state + int(instr.attrs["delta"])) % (1 << 128)
    ctx.rng_state += int(instr.attrs["delta"])
    return np.array([state & 0xFFFFFFFFFFFFFFFF, (state >> 64) & 0xFFFFFFFFFFFFFFFF], U64)


# -- rng ------------------------------------------------------------------------------------------


@kernel("rng")
def _rng(ctx, instr, args):
    a, b = (np.asarray(v) for v in args)
    shape = instr.shape
    et = shape.element_type
    dtype = dtypes.to_dtype(et)
    dims = tuple(int(d) for d in shape.dimensions)
    distribution = instr.attrs["distribution"]
    gen = ctx.rng
    if distribution == RandomDistribution.RNG_NORMAL:
        mu, sigma = float(a), float(b)
        with np.errstate(all="ignore"):
            return (mu + sigma * gen.standard_normal(dims)).astype(dtype)
    if dtypes.is_floating(et):
        lo, hi = float(a), float(b)
        with np.errstate(all="ignore"):
            values = (lo + (hi - lo) * gen.random(dims)).astype(dtype)
            if hi > lo:
                # Rounding to the element type may reach b: keep the interval half-open.
                top = np.asarray(hi).astype(dtype)
                below = _next_below(top, dtype)
                values = np.where(values.astype(np.float64) >= float(top), below, values)
        return np.asarray(values, dtype)
    if dtype == np.bool_ or dtypes.is_integral(et):
        lo, hi = int(a), int(b)
        if hi <= lo:  # implementation-defined (spec): the lower bound
            return np.full(dims, a, dtype=dtype)
        return gen.integers(lo, hi, size=dims, dtype=np.int64 if hi <= 2**63 else np.uint64,
                            endpoint=False).astype(dtype)
    raise UnimplementedError(f"rng: {distribution} of {shape} is not supported "
                             f"(instruction %{instr.name})")


def _next_below(top, dtype):
    """The largest value of ``dtype`` below ``top`` (a 0-d array of dtype)."""
    if dtype in (np.float16, np.float32, np.float64):
        return np.nextafter(top, dtype.type(-np.inf))
    finfo = ml_dtypes.finfo(dtype)
    step = float(finfo.eps) * max(abs(float(top)), float(finfo.smallest_normal))
    return np.asarray(float(top) - step).astype(dtype)
