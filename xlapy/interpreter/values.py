"""Run-time values of the interpreter and their conversion from and to user data.

A value is a NumPy array (0-d for scalars) of the element type's dtype, a tuple of values,
or TOKEN. Owns: ``to_value`` (check and convert an argument against a parameter shape),
``literal_to_value``, ``value_to_literal``, ``runtime_shape``."""

from __future__ import annotations

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.shape import Shape, dtypes
from xlapy.shape.literal import Literal
from xlapy.shape.tree import flatten_tuples, map_shaped, path_text


class _Token:
    """The value of a token (after-all, infeed/outfeed/send/recv ordering)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "TOKEN"


TOKEN = _Token()


def to_value(arg, shape: Shape, what: str, *, exact_dtype: bool = False):
    """Check ``arg`` against ``shape`` and convert it: arrays to the element dtype (NumPy
    casting rules), Literals to their arrays, tuples element by element (walked with a
    stack: nesting depth needs no recursion).

    ``exact_dtype`` (the runtime's and ``evaluate``'s arguments, as a jax-compiled
    executable checks them): a NumPy array or scalar must already have the element type,
    nothing is converted behind the caller's back; Python numbers and lists convert only
    without loss of kind or range (no complex to real, no float to integer, no integer
    outside the type). Errors name ``what``, the expected shape and what came, in HLO
    syntax."""

    def check(value, s, path):
        if isinstance(value, Literal):
            value = literal_to_value(value)
        if not isinstance(value, (tuple, list)) or len(value) != len(s.tuple_shapes):
            raise InvalidArgumentError(
                f"{what}{path_text(path)}: expected a tuple of {len(s.tuple_shapes)} values "
                f"for {s}, got {type(value).__name__}")
        return value

    def leaf(value, s, path):
        if isinstance(value, Literal):
            value = literal_to_value(value)
        return _leaf_value(value, s, f"{what}{path_text(path)}", exact_dtype)

    return map_shaped(shape, arg, leaf, check)


def _leaf_value(arg, shape: Shape, what: str, exact_dtype: bool = False):
    if shape.is_token():
        return TOKEN
    if not shape.is_array():
        raise InvalidArgumentError(f"{what}: cannot pass a value for {shape}")
    dtype = dtypes.to_dtype(shape.element_type)
    try:
        array = np.asarray(arg)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidArgumentError(f"{what}: cannot convert the argument to {shape}: {e}") from None
    if array.dtype != dtype and exact_dtype:
        _check_lossless(array, isinstance(arg, (np.ndarray, np.generic)), shape, what)
    given = array
    try:
        if array.dtype != dtype:
            array = array.astype(dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidArgumentError(f"{what}: cannot convert the argument to {shape}: {e}") from None
    check_dims(array.shape, shape, what, described(given))
    return array


def described(array: np.ndarray) -> str:
    """``f64[2,3]`` for an array of an XLA element type, else its NumPy dtype and shape."""
    try:
        name = dtypes.type_name(dtypes.from_dtype(array.dtype))
    except (InvalidArgumentError, KeyError, TypeError, ValueError):
        return f"an array of NumPy dtype {array.dtype} and dimensions {list(array.shape)}"
    return f"{name}[{','.join(str(d) for d in array.shape)}]"


def _check_lossless(array: np.ndarray, from_numpy: bool, shape: Shape, what: str) -> None:
    """exact_dtype's rule for an argument whose dtype is not the element type's."""
    t = shape.element_type
    want = dtypes.type_name(t)
    got = described(array)
    if from_numpy:
        if not got.startswith("an array"):
            got += f" (NumPy dtype {array.dtype})"
        raise InvalidArgumentError(f"{what}: expected {shape}, got {got}: the element types "
                                   f"differ; convert the array to {want} first")
    kind = array.dtype.kind
    if kind not in "biufc":
        raise InvalidArgumentError(f"{what}: expected {shape}, got {got}")
    integral = dtypes.is_integral(t) or dtypes.is_pred(t)
    if kind == "c" and not dtypes.is_complex(t):
        raise InvalidArgumentError(f"{what}: expected {shape}, got complex values: {want} "
                                   f"cannot hold their imaginary parts")
    if kind in "fc" and integral:
        raise InvalidArgumentError(f"{what}: expected {shape}, got floating-point values: "
                                   f"pass integers for {want}")
    if kind in "iu" and dtypes.is_integral(t) and array.size:
        bits = dtypes.bit_width(t)
        lo_ok, hi_ok = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) \
            if dtypes.is_signed_integral(t) else (0, (1 << bits) - 1)
        lo, hi = int(array.min()), int(array.max())
        if lo < lo_ok or hi > hi_ok:
            raise InvalidArgumentError(
                f"{what}: expected {shape}, got the integer {lo if lo < lo_ok else hi}, "
                f"outside {want}'s range [{lo_ok}, {hi_ok}]")


def check_dims(dims: tuple[int, ...], shape: Shape, what: str, got: str | None = None) -> None:
    ok = len(dims) == len(shape.dimensions)
    if ok:
        for d, bound, dyn in zip(dims, shape.dimensions, shape.dynamic_dimensions):
            if (d != bound and not dyn) or (dyn and bound >= 0 and d > bound):
                ok = False
    if not ok:
        got = got or f"dimensions {list(dims)}"
        raise InvalidArgumentError(f"{what}: expected {shape}, got {got}: the dimensions "
                                   f"differ")


def literal_to_value(lit: Literal):
    if lit.elided:
        raise InvalidArgumentError(
            f"the value of this {lit.shape} constant was elided from the text ({{...}}): it is "
            "unknown. Print the module with print_large_constants=True to keep constants.")
    if lit.shape.is_tuple():
        return map_shaped(lit.shape, lit, lambda e, _s, _p: literal_to_value(e),
                          lambda e, _s, _p: e.elements)
    if lit.shape.is_token():
        return TOKEN
    return lit.array


def value_to_literal(value, shape: Shape) -> Literal:
    if shape.is_tuple():
        # the leaves converted, then tuple literals built around them bottom-up
        leaves = map_shaped(shape, value, lambda v, s, _p: _leaf_literal(v, s))
        return _tuple_literal(shape, leaves)
    return _leaf_literal(value, shape)


def _tuple_literal(shape: Shape, value) -> Literal:
    """Nested tuples of Literals (following ``shape``) as one tuple Literal."""
    stack = [(shape, value, [])]
    while True:
        s, v, done = stack[-1]
        if len(done) < len(s.tuple_shapes):
            cs, cv = s.tuple_shapes[len(done)], v[len(done)]
            if cs.is_tuple():
                stack.append((cs, cv, []))
            else:
                done.append(cv)
            continue
        stack.pop()
        lit = Literal(s, elements=tuple(done))
        if not stack:
            return lit
        stack[-1][2].append(lit)


def _leaf_literal(value, shape: Shape) -> Literal:
    if shape.is_token():
        return Literal.token()
    dims = tuple(value.shape)
    if dims != tuple(shape.dimensions):
        dyn = tuple(d != b for d, b in zip(dims, shape.dimensions))
        shape = Shape.array(shape.element_type, dims, layout=shape.layout,
                            dynamic_dimensions=tuple(a or b for a, b in zip(dyn, shape.dynamic_dimensions)))
    return Literal.from_array(value, shape)


def flatten(value) -> list:
    """Leaves of a (nested) tuple value, depth first."""
    return flatten_tuples(value)
