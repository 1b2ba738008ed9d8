"""batch-norm-expander: batch-norm-inference/-training/-grad become elementwise ops,
broadcasts and sums. Not bit-exact (the interpreter computes batch norms in f64, the
expansion in f64 for f64 and f32 otherwise): results are compared with the interpreter's
within the computing type's roundings, on random inputs of every float type and feature
index, and the CPU backend compiles the expanded module whole."""

import numpy as np
import pytest
from pass_check import opcodes

import xlapy
from xlapy.backends.cpu import backend as be
from xlapy.passes import BatchNormExpander, make_pipeline
from xlapy.runtime import Client

OPS = {
    "inference": ("{T}[{D}]", ["{T}[{D}]", "{T}[{F}]", "{T}[{F}]", "{T}[{F}]", "{T}[{F}]"]),
    "training": ("({T}[{D}], {T}[{F}], {T}[{F}])", ["{T}[{D}]", "{T}[{F}]", "{T}[{F}]"]),
    "grad": ("({T}[{D}], {T}[{F}], {T}[{F}])",
             ["{T}[{D}]", "{T}[{F}]", "{T}[{F}]", "{T}[{F}]", "{T}[{D}]"]),
}
RTOL = {"f64": 1e-12, "f32": 2e-5, "bf16": 1e-2}


def _module(kind, t, dims, fi):
    result, operands = OPS[kind]
    fill = {"{T}": t, "{D}": ",".join(map(str, dims)), "{F}": str(dims[fi])}

    def sub(s):
        for k, v in fill.items():
            s = s.replace(k, v)
        return s

    params = "\n".join(f"  p{i} = {sub(s)} parameter({i})" for i, s in enumerate(operands))
    names = ", ".join(f"p{i}" for i in range(len(operands)))
    return (f"HloModule m\nENTRY e {{\n{params}\n  ROOT r = {sub(result)} "
            f"batch-norm-{kind}({names}), epsilon=0.001, feature_index={fi}\n}}\n")


def _args(module, seed):
    rng = np.random.default_rng(seed)
    out = []
    for k, p in enumerate(module.entry.parameters):
        dt = xlapy.shape.dtypes.to_dtype(p.shape.element_type)
        a = rng.standard_normal(tuple(p.shape.dimensions)) * 2 + 1
        if module.entry.root.opcode != "batch-norm-training" and k == 4 - (
                module.entry.root.opcode == "batch-norm-grad"):
            a = np.abs(a) + 0.1  # a variance
        out.append(a.astype(dt))
    return out


def _close(got, want, rtol):
    got = [np.asarray(g, np.float64) for g in (got if isinstance(got, tuple) else [got])]
    want = [np.asarray(w, np.float64) for w in (want if isinstance(want, tuple) else [want])]
    for g, w in zip(got, want):
        scale = max(1.0, float(np.max(np.abs(w))))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("kind", sorted(OPS))
@pytest.mark.parametrize("t", ["f32", "f64", "bf16"])
@pytest.mark.parametrize("dims,fi", [((4, 6), 1), ((3, 5, 2), 0), ((2, 3, 4, 5), 3)])
def test_expansion_matches_the_interpreter(kind, t, dims, fi):
    text = _module(kind, t, dims, fi)
    original = xlapy.parse_hlo_module(text)
    module = xlapy.parse_hlo_module(text)
    make_pipeline(["batch-norm-expander"]).run(module)  # verifies the result
    assert not any(op.startswith("batch-norm") for op in opcodes(module))
    for seed in (0, 1):
        args = _args(original, seed)
        _close(xlapy.evaluate(module, *args), xlapy.evaluate(original, *args), RTOL[t])


@pytest.mark.parametrize("kind", sorted(OPS))
def test_the_cpu_backend_compiles_batch_norms(kind):
    text = _module(kind, "f32", (8, 3, 5), 1)
    module = xlapy.parse_hlo_module(text)
    assert be.compile_module(module).interpreted() == []
    args = _args(module, 3)
    _close(Client(backend="cpu").compile(module)(*args), xlapy.evaluate(module, *args),
           RTOL["f32"])


def test_empty_operands_stay():
    text = _module("training", "f32", (0, 3), 1)
    m = xlapy.parse_hlo_module(text)
    assert not BatchNormExpander().run(m)
