"""Shapes: arrays (static, bounded-dynamic ``<=n`` and unbounded ``?`` dimensions), tuples,
tokens and opaque values, and buffers (``b(f32[8])``: an array that custom calls such as
Pin/Unpin/CreateBuffer hand around as mutable memory), printed exactly as XLA prints them.

Owns: Shape, its constructors and the helpers XLA users expect (rank, element count,
negative dimension numbers, default layout, true rank, equality and compatibility).
Imports only dtypes, layout and errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import prod

from xlapy.errors import InvalidArgumentError, ResourceExhaustedError, human_bytes
from xlapy.shape import dtypes
from xlapy.shape.dtypes import PrimitiveType
from xlapy.shape.layout import Layout

#: Shape::kUnboundedSize: the size recorded for an unbounded dynamic dimension (``?``).
UNBOUNDED_SIZE = -(2**63)
#: XLA keeps dimension sizes, element counts and byte sizes in int64.
INT64_MAX = 2**63 - 1

_DEFAULT = object()


@dataclass(frozen=True, eq=False)
class Shape:
    """An XLA shape. Build with ``Shape.array``, ``Shape.tuple``, ``Shape.token``,
    ``Shape.opaque``, ``Shape.buffer_of`` or ``parse_shape``.

    A buffer shape (``buffer`` set) is an array shape as XLA's is: ``is_array()`` holds and
    its element type, dimensions and layout are the array's (``buffer_shape()``); it prints
    as ``b(<array>)`` and equals only another buffer of an equal array.

    >>> str(Shape.array(PrimitiveType.F32, (3, 5)))
    'f32[3,5]{1,0}'
    """

    element_type: PrimitiveType
    dimensions: tuple[int, ...] = ()
    dynamic_dimensions: tuple[bool, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple["Shape", ...] = ()
    buffer: bool = False

    # -- construction -------------------------------------------------------------------

    @staticmethod
    def array(
        element_type,
        dimensions=(),
        layout=_DEFAULT,
        dynamic_dimensions=None,
    ) -> "Shape":
        """An array shape, with the default layout unless ``layout`` is given (None: no
        layout). ``dynamic_dimensions[i]`` marks a bounded dynamic dimension (``<=n``); a
        size of ``UNBOUNDED_SIZE`` (or ``None``) is an unbounded one (``?``)."""
        et = element_type if isinstance(element_type, PrimitiveType) else dtypes.from_name(str(element_type))
        if not dtypes.is_array_type(et):
            raise InvalidArgumentError(
                f"Shape.array: element type must be an array type, got {dtypes.type_name(et)}"
            )
        dims = []
        for d in dimensions:
            if d is None:
                d = UNBOUNDED_SIZE
            if not isinstance(d, (int,)) and not hasattr(d, "__index__"):
                raise InvalidArgumentError(f"Shape.array: dimension sizes must be integers, got {d!r}")
            dims.append(int(d))
        dims = tuple(dims)
        if dynamic_dimensions is None:
            dyn = tuple(d == UNBOUNDED_SIZE for d in dims)
        else:
            dyn = tuple(bool(x) for x in dynamic_dimensions)
            if len(dyn) != len(dims):
                raise InvalidArgumentError(
                    f"Shape.array: dynamic_dimensions has {len(dyn)} entries for "
                    f"{len(dims)} dimensions"
                )
        for i, (d, is_dyn) in enumerate(zip(dims, dyn)):
            if d == UNBOUNDED_SIZE:
                if not is_dyn:
                    raise InvalidArgumentError(
                        f"Shape.array: dimension {i} is unbounded but not marked dynamic"
                    )
            elif d < 0:
                raise InvalidArgumentError(
                    f"Shape.array: dimension sizes must be >= 0, got {d} for dimension {i} "
                    f"of {dtypes.type_name(et)}{_dims_text(dims, dyn)}"
                )
        check_size(et, dims, dyn)
        if layout is _DEFAULT:
            layout = Layout.default(len(dims))
        shape = Shape(et, dims, dyn, layout)
        if layout is not None:
            layout.validate(dims, shape.to_string(print_layout=False))
        return shape

    @staticmethod
    def scalar(element_type) -> "Shape":
        return Shape.array(element_type, ())

    @staticmethod
    def tuple(shapes=()) -> "Shape":
        shapes = tuple(shapes)
        for s in shapes:
            if not isinstance(s, Shape):
                raise InvalidArgumentError(f"Shape.tuple: elements must be Shapes, got {s!r}")
        return Shape(PrimitiveType.TUPLE, tuple_shapes=shapes)

    @staticmethod
    def token() -> "Shape":
        return Shape(PrimitiveType.TOKEN)

    @staticmethod
    def opaque() -> "Shape":
        return Shape(PrimitiveType.OPAQUE_TYPE)

    @staticmethod
    def buffer_of(array: Shape) -> Shape:
        """The buffer shape ``b(array)`` (XLA's MakeValidatedBufferShape): ``array`` must be
        an array shape that is not a buffer."""
        if not isinstance(array, Shape) or not array.is_array() or array.buffer:
            raise InvalidArgumentError(
                f"element_shape must be an array shape to create a buffer shape, got {array}")
        return Shape(array.element_type, array.dimensions, array.dynamic_dimensions,
                     array.layout, buffer=True)

    # -- kind ------------------------------------------------------------------------------

    def is_array(self) -> bool:
        return dtypes.is_array_type(self.element_type)

    def is_tuple(self) -> bool:
        return self.element_type == PrimitiveType.TUPLE

    def is_token(self) -> bool:
        return self.element_type == PrimitiveType.TOKEN

    def is_opaque(self) -> bool:
        return self.element_type == PrimitiveType.OPAQUE_TYPE

    def is_buffer(self) -> bool:
        return self.buffer

    def buffer_shape(self) -> Shape:
        """The array a buffer shape holds."""
        if not self.buffer:
            raise InvalidArgumentError(f"buffer_shape: expected a buffer shape, got {self}")
        return Shape(self.element_type, self.dimensions, self.dynamic_dimensions, self.layout)

    def is_scalar(self) -> bool:
        return self.is_array() and not self.dimensions

    def is_empty_tuple(self) -> bool:
        return self.is_tuple() and not self.tuple_shapes

    def is_dynamic(self) -> bool:
        """True if any dimension (of any leaf) is dynamic."""
        if self.is_tuple():
            return any(leaf.is_dynamic() for _, leaf in self.leaves())
        return any(self.dynamic_dimensions)

    def is_static(self) -> bool:
        return not self.is_dynamic()

    def is_unbounded_dynamic(self) -> bool:
        if self.is_tuple():
            return any(leaf.is_unbounded_dynamic() for _, leaf in self.leaves())
        return any(d == UNBOUNDED_SIZE for d in self.dimensions)

    def is_dynamic_dimension(self, dim: int) -> bool:
        return self.dynamic_dimensions[self.dimension_number(dim)]

    def is_unbounded_dimension(self, dim: int) -> bool:
        return self.dimensions[self.dimension_number(dim)] == UNBOUNDED_SIZE

    def has_layout(self) -> bool:
        if self.is_tuple():
            return all(leaf.has_layout() for _, leaf in self.leaves())
        return not self.is_array() or self.layout is not None

    # -- sizes -----------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """Number of dimensions (XLA: ``dimensions().size()``)."""
        self._require_array("rank")
        return len(self.dimensions)

    ndim = rank

    @property
    def true_rank(self) -> int:
        """Number of dimensions of size other than 1 (XLA's TrueNumDimensions)."""
        self._require_array("true_rank")
        return sum(1 for d in self.dimensions if d != 1)

    def element_count(self) -> int:
        """Number of elements of an array (XLA's ElementsIn); for a bounded dynamic
        dimension its bound counts."""
        self._require_array("element_count")
        if self.is_unbounded_dynamic():
            raise InvalidArgumentError(
                f"element_count: shape {self} has an unbounded dynamic dimension"
            )
        return prod(self.dimensions)

    def dimension_number(self, dim: int) -> int:
        """Turns a Python-style (possibly negative) dimension number into 0..rank-1."""
        self._require_array("dimension_number")
        rank = len(self.dimensions)
        if not -rank <= dim < rank:
            raise InvalidArgumentError(
                f"dimension number {dim} is out of range for {self} (rank {rank}; "
                f"valid: {-rank}..{rank - 1})"
            )
        return dim + rank if dim < 0 else dim

    def dimension(self, dim: int) -> int:
        """Size of dimension ``dim``; ``dim`` may be negative: -1 is the last dimension."""
        return self.dimensions[self.dimension_number(dim)]

    def tuple_shape(self, index: int) -> "Shape":
        if not self.is_tuple():
            raise InvalidArgumentError(f"tuple_shape: {self} is not a tuple")
        if not 0 <= index < len(self.tuple_shapes):
            raise InvalidArgumentError(
                f"tuple_shape: index {index} out of range for {self} "
                f"with {len(self.tuple_shapes)} elements"
            )
        return self.tuple_shapes[index]

    def subshape(self, index: tuple[int, ...] | list[int]) -> "Shape":
        """The sub-shape at a ShapeIndex (a path of tuple indices)."""
        s = self
        for i in index:
            s = s.tuple_shape(i)
        return s

    def leaves(self) -> list[tuple[tuple[int, ...], "Shape"]]:
        """(ShapeIndex, shape) of every non-tuple sub-shape, depth first (a walk with a
        stack: nesting depth costs no recursion)."""
        if not self.is_tuple():
            return [((), self)]
        out = []
        stack = [((), self)]
        while stack:
            index, s = stack.pop()
            if s.is_tuple():
                for i in range(len(s.tuple_shapes) - 1, -1, -1):
                    stack.append((index + (i,), s.tuple_shapes[i]))
            else:
                out.append((index, s))
        return out

    def map_leaves(self, fn) -> "Shape":
        """This shape with every non-tuple sub-shape ``s`` replaced by ``fn(s)`` (tuples
        rebuilt around them, bottom-up with a stack)."""
        if not self.is_tuple():
            return fn(self)
        # (shape, results of its elements so far); a finished tuple passes its result up
        stack: list[tuple[Shape, list]] = [(self, [])]
        while True:
            node, done = stack[-1]
            if len(done) < len(node.tuple_shapes):
                child = node.tuple_shapes[len(done)]
                if child.is_tuple():
                    stack.append((child, []))
                else:
                    done.append(fn(child))
                continue
            stack.pop()
            result = Shape.tuple(done)
            if not stack:
                return result
            stack[-1][1].append(result)

    # -- variants --------------------------------------------------------------------------

    def with_layout(self, layout: Layout | None) -> "Shape":
        self._require_array("with_layout")
        if layout is not None:
            layout.validate(self.dimensions, self.to_string(print_layout=False))
        return Shape(self.element_type, self.dimensions, self.dynamic_dimensions, layout,
                     buffer=self.buffer)

    def with_default_layout(self) -> "Shape":
        """This shape with XLA's default layout on every array (XLA's SetToDefaultLayout)."""
        if self.is_tuple():
            return self.map_leaves(Shape.with_default_layout)
        if not self.is_array():
            return self
        return self.with_layout(Layout.default(len(self.dimensions)))

    def without_layout(self) -> "Shape":
        if self.is_tuple():
            return self.map_leaves(Shape.without_layout)
        if not self.is_array():
            return self
        return Shape(self.element_type, self.dimensions, self.dynamic_dimensions, None,
                     buffer=self.buffer)

    def with_element_type(self, element_type: PrimitiveType) -> "Shape":
        self._require_array("with_element_type")
        check_size(element_type, self.dimensions, self.dynamic_dimensions)
        return Shape(element_type, self.dimensions, self.dynamic_dimensions, self.layout)

    def with_dimensions(self, dimensions, dynamic_dimensions=None) -> "Shape":
        """Same element type, new dimensions, default layout."""
        self._require_array("with_dimensions")
        return Shape.array(self.element_type, dimensions, dynamic_dimensions=dynamic_dimensions)

    # -- comparison ------------------------------------------------------------------------

    def equal(self, other: "Shape", *, ignore_layout=False, ignore_dynamic_dimension=False,
              ignore_element_type=False, ignore_fp_precision=False,
              ignore_buffer=False) -> bool:
        """XLA's Shape::Equal with its Ignore* options (``ignore_buffer``: a buffer equals
        its array)."""
        if not isinstance(other, Shape):
            return False
        if not self.is_tuple():
            return self._equal_leaf(other, ignore_layout, ignore_dynamic_dimension,
                                    ignore_element_type, ignore_fp_precision, ignore_buffer)
        pairs = [(self, other)]  # compared with a stack: nesting costs no recursion
        while pairs:
            a, b = pairs.pop()
            if a is b:
                continue
            if a.is_tuple():
                if not b.is_tuple() or len(a.tuple_shapes) != len(b.tuple_shapes):
                    return False
                pairs.extend(zip(a.tuple_shapes, b.tuple_shapes))
            elif not a._equal_leaf(b, ignore_layout, ignore_dynamic_dimension,
                                   ignore_element_type, ignore_fp_precision, ignore_buffer):
                return False
        return True

    def _equal_leaf(self, other: "Shape", ignore_layout, ignore_dynamic_dimension,
                    ignore_element_type, ignore_fp_precision, ignore_buffer=False) -> bool:
        if other.is_tuple():
            return False
        if self.buffer != other.buffer and not ignore_buffer:
            return False
        if not self.is_array():
            return self.element_type == other.element_type
        if not other.is_array():
            return False
        if not ignore_element_type:
            if ignore_fp_precision:
                a, b = self.element_type, other.element_type
                if not (a == b or (dtypes.is_floating(a) and dtypes.is_floating(b))):
                    return False
            elif self.element_type != other.element_type:
                return False
        if len(self.dimensions) != len(other.dimensions):
            return False
        for l, r in zip(self.dimensions, other.dimensions):
            if l != r:
                if ignore_dynamic_dimension and UNBOUNDED_SIZE in (l, r):
                    continue
                return False
        if not ignore_layout and (self.layout is not None or other.layout is not None):
            if self.layout is None or other.layout is None:
                return False
            if self.layout != other.layout:
                return False
        if not ignore_dynamic_dimension and self.dynamic_dimensions != other.dynamic_dimensions:
            return False
        return True

    def __eq__(self, other) -> bool:
        return isinstance(other, Shape) and self.equal(other)

    def __hash__(self) -> int:
        return hash(self._hash_key)

    @cached_property
    def _hash_key(self):
        """A hashable key of equal shapes: an array's fields; a tuple's element keys'
        hashes (computed children first with a stack, so a deep tuple needs no recursion
        here nor in ``hash``)."""
        if not self.is_tuple():
            return (self.element_type, self.dimensions, self.dynamic_dimensions, self.layout,
                    self.buffer)
        stack = [self]
        while stack:
            node = stack[-1]
            pending = [c for c in node.tuple_shapes
                       if c.is_tuple() and "_hash_key" not in c.__dict__]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            node.__dict__["_hash_key"] = ("tuple", tuple(hash(c._hash_key)
                                                        for c in node.tuple_shapes))
        return self.__dict__["_hash_key"]

    def compatible(self, other: "Shape") -> bool:
        """Layout-insensitive equality (XLA's ShapeUtil::Compatible): same element types and
        dimensions; layouts and dynamic-ness ignored, ``?`` matches any size."""
        return self.equal(other, ignore_layout=True, ignore_dynamic_dimension=True)

    def compatible_ignoring_element_type(self, other: "Shape") -> bool:
        return self.equal(other, ignore_layout=True, ignore_dynamic_dimension=True,
                          ignore_element_type=True)

    def compatible_ignoring_fp_precision(self, other: "Shape") -> bool:
        return self.equal(other, ignore_layout=True, ignore_dynamic_dimension=True,
                          ignore_fp_precision=True)

    # -- text ------------------------------------------------------------------------------

    def to_string(self, print_layout: bool = True) -> str:
        """XLA's HumanStringWithLayout (or HumanString with ``print_layout=False``)."""
        if self.is_tuple():
            # As XLA's PrintTupleShapes: an /*index=i*/ comment before every 5th element.
            # Written with a stack of (elements, next one) so nesting needs no recursion.
            tuple_type = PrimitiveType.TUPLE
            parts = ["("]
            stack = [(self.tuple_shapes, 0)]
            while stack:
                elements, i = stack.pop()
                if i == len(elements):
                    parts.append(")")
                    continue
                if i:
                    parts.append(f", /*index={i}*/" if i % 5 == 0 else ", ")
                stack.append((elements, i + 1))
                child = elements[i]
                if child.element_type is tuple_type:
                    parts.append("(")
                    stack.append((child.tuple_shapes, 0))
                else:
                    parts.append(child.to_string(print_layout))
            return "".join(parts)
        name = dtypes.type_name(self.element_type)
        if not self.is_array():
            return name + "[]"
        text = name + _dims_text(self.dimensions, self.dynamic_dimensions)
        if print_layout and self.layout is not None:
            layout_text = str(self.layout)
            if self.dimensions or layout_text != "{}":
                text += layout_text
        return f"b({text})" if self.buffer else text

    def __str__(self) -> str:
        return self.to_string(print_layout=True)

    def __repr__(self) -> str:
        return f"Shape({self.to_string(True)!r})"

    # -- internal --------------------------------------------------------------------------

    def _require_array(self, what: str) -> None:
        if not self.is_array():
            raise InvalidArgumentError(f"{what}: expected an array shape, got {self}")


def check_size(element_type: PrimitiveType, dims, dyn) -> None:
    """XLA's ShapeUtil::ValidateShapeSize: every dimension size, the element count and the
    byte size fit in int64 (an intermediate product that overflows counts, as XLA's
    overflow-checked ExtentProduct; unbounded dimensions do not count)."""
    count, overflow = 1, False
    for i, d in enumerate(dims):
        if d == UNBOUNDED_SIZE:
            continue
        if d > INT64_MAX:
            raise InvalidArgumentError(
                f"dimension {i} of {dtypes.type_name(element_type)}{_dims_text(dims, dyn)} has "
                f"size {d}: dimension sizes are int64, at most {INT64_MAX}")
        count *= d
        overflow = overflow or count > INT64_MAX
    width = dtypes.byte_width(element_type)
    if overflow or count * width > INT64_MAX:
        detail = (f"{count} elements of {width} byte{'s' if width != 1 else ''} are "
                  f"{count * width} bytes" if count else "its element count overflows before "
                  "the size-0 dimension")
        raise InvalidArgumentError(
            f"Shape {dtypes.type_name(element_type)}{_dims_text(dims, dyn)} size may overflow "
            f"int64_t ({detail}; at most {INT64_MAX} bytes)")


def out_of_memory(where: str, cause: BaseException | None = None,
                  shape: Shape | None = None, instruction=None) -> ResourceExhaustedError:
    """The error for a failed allocation in ``where``: of the array NumPy reported in
    ``cause`` (its ``shape``/``dtype``), else of ``shape``. Names the buffer's shape in HLO
    syntax and its bytes, as XLA's "Out of memory allocating N bytes"."""
    dims = getattr(cause, "shape", None)
    dtype = getattr(cause, "dtype", None)
    text, nbytes = None, None
    if dims is not None and dtype is not None:
        nbytes = prod(int(d) for d in dims) * dtype.itemsize
        try:
            name = dtypes.type_name(dtypes.from_dtype(dtype))
        except (InvalidArgumentError, KeyError, ValueError, TypeError):
            name = str(dtype)
        text = f"{name}[{','.join(str(int(d)) for d in dims)}]"
    elif shape is not None and shape.is_array() and not shape.is_unbounded_dynamic():
        nbytes = shape.element_count() * dtypes.byte_width(shape.element_type)
        text = shape.to_string(print_layout=False)
    prefix = f"{where}: " if where else ""
    if nbytes is None:
        return ResourceExhaustedError(f"{prefix}out of memory", None, instruction)
    return ResourceExhaustedError(
        f"{prefix}out of memory allocating {nbytes} bytes ({human_bytes(nbytes)}) for {text}",
        nbytes, instruction)


def _dims_text(dims, dyn) -> str:
    parts = []
    for d, is_dyn in zip(dims, dyn):
        if d == UNBOUNDED_SIZE:
            parts.append("?")
        elif is_dyn:
            parts.append(f"<={d}")
        else:
            parts.append(str(d))
    return "[" + ",".join(parts) + "]"
