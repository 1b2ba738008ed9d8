"""Helpers of the runtime tests: HLO text around an entry body, run it on several devices,
compare arrays exactly."""

import numpy as np

from xlapy.runtime import Client

ADD = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""


def hlo(body: str, comps: str = ADD, header: str = "") -> str:
    """A module whose entry computation is ``body`` (instruction lines)."""
    return f"HloModule m{header}\n{comps}\nENTRY e {{\n{body}\n}}\n"


def run(text, inputs: list, replicas=None, partitions=None, timeout=5.0, client=None):
    """Compile ``text`` and execute it with ``inputs[k]`` (one argument list per device)."""
    client = client or Client(timeout=timeout)
    exe = client.compile(text, replicas=replicas, partitions=partitions)
    return exe.execute(inputs)


def f32(*values):
    return np.array(values, np.float32)


def same(got, want):
    """Same dtype, shape and bits."""
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)
