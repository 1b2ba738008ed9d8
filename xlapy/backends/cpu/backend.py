"""The compiled CPU backend: ``Client(backend="cpu")`` and ``xlapy run --backend cpu``.

``CpuBackend.compile(module)`` walks the entry computation in post order and cuts it into
steps. Maximal runs of consecutive supported elementwise/broadcast instructions with the
same output dimensions become ONE fused LLVM function (xlapy.backends.cpu.elemental
generates each element): ``void fused_k(in0*, ..., out0*, ..., i64 n)`` with noalias
buffers, a counted loop over the row-major output elements that computes the whole chain
per element (LLVM's loop vectoriser sees a simple loop). Parameters and constants do not
break a run (they have no operands); rank-0 constants read by a fusion are embedded as
immediates. Every other instruction runs through the interpreter's kernel
(``EvalContext.run_instruction``), so every module runs and gives the interpreter's results.

Compiled code is cached in memory per module fingerprint (the SHA-256 of the printed text):
compiling the same text again reuses the machine code.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from dataclasses import dataclass, field

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu.jit import get_jit
from xlapy.interpreter.evaluator import EvalContext, EvalOptions, EvaluationError
from xlapy.interpreter.registry import get_kernel
from xlapy.runtime.client import Backend, DeviceProgram
from xlapy.shape import dtypes

_CACHE: dict[str, list] = {}  # fingerprint -> compiled fusion callables, in step order
_CACHE_LOCK = threading.Lock()


@dataclass
class Fusion:
    """A compiled run: ``members`` in post order, ``inputs`` (buffers read), ``outputs``."""

    members: list
    dims: tuple[int, ...]
    inputs: list = field(default_factory=list)
    embedded: dict = field(default_factory=dict)  # id(constant) -> numpy scalar
    outputs: list = field(default_factory=list)
    fn: object = None

    def run(self, env: dict) -> None:
        n = int(np.prod(self.dims, dtype=np.int64))
        outs = [np.empty(self.dims, _dtype(o)) for o in self.outputs]
        if n:
            ins = [np.ascontiguousarray(env[id(i)], dtype=_dtype(i)) for i in self.inputs]
            self.fn(*[a.ctypes.data for a in ins], *[a.ctypes.data for a in outs], n)
        for o, a in zip(self.outputs, outs):
            env[id(o)] = a


def _dtype(instr) -> np.dtype:
    return np.dtype(dtypes.to_dtype(instr.shape.element_type))


def fingerprint(module) -> str:
    return hashlib.sha256(str(module).encode()).hexdigest()


def plan(module) -> list:
    """The steps of the entry computation: Instructions (interpreted) and Fusions."""
    comp = module.entry
    order = comp.post_order()
    users: dict[int, int] = {}
    for instr in order:
        for o in instr.operands:
            users.setdefault(id(o), 0)
            users[id(o)] += 1
    steps: list = []
    run: list = []

    def close():
        if run:
            steps.append(_make_fusion(list(run), users, comp.root))
            run.clear()

    for instr in order:
        if instr.opcode in ("parameter", "constant"):
            steps.append(instr)
            continue
        fusible = (instr.opcode in el.ELEMENTWISE or instr.opcode == "broadcast") \
            and el.supports(instr)
        if fusible and run and tuple(instr.shape.dimensions) == tuple(run[0].shape.dimensions):
            run.append(instr)
            continue
        close()
        if fusible:
            run.append(instr)
        else:
            steps.append(instr)
    close()
    return steps


def _make_fusion(members, users, root) -> Fusion:
    ids = {id(m) for m in members}
    fusion = Fusion(members, tuple(members[0].shape.dimensions))
    seen = set()
    for m in members:
        for o in m.operands:
            if id(o) in ids or id(o) in seen:
                continue
            seen.add(id(o))
            if o.opcode == "constant" and o.shape.is_array() and not o.shape.dimensions:
                fusion.embedded[id(o)] = o
            else:
                fusion.inputs.append(o)
    inside = {}
    for m in members:
        for o in m.operands:
            inside[id(o)] = inside.get(id(o), 0) + 1
    for m in members:
        if m is root or users.get(id(m), 0) > inside.get(id(m), 0):
            fusion.outputs.append(m)
    return fusion


def _emit(fusion: Fusion, fn_name: str, module: ir.Module, constants: dict) -> None:
    """Add ``fn_name`` computing ``fusion`` to ``module``. ``constants``: id -> value."""
    in_tys = [el.memory_type(i.shape.element_type).as_pointer() for i in fusion.inputs]
    out_tys = [el.memory_type(o.shape.element_type).as_pointer() for o in fusion.outputs]
    fnty = ir.FunctionType(ir.VoidType(), in_tys + out_tys + [el.I64])
    fn = ir.Function(module, fnty, name=fn_name)
    for k, arg in enumerate(fn.args[:-1]):
        arg.add_attribute("noalias")
        arg.name = (f"in{k}" if k < len(in_tys) else f"out{k - len(in_tys)}")
    n = fn.args[-1]
    n.name = "n"
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    in_ptr = {id(i): fn.args[k] for k, i in enumerate(fusion.inputs)}

    def loader(instr, index):
        et = instr.shape.element_type
        kind, ty = el.TYPES[et]
        if id(instr) in fusion.embedded:
            value = constants[id(instr)]
            if kind == "p":
                return ir.Constant(el.I1, int(bool(value)))
            if kind == "f":
                return ir.Constant(ty, float(value))
            return ir.Constant(ty, int(value) & ((1 << ty.width) - 1))
        dims = tuple(instr.shape.dimensions)
        if dims != index.dims:
            raise EvaluationError(f"cpu backend: index of {index.dims} for %{instr.name}")
        ptr = builder.gep(in_ptr[id(instr)], [index.linear], inbounds=True,
                          name=f"{instr.name}.ptr")
        v = builder.load(ptr, name=f"{instr.name}.load")
        if kind == "p":
            v = builder.icmp_unsigned("!=", v, ir.Constant(el.I8, 0), name=f"{instr.name}.pred")
        return v

    with _for_range(builder, n, "i") as i:
        index = el.Index(builder, fusion.dims, linear=i)
        emitter = el.ElementalEmitter(builder, loader, {id(m) for m in fusion.members})
        for k, o in enumerate(fusion.outputs):
            v = emitter.value_at(o, index)
            if el.TYPES[o.shape.element_type][0] == "p":
                v = builder.zext(v, el.I8, name=f"{o.name}.byte")
            ptr = builder.gep(fn.args[len(in_tys) + k], [i], inbounds=True, name=f"{o.name}.optr")
            builder.store(v, ptr)
    builder.ret_void()


class _for_range:
    """``with _for_range(builder, n, "i") as i:`` a counted loop 0 <= i < n (i64); the
    builder is left after the loop on exit."""

    def __init__(self, builder: ir.IRBuilder, n, name: str):
        self.b, self.n, self.name = builder, n, name

    def __enter__(self):
        b = self.b
        self.pre = b.block
        fn = b.function
        self.header = fn.append_basic_block(f"{self.name}.header")
        self.body = fn.append_basic_block(f"{self.name}.body")
        self.exit = fn.append_basic_block(f"{self.name}.exit")
        b.branch(self.header)
        b.position_at_end(self.header)
        self.i = b.phi(el.I64, name=self.name)
        self.i.add_incoming(ir.Constant(el.I64, 0), self.pre)
        go = b.icmp_signed("<", self.i, self.n, name=f"{self.name}.cond")
        b.cbranch(go, self.body, self.exit)
        b.position_at_end(self.body)
        return self.i

    def __exit__(self, *exc):
        if exc[0] is not None:
            return False
        b = self.b
        nxt = b.add(self.i, ir.Constant(el.I64, 1), name=f"{self.name}.next", flags=["nuw", "nsw"])
        self.i.add_incoming(nxt, b.block)
        b.branch(self.header)
        b.position_at_end(self.exit)
        return False


def _constant_value(instr):
    ctx = EvalContext(None, EvalOptions())
    return np.asarray(ctx.run_instruction(instr, [])).reshape(())[()]


def compile_fusions(module, steps) -> list:
    """Compile every Fusion of ``steps`` (one LLVM module); returns their callables."""
    fusions = [s for s in steps if isinstance(s, Fusion)]
    if not fusions:
        return []
    key = fingerprint(module)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
    if cached is not None and len(cached) == len(fusions):
        return cached
    irmod = ir.Module(name=f"xlapy_{module.name}" if hasattr(module, "name") else "xlapy")
    for k, f in enumerate(fusions):
        constants = {cid: _constant_value(c) for cid, c in f.embedded.items()}
        _emit(f, f"fused_{k}", irmod, constants)
    compiled = get_jit().compile(irmod)
    fns = []
    for k, f in enumerate(fusions):
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (len(f.inputs) + len(f.outputs))),
                                 ctypes.c_int64)
        fn = proto(compiled.function_address(f"fused_{k}"))
        fn._keepalive = compiled  # the machine code lives as long as the function
        fns.append(fn)
    with _CACHE_LOCK:
        _CACHE[key] = fns
    return fns


class CpuProgram(DeviceProgram):
    def __init__(self, module, steps):
        self.module = module
        self.steps = steps

    @property
    def fusions(self) -> list[Fusion]:
        return [s for s in self.steps if isinstance(s, Fusion)]

    def run(self, args, options):
        ctx = EvalContext(self.module, options)
        env: dict = {}
        for step in self.steps:
            if isinstance(step, Fusion):
                step.run(env)
            elif step.opcode == "parameter":
                env[id(step)] = args[step.parameter_number]
            else:
                env[id(step)] = ctx.run_instruction(step, [env[id(o)] for o in step.operands])
        return env[id(self.module.entry.root)]


class CpuBackend(Backend):
    """Elementwise fusions compiled with LLVM; everything else through the interpreter."""

    name = "cpu"

    def compile(self, module) -> CpuProgram:
        get_kernel("parameter")  # load the kernels before device threads start
        steps = plan(module)
        fns = compile_fusions(module, steps)
        for f, fn in zip([s for s in steps if isinstance(s, Fusion)], fns):
            f.fn = fn
        return CpuProgram(module, steps)


__all__ = ["CpuBackend", "CpuProgram", "Fusion", "compile_fusions", "fingerprint", "plan"]
