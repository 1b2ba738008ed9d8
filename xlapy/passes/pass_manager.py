"""Pass infrastructure: HloPass (one rewrite of a Module), PassPipeline (passes in order,
optionally to a fixed point, the verifier after every pass), and the facts passes share
(side effects through called computations, constant values).

Owns the pass protocol and the error a failing pass raises (PassError, naming the pass).
Imports the hlo layer and xlapy.verifier; the passes import this module.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from xlapy.errors import XlaError
from xlapy.hlo.ir import Computation, Instruction, Module


class PassError(XlaError):
    """A pass failed, or left a module the verifier rejects; the message names the pass."""


class HloPass:
    """One transformation of a module. Subclasses set ``name`` (the ``--passes`` spelling)
    and implement ``run(module) -> bool`` (True when the module changed)."""

    name = "pass"

    def run(self, module: Module) -> bool:
        raise NotImplementedError(f"{type(self).__name__}.run")

    def __repr__(self) -> str:
        return f"<HloPass {self.name}>"


class PassPipeline(HloPass):
    """Runs ``passes`` in order; with ``fixed_point=True`` repeats the whole list until no
    pass changes the module (at most ``max_iterations`` rounds). After each pass that
    changed the module, ``xlapy.verify_module`` runs (``verify=False`` skips it); any error
    is a PassError naming the pass.

    >>> PassPipeline([DeadCodeElimination(), Cse()]).run(module)   # True if changed
    """

    name = "pipeline"

    def __init__(self, passes: Iterable[HloPass], *, fixed_point: bool = False,
                 max_iterations: int = 25, verify: bool = True, name: str = "pipeline"):
        self.passes = list(passes)
        self.fixed_point = fixed_point
        self.max_iterations = max_iterations
        self.verify = verify
        self.name = name
        self.log: list[tuple[str, bool]] = []  # (pass name, changed) per pass run

    def run(self, module: Module) -> bool:
        from xlapy.verifier import verify_module

        changed_any = False
        rounds = self.max_iterations if self.fixed_point else 1
        for _ in range(rounds):
            changed_round = False
            for p in self.passes:
                try:
                    changed = bool(p.run(module))
                except PassError:
                    raise
                except Exception as e:
                    raise PassError(f"pass '{p.name}' failed: {type(e).__name__}: {e}") from e
                self.log.append((p.name, changed))
                if changed and self.verify:
                    try:
                        verify_module(module)
                    except XlaError as e:
                        raise PassError(f"pass '{p.name}' left an invalid module: {e}") from e
                changed_round |= changed
            changed_any |= changed_round
            if not changed_round:
                break
        return changed_any


# -- shared facts ---------------------------------------------------------------------------


class SideEffects:
    """``has_side_effect(instr)``: the opcode's own side effect, or one anywhere in the
    computations it calls (a call/while/conditional whose body has an outfeed has one).
    Cached per computation for one pass run."""

    def __init__(self):
        self._comp: dict[int, bool] = {}

    def computation(self, comp: Computation) -> bool:
        key = id(comp)
        if key not in self._comp:
            self._comp[key] = False  # recursion guard (HLO has no recursion anyway)
            self._comp[key] = any(self.has_side_effect(i) for i in comp.instructions)
        return self._comp[key]

    def has_side_effect(self, instr: Instruction) -> bool:
        if instr.has_side_effect:
            return True
        return any(self.computation(c) for c in instr.called_computations())


def constant_array(instr: Instruction) -> np.ndarray | None:
    """The value of an array constant (None for other instructions, tuples, tokens and
    elided ``{...}`` constants, whose values are unknown)."""
    if instr.opcode != "constant":
        return None
    lit = instr.attrs["literal"]
    if lit.elided or not lit.shape.is_array():
        return None
    return lit.array


def uniform_value(instr: Instruction) -> np.ndarray | None:
    """The one value every element of ``instr`` has, as a 0-d array, when ``instr`` is a
    constant whose elements all have the same bits, or a broadcast of such a constant;
    otherwise None. Bits, not values: -0 and +0 differ, NaNs with other payloads differ."""
    while instr.opcode == "broadcast":
        instr = instr.operands[0]
    arr = constant_array(instr)
    if arr is None or arr.size == 0:
        return None
    flat = np.ascontiguousarray(arr).reshape(-1)
    width = flat.dtype.itemsize
    if flat.dtype.kind in "biuf" or width in (1, 2, 4, 8):
        view_type = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(width)
        if view_type is not None:
            bits = flat.view(view_type)
            if not np.all(bits == bits[0]):
                return None
            return flat[:1].reshape(())
    raw = flat.view(np.uint8).reshape(flat.size, width)
    if not np.all(raw == raw[0]):
        return None
    return flat[:1].reshape(())


def same_bits(value: np.ndarray, want) -> bool:
    """``value`` (0-d) has exactly the bits of ``want`` converted to its dtype."""
    want_arr = np.asarray(want).astype(value.dtype).reshape(())
    return value.tobytes() == want_arr.tobytes()
