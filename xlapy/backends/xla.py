"""Backend ``xla`` (real XLA:CPU through jax) and the rest of xlapy that calls jax (an
optional extra: ``pip install 'xlapy[jax]'``).

Besides this module only the jax front ends (xlapy/jit.py, xlapy/tools/jax_compare.py)
import jax; this module imports it only inside its functions, so ``import xlapy`` works
without it. Owns:

- ``require_jax()``: jax, or an InvalidArgumentError saying how to install it.
- ``lower_to_module(lowered)``: the xlapy Module of a ``jax.jit(f).lower(...)`` result, read
  from the HloModuleProto jax hands XLA (``compiler_ir("hlo")``): the proto is lossless,
  where jax's ``as_text(dialect="hlo")`` is a print of it.
- Running any HLO module on real XLA:CPU through jaxlib (``XlaCpuBackend``, registered as
  backend ``xla``; ``run_on_xla(module, args)``): the module is serialized
  as an HloModuleProto (xlapy.proto), turned into a jaxlib XlaComputation, converted to
  StableHLO by jaxlib's ``xla_computation_to_mlir_module`` and compiled by jax's CPU client.
  Tuple-shaped parameters and nested results are flattened by a wrapper entry that calls
  the original one (XLA inlines it), so every argument and result is one array.
- ``xla_values(module, args)``: the value XLA:CPU computes for every entry instruction, from
  one compilation of the module whose root is the tuple of all of them (the bisection's
  reference values when the reference is XLA).

One device only: jax's CPU client has one device unless XLA_FLAGS says otherwise.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from xlapy.backends.base import Backend, DeviceProgram
from xlapy.errors import InvalidArgumentError, XlaError
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.interpreter.values import TOKEN, to_value
from xlapy.proto import module_to_proto
from xlapy.shape import Shape

_LOCK = threading.Lock()


class XlaReferenceError(XlaError):
    """Real XLA (through jax) rejected or failed on a module xlapy gave it."""


def require_jax():
    """The jax module, or a clear error when it is not installed."""
    try:
        import jax
    except ImportError:
        raise InvalidArgumentError("this needs jax (the optional extra: pip install "
                                   "'xlapy[jax]', or pip install jax)") from None
    return jax


def lower_to_module(lowered) -> Module:
    """The xlapy Module of a ``jax.stages.Lowered`` (through its HloModuleProto)."""
    from xlapy.proto import parse_hlo_module_proto

    computation = lowered.compiler_ir("hlo")
    return parse_hlo_module_proto(computation.as_serialized_hlo_module_proto())


# -- a module XLA can take: array parameters, a flat tuple of array results ----------------------


@dataclass
class _FlatModule:
    module: Module
    param_shapes: list[Shape]  # the original entry parameters
    result_shape: Shape  # the original root shape
    result_paths: list[tuple[int, ...]] = field(default_factory=list)  # array leaves of it


def _array_leaves(shape: Shape, path=()) -> list[tuple[tuple[int, ...], Shape]]:
    if shape.is_tuple():
        out = []
        for i, s in enumerate(shape.tuple_shapes):
            out += _array_leaves(s, path + (i,))
        return out
    return [(path, shape)] if shape.is_array() else []


def _flat_interface(module: Module) -> _FlatModule:
    """``module`` itself when its parameters are arrays and its result an array or a flat
    tuple of arrays; else a copy whose new entry takes one parameter per array leaf,
    rebuilds the original arguments, calls the original entry and returns its array leaves."""
    from xlapy.opdefs import make_instruction

    entry = module.entry
    params = [p.shape for p in entry.parameters]
    result = entry.root.shape
    leaves = _array_leaves(result)
    simple_result = result.is_array() or (
        result.is_tuple() and all(s.is_array() for s in result.tuple_shapes))
    if all(s.is_array() for s in params) and simple_result:
        return _FlatModule(module, params, result, [p for p, _ in leaves])
    copy = module.clone(suffix="")
    old = copy.entry
    wrapper = Computation(f"{old.name}.flat")
    counter = [0]

    def add(instr: Instruction) -> Instruction:
        wrapper.add_instruction(instr)
        return instr

    def rebuild(shape: Shape) -> Instruction:
        if shape.is_tuple():
            parts = [rebuild(s) for s in shape.tuple_shapes]
            return add(make_instruction("tuple", parts, name="arg.tuple"))
        if shape.is_token():
            return add(make_instruction("after-all", [], name="arg.token"))
        if not shape.is_array():
            raise XlaReferenceError(f"cannot pass a {shape} argument to XLA")
        p = make_instruction("parameter", [], {"parameter_number": counter[0]}, shape=shape,
                             name=f"arg.{counter[0]}")
        counter[0] += 1
        return add(p)

    args = [rebuild(s) for s in params]
    call = add(make_instruction("call", args, {"to_apply": old}, shape=result, name="entry"))
    outs = []
    for path, _ in leaves:
        value = call
        for i in path:
            value = add(make_instruction("get-tuple-element", [value], {"index": i},
                                         name="out"))
        outs.append(value)
    wrapper.root = add(make_instruction("tuple", outs, name="outs"))
    for key in ("entry_computation_layout", "input_output_alias", "buffer_donor"):
        copy.config.pop(key, None)
    copy.add_computation(wrapper, entry=True)
    return _FlatModule(copy, params, result, [p for p, _ in leaves])


def _flat_arguments(args: list, shapes: list[Shape]) -> list[np.ndarray]:
    out: list[np.ndarray] = []

    def walk(value, shape: Shape):
        if shape.is_tuple():
            for v, s in zip(value, shape.tuple_shapes):
                walk(v, s)
        elif shape.is_array():
            out.append(value)

    for value, shape in zip(args, shapes):
        walk(value, shape)
    return out


def _rebuild(shape: Shape, leaves: dict):
    def build(s: Shape, path):
        if s.is_tuple():
            return tuple(build(t, path + (i,)) for i, t in enumerate(s.tuple_shapes))
        if s.is_token():
            return TOKEN
        return leaves[path]

    return build(shape, ())


# -- compiling and running on XLA:CPU -------------------------------------------------------------


def _initialize_lapack() -> None:
    """Set jaxlib's LAPACK kernel pointers (jax does it when it first lowers a linear
    algebra op; a module holding ``lapack_*`` custom calls would crash without it)."""
    try:
        from jax._src.lib import lapack
    except ImportError:  # pragma: no cover - a jaxlib without LAPACK kernels
        return
    lapack._lapack.initialize()


#: Opcodes of XLA's own pipeline (fusions, layout bitcasts, async pairs): a module holding
#: them is a post-optimization dump, which XLA compiles only as it left its own pipeline;
#: through StableHLO its layouts are lost and XLA:CPU aborts the process on some of them.
_PIPELINE_OPCODES = frozenset({
    "fusion", "bitcast", "async-start", "async-update", "async-done", "copy-start",
    "copy-done", "all-gather-start", "all-gather-done", "all-reduce-start", "all-reduce-done",
    "collective-permute-start", "collective-permute-done",
})


def _check_supported(module: Module) -> None:
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode in _PIPELINE_OPCODES:
                raise XlaReferenceError(
                    f"the xla backend compiles modules before XLA's optimizations (jax's "
                    f"lowering, *.before_optimizations dumps); {module.name} holds "
                    f"{instr.opcode} %{instr.name}, which only XLA's own pipeline produces")


class XlaCpuExecutable:
    """A module compiled by real XLA:CPU (jax's CPU client); ``run(args)`` -> value."""

    def __init__(self, module: Module):
        require_jax()
        import jax.extend.backend
        from jax._src.lib import xla_client as xc

        _check_supported(module)
        _initialize_lapack()

        if module.replica_count * module.num_partitions != 1:
            raise XlaReferenceError(
                f"the xla backend runs one device; {module.name} has "
                f"{module.replica_count} replicas x {module.num_partitions} partitions")
        self.flat = _flat_interface(module)
        self.entry = module.entry
        try:
            data = module_to_proto(self.flat.module).SerializeToString()
            computation = xc.XlaComputation(data)
            mlir = xc._xla.mlir.xla_computation_to_mlir_module(computation)
            self.backend = jax.extend.backend.get_backend("cpu")
            self.device = self.backend.local_devices()[0]
            with _LOCK:
                self.executable = self.backend.compile_and_load(
                    mlir, xc.DeviceList((self.device,)), xc.CompileOptions())
        except XlaError:
            raise
        except Exception as e:  # noqa: BLE001 - jaxlib raises its own error types
            raise XlaReferenceError(f"XLA:CPU could not compile {module.name}: "
                                    f"{type(e).__name__}: {str(e).splitlines()[0]}") from None

    def run(self, args: list):
        jax = require_jax()
        params = self.entry.parameters
        if len(args) != len(params):
            raise InvalidArgumentError(f"xla: {self.entry.name} takes {len(params)} arguments, "
                                       f"got {len(args)}")
        values = [to_value(a, p.shape, f"xla: argument {p.parameter_number}")
                  for a, p in zip(args, params)]
        flat = _flat_arguments(values, self.flat.param_shapes)
        try:
            with jax.enable_x64(True):
                arrays = [jax.device_put(np.ascontiguousarray(a), self.device) for a in flat]
                results = self.executable.execute_sharded(arrays)
                outs = [np.asarray(r[0]) for r in results.disassemble_into_single_device_arrays()]
        except Exception as e:  # noqa: BLE001
            raise XlaReferenceError(f"XLA:CPU failed running {self.flat.module.name}: "
                                    f"{type(e).__name__}: {str(e).splitlines()[0]}") from None
        if len(outs) != len(self.flat.result_paths):
            raise XlaReferenceError(f"XLA:CPU returned {len(outs)} results for "
                                    f"{len(self.flat.result_paths)} expected")
        return _rebuild(self.flat.result_shape, dict(zip(self.flat.result_paths, outs)))


def run_on_xla(module: Module, args: list):
    """``module`` compiled and run once by real XLA:CPU on ``args``."""
    return XlaCpuExecutable(module).run(list(args))


class _XlaProgram(DeviceProgram):
    def __init__(self, executable: XlaCpuExecutable):
        self.executable = executable

    def run(self, args, options):
        return self.executable.run(list(args))


class XlaCpuBackend(Backend):
    """Runtime backend ``xla``: real XLA:CPU through jax (``Client(backend="xla")``,
    ``xlapy run --backend xla`` / ``--reference xla``)."""

    name = "xla"

    def __init__(self):
        require_jax()

    def compile(self, module: Module) -> DeviceProgram:
        return _XlaProgram(XlaCpuExecutable(module))


# -- every entry instruction's value --------------------------------------------------------------


def _observable(instr: Instruction) -> bool:
    leaves = [s for _, s in instr.shape.leaves()] if instr.shape.is_tuple() else [instr.shape]
    return all(s.is_array() for s in leaves) and instr.opcode != "parameter"


def xla_values(module: Module, args: list) -> dict[int, object]:
    """The value XLA:CPU computes for each entry instruction of ``module`` (by
    ``id(instruction)``; parameters are the arguments; token values are TOKEN; an
    instruction whose shape holds a token inside a tuple is left out)."""
    from xlapy.opdefs import make_instruction

    entry = module.entry
    values: dict[int, object] = {}
    for p, a in zip(entry.parameters, args):
        values[id(p)] = to_value(a, p.shape, f"argument {p.parameter_number}")
    for instr in entry.instructions:
        if instr.shape.is_token():
            values[id(instr)] = TOKEN
    observed = [i for i in entry.post_order() if _observable(i)]
    if not observed:
        return values
    copy = module.clone(suffix="observed")
    by_name = {i.name: i for i in copy.entry.instructions}
    targets = [by_name[i.name] for i in observed]
    root = make_instruction("tuple", targets, name="observed")
    copy.entry.add_instruction(root)
    copy.entry.root = root
    for key in ("entry_computation_layout", "input_output_alias", "buffer_donor"):
        copy.config.pop(key, None)
    result = run_on_xla(copy, list(args))
    for instr, value in zip(observed, result):
        values[id(instr)] = value
    return values


__all__ = ["XlaCpuBackend", "XlaCpuExecutable", "XlaReferenceError", "lower_to_module",
           "require_jax", "run_on_xla", "xla_values"]
