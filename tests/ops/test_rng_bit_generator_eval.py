"""rng-bit-generator: bit-exact with XLA for rng_three_fry, rng_philox and rng_default
(Philox on CPU). Expected values came from XLA:CPU via jax 0.10.2
(``lax.rng_bit_generator(key_u32x4, shape, dtype, algorithm)``, whose u32[4] key is the
u64[2] state read little-endian: state[0] = key[1] << 32 | key[0]). Covers the state
update, how 32-bit words fill each output width (narrow types take the low bits of one word
per element, a u64 element is two consecutive words, low first), shapes split along their
first even dimension (ThreeFry), 64-bit counter carries, the u64[3] Philox state layout,
and every element type the op accepts (the bits reinterpreted)."""

import numpy as np
import pytest
from movement_eval_helpers import assert_same, np_dtype, run

from xlapy.shape import dtypes

# Keys as jax's u32[4]; the state is its u64[2] view.
KEY_CARRY = [305419896, 2596069104, 4294967294, 4294967295]  # counter 2^64 - 2
KEY_SMALL = [42, 0, 7, 0]


def state_of(key32):
    return np.array(key32, np.uint32).view(np.uint64)


def rbg(algorithm: str, state_words: int, out: str) -> str:
    return f"""
HloModule m
ENTRY e {{
  s = u64[{state_words}] parameter(0)
  ROOT r = (u64[{state_words}], {out}) rng-bit-generator(s), algorithm={algorithm}
}}
"""


# (key, algorithm, result type, new state as u32[4], bits) from XLA:CPU via jax 0.10.2.
CASES = [
    (KEY_CARRY, "rng_three_fry", "u32[2,3]", [305419896, 2596069104, 1, 0],
     [[3061519624, 582215204, 3978822521], [3494794389, 4205532262, 2696639427]]),
    (KEY_CARRY, "rng_three_fry", "u8[5]", [305419896, 2596069104, 1, 0],
     [8, 149, 36, 102, 121]),
    (KEY_CARRY, "rng_three_fry", "u16[3,1]", [305419896, 2596069104, 0, 0],
     [[5384], [21653], [58916]]),
    (KEY_CARRY, "rng_three_fry", "u64[3]", [305419896, 2596069104, 1, 0],
     [15010027610060821768, 18062623528145118756, 11581978152048001913]),
    (KEY_CARRY, "rng_three_fry", "u32[]", [305419896, 2596069104, 4294967295, 4294967295],
     3061519624),
    (KEY_CARRY, "rng_three_fry", "u32[3,3]", [305419896, 2596069104, 4, 0],
     [[3061519624, 582215204, 3978822521], [3494794389, 4205532262, 2696639427],
      [420485989, 1580406350, 1132217343]]),
    (KEY_CARRY, "rng_philox", "u32[2,3]", [305419896, 2596069104, 0, 0],
     [[2028276572, 3510593739, 2053116661], [2996457512, 529953504, 751516774]]),
    (KEY_CARRY, "rng_philox", "u8[5]", [305419896, 2596069104, 0, 0],
     [92, 203, 245, 40, 224]),
    (KEY_CARRY, "rng_philox", "u16[3,1]", [305419896, 2596069104, 4294967295, 4294967295],
     [[2908], [26827], [4853]]),
    (KEY_CARRY, "rng_philox", "u64[3]", [305419896, 2596069104, 0, 0],
     [15077885300575636316, 12869687019946644213, 3227739967255376608]),
    (KEY_CARRY, "rng_philox", "u32[]", [305419896, 2596069104, 4294967295, 4294967295],
     2028276572),
    (KEY_CARRY, "rng_philox", "u32[3,3]", [305419896, 2596069104, 1, 0],
     [[2028276572, 3510593739, 2053116661], [2996457512, 529953504, 751516774],
      [3962810239, 2353479234, 3938551892]]),
    (KEY_SMALL, "rng_three_fry", "u32[2,3]", [42, 0, 10, 0],
     [[2642642533, 356970675, 4222757798], [3437982737, 1736384518, 1010817143]]),
    (KEY_SMALL, "rng_three_fry", "u8[5]", [42, 0, 10, 0], [101, 17, 179, 6, 166]),
    (KEY_SMALL, "rng_three_fry", "u16[3,1]", [42, 0, 9, 0], [[34405], [29713], [61619]]),
    (KEY_SMALL, "rng_three_fry", "u64[3]", [42, 0, 10, 0],
     [14766023422270211685, 7457714718447694003, 4341426575643913126]),
    (KEY_SMALL, "rng_three_fry", "u32[]", [42, 0, 8, 0], 2642642533),
    (KEY_SMALL, "rng_three_fry", "u32[3,3]", [42, 0, 13, 0],
     [[2642642533, 356970675, 4222757798], [3437982737, 1736384518, 1010817143],
      [563344011, 653491321, 2676170827]]),
    (KEY_SMALL, "rng_philox", "u32[2,3]", [42, 0, 9, 0],
     [[1436477672, 1015822685, 1056814300], [3113490754, 1193696974, 489625878]]),
    (KEY_SMALL, "rng_philox", "u8[5]", [42, 0, 9, 0], [232, 93, 220, 66, 206]),
    (KEY_SMALL, "rng_philox", "u16[3,1]", [42, 0, 8, 0], [[59624], [14685], [46300]]),
    (KEY_SMALL, "rng_philox", "u64[3]", [42, 0, 9, 0],
     [4362925212046387432, 13372340965885195484, 2102927134478982862]),
    (KEY_SMALL, "rng_philox", "u32[]", [42, 0, 8, 0], 1436477672),
    (KEY_SMALL, "rng_philox", "u32[3,3]", [42, 0, 10, 0],
     [[1436477672, 1015822685, 1056814300], [3113490754, 1193696974, 489625878],
      [2331574768, 3800966934, 1220734364]]),
]


def _type(out: str):
    return np_dtype(out.split("[")[0])


@pytest.mark.parametrize("key, algorithm, out, new_state, bits", CASES)
def test_matches_xla(key, algorithm, out, new_state, bits):
    state, got = run(rbg(algorithm, 2, out), state_of(key))
    assert_same(state, state_of(new_state))
    assert_same(got, np.array(bits, dtype=_type(out)))


@pytest.mark.parametrize("key, algorithm, out, new_state, bits",
                         [c for c in CASES if c[1] == "rng_philox"])
def test_rng_default_is_philox_on_cpu(key, algorithm, out, new_state, bits):
    # The golden fixture rng_bit_generator shows RNG_DEFAULT giving Philox's bits on CPU.
    state, got = run(rbg("rng_default", 2, out), state_of(key))
    assert_same(state, state_of(new_state))
    assert_same(got, np.array(bits, dtype=_type(out)))


def test_same_state_same_bits_and_state_chains():
    text = rbg("rng_philox", 2, "u32[4]")
    s0 = state_of(KEY_SMALL)
    s1, a = run(text, s0)
    s1b, a2 = run(text, s0)
    assert_same(a, a2)
    assert_same(s1, s1b)
    s2, b = run(text, s1)
    assert not np.array_equal(a, b)
    # 4 words = one Philox counter: the state advanced by 1 each time.
    assert [int(w) for w in s2] == [42, 9]


def test_narrow_outputs_are_the_low_bits_of_the_u32_stream():
    # Behaviour doc: narrow outputs consume one 32-bit word per element and keep its low
    # bits; a u64 element is two consecutive u32 words, the first the low half.
    s = state_of(KEY_SMALL)
    _, words = run(rbg("rng_philox", 2, "u32[8]"), s)
    _, small = run(rbg("rng_philox", 2, "u8[8]"), s)
    _, half = run(rbg("rng_philox", 2, "u16[8]"), s)
    assert_same(small, (words & 0xFF).astype(np.uint8))
    assert_same(half, (words & 0xFFFF).astype(np.uint16))
    _, wide = run(rbg("rng_philox", 2, "u64[4]"), s)
    assert_same(wide, words.view(np.uint64))


def test_philox_three_word_state_layout():
    # u64[3] state = (key, counter low, counter high); a u64[2] state uses the key as the
    # counter's high word. So [k, c] and [k, c, k] generate the same bits.
    key, counter = 0x0123456789ABCDEF, 77
    _, two = run(rbg("rng_philox", 2, "u32[6]"), np.array([key, counter], np.uint64))
    state3, three = run(rbg("rng_philox", 3, "u32[6]"), np.array([key, counter, key], np.uint64))
    assert_same(three, two)
    # Six words need two counters: the 128-bit counter advances by 2.
    assert_same(state3, np.array([key, counter + 2, key], np.uint64))


def test_philox_three_word_state_carries_into_the_high_word():
    state, _ = run(rbg("rng_philox", 3, "u32[9]"),
                   np.array([5, 2**64 - 1, 10], np.uint64))
    # Nine words = three counters: low wraps to 2 and the carry reaches the high word.
    assert_same(state, np.array([5, 2, 11], np.uint64))


def test_two_word_philox_state_drops_the_carry():
    # With u64[2] only the counter's low half is stored back (the high half is the key).
    state, _ = run(rbg("rng_philox", 2, "u32[8]"), np.array([5, 2**64 - 1], np.uint64))
    assert_same(state, np.array([5, 1], np.uint64))


def test_threefry_splits_the_first_even_dimension():
    # u32[3,4]: dimension 1 is the first even one; element (i, j) is word j % 2 of counter
    # i * 2 + j // 2, so the state advances by 6 and row i pairs consecutive words.
    s = state_of(KEY_SMALL)
    state, bits = run(rbg("rng_three_fry", 2, "u32[3,4]"), s)
    assert_same(state, state_of([42, 0, 13, 0]))
    _, flat = run(rbg("rng_three_fry", 2, "u32[12]"), s)
    # u32[12] splits dimension 0 into 6 counters x 2 words: the same stream, row-major.
    assert_same(bits.reshape(-1), flat)


SIGNED_AND_FLOAT = ["s8", "s16", "s32", "s64", "f16", "bf16", "f32", "f64", "f8e4m3fn",
                    "f8e5m2", "u4", "s4", "u2", "s2", "f4e2m1fn"]


@pytest.mark.parametrize("type_name", SIGNED_AND_FLOAT)
def test_other_types_reinterpret_the_unsigned_bits(type_name):
    # Integer and floating-point results hold the same bits as the unsigned type of their
    # width (sub-byte types: the low bits of each word).
    width = dtypes.bit_width(dtypes.from_name(type_name))
    unsigned = {2: "u32", 4: "u32", 8: "u8", 16: "u16", 32: "u32", 64: "u64"}[width]
    s = state_of(KEY_SMALL)
    _, ref = run(rbg("rng_philox", 2, f"{unsigned}[2,3]"), s)
    state, got = run(rbg("rng_philox", 2, f"{type_name}[2,3]"), s)
    # Six elements need two Philox counters (three for 64-bit elements).
    assert_same(state, state_of([42, 0, 10 if width == 64 else 9, 0]))
    assert got.dtype == np_dtype(type_name) and got.shape == (2, 3)
    if width >= 8:
        assert got.tobytes() == ref.tobytes()
    else:
        low = ref.astype(np.int64) & ((1 << width) - 1)
        if type_name.startswith("s"):
            assert_same(got, np.where(low >= 1 << (width - 1), low - (1 << width),
                                      low).astype(got.dtype))
        else:
            table = np.arange(1 << width, dtype=np.uint8).view(got.dtype)
            assert got.astype(np.float32).tobytes() == table[low].astype(np.float32).tobytes()
