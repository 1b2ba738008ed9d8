"""C custom-call targets through the spec's ABI ``extern "C" void f(void* out, void** in)``:
a small library compiled here with the system C compiler, registered with
xlapy.register_custom_call_library, called from HLO. The spec's ``myfunc`` example, operand
and result layouts honoured (bytes as the shape's layout lays them out), tuple results (out
is an array of pointers), several replicas, and the safety rule: an HLO module reaches only
registered targets, never a symbol or library by itself."""

import shutil
import subprocess

import numpy as np
import pytest
from runtime_helpers import f32, hlo, same

import xlapy
from xlapy import InvalidArgumentError, XlaBuilder, ops, parse_shape
from xlapy.interpreter import UnimplementedError
from xlapy.interpreter.custom_calls import lookup_custom_call, unregister_custom_call
from xlapy.runtime import Client

SOURCE = r"""
#include <string.h>

/* The spec's example: x = f32[2] {1,2}, y = f32[2x3] {{10,20,30},{40,50,60}}, out f32[3x3]. */
void myfunc(void* out, void** in) {
  float (*x) = (float*)in[0];
  float (*y)[3] = (float (*)[3])in[1];
  float (*z)[3] = (float (*)[3])out;
  int ok = x[0] == 1 && x[1] == 2 && y[0][0] == 10 && y[0][1] == 20 && y[0][2] == 30 &&
           y[1][0] == 40 && y[1][1] == 50 && y[1][2] == 60;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      z[i][j] = ok ? (float)(10 * i + j) : -1.0f;
  z[0][0] = x[1] + y[1][0];
}

/* Copies the 6 floats of operand 0 as they lie in memory. */
void rt_raw_copy(void* out, void** in) { memcpy(out, in[0], 6 * sizeof(float)); }

/* Writes 0..5 into the result's memory in order. */
void rt_iota_memory(void* out, void** in) {
  for (int i = 0; i < 6; i++) ((float*)out)[i] = (float)i;
}

/* Tuple result (f32[2], s32[]): out is an array of pointers to the two buffers. */
void rt_sum_diff(void* out, void** in) {
  void** outs = (void**)out;
  float* a = (float*)in[0];
  float* b = (float*)in[1];
  float* s = (float*)outs[0];
  s[0] = a[0] + b[0];
  s[1] = a[0] - b[0];
  *(int*)outs[1] = 7;
}

/* Never registered: HLO must not reach it. */
void rt_secret(void* out, void** in) { *(float*)out = 666.0f; }
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler, "the tests need a C compiler (gcc)"
    folder = tmp_path_factory.mktemp("cclib")
    src, lib = folder / "funcs.c", folder / "libfuncs.so"
    src.write_text(SOURCE)
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    names = ["myfunc", "rt_raw_copy", "rt_iota_memory", "rt_sum_diff"]
    assert xlapy.register_custom_call_library(lib, names) == names
    yield lib
    for name in names:
        unregister_custom_call(name)


def test_spec_myfunc_example(library):
    b = XlaBuilder("spec")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    y = ops.Parameter(b, 1, parse_shape("f32[2,3]"), "y")
    comp = b.build(ops.CustomCall(b, "myfunc", [x, y], parse_shape("f32[3,3]")))
    z = Client().compile(comp)(f32(1, 2), np.array([[10, 20, 30], [40, 50, 60]], np.float32))
    # z[0][0] = x[1] + y[1][0]; the other elements say the inputs arrived as the spec shows
    same(z, np.array([[42, 1, 2], [10, 11, 12], [20, 21, 22]], np.float32))
    target = lookup_custom_call("myfunc")
    assert (target.kind, target.source) == ("c", str(library.resolve()))


def test_operand_layout_is_honoured(library):
    # A column-major operand ({0,1}) reaches C in column-major order.
    text = hlo("  y = f32[2,3]{0,1} parameter(0)\n"
               "  ROOT r = f32[6] custom-call(y), custom_call_target=\"rt_raw_copy\"", comps="")
    got = Client().compile(text)(np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    same(got, f32(1, 4, 2, 5, 3, 6))


def test_operand_layout_constraints_are_honoured(library):
    text = hlo("  y = f32[2,3]{1,0} parameter(0)\n"
               "  ROOT r = f32[6]{0} custom-call(y), custom_call_target=\"rt_raw_copy\", "
               "operand_layout_constraints={f32[2,3]{0,1}}", comps="")
    got = Client().compile(text)(np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    same(got, f32(1, 4, 2, 5, 3, 6))


def test_result_layout_is_honoured(library):
    # Memory 0..5 read as a column-major f32[2,3].
    text = hlo("  ROOT r = f32[2,3]{0,1} custom-call(), custom_call_target=\"rt_iota_memory\"",
               comps="")
    same(Client().compile(text)(), np.array([[0, 2, 4], [1, 3, 5]], np.float32))


def test_tuple_result_gets_an_array_of_pointers(library):
    text = hlo("  a = f32[1] parameter(0)\n  b = f32[1] parameter(1)\n"
               "  ROOT t = (f32[2], s32[]) custom-call(a, b), custom_call_target=\"rt_sum_diff\"",
               comps="")
    s, n = Client().compile(text)(f32(5), f32(3))
    same(s, f32(8, 2))
    same(n, np.int32(7))


def test_c_target_on_several_replicas(library):
    text = hlo("  y = f32[2,3]{0,1} parameter(0)\n"
               "  ROOT r = f32[6] custom-call(y), custom_call_target=\"rt_raw_copy\"", comps="")
    exe = Client(timeout=5).compile(text, replicas=2)
    got = exe.execute([[np.full((2, 3), r, np.float32)] for r in range(2)])
    same(got[1], np.full(6, 1, np.float32))


@pytest.mark.parametrize("target", ["rt_secret", "system", "puts", "libfuncs.so:rt_secret"])
def test_hlo_reaches_only_registered_targets(library, target):
    # rt_secret is in the loaded library but was not listed; system/puts are in libc. An
    # HLO module names a target and nothing else: none of these runs.
    text = hlo(f"  ROOT r = f32[] custom-call(), custom_call_target=\"{target}\"", comps="")
    with pytest.raises(UnimplementedError, match=f"no custom-call target named '{target}' is "
                       "registered"):
        Client().compile(text)()


def test_the_library_path_is_no_target(library):
    text = hlo(f"  ROOT r = f32[] custom-call(), custom_call_target=\"{library}\"", comps="")
    with pytest.raises(UnimplementedError, match="no custom-call target named"):
        Client().compile(text)()


def test_other_abi_versions_are_rejected(library):
    text = hlo("  ROOT r = f32[6] custom-call(), custom_call_target=\"rt_iota_memory\", "
               "api_version=API_VERSION_STATUS_RETURNING", comps="")
    with pytest.raises(xlapy.EvaluationError, match=r"custom-call 'rt_iota_memory' "
                       r"\(instruction %r\): api_version=API_VERSION_STATUS_RETURNING is not "
                       r"supported for C targets"):
        Client().compile(text)()


def test_registration_errors(library, tmp_path):
    with pytest.raises(InvalidArgumentError, match=r"has no symbol 'rt_nothing'"):
        xlapy.register_custom_call_library(library, ["rt_nothing"])
    with pytest.raises(InvalidArgumentError, match=r"'myfunc' already registered; pass "
                       r"replace=True"):
        xlapy.register_custom_call_library(library, ["myfunc"])
    with pytest.raises(InvalidArgumentError, match="no file at"):
        xlapy.register_custom_call_library(tmp_path / "missing.so", ["f"])
    not_a_library = tmp_path / "text.so"
    not_a_library.write_text("hello")
    with pytest.raises(InvalidArgumentError, match="cannot load"):
        xlapy.register_custom_call_library(not_a_library, ["f"])
    assert xlapy.register_custom_call_library(library, "myfunc", replace=True) == ["myfunc"]


def test_python_targets_through_the_top_level_registry():
    xlapy.register_custom_call("rt_py_twice", lambda x: x * 2)
    try:
        text = hlo("  x = f32[2] parameter(0)\n"
                   "  ROOT r = f32[2] custom-call(x), custom_call_target=\"rt_py_twice\"", comps="")
        same(Client().compile(text)(f32(1, 2)), f32(2, 4))
    finally:
        unregister_custom_call("rt_py_twice")
