"""Real XLA:CPU as a backend and as the reference (xlapy.backends.xla): the ``xla`` runtime
backend reproduces the jax fixtures' outputs (integers bit for bit, floats within the golden
tolerances: the fixtures were dumped on another host), xlapy.compare reports per output
and bisects a difference to the instruction that causes it, with XLA's values."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
pytest.importorskip("google.protobuf")

import xlapy  # noqa: E402
from xlapy.backends.base import BACKENDS, register_backend  # noqa: E402
from xlapy.backends.interpreter import InterpreterBackend, InterpreterProgram  # noqa: E402
from xlapy.backends.xla import XlaReferenceError, run_on_xla, xla_values  # noqa: E402
from xlapy.interpreter.evaluator import EvalContext  # noqa: E402
from xlapy.interpreter.values import flatten  # noqa: E402
from xlapy.npz import load_npz  # noqa: E402
from xlapy.tools.compare import (  # noqa: E402
    Tolerance,
    bisect,
    evaluate_recording,
)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "interpreter"))
from golden import assert_close  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "jax")
# Deterministic programs of the corpus (no rng, no LAPACK sign choices): XLA:CPU recomputing
# them from their HLO gives what it gave when the fixtures were dumped: integers exactly,
# floats within the golden tolerances (tests/interpreter/golden.py). Not within a few ulps:
# another host's vector width and GEMM kernel sum a dot in another order, and an output that
# cancels (an f32 dot near 0, a convolution) is then many of its own ulps away (96 ulps,
# 8e-6 relative, on an AVX-512 host against fixtures dumped on an AVX2 one).
DETERMINISTIC = ["mlp_forward", "softmax", "while_loop", "sort_multi_operand", "gather", "scatter_add",
         "conv2d_nhwc", "reduce_window_dilated", "int_div_rem", "convert_narrow_inputs",
         "narrow_float_arith", "complex_arith", "x64_types", "cond", "nested_outputs"]


def _fixture(name):
    with open(os.path.join(FIXTURES, f"{name}.pre.hlo"), encoding="utf-8") as f:
        module = xlapy.parse_hlo_module(f.read())
    data = load_npz(os.path.join(FIXTURES, f"{name}.npz"))
    args = [data[f"arg{i}"] for i in range(len(module.entry.parameters))]
    outs = [data[f"out{i}"] for i in range(len([k for k in data if k.startswith("out")]))]
    return module, args, outs


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_xla_backend_reproduces_the_fixtures(name):
    module, args, outs = _fixture(name)
    result = xlapy.Client(backend="xla").compile(module)(*args)
    got = [np.asarray(v) for v in flatten(result)]
    shapes = [s for _, s in module.entry.root.shape.leaves()] \
        if module.entry.root.shape.is_tuple() else [module.entry.root.shape]
    assert len(got) == len(outs) == len(shapes)
    for g, w, shape in zip(got, outs, shapes):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert_close(g, w, f"{name} {shape}")


def test_tuple_parameters_and_nested_results_are_flattened():
    module = xlapy.parse_hlo_module("""HloModule m
ENTRY e {
  p = (f32[2], (s32[], f32[3])) parameter(0)
  a = f32[2] get-tuple-element(p), index=0
  i = (s32[], f32[3]) get-tuple-element(p), index=1
  n = f32[2] negate(a)
  ROOT t = ((f32[2], (s32[], f32[3])), f32[2]) tuple(p, n)
}""")
    arg = (np.array([1, 2], np.float32), (np.array(7, np.int32), np.ones(3, np.float32)))
    result = run_on_xla(module, [arg])
    np.testing.assert_array_equal(result[1], [-1, -2])
    assert int(result[0][1][0]) == 7 and result[0][1][1].shape == (3,)


def test_post_optimization_modules_and_several_devices_are_refused():
    with open(os.path.join(FIXTURES, "mlp_forward.post.hlo"), encoding="utf-8") as f:
        post = xlapy.parse_hlo_module(f.read())
    with pytest.raises(XlaReferenceError, match="compiles modules before XLA's optimizations"):
        run_on_xla(post, [])
    two = xlapy.parse_hlo_module("HloModule m, replica_count=2\n"
                                 "ENTRY e { ROOT r = u32[] replica-id() }")
    with pytest.raises(XlaReferenceError, match="runs one device; m has 2 replicas"):
        run_on_xla(two, [])


def test_xla_values_are_every_instruction_in_context():
    module, args, _ = _fixture("mlp_forward")
    values = xla_values(module, args)
    _, reference = evaluate_recording(module, args)
    for instr in module.entry.instructions:
        np.testing.assert_allclose(np.asarray(values[id(instr)], np.float64),
                                   np.asarray(reference[id(instr)], np.float64),
                                   rtol=1e-5, atol=1e-6)


@pytest.fixture
def tanh_off():
    """The interpreter with tanh's result off by 0.25: a backend to be caught."""

    class Ctx(EvalContext):
        def run_instruction(self, instr, args):
            out = super().run_instruction(instr, args)
            return (out + np.float32(0.25)).astype(out.dtype) if instr.opcode == "tanh" else out

    class Program(InterpreterProgram):
        def run(self, args, options):
            return Ctx(self.module, options).call(self.module.entry, list(args))

    class Backend(InterpreterBackend):
        def compile(self, module):
            super().compile(module)
            return Program(module)

    register_backend("tanh-off", Backend)
    yield "tanh-off"
    BACKENDS.pop("tanh-off", None)


def _net(params, x):
    h = jnp.tanh(x @ params["w"])
    return {"y": h * 2.0, "norm": jnp.sqrt((x * x).sum())}


def _args():
    rng = np.random.default_rng(3)
    return ({"w": rng.standard_normal((3, 4)).astype(np.float32)},
            rng.standard_normal((2, 3)).astype(np.float32))


def test_compare_reports_every_output():
    report = xlapy.compare(_net, *_args())
    assert report.ok and report.divergence is None
    text = str(report)
    assert text.startswith("compare jit__net: cpu against XLA:CPU (abs error 0.001, "
                           "rel error 0.001)")
    assert "  out['norm'] f32[]: max abs error" in text and "  out['y'] f32[2,4]: " in text
    assert "max ulp error" in text and text.endswith("OK: 2 outputs within the tolerances")


def test_compare_bisects_to_the_faulty_instruction(tanh_off):
    report = xlapy.compare(_net, *_args(), backend=tanh_off)
    assert not report.ok
    assert [leaf.ok for leaf in report.outputs] == [True, False]  # norm, y
    assert report.divergence.instruction.opcode == "tanh"
    text = str(report)
    assert "MISMATCH: 1 of 2 outputs differ" in text
    assert "first divergent instruction" in text and " tanh(" in text
    assert "operand 0 %" in text  # XLA's value of the dot feeding it, summarised
    assert "max abs error 0.25" in text
    assert f"\n  {tanh_off}: f32[2,4] min=" in text and "\n  xla: f32[2,4] min=" in text


def test_bisect_with_xla_as_the_reference(tanh_off):
    module, args, _ = _fixture("transcendental")
    found = bisect(module, args, tanh_off, "xla", Tolerance())
    assert found is not None and found.instruction.opcode == "tanh"
    assert bisect(module, args, "interpreter", "xla", Tolerance(1e-5, 1e-5)) is None
