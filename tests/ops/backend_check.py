"""Every interpreter evaluation of the op tests, run again on the compiled CPU backend.

The autouse fixture of tests/ops/conftest.py replaces, in every module of tests/ops (test
modules and their helpers), each name bound to ``xlapy.interpreter.evaluate`` with
``checked_evaluate``: it runs the interpreter (whose result the test gets, so the test
asserts as before) and then, unless the evaluation cannot be repeated (below), compiles the
same module with ``Client(backend="cpu")`` and runs it on the same arguments. A backend
exception or a difference fails the test after it has run (``BackendMismatch``, raised by
the ``pytest_runtest_call`` wrapper), naming the module's root op, the element type and the
largest error, with the module text.

Comparison (``compare_values``), stated once and used by the golden and differential tests
of tests/backends/cpu as well:
- pred and every integer type (int2/int4 included): bit-exact, same dtype and shape;
- f64 (and each part of c128): |got - want| <= 1e-12 |want| + 1e-14 max|want|;
- f32 (and each part of c64): |got - want| <= 1e-5 |want| + 1e-7 max|want|;
  (max|want|: the largest finite magnitude of that array. The relative term covers a
  different vectorised libm (a few ulp); the normwise term covers sums taken in another
  order (dot through BLAS, reductions split across cores) where terms cancel. There is no
  fixed absolute slack, so a flushed denormal output counts as a difference);
- f16, bf16 and the f8/f6/f4 types: within 1 unit in the last place of the narrow type
  (both sides are narrow values; a different f32 result may round to the neighbour);
- NaN where the interpreter has NaN (any sign, any payload), inf with the same sign;
- tokens are tokens, tuples compare leaf by leaf.

Not repeated (counted by reason in the session summary): modules with side effects or
state that one run consumes (infeed, outfeed, send/recv, the stateful rng op,
rng-get-and-update-state, custom calls flagged as side-effecting), evaluations given
options beyond ``rng_seed``/``timeout`` (feeds, channels, host transfers, per-call custom
calls, replica or partition ids), and modules for more than one device.

``XLAPY_BACKEND_CHECK=0`` switches the check off.
"""

from __future__ import annotations

import collections
import os
import sys
import time
import traceback

import ml_dtypes
import numpy as np

import xlapy.backends  # noqa: F401 - registers the "cpu" backend
from xlapy.interpreter import evaluator as _evaluator
from xlapy.interpreter.values import TOKEN
from xlapy.runtime import Client
from xlapy.shape import dtypes

ORIGINAL_EVALUATE = _evaluator.evaluate
OPS_DIR = os.path.dirname(os.path.abspath(__file__))

#: Ops whose run has effects or state a second run would not see the same way.
STATEFUL_OPCODES = frozenset({
    "infeed", "outfeed", "send", "send-done", "recv", "recv-done", "rng",
    "rng-get-and-update-state",
})
#: EvalOptions fields a repeated run can reproduce through the Client.
REPRODUCIBLE_OPTIONS = frozenset({"rng_seed", "timeout"})

#: (relative, normwise): |got - want| <= relative |want| + normwise max|want| (the largest
#: magnitude in the array: sums in another order differ by that much where terms cancel).
RTOL = {np.dtype(np.float64): (1e-12, 1e-14), np.dtype(np.float32): (1e-5, 1e-7)}


def enabled() -> bool:
    return os.environ.get("XLAPY_BACKEND_CHECK", "1").strip().lower() not in ("0", "no", "off",
                                                                              "false", "")


class BackendMismatch(AssertionError):
    """The CPU backend failed on, or disagreed with the interpreter on, an evaluation."""


class Stats:
    def __init__(self):
        self.evaluations = 0
        self.checked = 0
        self.skipped: collections.Counter = collections.Counter()
        self.mismatches = 0
        self.seconds = 0.0
        self.failures: list[str] = []  # of the current test

    def summary(self) -> str:
        skipped = sum(self.skipped.values())
        why = ", ".join(f"{n} {r}" for r, n in self.skipped.most_common())
        return (f"backend check (cpu vs interpreter): {self.evaluations} evaluations, "
                f"{self.checked} checked, {self.mismatches} mismatched, {skipped} not "
                f"repeatable ({why or 'none'}); {self.seconds:.1f} s in the backend")


STATS = Stats()


# -- comparison ----------------------------------------------------------------------------------


def exact_type(dtype: np.dtype) -> bool:
    """pred and every integer type (the ml_dtypes int1/int2/int4 ones included)."""
    if dtype == np.bool_ or dtype.kind in "iu":
        return True
    try:
        return dtypes.is_integral(dtypes.from_dtype(dtype))
    except Exception:  # noqa: BLE001 - not an XLA element type: compared as a float
        return False


def _ulp(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The spacing of ``dtype`` at each (finite, float64) value."""
    info = ml_dtypes.finfo(dtype)
    nmant, minexp = int(info.nmant), int(info.minexp)
    mag = np.abs(values)
    with np.errstate(divide="ignore"):
        exp = np.where(mag > 0, np.floor(np.log2(np.where(mag > 0, mag, 1.0))), minexp)
    return np.exp2(np.maximum(exp, minexp) - nmant)


def compare_arrays(got, want, what: str) -> str | None:
    """None if ``got`` matches ``want`` under the stated tolerances, else a message."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype:
        return f"{what}: dtype {got.dtype} != interpreter {want.dtype}"
    if got.shape != want.shape:
        return f"{what}: shape {got.shape} != interpreter {want.shape}"
    dtype = want.dtype
    if exact_type(dtype):
        bad = got != want
        if bad.any():
            err = np.abs(got.astype(np.float64) - want.astype(np.float64)) if dtype.kind != "b" \
                else bad.astype(np.float64)
            return _report(got, want, bad, what, f"max |error| {err.max():g} (bit-exact required)")
        return None
    if dtype.kind == "c":
        return (compare_arrays(got.real.copy(), want.real.copy(), what + " (real part)")
                or compare_arrays(got.imag.copy(), want.imag.copy(), what + " (imaginary part)"))
    g, w = got.astype(np.float64), want.astype(np.float64)
    g_nan, w_nan = np.isnan(g), np.isnan(w)
    w_inf = np.isinf(w)
    finite = ~w_nan & ~w_inf & ~g_nan
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(finite, np.abs(g - w), 0.0)
    if dtype in RTOL:
        rtol, norm = RTOL[dtype]
        scale = float(np.abs(w[finite]).max()) if finite.any() else 0.0
        allowed = rtol * np.abs(w) + norm * scale
        rule = f"{rtol:g} |want| + {norm:g} max|want|"
    else:
        # Neighbours are 1 ulp apart: the smaller spacing of the two (at a power of two
        # the spacing below is half the spacing above).
        allowed = np.minimum(_ulp(w, dtype), _ulp(np.where(np.isfinite(g), g, w), dtype))
        rule = "1 ulp"
    ok = (w_nan & g_nan) | (w_inf & (g == w)) | (finite & ~np.isinf(g) & (err <= allowed))
    if ok.all():
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(finite & (w != 0), err / np.abs(w), np.where(finite, err, np.inf))
    detail = (f"max |error| {err[~ok].max():g}, max relative error "
              f"{rel[~ok].max():g} ({rule}; NaN/inf positions must match)")
    return _report(got, want, ~ok, what, detail)


def _report(got, want, bad, what, detail) -> str:
    idx = np.argwhere(bad)[:5]
    rows = [f"    at {tuple(int(i) for i in ix)}: cpu {got[tuple(ix)]!r}, interpreter "
            f"{want[tuple(ix)]!r}" for ix in idx]
    return (f"{what}: {int(bad.sum())} of {bad.size} elements differ; {detail}\n"
            + "\n".join(rows))


def compare_values(got, want, what: str = "result") -> str | None:
    """Compare a backend value with the interpreter's (arrays, tuples, TOKEN)."""
    if want is TOKEN or got is TOKEN:
        return None if got is want else f"{what}: cpu {got!r}, interpreter {want!r}"
    if isinstance(want, tuple) or isinstance(got, tuple):
        if not (isinstance(want, tuple) and isinstance(got, tuple)) or len(got) != len(want):
            return f"{what}: cpu gave {type(got).__name__}, interpreter {type(want).__name__}"
        for i, (g, w) in enumerate(zip(got, want)):
            msg = compare_values(g, w, f"{what}[{i}]")
            if msg:
                return msg
        return None
    return compare_arrays(got, want, what)


def describe(module) -> str:
    root = module.entry.root
    return f"root %{root.name} = {root.shape} {root.opcode}"


def module_text(module, max_lines: int = 60) -> str:
    try:
        lines = module.to_string().splitlines()
    except Exception as e:  # noqa: BLE001 - only for the message
        return f"(module text unavailable: {type(e).__name__}: {e})"
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more lines)"]
    return "\n".join(lines)


class OutputGuard:
    """While active, the cpu backend's kernel outputs (``buffers.POOL.empty``) are carved
    from arrays with GUARD bytes of a known pattern on each side; ``overruns()`` says
    which outputs a kernel wrote outside of. A kernel writing past its output then fails a
    test instead of corrupting the heap (and crashing the process later, far away)."""

    GUARD = 64
    PATTERN = 0xAB

    def __init__(self):
        self.handed: list = []
        self.pool = None

    def __enter__(self):
        try:
            from xlapy.backends.cpu import buffers
        except ImportError:  # no pool to guard
            return self
        pool = getattr(buffers, "POOL", None)
        if pool is not None and callable(getattr(pool, "empty", None)):
            self.pool = pool
            pool.empty = self._empty  # an instance attribute shadowing the method
        return self

    def __exit__(self, *exc):
        if self.pool is not None:
            del self.pool.empty
        return False

    def _empty(self, shape, dtype):
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        g = self.GUARD
        raw = np.full(n + 2 * g, self.PATTERN, np.uint8)
        self.handed.append((raw, n, shape, dtype))
        if n == 0:  # an empty slice would point at raw[0]: keep the pointer at the guard's end
            one = raw[g:g + dtype.itemsize].view(dtype)
            return np.lib.stride_tricks.as_strided(one, shape=shape, strides=(0,) * len(shape),
                                                   writeable=True)
        return raw[g:g + n].view(dtype).reshape(shape)

    def overruns(self) -> list[str]:
        out = []
        g = self.GUARD
        for raw, n, shape, dtype in self.handed:
            before = np.nonzero(raw[:g] != self.PATTERN)[0]
            after = np.nonzero(raw[g + n:] != self.PATTERN)[0]
            what = f"{dtype}{list(shape)} output ({n} bytes)"
            if before.size:
                out.append(f"a kernel wrote {g - int(before.min())} bytes before its {what}")
            if after.size:
                out.append(f"a kernel wrote {int(after.max()) + 1} bytes past the end of its "
                           f"{what}")
        return out


def run_cpu(module, args, rng_seed: int = 0):
    """The module on a fresh cpu Client (like ``evaluate``, without the verifier), its
    kernel outputs guarded: a write outside of one raises BackendMismatch."""
    with OutputGuard() as guard:
        result = Client(backend="cpu", rng_seed=rng_seed).compile(module, verify=False)(*args)
    bad = guard.overruns()
    if bad:
        raise BackendMismatch("; ".join(bad))
    return result


# -- when an evaluation can be repeated ----------------------------------------------------------


def not_repeatable(module, options, option_values: dict) -> str | None:
    """Why running ``module`` again would not reproduce the interpreter's run, or None."""
    if options is not None:
        default = _evaluator.EvalOptions()
        for name in ("replica_id", "partition_id", "replica_count", "num_partitions",
                     "host_send", "host_recv", "collectives"):
            if getattr(options, name) != getattr(default, name):
                return "options"
        if options.custom_calls or options.channels:
            return "options"
        for q in (options.infeed, options.outfeed):
            if q is not None:
                return "options"
        if options.rng_seed != 0:
            option_values = {"rng_seed": options.rng_seed}
    if set(option_values) - REPRODUCIBLE_OPTIONS:
        return "options"
    if module.replica_count * module.num_partitions > 1:
        return "multi-device module"
    for instr in module.instructions():
        if instr.opcode in STATEFUL_OPCODES:
            return "stateful op"
        if instr.opcode == "custom-call" and instr.attrs.get("custom_call_has_side_effect"):
            return "side-effecting custom call"
    return None


def _rng_seed(options, option_values: dict) -> int:
    if options is not None:
        return int(options.rng_seed)
    return int(option_values.get("rng_seed", 0))


def checked_evaluate(module_or_computation, *args, options=None, **option_values):
    """``xlapy.interpreter.evaluate``, then the same run on the CPU backend (see above)."""
    result = ORIGINAL_EVALUATE(module_or_computation, *args, options=options, **option_values)
    STATS.evaluations += 1
    module = _evaluator.module_of(module_or_computation, "evaluate")
    reason = not_repeatable(module, options, option_values)
    if reason:
        STATS.skipped[reason] += 1
        return result
    start = time.perf_counter()
    try:
        got = run_cpu(module, args, _rng_seed(options, option_values))
    except Exception as e:  # noqa: BLE001 - every backend exception is a failure
        msg = (f"cpu backend raised on a module the interpreter ran ({describe(module)}): "
               f"{type(e).__name__}: {e}\n"
               + "".join(traceback.format_exception(e)[-6:]))
    else:
        msg = compare_values(got, result)
        if msg:
            msg = f"cpu backend differs from the interpreter ({describe(module)}):\n{msg}"
    finally:
        STATS.seconds += time.perf_counter() - start
    STATS.checked += 1
    if msg:
        STATS.mismatches += 1
        STATS.failures.append(f"{msg}\nmodule:\n{module_text(module)}")
    return result


_OPS_MODULES: dict = {"count": -1, "modules": []}


def patch_targets() -> list[tuple[object, str]]:
    """(module, name) of every name bound to the interpreter's evaluate in tests/ops."""
    if _OPS_MODULES["count"] != len(sys.modules):  # a module was imported: look again
        mods = []
        for mod in list(sys.modules.values()):
            path = getattr(mod, "__file__", None)
            if path and os.path.dirname(os.path.abspath(path)) == OPS_DIR \
                    and mod is not sys.modules[__name__]:
                mods.append(mod)
        _OPS_MODULES.update(count=len(sys.modules), modules=mods)
    return [(mod, name) for mod in _OPS_MODULES["modules"]
            for name, value in list(vars(mod).items()) if value is ORIGINAL_EVALUATE]


__all__ = ["STATS", "BackendMismatch", "OutputGuard", "checked_evaluate", "compare_arrays",
           "compare_values", "enabled", "exact_type", "module_text", "not_repeatable",
           "patch_targets", "run_cpu"]
