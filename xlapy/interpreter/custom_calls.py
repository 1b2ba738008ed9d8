"""The custom-call target registry: what a ``custom-call`` instruction may reach.

An HLO module names its target by string (``custom_call_target="my_fn"``); the interpreter
runs only targets registered here (or passed for one evaluation through
``EvalOptions.custom_calls``). An unknown target is an UnimplementedError naming it and
listing the registered ones: an HLO file can never reach arbitrary code.

Calling convention of a Python target
-------------------------------------
``fn(*operands, instr=..., ctx=...)``:

- ``operands``: one value per custom-call operand, in order, as the interpreter holds
  them: a NumPy array of the operand's element dtype in *logical* index order (row-major
  NumPy indexing, whatever the HLO layout says: an operand with layout ``{0,1}`` is still
  indexed ``a[row, col]``), a tuple of values for a tuple operand, or TOKEN.
  Arrays are shared with the caller: do not modify them in place.
- ``instr`` (keyword): the Instruction. Useful fields: ``instr.shape`` (the declared
  result shape), ``instr.backend_config`` (the raw string; ``backend_config_attrs(instr)``
  parses the MLIR dictionary of typed-FFI calls such as ``{uplo = 76 : ui8}``),
  ``instr.attrs["api_version"]``, ``instr.attrs["called_computations"]``,
  ``instr.attrs["operand_layout_constraints"]``, ``instr.frontend_attributes``.
- ``ctx`` (keyword): the EvalContext; ``ctx.call(computation, [values...])`` evaluates a
  called computation (e.g. a comparator), ``ctx.options`` holds the evaluation options.

The keywords are passed only if ``fn`` declares them (by name, or through ``**kwargs``), so
a plain ``lambda x, y: x + y`` is a valid target.

The return value is the result: an array (or anything ``np.asarray`` accepts) for an array
result, a tuple for a tuple result. It is checked against the declared shape and converted
to its element dtype (NumPy casting), so returning float64 for an f32 result is fine but a
wrong number of elements or dimensions raises an EvaluationError naming the target.

The same registry will hold targets loaded through a C ABI: each is wrapped into a Python
callable with this convention and registered with ``kind="c"`` and its library as
``source``.

Owns: CustomCallTarget, register_custom_call, unregister_custom_call, lookup_custom_call,
registered_custom_calls, call_custom_call (used by the custom-call kernel),
backend_config_attrs. Imports the interpreter core only; the built-in XLA:CPU targets
(LAPACK, TopK) live in custom_calls_lapack and register themselves on first lookup.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xlapy.errors import InvalidArgumentError, XlaError
from xlapy.interpreter.evaluator import EvaluationError, UnimplementedError
from xlapy.interpreter.values import to_value


@dataclass(frozen=True)
class CustomCallTarget:
    """A registered target: ``fn`` follows the module's calling convention;
    ``wants_instr``/``wants_ctx`` say which keywords it receives; ``kind`` is "python" or
    "c"; ``source`` says where it came from (a module or library name)."""

    name: str
    fn: Callable[..., Any]
    wants_instr: bool
    wants_ctx: bool
    kind: str = "python"
    source: str = ""

    def __call__(self, *operands, instr=None, ctx=None):
        kwargs = {}
        if self.wants_instr:
            kwargs["instr"] = instr
        if self.wants_ctx:
            kwargs["ctx"] = ctx
        return self.fn(*operands, **kwargs)


_REGISTRY: dict[str, CustomCallTarget] = {}
_LOCK = threading.Lock()
_builtins_loaded = False


def _accepted_keywords(fn: Callable) -> tuple[bool, bool]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: pass nothing extra
        return False, False
    params = sig.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return True, True
    names = {p.name for p in params
             if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    return "instr" in names, "ctx" in names


def _make_target(name: str, fn: Callable, kind: str, source: str) -> CustomCallTarget:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"register_custom_call: the target name must be a non-empty "
                                   f"string, got {name!r}")
    if not callable(fn):
        raise InvalidArgumentError(f"register_custom_call: the target {name!r} must be callable, "
                                   f"got {type(fn).__name__}")
    wants_instr, wants_ctx = _accepted_keywords(fn)
    return CustomCallTarget(name, fn, wants_instr, wants_ctx, kind,
                            source or getattr(fn, "__module__", "") or "")


def register_custom_call(name: str, fn: Callable | None = None, *, replace: bool = False,
                         kind: str = "python", source: str = ""):
    """Register ``fn`` as the custom-call target ``name`` (see the module docstring for the
    calling convention). Registering a name twice raises unless ``replace=True``. Usable
    as a decorator:

    >>> @register_custom_call("my_add")
    ... def my_add(x, y):
    ...     return x + y
    """
    if fn is None:
        def decorate(f):
            register_custom_call(name, f, replace=replace, kind=kind, source=source)
            return f
        return decorate
    target = _make_target(name, fn, kind, source)
    with _LOCK:
        if name in _REGISTRY and not replace:
            raise InvalidArgumentError(
                f"register_custom_call: a target named {name!r} is already registered "
                f"(from {_REGISTRY[name].source or 'unknown'}); pass replace=True to replace it")
        _REGISTRY[name] = target
    return fn


def unregister_custom_call(name: str) -> None:
    """Remove a registered target (a KeyError-free no-op if it is not registered)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def is_registered(name: str) -> bool:
    """Whether the global registry holds a target called ``name``."""
    return name in _REGISTRY


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        import xlapy.interpreter.custom_calls_lapack  # noqa: F401  (registers on import)


def registered_custom_calls(ctx=None) -> list[str]:
    """The names of every target reachable (with ``ctx``: also its per-evaluation ones),
    sorted."""
    _load_builtins()
    names = set(_REGISTRY)
    if ctx is not None and ctx.options.custom_calls:
        names.update(ctx.options.custom_calls)
    return sorted(names)


def lookup_custom_call(name: str, ctx=None) -> CustomCallTarget | None:
    """The target called ``name``: a per-evaluation one (``ctx.options.custom_calls``) first,
    then the global registry; None when there is none."""
    _load_builtins()
    if ctx is not None and ctx.options.custom_calls and name in ctx.options.custom_calls:
        entry = ctx.options.custom_calls[name]
        if isinstance(entry, CustomCallTarget):
            return entry
        return _make_target(name, entry, "python", "EvalOptions.custom_calls")
    return _REGISTRY.get(name)


def _listing(names: list[str]) -> str:
    if not names:
        return "(none)"
    return ", ".join(names)


def call_custom_call(ctx, instr, args: list) -> Any:
    """Run the target of a custom-call instruction on its operand values and check the
    result against the declared shape."""
    name = instr.attrs["custom_call_target"]
    target = lookup_custom_call(name, ctx)
    if target is None:
        raise UnimplementedError(
            f"custom-call: no custom-call target named {name!r} is registered (instruction "
            f"%{instr.name}); registered targets: {_listing(registered_custom_calls(ctx))}. "
            f"Register one with xlapy.interpreter.custom_calls.register_custom_call")
    try:
        result = target(*args, instr=instr, ctx=ctx)
    except EvaluationError:
        raise
    except XlaError as e:
        raise EvaluationError(f"custom-call {name!r} (instruction %{instr.name}): {e}") from e
    except Exception as e:  # a user target failed: say which one
        raise EvaluationError(f"custom-call {name!r} (instruction %{instr.name}) raised "
                              f"{type(e).__name__}: {e}") from e
    if instr.shape.is_tuple() and isinstance(result, list):
        result = tuple(result)
    try:
        return to_value(result, instr.shape, f"custom-call {name!r} result")
    except InvalidArgumentError as e:
        raise EvaluationError(f"{e} (instruction %{instr.name})") from e


# -- typed-FFI attributes ---------------------------------------------------------------------

_INT = re.compile(r"[-+]?\d+$")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")


def _split_top(text: str) -> list[str]:
    """Split on commas not nested in brackets, braces, angle brackets or strings."""
    parts, depth, cur, in_str, esc = [], 0, [], False, False
    for ch in text:
        if in_str:
            cur.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{(<":
            depth += 1
        elif ch in "]})>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    tail = "".join(cur).strip()
    if tail:
        parts.append(tail)
    return parts


def _attr_value(text: str):
    text = text.strip()
    if text.startswith('"') and text.endswith('"'):
        return bytes(text[1:-1], "utf-8").decode("unicode_escape")
    if text in ("true", "false"):
        return text == "true"
    if text.startswith("[") and text.endswith("]"):
        return [_attr_value(t) for t in _split_top(text[1:-1])]
    m = re.match(r"array<\s*\w+\s*(?::(.*))?>$", text, re.DOTALL)
    if m:
        return [_attr_value(t) for t in _split_top(m.group(1) or "")]
    if text.startswith("{") and text.endswith("}"):
        return parse_attr_dict(text)
    value, _, _type = text.partition(":")
    value = value.strip()
    if _INT.match(value):
        return int(value)
    if _FLOAT.match(value) or value in ("inf", "-inf", "nan"):
        return float(value)
    return text


def parse_attr_dict(text: str) -> dict:
    """Parse an MLIR attribute dictionary as jax writes typed-FFI backend configs:
    ``{mode = 86 : ui8, uplo = 76 : ui8}`` -> ``{"mode": 86, "uplo": 76}``. Integers (with
    their ``: type``), floats, booleans, strings, ``[...]``/``array<i64: ...>`` lists and
    nested dictionaries are decoded; anything else is kept as its text."""
    text = (text or "").strip()
    if not text:
        return {}
    if not (text.startswith("{") and text.endswith("}")):
        raise InvalidArgumentError(f"custom-call: backend_config {text!r} is not an MLIR "
                                   f"attribute dictionary {{key = value, ...}}")
    out = {}
    for item in _split_top(text[1:-1]):
        key, eq, value = item.partition("=")
        if not eq:
            out[key.strip()] = True  # a unit attribute
            continue
        out[key.strip().strip('"')] = _attr_value(value)
    return out


def backend_config_attrs(instr) -> dict:
    """The typed-FFI attributes of a custom-call (its backend_config dictionary)."""
    config = instr.backend_config
    if isinstance(config, dict):
        return dict(config)
    try:
        return parse_attr_dict(config or "")
    except RecursionError:  # the reader recurses per nesting level: keep it a clean error
        raise InvalidArgumentError(f"custom-call %{instr.name}: backend_config nests too "
                                   f"deeply to read") from None


def char_attr(instr, attrs: dict, key: str, allowed: str, default: str | None = None) -> str:
    """A jaxlib character-code attribute (``uplo = 76 : ui8`` -> "L"), checked against the
    allowed letters."""
    if key not in attrs:
        if default is not None:
            return default
        raise EvaluationError(f"custom-call {instr.attrs['custom_call_target']!r}: the "
                              f"backend_config has no {key!r} attribute (instruction "
                              f"%{instr.name}; got {instr.backend_config!r})")
    value = attrs[key]
    letter = chr(value) if isinstance(value, int) and 0 <= value < 256 else str(value)
    if letter not in allowed:
        raise EvaluationError(f"custom-call {instr.attrs['custom_call_target']!r}: {key} must be "
                              f"one of {', '.join(repr(c) for c in allowed)}, got {value!r} "
                              f"(instruction %{instr.name})")
    return letter


__all__ = ["CustomCallTarget", "backend_config_attrs", "call_custom_call", "char_attr",
           "is_registered", "lookup_custom_call", "parse_attr_dict", "register_custom_call",
           "registered_custom_calls", "unregister_custom_call"]
