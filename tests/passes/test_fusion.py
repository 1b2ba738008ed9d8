"""fusion: loop fusion of elementwise/data-movement chains (kLoop), input fusion of
reduces (kInput), cheap producers duplicated, nested fusions merged, what never fuses;
bit-identical results, text round trip and verification, on hand-made modules and on
every jax fixture after inline,simplify,cse,dce."""

from collections import Counter
from pathlib import Path

import numpy as np
from pass_check import assert_same_bits, check

import xlapy
from xlapy.hlo.attrs.enums import FusionKind
from xlapy.npz import load_npz
from xlapy.passes import make_pipeline

FIXTURES = Path(__file__).parent.parent / "fixtures" / "jax"

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def fusions(module):
    return [i for c in module.computations if not c.is_fusion_computation
            for i in c.instructions if i.opcode == "fusion"]


def fused_ops(fusion):
    return Counter(i.opcode for i in fusion.attrs["calls"].instructions)


def round_trip(module):
    text = module.to_string()
    again = xlapy.parse_hlo_module(text)
    xlapy.verify_module(again)
    assert again.to_string() == text
    return again


def test_elementwise_chain_becomes_one_loop_fusion():
    m = check("""
HloModule m
ENTRY e {
  x = f32[4,8] parameter(0)
  y = f32[8] parameter(1)
  n = f32[4,8] negate(x)
  b = f32[4,8] broadcast(y), dimensions={1}
  m = f32[4,8] multiply(n, b)
  t = f32[8,4] transpose(m), dimensions={1,0}
  ROOT r = f32[32] reshape(t)
}
""", ["fusion"])
    (f,) = fusions(m)
    assert f.attrs["kind"] == FusionKind.LOOP and m.entry.root is f
    assert [o.name for o in f.operands] == ["x", "y"]
    comp = f.attrs["calls"]
    assert comp.is_fusion_computation
    assert [p.name for p in comp.parameters] == ["param_0", "param_1"]
    assert fused_ops(f) == Counter(parameter=2, negate=1, broadcast=1, multiply=1,
                                   transpose=1, reshape=1)
    assert len(m.entry.instructions) == 3
    round_trip(m)


def test_reverse_and_slices_fuse_into_their_concatenate():
    # jnp.pad(mode="reflect")'s shape: reversed slices around the operand
    m = check("""
HloModule m
ENTRY e {
  x = f32[3,16] parameter(0)
  a = f32[3,4] slice(x), slice={[0:3], [1:5]}
  ra = f32[3,4] reverse(a), dimensions={1}
  b = f32[3,4] slice(x), slice={[0:3], [11:15]}
  rb = f32[3,4] reverse(b), dimensions={1}
  ROOT c = f32[3,24] concatenate(ra, x, rb), dimensions={1}
}
""", ["fusion"])
    (f,) = fusions(m)
    assert m.entry.root is f and [o.name for o in f.operands] == ["x"]
    assert fused_ops(f) == Counter(parameter=1, slice=2, reverse=2, concatenate=1)
    round_trip(m)


def test_reduce_with_producers_is_an_input_fusion():
    m = check("""
HloModule m
""" + ADD + """
ENTRY e {
  x = f32[4,8] parameter(0)
  ex = f32[4,8] exponential(x)
  c = f32[] constant(0)
  r = f32[4] reduce(ex, c), dimensions={1}, to_apply=add
  ROOT s = f32[4] sqrt(r)
}
""", ["fusion"])
    (f,) = fusions(m)
    assert f.attrs["kind"] == FusionKind.INPUT
    assert fused_ops(f) == Counter(parameter=1, exponential=1, constant=1, reduce=1)
    assert f.attrs["calls"].root.opcode == "reduce"
    assert m.entry.root.opcode == "sqrt"  # a reduce is not fused into its consumer
    round_trip(m)


def test_reduce_window_input_fusion_and_init_constant_duplicated():
    m = check("""
HloModule m
""" + ADD + """
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  a = f32[8] abs(x)
  c = f32[] constant(0)
  w = f32[7] reduce-window(a, c), window={size=2}, to_apply=add
  r = f32[] reduce(y, c), dimensions={0}, to_apply=add
  ROOT t = (f32[7], f32[]) tuple(w, r)
}
""", ["fusion"])
    f, g = sorted(fusions(m), key=lambda f: f.attrs["calls"].root.opcode)
    assert f.attrs["kind"] == g.attrs["kind"] == FusionKind.INPUT
    assert fused_ops(f) == Counter(parameter=1, constant=1, reduce=1)
    assert fused_ops(g) == Counter(parameter=1, constant=1, abs=1, **{"reduce-window": 1})
    # the shared scalar constant is duplicated into both; the tuple is untouched
    assert Counter(i.opcode for i in m.entry.instructions) == Counter(
        parameter=2, fusion=2, tuple=1)
    round_trip(m)


def test_shared_producer_not_fused_but_cheap_ones_duplicated():
    # an expensive producer (exponential) with users in two groups stays, feeding both
    m = check("""
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  s = f32[4] exponential(x)
  c = f32[] constant(2)
  b = f32[4] broadcast(c), dimensions={}
  i = f32[4] iota(), iota_dimension=0
  u = f32[4] add(s, b)
  v = f32[4] multiply(s, b)
  uu = f32[4] add(u, i)
  vv = f32[4] subtract(v, i)
  ROOT t = (f32[4], f32[4]) tuple(uu, vv)
}
""", ["fusion"])
    fs = fusions(m)
    assert len(fs) == 2 and all(f.attrs["kind"] == FusionKind.LOOP for f in fs)
    assert Counter(i.opcode for i in m.entry.instructions) == Counter(
        parameter=1, exponential=1, fusion=2, tuple=1)
    for f in fs:
        ops = fused_ops(f)
        assert ops["broadcast"] == 1 and ops["constant"] == 1 and ops["iota"] == 1
        assert [o.opcode for o in f.operands] == ["exponential"]
    round_trip(m)


def test_cheap_shared_producers_are_computed_in_each_consumer():
    # XLA:CPU duplicates a producer that is not expensive into each consumer group (a sine
    # of a real, a chain of adds and xors as in threefry's rounds): nothing is left between
    # the fusions
    m = check("""
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  s = f32[4] sine(x)
  a = f32[4] add(s, y)
  b = f32[4] multiply(a, s)
  u = f32[4] add(a, b)
  v = f32[4] subtract(b, y)
  ROOT t = (f32[4], f32[4]) tuple(u, v)
}
""", ["fusion"])
    fs = fusions(m)
    assert len(fs) == 2
    assert Counter(i.opcode for i in m.entry.instructions) == Counter(
        parameter=2, fusion=2, tuple=1)
    assert all(fused_ops(f)["sine"] == 1 and fused_ops(f)["multiply"] == 1 for f in fs)
    round_trip(m)


def test_never_fused_dot_side_effects_calls_and_tuples():
    m = check("""
HloModule m
""" + ADD + """
ENTRY e {
  x = f32[4,4] parameter(0)
  n = f32[4,4] negate(x)
  d = f32[4,4] dot(n, n), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[4,4] exponential(d)
  m = f32[4,4] map(e, e), dimensions={0,1}, to_apply=add
  t = (f32[4,4], f32[4,4]) tuple(m, n)
  g = f32[4,4] get-tuple-element(t), index=0
  ROOT a = f32[4,4] abs(g)
}
""", ["fusion"])
    assert fusions(m) == []
    m = xlapy.parse_hlo_module("""
HloModule m
ENTRY e {
  x = f32[] parameter(0)
  n = f32[] negate(x)
  r = f32[4] rng(n, n), distribution=rng_uniform
  ROOT a = f32[4] add(r, r)
}
""")
    make_pipeline(["fusion"]).run(m)
    assert fusions(m) == [] and m.entry.root.opcode == "add"


def test_nested_fusion_merged_and_fixed_point():
    text = """
HloModule m
fc {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  ROOT m = f32[4] multiply(p0, p1)
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a = f32[4] add(x, y)
  f = f32[4] fusion(a, y), kind=kLoop, calls=fc
  ROOT n = f32[4] negate(f)
}
"""
    m = check(text, ["fusion"])
    (f,) = fusions(m)
    assert m.entry.root is f
    assert fused_ops(f) == Counter(parameter=2, add=1, multiply=1, negate=1)
    assert [c.name for c in m.computations if c.name == "fc"] == []  # old one removed
    assert not make_pipeline(["fusion"]).run(m)  # nothing more to fuse
    round_trip(m)


def test_fusion_inside_while_body_not_in_condition_scalars_kept():
    m = check("""
HloModule m
cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  k = s32[] constant(3)
  ROOT lt = pred[] compare(i, k), direction=LT
}
body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  v = f32[4] get-tuple-element(p), index=1
  e = f32[4] exponential(v)
  n = f32[4] negate(e)
  ROOT t = (s32[], f32[4]) tuple(i2, n)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(t), condition=cond, body=body
  ROOT g = f32[4] get-tuple-element(w), index=1
}
""", ["fusion"])
    body = m.computation("body")
    kinds = Counter(i.opcode for i in body.instructions)
    assert kinds["fusion"] == 2  # exp+negate, and add with its duplicated constant
    assert Counter(i.opcode for i in m.computation("cond").instructions)["fusion"] == 1
    round_trip(m)


def test_random_graphs_keep_their_bits():
    m = check("""
HloModule m
""" + ADD + """
ENTRY e {
  x = f32[3,4] parameter(0)
  y = f32[3,4] parameter(1)
  zz = f32[] constant(1)
  c = f32[3,4] clamp(x, y, x)
  p = f32[5,6] pad(c, zz), padding=1_1x1_1
  s = f32[3,4] slice(p), slice={[1:4], [2:6]}
  k = f32[6,4] concatenate(s, x), dimensions={0}
  h = f16[6,4] convert(k)
  hc = f32[6,4] convert(h)
  z = f32[] constant(-0)
  r = f32[6] reduce(hc, z), dimensions={1}, to_apply=add
  ROOT o = (f32[6], f32[6,4]) tuple(r, hc)
}
""", ["fusion"], seeds=(0, 1, 2, 3, 4))
    fs = fusions(m)
    # hc has two users: its chain is a loop fusion; the reduce takes only its init value
    assert sorted(f.attrs["kind"].value for f in fs) == ["kInput", "kLoop"]
    loop = next(f for f in fs if f.attrs["kind"] == FusionKind.LOOP)
    assert fused_ops(loop) == Counter(parameter=2, constant=1, clamp=1, pad=1, slice=1,
                                      concatenate=1, convert=2)
    round_trip(m)


def test_every_jax_fixture_after_the_pipeline():
    names = sorted(p.name[: -len(".pre.hlo")] for p in FIXTURES.glob("*.pre.hlo"))
    assert len(names) >= 100
    before = after = n_fusions = 0
    kinds = Counter()
    for name in names:
        text = (FIXTURES / f"{name}.pre.hlo").read_text()
        original = xlapy.parse_hlo_module(text)
        module = xlapy.parse_hlo_module(text)
        make_pipeline(["inline", "simplify", "cse", "dce"]).run(module)
        before += len(module.entry.instructions)
        make_pipeline(["fusion"]).run(module)  # verifies
        after += len(module.entry.instructions)
        fs = fusions(module)
        n_fusions += len(fs)
        kinds.update(f.attrs["kind"] for f in fs)
        for f in fs:
            assert f.attrs["calls"].is_fusion_computation
            assert all(p.name.startswith("param_") for p in f.attrs["calls"].parameters)
        round_trip(module)
        data = load_npz(FIXTURES / f"{name}.npz")
        args = [data[f"arg{i}"] for i in range(sum(1 for k in data if k.startswith("arg")))]
        with np.errstate(all="ignore"):
            assert_same_bits(xlapy.evaluate(original, *args), xlapy.evaluate(module, *args), name)
    assert n_fusions > 200 and kinds[FusionKind.INPUT] > 10 and kinds[FusionKind.LOOP] > 100
    assert after < before * 0.8


def test_fixture_softmax_structure():
    module = xlapy.parse_hlo_module((FIXTURES / "softmax.pre.hlo").read_text())
    make_pipeline(["inline", "simplify", "cse", "dce", "fusion"]).run(module)
    kinds = Counter(f.attrs["kind"] for f in fusions(module))
    assert kinds[FusionKind.INPUT] >= 1 and kinds[FusionKind.LOOP] >= 1
    assert not any(i.opcode in ("exponential", "subtract", "divide")
                   for i in module.entry.instructions)


# -- long programs ---------------------------------------------------------------------------


def _chain_text(n: int) -> str:
    lines = ["HloModule chain", "ENTRY e {", "  x0 = f32[16] parameter(0)",
             "  c = f32[] constant(0.75)", "  cb = f32[16] broadcast(c), dimensions={}"]
    ops = ["add", "multiply", "maximum", "subtract"]
    for i in range(1, n + 1):
        lines.append(f"  {'ROOT ' if i == n else ''}x{i} = f32[16] {ops[i % 4]}(x{i - 1}, cb)")
    return "\n".join(lines + ["}"])


def test_a_long_chain_is_cut_into_fusions_of_at_most_max_fusion_size():
    from xlapy.passes.fusion import MAX_FUSION_SIZE

    n = 3 * MAX_FUSION_SIZE
    m = check(_chain_text(n), ["fusion"], seeds=(0,))
    fusions = [i for i in m.entry.instructions if i.opcode == "fusion"]
    sizes = [len(f.attrs["calls"].instructions) - len(f.operands) for f in fusions]
    assert all(s <= MAX_FUSION_SIZE for s in sizes)
    # every op of the chain is in exactly one fusion (each has its own constant and
    # broadcast copies: cheap producers are duplicated)
    assert sum(s - 2 for s in sizes) == n and len(m.entry.instructions) == len(fusions) + 1


def test_max_fusion_size_is_a_pass_option():
    module = xlapy.parse_hlo_module(_chain_text(10))
    from xlapy.passes import InstructionFusion

    InstructionFusion(max_fusion_size=4).run(module)
    xlapy.verify_module(module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 5  # 2 ops of the chain each, and the constant and broadcast
    assert all(len(f.attrs["calls"].instructions) - len(f.operands) == 4 for f in fusions)


# -- code duplication ------------------------------------------------------------------------


def _halving_sums(levels: int, width: int = 1 << 12) -> str:
    """An up-sweep as lax.associative_scan lowers it: each level adds a value's even and odd
    elements (two strided slices of it), so a level's element reads two of the level below."""
    lines = ["HloModule scan", "ENTRY e {", f"  v0 = f32[4,{width}] parameter(0)"]
    for k in range(1, levels + 1):
        n = width >> k
        lines += [
            f"  e{k} = f32[4,{n}] slice(v{k - 1}), slice={{[0:4], [0:{2 * n - 1}:2]}}",
            f"  o{k} = f32[4,{n}] slice(v{k - 1}), slice={{[0:4], [1:{2 * n}:2]}}",
            f"  {'ROOT ' if k == levels else ''}v{k} = f32[4,{n}] add(e{k}, o{k})"]
    return "\n".join(lines + ["}"])


def _emitted(fusion) -> dict[str, int]:
    """Per fused instruction, how many distinct indices it is generated at per element of
    the fusion: counted over the paths from the root, an elementwise user of the same
    shape (or a transpose) passing its own indices on, any other user reading at new ones."""
    comp = fusion.attrs["calls"]
    paths = {comp.root.name: {("root",)}}
    for instr in reversed(comp.post_order()):
        for o in dict.fromkeys(instr.operands):
            mine = paths.setdefault(o.name, set())
            same = instr.opcode == "transpose" or instr.shape.dimensions == o.shape.dimensions
            mine |= paths[instr.name] if same else {(instr.name, p) for p in paths[instr.name]}
    return {name: len(p) for name, p in paths.items()}


def test_fusion_bounds_how_often_a_producer_is_generated():
    # Unbounded, this chain would generate the first level 2^11 times per element (the CPU
    # kernel never finished compiling); each fusion now generates any producer at most
    # ALLOWED_CODE_DUPLICATION times, XLA's kAllowedCodeDuplication.
    from xlapy.passes.fusion import ALLOWED_CODE_DUPLICATION

    assert ALLOWED_CODE_DUPLICATION == 15
    m = check(_halving_sums(12), ["fusion"], seeds=(0,))
    fs = fusions(m)
    assert len(fs) >= 3
    for f in fs:
        counts = _emitted(f)  # parameters are loads, not generated code
        params = {i.name for i in f.attrs["calls"].instructions if i.opcode == "parameter"}
        assert max(n for name, n in counts.items() if name not in params) \
            <= ALLOWED_CODE_DUPLICATION
    # each level's add is fused into some fusion (not one kernel per level)
    assert len(fs) < 12


def test_broadcasts_are_fused_whatever_they_duplicate():
    # XLA's rule: a broadcast is always fused (materialising it is worse); its operand is
    # then the one counted. Here the broadcast is read through 16 slices.
    slices = "\n".join(f"  sl{k} = f32[4] slice(b), slice={{[{k}:{k + 4}]}}" for k in range(16))
    adds = "\n".join(f"  a{k} = f32[4] add(a{k - 1}, sl{k})" for k in range(1, 16))
    m = check(f"""
HloModule m
ENTRY e {{
  x = f32[] parameter(0)
  b = f32[20] broadcast(x), dimensions={{}}
{slices}
  a0 = f32[4] negate(sl0)
{adds}
  ROOT r = f32[4] negate(a15)
}}
""", ["fusion"])
    (f,) = fusions(m)
    assert fused_ops(f)["broadcast"] == 1 and fused_ops(f)["slice"] == 16


def test_a_pad_read_twice_is_not_fused():
    # reflect padding then two shifted windows of it: fused, the pad would be generated
    # twice (XLA fuses a pad or concatenate only where it is generated once)
    m = check("""
HloModule m
ENTRY e {
  x = f32[8,16] parameter(0)
  z = f32[] constant(0)
  p = f32[8,20] pad(x, z), padding=0_0x2_2
  a = f32[8,16] slice(p), slice={[0:8], [0:16]}
  b = f32[8,16] slice(p), slice={[0:8], [4:20]}
  ROOT r = f32[8,16] add(a, b)
}
""", ["fusion"])
    # the pad is materialised (a fusion of its own, with its constant); the add reads it
    (f,) = [f for f in fusions(m) if f.attrs["calls"].root.opcode == "add"]
    assert "pad" not in fused_ops(f)
    assert fused_ops(f.operands[0])["pad"] == 1
    # read once, it is fused
    m = check("""
HloModule m
ENTRY e {
  x = f32[8,16] parameter(0)
  z = f32[] constant(0)
  p = f32[8,20] pad(x, z), padding=0_0x2_2
  a = f32[8,16] slice(p), slice={[0:8], [0:16]}
  ROOT r = f32[8,16] negate(a)
}
""", ["fusion"])
    (f,) = fusions(m)
    assert fused_ops(f)["pad"] == 1


def test_what_is_not_copied():
    from xlapy.passes.fusion import is_expensive, may_duplicate

    # a binary producer with a user that cannot fuse it (a dot) would be read twice over:
    # XLA's ComputeGloballyUnfusible keeps it whole; a unary one is copied
    m = check("""
HloModule m
ENTRY e {
  x = f32[4,4] parameter(0)
  y = f32[4,4] parameter(1)
  a = f32[4,4] add(x, y)
  n = f32[4,4] negate(x)
  d = f32[4,4] dot(a, n), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  u = f32[4,4] multiply(a, n)
  ROOT t = (f32[4,4], f32[4,4]) tuple(d, u)
}
""", ["fusion"])
    a = m.entry.instructions
    by = {i.opcode: i for i in a}
    assert "add" in by and "negate" in by  # both stay for the dot
    (f,) = fusions(m)
    assert fused_ops(f)["negate"] == 1 and "add" not in fused_ops(f)
    x = xlapy.parse_hlo_module("HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n"
                               "  e = f32[4] exponential(x)\n  c = s32[4] parameter(1)\n"
                               "  k = s32[] constant(3)\n  kb = s32[4] broadcast(k), dimensions={}\n"
                               "  q = s32[4] divide(c, kb)\n  r = s32[4] divide(c, c)\n"
                               "  ROOT t = (f32[4], s32[4], s32[4]) tuple(e, q, r)\n}\n")
    ops = {i.name: i for i in x.entry.instructions}
    assert is_expensive(ops["e"]) and not is_expensive(ops["q"]) and is_expensive(ops["r"])
    assert not may_duplicate(ops["e"]) and may_duplicate(ops["q"])


def test_a_copy_read_at_two_indices_is_not_made():
    # the shared add is read through two slices in the group (generated twice per element)
    # and used outside: it is materialised once rather than computed again twice
    m = check("""
HloModule m
ENTRY e {
  x = f32[4,8] parameter(0)
  y = f32[4,8] parameter(1)
  a = f32[4,8] add(x, y)
  sa = f32[4,4] slice(a), slice={[0:4], [0:4]}
  sb = f32[4,4] slice(a), slice={[0:4], [4:8]}
  b = f32[4,4] multiply(sa, sb)
  c = f32[4,8] negate(a)
  ROOT t = (f32[4,4], f32[4,8]) tuple(b, c)
}
""", ["fusion"])
    (f,) = [f for f in fusions(m) if f.attrs["calls"].root.opcode == "multiply"]
    assert "add" not in fused_ops(f)


def test_an_expensive_producer_read_through_a_broadcast_is_not_fused():
    """XLA's rule (ReusesOperandElements): a layer norm's rsqrt of the per-row variance is
    computed once per row in a fusion of its own, not once per element it scales (through
    a reshape and a broadcast); a cheap producer (the add) and an expensive one read at its
    own index (the exp) fuse."""
    m = check("""
HloModule m
ENTRY e {
  x = f32[64,32] parameter(0)
  v = f32[64] parameter(1)
  c = f32[] constant(1e-05)
  cb = f32[64] broadcast(c), dimensions={}
  a = f32[64] add(v, cb)
  r = f32[64] rsqrt(a)
  rr = f32[64,1] reshape(r)
  rs = f32[64] reshape(rr)
  b = f32[64,32] broadcast(rs), dimensions={0}
  e = f32[64,32] exponential(x)
  ROOT m = f32[64,32] multiply(e, b)
}
""", ["fusion"])
    small, big = sorted(fusions(m), key=lambda f: len(f.shape.dimensions))
    assert fused_ops(small)["rsqrt"] == 1 and fused_ops(small)["add"] == 1
    assert "rsqrt" not in fused_ops(big)
    assert fused_ops(big)["exponential"] == 1 and fused_ops(big)["broadcast"] == 1
    assert small in big.operands
