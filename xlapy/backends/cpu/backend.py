"""The compiled CPU backend: ``Client(backend="cpu")``, ``xlapy run --backend cpu``.

``CpuBackend.compile(module)`` works on a clone of the module, in XLA:CPU's order:

1. passes (xlapy.passes): call and map inlining, algebraic simplification, CSE, DCE, then loop and
   input fusion, row fusion before them (row reductions with the elementwise work around
   them, a multi-output fusion: one kernel reading each row once, ``row_reduction``);
2. a *plan* per computation (the entry, and the computations of while/conditional/call):
   its instructions in post order turned into steps - constants, aliases, control flow and
   fusions by the planner itself, every other instruction by the first emitter table that
   takes it (``emitters.resolve``: one table per emitter keyed by (opcode, type class),
   each entry the emitter's check and plan):
   - a loop fusion, or a single elementwise/data-movement instruction, whose every
     instruction has an element generator: a kernel from ``loop_emitter``;
   - an input fusion or a reduce/reduce-window the reduction emitter supports: its kernel
     (cumulative reduce-windows: ``scan``'s prefix scan);
   - sort (any comparator the element generators can inline) and top-k: ``sort``'s native
     kernels (a sort the library's NumPy keys match tries those first);
   - gather, scatter, select-and-scatter, dynamic-update-slice: their kernels
     (``gather_scatter``; scatter and dynamic-update-slice in place);
   - a small f32/f64 dot: a generated GEMM kernel (``gemm_kernel``);
   - dot, convolution, sort, fft, cholesky, triangular-solve and jaxlib's LAPACK custom
     calls with a fast library path (``library``, ``lapack_calls``): a library call;
   - collectives and replica-id/partition-id: ``collectives``' steps (native code meeting
     the other devices in shared memory on the threaded runtime, the runtime's collectives
     backend in Python otherwise);
   - while/conditional/call: the sub-plans of their computations, run in a loop here;
   - tuple/get-tuple-element/reshape of a contiguous array: no copy, no kernel;
   - anything else: the interpreter's kernel (``EvalContext.run_instruction``), so every
     module runs with the interpreter's semantics; the step records why
     (``emitters.explain``; ``CpuProgram.interpreted()`` lists them);
3. the entry plan, with the computations it runs, as ONE native function
   (``native.compile_entry``: buffer assignment over the whole entry, results written into
   the caller's buffers, in-place updates, donation; while loops as nested native calls,
   conditionals and calls inline; steps native code cannot run as host calls);
4. every kernel and function goes into ONE LLVM module, compiled once (LLVM -O2 with the
   vectorisers, host CPU); a kernel whose code only runs inlined into compiled while
   loops has no function of its own in the machine code (``Planner._inlined_only``).

Running: ``CpuProgram.run`` makes one native call (result buffers and the workspace from the
buffer pool, ``buffers.POOL``: no page faults for recycled blocks). Programs the native
function cannot run (tokens, opaque values, dynamic shapes: ``native.compile_entry``) run
their plan step by step in Python (``steps.Plan.execute``): kernel outputs from the pool,
each value dropped after its last use, large kernels on both cores
(``buffers.run_parallel``).

Compiled programs are cached in memory (``program_cache``): keyed by the module's
fingerprint (SHA-256 of its complete print, every literal's bytes, its config, the pipeline
and the JIT's identity), least recently used programs dropped beyond a count and a byte
bound, so compiling the same module again costs a print and a hash. On disk
(``plan_cache``), a program whose entry is one native function calling back only for cancel
polls is stored whole - its native entry's plan, object code and constants - and a later
compile of the module, in any process, loads it (``RestoredProgram``) without passes,
planning or LLVM IR; other programs compile in full, their object code from the object
cache (``jit``).

The steps and how a plan runs live in ``steps`` (xlapy/backends/cpu/steps.py).
"""

from __future__ import annotations

import functools
import json

import numpy as np
from llvmlite import ir

from xlapy.backends.base import Backend, DeviceProgram
from xlapy.backends.cpu import collectives as _collectives
from xlapy.backends.cpu import control_flow as _control_flow
from xlapy.backends.cpu import emitters as _emitters
from xlapy.backends.cpu import executor as _executor
from xlapy.backends.cpu import indexing
from xlapy.backends.cpu import native as _native
from xlapy.backends.cpu import plan_cache as _plan_cache
from xlapy.backends.cpu import reduction as _reduction
from xlapy.backends.cpu.denormals import entry_name, flush_in_module, flushing
from xlapy.backends.cpu.dot_operands import DotOperands
from xlapy.backends.cpu.elemental import CONTRACT
from xlapy.backends.cpu.jit import get_jit
from xlapy.backends.cpu.kernel_abi import KERNEL_CFUNC
from xlapy.backends.cpu.loop_emitter import emit_loop, members_of
from xlapy.backends.cpu.program_cache import ENGINE_BYTES, INSTRUCTION_BYTES, ProgramCache
from xlapy.backends.cpu.program_cache import fingerprint as _fingerprint
from xlapy.backends.cpu.row_fusion import RowFusion, is_row_fusion
from xlapy.backends.cpu.scalar_computation import constant_value
from xlapy.backends.cpu.steps import (
    CallStep,
    ConditionalStep,
    ConstantStep,
    InterpretStep,
    KernelStep,
    Plan,
    ValueStep,
    WhileStep,
    _contiguous,
)
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.enums import FusionKind
from xlapy.interpreter.evaluator import EvalContext
from xlapy.interpreter.registry import get_kernel
from xlapy.passes.cse import Cse
from xlapy.passes.dot_upcast import DotUpcast


def _int8_core(dot) -> bool:
    """Whether ``dot`` is the int8 core's (gemm_words.py): dot-upcast leaves it an integer
    dot."""
    from xlapy.backends.cpu import gemm_words

    return gemm_words.applies(dot)


def _bf16_core(dot) -> bool:
    """Whether ``dot`` is the bf16 core's (gemm_words.py): dot-upcast keeps its operands."""
    from xlapy.backends.cpu import gemm_words

    return gemm_words.applies_bf16(dot)


#: The passes run before planning: names of xlapy.passes.PASSES, and this backend's own
#: (BACKEND_PASSES: backends/cpu/dot_operands.py, row_fusion.py; dot-upcast with the rules
#: of the int8 and bf16 cores). ``excess-precision`` (XLA:CPU's xla_allow_excess_precision,
#: on by default) runs right after inlining, as XLA's bf16 float normalization does, unless
#: the backend was made with allow_excess_precision=False.
PIPELINE = ("inline", "reduce-window-rewriter", "map-inline", "batch-norm-expander",
            "dot-upcast", "dot-operands", "simplify", "cse", "dce", "row-fusion", "fusion")
#: This backend's passes, by pipeline name (its cse merges commuted operands, as XLA's).
BACKEND_PASSES = {"dot-operands": DotOperands, "row-fusion": RowFusion,
                  "cse": functools.partial(Cse, commutative=True),
                  "dot-upcast": functools.partial(DotUpcast, integer_core=_int8_core,
                                                  narrow_core=_bf16_core)}
EXCESS_PRECISION_PIPELINE = PIPELINE[:4] + ("excess-precision",) + PIPELINE[4:]

#: The options a CpuBackend made without them takes (the ``xlapy run`` flags set these for
#: the process, as XLA_FLAGS does for XLA).
XLA_CPU_DEFAULTS = {"allow_excess_precision": True, "flush_denormals": True,
                    "fma_contraction": True}
DEFAULT_OPTIONS = dict(XLA_CPU_DEFAULTS)

#: The compiled programs, by fingerprint (LRU, bounded: see program_cache).
PROGRAMS = ProgramCache()
_BUILD: dict = {}  # (pipeline, flush) -> the build's description and the JIT's identity


def _pipeline(allow_excess_precision: bool) -> tuple:
    return EXCESS_PRECISION_PIPELINE if allow_excess_precision else PIPELINE


def fingerprint(module, allow_excess_precision: bool = True, flush_denormals: bool = True,
                fma_contraction: bool = True) -> str:
    """The key of ``module``'s compiled program (program_cache.fingerprint); the backend's
    numerics options (its pipeline, denormal flushing, FMA contraction) are part of it."""
    build = (_pipeline(allow_excess_precision), bool(flush_denormals), bool(fma_contraction))
    if build not in _BUILD:
        _BUILD[build] = (f"{build[0]}\nflush_denormals={build[1]}\n"
                         f"fma_contraction={build[2]}\n"
                         f"{json.dumps(get_jit().identity, sort_keys=True)}")
    return _fingerprint(module, _BUILD[build])


_generated = _emitters.generated  # has an element generator (a loop kernel's member)


class Planner:
    """Turns computations into plans and collects their kernels into one LLVM module."""

    def __init__(self, module):
        self.module = module
        self.irmod = ir.Module(name="xlapy_cpu")
        self.kernels: list[KernelStep] = []
        self._plans: dict[int, Plan] = {}
        self._walked: set[int] = set()  # computations plan() has entered
        self.host_table = _executor.HostTable()  # what native code calls out to
        self.collective_steps: list = []  # the collectives with a run-table entry, in order
        # Kernel functions by how native code calls them (native.Emitter): inlinable calls
        # from compiled loops, and calls needing the function itself (noinline, host calls).
        self.inlined: set[str] = set()
        self.standalone: set[str] = set()

    def plan(self, comp) -> Plan:
        """The plan of ``comp``; the computations its while/call/conditional steps run are
        planned first (a walk with a stack: nesting needs no recursion)."""
        if id(comp) in self._plans:
            return self._plans[id(comp)]
        seen = self._walked
        seen.add(id(comp))
        stack = [(comp, iter(self._nested_computations(comp)))]
        while stack:
            c, callees = stack[-1]
            for callee in callees:
                if id(callee) not in seen:
                    seen.add(id(callee))
                    stack.append((callee, iter(self._nested_computations(callee))))
                    break
            else:
                stack.pop()
                self._plan_one(c)
        return self._plans[id(comp)]

    @staticmethod
    def _nested_computations(comp) -> list:
        """The computations ``_step`` plans for the instructions of ``comp``."""
        out = []
        for instr in comp.instructions:
            op = instr.opcode
            if op not in ("while", "call", "conditional") or _emitters.dynamic(instr):
                continue
            if op == "while":
                out += [instr.attrs["condition"], instr.attrs["body"]]
            elif op == "call":
                if not instr.has_side_effect:
                    out.append(instr.attrs["to_apply"])
            else:
                out += instr.called_computations()
        return out

    def _plan_one(self, comp) -> Plan:
        """The plan of ``comp``, whose nested computations are planned already."""
        order = comp.post_order()
        steps = [self._step(instr) for instr in order if instr.opcode != "parameter"]
        params = [i for i in order if i.opcode == "parameter"]
        plan = Plan(comp, params, steps)
        plan.drops = self._drops(comp, steps)
        self._plans[id(comp)] = plan
        return plan

    @staticmethod
    def _drops(comp, steps) -> list:
        last: dict[int, int] = {}
        for k, step in enumerate(steps):
            for o in getattr(step, "reads", step.instr.operands):
                last[id(o)] = k
            last.setdefault(id(step.instr), k)
        drops: list[list[int]] = [[] for _ in steps]
        keep = id(comp.root)
        for key, k in last.items():
            if key != keep:
                drops[k].append(key)
        return drops

    # -- one instruction -------------------------------------------------------------------

    def _step(self, instr):
        """The step of ``instr``: the structural cases here (constants, aliases, control
        flow, fusions), everything else the first emitter table that takes it
        (``emitters.resolve``), or the interpreter with the tables' reasons."""
        op = instr.opcode
        if _emitters.dynamic(instr):  # bounded dynamic shapes: the interpreter tracks sizes
            return InterpretStep(instr, _emitters.DYNAMIC)
        if op == "constant":
            return ConstantStep(instr, constant_value(instr))
        if op in ("tuple", "get-tuple-element", "opt-barrier"):
            return ValueStep(instr)
        if op in ("reshape", "bitcast") and indexing.supports(instr):
            return ValueStep(instr)
        if op == "while":
            step = WhileStep(instr, self.plan(instr.attrs["condition"]),
                             self.plan(instr.attrs["body"]))
            compiled = _control_flow.compile_while(self, step)
            return compiled or step
        if op == "call" and not instr.has_side_effect:
            return CallStep(instr, self.plan(instr.attrs["to_apply"]))
        if op == "conditional":
            return ConditionalStep(instr, [self.plan(c) for c in instr.called_computations()])
        if op == "fusion":
            step = self._fusion_step(instr)
            if step is not None:
                return step
        found = _emitters.resolve(instr)
        if found.table is not None:
            return found.table.plan(self, instr)
        return InterpretStep(instr, found.reason(instr))

    # -- kernels the emitter tables plan (emitters.py) ----------------------------------------

    def elementwise_kernel(self, instr):
        """One elementwise or data-movement instruction as a loop kernel."""
        return self._kernel(instr, [instr], _unique(instr.operands), [], {})

    def reduction_kernel(self, instr):
        """One reduce or reduce-window as a reduction kernel."""
        return self._reduce_kernel(instr, instr, _unique(instr.operands), [])

    def instruction_kernel(self, instr, emit, step_class=KernelStep):
        """The kernel ``emit(irmod, name, instr)`` adds, reading ``instr``'s operands."""
        spec = emit(self.irmod, f"k{len(self.kernels)}", instr)
        step = step_class(instr, list(instr.operands), [], spec, instr.shape.is_tuple())
        self.kernels.append(step)
        return step

    # -- fusions -------------------------------------------------------------------------------

    def _fusion_step(self, fusion):
        comp = fusion.attrs["calls"]
        root = comp.root
        params = sorted((i for i in comp.instructions if i.opcode == "parameter"),
                        key=lambda p: p.parameter_number)
        roots = list(root.operands) if root.opcode == "tuple" else [root]
        if not roots or not all(r.shape.is_array() for r in roots):
            return None
        kind = fusion.attrs["kind"]
        consts = [i for i in comp.instructions if i.opcode == "constant"]
        scalars = {id(c): constant_value(c) for c in consts if not c.shape.dimensions}
        big = [c for c in consts if c.shape.dimensions]
        inputs = params + big
        members = members_of(roots, inputs)
        if is_row_fusion(fusion):  # reductions and their consumers, row by row
            return self._row_kernel(fusion, root, inputs,
                                    [np.asarray(constant_value(c)) for c in big])
        if kind == FusionKind.INPUT and len(roots) == 1 and \
                root.opcode in ("reduce", "reduce-window"):
            if not _reduction.supports(root):
                return None
            producers = members_of(list(root.operands), inputs)
            if not all(_generated(m) for m in producers):
                return None
            return self._reduce_kernel(fusion, root, inputs,
                                       [np.asarray(constant_value(c)) for c in big],
                                       operands=list(fusion.operands))
        if kind == FusionKind.INPUT:
            return None
        dims = tuple(roots[0].shape.dimensions)
        if any(tuple(r.shape.dimensions) != dims for r in roots):
            return None
        if not all(_generated(m) for m in members):
            return None
        bound = [_contiguous(constant_value(c)) for c in big]
        return self._kernel(fusion, roots, inputs, bound, scalars,
                            operands=list(fusion.operands), tuple_result=root.opcode == "tuple")

    def _kernel(self, instr, roots, inputs, bound, scalars, operands=None, tuple_result=False):
        name = f"k{len(self.kernels)}"
        if operands is None:  # one instruction: embed its rank-0 constant operands
            scalars = {id(c): constant_value(c) for c in inputs
                       if c.opcode == "constant" and not c.shape.dimensions}
            inputs = [i for i in inputs if id(i) not in scalars]
        spec = emit_loop(self.irmod, name, roots, inputs, scalars)
        spec.n_inputs = len(inputs)
        read = operands if operands is not None else inputs
        step = KernelStep(instr, read, bound, spec, tuple_result)
        self.kernels.append(step)
        return step

    def _row_kernel(self, fusion, root, inputs, bound):
        from xlapy.backends.cpu import row_reduction

        name = f"k{len(self.kernels)}"
        spec = row_reduction.emit(self.irmod, name, root, inputs)
        step = KernelStep(fusion, list(fusion.operands), bound, spec, fusion.shape.is_tuple())
        self.kernels.append(step)
        return step

    def _reduce_kernel(self, instr, root, inputs, bound, operands=None):
        name = f"k{len(self.kernels)}"
        spec = _reduction.emit(self.irmod, name, root, inputs)
        read = operands if operands is not None else inputs
        step = KernelStep(instr, read, bound, spec, tuple_result=root.shape.is_tuple())
        self.kernels.append(step)
        return step

    def compile(self, flush_denormals: bool = False, keep_object: bool = False):
        """Compile every kernel; bind the function pointers (the flushing entry points when
        ``flush_denormals``: ``denormals.flush_in_module``); drop the LLVM IR (nothing needs
        it once the machine code is loaded, and it is the bulk of a plan's Python
        objects). ``keep_object``: keep the object code (``object_code``) for the disk cache
        of programs."""
        irmod, self.irmod = self.irmod, None
        if not self.kernels:
            return None
        inlined = self._inlined_only()
        for step in inlined.values():  # LLVM drops the function once inlined everywhere
            irmod.get_global(step.spec.name).linkage = "internal"
        if flush_denormals:
            flush_in_module(irmod)
        compiled = get_jit().compile(irmod, keep_assembly=False, keep_object=keep_object)

        def bind(name):
            return KERNEL_CFUNC(compiled.function_address(entry_name(name, flush_denormals)))

        for step in self.kernels:
            if id(step) in inlined:
                step.fn = functools.partial(_inlined_only, step.spec.name)
                continue
            step.fn = bind(step.spec.name)
            if step.spec.then is not None:
                step.then_fn = bind(step.spec.then.name)
            if getattr(step, "function", None) is not None:  # a compiled while's ir.Function
                step.function = None
        return compiled

    def _inlined_only(self) -> dict:
        """id -> step of the kernels whose code only runs inlined into compiled loops: steps
        of a compiled while's condition or body that native code calls inlinable, that no
        native code calls as a function (noinline, a host call) and that no plan Python may
        run holds. Python may run the entry's plan, every plan of a while, call or
        conditional step anywhere (one inside a compiled loop may be a host call), and the
        plans those run in turn, but not a compiled while's (one native call). Such
        kernels' functions get internal linkage, no flushing entry point and no binding:
        compiled once more on their own, vectorised, they cost about as much LLVM time as
        the loops holding them."""
        if not self.inlined:
            return {}

        def runs(step) -> list:
            if isinstance(step, _control_flow.CompiledWhileStep):
                return []
            return [getattr(step, "cond", None), getattr(step, "body", None),
                    *(getattr(step, "branches", None) or ())]

        stack = [p for p in self._plans.values() if p.comp is self.module.entry]
        for plan in self._plans.values():
            for step in plan.steps:
                if isinstance(step, (WhileStep, CallStep, ConditionalStep)):
                    stack += runs(step)
        python = set()
        while stack:
            plan = stack.pop()
            if not isinstance(plan, Plan) or id(plan) in python:
                continue
            python.add(id(plan))
            for step in plan.steps:
                stack += runs(step)
        looped = {}
        for step in self.kernels:
            if isinstance(step, _control_flow.CompiledWhileStep):
                for plan in (step.cond, step.body):
                    if id(plan) not in python:
                        looped.update((id(s), s) for s in plan.steps)
        return {key: s for key, s in looped.items()
                if type(s) is KernelStep and s.spec.then is None and
                s.spec.name in self.inlined and s.spec.name not in self.standalone}


def _inlined_only(name: str, *args) -> None:
    raise RuntimeError(f"cpu backend: kernel {name} was compiled only inlined into the "
                       f"compiled loops running it, yet a step called it on its own")


def _unique(instrs) -> list:
    seen, out = set(), []
    for i in instrs:
        if id(i) not in seen:
            seen.add(id(i))
            out.append(i)
    return out


class _LazyContext:
    """The interpreter's EvalContext for a run, made when a step first needs one (most
    programs never do, and making one costs more than a small kernel)."""

    __slots__ = ("_ctx", "collectives", "module", "options")

    def __init__(self, module, options):
        self.module, self.options, self._ctx = module, options, None
        self.collectives = None  # the run's collectives (collectives.bound)

    def eval_context(self) -> EvalContext:
        if self._ctx is None:
            self._ctx = EvalContext(self.module, self.options)
        return self._ctx

    def run_instruction(self, instr, args):
        return self.eval_context().run_instruction(instr, args)


class CpuProgram(DeviceProgram):
    """A compiled module: its plans, kernels and machine code (freed with the program).
    ``native``: the entry computation as one native function (``native.NativeEntry``), or
    None when the program runs on the Python plan executor (``steps.Plan``; see
    ``native.compile_entry`` for which programs). ``nbytes``: the estimate the program
    cache bounds (object code, the engine, the constants held, the Python objects of the
    plans)."""

    verified = False  # set by Client.compile once the module passed the verifier

    def __init__(self, module, entry: Plan, kernels: list, compiled, native=None):
        self.module = module  # the optimised module the plans refer to
        self.entry = entry
        self.kernels = kernels
        self.native = native
        if native is not None:
            native.make_context = functools.partial(_LazyContext, module)
        self.takes_donations = native is not None  # run() writes donated parameters
        self.fresh_results = native is not None  # results are new arrays every call
        self._compiled = compiled  # keeps the machine code alive
        self.nbytes = _estimated_bytes(self)

    flush_denormals = True  # the run holds MXCSR FTZ|DAZ (denormals.flushing)
    run_table_size = 0  # entries of a run's table (collectives.bound); 0: none needed

    def run(self, args, options, donated=None):
        """The result for ``args``. ``donated``: (parameter number, parameter index) of the
        argument leaves the caller gives up (input_output_alias): the result aliased to
        such a parameter is written into the argument's own array, which is then that
        result. Results are fresh arrays every call; parameters are never written unless
        donated. The native entry sets MXCSR FTZ|DAZ itself (its host calls run inside
        it). A program with collectives or device ids runs with its run table in the
        thread's context (``collectives.bound``)."""
        native = self.native
        if native is not None:
            if not self.run_table_size:
                return native.run(args, options, donated)
            plan_ctx = _LazyContext(self.module, options)
            with _collectives.bound(self, plan_ctx):
                return native.run(args, options, donated, plan_ctx)
        plan_ctx = _LazyContext(self.module, options)
        with flushing(self.flush_denormals), _collectives.bound(self, plan_ctx):
            return self.entry.execute(list(args), plan_ctx)

    def steps(self) -> list:
        return list(self.entry.steps)

    def interpreted(self) -> list[tuple[str, str, str]]:
        """(instruction name, opcode, reason) of every instruction this program runs on the
        interpreter, in the entry computation and the computations its steps run."""
        out, seen, stack = [], {id(self.entry)}, [self.entry]
        while stack:
            plan = stack.pop()
            for step in plan.steps:
                if isinstance(step, InterpretStep):
                    out.append((step.instr.name, step.instr.opcode, step.reason))
                elif getattr(step, "interpreted_reason", None):  # collectives.py's
                    out.append((step.instr.name, step.instr.opcode, step.interpreted_reason))
                subs = [getattr(step, "cond", None), getattr(step, "body", None),
                        *(getattr(step, "branches", None) or ())]
                for sub in subs:
                    if isinstance(sub, Plan) and id(sub) not in seen:
                        seen.add(id(sub))
                        stack.append(sub)
        return out


def _estimated_bytes(program: CpuProgram) -> int:
    size = ENGINE_BYTES + (program._compiled.nbytes if program._compiled is not None else 0)
    count = 0
    for comp in program.module.computations:
        for instr in comp.instructions:
            count += 1
            if instr.opcode == "constant" and instr.shape.is_array():
                size += instr.attrs["literal"].array.nbytes
    size += count * INSTRUCTION_BYTES
    for step in program.kernels:  # arrays bound to kernels (converted constants)
        size += sum(np.asarray(a).nbytes for a in getattr(step, "bound", ()))
        size += sum(np.asarray(a).nbytes for a in getattr(step, "consts", ()) or ())
    return size


class RestoredProgram(CpuProgram):
    """A program loaded from the disk cache of programs (``plan_cache``): its native entry
    and machine code, no plans. It runs as the program compiled from ``source`` does; its
    plans and optimised module (``entry``, ``kernels``, ``module``: for inspection, tests
    and tools) are made on first access by compiling ``source`` again (the object code then
    comes from the object cache)."""

    def __init__(self, source, options: tuple, native, compiled):
        self._source = source  # the input module
        self._options = options  # (allow_excess_precision, flush_denormals, fma_contraction)
        self._planned = None
        self.native = native
        native.make_context = functools.partial(_LazyContext, source)
        self.takes_donations = True
        self.fresh_results = True
        self.flush_denormals = bool(options[1])
        self._compiled = compiled
        size = ENGINE_BYTES + compiled.nbytes + sum(a.nbytes for a in native.consts)
        for comp in source.computations:
            for instr in comp.instructions:
                size += INSTRUCTION_BYTES
                if instr.opcode == "constant" and instr.shape.is_array():
                    size += instr.attrs["literal"].array.nbytes
        self.nbytes = size

    def planned(self) -> CpuProgram:
        """The program compiled again from the input module (made once, on first use)."""
        if self._planned is None:
            self._planned = _compile(self._source, *self._options)
        return self._planned

    module = property(lambda self: self.planned().module)
    entry = property(lambda self: self.planned().entry)
    kernels = property(lambda self: self.planned().kernels)


def compile_module(module, *, allow_excess_precision: bool = True,
                   flush_denormals: bool = True, fma_contraction: bool = True,
                   key: str | None = None) -> CpuProgram:
    """Compile ``module`` (not modified) for the CPU backend, or take it from the cache: in
    memory (``program_cache``), else on disk (``plan_cache``: a program compiled before,
    in any process, loaded without passes, planning or LLVM IR).
    ``allow_excess_precision``: XLA:CPU's default bf16 numerics (xlapy.passes.excess_precision);
    ``flush_denormals``: XLA:CPU's FTZ/DAZ (xlapy.backends.cpu.denormals);
    ``fma_contraction``: XLA:CPU's fused multiply-adds (``elemental.CONTRACT``); all False:
    the HLO's exact semantics, as the interpreter computes them. ``key``: the module's
    ``fingerprint`` with these options, computed by the caller (``CpuBackend.lookup_keyed``)
    for this module unchanged since."""
    if key is None:
        key = fingerprint(module, allow_excess_precision, flush_denormals, fma_contraction)
    hit = PROGRAMS.get(key)
    if hit is not None:
        return hit
    options = (bool(allow_excess_precision), bool(flush_denormals), bool(fma_contraction))
    directory = _plan_cache.cache_dir()
    program = None
    if directory is not None:
        material = _plan_cache.key_material(key)
        path = _plan_cache.entry_path(directory, material)
        program = _restore(module, options, path, material)
    if program is None:
        program = _compile(module, *options, keep_object=directory is not None)
        if directory is not None:
            _persist(program, path, material)
    PROGRAMS.put(key, program, program.nbytes)
    return program


def _restore(module, options: tuple, path: str, material: bytes) -> RestoredProgram | None:
    """The program stored at ``path`` (verified against ``material``), or None: no entry,
    or a bad one (discarded with one warning line)."""
    parts = _plan_cache.load(path, material)
    if parts is None:
        return None
    plan, obj, consts = parts
    try:
        native, symbol = _plan_cache.decode(plan, consts)
    except InvalidArgumentError as e:
        _plan_cache.discard(path, f"has {e}")
        return None
    from xlapy.backends.cpu import gemm_packed

    missing = gemm_packed.provide_cores(obj)
    if missing:
        _plan_cache.discard(path, f"calls {missing[0]!r}, a GEMM core this xlapy does not make")
        return None
    compiled = get_jit().load(obj)
    try:
        native.fn = KERNEL_CFUNC(compiled.function_address(symbol))
    except KeyError:
        compiled.close()
        _plan_cache.discard(path, f"has no entry function {symbol!r} in its object code")
        return None
    return RestoredProgram(module, options, native, compiled)


def _persist(program: CpuProgram, path: str, material: bytes) -> None:
    """Store ``program`` (just compiled, its object code kept) at ``path``, when it can be
    (``plan_cache.unpersistable``); drop the object code it kept."""
    compiled = program._compiled
    obj = compiled.object_code if compiled is not None else None
    if compiled is not None:
        compiled.object_code = None
    if obj is None or _plan_cache.unpersistable(program) is not None:
        return
    symbol = entry_name(program.native.spec.name, program.flush_denormals)
    plan, consts = _plan_cache.encode(program, symbol)
    _plan_cache.store(path, material, plan, obj, consts)


def _compile(module, allow_excess_precision: bool, flush_denormals: bool,
             fma_contraction: bool, keep_object: bool = False) -> CpuProgram:
    """``module`` compiled: passes, plans, LLVM (see the module docstring)."""
    from xlapy.backends.cpu.gemm_words import FLUSHING

    flushing = FLUSHING.set(bool(flush_denormals))  # the passes and plans made from here on
    try:
        return _compile_flushing(module, allow_excess_precision, flush_denormals,
                                 fma_contraction, keep_object)
    finally:
        FLUSHING.reset(flushing)


def _compile_flushing(module, allow_excess_precision: bool, flush_denormals: bool,
                      fma_contraction: bool, keep_object: bool) -> CpuProgram:
    from xlapy.passes import make_pipeline

    work = module.clone(suffix="")
    names = _pipeline(allow_excess_precision)
    start = 0
    for k, name in enumerate(names + ("",)):  # the generic passes between the backend's
        if k == len(names) or name in BACKEND_PASSES:
            if k > start:
                make_pipeline(names[start:k], verify=False).run(work)
            if k < len(names):
                BACKEND_PASSES[name]().run(work)
            start = k + 1
    contract = CONTRACT.set(bool(fma_contraction))  # the emitters made from here on
    try:
        planner = Planner(work)
        entry = planner.plan(work.entry)
        native = _native.compile_entry(planner, entry)
        compiled = planner.compile(bool(flush_denormals), keep_object=keep_object)
    finally:
        CONTRACT.reset(contract)
    program = CpuProgram(work, entry, planner.kernels, compiled, native)
    program.flush_denormals = bool(flush_denormals)
    if any(isinstance(s, _collectives.CollectiveStep) and s.form is not None
           for s in planner.kernels):
        program.run_table_size = _collectives.T_HANDLES + len(planner.collective_steps)
    return program


def clear_cache() -> None:
    """Forget the compiled programs held in memory (the disk cache stays). Programs still
    held by Executables stay valid."""
    PROGRAMS.clear()


def clear_caches(disk: bool = True) -> None:
    """Forget every compiled program: the memory cache and (``disk``) the object and
    program entries of the disk cache (``jit.cache_dir()``)."""
    import glob
    import os

    from xlapy.backends.cpu.jit import cache_dir

    clear_cache()
    directory = cache_dir()
    if disk and directory is not None:
        for path in glob.glob(os.path.join(directory, "cpu-*.o")) + \
                glob.glob(os.path.join(directory, f"cpu-*{_plan_cache.SUFFIX}")) + \
                glob.glob(os.path.join(directory, ".cpu-*.tmp")):
            try:
                os.remove(path)
            except OSError:
                pass


class CpuBackend(Backend):
    """Compiled kernels for fusions, library calls for dot/conv/sort/fft, the interpreter's
    kernels for the rest.

    ``allow_excess_precision`` (XLA's ``xla_allow_excess_precision``; None: DEFAULT_OPTIONS,
    True unless ``xlapy run --xla_allow_excess_precision=false`` set it, as on XLA:CPU): a
    bf16 operation converted to f32 gives its f32 value unrounded, as XLA:CPU does; False:
    every rounding the HLO asks for. ``flush_denormals`` (default True, as XLA:CPU): denormal
    inputs and results of float arithmetic are zeros (see ``denormals``). ``fma_contraction``
    (default True, as XLA:CPU, whose LLVM target options allow FP-op fusion): an f32/f64
    multiply feeding an add or subtract in the same kernel is one fused multiply-add,
    rounded once (``elemental.CONTRACT``). All False: bit for bit the interpreter's
    answers."""

    name = "cpu"

    def __init__(self, *, allow_excess_precision: bool | None = None,
                 flush_denormals: bool | None = None, fma_contraction: bool | None = None):
        if allow_excess_precision is None:
            allow_excess_precision = DEFAULT_OPTIONS["allow_excess_precision"]
        if flush_denormals is None:
            flush_denormals = DEFAULT_OPTIONS["flush_denormals"]
        if fma_contraction is None:
            fma_contraction = DEFAULT_OPTIONS["fma_contraction"]
        self.allow_excess_precision = bool(allow_excess_precision)
        self.flush_denormals = bool(flush_denormals)
        self.fma_contraction = bool(fma_contraction)

    def lookup(self, module) -> CpuProgram | None:
        """The cached program of ``module`` (same fingerprint), or None."""
        return self.lookup_keyed(module)[0]

    def lookup_keyed(self, module) -> tuple:
        """(the cached program of ``module`` or None, the module's key): ``compile(module,
        key=key)`` then does not fingerprint the module again - the module must be unchanged
        in between (Client.compile)."""
        key = fingerprint(module, self.allow_excess_precision, self.flush_denormals,
                          self.fma_contraction)
        return PROGRAMS.get(key, count_miss=False), key  # compile counts it

    def compile(self, module, key: str | None = None) -> CpuProgram:
        get_kernel("parameter")  # load the kernels before device threads start
        return compile_module(module, allow_excess_precision=self.allow_excess_precision,
                              flush_denormals=self.flush_denormals,
                              fma_contraction=self.fma_contraction, key=key)


__all__ = ["PROGRAMS", "CpuBackend", "CpuProgram", "KernelStep", "Plan", "RestoredProgram",
           "clear_cache", "clear_caches", "compile_module", "fingerprint"]
