"""Builder functions every computation needs: Parameter; the argument checks every family
uses (one place that says what a builder, an operand list, an integer, an integer list, a
list of pairs, a boolean, a shape or an element type argument must be, naming the op and the
argument); ``public_op``, the wrapper every public function of ``xlapy.ops`` gets, so that
any error it raises names the op the user called; and the broadcasting helpers the
elementwise functions share with the other families."""

from __future__ import annotations

import functools
import inspect
import re
from typing import Sequence

from xlapy.errors import InvalidArgumentError, XlaError
from xlapy.hlo.attrs import check_int, check_int_list, check_int_tuples, check_sequence
from xlapy.hlo.opcodes import OPCODE_NAMES
from xlapy.ops.builder import XlaBuilder, XlaOp
from xlapy.shape import PrimitiveType, Shape, dtypes

__all__ = ["Parameter"]


# -- naming the op in every error -----------------------------------------------------------

#: The public names of xlapy.ops that are functions (filled by ``public_op``).
PUBLIC_OPS: set[str] = set()


def _names_an_op(message: str, name: str) -> str | None:
    """The op name ``message`` starts with (``name``, ``"Name:"`` or ``"opcode:"``), if any."""
    if re.match(re.escape(name) + r"\b", message):
        return name
    head, sep, _ = message.partition(":")
    if sep and (head in PUBLIC_OPS or head in OPCODE_NAMES):
        return head
    return None


def public_op(name: str, fn):
    """``fn`` as the public ``ops.<name>``: an error it raises names ``name`` first.

    An xlapy error that starts with an HLO opcode (``reduce-window: ...``) or with ``name``
    passes unchanged; one that starts with another public op's name (ReduceAll calling
    Reduce's code, Conv calling ConvGeneralDilated) is renamed to ``name``; one naming no
    op (a shape, literal or text error from a lower layer) gets ``name: `` in front. A call
    with arguments that do not fit the signature (Python's TypeError at the call itself)
    becomes an InvalidArgumentError naming the op. Errors of xlapy's own code (a TypeError
    inside ``fn``) pass through: the sweep in tests/ops/test_bad_arguments.py finds them.
    """
    PUBLIC_OPS.add(name)

    @functools.wraps(fn)
    def op(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except XlaError as err:
            message = str(err)
            head = _names_an_op(message, name)
            if head == name or head in OPCODE_NAMES:
                raise
            rest = message[len(head) + 1:].lstrip() if head else message
            err.args = (f"{name}: {rest}", *err.args[1:])
            raise
        except TypeError as err:
            if err.__traceback__ is not None and err.__traceback__.tb_next is None:
                # Raised by the call itself: the arguments do not fit the signature.
                text = re.sub(r"^[\w.<>]+\(\) ", "", str(err))
                raise InvalidArgumentError(f"{name}: {text}") from None
            raise

    op.__xlapy_public_op__ = True
    return op


def public_value_type(name: str, cls: type) -> type:
    """The value class ``cls`` (dimension numbers, channel handles...) as the public
    ``ops.<name>``: its constructor's errors name it, as ``public_op`` does for functions."""
    if not getattr(cls.__init__, "__xlapy_public_op__", False):
        cls.__init__ = public_op(name, cls.__init__)
    return cls


def call_overload(op_name: str, target, *args, **kwargs):
    """Call ``target``, one of the forms of an overloaded op (Reduce, AllToAllTuple), with
    arguments that must fit its signature; if they do not, an error naming the op."""
    try:
        bound = inspect.signature(target).bind(*args, **kwargs)
    except TypeError as e:
        raise InvalidArgumentError(f"{op_name}: {e}") from None
    return target(*bound.args, **bound.kwargs)


# -- argument checks --------------------------------------------------------------------------


def builder_arg(value, op_name: str) -> XlaBuilder:
    if not isinstance(value, XlaBuilder):
        raise InvalidArgumentError(f"{op_name}: expected an XlaBuilder, got {type(value).__name__}")
    return value


def op_list(values, what: str, op_name: str, *, one_allowed: bool = False) -> list[XlaOp]:
    """A list of XlaOps (``one_allowed``: or one XlaOp, made a list of one)."""
    if isinstance(values, XlaOp):
        if one_allowed:
            return [values]
        raise InvalidArgumentError(f"{op_name}: {what} must be a list of XlaOps, got one XlaOp "
                                   f"(%{values.instruction.name})")
    items = list(check_sequence(values, f"{op_name}: {what}", "a list of XlaOps"))
    for i, v in enumerate(items):
        if not isinstance(v, XlaOp):
            raise InvalidArgumentError(
                f"{op_name}: {what}[{i}] must be an XlaOp, got {type(v).__name__}")
    return items


def int_arg(value, what: str, op_name: str, minimum: int | None = None) -> int:
    return check_int(value, f"{op_name}: {what}", minimum)


def int_list(values, what: str, op_name: str, minimum: int | None = None) -> tuple[int, ...]:
    return check_int_list(values, f"{op_name}: {what}", minimum)


def int_pairs(values, what: str, op_name: str) -> tuple[tuple[int, int], ...]:
    """``[(low, high), ...]`` (padding) or ``[(source, target), ...]``."""
    return check_int_tuples(values, f"{op_name}: {what}")


def bool_arg(value, what: str, op_name: str) -> bool:
    if isinstance(value, bool) or (type(value) is int and value in (0, 1)):
        return bool(value)
    if hasattr(value, "dtype") and getattr(value, "shape", None) == () and value.dtype == bool:
        return bool(value)
    raise InvalidArgumentError(f"{op_name}: {what} must be true or false, got {value!r}")


def bool_list(values, what: str, op_name: str) -> tuple[bool, ...]:
    items = check_sequence(values, f"{op_name}: {what}", "a list of booleans")
    return tuple(bool_arg(v, f"{what}[{i}]", op_name) for i, v in enumerate(items))


def shape_arg(value, what: str, op_name: str) -> Shape:
    if not isinstance(value, Shape):
        raise InvalidArgumentError(f"{op_name}: {what} must be a Shape, got {value!r}")
    return value


def string_arg(value, what: str, op_name: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{op_name}: {what} must be a string, got {value!r}")
    return value


def element_type_arg(value, what: str, op_name: str) -> PrimitiveType:
    """A PrimitiveType from itself, its name (``"f32"``, ``"F32"``) or a NumPy dtype."""
    if isinstance(value, PrimitiveType):
        t = value
    elif isinstance(value, str):
        try:
            t = dtypes.from_name(value)
        except InvalidArgumentError:
            t = None
    elif value is None:  # np.dtype(None) is float64: never what a user meant
        t = None
    else:
        try:
            t = dtypes.from_dtype(value)
        except (InvalidArgumentError, TypeError, ValueError):
            t = None
    if t is None or t is PrimitiveType.PRIMITIVE_TYPE_INVALID:
        raise InvalidArgumentError(f"{op_name}: {what} must be an element type (a PrimitiveType, "
                                   f"its name or a NumPy dtype), got {value!r}")
    return t


def Parameter(builder: XlaBuilder, parameter_number: int, shape: Shape, name: str = "") -> XlaOp:
    """``ops.Parameter(b, 0, parse_shape("f32[3]"), "x")``: the computation's input number
    ``parameter_number``."""
    builder_arg(builder, "Parameter")
    return builder.parameter(parameter_number, shape, string_arg(name, "name", "Parameter"))


def check_same_builder(op_name: str, ops: Sequence[XlaOp]) -> XlaBuilder:
    """The builder all ``ops`` belong to; a clear error otherwise."""
    if not ops:
        raise InvalidArgumentError(f"{op_name}: needs at least one operand")
    for i, o in enumerate(ops):
        if not isinstance(o, XlaOp):
            raise InvalidArgumentError(f"{op_name}: operand {i} must be an XlaOp, got {type(o).__name__}")
    b = ops[0].builder
    for i, o in enumerate(ops[1:], 1):
        if o.builder is not b:
            raise InvalidArgumentError(
                f"{op_name}: operand {i} was built by builder '{o.builder.name}', not by '{b.name}'"
            )
    return b


def in_dim_broadcast(op: XlaOp, out_dims: Sequence[int], broadcast_dimensions: Sequence[int],
                     dynamic: Sequence[bool] | None = None) -> XlaOp:
    """HLO ``broadcast`` of ``op`` to ``out_dims``, operand dim i going to
    ``broadcast_dimensions[i]`` (XLA's InDimBroadcast)."""
    shape = Shape.array(op.shape.element_type, out_dims, dynamic_dimensions=dynamic)
    return op.builder.emit("broadcast", [op], {"dimensions": tuple(broadcast_dimensions)}, shape=shape)


def reshape_to(op: XlaOp, dims: Sequence[int], dynamic: Sequence[bool] | None = None) -> XlaOp:
    shape = Shape.array(op.shape.element_type, dims, dynamic_dimensions=dynamic)
    return op.builder.emit("reshape", [op], {}, shape=shape)


def add_broadcast_sequence(out: Shape, op: XlaOp) -> XlaOp:
    """Broadcast ``op`` (same rank as ``out``) along its size-1 dimensions to ``out``'s
    dimensions: a reshape dropping them, then a broadcast (XLA's AddBroadcastSequence)."""
    shape = op.shape
    keep, dims, dyn = [], [], []
    for i, (d, o) in enumerate(zip(shape.dimensions, out.dimensions)):
        if d == o:
            keep.append(i)
            dims.append(d)
            dyn.append(shape.dynamic_dimensions[i])
    reshaped = reshape_to(op, dims, dyn) if len(dims) != len(shape.dimensions) else op
    # As XLA's AddBroadcastSequence: the broadcast has the output's sizes, static.
    return in_dim_broadcast(reshaped, out.dimensions, keep)
