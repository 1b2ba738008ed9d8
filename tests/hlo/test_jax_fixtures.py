"""Real XLA dumps (tests/fixtures/jax, made by tools/dump_jax_fixtures.py): every module
parses, verifies, and prints back to XLA's exact text. Pre-optimisation text is jax's
``as_text(dialect="hlo")`` (XLA's ShortParsable options); post-optimisation text is
``compile().as_text()`` (XLA's default options, with metadata and stack frames)."""

from pathlib import Path

import pytest

from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.parser import parse_hlo_module
from xlapy.verifier import verify_module

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "jax").glob("*.hlo"))


def test_there_are_fixtures():
    assert len(FIXTURES) >= 80


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixture_round_trips_byte_for_byte(path):
    text = path.read_text()
    module = parse_hlo_module(text)
    verify_module(module)
    options = (HloPrintOptions.short_parsable() if path.name.endswith(".pre.hlo")
               else HloPrintOptions.default())
    assert module_to_string(module, options) == text
    # parse(print(m)) reproduces m: printing the re-parsed module gives the same text.
    again = parse_hlo_module(module_to_string(module))
    assert module_to_string(again) == module_to_string(module)
