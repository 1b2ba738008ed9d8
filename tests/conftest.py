"""Suite-wide settings.

The CPU backend ships with XLA:CPU's numerics (bf16 excess precision, denormals flushed:
docs/numerics.md). The suite compares the CPU backend against the interpreter element by
element, which checks that its kernels implement the HLO exactly; so every test runs the
CPU backend with the exact HLO semantics (both options off), except where a test sets the
options itself (tests/backends/cpu/test_cpu_numerics.py pins XLA:CPU's defaults against
real XLA:CPU). A test running ``xlapy run`` in process gets the CLI's defaults for its run.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _exact_cpu_numerics(monkeypatch):
    from xlapy.backends.cpu import backend

    monkeypatch.setitem(backend.DEFAULT_OPTIONS, "allow_excess_precision", False)
    monkeypatch.setitem(backend.DEFAULT_OPTIONS, "flush_denormals", False)
    from xlapy.backends import interpreter  # xlapy run --flush-denormals sets its default too

    monkeypatch.setitem(interpreter.DEFAULT_OPTIONS, "flush_denormals", False)
