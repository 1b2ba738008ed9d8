"""The round-trip table, in the style of XLA's hlo_parser_test.cc: every row parses, verifies,
and prints back byte for byte with the options XLA's test prints it with.

The rows: XLA's CreateTestCases() (long form), CreateShortTestCases() (ShortParsable),
CreateNonRoundtripTestCases(), the TEST_F texts that print back unchanged or must parse
(roundtrip_rows_xla_*.py), and xlapy's own rows (roundtrip_rows_own.py), so that every opcode
of xlapy.hlo.opcodes and every attribute key and enumerated value of its schema appears in a
printed module (checked below against OPCODES and the op registry).

XLA's ExpectEqual: parse and verify the text, print it with the default options plus
print_large_constants, parse and verify that again, and print with the row's options. It
verifies with allow_mixed_precision_in_hlo_verifier=true (rows like TupleScatter and
ScaledDot mix f32/bf16 and f8 types), and so does ``verify_mixed`` here.
Rows left out, with the reason, are listed in roundtrip_rows_xla_short.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from roundtrip_rows_own import OWN_LONG_ROWS, OWN_SHORT_ROWS
from roundtrip_rows_xla_long import LONG_ROWS
from roundtrip_rows_xla_other import ACCEPTED_ROWS, COMPACT_GTE_ROWS, DEFAULT_FORM_ROWS
from roundtrip_rows_xla_short import NON_ROUNDTRIP_ROWS, SHORT_ROWS

from xlapy.hlo.attrs import EnumKind
from xlapy.hlo.opcodes import OPCODES
from xlapy.hlo.printer import HloPrintOptions, attribute_texts, module_to_string
from xlapy.opdefs import all_opdefs
from xlapy.parser import parse_hlo_module
from xlapy.verifier import verify_module

#: HloPrintOptions().set_print_operand_shape(true).set_print_large_constants(true)
LONG = HloPrintOptions(print_operand_shape=True, print_large_constants=True)
SHORT = HloPrintOptions.short_parsable()

ALL_LONG = LONG_ROWS + OWN_LONG_ROWS
ALL_SHORT = SHORT_ROWS + OWN_SHORT_ROWS


def verify_mixed(module) -> None:
    verify_module(module, allow_mixed_precision=True)


def _ids(rows):
    return [row[0] for row in rows]


def reprinted(text: str, options: HloPrintOptions, *, verify: bool = True) -> str:
    """XLA's HloParameterizedParserTest::ExpectEqual (without the proto round trip)."""
    module = parse_hlo_module(text)
    if verify:
        verify_mixed(module)
    module = parse_hlo_module(module_to_string(module, print_large_constants=True))
    if verify:
        verify_mixed(module)
    return module_to_string(module, options)


@pytest.mark.parametrize("name,text", ALL_LONG, ids=_ids(ALL_LONG))
def test_long_form_row_prints_back(name, text):
    assert reprinted(text, LONG) == text


@pytest.mark.parametrize("name,text", ALL_SHORT, ids=_ids(ALL_SHORT))
def test_short_form_row_prints_back(name, text):
    assert reprinted(text, SHORT) == text


@pytest.mark.parametrize("name,text,expected", NON_ROUNDTRIP_ROWS, ids=_ids(NON_ROUNDTRIP_ROWS))
def test_non_roundtrip_row_prints_as_xla(name, text, expected):
    """Nested instructions, omitted shapes and name#i operands come out as XLA names and
    prints them (parameter.anon, add.anon, p0_1_0...)."""
    module = parse_hlo_module(text)
    verify_mixed(module)
    assert module_to_string(module, SHORT).strip() == expected.strip()


@pytest.mark.parametrize("name,text", DEFAULT_FORM_ROWS, ids=_ids(DEFAULT_FORM_ROWS))
def test_default_form_row_prints_back(name, text):
    module = parse_hlo_module(text)
    verify_mixed(module)
    assert module_to_string(module, HloPrintOptions.default()) == text


@pytest.mark.parametrize("name,text", COMPACT_GTE_ROWS, ids=_ids(COMPACT_GTE_ROWS))
def test_compact_gte_row_prints_back(name, text):
    module = parse_hlo_module(text)
    verify_mixed(module)
    options = replace(SHORT, compact_gte=True, print_operand_shape=True, print_percent=True)
    assert module_to_string(module, options).strip() == text.strip()


@pytest.mark.parametrize("name,text,verified", ACCEPTED_ROWS, ids=_ids(ACCEPTED_ROWS))
def test_accepted_row_parses(name, text, verified):
    module = parse_hlo_module(text)
    if verified:
        verify_mixed(module)
    printed = module_to_string(module)
    assert module_to_string(parse_hlo_module(printed)) == printed


def test_table_sizes_and_names():
    assert len(LONG_ROWS) == 111 and len(SHORT_ROWS) == 62 and len(NON_ROUNDTRIP_ROWS) == 11
    for rows in (ALL_LONG, ALL_SHORT):
        names = _ids(rows)
        assert len(names) == len(set(names))


# -- completeness ---------------------------------------------------------------------------

#: (opcode, key) never printed by XLA, so no printed module can show them.
UNPRINTED_KEYS = {
    # async-update/-done accept the chain's thread and computation (XLA's parser checks them
    # against the async-start); only the async-start prints them.
    ("async-update", "async_execution_thread"), ("async-update", "calls"),
    ("async-done", "async_execution_thread"), ("async-done", "calls"),
    # mode= is read and ignored by XLA's parser (TODO(b/425435082) there): never printed.
    ("all-reduce", "mode"), ("all-reduce-start", "mode"), ("reduce-scatter", "mode"),
}

#: (opcode, attribute, value) that no printed module can carry.
UNPRINTED_VALUES = {
    # type= is printed only when it differs from the element type's default comparison
    # type, and FLOAT, SIGNED, UNSIGNED are the defaults of floats, signed and unsigned ints.
    ("compare", "type", "FLOAT"), ("compare", "type", "SIGNED"), ("compare", "type", "UNSIGNED"),
    # XLA's parser rejects API_VERSION_UNSPECIFIED ("Invalid API version").
    ("custom-call", "api_version", "API_VERSION_UNSPECIFIED"),
}


def _table_contents():
    """Opcodes, (opcode, printed key) and (opcode, attribute, enum value) of every module in
    the round-trip table; instructions of wrapped async computations count as themselves."""
    opcodes, keys, values = set(), set(), set()
    plain = HloPrintOptions(syntax_sugar_async_ops=False)
    defs = all_opdefs()
    for _, text in ALL_LONG + ALL_SHORT:
        for instr in parse_hlo_module(text).instructions():
            opcodes.add(instr.opcode)
            keys.update((instr.opcode, t.split("=", 1)[0]) for t in attribute_texts(instr, plain))
            for spec in defs[instr.opcode].attrs:
                value = instr.attrs.get(spec.name)
                if isinstance(spec.kind, EnumKind) and value is not None:
                    values.add((instr.opcode, spec.name, spec.kind.to_text(value)))
    return opcodes, keys, values


def test_every_opcode_is_in_the_table():
    opcodes, _, _ = _table_contents()
    missing = [name for name, _ in OPCODES if name not in opcodes]
    assert not missing, f"opcodes in no round-trip row: {missing}"


def test_every_attribute_key_is_in_the_table():
    _, keys, _ = _table_contents()
    missing = [(opcode, key) for opcode, opdef in sorted(all_opdefs().items())
               for spec in opdef.attrs if not spec.in_parens for key in spec.keys
               if (opcode, key) not in keys and (opcode, key) not in UNPRINTED_KEYS]
    assert not missing, f"attribute keys printed by no round-trip row: {missing}"


def test_every_enumerated_value_is_in_the_table():
    _, _, values = _table_contents()
    missing = [(opcode, spec.name, text) for opcode, opdef in sorted(all_opdefs().items())
               for spec in opdef.attrs if isinstance(spec.kind, EnumKind)
               for text in spec.kind.by_text
               if (opcode, spec.name, text) not in values
               and (opcode, spec.name, text) not in UNPRINTED_VALUES
               and (opcode, spec.name) not in UNPRINTED_KEYS]
    assert not missing, f"attribute values in no round-trip row: {missing}"
