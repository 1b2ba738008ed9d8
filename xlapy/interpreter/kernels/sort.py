"""Kernels of sort and topk.

sort: the comparator decides (nothing is special-cased). It is evaluated on whole arrays: a
bottom-up merge sort whose merge step places every element at once (its rank in the other
run, found by a vectorised binary search that calls the comparator on all elements per
step), so a level of the sort costs about log2(run length) comparator calls. The merge is
stable (left run first on ties), which is XLA's order for ``is_stable=true`` and the HLO
evaluator's for both settings. For ``is_stable=false`` XLA:CPU runs ``std::sort`` (libstdc++'s
introsort: median-of-three quicksort, heapsort past the depth limit, insertion sort below 16
elements), whose order of equivalent elements is the algorithm's; xlapy reproduces it: the
stable sort gives each element its equivalence class (one more comparator call on
neighbours), and std::sort's decisions are replayed on those classes.

topk: the k largest (or smallest) values along the last dimension under the total order
-NaN < -inf < ... < -0 < +0 < ... < inf < +NaN, ties to the lower index, with S32 indices -
XLA:CPU's TopK runtime (backends/cpu/runtime/topk_lib.h) and XLA's sort-based decomposition
(GtTotalOrder / LtTotalOrder comparators) agree on this.

Imports numpy, the shape layer and the interpreter core.
"""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.evaluator import EvaluationError, UnimplementedError
from xlapy.interpreter.kernels.gather_scatter import apply_scalar_computation
from xlapy.interpreter.kernels.shape_ops import dense
from xlapy.interpreter.registry import kernel
from xlapy.shape import dtypes

# -- the comparator on arrays ---------------------------------------------------------------


def _less(ctx, comp, keys, first, second) -> np.ndarray:
    """comparator(elements ``first``, elements ``second``) for index arrays into the rows
    of ``keys`` (each operand as a (rows, n) array); a bool array of the index shape."""
    args = []
    for k in keys:
        args.append(np.take_along_axis(k, first, axis=1))
        args.append(np.take_along_axis(k, second, axis=1))
    (out,) = apply_scalar_computation(ctx, comp, args, first.shape)
    return np.asarray(out, dtype=bool)


def stable_order(ctx, comp, keys) -> np.ndarray:
    """The stable sorted order (a (rows, n) array of original positions) of every row."""
    rows, n = keys[0].shape
    perm = np.broadcast_to(np.arange(n, dtype=np.int64), (rows, n)).copy()
    pos = np.arange(n, dtype=np.int64)
    broken = np.zeros(rows, bool)
    width = 1
    while width < n:
        run = (pos // (2 * width)) * (2 * width)
        in_left = pos - run < width
        left_end = np.minimum(run + width, n)
        right_end = np.minimum(run + 2 * width, n)
        own_start = np.where(in_left, run, left_end)
        other_start = np.where(in_left, left_end, run)
        other_len = np.where(in_left, right_end - left_end, left_end - run)
        # lo = how many elements of the other run come before this one.
        lo = np.zeros((rows, n), np.int64)
        hi = np.broadcast_to(other_len, (rows, n)).copy()
        me = perm
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) // 2
            other_pos = np.minimum(other_start + mid, n - 1)
            other = np.take_along_axis(perm, other_pos, axis=1)
            # A left element x is preceded by right elements r with r < x; a right element
            # y by left elements l with not (y < l).
            first = np.where(in_left, other, me)
            second = np.where(in_left, me, other)
            lt = _less(ctx, comp, keys, first, second)
            before = np.where(in_left, lt, ~lt)
            lo = np.where(active & before, mid + 1, lo)
            hi = np.where(active & ~before, mid, hi)
        new_pos = run + (pos - own_start) + lo
        new_perm = np.full_like(perm, -1)
        np.put_along_axis(new_perm, new_pos, perm, axis=1)
        # A comparator that is no strict weak order (a FLOAT LT meeting NaNs) can give two
        # elements one rank: such a row leaves a slot unwritten, and is merged one pair at a
        # time below instead.
        bad = (new_perm < 0).any(axis=1)
        if bad.any():
            broken |= bad
            new_perm[bad] = perm[bad]
        perm = new_perm
        width *= 2
    for r in np.flatnonzero(broken):
        perm[r] = _sequential_order(ctx, comp, [k[r:r + 1] for k in keys])
    return perm


def _sequential_order(ctx, comp, keys) -> np.ndarray:
    """The stable order of one row (``keys`` of shape (1, n)) by a bottom-up merge sort
    asking the comparator one pair at a time: a right element goes first only when it is
    less than the left one. Always a permutation, whatever the comparator answers."""
    n = keys[0].shape[1]
    order = list(range(n))

    def less(a: int, b: int) -> bool:
        return bool(_less(ctx, comp, keys, np.array([[a]]), np.array([[b]]))[0, 0])

    width = 1
    while width < n:
        merged = []
        for start in range(0, n, 2 * width):
            left = order[start:start + width]
            right = order[start + width:start + 2 * width]
            i = j = 0
            while i < len(left) and j < len(right):
                if less(right[j], left[i]):
                    merged.append(right[j])
                    j += 1
                else:
                    merged.append(left[i])
                    i += 1
            merged += left[i:] + right[j:]
        order = merged
        width *= 2
    return np.asarray(order, np.int64)


# -- libstdc++ std::sort, replayed on equivalence classes -----------------------------------

_THRESHOLD = 16  # std::sort's _S_threshold: partitions this small are insertion-sorted


def std_sort_order(classes: list[int]) -> list[int]:
    """The permutation libstdc++'s ``std::sort`` produces on elements whose comparator is
    ``classes[a] < classes[b]`` (introsort with median-of-three pivots and a depth limit of
    2 floor(log2 n), heapsort past it, then a final insertion sort)."""
    a = list(range(len(classes)))
    key = classes

    def less(x, y):
        return key[x] < key[y]

    def adjust_heap(first, hole, length, value):
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if less(a[first + child], a[first + child - 1]):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and less(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    def heap_sort(first, last):
        length = last - first
        if length >= 2:
            for parent in range((length - 2) // 2, -1, -1):
                adjust_heap(first, parent, length, a[first + parent])
        while last - first > 1:
            last -= 1
            value = a[last]
            a[last] = a[first]
            adjust_heap(first, 0, last - first, value)

    def median_to_first(result, x, y, z):
        ax, ay, az = a[x], a[y], a[z]
        if less(ax, ay):
            m = y if less(ay, az) else (z if less(ax, az) else x)
        elif less(ax, az):
            m = x
        elif less(ay, az):
            m = z
        else:
            m = y
        a[result], a[m] = a[m], a[result]

    def partition(first, last, pivot):
        while True:
            while less(a[first], a[pivot]):
                first += 1
            last -= 1
            while less(a[pivot], a[last]):
                last -= 1
            if not first < last:
                return first
            a[first], a[last] = a[last], a[first]
            first += 1

    def introsort(first, last, depth):
        while last - first > _THRESHOLD:
            if depth == 0:
                heap_sort(first, last)
                return
            depth -= 1
            median_to_first(first, first + 1, first + (last - first) // 2, last - 1)
            cut = partition(first + 1, last, first)
            introsort(cut, last, depth)
            last = cut

    def linear_insert(last):
        value = a[last]
        prev = last - 1
        while less(value, a[prev]):
            a[last] = a[prev]
            last = prev
            prev -= 1
        a[last] = value

    def insertion_sort(first, last):
        for i in range(first + 1, last):
            if less(a[i], a[first]):
                value = a[i]
                a[first + 1:i + 1] = a[first:i]
                a[first] = value
            else:
                linear_insert(i)

    n = len(a)
    if n > 1:
        introsort(0, n, 2 * (n.bit_length() - 1))
        if n > _THRESHOLD:
            insertion_sort(0, _THRESHOLD)
            for i in range(_THRESHOLD, n):
                linear_insert(i)
        else:
            insertion_sort(0, n)
    return a


def unstable_order(ctx, comp, keys, perm: np.ndarray) -> np.ndarray:
    """XLA:CPU's order for is_stable=false, from the stable order ``perm``."""
    rows, n = perm.shape
    if n <= _THRESHOLD:  # std::sort only insertion-sorts: stable
        return perm
    # Neighbours in the stable order are equivalent iff the first is not less.
    steps = _less(ctx, comp, keys, perm[:, :-1], perm[:, 1:])
    class_sorted = np.concatenate([np.zeros((rows, 1), np.int64),
                                   np.cumsum(steps, axis=1, dtype=np.int64)], axis=1)
    # Only rows where equivalent neighbours differ in some operand's bits can tell orders
    # apart (a plain sort of integers cannot).
    identical = np.ones(steps.shape, bool)
    for k in keys:
        raw = np.take_along_axis(k, perm, axis=1).view(np.uint8).reshape(rows, n, -1)
        identical &= np.all(raw[:, :-1] == raw[:, 1:], axis=2)
    visible = np.any(~steps & ~identical, axis=1)
    out = perm.copy()
    for r in np.nonzero(visible)[0]:
        classes = np.empty(n, np.int64)
        classes[perm[r]] = class_sorted[r]
        out[r] = std_sort_order(classes.tolist())
    return out


# -- sort -----------------------------------------------------------------------------------


@kernel("sort")
def sort(ctx, instr, args):
    (dim,) = instr.attrs["dimensions"]
    comp = instr.attrs["to_apply"]
    shape = args[0].shape
    for i, a in enumerate(args[1:], 1):
        if a.shape != shape:
            raise EvaluationError(f"sort: operand {i} has runtime dimensions {list(a.shape)}, "
                                  f"operand 0 has {list(shape)} (instruction %{instr.name})")
    moved = [np.moveaxis(a, dim, -1) for a in args]
    n = shape[dim] if shape else 1
    rows = int(np.prod(moved[0].shape[:-1], dtype=np.int64))
    keys = [m.reshape(rows, n) for m in moved]
    if n > 1 and rows > 0:
        perm = stable_order(ctx, comp, keys)
        if not instr.attrs["is_stable"]:
            perm = unstable_order(ctx, comp, keys, perm)
    else:
        perm = np.zeros((rows, n), np.int64)
    outs = [dense(np.moveaxis(
        np.take_along_axis(k, perm, axis=1).reshape(m.shape), -1, dim))
        for k, m in zip(keys, moved)]
    return tuple(outs) if len(outs) > 1 else outs[0]


# -- topk -----------------------------------------------------------------------------------


_NO_NEGATIVE_ZERO = ("f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz")


def total_order_key(x: np.ndarray) -> np.ndarray:
    """int64 keys ordered as XLA's TOTALORDER comparison orders ``x`` (xla/util.h
    ToSignMagnitude): floats by sign and the bits of their absolute value, negative ones
    reversed, so -NaN < -inf < -0 < +0 < inf < NaN; in the fnuz types (no -0) negative
    magnitudes close the gap and the NaN (sign bit set) is the smallest; f8e8m0fnu (no sign)
    by its bits; integers by value."""
    et = dtypes.from_dtype(x.dtype)
    if dtypes.is_floating(et):
        container = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
        if dtypes.type_name(et) == "f8e8m0fnu":
            return x.view(container).astype(np.int64)
        magnitude = np.abs(x).view(container).astype(np.int64)
        negative = np.signbit(x)
        if dtypes.type_name(et) in _NO_NEGATIVE_ZERO:
            magnitude = np.where(negative, magnitude - 1, magnitude)
        return np.where(negative, -magnitude - 1, magnitude)
    if dtypes.is_pred(et) or dtypes.is_integral(et):
        if x.dtype == np.uint64:
            return (x ^ np.uint64(1 << 63)).view(np.int64)
        return x.astype(np.int64)
    raise UnimplementedError(f"topk: no total order for {dtypes.type_name(et)} values")


@kernel("topk")
def topk(ctx, instr, args):
    (x,) = args
    k = instr.attrs["k"]
    largest = instr.attrs["largest"]
    largest = True if largest is None else largest
    n = x.shape[-1]
    if k > n:
        raise EvaluationError(f"topk: k={k} exceeds the runtime size {n} of the last "
                              f"dimension (instruction %{instr.name})")
    key = total_order_key(x)
    # ~key reverses the order without overflow; a stable argsort keeps lower indices first.
    order = np.argsort(~key if largest else key, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(x, order, axis=-1)
    return dense(values), order.astype(np.int32)
