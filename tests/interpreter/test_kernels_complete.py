"""Completeness: every opcode has its NumPy kernel (parameter is bound by the evaluator)."""

from xlapy.hlo.opcodes import OPCODES
from xlapy.interpreter.registry import get_kernel
from xlapy.opdefs import get_opdef


def test_every_opcode_has_a_kernel():
    missing = [name for name, _ in OPCODES if name != "parameter" and get_kernel(name) is None]
    assert missing == []


def test_kernels_are_attached_to_their_opdefs():
    for name, _ in OPCODES:
        if name != "parameter":
            assert get_opdef(name).kernel is get_kernel(name), name
