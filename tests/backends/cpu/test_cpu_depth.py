"""The CPU backend on deep and long programs, on Python's default recursion limit, against
the interpreter bit for bit: a 2,000-op fused elementwise chain (element generators walk
the fused DAG with a stack; fusions are cut at MAX_FUSION_SIZE), values nested 1,000
tuples deep, a 2,000-deep call chain, nested conditionals and while loops (plans run on a
stack of frames; compiled whiles nest at most MAX_NATIVE_DEPTH deep), and a reducer
calling a deep chain of computations inlined into a reduction kernel."""

import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import control_flow as cf
from xlapy.backends.cpu import reduction
from xlapy.backends.cpu.jit import get_jit
from xlapy.backends.cpu.scalar_computation import supports_computation
from xlapy.interpreter import evaluate
from xlapy.interpreter.values import flatten
from xlapy.parser import parse_hlo_module
from xlapy.passes.fusion import MAX_FUSION_SIZE
from xlapy.runtime import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "interpreter"))
from test_depth_eval import nested_whiles  # noqa: E402 - the interpreter's deep modules


@pytest.fixture(autouse=True)
def _default_recursion_limit():
    assert sys.getrecursionlimit() <= 1000  # nothing here may lean on a raised limit


def nested(depth: int, leaf: str = "f32[2]") -> str:
    return "(" * depth + leaf + ")" * depth


def same(got, want) -> None:
    got, want = flatten(got), flatten(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


def compile_cpu(module):
    return Client(backend="cpu").compile(module)


def test_elementwise_chain_of_2000_ops():
    n = 2000
    lines = ["HloModule chain", "ENTRY e {", "  x0 = f32[1000] parameter(0)",
             "  c = f32[] constant(1.0001)", "  cb = f32[1000] broadcast(c), dimensions={}"]
    ops = ["add", "multiply", "subtract", "maximum", "minimum"]
    for i in range(1, n + 1):
        lines.append(f"  {'ROOT ' if i == n else ''}x{i} = f32[1000] {ops[i % 5]}(x{i - 1}, cb)")
    module = parse_hlo_module("\n".join(lines + ["}"]))
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    x[::7] = np.nan
    same(compile_cpu(module)(x), evaluate(module, x))
    # one kernel per MAX_FUSION_SIZE instructions of the chain, none interpreted
    steps = be.compile_module(module).entry.steps
    kernels = [s for s in steps if isinstance(s, be.KernelStep)]
    # each fusion: MAX_FUSION_SIZE - 2 ops of the chain, its constant and broadcast copies
    assert len(kernels) == -(-n // (MAX_FUSION_SIZE - 2))
    assert not any(isinstance(s, be.InterpretStep) for s in steps)


def test_tuples_nested_1000_deep():
    depth = 1000
    lines = ["HloModule t", "ENTRY e {", f"  p = {nested(depth)} parameter(0)"]
    prev, shape = "p", nested(depth)
    for k in range(depth):
        shape = shape[1:-1]
        lines.append(f"  g{k} = {shape} get-tuple-element({prev}), index=0")
        prev = f"g{k}"
    lines += [f"  n = f32[2] negate({prev})", f"  ROOT r = ({nested(depth)}, f32[2]) tuple(p, n)",
              "}"]
    module = parse_hlo_module("\n".join(lines), max_recursion_depth=depth + 2)
    value = np.float32([1.5, -2])
    for _ in range(depth):
        value = (value,)
    same(compile_cpu(module)(value), evaluate(module, value))


def test_call_chain_of_depth_2000():
    depth = 2000
    out = ["HloModule calls", "fn0 {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] add(p, p)\n}"]
    for i in range(1, depth + 1):
        out.append(f"fn{i} {{\n  p = f32[4] parameter(0)\n"
                   f"  ROOT r = f32[4] call(p), to_apply=fn{i - 1}\n}}")
    out.append(f"ENTRY e {{\n  p = f32[4] parameter(0)\n"
               f"  ROOT r = f32[4] call(p), to_apply=fn{depth}\n}}")
    module = parse_hlo_module("\n".join(out))
    x = np.float32([1, -2, 3.5, 0])
    same(compile_cpu(module)(x), x + x)


def test_conditionals_nested_2000_deep():
    depth = 2000
    out = ["HloModule conds",
           ("l0 {\n  p = (s32[], f32[4]) parameter(0)\n  x = f32[4] get-tuple-element(p), index=1\n"
           "  ROOT r = f32[4] add(x, x)\n}"),
           ("neg {\n  p = (s32[], f32[4]) parameter(0)\n  x = f32[4] get-tuple-element(p), index=1\n"
           "  ROOT r = f32[4] negate(x)\n}")]
    for k in range(1, depth + 1):
        out.append(f"l{k} {{\n  p = (s32[], f32[4]) parameter(0)\n"
                   f"  i = s32[] get-tuple-element(p), index=0\n"
                   f"  ROOT r = f32[4] conditional(i, p, p), branch_computations={{l{k - 1}, neg}}\n}}")
    out.append(f"ENTRY e {{\n  i = s32[] parameter(0)\n  x = f32[4] parameter(1)\n"
               f"  p = (s32[], f32[4]) tuple(i, x)\n"
               f"  ROOT r = f32[4] conditional(i, p, p), branch_computations={{l{depth}, neg}}\n}}")
    module = parse_hlo_module("\n".join(out))
    program = compile_cpu(module)
    x = np.float32([1, -2, 3.5, 0])
    for index in (0, 1, 5):
        same(program(np.int32(index), x), evaluate(module, np.int32(index), x))


def test_while_loops_nested_deeper_than_the_native_limit():
    depth = cf.MAX_NATIVE_DEPTH + 8
    module = parse_hlo_module(nested_whiles(
        depth, "h = f32[] constant(1.25)\n  hb = f32[4] broadcast(h), dimensions={}\n"
        "  x1 = f32[4] multiply(x, hb)"))
    x = np.float32([1, -2, 3.5, 0])
    same(compile_cpu(module)(x), evaluate(module, x))
    program = be.compile_module(module)
    native = [k for k in program.kernels if isinstance(k, cf.CompiledWhileStep)]
    assert len(native) == cf.MAX_NATIVE_DEPTH  # the innermost loops; the outer ones in Python
    assert sorted(k.depth for k in native) == list(range(1, cf.MAX_NATIVE_DEPTH + 1))
    assert any(isinstance(s, be.WhileStep) for s in program.entry.steps)


def test_reduction_kernel_inlines_a_reducer_calling_a_deep_chain():
    depth = 1500
    out = ["HloModule r", ("sum0 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
           "  m = f32[] maximum(a, b)\n  ROOT s = f32[] add(m, b)\n}")]
    for k in range(1, depth + 1):
        out.append(f"sum{k} {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                   f"  ROOT s = f32[] call(a, b), to_apply=sum{k - 1}\n}}")
    out.append(f"ENTRY e {{\n  x = f32[4,3] parameter(0)\n  z = f32[] constant(0)\n"
               f"  ROOT r = f32[4] reduce(x, z), dimensions={{1}}, to_apply=sum{depth}\n}}")
    module = parse_hlo_module("\n".join(out))
    reducer = module.computation(f"sum{depth}")
    assert supports_computation(reducer)
    from llvmlite import ir
    irmod = ir.Module(name="deep_reducer")
    root = module.entry.root
    spec = reduction.emit(irmod, "k0", root, [module.entry.parameters[0]])
    compiled = get_jit().compile(irmod, use_disk_cache=False)
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    got = _run_reduction(spec, compiled, x)
    same(got, evaluate(module, x))


def _run_reduction(spec, compiled, x):
    import ctypes

    from xlapy.shape import dtypes
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    outs = [np.zeros(tuple(s.dimensions), dtypes.to_dtype(s.element_type))
            for s in spec.outputs]
    scratch = [np.zeros(n, dt) for dt, n in spec.scratch]
    held = [np.ascontiguousarray(x)] + outs + scratch
    bufs = (ctypes.c_void_p * len(held))(*[a.ctypes.data for a in held])
    s = spec
    while s is not None:
        proto(compiled.function_address(s.name))(bufs, 0, s.domain)
        s = s.then
    return outs[0]


def test_associative_scan_levels_compile_and_match():
    # twelve levels of strided even/odd slices and adds (lax.associative_scan's up-sweep):
    # fusion bounds how often a level is regenerated, so the kernels stay small
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "passes"))
    from test_fusion import _halving_sums

    module = parse_hlo_module(_halving_sums(12))
    x = np.random.default_rng(0).standard_normal((4, 4096)).astype(np.float32)
    same(compile_cpu(module)(x), evaluate(module, x))
    steps = be.compile_module(module).entry.steps
    assert not any(isinstance(s, be.InterpretStep) for s in steps)
