"""``xlapy.jit``: run a jax function on xlapy, in one line.

    f = xlapy.jit(lambda x, w: jnp.tanh(x @ w))          # backend="cpu" (default)
    y = f(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))   # NumPy out

jax (an optional extra: ``pip install 'xlapy[jax]'``) traces and lowers the function, exactly
as ``jax.jit`` would, to the HloModuleProto it would hand XLA; xlapy reads that proto
(xlapy.proto), compiles it once per input signature with the chosen runtime backend
(``cpu``: xlapy's compiled backend; ``interpreter``: the reference; ``xla``: real XLA:CPU)
and runs it. The signature is what makes jax lower again: the pytree structure of the
dynamic arguments, each leaf's shape, dtype and weak type (after jax's canonicalisation,
so it follows ``jax_enable_x64``), the values of the static arguments (``static_argnums``,
``static_argnames``, resolved against the signature as jax does) and the x64 mode.

Arguments are pytrees of NumPy arrays, jax arrays, Python scalars or xlapy Buffers; results
have jax's output pytree structure with NumPy arrays as leaves (ml_dtypes for bf16, f8...).
Donation (``donate_argnums`` / ``donate_argnames``): jax writes the aliasing into the
module (``input_output_alias``) and xlapy's runtime honours it: a donated leaf is passed as
a Buffer whose memory the aliased output reuses; an xlapy Buffer or jax array passed for a
donated argument is deleted by the call, as jax deletes donated arrays. Functions with
side effects jax orders by tokens (debug callbacks, io_callback) are not supported: their
host callbacks live in the jax process, not in the module.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from xlapy.errors import InvalidArgumentError


def _as_tuple(value, what: str) -> tuple | None:
    if value is None:
        return None
    if isinstance(value, (int, str)):
        return (value,)
    try:
        return tuple(value)
    except TypeError:
        raise InvalidArgumentError(f"xlapy.jit: {what} must be an int/str or a sequence of "
                                   f"them, got {value!r}") from None


@dataclass
class _Compiled:
    """One signature's module and executable."""

    module: Any
    executable: Any
    out_tree: Any
    donated: frozenset  # parameter numbers the module aliases to outputs


class JitFunction:
    """What ``xlapy.jit`` returns: call it like the function; ``lower(*args)`` gives the
    xlapy Module for those arguments; ``cache_size()`` counts the signatures compiled."""

    def __init__(self, fun: Callable, backend: str = "cpu", *,
                 static_argnums: int | Sequence[int] | None = None,
                 static_argnames: str | Sequence[str] | None = None,
                 donate_argnums: int | Sequence[int] | None = None,
                 donate_argnames: str | Sequence[str] | None = None):
        from xlapy.backends.xla import require_jax
        from xlapy.tools.compare import check_backend

        if not callable(fun):
            raise InvalidArgumentError(f"xlapy.jit: expected a function, got {fun!r}")
        jax = require_jax()
        check_backend(backend)
        self.fun = fun
        self.backend = backend
        self.static_argnums = _as_tuple(static_argnums, "static_argnums")
        self.static_argnames = _as_tuple(static_argnames, "static_argnames")
        self._resolve_static()
        self._jitted = jax.jit(fun, static_argnums=self.static_argnums,
                               static_argnames=self.static_argnames,
                               donate_argnums=_as_tuple(donate_argnums, "donate_argnums"),
                               donate_argnames=_as_tuple(donate_argnames, "donate_argnames"),
                               keep_unused=True)
        self._cache: dict = {}
        self._client = None
        self.__wrapped__ = fun
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__name__ = getattr(fun, "__name__", "jitted")

    def _resolve_static(self) -> None:
        """The one of static_argnums / static_argnames not given, from the other through the
        signature's positional-or-keyword parameters, as jax.jit infers it."""
        nums, names = self.static_argnums, self.static_argnames
        if (nums is None) != (names is None):
            try:
                params = list(inspect.signature(self.fun).parameters.values())
            except (TypeError, ValueError):
                params = []
            both = [(i, p.name) for i, p in enumerate(params)
                    if p.kind == p.POSITIONAL_OR_KEYWORD]
            if nums is None:
                nums = tuple(i for i, name in both if name in names)
            else:
                names = tuple(name for i, name in both if i in nums)
        self._static_nums = frozenset(nums or ())
        self._static_names = frozenset(names or ())

    # -- signatures -------------------------------------------------------------------------

    def _split(self, args: tuple, kwargs: dict):
        nums, names = self._static_nums, self._static_names
        n = len(args)
        nums = {i + n if i < 0 else i for i in nums}
        dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in names}
        static = (tuple((i, args[i]) for i in sorted(nums) if i < n),
                  tuple(sorted((k, v) for k, v in kwargs.items() if k in names)))
        return dyn_args, dyn_kwargs, static

    def _key(self, args: tuple, kwargs: dict):
        import jax

        from xlapy.runtime import Buffer

        dyn_args, dyn_kwargs, static = self._split(args, kwargs)
        leaves, treedef = jax.tree_util.tree_flatten(
            (dyn_args, dyn_kwargs), is_leaf=lambda x: isinstance(x, Buffer))
        avals = []
        for leaf in leaves:
            if isinstance(leaf, Buffer):
                leaf = np.empty(leaf.dimensions, leaf.dtype)  # only its type matters here
            try:
                avals.append(jax.typeof(leaf))
            except TypeError as e:
                raise InvalidArgumentError(f"xlapy.jit: an argument of type "
                                           f"{type(leaf).__name__} is not an array: {e}") from None
        key = (treedef, tuple(avals), static, bool(jax.config.jax_enable_x64))
        try:
            hash(key)
        except TypeError:
            raise InvalidArgumentError(f"xlapy.jit({self.__name__}): static arguments must be "
                                       f"hashable, got {static!r}") from None
        return key, leaves

    # -- lowering and compiling --------------------------------------------------------------

    def lower(self, *args, **kwargs):
        """The xlapy Module jax lowers the function to for these arguments."""
        from xlapy.backends.xla import lower_to_module

        return lower_to_module(self._lowered(args, kwargs))

    def _lowered(self, args, kwargs):
        import jax

        from xlapy.runtime import Buffer

        args, kwargs = jax.tree_util.tree_map(
            lambda x: np.asarray(x) if isinstance(x, Buffer) else x, (args, kwargs),
            is_leaf=lambda x: isinstance(x, Buffer))
        return self._jitted.lower(*args, **kwargs)

    def _compile(self, args, kwargs, leaves) -> _Compiled:
        from xlapy.backends.xla import lower_to_module

        lowered = self._lowered(args, kwargs)
        module = lower_to_module(lowered)
        params = module.entry.parameters
        for p in params:
            if any(s.is_token() for _, s in p.shape.leaves()) or p.shape.is_token():
                raise InvalidArgumentError(
                    f"xlapy.jit({self.__name__}): the function has ordered side effects (token "
                    f"parameter %{p.name}); their host callbacks cannot run outside jax")
        if len(params) != len(leaves):
            raise InvalidArgumentError(
                f"xlapy.jit({self.__name__}): jax lowered {len(params)} parameters for "
                f"{len(leaves)} array arguments (closed-over constants passed as arguments?)")
        executable = self.client.compile(module)
        donated = frozenset(a.parameter_number
                            for a in module.config.get("input_output_alias") or ())
        return _Compiled(module, executable, lowered.out_tree, donated)

    def cache_size(self) -> int:
        return len(self._cache)

    @property
    def client(self):
        """The xlapy Client the function runs on (its Buffers can be passed as arguments)."""
        if self._client is None:
            from xlapy.runtime import Client

            self._client = Client(backend=self.backend)
        return self._client

    # -- calling -----------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        import jax

        from xlapy.interpreter.values import TOKEN, flatten, to_value
        from xlapy.runtime import Buffer

        key, leaves = self._key(args, kwargs)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._compile(args, kwargs, leaves)
            self._cache[key] = compiled
        params = compiled.module.entry.parameters
        inputs: list = []
        deleted: list = []
        for p, leaf in zip(params, leaves):
            number = p.parameter_number
            where = f"xlapy.jit({self.__name__}): argument {number}"
            if isinstance(leaf, Buffer):
                inputs.append(leaf)  # donated if the module aliases it, else read in place
                continue
            value = to_value(np.asarray(leaf), p.shape, where)
            if number in compiled.donated:
                value = self.client.buffer_from_pyval(value)
                if isinstance(leaf, jax.Array):
                    deleted.append(leaf)
            inputs.append(value)
        result = compiled.executable.execute([inputs])[0]
        for array in deleted:  # jax deletes a donated jax array
            array.delete()
        outs = [np.asarray(v) for v in flatten(result) if v is not TOKEN]
        return jax.tree_util.tree_unflatten(compiled.out_tree, outs)

    def __repr__(self) -> str:
        return f"xlapy.jit({self.__name__}, backend={self.backend!r})"


def jit(fun: Callable | None = None, backend: str = "cpu", *,
        static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Sequence[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: str | Sequence[str] | None = None):
    """``jax.jit`` with xlapy running the program: ``xlapy.jit(f)(x)``, or as a decorator
    ``@xlapy.jit`` / ``@xlapy.jit(backend="interpreter", static_argnums=1)``."""
    def wrap(f):
        return JitFunction(f, backend, static_argnums=static_argnums,
                           static_argnames=static_argnames, donate_argnums=donate_argnums,
                           donate_argnames=donate_argnames)

    return wrap if fun is None else wrap(fun)


__all__ = ["JitFunction", "jit"]
