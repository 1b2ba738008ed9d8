"""Completeness: every opcode of XLA's opcode table has its definition and shape rule."""

from xlapy.hlo.opcodes import ARITY, OPCODES
from xlapy.opdefs import all_opdefs


def test_every_opcode_has_an_opdef():
    defs = all_opdefs()
    missing = [name for name, _ in OPCODES if name not in defs]
    assert missing == [], f"opcodes without an OpDef: {missing}"


def test_every_opdef_has_a_shape_rule_doc_and_xla_arity():
    for name, opdef in all_opdefs().items():
        assert callable(opdef.shape_rule), name
        assert opdef.arity == ARITY[name], name
        assert opdef.doc, f"{name} has no docstring"


def test_attribute_keys_are_unique_per_opcode():
    for name, opdef in all_opdefs().items():
        keys = [k for spec in opdef.attrs for k in spec.keys]
        assert len(keys) == len(set(keys)), (name, keys)


def test_opcode_table_is_xla_s():
    names = [n for n, _ in OPCODES]
    assert len(names) == len(set(names))
    for spelling in ("get-tuple-element", "round-nearest-even", "exponential", "cosine",
                     "count-leading-zeros", "opt-barrier", "popcnt", "log-plus-one",
                     "stochastic-convert", "partition-id", "topk", "add-dependency",
                     "collective-permute-done", "copy-start", "async-update", "send-done"):
        assert spelling in names
