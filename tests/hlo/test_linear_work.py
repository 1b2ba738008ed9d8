"""Work linear in the program's length, pinned without a clock: the Python calls (function
and builtin calls, counted by a profile hook: deterministic for a given program) that
parsing, printing, verifying, the pass pipeline and the interpreter make on a chain of
10,000 elementwise instructions are ten times those on a chain of 1,000 (a quadratic step
would make them a hundred times). The CPU backend's compile is not covered: most of its
work is LLVM's, which a Python profile hook does not see."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.passes import make_pipeline
from xlapy.verifier import verify_module

_OPS = ("add", "multiply", "subtract", "maximum")


def chain(n: int) -> str:
    lines = ["HloModule chain", "ENTRY e {", "  p = f32[8] parameter(0)",
             "  q = f32[8] parameter(1)"]
    prev = "p"
    for i in range(n):
        lines.append(f"  a{i} = f32[8] {_OPS[i % len(_OPS)]}({prev}, q)")
        prev = f"a{i}"
    lines += [f"  ROOT r = f32[8] negate({prev})", "}"]
    return "\n".join(lines) + "\n"


def calls(step, *args) -> int:
    """How many Python and builtin calls ``step(*args)`` makes."""
    count = 0

    def hook(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(hook)
    try:
        step(*args)
    finally:
        sys.setprofile(None)
    return count


def _x():
    return np.ones(8, np.float32)


STEPS = {
    "parse": lambda text, module: parse_hlo_module(text),
    "print": lambda text, module: module.to_string(),
    "verify": lambda text, module: verify_module(module),
    "passes": lambda text, module: make_pipeline(["simplify", "cse", "dce", "fusion"]).run(
        module),
    "interpreter": lambda text, module: evaluate(module, _x(), _x()),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_work_grows_linearly_with_the_chain(step):
    run = STEPS[step]
    run(chain(10), parse_hlo_module(chain(10)))  # first-use work (caches, lookups) out of the way
    work = {}
    for n in (1_000, 10_000):
        text = chain(n)
        module = parse_hlo_module(text)
        work[n] = calls(run, text, module)
    ratio = work[10_000] / work[1_000]
    assert 9.0 <= ratio <= 11.0, f"{step}: {work} calls, ratio {ratio:.2f} (linear: 10)"
