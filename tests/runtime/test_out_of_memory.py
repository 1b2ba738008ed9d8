"""A buffer too large to allocate is XLA's RESOURCE_EXHAUSTED ("Out of memory allocating N
bytes"): a ResourceExhaustedError naming the instruction, the buffer's shape and its bytes,
on every backend, never a bare MemoryError. Sizes above any x86-64 address space (4 EiB) so
the allocation fails on every host whatever its overcommit policy."""

import numpy as np
import pytest

import xlapy
from xlapy.errors import ResourceExhaustedError, XlaError
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape
from xlapy.shape.literal import Literal

BACKENDS = ["interpreter", "cpu"]
HUGE = "f32[1073741824,1073741824]"  # 2**62 bytes
HUGE_BYTES = 2**62


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_result_is_resource_exhausted(backend):
    text = f"""HloModule m
ENTRY e {{
  z = f32[] constant(0)
  ROOT b = {HUGE} broadcast(z), dimensions={{}}
}}"""
    with pytest.raises(ResourceExhaustedError) as info:
        xlapy.Client(backend=backend).compile(text)()
    err = info.value
    assert isinstance(err, XlaError) and isinstance(err, MemoryError)
    assert err.nbytes == HUGE_BYTES
    assert f"out of memory allocating {HUGE_BYTES} bytes (4.0 EiB) for {HUGE}" in str(err)
    name = "%b" if backend == "interpreter" else "%fusion"  # cpu fuses the broadcast
    assert str(err).startswith(f"{name} = {HUGE}{{1,0}} ")


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_padding_is_resource_exhausted(backend):
    text = """HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  z = f32[] constant(0)
  ROOT p = f32[1152921504606846976] pad(x, z), padding=0_1152921504606846974
}"""
    with pytest.raises(ResourceExhaustedError, match=f"out of memory allocating {HUGE_BYTES} "
                       f"bytes \\(4.0 EiB\\) for f32\\[1152921504606846976\\]"):
        xlapy.Client(backend=backend).compile(text)(np.ones(2, np.float32))


def test_literal_zeros_out_of_memory():
    with pytest.raises(ResourceExhaustedError, match=f"Literal.zeros: out of memory allocating "
                       f"{HUGE_BYTES} bytes \\(4.0 EiB\\) for {HUGE.replace('[', '.')}"):
        Literal.zeros(parse_shape(HUGE))


def test_elided_constant_takes_no_memory():
    module = parse_hlo_module(f"HloModule m\nENTRY e {{\n  ROOT c = {HUGE} constant({{...}})\n}}")
    assert module.entry.root.attrs["literal"].elided
    assert "constant({...})" in module.to_string()
