"""A bounded fuzz of the parser and verifier over the jax fixtures: seeded mutants of real
module texts (deleted, inserted, replaced and duplicated spans; junk drawn from the grammar's
own characters, digits and a few non-ASCII ones) either parse, or fail with one of xlapy's
errors. Whatever parses is verified, and the verifier too may only raise xlapy's errors.

Deterministic (a fixed seed per chunk), so a failure names the mutant that caused it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from xlapy.errors import XlaError
from xlapy.parser import parse_hlo_module
from xlapy.verifier import verify_module

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "jax"
# Small modules keep the fuzz quick: thousands of mutants in a few seconds.
TEXTS = sorted((p.name, p.read_text()) for p in FIXTURES.glob("*.hlo")
               if p.stat().st_size <= 2500)
JUNK = "{}[]()<>=,:%#*.-_\"' \n\t0123456789abcfsuTSLE?/=x\u0664\uff12\u00a0"
CHUNKS = 10
PER_CHUNK = 300  # 3,000 mutants in all


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(("delete", "insert", "replace", "duplicate", "swap-digit"))
        i = rng.randint(0, len(text))
        j = min(len(text), i + rng.randint(0, 12))
        junk = "".join(rng.choice(JUNK) for _ in range(rng.randint(0, 6)))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + junk + text[i:]
        elif kind == "replace":
            text = text[:i] + junk + text[j:]
        elif kind == "duplicate":
            text = text[:i] + text[i:j] + text[i:]
        else:  # a digit somewhere becomes another number (sizes, indices, operands)
            digits = [k for k, c in enumerate(text) if c.isascii() and c.isdigit()]
            if digits:
                k = rng.choice(digits)
                text = text[:k] + rng.choice(("0", "9", "-1", "99999999999999999999",
                                              "4611686018427387904")) + text[k + 1:]
    return text


def test_fixtures_present():
    assert len(TEXTS) >= 20, "the fuzz needs the small jax fixtures"


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_only_xlapy_errors_escape(chunk):
    rng = random.Random(1000 + chunk)
    for k in range(PER_CHUNK):
        name, base = TEXTS[rng.randrange(len(TEXTS))]
        text = mutate(base, rng)
        try:
            module = parse_hlo_module(text)
            verify_module(module)
        except XlaError:
            continue
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"mutant {k} of chunk {chunk} (from {name}) raised "
                        f"{type(e).__name__}: {e}\n--- text ---\n{text}")
