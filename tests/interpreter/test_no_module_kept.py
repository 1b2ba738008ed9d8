"""The interpreter keeps nothing alive: after evaluating a module and dropping it, no module,
computation or constant of it survives a garbage collection (a long-running process
evaluating many distinct modules stays bounded)."""

import gc
import weakref

import numpy as np

from xlapy import XlaBuilder, ops, parse_shape
from xlapy.interpreter import evaluate

_N = 262_144  # 1 MB of f32


def _module(k: int):
    """A module with a 1 MB constant and a reduce (whose to_apply goes through the
    interpreter's vectorisable check): sum(x + c), c a constant array of k."""
    add = XlaBuilder(f"add{k}")
    ops.Add(ops.Parameter(add, 0, parse_shape("f32[]")), ops.Parameter(add, 1, parse_shape("f32[]")))
    b = XlaBuilder(f"m{k}")
    x = ops.Parameter(b, 0, parse_shape(f"f32[{_N}]"))
    c = ops.Constant(b, np.full(_N, k, np.float32))
    ops.Reduce(ops.Add(x, c), ops.ConstantR0(b, 0.0), add.build(), [0])
    return b.build().as_hlo_module()


def test_evaluating_many_modules_keeps_none_alive():
    x = np.zeros(_N, np.float32)
    refs = []
    for k in range(40):
        module = _module(k)
        got = evaluate(module, x)
        assert float(np.asarray(got)) == float(k) * _N
        refs.append(weakref.ref(module))
        refs.extend(weakref.ref(c) for c in module.computations)
        del module, got
    gc.collect()
    alive = [r() for r in refs if r() is not None]
    assert not alive, f"{len(alive)} modules/computations still alive after evaluation"
