"""The reference interpreter: evaluates a Module (parsed or built) on NumPy values.

Owns: EvalContext (what kernels see: sub-computation calls, feeds, channels, custom calls,
RNG state, replica/partition ids, the collectives backend) and ``evaluate``. Each opcode's
semantics lives in its kernel (xlapy/interpreter/kernels/<family>.py); this module only walks
computations in post order and dispatches. Imports shape, hlo, opdefs.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from xlapy.errors import InvalidArgumentError, ResourceExhaustedError, XlaError
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.interpreter.registry import get_kernel
from xlapy.interpreter.values import TOKEN, to_value
from xlapy.shape.shape import out_of_memory


class EvaluationError(XlaError, RuntimeError):
    """An instruction could not be evaluated; the message names it."""


class UnimplementedError(EvaluationError):
    """An opcode, attribute combination or custom-call target xlapy does not run."""


@dataclass
class EvalOptions:
    """How side effects and multi-device ops reach the outside world.

    ``infeed``/``outfeed``: queue.Queue objects (infeed is read, outfeed written);
    ``channels``: dict channel id -> queue.Queue shared by send and recv;
    ``host_send``/``host_recv``: callables for host transfers (is_host_transfer);
    ``custom_calls``: extra targets by name (besides the global registry);
    ``rng_seed``: seed of the stateful ``rng`` op; ``collectives``: the backend the runtime
    plugs in for multi-replica runs (default: a single device); ``cancel``: None, or an
    object whose ``check_abort(what)`` raises once the execution was given up (the runtime's
    ExecutionState): while loops call it every iteration, so that a device the runtime left
    running after its execution failed stops at the next iteration instead of looping on.
    """

    replica_id: int = 0
    partition_id: int = 0
    replica_count: int = 1
    num_partitions: int = 1
    infeed: Any = None
    outfeed: Any = None
    channels: dict = field(default_factory=dict)
    host_send: Callable | None = None
    host_recv: Callable | None = None
    custom_calls: dict = field(default_factory=dict)
    rng_seed: int = 0
    collectives: Any = None
    timeout: float | None = 60.0
    cancel: Any = None


class EvalContext:
    """The state of one evaluation, passed to every kernel."""

    def __init__(self, module: Module | None, options: EvalOptions):
        self.module = module
        self.options = options
        self.rng = np.random.default_rng(options.rng_seed)
        self.rng_state = 0  # total delta taken by rng-get-and-update-state
        # rng-get-and-update-state keeps one 128-bit state per instruction (as XLA:CPU's
        # RngState per op), keyed by the instruction's id.
        self.rng_states: dict[int, int] = {}
        self._orders: dict[int, tuple[int, list[Instruction]]] = {}
        if options.infeed is None:
            options.infeed = queue.Queue()
        if options.outfeed is None:
            options.outfeed = queue.Queue()

    @property
    def replica_id(self) -> int:
        return self.options.replica_id

    @property
    def partition_id(self) -> int:
        return self.options.partition_id

    def _order(self, comp: Computation) -> list[Instruction]:
        cached = self._orders.get(id(comp))
        if cached is None or cached[0] != len(comp.instructions):
            cached = (len(comp.instructions), comp.post_order())
            self._orders[id(comp)] = cached
        return cached[1]

    def call(self, comp: Computation, args, env: dict[int, Any] | None = None) -> Any:
        """Evaluate ``comp`` on argument values (one per parameter). ``env``, if given,
        receives the value of every instruction (by ``id``)."""
        params = comp.num_parameters
        if len(args) != params:
            raise EvaluationError(
                f"computation %{comp.name} takes {params} arguments, got {len(args)}")
        if env is None:
            env = {}
        for instr in self._order(comp):
            if instr.opcode == "parameter":
                env[id(instr)] = args[instr.parameter_number]
                continue
            env[id(instr)] = self.run_instruction(instr, [env[id(o)] for o in instr.operands])
        return env[id(comp.root)]

    def run_instruction(self, instr: Instruction, args: list) -> Any:
        fn = get_kernel(instr.opcode)
        if fn is None:
            raise UnimplementedError(f"{instr.opcode}: the interpreter has no kernel for this "
                                     f"opcode (instruction %{instr.name})")
        try:
            return fn(self, instr, args)
        except (EvaluationError, ResourceExhaustedError):
            raise
        except XlaError as e:
            raise EvaluationError(f"%{instr.name} = {instr.shape} {instr.opcode}(...): {e}") from e
        except MemoryError as e:  # NumPy could not allocate: XLA's RESOURCE_EXHAUSTED
            raise out_of_memory(f"%{instr.name} = {instr.shape} {instr.opcode}(...)", e,
                                instr.shape, instr) from None
        except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError,
                FloatingPointError, KeyError, AttributeError) as e:
            raise EvaluationError(
                f"%{instr.name} = {instr.shape} {instr.opcode}(...): internal error in the "
                f"{instr.opcode} kernel: {type(e).__name__}: {e}") from e


def module_of(x, who: str) -> Module:
    """The Module of a Module, an XlaComputation or HLO text; ``who`` names the caller in
    the error for anything else."""
    from xlapy.builder import XlaComputation

    if isinstance(x, XlaComputation):
        return x.module
    if isinstance(x, Module):
        return x
    if isinstance(x, str):
        from xlapy.hlo.parser import parse_hlo_module

        return parse_hlo_module(x)
    raise InvalidArgumentError(
        f"{who}: expected a Module, an XlaComputation or HLO text, got {type(x).__name__}")


def evaluate(module_or_computation, *args, options: EvalOptions | None = None, **option_values):
    """Run the entry computation on ``args`` (one per parameter; tuples for tuple
    parameters) and return NumPy arrays (a tuple for a tuple result).

    >>> evaluate(parse_hlo_module(text), np.ones(3, np.float32))
    """
    module = module_of(module_or_computation, "evaluate")
    if options is None:
        options = EvalOptions(**option_values)
    elif option_values:
        raise InvalidArgumentError("evaluate: pass either options= or option keywords, not both")
    entry = module.entry
    params = entry.parameters
    if len(args) != len(params):
        raise InvalidArgumentError(
            f"evaluate: the entry computation %{entry.name} takes {len(params)} arguments "
            f"({', '.join(str(p.shape) for p in params)}), got {len(args)}")
    values = [to_value(a, p.shape, f"evaluate: argument {i} (%{p.name})", exact_dtype=True)
              for i, (a, p) in enumerate(zip(args, params))]
    ctx = EvalContext(module, options)
    return ctx.call(entry, values)


__all__ = ["EvalContext", "EvalOptions", "EvaluationError", "TOKEN", "UnimplementedError", "evaluate"]
