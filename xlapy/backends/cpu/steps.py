"""The CPU backend's plans and their steps: what a compiled computation is made of
(xlapy/backends/cpu/backend.py makes the plans; native.py emits the entry plan, and
control_flow.py each compilable while loop's plans, as one native function) and how a plan
runs step by step in Python (``Plan.execute``: programs the native function cannot run,
while loops that stay in Python, steps called out from native code).

A ``Plan`` is a computation's steps in post order with, per step, the values whose last use
it is (dropped then, so their buffers are recycled within the call). Steps: ``KernelStep``
(a compiled kernel), ``LibraryStep`` (library calls), ``ValueStep``
(tuple, get-tuple-element, reshape without a copy), ``ConstantStep``, ``InterpretStep`` (the
interpreter's kernel), and the nesting steps ``WhileStep``, ``CallStep``,
``ConditionalStep``, whose plans run on an explicit stack of frames (no recursion).
"""

from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass, field

import numpy as np

from xlapy.backends.cpu import library as _library
from xlapy.backends.cpu.buffers import PARALLEL_MIN_WORK, POOL, POOL_MIN_BYTES, run_parallel
from xlapy.backends.cpu.kernel_abi import KernelSpec
from xlapy.errors import ResourceExhaustedError
from xlapy.shape import dtypes
from xlapy.shape.shape import out_of_memory


def _dtype(shape) -> np.dtype:
    return np.dtype(dtypes.to_dtype(shape.element_type))


_ADDRESSOF = ctypes.addressof
_FROM_BUFFER = ctypes.c_char.from_buffer
_READ_ONLY: dict = {}  # id(array) -> (weak reference, address) of read-only arrays


def _address(a: np.ndarray) -> int:
    """The data address of a C-contiguous array: through a writable buffer when it has one
    (several times faster than ``a.ctypes.data``); a read-only one (a Buffer's storage,
    passed call after call) from a small cache checked by weak reference."""
    if a.flags.writeable and a.size and a.dtype.isbuiltin == 1:
        return _ADDRESSOF(_FROM_BUFFER(a))
    hit = _READ_ONLY.get(id(a))
    if hit is not None and hit[0]() is a:
        return hit[1]
    address = a.__array_interface__["data"][0]
    if len(_READ_ONLY) >= 64:
        _READ_ONLY.clear()
    _READ_ONLY[id(a)] = (weakref.ref(a), address)
    return address


def _contiguous(value) -> np.ndarray:
    a = np.asarray(value)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


# -- steps --------------------------------------------------------------------------------------


@dataclass
class KernelStep:
    """A compiled kernel: reads ``inputs`` (instructions of the plan's computation) and
    ``bound`` arrays (constants), writes ``spec.outputs``; the value of ``instr`` is the
    output (or the tuple of outputs for a multi-output fusion)."""

    instr: object
    inputs: list
    bound: list
    spec: KernelSpec
    tuple_result: bool = False
    fn: object = None
    then_fn: object = None

    def __post_init__(self):
        self._outputs = [(tuple(s.dimensions), _dtype(s)) for s in self.spec.outputs]
        self._keys = [id(i) for i in self.inputs]
        spec = self.spec
        # per-call work kept small: the bufs array type, whether outputs
        # bypass the pool, whether the kernel can only run on one thread
        self._bufs_type = ctypes.c_void_p * (len(self.inputs) + len(self.bound) +
                                             len(spec.outputs) + len(spec.scratch))
        self._small = all(int(np.prod(d, dtype=np.int64)) * dt.itemsize < POOL_MIN_BYTES
                          for d, dt in self._outputs)
        self._serial = spec.then is None and not spec.scratch and (
            not spec.parallel or spec.domain < 2 or spec.domain * spec.cost < PARALLEL_MIN_WORK)
        self._bound_ptrs = None

    def run(self, env, plan_ctx):
        spec = self.spec
        arrays = []
        for k in self._keys:
            a = env[k]
            if type(a) is not np.ndarray or not a.flags.c_contiguous:
                a = _contiguous(a)
            arrays.append(a)
        if self._small:
            outs = [np.empty(dims, dt) for dims, dt in self._outputs]
        else:
            outs = [POOL.empty(dims, dt) for dims, dt in self._outputs]
        for o, i in spec.in_place:  # the output starts as a copy of its input
            src = arrays[i] if i < len(arrays) else self.bound[i - len(arrays)]
            np.copyto(outs[o].reshape(-1), src.reshape(-1).view(outs[o].dtype))
        if not spec.domain:
            env[id(self.instr)] = tuple(outs) if self.tuple_result else outs[0]
            return
        if self._bound_ptrs is None:
            self._bound_ptrs = [a.ctypes.data for a in self.bound]
        scratch = [np.zeros(n, dt) for dt, n in spec.scratch]
        bufs = self._bufs_type(*[_address(a) for a in arrays], *self._bound_ptrs,
                               *[_address(a) for a in outs], *[_address(a) for a in scratch])
        if self._serial:
            self.fn(bufs, 0, spec.domain)
        else:
            run_parallel(self.fn, bufs, spec.domain, spec.domain * spec.cost, spec.parallel)
            then = spec.then
            if then is not None and then.domain:
                run_parallel(self.then_fn, bufs, then.domain, then.domain * then.cost,
                             then.parallel)
        env[id(self.instr)] = tuple(outs) if self.tuple_result else outs[0]


@dataclass
class LibraryStep:
    instr: object

    def run(self, env, plan_ctx):
        instr = self.instr
        operands = [_contiguous(env[id(o)]) for o in instr.operands]
        if instr.shape.is_array():
            out = POOL.empty(tuple(instr.shape.dimensions), _dtype(instr.shape))
            env[id(instr)] = _library.run(instr, operands, out=out)
        else:
            env[id(instr)] = _library.run(instr, operands)


@dataclass
class KeyedSortStep(KernelStep):
    """A sort with two paths giving the same result: the library's NumPy sort of integer
    keys when its pattern match applies and the values allow (faster on long rows), the
    native kernel (``sort.emit_sort``) otherwise; compiled whiles run the kernel."""

    def run(self, env, plan_ctx):
        instr = self.instr
        operands = [_contiguous(env[k]) for k in self._keys]
        outs = tuple(POOL.empty(dims, dt) for dims, dt in self._outputs)
        try:
            _library.run(instr, operands, out=outs if self.tuple_result else outs[0],
                         keyed_only=True)
        except _library.NotKeyed:  # no strict weak order on these values: the comparator
            super().run(env, plan_ctx)
            return
        env[id(instr)] = outs if self.tuple_result else outs[0]


@dataclass
class ValueStep:
    """tuple, get-tuple-element, opt-barrier, and reshape/bitcast of a row-major array: no
    copy."""

    instr: object

    def run(self, env, plan_ctx):
        instr = self.instr
        op = instr.opcode
        if op == "tuple":
            env[id(instr)] = tuple(env[id(o)] for o in instr.operands)
        elif op == "get-tuple-element":
            env[id(instr)] = env[id(instr.operands[0])][instr.attrs["index"]]
        elif op == "opt-barrier":  # its operand, unchanged (a barrier to passes only)
            env[id(instr)] = env[id(instr.operands[0])]
        else:
            env[id(instr)] = _contiguous(env[id(instr.operands[0])]).reshape(
                tuple(instr.shape.dimensions))


@dataclass
class ConstantStep:
    instr: object
    value: object

    def run(self, env, plan_ctx):
        env[id(self.instr)] = self.value


@dataclass
class InterpretStep:
    instr: object
    reason: str = ""  # why no emitter compiles it (emitters.explain), for interpreted()

    def run(self, env, plan_ctx):
        instr = self.instr
        env[id(instr)] = plan_ctx.run_instruction(instr, [env[id(o)] for o in instr.operands])


@dataclass
class WhileStep:
    instr: object
    cond: Plan
    body: Plan

    def frames(self, env, plan_ctx):
        """A generator yielding ``(plan, args)`` for each plan to run and getting its value
        back (Plan.execute runs it on its own stack of frames)."""
        state = env[id(self.instr.operands[0])]
        cancel = plan_ctx.options.cancel  # see EvalOptions.cancel
        while True:
            go = yield self.cond, [state]
            if not bool(np.asarray(go).reshape(())):
                break
            if cancel is not None:
                cancel.check_abort(f"while %{self.instr.name}")
            state = yield self.body, [state]
        env[id(self.instr)] = state

    def run(self, env, plan_ctx):
        _drive(self.frames(env, plan_ctx), plan_ctx)


@dataclass
class CallStep:
    instr: object
    body: Plan

    def frames(self, env, plan_ctx):
        env[id(self.instr)] = yield self.body, [env[id(o)] for o in self.instr.operands]

    def run(self, env, plan_ctx):
        _drive(self.frames(env, plan_ctx), plan_ctx)


@dataclass
class ConditionalStep:
    instr: object
    branches: list

    def frames(self, env, plan_ctx):
        instr = self.instr
        selector = np.asarray(env[id(instr.operands[0])]).reshape(())
        if selector.dtype == np.bool_:
            k = 0 if bool(selector) else 1  # true_computation, false_computation
        else:
            k = int(selector)
            if k < 0 or k >= len(self.branches):
                k = len(self.branches) - 1  # out of range: the last branch (XLA)
        env[id(instr)] = yield self.branches[k], [env[id(instr.operands[k + 1])]]

    def run(self, env, plan_ctx):
        _drive(self.frames(env, plan_ctx), plan_ctx)


#: Steps that run plans of their own (their ``frames`` generator yields them).
_NESTING_STEPS = (WhileStep, CallStep, ConditionalStep)


def _drive(frames, plan_ctx) -> None:
    """Run a nesting step's ``frames`` generator on its own (outside Plan.execute)."""
    value = None
    while True:
        try:
            plan, args = frames.send(value)
        except StopIteration:
            return
        value = plan.execute(args, plan_ctx)


# -- plans --------------------------------------------------------------------------------------


@dataclass
class Plan:
    """A computation's steps; ``drops[k]``: the values whose last use is step k."""

    comp: object
    params: list
    steps: list
    drops: list = field(default_factory=list)

    def __post_init__(self):
        self._params = [(id(p), p.parameter_number) for p in self.params]
        self._root = id(self.comp.root)

    def execute(self, args, plan_ctx):
        """The root's value for ``args``. Plans that steps run (while bodies, calls,
        branches) run on an explicit stack of frames, so nesting needs no recursion."""
        env: dict = {key: args[k] for key, k in self._params}
        if self._nesting:
            return _execute_frames(self, env, plan_ctx)
        step = None
        try:
            for step, drop in zip(self.steps, self.drops):
                step.run(env, plan_ctx)
                for key in drop:
                    del env[key]
        except ResourceExhaustedError as e:
            raise _named(e, step)
        except MemoryError as e:  # NumPy could not allocate: XLA's RESOURCE_EXHAUSTED
            raise _out_of_memory(e, step) from None
        return env[self._root]

    @property
    def _nesting(self) -> bool:
        nesting = self.__dict__.get("_has_nesting")
        if nesting is None:
            nesting = self.__dict__["_has_nesting"] = any(
                isinstance(s, _NESTING_STEPS) for s in self.steps)
        return nesting


def _named(e, step):
    """A ResourceExhaustedError raised by a step, naming the step's instruction when it
    names none yet."""
    if e.instruction is None and step is not None:
        instr = step.instr
        e.args = (f"%{instr.name} = {instr.shape} {instr.opcode}(...): {e}",)
        e.instruction = instr
    return e


def _out_of_memory(e, step):
    instr = step.instr
    return out_of_memory(f"%{instr.name} = {instr.shape} {instr.opcode}(...)", e,
                         instr.shape, instr)

def _execute_frames(plan, env, plan_ctx):
    """Plan.execute for plans with nesting steps: a stack of [plan, env, next step, the
    step's frames generator (or None)]; a generator's ``(plan, args)`` pushes a frame,
    whose root value goes back to the generator when it ends."""
    stack = [[plan, env, 0, None]]
    value = None
    while True:
        frame = stack[-1]
        plan, env, k, frames = frame
        if frames is not None:  # a nesting step waiting for the plan it asked for
            try:
                sub, args = frames.send(value)
            except StopIteration:
                frame[3] = None
                for key in plan.drops[k]:
                    del env[key]
                k = frame[2] = k + 1
            else:
                stack.append([sub, {key: args[n] for key, n in sub._params}, 0, None])
                value = None
                continue
        steps, drops = plan.steps, plan.drops
        while k < len(steps):
            step = steps[k]
            if isinstance(step, _NESTING_STEPS):
                frames = step.frames(env, plan_ctx)
                try:
                    sub, args = frames.send(None)
                except StopIteration:  # finished without running a plan
                    pass
                else:
                    frame[2], frame[3] = k, frames
                    stack.append([sub, {key: args[n] for key, n in sub._params}, 0, None])
                    break
            else:
                try:
                    step.run(env, plan_ctx)
                except ResourceExhaustedError as e:
                    raise _named(e, step)
                except MemoryError as e:
                    raise _out_of_memory(e, step) from None
            for key in drops[k]:
                del env[key]
            k += 1
        else:
            value = env[plan._root]
            stack.pop()
            if not stack:
                return value


__all__ = ["CallStep", "ConditionalStep", "ConstantStep", "InterpretStep", "KernelStep",
           "LibraryStep", "Plan", "ValueStep", "WhileStep"]
