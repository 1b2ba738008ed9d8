"""rng-bit-generator as a compiled kernel (ThreeFry2x32 and Philox4x32, XLA's bit order).

The algorithms and the way their 32-bit words fill the output are the interpreter's
(xlapy/interpreter/kernels/rng.py, from XLA's RngBitGeneratorExpander and prng.cc): the
kernel computes the same words, one counter per work item, in parallel over the pool.
- Philox (also rng_default on CPU): work item v is counter (lo + v, hi + carry) as a
  128-bit number (2-word state: hi = the key word), giving stream words 4v..4v+3; an element
  of <= 32 bits takes the low bits of one word, a 64-bit element two consecutive words (low
  first). New state: the key, the counter advanced by the number of counters (2 words: only
  its low half; more words: low, high, the rest copied).
- ThreeFry: work item c is the 64-bit counter + c. 64-bit elements: one counter each, value
  word0 | word1 << 32. Narrower: the shape split in halves along its first even dimension
  (else its largest), counter c numbering the half shape row-major; its two words go to
  positions 2j and 2j + 1 of the split dimension (the second dropped past an odd end). A
  rank-0 output takes word 0 of one counter. New state: the key, the counter + counters.
Floating outputs are the bits reinterpreted. Element types of 8, 16, 32 and 64 bits are
compiled; pred and sub-byte types stay on the interpreter.

Buffers (``kernel_abi``): the state (u64[n]); the new state, the bits.
"""

from __future__ import annotations

import math

from llvmlite import ir

from xlapy.backends.cpu.kernel_abi import KernelSpec, buffer_pointer, declare_kernel, for_range
from xlapy.hlo.attrs.enums import RandomAlgorithm
from xlapy.shape import dtypes

I32 = ir.IntType(32)
I64 = ir.IntType(64)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)


def _c32(v: int) -> ir.Constant:
    return ir.Constant(I32, v & 0xFFFFFFFF)


def _c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v & 0xFFFFFFFFFFFFFFFF)


def _algorithm(instr):
    algorithm = instr.attrs["algorithm"]
    return RandomAlgorithm.RNG_PHILOX if algorithm == RandomAlgorithm.RNG_DEFAULT else algorithm


def supports(instr) -> bool:
    if instr.opcode != "rng-bit-generator" or not instr.shape.is_tuple():
        return False
    state, bits = instr.shape.tuple_shapes
    if bits.is_dynamic() or not bits.is_array() or state.dimensions == ():
        return False
    et = bits.element_type
    if et.name == "PRED" or dtypes.bit_width(et) not in (8, 16, 32, 64):
        return False
    if not (dtypes.is_integral(et) or dtypes.is_floating(et)):
        return False
    words = int(state.dimensions[0])
    algorithm = _algorithm(instr)
    if algorithm == RandomAlgorithm.RNG_THREE_FRY:
        return words == 2
    return algorithm == RandomAlgorithm.RNG_PHILOX and words >= 2


def _rotl(b, v, r: int):
    return b.or_(b.shl(v, _c32(r)), b.lshr(v, _c32(32 - r)))


def _threefry(b, x0, x1, k0, k1):
    ks = (k0, k1, b.xor(b.xor(k0, k1), _c32(_PARITY)))
    x0, x1 = b.add(x0, ks[0]), b.add(x1, ks[1])
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x0 = b.add(x0, x1)
            x1 = b.xor(x0, _rotl(b, x1, r))
        x0 = b.add(x0, ks[(block + 1) % 3])
        x1 = b.add(b.add(x1, ks[(block + 2) % 3]), _c32(block + 1))
    return x0, x1


def _philox(b, x, k0, k1):
    x0, x1, x2, x3 = x
    for r in range(10):
        kr0 = b.add(k0, _c32(r * _PHILOX_W[0]))
        kr1 = b.add(k1, _c32(r * _PHILOX_W[1]))
        p0 = b.mul(b.zext(x0, I64), _c64(_PHILOX_M[0]))
        p1 = b.mul(b.zext(x2, I64), _c64(_PHILOX_M[1]))
        x0, x1, x2, x3 = (b.xor(b.xor(b.trunc(b.lshr(p1, _c64(32)), I32), x1), kr0),
                          b.trunc(p1, I32),
                          b.xor(b.xor(b.trunc(b.lshr(p0, _c64(32)), I32), x3), kr1),
                          b.trunc(p0, I32))
    return x0, x1, x2, x3


def _halves(b, v):
    return b.trunc(v, I32), b.trunc(b.lshr(v, _c64(32)), I32)


def _join(b, lo, hi):
    return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), _c64(32)))


def emit(module: ir.Module, name: str, instr) -> KernelSpec:
    """Add the kernel of rng-bit-generator ``instr`` (``supports`` holds) to ``module``."""
    state_shape, bits_shape = instr.shape.tuple_shapes
    words = int(state_shape.dimensions[0])
    et = bits_shape.element_type
    width = dtypes.bit_width(et)
    wide = width == 64
    dims = tuple(int(d) for d in bits_shape.dimensions)
    n = math.prod(dims)
    out_ty = ir.IntType(width)
    fn, b = declare_kernel(module, name)
    bufs, lo, hi = fn.args
    st = buffer_pointer(b, bufs, 0, I64, "state")
    new = buffer_pointer(b, bufs, 1, I64, "new_state")
    out = buffer_pointer(b, bufs, 2, out_ty, "bits")
    key = b.load(st, name="key")
    k0, k1 = _halves(b, key)

    def store(pos, word):
        v = word if word.type == out_ty else b.trunc(word, out_ty)
        b.store(v, b.gep(out, [pos], inbounds=True))

    philox = _algorithm(instr) == RandomAlgorithm.RNG_PHILOX
    if philox:
        count = -(-(2 * n if wide else n) // 4)
        c_lo = b.load(b.gep(st, [_c64(1)]), name="counter.lo")
        c_hi = key if words == 2 else b.load(b.gep(st, [_c64(2)]), name="counter.hi")
    else:
        split = half = None
        if wide or not dims:
            count = n if wide else 1
        else:
            split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
            if split is None:
                split = max(range(len(dims)), key=lambda i: (dims[i], -i))
            half = list(dims)
            half[split] = -(-dims[split] // 2)
            count = math.prod(half)
        counter = b.load(b.gep(st, [_c64(1)]), name="counter")

    # the new state, by the work range that starts at 0
    first = b.icmp_unsigned("==", lo, _c64(0))
    with b.if_then(first):
        b.store(key, new)
        if philox:
            nlo = b.add(c_lo, _c64(count))
            b.store(nlo, b.gep(new, [_c64(1)]))
            if words > 2:
                carry = b.zext(b.icmp_unsigned("<", nlo, c_lo), I64)
                b.store(b.add(c_hi, carry), b.gep(new, [_c64(2)]))
                for w in range(3, words):
                    b.store(b.load(b.gep(st, [_c64(w)])), b.gep(new, [_c64(w)]))
        else:
            b.store(b.add(counter, _c64(count)), b.gep(new, [_c64(1)]))

    with for_range(b, lo, hi, "c") as c:
        if philox:
            v_lo = b.add(c_lo, c)
            v_hi = b.add(c_hi, b.zext(b.icmp_unsigned("<", v_lo, c_lo), I64))
            x = _philox(b, (*_halves(b, v_lo), *_halves(b, v_hi)), k0, k1)
            if wide:
                parts = [_join(b, x[0], x[1]), _join(b, x[2], x[3])]
            else:
                parts = list(x)
            base = b.mul(c, _c64(len(parts)))
            for k, word in enumerate(parts):
                pos = b.add(base, _c64(k))
                if (count * len(parts)) > n:  # the last counter may run past the end
                    with b.if_then(b.icmp_unsigned("<", pos, _c64(n))):
                        store(pos, word)
                else:
                    store(pos, word)
        else:
            x0, x1 = _threefry(b, *_halves(b, b.add(counter, c)), k0, k1)
            if wide:
                store(c, _join(b, x0, x1))
            elif not dims:
                store(_c64(0), x0)
            else:
                # c's position in the half shape, then the two full positions
                rest, idx = c, []
                for d in reversed(half):
                    idx.append(b.urem(rest, _c64(d)))
                    rest = b.udiv(rest, _c64(d))
                idx.reverse()
                strides, s = [], 1
                for d in reversed(dims):
                    strides.append(s)
                    s *= d
                strides.reverse()
                pos = _c64(0)
                for i, (v, st_) in enumerate(zip(idx, strides)):
                    if i == split:
                        v = b.mul(v, _c64(2))
                    pos = b.add(pos, b.mul(v, _c64(st_)))
                store(pos, x0)
                second = b.add(pos, _c64(strides[split]))
                if dims[split] % 2:
                    j2 = b.add(b.mul(idx[split], _c64(2)), _c64(1))
                    with b.if_then(b.icmp_unsigned("<", j2, _c64(dims[split]))):
                        store(second, x1)
                else:
                    store(second, x1)
    b.ret_void()
    return KernelSpec(name=name, n_inputs=1, outputs=[state_shape, bits_shape],
                      domain=count, cost=64)


__all__ = ["emit", "supports"]
