"""Suite-wide settings.

The CPU backend ships with XLA:CPU's numerics (bf16 excess precision, denormals flushed,
multiply-adds fused: docs/numerics.md). The suite compares the CPU backend against the
interpreter element by element, which checks that its kernels implement the HLO exactly; so
every test runs the CPU backend with the exact HLO semantics (the options off), except
where a test sets the options itself (tests/backends/cpu/test_cpu_numerics.py pins XLA:CPU's
defaults against real XLA:CPU). A test running ``xlapy run`` in process gets the CLI's
defaults for its run.

The disk cache's program entries (xlapy/backends/cpu/plan_cache.py: a module compiled
before is loaded with its plan, without planning) are off (``XLAPY_PLAN_CACHE=0``): tests
patch the planner (emitters, thresholds, hooks forcing a path), and a program stored by an
unpatched run would be loaded instead of the patched planning, or a patched plan stored for
later runs. tests/backends/cpu/test_cpu_disk_cache.py turns them on in directories of its
own. ``XLAPY_PLAN_CACHE=1 pytest ...`` runs the suite over stored programs instead (the
patching tests then fail or test nothing).
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _exact_cpu_numerics(monkeypatch):
    from xlapy.backends.cpu import backend

    monkeypatch.setitem(backend.DEFAULT_OPTIONS, "allow_excess_precision", False)
    monkeypatch.setitem(backend.DEFAULT_OPTIONS, "flush_denormals", False)
    monkeypatch.setitem(backend.DEFAULT_OPTIONS, "fma_contraction", False)
    from xlapy.backends import interpreter  # xlapy run --flush-denormals sets its default too

    monkeypatch.setitem(interpreter.DEFAULT_OPTIONS, "flush_denormals", False)


@pytest.fixture(autouse=True)
def _no_program_entries(monkeypatch):
    if os.environ.get("XLAPY_PLAN_CACHE") is None:
        monkeypatch.setenv("XLAPY_PLAN_CACHE", "0")
