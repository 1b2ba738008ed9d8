"""Async syntax sugar (HloPrintOptions.syntax_sugar_async_ops, on by default as in XLA): an
async-start/-update/-done whose wrapped computation is one instruction (plus parameters)
prints as ``<op>-start(...)`` / ``-update`` / ``-done`` with the op's attributes, and its
computation is not printed; the parser reads the sugar back and builds the computation, as
XLA's parser does (texts and expectations from XLA's hlo_parser_test.cc where they exist)."""

from __future__ import annotations

import pytest
from roundtrip_rows_own import OWN_SHORT_ROWS
from roundtrip_rows_xla_other import ACCEPTED_ROWS

from xlapy.errors import ParseError
from xlapy.hlo.async_chain import (
    async_chain_start,
    async_wrapped_computation,
    can_expand_into_single_instruction,
    is_async_computation,
    split_async_sugar,
)
from xlapy.hlo.ir import Instruction
from xlapy.hlo.printer import HloPrintOptions, async_sugar_opcode, module_to_string
from xlapy.parser import parse_hlo_module
from xlapy.verifier import verify_module

SHORT = HloPrintOptions.short_parsable()
NO_SUGAR = HloPrintOptions(syntax_sugar_async_ops=False)
ACCEPTED = {name: text for name, text, _ in ACCEPTED_ROWS}
OWN = dict(OWN_SHORT_ROWS)

SUGARED = """HloModule sugar

ENTRY main {
  p = f32[4] parameter(0)
  start = ((f32[4]), f32[8], s32[]) custom-call-start(p), async_execution_thread="side", custom_call_target="foo"
  update = ((f32[4]), f32[8], s32[]) custom-call-update(start)
  ROOT done = f32[8] custom-call-done(update)
}
"""


def test_sugar_builds_the_wrapped_computation():
    module = parse_hlo_module(SUGARED)
    verify_module(module)
    done = module.entry.root
    update = done.operands[0]
    start = update.operands[0]
    assert (start.opcode, update.opcode, done.opcode) == ("async-start", "async-update", "async-done")
    comp = start.attrs["calls"]
    assert [i.name for i in comp.instructions] == ["async_param", "async_op"]
    assert comp.root.opcode == "custom-call" and str(comp.root.shape) == "f32[8]{0}"
    assert [str(p.shape) for p in comp.parameters] == ["f32[4]{0}"]
    assert comp.root.attrs["custom_call_target"] == "foo"
    assert comp.execution_thread == "side"  # the start's thread reaches the computation
    # update and done inherit the computation from the start
    assert async_wrapped_computation(update) is comp and async_wrapped_computation(done) is comp
    assert async_chain_start(done) is start
    assert is_async_computation(comp) and can_expand_into_single_instruction(comp)


def test_sugar_prints_back_and_hides_the_computation():
    module = parse_hlo_module(SUGARED)
    text = module_to_string(module, SHORT)
    assert 'custom-call-start(p), async_execution_thread="side", custom_call_target="foo"' in text
    assert "custom-call-update(start)\n" in text and "custom-call-done(update)\n" in text
    assert "async_wrapped" not in text
    assert [async_sugar_opcode(i) for i in module.entry.instructions] == [
        None, "custom-call-start", "custom-call-update", "custom-call-done"]


def test_without_sugar_the_computation_is_printed_and_reads_back_the_same():
    module = parse_hlo_module(SUGARED)
    plain = module_to_string(module, NO_SUGAR)
    assert "%async_wrapped (async_param: f32[4]) -> f32[8] {" in plain
    assert ('ROOT %async_op = f32[8]{0} custom-call(%async_param), custom_call_target="foo"\n}'
            ', execution_thread="side"') in plain
    assert ('%start = ((f32[4]{0}), f32[8]{0}, s32[]) async-start(%p), '
            'async_execution_thread="side", calls=%async_wrapped') in plain
    # async-update/-done print no calls= or thread (they are the chain's).
    assert "%update = ((f32[4]{0}), f32[8]{0}, s32[]) async-update(%start)\n" in plain
    again = parse_hlo_module(plain)
    assert module_to_string(again) == module_to_string(module)
    assert module_to_string(again, NO_SUGAR) == plain


def test_plain_async_text_of_one_instruction_prints_sugared():
    """After XLA's AsyncOpSharedComputation (which XLA at jaxlib 0.10.2's commit rejects: one
    async computation per async op), with a computation for each chain."""
    text = """HloModule AsyncOpTwoComputations

%async_wrapped.0 (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}

%async_wrapped.1 (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}

ENTRY %Entry (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start.0 = ((f32[10]{0}), f32[20]{0}, s32[]) async-start(f32[10]{0} %p0), calls=%async_wrapped.0
  %async-done.0 = f32[20]{0} async-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-start.0)
  %async-start.1 = ((f32[10]{0}), f32[20]{0}, s32[]) async-start(f32[10]{0} %p0), calls=%async_wrapped.1
  ROOT %async-done.1 = f32[20]{0} async-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-start.1)
}
"""
    module = parse_hlo_module(text)
    verify_module(module)
    text = module_to_string(module, SHORT)
    assert text.count('custom-call-start(p0), custom_call_target="foo"') == 2
    assert "async_wrapped" not in text


def test_async_computation_of_several_instructions_is_not_sugared():
    module = parse_hlo_module(OWN["AsyncComputationNotSugared"])
    start = module.entry.instruction("start")
    assert async_sugar_opcode(start) is None
    assert "async-start(p), calls=wrapped" in module_to_string(module, SHORT)


def test_custom_call_start_aliasing_belongs_to_the_custom_call():
    text = SUGARED.replace('async_execution_thread="side", ', "").replace("f32[8]", "f32[4]")
    text = text.replace('custom_call_target="foo"',
                        'custom_call_target="foo", output_to_operand_aliasing={{}: (0, {})}')
    module = parse_hlo_module(text)
    verify_module(module)
    start = module.entry.instruction("start")
    assert start.attrs["output_to_operand_aliasing"] == ()
    assert start.attrs["calls"].root.attrs["output_to_operand_aliasing"] != ()
    assert ('custom-call-start(p), custom_call_target="foo", '
            'output_to_operand_aliasing={{}: (0, {})}') in module_to_string(module, SHORT)


def test_attributes_of_async_ops_reach_the_wrapped_instruction():
    """XLA's AsyncInstructionWithAttributesShouldPropagateToWrappedInstruction."""
    module = parse_hlo_module("""HloModule test
ENTRY main {
  a = s32[] parameter(0), origin={{"v1"}}
  b = s32[] parameter(1), origin={{"v2"}}
  add-start = ((s32[], s32[]), s32[], s32[]) add-start(a, b),
              metadata={op_type="add" op_name="sample name" source_file="path/to/test.cc" source_line=68},
              backend_config="foo\\" bar",
              frontend_attributes={attr_a="test_a",attr_b="b"},
              statistics={visualizing_index=1,stat-1=33,stat-2=44}
  ROOT add-done = s32[] add-done(add-start), origin={{"v3"}}
}
""")
    verify_module(module)
    done = module.entry.root
    wrapped = async_wrapped_computation(done).root
    start = async_chain_start(done)
    assert wrapped.opcode == "add"
    assert wrapped.metadata.op_name == "sample name" and wrapped.metadata == start.metadata
    assert wrapped.backend_config == start.backend_config == 'foo" bar'
    assert wrapped.frontend_attributes == start.frontend_attributes == {"attr_a": "test_a",
                                                                         "attr_b": "b"}
    assert wrapped.extras["statistics"] == start.extras["statistics"]
    assert wrapped.extras["origin"] == done.extras["origin"] == '{{"v3"}}'


def test_frontend_attributes_of_the_done_print_on_the_start():
    """With no frontend attributes of its own, a sugared start prints the wrapped op's
    (XLA prints them among the wrapped op's attributes, before the start's sharding); here
    they came from the done, so the first print differs from the text, the second is fixed."""
    text = """HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  start = ((f32[4]), f32[4], u32[]) sqrt-start(p), sharding={replicated}
  ROOT done = f32[4] sqrt-done(start), frontend_attributes={tag="done"}
}
"""
    first = module_to_string(parse_hlo_module(text), SHORT)
    assert ('sqrt-start(p), frontend_attributes={tag="done"}, '
            'sharding={{replicated}, {replicated}, {replicated}}') in first
    second = module_to_string(parse_hlo_module(first), SHORT)
    assert ('sqrt-start(p), sharding={{replicated}, {replicated}, {replicated}}, '
            'frontend_attributes={tag="done"}') in second
    assert module_to_string(parse_hlo_module(second), SHORT) == second


def test_chain_found_through_transparent_intermediaries():
    """XLA's AsyncDoneWithTransparentIntermediaries: opt-barrier, tuple, get-tuple-element
    and copy between the start and the done."""
    module = parse_hlo_module(ACCEPTED["AsyncDoneWithTransparentIntermediaries"])
    done = module.entry.root
    start = module.entry.instruction("async-start")
    assert done.operands[0].opcode == "copy"
    assert async_chain_start(done) is start
    assert "ROOT async-done = f32[3,2]{1,0} custom-call-done(copy)" in module_to_string(module, SHORT)


def test_chain_found_across_a_while_loop():
    """XLA's LoopCrossingAsync: the update in the loop body continues the chain started
    before the loop, so it prints sugared; both forms read back to the same module."""
    module = parse_hlo_module(ACCEPTED["LoopCrossingAsync"])
    verify_module(module)
    update = module.computation("while_body").instruction("async_update")
    assert async_chain_start(update) is module.entry.instruction("async-start")
    sugared = module_to_string(module)
    assert "custom-call-update(%async_state)" in sugared
    for options in (HloPrintOptions(), NO_SUGAR):
        again = parse_hlo_module(module_to_string(module, options))
        verify_module(again)
        assert module_to_string(again) == sugared


@pytest.mark.parametrize("name,params,root_operands", [
    ("DesugarParsingTest_CustomCall_LateBinding", 2, 2),
    ("DesugarParsingTest_CallStart_Incomplete_Chain", 2, 2),
    ("DesugarParsingTest_CallStart_Incomplete_Binding", 2, 2),
    ("DesugarParsingTest_FusionStart_Incomplete_Chain", 2, 2),
    ("DesugarParsingTest_CallStart_MultipleUpdates", 2, 2),
    ("DesugarParsingTest_CallStart_MixedBinding", 2, 2),
    ("DesugarParsingTest_CustomCall_Incomplete_Chain", 0, 0),
])
def test_late_binding(name, params, root_operands):
    """XLA's DesugarParsingTest cases: the -start may bind fewer operands (or no output);
    -update binds the rest; call-start/fusion-start take the callee's parameters."""
    module = parse_hlo_module(ACCEPTED[name])
    root = module.entry.root
    comp = async_wrapped_computation(root)
    assert comp.num_parameters == params
    assert len(comp.root.operands) == root_operands


def test_late_bound_update_adds_operands():
    module = parse_hlo_module(ACCEPTED["DesugarParsingTest_CustomCall_LateBinding"])
    update = module.entry.root.operands[0]
    assert len(update.operands) == 3
    comp = async_wrapped_computation(update)
    assert str(comp.root.shape) == "s32[1024]{0}"  # the output the update bound
    assert comp.execution_thread == "parallel_thread"


def test_late_binding_copies_the_wrapped_op_with_instruction_clone(monkeypatch):
    """The wrapped op bound late is the old one copied by Instruction.clone (the one place an
    instruction's fields are copied) on the new operands and shape: every field kept."""
    text = ACCEPTED["DesugarParsingTest_CustomCall_LateBinding"].replace(
        'async_execution_thread="parallel_thread"',
        'async_execution_thread="parallel_thread", backend_config="cfg", '
        'frontend_attributes={k="v"}, metadata={op_name="op"}')
    cloned = []
    clone = Instruction.clone

    def recording_clone(self, *args, **kwargs):
        copy = clone(self, *args, **kwargs)
        cloned.append((self, copy))
        return copy

    monkeypatch.setattr(Instruction, "clone", recording_clone)
    module = parse_hlo_module(text)
    root = async_wrapped_computation(module.entry.root).root
    old = next(old for old, copy in cloned if copy is root)
    assert (len(old.operands), len(root.operands)) == (0, 2)
    assert (str(old.shape), str(root.shape)) == ("()", "s32[1024]{0}")
    assert root.backend_config == "cfg" and root.frontend_attributes == {"k": "v"}
    assert root.metadata.op_name == "op" and root.attr_specs == old.attr_specs
    assert root.attrs["custom_call_target"] == "foo"


@pytest.mark.parametrize("text,wrapped", [
    ("custom-call-start", ("async-start", "custom-call")),
    ("dot-update", ("async-update", "dot")),
    ("add", None),
])
def test_split_async_sugar(text, wrapped):
    assert split_async_sugar(text) == wrapped


def test_split_async_sugar_refuses_ops_with_their_own_async_opcodes():
    # all-gather-done is a real opcode (the parser looks opcodes up first); as sugar it is not.
    with pytest.raises(ValueError, match="all-gather has its own async opcodes"):
        split_async_sugar("all-gather-done")


def test_real_async_opcodes_are_not_sugar():
    module = parse_hlo_module(OWN["AllGatherStartDone"])
    assert [i.opcode for i in module.entry.instructions] == [
        "parameter", "all-gather-start", "all-gather-done"]
    assert all(async_sugar_opcode(i) is None for i in module.entry.instructions)


@pytest.mark.parametrize("opcode,message", [  # XLA's words, then why
    ("copy-update", r"Unknown opcode: copy-update \(copy has its own async opcodes"),
    ("constant-start", r"Unknown opcode: constant-start \(constant has no async-wrapped form\)"),
    ("async-start-start", r"Unknown opcode: async-start-start \(an async op cannot be"),
    ("frobnicate-start", r"expects async wrapped opcode but sees: frobnicate-start, error: "
                         r"Unknown opcode: frobnicate\n"),
])
def test_sugar_of_an_op_without_one_is_rejected(opcode, message):
    text = SUGARED.replace("custom-call-start", opcode)
    with pytest.raises(ParseError, match=message):
        parse_hlo_module(text)


def test_sugared_start_needs_its_shape():
    text = SUGARED.replace("start = ((f32[4]), f32[8], s32[]) custom", "start = custom")
    with pytest.raises(ParseError, match=r"Async op async-start must have an explicit shape "
                                         r"\(the sugared form custom-call-start builds"):
        parse_hlo_module(text)


def test_wrapped_op_errors_name_the_sugar():
    text = SUGARED.replace("custom-call-start(p), async_execution_thread=\"side\", "
                           "custom_call_target=\"foo\"", "negate-start(p)")
    with pytest.raises(ParseError, match=r"negate-start: negate: the given shape f32\[8\]\{0\} is "
                                         r"not compatible with the inferred shape f32\[4\]\{0\}"):
        parse_hlo_module(text)
