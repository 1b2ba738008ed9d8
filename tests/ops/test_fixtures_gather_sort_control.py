"""Real XLA texts (tests/fixtures/jax, from jax/XLA:CPU before and after optimisation): every
instruction of this family's opcodes (gather, scatter, sort, topk, map, call, while,
conditional, fusion, scan, custom-call, async ops, copies, tokens, opt-barrier, constant)
parses, gets the declared shape from its rule, and prints its attributes as XLA did."""

import glob
import os
import re

import pytest

from xlapy.hlo.attrs.literal import CONSTANT_LITERAL
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.parser import parse_hlo_module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "jax")
FILES = sorted(glob.glob(os.path.join(FIXTURES, "*.hlo")))
OPCODES = {"gather", "scatter", "sort", "topk", "map", "call", "while", "conditional",
           "fusion", "scan", "custom-call", "async-start", "async-update", "async-done",
           "copy-start", "copy-done", "opt-barrier", "add-dependency", "after-all", "constant"}
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_NAME = re.compile(r"\s*(?:ROOT )?%?([\w.\-]+) = ")


def _without_stack_frames(text: str) -> str:
    """Drop the stack-frame tables and ids of post-optimisation dumps: debug data, not
    this family's concern."""
    out, skipping = [], False
    for line in text.splitlines():
        if line in _TABLES:
            skipping = True
            continue
        if skipping:
            skipping = bool(line.strip())
            if skipping:
                continue
        out.append(line)
    return re.sub(r", stack_frame_id=\d+", "", "\n".join(out))


def test_fixtures_are_there():
    assert len(FILES) >= 200


@pytest.mark.parametrize("path", FILES, ids=[os.path.basename(f) for f in FILES])
def test_fixture_attributes_print_as_xla(path):
    text = _without_stack_frames(open(path).read())
    module = parse_hlo_module(text)
    lines: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _NAME.match(line)
        if m:
            lines.setdefault(m.group(1), []).append(line.replace("%", ""))
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode not in OPCODES:
                continue
            if instr.opcode == "constant":
                literal = CONSTANT_LITERAL.to_text(instr.attrs["literal"])
                assert any(f"constant({literal})" in line for line in lines[instr.name])
                continue
            texts = [t.replace("%", "") for t in
                     attribute_texts(instr, HloPrintOptions.default())]
            expected = ", ".join(texts)
            assert any(expected in line for line in lines[instr.name]), (
                instr.name, expected, lines[instr.name])
