"""Walks over values nested like tuple shapes, with a stack instead of recursion.

Owns: ``map_shaped`` (rebuild a value of a shape leaf by leaf), ``build_shaped`` (make a
value of a shape from its leaves), ``flatten_tuples`` / ``map_tuples`` (the leaves of
nested Python tuples, or the tuples rebuilt around new leaves) and ``path_text``
(``[0][2]``, for messages). A tuple shape nested 10,000 deep is walked in
memory proportional to its depth, never on Python's stack. Imports only the shape layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xlapy.shape.shape import Shape


def map_shaped(shape: Shape, value: Any, leaf: Callable, check: Callable | None = None) -> Any:
    """``value`` (nested tuples following ``shape``) with every non-tuple sub-value ``v``
    of sub-shape ``s`` at tuple path ``path`` replaced by ``leaf(v, s, path)``; tuple
    levels become tuples. ``check(v, s, path)``, if given, runs at each tuple level before
    its elements are read: it returns what to read them from (``v`` itself, or something
    standing for it) or raises."""
    if not shape.is_tuple():
        return leaf(value, shape, ())
    if check is not None:
        value = check(value, shape, ())
    stack: list[tuple[Shape, Any, tuple, list]] = [(shape, value, (), [])]
    while True:
        s, v, path, done = stack[-1]
        k = len(done)
        if k < len(s.tuple_shapes):
            cs, cv, cp = s.tuple_shapes[k], v[k], path + (k,)
            if cs.is_tuple():
                if check is not None:
                    cv = check(cv, cs, cp)
                stack.append((cs, cv, cp, []))
            else:
                done.append(leaf(cv, cs, cp))
            continue
        stack.pop()
        result = tuple(done)
        if not stack:
            return result
        stack[-1][3].append(result)


def build_shaped(shape: Shape, leaf: Callable) -> Any:
    """A value of ``shape``: ``leaf(s, path)`` for every non-tuple sub-shape, in tuples."""
    return map_shaped(shape, _NO_VALUE, lambda _v, s, path: leaf(s, path))


class _NoValue:
    """Stands for the value ``build_shaped`` walks: every element of it is itself."""

    def __getitem__(self, k):
        return self


_NO_VALUE = _NoValue()


def flatten_tuples(value: Any) -> list:
    """The non-tuple parts of nested Python tuples, depth first (a value that is not a
    tuple is its own one leaf)."""
    if not isinstance(value, tuple):
        return [value]
    out: list = []
    stack = [iter(value)]
    while stack:
        for v in stack[-1]:
            if isinstance(v, tuple):
                stack.append(iter(v))
                break
            out.append(v)
        else:
            stack.pop()
    return out


def map_tuples(value: Any, fn: Callable) -> Any:
    """Nested Python tuples rebuilt with ``fn(v)`` for every non-tuple part ``v``."""
    if not isinstance(value, tuple):
        return fn(value)
    stack: list[tuple[tuple, list]] = [(value, [])]
    while True:
        node, done = stack[-1]
        if len(done) < len(node):
            v = node[len(done)]
            if isinstance(v, tuple):
                stack.append((v, []))
            else:
                done.append(fn(v))
            continue
        stack.pop()
        result = tuple(done)
        if not stack:
            return result
        stack[-1][1].append(result)


def path_text(path: tuple) -> str:
    """``(0, 2)`` -> ``[0][2]``."""
    return "".join(f"[{k}]" for k in path)


__all__ = ["build_shaped", "flatten_tuples", "map_shaped", "map_tuples", "path_text"]
