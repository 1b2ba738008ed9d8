"""Completeness: every opcode has its NumPy kernel (parameter is bound by the evaluator)."""

from xlapy.hlo.opcodes import OPCODES
from xlapy.interpreter.registry import get_kernel
from xlapy.opdefs import get_opdef


def test_every_opcode_has_a_kernel():
    missing = [name for name, _ in OPCODES if name != "parameter" and get_kernel(name) is None]
    assert missing == []


def test_kernels_live_in_the_interpreter_only():
    # The op definitions hold no kernel: the interpreter's table is the one place.
    opdef = get_opdef("add")
    assert not hasattr(opdef, "kernel") and get_kernel("add") is not None
