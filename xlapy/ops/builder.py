"""XlaBuilder, XlaOp and XlaComputation: building HLO computations from Python.

Owns: the builder state (one computation under construction, its parameters), XlaOp (a
handle to one instruction, with arithmetic operators as a convenience) and XlaComputation
(a built Module with its program shape). The op functions are the other modules of
``xlapy.ops`` (one per family; XLA keeps them with the builder too, in xla_builder.h); each
turns its arguments into an opcode, operands and attributes and calls ``XlaBuilder.emit``,
which runs the opcode's one shape rule, so errors raise at the call that caused them.
Imports shape, hlo and opdefs; XlaOp's operators call the op functions of this package.
"""

from __future__ import annotations

from typing import Any, Sequence

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.ir import Computation, Instruction, Module, ProgramShape, callees_first
from xlapy.opdefs.registry import make_instruction
from xlapy.shape import Shape


class XlaOp:
    """A value being built: one instruction of one builder."""

    __slots__ = ("builder", "instruction")

    def __init__(self, builder: "XlaBuilder", instruction: Instruction):
        self.builder = builder
        self.instruction = instruction

    @property
    def shape(self) -> Shape:
        return self.instruction.shape

    def __repr__(self) -> str:
        return f"<XlaOp %{self.instruction.name}: {self.shape}>"

    # Arithmetic as a convenience: x + y, x * 2.0, -x, x @ y ...
    def _bin(self, name, other, reverse=False):
        from xlapy import ops

        other = _as_op(self.builder, other, self.shape)
        fn = getattr(ops, name)
        return fn(other, self) if reverse else fn(self, other)

    def __add__(self, o): return self._bin("Add", o)
    def __radd__(self, o): return self._bin("Add", o, True)
    def __sub__(self, o): return self._bin("Sub", o)
    def __rsub__(self, o): return self._bin("Sub", o, True)
    def __mul__(self, o): return self._bin("Mul", o)
    def __rmul__(self, o): return self._bin("Mul", o, True)
    def __truediv__(self, o): return self._bin("Div", o)
    def __rtruediv__(self, o): return self._bin("Div", o, True)
    def __mod__(self, o): return self._bin("Rem", o)
    def __rmod__(self, o): return self._bin("Rem", o, True)
    def __pow__(self, o): return self._bin("Pow", o)
    def __rpow__(self, o): return self._bin("Pow", o, True)
    def __and__(self, o): return self._bin("And", o)
    def __rand__(self, o): return self._bin("And", o, True)
    def __or__(self, o): return self._bin("Or", o)
    def __ror__(self, o): return self._bin("Or", o, True)
    def __xor__(self, o): return self._bin("Xor", o)
    def __rxor__(self, o): return self._bin("Xor", o, True)
    def __lshift__(self, o): return self._bin("ShiftLeft", o)
    def __rshift__(self, o): return self._bin("ShiftRightArithmetic", o)
    def __lt__(self, o): return self._bin("Lt", o)
    def __le__(self, o): return self._bin("Le", o)
    def __gt__(self, o): return self._bin("Gt", o)
    def __ge__(self, o): return self._bin("Ge", o)

    def __matmul__(self, o):
        from xlapy import ops

        return ops.Dot(self, _as_op(self.builder, o, self.shape))

    def __neg__(self):
        from xlapy import ops

        return ops.Neg(self)

    def __abs__(self):
        from xlapy import ops

        return ops.Abs(self)

    def __invert__(self):
        from xlapy import ops

        return ops.Not(self)

    # Equality stays Python identity (XlaOps are used as dict keys); use ops.Eq/ops.Ne.
    __hash__ = object.__hash__


def _as_op(builder: "XlaBuilder", value, like: Shape) -> XlaOp:
    if isinstance(value, XlaOp):
        return value
    import numpy as np

    from xlapy import ops
    from xlapy.shape import dtypes

    if not like.is_array():
        raise InvalidArgumentError(f"cannot combine a Python value with the non-array {like}")
    return ops.Constant(builder, np.asarray(value, dtype=dtypes.to_dtype(like.element_type)))


class XlaComputation:
    """A built computation: an HLO Module whose entry is the computation built."""

    def __init__(self, module: Module):
        self.module = module

    @property
    def name(self) -> str:
        return self.module.entry.name

    @property
    def computation(self) -> Computation:
        return self.module.entry

    def program_shape(self) -> ProgramShape:
        return self.module.entry.program_shape()

    def as_hlo_module(self) -> Module:
        return self.module

    def as_hlo_text(self, **options) -> str:
        """The module in XLA's HLO text (needs the printer of the text-format layer)."""
        from xlapy.hlo.printer import module_to_string

        return module_to_string(self.module, **options)

    def __repr__(self) -> str:
        return f"<XlaComputation {self.name}: {self.program_shape()}>"


class XlaBuilder:
    """Builds one computation: ``b = XlaBuilder("f"); x = ops.Parameter(b, 0, shape, "x");
    comp = b.build(ops.Add(x, x))``."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"XlaBuilder: name must be a non-empty string, got {name!r}")
        self.name = name
        self._computation = Computation(name)
        self._parameters: dict[int, Instruction] = {}
        self._built = False
        self._sub_builders = 0

    # -- emission --------------------------------------------------------------------------

    def emit(self, opcode: str, operands: Sequence[XlaOp] = (), attrs: dict[str, Any] | None = None,
             *, shape: Shape | None = None, name: str | None = None, op_name: str | None = None,
             **data) -> XlaOp:
        """Add one instruction: check operands belong here, run the shape rule, append."""
        self._check_open()
        instrs = []
        for i, o in enumerate(operands):
            if not isinstance(o, XlaOp):
                raise InvalidArgumentError(
                    f"{op_name or opcode}: operand {i} must be an XlaOp, got {type(o).__name__}"
                )
            if o.builder is not self:
                raise InvalidArgumentError(
                    f"{op_name or opcode}: operand {i} (%{o.instruction.name}) was built by "
                    f"builder '{o.builder.name}', not by '{self.name}'"
                )
            instrs.append(o.instruction)
        instr = make_instruction(opcode, instrs, attrs, shape=shape, name=name or opcode, **data)
        self._computation.add_instruction(instr)
        return XlaOp(self, instr)

    def parameter(self, number: int, shape: Shape, name: str = "") -> XlaOp:
        if not isinstance(shape, Shape):
            raise InvalidArgumentError(f"Parameter: shape must be a Shape, got {shape!r}")
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise InvalidArgumentError(f"Parameter: parameter number must be an integer >= 0, got {number!r}")
        if number in self._parameters:
            raise InvalidArgumentError(
                f"Parameter: parameter number {number} already registered "
                f"(%{self._parameters[number].name})"
            )
        op = self.emit("parameter", (), {"parameter_number": number}, shape=shape,
                       name=name or f"parameter.{number}")
        self._parameters[number] = op.instruction
        return op

    def get_shape(self, op: XlaOp) -> Shape:
        """The inferred shape of an op built by this builder."""
        if not isinstance(op, XlaOp) or op.builder is not self:
            raise InvalidArgumentError("get_shape: the op was not built by this builder")
        return op.shape

    def get_program_shape(self, root: XlaOp | None = None) -> ProgramShape:
        root = root or self._last()
        params = [self._parameters[n] for n in sorted(self._parameters)]
        return ProgramShape([p.shape for p in params], root.shape, [p.name for p in params])

    def create_sub_builder(self, name: str) -> "XlaBuilder":
        """A builder for a sub-computation (reducer, body, comparator), named after this one."""
        self._sub_builders += 1
        return XlaBuilder(f"{self.name}.{name}" if name else f"{self.name}.sub{self._sub_builders}")

    # -- build -----------------------------------------------------------------------------

    def build(self, root: XlaOp | None = None) -> XlaComputation:
        """Finish: the root is ``root`` or the last op emitted. Returns an XlaComputation
        whose Module holds this computation (entry) and every computation it calls."""
        self._check_open()
        if root is None:
            root = self._last()
        if not isinstance(root, XlaOp) or root.builder is not self:
            raise InvalidArgumentError(f"build: the root op was not built by builder '{self.name}'")
        numbers = sorted(self._parameters)
        if numbers != list(range(len(numbers))):
            missing = min(set(range(len(numbers) + 1)) - set(numbers))
            raise InvalidArgumentError(
                f"build: computation '{self.name}' has parameters {numbers} but no parameter "
                f"number {missing}; parameter numbers must be 0..n-1"
            )
        comp = self._computation
        comp.root = root.instruction
        self._built = True
        module = Module(self.name)
        cmap: dict[int, Computation] = {}
        for c in callees_first([comp]):
            copy = c.clone(suffix="", computation_map=cmap)
            copy.name = c.name
            cmap[id(c)] = copy
            module.add_computation(copy, entry=c is comp)
        return XlaComputation(module)

    def _last(self) -> XlaOp:
        if not self._computation.instructions:
            raise InvalidArgumentError(f"build: builder '{self.name}' has no instructions")
        return XlaOp(self, self._computation.instructions[-1])

    def _check_open(self) -> None:
        if self._built:
            raise InvalidArgumentError(f"builder '{self.name}' was already built")

    def __repr__(self) -> str:
        return f"<XlaBuilder {self.name}>"


def computation_of(value, op_name: str) -> Computation:
    """The IR computation of an XlaComputation argument (to_apply, body, comparator...)."""
    if isinstance(value, XlaComputation):
        return value.module.entry
    if isinstance(value, Computation):
        return value
    raise InvalidArgumentError(f"{op_name}: expected an XlaComputation, got {type(value).__name__}")
