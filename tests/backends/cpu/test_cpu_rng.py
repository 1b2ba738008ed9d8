"""rng-bit-generator compiled (xlapy/backends/cpu/rng_kernel.py) against the interpreter, bit
for bit: Philox (2- and 3-word states, rng_default), ThreeFry, element types of 8/16/32/64
bits (integers and floats as bits; sub-byte types stay interpreted, pred is rejected by
the verifier), odd and even shapes (ThreeFry's split dimension), rank 0,
counters that wrap (the 128-bit carry), the kernel split over the worker pool, inside a
compiled while loop (the state threaded through), and the jax fixture's values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import control_flow as cf
from xlapy.backends.cpu import rng_kernel
from xlapy.parser import parse_hlo_module
from xlapy.interpreter import evaluate
from xlapy.runtime import Client


def _text(alg, words, t, dims):
    return (f"HloModule r\nENTRY e {{\n s = u64[{words}] parameter(0)\n"
            f" ROOT r = (u64[{words}], {t}{dims}) rng-bit-generator(s), algorithm={alg}\n}}\n")


STATES = {2: [0x123456789ABCDEF0, 0xFFFFFFFFFFFFFFFE],
          3: [0x0F0F0F0F12345678, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF]}


def _bits_equal(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.reshape(-1).view(np.uint8).tobytes() == want.reshape(-1).view(np.uint8).tobytes()


def _check(text, state):
    module = parse_hlo_module(text)
    steps = [type(s).__name__ for s in be.compile_module(parse_hlo_module(text)).entry.steps]
    assert steps == ["KernelStep"], steps
    got = Client(backend="cpu").compile(module)(state)
    want = evaluate(module, state)
    _bits_equal(got[0], want[0])
    _bits_equal(got[1], want[1])


@pytest.mark.parametrize("alg,words", [("rng_philox", 2), ("rng_philox", 3),
                                       ("rng_default", 3), ("rng_three_fry", 2)])
@pytest.mark.parametrize("t", ["u32", "s32", "f32", "u64", "f64", "bf16", "u8", "s16"])
@pytest.mark.parametrize("dims", ["[]", "[1]", "[7]", "[4,6]", "[3,5]", "[5,3,2]", "[33,17]"])
def test_bits_as_the_interpreter(alg, words, t, dims):
    _check(_text(alg, words, t, dims), np.array(STATES[words], np.uint64))


@pytest.mark.parametrize("alg", ["rng_philox", "rng_three_fry"])
def test_large_output_over_the_pool(alg):
    """Big enough for the runtime to split the counters over threads."""
    _check(_text(alg, 2, "u32", "[1024,1031]"), np.array(STATES[2], np.uint64))


def test_sub_byte_types_stay_interpreted():
    for t in ("s4", "u4", "f4e2m1fn"):
        instr = parse_hlo_module(_text("rng_philox", 2, t, "[8]")).entry.root
        assert not rng_kernel.supports(instr)


def test_state_threaded_through_a_compiled_loop():
    text = ("HloModule loop\n"
            "c {\n s = (s32[], u64[2], u32[16]) parameter(0)\n"
            " i = s32[] get-tuple-element(s), index=0\n k = s32[] constant(5)\n"
            " ROOT lt = pred[] compare(i, k), direction=LT\n}\n"
            "b {\n s = (s32[], u64[2], u32[16]) parameter(0)\n"
            " i = s32[] get-tuple-element(s), index=0\n st = u64[2] get-tuple-element(s), index=1\n"
            " acc = u32[16] get-tuple-element(s), index=2\n"
            " r = (u64[2], u32[16]) rng-bit-generator(st), algorithm=rng_three_fry\n"
            " st1 = u64[2] get-tuple-element(r), index=0\n"
            " bits = u32[16] get-tuple-element(r), index=1\n"
            " acc1 = u32[16] xor(acc, bits)\n one = s32[] constant(1)\n i1 = s32[] add(i, one)\n"
            " ROOT t = (s32[], u64[2], u32[16]) tuple(i1, st1, acc1)\n}\n"
            "ENTRY e {\n st = u64[2] parameter(0)\n z = s32[] constant(0)\n"
            " a = u32[16] constant({0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0})\n"
            " init = (s32[], u64[2], u32[16]) tuple(z, st, a)\n"
            " ROOT w = (s32[], u64[2], u32[16]) while(init), condition=c, body=b\n}\n")
    steps = be.compile_module(parse_hlo_module(text)).entry.steps
    assert any(isinstance(s, cf.CompiledWhileStep) for s in steps)
    module = parse_hlo_module(text)
    state = np.array(STATES[2], np.uint64)
    got = Client(backend="cpu").compile(module)(state)
    want = evaluate(module, state)
    for g, w in itertools.islice(zip(got, want), 3):
        _bits_equal(g, w)
