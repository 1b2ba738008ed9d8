"""Where XLA:CPU's answers are not the exact HLO even with ``--xla_allow_excess_precision=false``
(docs/numerics.md): on a bf16 layernorm + gelu, XLA:CPU's reductions (its YNNPACK fusions)
sum the squares of ``(x - m) ** 2`` unrounded, skipping the bf16 rounding the HLO asks for
before the f32 variance sum, with the flag on or off. Fixture: tests/fixtures/numerics
(tools/gen_numerics_fixtures.py, real XLA:CPU of jaxlib 0.10.2, both flag settings)."""

from __future__ import annotations

import os
import re

import numpy as np

from xlapy import Client
from xlapy.interpreter import evaluate
from xlapy.npz import load_npz
from xlapy.parser import parse_hlo_module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "numerics")


def _load():
    with open(os.path.join(FIXTURES, "bf16_layernorm_gelu.hlo")) as f:
        text = f.read()
    return text, load_npz(os.path.join(FIXTURES, "bf16_layernorm_gelu.npz"))


def _differing(a, b) -> int:
    return int((np.asarray(a).reshape(-1).view(np.uint16)
                != np.asarray(b).reshape(-1).view(np.uint16)).sum())


def _square_unrounded(text: str) -> str:
    """The module with the bf16 square feeding the variance's f32 reduce computed in f32."""
    pattern = (r"  (\S+) = bf16\[64,256\]\{1,0\} multiply\((\S+), \2\)\n"
               r"  (\S+) = f32\[64,256\]\{1,0\} convert\(\1\)\n")
    match = re.search(pattern, text)
    assert match, "the fixture's variance square"
    _, operand, converted = match.groups()
    return text.replace(match.group(0), (
        f"  {operand}.f32 = f32[64,256]{{1,0}} convert({operand})\n"
        f"  {converted} = f32[64,256]{{1,0}} multiply({operand}.f32, {operand}.f32)\n"))


def test_xla_without_excess_precision_still_skips_the_rounding_before_the_variance_sum():
    text, arrays = _load()
    x, default, strict = arrays["arg0"], arrays["out0"], arrays["strict0"]
    exact = evaluate(parse_hlo_module(text), x)
    assert _differing(default, strict) == 0  # the flag changes nothing on this program
    assert _differing(exact, strict) > 100  # so the exact HLO is not XLA's answer here
    unrounded = evaluate(parse_hlo_module(_square_unrounded(text)), x)
    assert _differing(unrounded, strict) == 0  # that one rounding is the whole difference


def test_the_cpu_backends_default_is_xla_cpus_answer():
    text, arrays = _load()
    options = {"allow_excess_precision": True, "flush_denormals": True}
    got = Client(backend="cpu", backend_options=options).compile(text)(arrays["arg0"])
    assert _differing(got, arrays["out0"]) == 0
