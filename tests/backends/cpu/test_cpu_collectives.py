"""The CPU backend's collectives (xlapy/backends/cpu/collectives.py) against the interpreter,
on threads: every collective, replicas and partitions, list and iota groups, every reduction
op over the element types, scalars, zero-sized operands, operands crossing the split
threshold, inside compiled loops - bit for bit; the native path is the one that ran (the
generic path is made to fail for in-process runs); errors read as the interpreter's."""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import collectives as co
from xlapy.backends.cpu import control_flow as cf
from xlapy.backends.cpu.backend import clear_cache
from xlapy.interpreter.custom_calls import unregister_custom_call
from xlapy.runtime import Client, ExecutionError

RNG = np.random.default_rng(20260)

TYPES = {
    "f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16,
    "s8": np.int8, "s32": np.int32, "u32": np.uint32, "pred": np.bool_, "c64": np.complex64,
}
OPS = {
    "float": ("add", "multiply", "maximum", "minimum"),
    "int": ("add", "multiply", "maximum", "minimum", "and", "or", "xor"),
    "pred": ("and", "or", "xor", "maximum", "minimum"),
    "complex": ("add", "multiply"),
}


def kind(t: str) -> str:
    if t == "pred":
        return "pred"
    if t == "c64":
        return "complex"
    return "int" if t[0] in "su" else "float"


def values(t: str, shape, seed_shift: int = 0) -> np.ndarray:
    dt = TYPES[t]
    shape = tuple(shape)
    k = kind(t)
    if k == "pred":
        return RNG.random(shape) < 0.5
    if k == "int":
        info = np.iinfo(dt)
        return RNG.integers(info.min, info.max, shape, dtype=np.int64, endpoint=True).astype(dt)
    if k == "complex":
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dt)
    # spread magnitudes so sums depend on their order; some NaNs and signed zeros
    x = RNG.standard_normal(shape) * 10.0 ** RNG.integers(-3, 4, shape)
    flat = x.reshape(-1)
    if flat.size > 8:
        flat[:3] = (np.nan, -0.0, 0.0)
    return x.astype(dt)


def module(body: str, comps: str = "", header: str = "") -> str:
    return f"HloModule m{header}\n{comps}\nENTRY e {{\n{body}\n}}\n"


def reducer(name: str, t: str, op: str) -> str:
    return f"""{name} {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  ROOT r = {t}[] {op}(x, y)
}}
"""


@pytest.fixture
def native_only(monkeypatch):
    """Fail when an in-process run takes the generic path of a collective with native code."""
    original = co.CollectiveStep.compute

    def compute(self, vals, plan_ctx):
        if self.index is not None and co._in_process(plan_ctx):
            raise AssertionError(f"{self.instr.name}: generic path in an in-process run")
        return original(self, vals, plan_ctx)

    monkeypatch.setattr(co.CollectiveStep, "compute", compute)


def both(text: str, inputs: list, replicas: int = 1, partitions: int = 1):
    """(cpu results, interpreter results) of ``text`` on threads, and the cpu executable."""
    cpu = Client(timeout=20).compile(text, replicas=replicas, partitions=partitions)
    ref = Client(backend="interpreter", timeout=20).compile(text, replicas=replicas,
                                                           partitions=partitions)
    return cpu.execute(inputs), ref.execute(inputs), cpu


def leaves(v) -> list:
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in leaves(e)]
    return [np.asarray(v)]


def same_bits(got, want):
    g, w = leaves(got), leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        assert a.tobytes() == b.tobytes(), (a, b)


def steps_of(program):
    out, seen, stack = [], set(), [program.entry]
    while stack:
        plan = stack.pop()
        for step in plan.steps:
            out.append(step)
            for sub in [getattr(step, "cond", None), getattr(step, "body", None),
                        *(getattr(step, "branches", None) or ())]:
                if sub is not None and id(sub) not in seen:
                    seen.add(id(sub))
                    stack.append(sub)
    return out


def native_steps(exe) -> list:
    return [s for s in steps_of(exe.program)
            if isinstance(s, co.CollectiveStep) and s.form is not None]


def check(text, inputs, replicas=1, partitions=1, native=None):
    got, want, exe = both(text, inputs, replicas, partitions)
    for g, w in zip(got, want):
        same_bits(g, w)
    if native is not None:
        assert len(native_steps(exe)) == native, [s.instr.name for s in steps_of(exe.program)]
    return got, exe


# -- all-reduce: every op and element type ------------------------------------------------------


@pytest.mark.parametrize("t", sorted(TYPES))
def test_all_reduce_every_op_bit_for_bit(t, native_only):
    ops = OPS[kind(t)]
    comps = "".join(reducer(f"r_{op}", t, op) for op in ops)
    lines = [f"  x = {t}[5,7] parameter(0)", f"  s = {t}[] parameter(1)"]
    names = []
    for op in ops:
        lines.append(f"  a_{op} = {t}[5,7] all-reduce(x), replica_groups={{}}, to_apply=r_{op}")
        lines.append(f"  b_{op} = {t}[] all-reduce(s), replica_groups={{{{2,0}},{{1}}}}, "
                     f"to_apply=r_{op}")
        names += [f"a_{op}", f"b_{op}"]
    shapes = ", ".join(f"{t}[5,7]" if n.startswith("a") else f"{t}[]" for n in names)
    lines.append(f"  ROOT out = ({shapes}) tuple({', '.join(names)})")
    inputs = [[values(t, (5, 7)), values(t, ())] for _ in range(3)]
    check(module("\n".join(lines), comps), inputs, replicas=3, native=2 * len(ops))


def test_all_reduce_any_reduction_computation_in_group_order(native_only):
    # not one op: y * 2 + x (not commutative: the group order decides)
    comps = """mad {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  two = f32[] constant(2)
  m = f32[] multiply(y, two)
  ROOT r = f32[] add(m, x)
}
"""
    text = module("  x = f32[6,4] parameter(0)\n"
                  "  ROOT r = f32[6,4] all-reduce(x), replica_groups={{3,1,0,2}}, to_apply=mad",
                  comps)
    check(text, [[values("f32", (6, 4))] for _ in range(4)], replicas=4, native=1)


@pytest.mark.parametrize("groups", ["{}", "{{0,1},{2,3}}", "{{0},{3,1,2}}", "[2,2]<=[4]",
                                    "[2,2]<=[2,2]T(1,0)"])
def test_all_reduce_replica_groups(groups, native_only):
    text = module("  x = f32[3,5] parameter(0)\n  y = f32[7] parameter(1)\n"
                  f"  ROOT r = (f32[3,5], f32[7]) all-reduce(x, y), replica_groups={groups}, "
                  "to_apply=add", reducer("add", "f32", "add"))
    check(text, [[values("f32", (3, 5)), values("f32", (7,))] for _ in range(4)], replicas=4,
          native=1)


@pytest.mark.parametrize("mode", [
    "channel_id=1, replica_groups={{1},{0}}",  # each replica with all its partitions
    "channel_id=1, replica_groups={}",  # cross replica and partition: everyone
    "channel_id=1, replica_groups={{0,3},{1,2}}, use_global_device_ids=true",
    "channel_id=1, replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true",
    "replica_groups={}",  # cross-replica: each partition on its own
])
def test_all_reduce_partitions(mode, native_only):
    text = module("  x = f32[9] parameter(0)\n"
                  f"  ROOT r = f32[9] all-reduce(x), {mode}, to_apply=add",
                  reducer("add", "f32", "add"))
    check(text, [[values("f32", (9,))] for _ in range(4)], 2, 2, native=1)


@pytest.mark.parametrize("shape", ["f32[]", "f32[0,3]", "bf16[1]", "f64[2,0]"])
def test_all_reduce_scalars_and_zero_sized(shape, native_only):
    t = shape.split("[")[0]
    dims = [int(d) for d in shape[len(t) + 1:-1].split(",") if d]
    text = module(f"  x = {shape} parameter(0)\n"
                  f"  ROOT r = {shape} all-reduce(x), replica_groups={{}}, to_apply=add",
                  reducer("add", t, "add"))
    check(text, [[values(t, dims)] for _ in range(3)], replicas=3, native=1)


@pytest.mark.parametrize("t, n, split", [("f32", 70001, 256), ("s8", 1001, 64),
                                         ("c64", 333, 128), ("bf16", 1 << 19, None),
                                         ("f64", 5, 8)])
def test_all_reduce_split_between_members(t, n, split, native_only, monkeypatch):
    # operands of at least SPLIT_BYTES (and not staged): each member folds its range for
    # everyone
    if split is not None:
        monkeypatch.setattr(co, "SPLIT_BYTES", split)
        monkeypatch.setattr(co, "STAGE_BYTES", 0)
        clear_cache()
    op = "add" if t != "s8" else "multiply"
    text = module(f"  x = {t}[{n}] parameter(0)\n"
                  f"  ROOT r = {t}[{n}] all-reduce(x), replica_groups={{}}, to_apply=red",
                  reducer("red", t, op))
    for replicas in (2, 3):
        check(text, [[values(t, (n,))] for _ in range(replicas)], replicas=replicas, native=1)


def test_all_reduce_start_done(native_only):
    text = module("  x = f32[4] parameter(0)\n"
                  "  s = f32[4] all-reduce-start(x), replica_groups={}, to_apply=add\n"
                  "  ROOT d = f32[4] all-reduce-done(s)", reducer("add", "f32", "add"))
    check(text, [[values("f32", (4,))] for _ in range(2)], replicas=2, native=1)


# -- reduce-scatter, all-gather, all-to-all -------------------------------------------------------


@pytest.mark.parametrize("t", ["f32", "bf16", "s32", "pred"])
@pytest.mark.parametrize("dim", [0, 1])
def test_reduce_scatter(t, dim, native_only):
    op = "or" if t == "pred" else "add"
    out = "[2,6]" if dim == 0 else "[8,3]"
    text = module(f"  x = {t}[8,6] parameter(0)\n"
                  f"  ROOT r = {t}{out} reduce-scatter(x), dimensions={{{dim}}}, "
                  f"replica_groups={{{{1,0,3,2}}}}, to_apply=red" if dim == 0 else
                  f"  x = {t}[8,6] parameter(0)\n"
                  f"  ROOT r = {t}{out} reduce-scatter(x), dimensions={{{dim}}}, "
                  f"replica_groups={{{{1,0}},{{3,2}}}}, to_apply=red",
                  reducer("red", t, op))
    check(text, [[values(t, (8, 6))] for _ in range(4)], replicas=4, native=1)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_all_gather(dim, native_only):
    out = ["[6,2,3]", "[2,6,3]", "[2,2,9]"][dim]
    text = module("  x = u32[2,2,3] parameter(0)\n  y = f16[2,2,3] parameter(1)\n"
                  f"  ROOT r = (u32{out}, f16{out}) all-gather(x, y), dimensions={{{dim}}}, "
                  "replica_groups=[1,3]<=[3]")
    check(text, [[values("u32", (2, 2, 3)), values("f16", (2, 2, 3))] for _ in range(3)],
          replicas=3, native=1)


def test_all_gather_partitions_and_zero_sized(native_only):
    text = module("  x = s8[0,3] parameter(0)\n  y = c64[] parameter(1)\n"
                  "  b = c64[1] reshape(y)\n"
                  "  g = s8[0,6] all-gather(x), dimensions={1}, channel_id=2, "
                  "replica_groups={{0,1}}, use_global_device_ids=true\n"
                  "  h = c64[2] all-gather(b), dimensions={0}, channel_id=3, "
                  "replica_groups={{1,0}}, use_global_device_ids=true\n"
                  "  ROOT t = (s8[0,6], c64[2]) tuple(g, h)")
    check(text, [[values("s8", (0, 3)), values("c64", ())] for _ in range(2)], partitions=2,
          native=2)


@pytest.mark.parametrize("dim", [0, 1])
def test_all_to_all_array_form(dim, native_only):
    text = module("  x = f32[4,8] parameter(0)\n"
                  f"  ROOT r = f32[4,8] all-to-all(x), dimensions={{{dim}}}, "
                  "replica_groups={{2,0,3,1}}")
    check(text, [[values("f32", (4, 8))] for _ in range(4)], replicas=4, native=1)


def test_all_to_all_across_partitions(native_only):
    # channel_id (no use_global_device_ids attribute): partition ids
    text = module("  x = s32[6,2] parameter(0)\n"
                  "  ROOT r = s32[6,2] all-to-all(x), dimensions={0}, channel_id=5, "
                  "replica_groups={{2,0,1}}")
    check(text, [[values("s32", (6, 2))] for _ in range(6)], replicas=2, partitions=3,
          native=1)


def test_all_to_all_tuple_form(native_only):
    text = module("  a = bf16[3] parameter(0)\n  b = bf16[3] parameter(1)\n"
                  "  ROOT r = (bf16[3], bf16[3]) all-to-all(a, b), replica_groups={{1,0},{2,3}}")
    check(text, [[values("bf16", (3,)), values("bf16", (3,))] for _ in range(4)], replicas=4,
          native=1)


# -- broadcast, permute, ids -----------------------------------------------------------------------


def test_collective_broadcast_and_outside_the_groups(native_only):
    text = module("  x = s32[5] parameter(0)\n"
                  "  a = s32[5] collective-broadcast(x), replica_groups={{2,1},{0,3}}\n"
                  "  b = s32[5] collective-broadcast(x), replica_groups={{1,0}}\n"
                  "  ROOT t = (s32[5], s32[5]) tuple(a, b)")
    check(text, [[values("s32", (5,))] for _ in range(4)], replicas=4, native=2)


@pytest.mark.parametrize("pairs", ["{{0,1},{1,2},{2,3},{3,0}}", "{{0,2},{2,0}}",
                                   "{{1,1},{3,0}}", "{{2,3}}"])
def test_collective_permute(pairs, native_only):
    text = module("  x = f32[2,3] parameter(0)\n  y = pred[4] parameter(1)\n"
                  f"  ROOT r = (f32[2,3], pred[4]) collective-permute(x, y), "
                  f"source_target_pairs={pairs}")
    check(text, [[values("f32", (2, 3)), values("pred", (4,))] for _ in range(4)],
          replicas=4, native=1)


def test_collective_permute_across_partitions(native_only):
    text = module("  x = u32[3] parameter(0)\n"
                  "  ROOT r = u32[3] collective-permute(x), channel_id=1, "
                  "source_target_pairs={{0,1},{1,0}}")
    check(text, [[values("u32", (3,))] for _ in range(4)], replicas=2, partitions=2, native=1)


def test_device_ids(native_only):
    text = module("  r = u32[] replica-id()\n  p = u32[] partition-id()\n"
                  "  ROOT t = (u32[], u32[]) tuple(r, p)")
    got, _ = check(text, [[] for _ in range(6)], replicas=3, partitions=2)
    assert sorted((int(a), int(b)) for a, b in got) == [(r, p) for r in range(3)
                                                       for p in range(2)]


def test_forms_without_native_code_match_too():
    # a dynamic broadcast root, the tuple-shaped -start forms, ragged-all-to-all: the
    # runtime's collectives in Python (with copies of the operands)
    text = module("  x = f32[4] parameter(0)\n  root = s32[1] constant({1})\n"
                  "  a = f32[4] collective-broadcast(x, root), replica_groups={{0,1}}, "
                  "has_dynamic_root=true\n"
                  "  ags = (f32[4], f32[8]) all-gather-start(a), replica_groups={}, "
                  "dimensions={0}\n"
                  "  ag = f32[8] all-gather-done(ags)\n"
                  "  cps = (f32[4], f32[4]) collective-permute-start(x), "
                  "source_target_pairs={{0,1},{1,0}}\n"
                  "  cp = f32[4] collective-permute-done(cps)\n"
                  "  ROOT t = (f32[4], f32[8], f32[4]) tuple(a, ag, cp)")
    _, exe = check(text, [[values("f32", (4,))] for _ in range(2)], replicas=2, native=0)
    reasons = [r for _, _, r in exe.program.interpreted()]
    assert len(reasons) == 3 and all(r.startswith("collectives: ") for r in reasons), reasons


@pytest.mark.parametrize("stage", [1 << 16, 0])
def test_every_collective_staged_and_in_place(stage, native_only, monkeypatch):
    # small operands are copied into the shared block (one rendezvous); larger ones are read
    # in place by the other members (a departure barrier): both ways, every collective
    monkeypatch.setattr(co, "STAGE_BYTES", stage)
    clear_cache()
    text = module("  x = f32[8,6] parameter(0)\n  y = s8[8,6] parameter(1)\n"
                  "  a = f32[8,6] all-reduce(x), replica_groups={}, to_apply=add\n"
                  "  g = s8[8,24] all-gather(y), dimensions={1}, replica_groups={}\n"
                  "  r = f32[2,6] reduce-scatter(x), dimensions={0}, replica_groups={{3,2,1,0}}, "
                  "to_apply=add\n"
                  "  t = f32[8,6] all-to-all(x), dimensions={0}, replica_groups={}\n"
                  "  u = (s8[8,6], s8[8,6], s8[8,6], s8[8,6]) all-to-all(y, y, y, y), "
                  "replica_groups={}\n"
                  "  b = f32[8,6] collective-broadcast(x), replica_groups={{2,3,0,1}}\n"
                  "  p = (f32[8,6], s8[8,6]) collective-permute(x, y), "
                  "source_target_pairs={{0,3},{3,1},{1,0}}\n"
                  "  ROOT o = (f32[8,6], s8[8,24], f32[2,6], f32[8,6], (s8[8,6], s8[8,6], s8[8,6], "
                  "s8[8,6]), f32[8,6], (f32[8,6], s8[8,6])) tuple(a, g, r, t, u, b, p)",
                  reducer("add", "f32", "add"))
    check(text, [[values("f32", (8, 6)), values("s8", (8, 6))] for _ in range(4)], replicas=4,
          native=7)
    clear_cache()


# -- inside compiled loops -------------------------------------------------------------------------

LOOP = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT sum = f32[] add(x, y)
}
cond {
  p = (s32[], f32[8], f32[8], u32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(7)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[8], f32[8], u32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[8] get-tuple-element(p), index=1
  w = f32[8] get-tuple-element(p), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  s = f32[8] all-reduce(v), replica_groups={}, to_apply=add
  h = f32[4] reduce-scatter(w), dimensions={0}, replica_groups={}, to_apply=add
  g = f32[8] all-gather(h), dimensions={0}, replica_groups={}
  q = f32[8] collective-permute(g), source_target_pairs={{0,1},{1,0}}
  k = f32[] constant(0.5)
  kb = f32[8] broadcast(k), dimensions={}
  sq = f32[8] multiply(s, kb)
  r = u32[] replica-id()
  ROOT t = (s32[], f32[8], f32[8], u32[]) tuple(j, sq, q, r)
}
"""


def test_collectives_in_a_compiled_loop(native_only):
    text = module("  x = f32[8] parameter(0)\n  y = f32[8] parameter(1)\n"
                  "  zero = s32[] constant(0)\n  z = u32[] constant(9)\n"
                  "  init = (s32[], f32[8], f32[8], u32[]) tuple(zero, x, y, z)\n"
                  "  ROOT w = (s32[], f32[8], f32[8], u32[]) while(init), condition=cond, "
                  "body=body", LOOP)
    got, exe = check(text, [[values("f32", (8,)), values("f32", (8,))] for _ in range(2)],
                     replicas=2, native=5)
    kinds = [type(s).__name__ for s in exe.program.entry.steps]
    assert "CompiledWhileStep" in kinds, kinds
    assert [int(g[3]) for g in got] == [0, 1]


def test_loop_of_large_all_reduces_split(native_only, monkeypatch):
    monkeypatch.setattr(co, "SPLIT_BYTES", 1024)
    monkeypatch.setattr(co, "STAGE_BYTES", 0)
    clear_cache()
    text = module("  x = f32[4099] parameter(0)\n  zero = s32[] constant(0)\n"
                  "  init = (s32[], f32[4099]) tuple(zero, x)\n"
                  "  w = (s32[], f32[4099]) while(init), condition=cond, body=body\n"
                  "  ROOT r = f32[4099] get-tuple-element(w), index=1", """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
cond {
  p = (s32[], f32[4099]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[4099]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[4099] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  s = f32[4099] all-reduce(v), replica_groups={}, to_apply=add
  e = f32[4099] abs(s)
  l = f32[4099] sqrt(e)
  ROOT t = (s32[], f32[4099]) tuple(j, l)
}
""")
    _, exe = check(text, [[values("f32", (4099,)) * 1e-3] for _ in range(3)], replicas=3,
                   native=1)
    assert any(isinstance(s, cf.CompiledWhileStep) for s in exe.program.entry.steps)


# -- errors -------------------------------------------------------------------------------------------


def errors(text, inputs, replicas):
    """The ExecutionError message of both backends."""
    out = []
    for backend in ("cpu", "interpreter"):
        exe = Client(backend=backend, timeout=20).compile(text, replicas=replicas)
        with pytest.raises(ExecutionError) as info:
            exe.execute(inputs)
        out.append(str(info.value))
    return out


def test_a_peer_that_loops_fewer_times_is_reported_as_by_the_interpreter():
    body = LOOP.replace("n = s32[] constant(7)", "n = s32[] get-tuple-element(p), index=0\n"
                        "  rid = u32[] replica-id()\n  ri = s32[] convert(rid)\n"
                        "  two = s32[] constant(2)\n  m = s32[] add(ri, two)")
    body = body.replace("ROOT lt = pred[] compare(i, n), direction=LT",
                        "ROOT lt = pred[] compare(i, m), direction=LT")
    text = module("  x = f32[8] parameter(0)\n  zero = s32[] constant(0)\n"
                  "  z = u32[] constant(9)\n"
                  "  init = (s32[], f32[8], f32[8], u32[]) tuple(zero, x, x, z)\n"
                  "  ROOT w = (s32[], f32[8], f32[8], u32[]) while(init), condition=cond, "
                  "body=body", body)
    cpu, ref = errors(text, [[values("f32", (8,))] for _ in range(2)], 2)
    assert cpu == ref
    assert "replica 0 finished its program without reaching it" in cpu


def test_a_timeout_in_a_compiled_loop_is_reported_as_by_the_interpreter():
    # replica 1 is busy (a slow custom call) before the loop; replica 0's first all-reduce
    # in the compiled loop gives up after the timeout
    def slow(x, ctx):
        if ctx.options.replica_id == 1:
            time.sleep(1.0)
        return x

    xlapy.register_custom_call("test_cpu_collectives_slow", slow)
    try:
        text = module("  a = f32[8] parameter(0)\n"
                      "  x = f32[8] custom-call(a), custom_call_target=\"test_cpu_collectives_slow\"\n"
                      "  zero = s32[] constant(0)\n  z = u32[] constant(9)\n"
                      "  init = (s32[], f32[8], f32[8], u32[]) tuple(zero, x, x, z)\n"
                      "  ROOT w = (s32[], f32[8], f32[8], u32[]) while(init), condition=cond, "
                      "body=body", LOOP)
        out = []
        for backend in ("cpu", "interpreter"):
            exe = Client(backend=backend, timeout=0.2).compile(text, replicas=2)
            if backend == "cpu":
                assert any(isinstance(s, cf.CompiledWhileStep) for s in exe.program.entry.steps)
            with pytest.raises(ExecutionError) as info:
                exe.execute([[values("f32", (8,))] for _ in range(2)])
            out.append(str(info.value).split("\n")[0])
            time.sleep(1.0)  # let replica 1 finish its sleep and fail at once (aborted)
        assert out[0] == out[1] == ("replica 0: all-reduce %s: timed out after 0.2 s on "
                                    "replica 0 waiting for replica 1")
    finally:
        unregister_custom_call("test_cpu_collectives_slow")


def test_a_failing_peer_releases_the_waiters():
    # replica 1 calls a custom-call target nobody registered; replica 0 waits in the
    # all-reduce and is released with the failure named
    text = module("  x = f32[2] parameter(0)\n  rid = u32[] replica-id()\n"
                  "  zero = u32[] constant(0)\n"
                  "  first = pred[] compare(rid, zero), direction=EQ\n"
                  "  c = f32[2] conditional(first, x, x), true_computation=yes, "
                  "false_computation=no\n"
                  "  ROOT s = f32[2] all-reduce(c), replica_groups={}, to_apply=add",
                  reducer("add", "f32", "add") + """
yes {
  a = f32[2] parameter(0)
  ROOT r = f32[2] copy(a)
}
no {
  a = f32[2] parameter(0)
  ROOT v = f32[2] custom-call(a), custom_call_target="xlapy_test_not_registered"
}
""")
    cpu, ref = errors(text, [[values("f32", (2,))] for _ in range(2)], 2)
    assert cpu.split("\n")[0] == ref.split("\n")[0]
    assert "xlapy_test_not_registered" in cpu
