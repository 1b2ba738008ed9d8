"""custom-call in the interpreter: the target registry (spec 002 CustomCall's example with a
registered Python callable; unknown targets; per-evaluation targets; the calling
convention's keywords; result checking), the typed-FFI backend_config parser, XLA:CPU's
LAPACK targets (values from XLA:CPU via jax 0.10.2, which calls the same LAPACK
routines: compared with a tight tolerance) and XLA:CPU's TopK (NaN largest, ties to the
lower index)."""

from types import SimpleNamespace

import numpy as np
import pytest
from movement_eval_helpers import assert_same, np_dtype, run

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.interpreter import EvaluationError, UnimplementedError, evaluate
from xlapy.interpreter.custom_calls import (
    lookup_custom_call,
    parse_attr_dict,
    register_custom_call,
    registered_custom_calls,
    unregister_custom_call,
)
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


@pytest.fixture
def registered():
    """Register targets for one test and remove them afterwards."""
    names = []

    def register(name, fn, **kw):
        register_custom_call(name, fn, **kw)
        names.append(name)
        return fn

    yield register
    for name in names:
        unregister_custom_call(name)


# -- the registry -------------------------------------------------------------------------------


def test_spec_example_myfunc(registered):
    # CustomCall("myfunc", {x, y}, f32[3x3]) with x = {1,2}, y = {{10,20,30},{40,50,60}};
    # the example's target sets z[0][0] = x[1] + y[1][0].
    seen = {}

    def myfunc(x, y):
        seen["x"], seen["y"] = x, y
        z = np.zeros((3, 3), np.float32)
        z[0][0] = x[1] + y[1][0]
        return z

    registered("myfunc", myfunc)
    b = XlaBuilder("cc")
    x = ops.ConstantR1(b, np.array([1, 2], np.float32))
    y = ops.Constant(b, np.array([[10, 20, 30], [40, 50, 60]], np.float32))
    z = evaluate(b.build(ops.CustomCall(b, "myfunc", [x, y], parse_shape("f32[3,3]"))))
    assert_same(seen["x"], np.array([1, 2], np.float32))
    assert_same(seen["y"], np.array([[10, 20, 30], [40, 50, 60]], np.float32))
    want = np.zeros((3, 3), np.float32)
    want[0, 0] = 42
    assert_same(z, want)


CALL = """
HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  ROOT r = RESULT custom-call(x), custom_call_target="TARGET"
}
"""


def call_text(target: str, result: str = "f32[3]") -> str:
    return CALL.replace("TARGET", target).replace("RESULT", result)


def test_unknown_target_names_it_and_lists_the_registered_ones():
    with pytest.raises(UnimplementedError, match=r"no custom-call target named 'no_such_fn' is "
                                                 r"registered .*registered targets: .*TopK"):
        run(call_text("no_such_fn"), np.zeros(3, np.float32))


def test_per_evaluation_targets_come_first(registered):
    registered("twice", lambda x: 2 * x)
    m = parse_hlo_module(call_text("twice"))
    x = np.array([1, 2, 3], np.float32)
    assert_same(evaluate(m, x), 2 * x)
    assert_same(evaluate(m, x, custom_calls={"twice": lambda x: 3 * x}), 3 * x)
    ctx = SimpleNamespace(options=SimpleNamespace(custom_calls={"only_here": abs}))
    assert "only_here" in registered_custom_calls(ctx)
    assert "only_here" not in registered_custom_calls()


def test_keywords_are_passed_when_declared(registered):
    got = {}

    def with_instr(x, *, instr):
        got["instr"] = instr
        return x

    def with_ctx(x, ctx):
        got["ctx"] = ctx
        return x

    def with_kwargs(x, **kw):
        got["kw"] = sorted(kw)
        return x

    registered("with_instr", with_instr)
    registered("with_ctx", with_ctx)
    registered("with_kwargs", with_kwargs)
    x = np.ones(3, np.float32)
    run(call_text("with_instr"), x)
    assert got["instr"].attrs["custom_call_target"] == "with_instr"
    run(call_text("with_ctx"), x)
    assert got["ctx"].options.timeout is not None
    run(call_text("with_kwargs"), x)
    assert got["kw"] == ["ctx", "instr"]


def test_target_calls_its_computation_through_ctx(registered):
    # A target given called_computations evaluates them with ctx.call.
    def apply_twice(x, *, instr, ctx):
        (comp,) = instr.attrs["called_computations"]
        return ctx.call(comp, [ctx.call(comp, [x])])

    registered("apply_twice", apply_twice)
    text = """
HloModule m
inc {
  p = f32[3] parameter(0)
  one = f32[] constant(1)
  ones = f32[3] broadcast(one), dimensions={}
  ROOT r = f32[3] add(p, ones)
}
ENTRY e {
  x = f32[3] parameter(0)
  ROOT r = f32[3] custom-call(x), custom_call_target="apply_twice", called_computations={inc}
}
"""
    assert_same(run(text, np.array([0, 1, 2], np.float32)), np.array([2, 3, 4], np.float32))


def test_results_are_converted_and_checked(registered):
    registered("as_f64", lambda x: x.astype(np.float64) + 0.5)
    assert_same(run(call_text("as_f64"), np.zeros(3, np.float32)), np.full(3, 0.5, np.float32))
    registered("wrong_shape", lambda x: np.zeros(4))
    with pytest.raises(EvaluationError, match=r"custom-call 'wrong_shape' result: expected "
                                              r"f32\[3\]\{0\}, got f64\[4\]: the dimensions "
                                              r"differ"):
        run(call_text("wrong_shape"), np.zeros(3, np.float32))
    registered("pair", lambda x: [x, x.sum()])
    a, s = run(call_text("pair", "(f32[3], f32[])"), np.ones(3, np.float32))
    assert_same(a, np.ones(3, np.float32))
    assert_same(s, np.float32(3))


def test_a_failing_target_is_named(registered):
    def broken(x):
        raise RuntimeError("disk on fire")

    registered("broken", broken)
    with pytest.raises(EvaluationError, match=r"custom-call 'broken' .* raised RuntimeError: "
                                              r"disk on fire"):
        run(call_text("broken"), np.zeros(3, np.float32))


def test_registration_rules(registered):
    registered("dup", abs)
    with pytest.raises(InvalidArgumentError, match="already registered"):
        register_custom_call("dup", abs)
    register_custom_call("dup", np.negative, replace=True)
    assert lookup_custom_call("dup").fn is np.negative
    with pytest.raises(InvalidArgumentError, match="must be callable"):
        register_custom_call("not_callable", 3)

    @register_custom_call("decorated")
    def decorated(x):
        return x

    try:
        assert lookup_custom_call("decorated").fn is decorated
    finally:
        unregister_custom_call("decorated")


@pytest.mark.parametrize("text, want", [
    ("{uplo = 76 : ui8}", {"uplo": 76}),
    ("{mode = 86 : ui8, uplo = 76 : ui8}", {"mode": 86, "uplo": 76}),
    ("{}", {}),
    ("", {}),
    ('{name = "a, b", eps = 1.5e-3 : f32, on = true, dims = array<i64: 1, 2>, l = [1, 2]}',
     {"name": "a, b", "eps": 1.5e-3, "on": True, "dims": [1, 2], "l": [1, 2]}),
])
def test_backend_config_dictionaries(text, want):
    assert parse_attr_dict(text) == want


# -- LAPACK targets ----------------------------------------------------------------------------


def lapack(target: str, operands: list[str], result: str, config: str) -> str:
    params = "\n".join(f"  p{i} = {s} parameter({i})" for i, s in enumerate(operands))
    names = ", ".join(f"p{i}" for i in range(len(operands)))
    return f"""
HloModule m
ENTRY e {{
{params}
  ROOT r = {result} custom-call({names}), custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI, backend_config={config}
}}
"""


def close(got, want, rtol):
    got = np.asarray(got)
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


# Expected values below: XLA:CPU via jax 0.10.2 (jnp.linalg / lax.linalg on these inputs).


def test_potrf_lower_f32_keeps_the_other_triangle():
    a = np.array([[4, 2, 0.6], [2, 5, 1.5], [0.6, 1.5, 3]], np.float32)
    factor, info = run(lapack("lapack_spotrf_ffi", ["f32[3,3]"], "(f32[3,3], s32[])",
                              "{uplo = 76 : ui8}"), a)
    want = np.array([[2.0, 0, 0], [1.0, 2.0, 0], [0.30000001192092896, 0.6000000238418579,
                                                   1.5968719720840454]], np.float32)
    close(np.tril(factor), want, 1e-6)
    assert_same(np.triu(factor, 1), np.triu(a, 1))  # LAPACK does not touch it
    assert_same(info, np.int32(0))


def test_potrf_upper_c64_and_batch_info():
    a = np.array([[[4, 1 - 1j], [1 + 1j, 3]], [[1, 2], [2, 1]]], np.complex64)
    factor, info = run(lapack("lapack_cpotrf_ffi", ["c64[2,2,2]"], "(c64[2,2,2], s32[2])",
                              "{uplo = 85 : ui8}"), a)
    close(np.triu(factor[0]), np.array([[2, 0.5 - 0.5j], [0, 1.5811388492584229]],
                                       np.complex64), 1e-6)
    # The second matrix is not positive definite: LAPACK's info names the failing minor.
    assert_same(info, np.array([0, 2], np.int32))


def test_trsm_left_lower_and_right_upper_transposed_unit():
    t = np.array([[2, 0, 0], [1, 4, 0], [-1, 0.5, 8]], np.float32)
    b = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    x = run(lapack("lapack_strsm_ffi", ["f32[3,3]", "f32[3,2]"], "f32[3,2]",
                   "{diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}"),
            t, b)
    close(x, np.array([[0.5, 1.0], [0.625, 0.75], [0.6484375, 0.828125]], np.float32), 1e-6)
    c = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    x = run(lapack("lapack_strsm_ffi", ["f32[3,3]", "f32[2,3]"], "f32[2,3]",
                   "{diag = 85 : ui8, side = 82 : ui8, trans_x = 84 : ui8, uplo = 85 : ui8}"),
            t.T.copy(), c)
    close(x, np.array([[3.5, 0.5, 3.0], [8.0, 2.0, 6.0]], np.float32), 1e-6)


def test_geqrf_orgqr_f64():
    m = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 10], [1, 0, 1]], np.float64)
    a_out, tau = run(lapack("lapack_dgeqrf_ffi", ["f64[4,3]"], "(f64[4,3], f64[3])", "{}"), m)
    close(np.triu(a_out)[:3], np.array([
        [-8.18535277187245, -9.529216659791809, -11.972605546917912],
        [0.0, 1.4812257933030573, 1.2897748404271518],
        [0.0, 0.0, 0.9965928350693491]]), 1e-12)
    q = run(lapack("lapack_dorgqr_ffi", ["f64[4,3]", "f64[3]"], "f64[4,3]", "{}"), a_out, tau)
    close(q, np.array([
        [-0.12216944435630528, 0.5642764926868793, 0.8122914203647437],
        [-0.48867777742522095, 0.23175641663925378, -0.15017152309264203],
        [-0.8551861104941366, -0.10076365940837123, -0.10921565315828474],
        [-0.12216944435630524, -0.7859565433852946, 0.5529042441138181]]), 1e-12)


def test_syevd_f32():
    s = np.array([[2, 1, 0], [1, 3, 1], [0, 1, 4]], np.float32)
    v, w, info = run(lapack("lapack_ssyevd_ffi", ["f32[3,3]"], "(f32[3,3], f32[3], s32[])",
                            "{mode = 86 : ui8, uplo = 76 : ui8}"), s)
    close(w, np.array([1.267949104309082, 3.0, 4.732050895690918], np.float32), 1e-6)
    close(v, np.array([[0.78867506980896, -0.5773501396179199, 0.2113247811794281],
                       [-0.5773503184318542, -0.5773501992225647, 0.5773501396179199],
                       [0.21132490038871765, 0.5773501992225647, 0.78867506980896]],
                      np.float32), 1e-5)
    assert_same(info, np.int32(0))


def test_gesdd_reduced_f64():
    n = np.array([[3, 1], [1, 3], [0, 2]], np.float64)
    _, s, u, vt, info = run(lapack("lapack_dgesdd_ffi", ["f64[3,2]"],
                                   "(f64[3,2], f64[2], f64[3,2], f64[2,2], s32[])",
                                   "{mode = 83 : ui8}"), n)
    close(s, np.array([4.280719019082748, 2.382319180895633]), 1e-12)
    close(u, np.array([[-0.599285547061333, 0.7761412852192963],
                       [-0.705123795029468, -0.39578603756246283],
                       [-0.37902145950676763, -0.49087484947667104]]), 1e-12)
    close(vt, np.array([[-0.5847102846637651, -0.8112421851755609],
                        [0.8112421851755609, -0.5847102846637651]]), 1e-12)
    assert_same(info, np.int32(0))


def test_getrf_f32_one_based_pivots_and_singular_info():
    a = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 10]], np.float32)
    lu, ipiv, info = run(lapack("lapack_sgetrf_ffi", ["f32[3,3]"], "(f32[3,3], s32[3], s32[])",
                                "{}"), a)
    close(lu, np.array([[7.0, 8.0, 10.0], [0.1428571492433548, 0.8571428060531616,
                                           1.5714285373687744],
                        [0.5714285969734192, 0.4999997913837433, -0.5]], np.float32), 1e-5)
    assert_same(ipiv, np.array([3, 3, 3], np.int32))  # jax subtracts 1: [2, 2, 2]
    assert_same(info, np.int32(0))
    _, _, info = run(lapack("lapack_sgetrf_ffi", ["f32[2,2]"], "(f32[2,2], s32[2], s32[])", "{}"),
                     np.array([[1, 2], [2, 4]], np.float32))
    assert_same(info, np.int32(2))  # U[1,1] is exactly zero


def test_geev_real_complex_pair_unpacked():
    e = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 2]], np.float64)
    wr, wi, vl, vr, info = run(lapack(
        "lapack_dgeev_ffi", ["f64[3,3]"], "(f64[3], f64[3], c128[3,3], c128[3,3], s32[])",
        "{compute_left = 78 : ui8, compute_right = 86 : ui8}"), e)
    close(wr + 1j * wi, np.array([1j, -1j, 2]), 1e-12)
    r = 0.7071067811865475
    close(vr, np.array([[r, r, 0], [-r * 1j, r * 1j, 0], [0, 0, 1]]), 1e-12)
    assert_same(vl, np.zeros((3, 3), np.complex128))  # not requested
    assert_same(info, np.int32(0))


def test_geev_non_finite_input_gives_info_minus_4():
    e = np.array([[np.nan, 0], [0, 1]], np.float32)
    *_, info = run(lapack(
        "lapack_sgeev_ffi", ["f32[2,2]"], "(f32[2], f32[2], c64[2,2], c64[2,2], s32[])",
        "{compute_left = 78 : ui8, compute_right = 86 : ui8}"), e)
    assert_same(info, np.int32(-4))  # jaxlib's check before calling LAPACK


@pytest.mark.parametrize("prefix, t", [("s", "f32"), ("d", "f64"), ("c", "c64"), ("z", "c128")])
def test_every_precision_reconstructs(prefix, t):
    # Each precision runs: L L^H == A for potrf, A x == b for getrf-based checks.
    rng = np.random.default_rng(3)
    dtype = np.dtype({"f32": np.float32, "f64": np.float64, "c64": np.complex64,
                      "c128": np.complex128}[t])
    m = rng.standard_normal((3, 3))
    if dtype.kind == "c":
        m = m + 1j * rng.standard_normal((3, 3))
    a = (m @ m.conj().T + 3 * np.eye(3)).astype(dtype)
    factor, info = run(lapack(f"lapack_{prefix}potrf_ffi", [f"{t}[3,3]"], f"({t}[3,3], s32[])",
                              "{uplo = 76 : ui8}"), a)
    assert_same(info, np.int32(0))
    low = np.tril(factor)
    rtol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(low @ low.conj().T, a, rtol=rtol, atol=rtol * 10)


def test_wrong_operand_type_is_an_error():
    with pytest.raises(EvaluationError, match=r"lapack_spotrf_ffi.*must be a float32 array"):
        run(lapack("lapack_spotrf_ffi", ["f64[2,2]"], "(f64[2,2], s32[])", "{uplo = 76 : ui8}"),
            np.eye(2))


# -- TopK ---------------------------------------------------------------------------------------


def topk_text(shape: str, k: int) -> str:
    dims = shape[shape.index("[") + 1:-1].split(",")
    out = ",".join(dims[:-1] + [str(k)])
    t = shape[:shape.index("[")]
    return f"""
HloModule m
gt {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT
}}
ENTRY e {{
  x = {shape} parameter(0)
  ROOT r = ({t}[{out}], s32[{out}]) custom-call(x), custom_call_target="TopK", called_computations={{gt}}
}}
"""


def test_topk_matches_xla():
    # XLA:CPU via jax 0.10.2: lax.top_k(x, 4).
    x = np.array([[1, 5, 5, -0.0, 0, np.nan, 3], [2, 2, 2, 2, 2, 2, 2]], np.float32)
    values, indices = run(topk_text("f32[2,7]", 4), x)
    assert_same(values, np.array([[np.nan, 5, 5, 3], [2, 2, 2, 2]], np.float32))
    assert_same(indices, np.array([[5, 1, 2, 6], [0, 1, 2, 3]], np.int32))


def test_topk_total_order_of_special_values():
    # XLA:CPU: [-0, 0, -1, nan, -nan, -inf, inf, 0] sorts as nan, inf, 0(1), 0(7), -0(0),
    # -1, -inf, -nan (indices 3 6 1 7 0 2 5 4).
    neg_nan = np.array([0xFFC00000], np.uint32).view(np.float32)[0]
    x = np.array([[-0.0, 0.0, -1, np.nan, neg_nan, -np.inf, np.inf, 0.0]], np.float32)
    values, indices = run(topk_text("f32[1,8]", 8), x)
    assert_same(indices, np.array([[3, 6, 1, 7, 0, 2, 5, 4]], np.int32))
    assert values.view(np.uint32).tolist() == [[2143289344, 2139095040, 0, 0, 2147483648,
                                                3212836864, 4286578688, 4290772992]]


@pytest.mark.parametrize("type_name", ["f16", "bf16", "f64", "s32", "u8", "s64"])
def test_topk_other_types(type_name):
    dtype = np_dtype(type_name)
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype=np.float64).astype(dtype)
    values, indices = run(topk_text(f"{type_name}[8]", 3), x)
    assert_same(indices, np.array([5, 7, 4], np.int32))
    assert_same(values, x[[5, 7, 4]])


def test_sharding_annotations_are_identities_on_one_device():
    text = """
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT s = f32[4] custom-call(x), custom_call_target="Sharding", sharding={replicated}
}
"""
    x = np.arange(4, dtype=np.float32)
    assert_same(run(text, x), x)
