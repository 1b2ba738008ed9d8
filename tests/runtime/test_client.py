"""Client, Device, Buffer, Executable: compiling Modules, XlaComputations and HLO text,
calling a one-device executable, Buffers that stay on their device (no copy per call),
results as Buffers fed to the next call, donation through input_output_alias (the output
reuses the donated memory, the donated Buffer is deleted), the errors of each misuse, the
backend interface, and how one failing device is reported."""

import numpy as np
import pytest
from runtime_helpers import f32, hlo, same

import xlapy
from xlapy import InvalidArgumentError, XlaBuilder, ops, parse_hlo_module, parse_shape
from xlapy.interpreter import UnimplementedError
from xlapy.interpreter.custom_calls import unregister_custom_call
from xlapy.runtime import (
    Backend,
    Buffer,
    Client,
    DeviceProgram,
    ExecutionError,
    register_backend,
)

DOUBLE = hlo("  x = f32[3] parameter(0)\n  ROOT y = f32[3] add(x, x)", comps="")

ACCUMULATE = """HloModule acc, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  acc = f32[3] parameter(0)
  x = f32[3] parameter(1)
  ROOT s = f32[3] add(acc, x)
}
"""

ACCUMULATE_TUPLE = """HloModule acc2, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }
ENTRY e {
  a = f32[2] parameter(0)
  b = s32[2] parameter(1)
  one = s32[] constant(1)
  ones = s32[2] broadcast(one), dimensions={}
  c = s32[2] add(b, ones)
  d = f32[2] add(a, a)
  ROOT t = (f32[2], s32[2]) tuple(d, c)
}
"""


# -- compiling and calling -----------------------------------------------------------------------


def test_compile_text_module_and_computation():
    client = Client()
    same(client.compile(DOUBLE)(f32(1, 2, 3)), f32(2, 4, 6))
    same(client.compile(parse_hlo_module(DOUBLE))(f32(1, 2, 3)), f32(2, 4, 6))
    b = XlaBuilder("f")
    x = ops.Parameter(b, 0, parse_shape("f32[3]"), "x")
    comp = b.build(ops.Mul(x, x))
    same(client.compile(comp)(f32(1, 2, 3)), f32(1, 4, 9))


def test_top_level_exports():
    assert xlapy.Client is Client
    assert callable(xlapy.register_custom_call)
    assert callable(xlapy.register_custom_call_library)


def test_tuple_results_and_tuple_parameters():
    text = hlo("  p = (f32[2], s32[]) parameter(0)\n"
               "  a = f32[2] get-tuple-element(p), index=0\n"
               "  n = s32[] get-tuple-element(p), index=1\n"
               "  ROOT t = (s32[], f32[2]) tuple(n, a)", comps="")
    n, a = Client().compile(text)((f32(1, 2), 7))
    assert int(n) == 7
    same(a, f32(1, 2))


def test_replica_count_comes_from_the_module():
    text = hlo("  ROOT r = u32[] replica-id()", comps="", header=", replica_count=3")
    exe = Client().compile(text)
    assert exe.num_replicas == 3
    assert [int(v) for v in exe.execute([[], [], []])] == [0, 1, 2]
    assert Client().compile(text, replicas=1).num_devices == 1


def test_compile_does_not_change_the_callers_module():
    module = parse_hlo_module(hlo("  ROOT r = u32[] replica-id()", comps=""))
    exe = Client().compile(module, replicas=2)
    assert module.replica_count == 1
    assert exe.module.replica_count == 2


def test_argument_errors():
    exe = Client().compile(DOUBLE)
    with pytest.raises(InvalidArgumentError, match=r"execute: e takes 1 arguments \(f32\[3\]"
                       r"\{0\}\), replica 0 \(device 0\) got 2"):
        exe(f32(1, 2, 3), f32(1, 2, 3))
    with pytest.raises(InvalidArgumentError, match=r"argument 0 \(%x\) of replica 0 \(device "
                       r"0\): expected f32\[3\]\{0\}, got f32\[2\]: the dimensions differ"):
        exe(f32(1, 2))
    with pytest.raises(InvalidArgumentError, match="replicas must be a positive integer, got 0"):
        Client().compile(DOUBLE, replicas=0)
    with pytest.raises(InvalidArgumentError, match="compile: expected a Module, an "
                       "XlaComputation or HLO text, got int"):
        Client().compile(3)


def test_unknown_backend():
    with pytest.raises(InvalidArgumentError, match="unknown backend 'tpu'; available: "):
        Client(backend="tpu")


def test_a_backend_plugs_in_under_the_same_api():
    seen = []

    class Constant(DeviceProgram):
        def run(self, args, options):
            seen.append((options.replica_id, options.replica_count))
            return np.float32(len(args) + options.replica_id)

    class ConstantBackend(Backend):
        name = "constant"

        def compile(self, module):
            return Constant()

    from xlapy.backends.base import BACKENDS

    register_backend("test-constant", ConstantBackend)
    try:
        exe = Client(backend="test-constant").compile(DOUBLE, replicas=2)
        assert [float(v) for v in exe.execute([[f32(0, 0, 0)], [f32(0, 0, 0)]])] == [1.0, 2.0]
        assert sorted(seen) == [(0, 2), (1, 2)]
    finally:  # other tests list the registered backends
        BACKENDS.pop("test-constant", None)


# -- buffers ---------------------------------------------------------------------------------------


def test_buffer_round_trip():
    client = Client()
    buf = client.buffer_from_pyval(f32(1, 2, 3))
    assert isinstance(buf, Buffer)
    assert str(buf.shape) == "f32[3]{0}"
    assert buf.device is client.devices[0]
    same(buf.to_numpy(), f32(1, 2, 3))
    same(np.asarray(buf), f32(1, 2, 3))
    copy = buf.to_numpy()
    copy[0] = 99  # a host copy: the device data does not change
    same(buf.to_numpy(), f32(1, 2, 3))
    converted = client.buffer_from_pyval([1, 2], shape="bf16[2]")
    assert str(converted.shape) == "bf16[2]{0}"


def test_buffers_are_not_copied_per_call():
    # The program sees the very memory of the Buffer: a Python custom call records the
    # address of its operand.
    seen = []

    def record(x):
        seen.append(x.ctypes.data)
        return x

    xlapy.register_custom_call("test_client_record", record)
    try:
        text = hlo("  x = f32[3] parameter(0)\n"
                   "  ROOT y = f32[3] custom-call(x), custom_call_target=\"test_client_record\"",
                   comps="")
        client = Client()
        exe = client.compile(text)
        buf = client.buffer_from_pyval(f32(1, 2, 3))
        exe.execute([[buf]])
        exe.execute([[buf]])
        assert seen == [buf.unsafe_buffer_pointer()] * 2
    finally:
        unregister_custom_call("test_client_record")


def test_results_as_buffers_feed_the_next_call():
    client = Client()
    exe = client.compile(DOUBLE)
    (out,) = exe.execute([[f32(1, 2, 3)]], return_buffers=True)
    assert isinstance(out, Buffer) and str(out.shape) == "f32[3]{0}"
    (out2,) = exe.execute([[out]], return_buffers=True)
    same(out2.to_numpy(), f32(4, 8, 12))
    same(out.to_numpy(), f32(2, 4, 6))  # not donated: still valid


def test_tuple_results_as_buffers():
    text = hlo("  x = f32[2] parameter(0)\n  n = s32[] constant(5)\n"
               "  ROOT t = (f32[2], s32[]) tuple(x, n)", comps="")
    client = Client()
    (result,) = client.compile(text).execute([[f32(1, 2)]], return_buffers=True)
    a, n = result
    assert isinstance(a, Buffer) and isinstance(n, Buffer)
    assert int(n.to_numpy()) == 5


def test_an_identity_result_does_not_share_memory_with_its_input():
    client = Client()
    exe = client.compile(hlo("  x = f32[2] parameter(0)\n  ROOT c = f32[2] copy(x)", comps=""))
    buf = client.buffer_from_pyval(f32(1, 2))
    (out,) = exe.execute([[buf]], return_buffers=True)
    assert out.unsafe_buffer_pointer() != buf.unsafe_buffer_pointer()


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_tuple_results_of_buffer_calls_share_no_memory(backend):
    """A flat tuple result from Buffer arguments (the per-call fast path): an input
    returned as is, one value returned twice, a reshape of another result - every output
    its own memory, read-only, of its element's shape; repeated calls alike."""
    text = hlo("  x = f32[2,3] parameter(0)\n  y = f32[2,3] add(x, x)\n"
               "  r = f32[6] reshape(y)\n  n = s32[] constant(5)\n"
               "  ROOT t = (f32[2,3], f32[2,3], f32[2,3], f32[6], s32[]) tuple(x, y, y, r, n)",
               comps="")
    client = Client(backend=backend)
    exe = client.compile(text)
    buf = client.buffer_from_pyval(np.arange(6, dtype=np.float32).reshape(2, 3))
    for _ in range(2):
        (outs,) = exe.execute([[buf]], return_buffers=True)
        assert [str(o.shape) for o in outs] == ["f32[2,3]{1,0}"] * 3 + ["f32[6]{0}", "s32[]"]
        arrays = [o._storage.array for o in outs] + [buf._storage.array]
        for i, a in enumerate(arrays):
            assert not a.flags.writeable
            for b in arrays[i + 1:]:
                assert not np.may_share_memory(a, b)
        same(arrays[1], 2 * arrays[0])
        same(arrays[3], arrays[2].reshape(6))
        assert int(arrays[4]) == 5
    (plain,) = exe.execute([[buf]])
    assert isinstance(plain, tuple) and len(plain) == 5
    assert not any(np.may_share_memory(plain[1], p) for p in plain[2:4])


def test_buffer_on_another_device_is_rejected():
    client = Client()
    exe = client.compile(DOUBLE)
    other = client.buffer_from_pyval(f32(1, 2, 3), device=1)
    with pytest.raises(InvalidArgumentError, match=r"argument 0 \(%x\) of replica 0 \(device "
                       r"0\) is a Buffer on device 1, but replica 0 \(device 0\) runs there; "
                       r"move it with buffer.copy_to_device\(0\)"):
        exe.execute([[other]])
    same(exe.execute([[other.copy_to_device(0)]])[0], f32(2, 4, 6))


def test_buffer_of_the_wrong_shape_is_rejected():
    client = Client()
    buf = client.buffer_from_pyval(np.array([1, 2, 3], np.int32))
    with pytest.raises(InvalidArgumentError, match=r"the Buffer holds s32\[3\]\{0\}, the "
                       r"parameter is f32\[3\]\{0\}"):
        client.compile(DOUBLE).execute([[buf]])


def test_buffers_per_replica_on_their_devices():
    client = Client()
    exe = client.compile(DOUBLE, replicas=2)
    bufs = [client.buffer_from_pyval(f32(r, r, r), device=d) for r, d in enumerate(exe.devices)]
    got = exe.execute([[b] for b in bufs], return_buffers=True)
    assert [o.device for o in got] == exe.devices
    same(got[1].to_numpy(), f32(2, 2, 2))


def test_deleted_buffer_cannot_be_used():
    client = Client()
    buf = client.buffer_from_pyval(f32(1, 2, 3))
    buf.delete()
    assert buf.is_deleted()
    with pytest.raises(InvalidArgumentError, match=r"Buffer.to_numpy: the f32\[3\]\{0\} buffer "
                       r"on device 0 was deleted; it can no longer be used"):
        buf.to_numpy()
    with pytest.raises(InvalidArgumentError, match="was deleted"):
        client.compile(DOUBLE).execute([[buf]])


# -- donation ---------------------------------------------------------------------------------------


def test_donated_buffer_is_reused_by_the_aliased_output():
    client = Client()
    exe = client.compile(ACCUMULATE)
    acc = client.buffer_from_pyval(f32(0, 0, 0))
    address = acc.unsafe_buffer_pointer()
    storage = acc._storage
    for step in range(1, 4):
        (new,) = exe.execute([[acc, f32(1, 2, 3)]], return_buffers=True)
        assert acc.is_deleted()
        assert new._storage is storage  # the same device memory
        assert new.unsafe_buffer_pointer() == address
        acc = new
    same(acc.to_numpy(), f32(3, 6, 9))


def test_donated_buffer_raises_when_used_again():
    client = Client()
    exe = client.compile(ACCUMULATE)
    acc = client.buffer_from_pyval(f32(1, 1, 1))
    exe.execute([[acc, f32(1, 1, 1)]])
    with pytest.raises(InvalidArgumentError, match=r"Buffer.to_numpy: the f32\[3\]\{0\} buffer "
                       r"on device 0 was donated to an execution of acc; it can no longer be "
                       r"used"):
        acc.to_numpy()
    with pytest.raises(InvalidArgumentError, match="was donated"):
        exe.execute([[acc, f32(1, 1, 1)]])


def test_arrays_for_aliased_parameters_are_not_donated():
    client = Client()
    exe = client.compile(ACCUMULATE)
    x = f32(1, 2, 3)
    same(exe(x, x), f32(2, 4, 6))
    same(x, f32(1, 2, 3))


def test_non_donated_parameter_keeps_its_buffer():
    client = Client()
    exe = client.compile(ACCUMULATE)
    acc, x = client.buffer_from_pyval(f32(0, 0, 0)), client.buffer_from_pyval(f32(1, 1, 1))
    exe.execute([[acc, x]])
    assert acc.is_deleted() and not x.is_deleted()


def test_a_donated_buffer_passed_twice_is_rejected():
    client = Client()
    exe = client.compile(ACCUMULATE)
    acc = client.buffer_from_pyval(f32(0, 0, 0))
    with pytest.raises(InvalidArgumentError, match=r"a donated Buffer \(input_output_alias "
                       r"parameter\) is passed more than once"):
        exe.execute([[acc, acc]])
    assert not acc.is_deleted()


def test_donation_into_tuple_outputs():
    client = Client()
    exe = client.compile(ACCUMULATE_TUPLE)
    a = client.buffer_from_pyval(f32(1, 2))
    b = client.buffer_from_pyval(np.array([5, 6], np.int32))
    pa, pb = a.unsafe_buffer_pointer(), b.unsafe_buffer_pointer()
    ((d, c),) = exe.execute([[a, b]], return_buffers=True)
    assert a.is_deleted() and b.is_deleted()
    assert (d.unsafe_buffer_pointer(), c.unsafe_buffer_pointer()) == (pa, pb)
    same(d.to_numpy(), f32(2, 4))
    same(c.to_numpy(), np.array([6, 7], np.int32))


def test_failed_execution_does_not_donate():
    client = Client(timeout=0.1)
    text = ACCUMULATE.replace("ROOT s = f32[3] add(acc, x)",
                              "s = f32[3] add(acc, x)\n  t = token[] after-all()\n"
                              "  in = (f32[3], token[]) infeed(t)\n"
                              "  ROOT y = f32[3] get-tuple-element(in), index=0")
    acc = client.buffer_from_pyval(f32(0, 0, 0))
    with pytest.raises(xlapy.EvaluationError, match="infeed"):
        client.compile(text).execute([[acc, f32(1, 1, 1)]])
    assert not acc.is_deleted()


# -- errors of devices ---------------------------------------------------------------------------------


def test_one_device_keeps_the_error_type():
    text = hlo("  x = f32[2] parameter(0)\n"
               "  ROOT y = f32[2] custom-call(x), custom_call_target=\"test_client_nowhere\"",
               comps="")
    with pytest.raises(UnimplementedError, match="no custom-call target named "
                       "'test_client_nowhere'"):
        Client().compile(text)(f32(1, 2))


def test_a_failing_replica_is_named():
    def fail_on_one(x, ctx):
        if ctx.options.replica_id == 1:
            raise ValueError("replica one refuses")
        return x

    xlapy.register_custom_call("test_client_fail_on_one", fail_on_one)
    try:
        text = hlo("  x = f32[2] parameter(0)\n"
                   "  cc = f32[2] custom-call(x), custom_call_target=\"test_client_fail_on_one\"\n"
                   "  ROOT r = f32[2] all-reduce(cc), replica_groups={}, to_apply=add")
        exe = Client(timeout=30).compile(text, replicas=2)
        with pytest.raises(ExecutionError, match=r"^replica 1: custom-call "
                           r"'test_client_fail_on_one' \(instruction %cc\) raised ValueError: "
                           r"replica one refuses") as info:
            exe.execute([[f32(1, 2)], [f32(3, 4)]])
        assert info.value.device == (1, 0)
        assert set(info.value.errors) == {(0, 0), (1, 0)}
        assert "abandoned because replica 1 failed" in str(info.value.errors[(0, 0)])
    finally:
        unregister_custom_call("test_client_fail_on_one")


# -- argument types: NumPy arrays must match, Python values convert without loss ---------------

S8 = hlo("  x = s8[2] parameter(0)\n  ROOT y = s8[2] add(x, x)", comps="")


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("module,arg,message", [
    (DOUBLE, np.ones(3), ("expected f32[3]{0}, got f64[3] (NumPy dtype float64): the element "
                         "types differ; convert the array to f32 first")),
    (DOUBLE, np.ones(3, np.complex64), ("expected f32[3]{0}, got c64[3] (NumPy dtype "
                                       "complex64): the element types differ")),
    (DOUBLE, np.float32(1), "expected f32[3]{0}, got f32[]: the dimensions differ"),
    (DOUBLE, np.array(["a", "b", "c"]), ("expected f32[3]{0}, got an array of NumPy dtype <U1 "
                                        "and dimensions [3]: the element types differ")),
    (DOUBLE, [1j, 2, 3], ("expected f32[3]{0}, got complex values: f32 cannot hold their "
                         "imaginary parts")),
    (S8, [1.5, 2.0], "expected s8[2]{0}, got floating-point values: pass integers for s8"),
    (S8, [300, 1], "expected s8[2]{0}, got the integer 300, outside s8's range [-128, 127]"),
    (S8, np.array([1, 2], np.int32), "expected s8[2]{0}, got s32[2] (NumPy dtype int32)"),
])
def test_argument_of_the_wrong_type_is_refused(backend, module, arg, message):
    exe = Client(backend=backend).compile(module)
    with pytest.raises(InvalidArgumentError) as info:
        exe(arg)
    assert str(info.value).startswith("execute: argument 0 (%x) of replica 0 (device 0): " +
                                      message)
    with pytest.raises(InvalidArgumentError, match="^execute: argument 0 \\(%x\\) of replica 0"):
        exe.execute([[arg]])  # the general path says the same


def test_python_values_convert_without_loss():
    assert Client().compile(DOUBLE)([1, 2.5, True]).tolist() == [2, 5, 2]
    assert Client().compile(S8)([-128, 127]).tolist() == [0, -2]


def test_evaluate_refuses_the_wrong_type_too():
    from xlapy.interpreter import evaluate
    from xlapy.parser import parse_hlo_module

    with pytest.raises(InvalidArgumentError, match=r"^evaluate: argument 0 \(%x\): expected "
                       r"f32\[3\]\{0\}, got f64\[3\]"):
        evaluate(parse_hlo_module(DOUBLE), np.ones(3))
