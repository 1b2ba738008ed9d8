"""Run an HLO module on two backends, compare the results, and bisect a difference.

XLA's ``run_hlo_module`` in a library (``xlapy run --backend B --reference R`` is its command):

    tol = Tolerance(abs_error=1e-3, rel_error=1e-3)
    test = run_on_backend(module, inputs, "cpu", iterations=3)
    ref = run_on_backend(module, inputs, "interpreter")
    leaves = compare_values(test.results[0], ref.results[0], module.entry.root.shape, tol)
    if not all(c.ok for c in leaves):
        found = bisect(module, inputs, "cpu", "interpreter", tol)
        print(found.report())

Comparison (``compare_arrays``): an element of a floating-point or complex output passes when
``|a - b| <= abs_error`` or ``|a - b| <= rel_error * |b|`` (``b``: the reference), NaN equals
NaN and an infinity equals the same infinity; integers and pred compare exactly.

Bisection (``bisect``): the reference evaluates the module keeping the value of every entry
instruction (``evaluate_recording``, an EvalContext subclass: the interpreter itself is
unchanged); then, in post order, each instruction runs alone on the tested backend (a module
of parameters for its operands, the instruction, and a copy of what it calls), fed the
REFERENCE values of its operands, and the first whose output differs beyond the tolerances is
reported. One faulty op is therefore named itself, not its consumers.

Also: ``Progress`` (the ``\\r`` progress line of long runs, only on a terminal) and
``summarize_value``. Imports the interpreter, the HLO layer and the runtime.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xlapy.backends.base import backend_names
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.ir import Computation, Instruction, Module, callees_first
from xlapy.interpreter.evaluator import EvalContext, EvalOptions
from xlapy.interpreter.values import TOKEN, flatten
from xlapy.opdefs import make_instruction
from xlapy.shape import Shape, dtypes

DEFAULT_ABS_ERROR = 1e-3
DEFAULT_REL_ERROR = 1e-3

#: Opcodes bisection does not run alone: their result depends on state outside their
#: operands (feeds, channels, random state) or on other devices.
_NOT_ALONE = {"parameter", "rng", "rng-get-and-update-state", "rng-bit-generator"}


@dataclass(frozen=True)
class Tolerance:
    """XLA's ErrorSpec: an element passes if ``|a-b| <= abs_error`` or
    ``|a-b| <= rel_error * |b|``."""

    abs_error: float = DEFAULT_ABS_ERROR
    rel_error: float = DEFAULT_REL_ERROR

    def __post_init__(self):
        for name in ("abs_error", "rel_error"):
            value = getattr(self, name)
            if not value >= 0:  # also rejects NaN
                raise InvalidArgumentError(f"Tolerance: {name} must be >= 0, got {value}")


# -- backends ------------------------------------------------------------------------------------


def registered_backends() -> list[str]:
    return backend_names()


def check_backend(name: str) -> None:
    """Raise InvalidArgumentError naming the registered backends when ``name`` is not one."""
    names = registered_backends()
    if name not in names:
        raise InvalidArgumentError(f"unknown backend {name!r}; registered backends: "
                                   f"{', '.join(names)}")


@dataclass
class RunResult:
    """What ``run_on_backend`` returns: one result per device (logical order), the compile
    time and the time of each execution, in seconds."""

    backend: str
    results: list
    compile_seconds: float
    times: list[float]

    def timing_text(self) -> str:
        ms = [t * 1e3 for t in self.times]
        return (f"{self.backend}: min {min(ms):.3f} ms, median {statistics.median(ms):.3f} ms "
                f"over {len(ms)} iteration{'s' if len(ms) != 1 else ''} (compile "
                f"{self.compile_seconds * 1e3:.3f} ms)")


def run_on_backend(module: Module, inputs: list, backend: str, *, replicas: int = 1,
                   partitions: int = 1, iterations: int = 1, timeout: float | None = 60.0,
                   per_device_inputs: list[list] | None = None, on_iteration=None) -> RunResult:
    """Compile ``module`` with ``backend`` and run it ``iterations`` times. ``inputs``: the
    argument list of every device (or ``per_device_inputs``: one list per device).
    ``on_iteration(i)`` is called after each run (progress)."""
    from xlapy.runtime import Client

    check_backend(backend)
    if iterations < 1:
        raise InvalidArgumentError(f"iterations must be at least 1, got {iterations}")
    count = replicas * partitions
    args = per_device_inputs if per_device_inputs is not None else \
        [list(inputs) for _ in range(count)]
    client = Client(backend=backend, timeout=timeout)
    start = time.perf_counter()
    exe = client.compile(module, replicas=replicas, partitions=partitions, verify=False)
    compile_seconds = time.perf_counter() - start
    times = []
    results: list = []
    for i in range(iterations):
        start = time.perf_counter()
        results = exe.execute([list(a) for a in args])
        times.append(time.perf_counter() - start)
        if on_iteration is not None:
            on_iteration(i)
    return RunResult(backend, results, compile_seconds, times)


# -- comparison ----------------------------------------------------------------------------------


@dataclass
class LeafComparison:
    """The comparison of one output leaf (``index``: its position, depth first)."""

    index: int
    shape: str
    count: int = 0
    mismatches: int = 0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    first_mismatch: tuple | None = None  # (multi-index, actual, expected)
    problem: str = ""  # a shape/type difference: nothing elementwise to compare
    max_ulps: int | None = None  # floating leaves: the largest distance in units in the last place

    @property
    def ok(self) -> bool:
        return not self.problem and self.mismatches == 0

    def text(self, name: str | None = None) -> str:
        name = name or f"out{self.index}"
        if self.problem:
            return f"{name} {self.shape}: {self.problem}"
        line = (f"{name} {self.shape}: max abs error {_g(self.max_abs_error)}, max rel error "
                f"{_g(self.max_rel_error)}, mismatches {self.mismatches}/{self.count}")
        if self.max_ulps is not None:
            line += f", max ulp error {self.max_ulps}"
        if self.first_mismatch is not None:
            where, a, b = self.first_mismatch
            line += f" (first at {list(where)}: {a} vs reference {b})"
        return line


def _g(x: float) -> str:
    return f"{x:.6g}"


def _exact(dtype: np.dtype, shape: Shape | None) -> bool:
    if shape is not None and shape.is_array():
        t = shape.element_type
        return dtypes.is_integral(t) or dtypes.is_pred(t)
    return dtype == np.bool_ or np.issubdtype(dtype, np.integer)


def compare_arrays(actual, expected, tol: Tolerance, shape: Shape | None = None,
                   index: int = 0) -> LeafComparison:
    """Compare one array leaf against the reference ``expected``."""
    a = np.asarray(actual)
    b = np.asarray(expected)
    text = shape.to_string(print_layout=False) if shape is not None else \
        f"{b.dtype}{list(b.shape)}"
    out = LeafComparison(index, text, count=int(b.size))
    if a.shape != b.shape:
        out.problem = f"dimensions {list(a.shape)} differ from the reference's {list(b.shape)}"
        return out
    if a.dtype != b.dtype:
        out.problem = f"element type {a.dtype} differs from the reference's {b.dtype}"
        return out
    if b.size == 0:
        return out
    if _exact(b.dtype, shape):
        if b.dtype.kind == "V" or b.dtype == np.bool_:  # int4 (ml_dtypes), pred: as int64
            a, b = a.astype(np.int64), b.astype(np.int64)
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        bad = a != b
        rel = np.divide(diff, np.abs(b.astype(np.float64)), out=np.where(diff > 0, np.inf, 0.0),
                        where=b != 0)
    else:
        out.max_ulps = _max_ulps(a, b, shape)
        wide = np.complex128 if np.iscomplexobj(b) else np.float64
        a, b = a.astype(wide), b.astype(wide)
        both_nan = np.isnan(a) & np.isnan(b)
        same = (a == b) | both_nan  # equal infinities too
        # A NaN or an infinity matches only its equal (NaN vs number, inf vs -inf, inf vs
        # a finite value differ whatever the bounds).
        special = ~same & ~(np.isfinite(a) & np.isfinite(b))
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(same, 0.0, np.abs(a - b))
            diff = np.where(special, np.inf, diff)
            scale = np.where(special, 0.0, np.abs(b))
            rel = np.divide(diff, scale, out=np.where(diff > 0, np.inf, 0.0), where=scale > 0)
            bad = special | ((diff > tol.abs_error) & (diff > tol.rel_error * scale))
    out.mismatches = int(np.count_nonzero(bad))
    out.max_abs_error = float(np.max(diff))
    out.max_rel_error = float(np.max(rel))
    if out.mismatches:
        where = np.unravel_index(int(np.argmax(bad.reshape(-1))), b.shape)
        out.first_mismatch = (tuple(int(i) for i in where), _scalar_text(np.asarray(actual)[where]),
                              _scalar_text(np.asarray(expected)[where]))
    return out


def _ordered_bits(x: np.ndarray, bits: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """(magnitude, negative) of floats read as sign-magnitude integers: consecutive
    representable values differ by 1 in magnitude (0 and -0 both have magnitude 0)."""
    raw = np.ascontiguousarray(x).view({1: np.uint8, 2: np.uint16, 4: np.uint32,
                                        8: np.uint64}[x.dtype.itemsize]).astype(np.uint64)
    raw &= np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    if not signed:
        return raw, np.zeros(raw.shape, bool)
    sign = np.uint64(1 << (bits - 1))
    return raw & ~sign, (raw & sign) != 0


def _max_ulps(a: np.ndarray, b: np.ndarray, shape: Shape | None) -> int | None:
    """The largest distance between ``a`` and ``b`` in units in the last place of their
    floating type, over the elements where both are finite (complex: real and imaginary
    parts apart); None when there is no such element or the type is not floating."""
    if np.iscomplexobj(b):
        parts = [_max_ulps(np.ascontiguousarray(a.real), np.ascontiguousarray(b.real), None),
                 _max_ulps(np.ascontiguousarray(a.imag), np.ascontiguousarray(b.imag), None)]
        parts = [p for p in parts if p is not None]
        return max(parts) if parts else None
    if shape is not None and shape.is_array() and dtypes.is_floating(shape.element_type):
        bits = dtypes.bit_width(shape.element_type)
        signed = bool(float(np.asarray(-1, np.float64).astype(b.dtype)) < 0)
    elif b.dtype.kind == "f" and b.dtype.itemsize in (2, 4, 8):
        bits, signed = b.dtype.itemsize * 8, True
    else:
        return None
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(a.astype(np.float64)) & np.isfinite(b.astype(np.float64))
    if not np.any(finite):
        return None
    ma, na = _ordered_bits(a[finite], bits, signed)
    mb, nb = _ordered_bits(b[finite], bits, signed)
    same = na == nb
    distance = np.where(same, np.maximum(ma, mb) - np.minimum(ma, mb), ma + mb)
    return int(np.max(distance))


def _scalar_text(x) -> str:
    x = np.asarray(x)
    if x.dtype.kind == "V":
        x = x.astype(np.float64)
    return f"{x.item():.6g}" if x.dtype.kind == "f" else str(x.item())


def _leaf_shapes(shape: Shape) -> list[Shape]:
    return [leaf for _, leaf in shape.leaves()]


def compare_values(actual, expected, shape: Shape, tol: Tolerance) -> list[LeafComparison]:
    """Compare every array leaf of two values of ``shape`` (tokens are skipped)."""
    out = []
    index = 0
    for a, b, s in zip(flatten(actual), flatten(expected), _leaf_shapes(shape)):
        if b is TOKEN or s.is_token():
            continue
        out.append(compare_arrays(a, b, tol, s, index))
        index += 1
    return out


# -- recording every value of the reference ------------------------------------------------------


class RecordingContext(EvalContext):
    """An EvalContext that keeps the value of every instruction of one computation (the
    entry, by default) in ``values`` (instruction id -> value). Other computations (and
    kernels) run exactly as in EvalContext."""

    def __init__(self, module: Module, options: EvalOptions, record: Computation | None = None):
        super().__init__(module, options)
        self.record = record if record is not None else module.entry
        self.values: dict[int, Any] = {}

    def call(self, comp: Computation, args, env: dict[int, Any] | None = None) -> Any:
        if comp is self.record and not self.values and env is None:
            return super().call(comp, args, env=self.values)
        return super().call(comp, args, env)


def evaluate_recording(module: Module, inputs: list,
                       options: EvalOptions | None = None) -> tuple[Any, dict[int, Any]]:
    """Evaluate ``module`` on the reference interpreter: (result, value of every entry
    instruction by ``id(instruction)``)."""
    from xlapy.interpreter.values import to_value

    values = [to_value(a, p.shape, f"argument {i} (%{p.name})")
              for i, (a, p) in enumerate(zip(inputs, module.entry.parameters))]
    ctx = RecordingContext(module, options or EvalOptions())
    result = ctx.call(module.entry, values)
    return result, ctx.values


# -- one instruction alone -----------------------------------------------------------------------


def _clone_callees(instr: Instruction, module: Module) -> dict[int, Computation]:
    """Copies (added to ``module``) of every computation ``instr`` reaches, by original id."""
    reached = callees_first(instr.called_computations())
    cmap: dict[int, Computation] = {}
    for comp in reached:
        copy = comp.clone(suffix="", computation_map=cmap)
        copy.name = comp.name
        cmap[id(comp)] = copy
        module.add_computation(copy, uniquify=False)
    return cmap


def single_instruction_module(instr: Instruction) -> tuple[Module, list[Instruction]]:
    """A module whose entry computes ``instr`` alone: one parameter per distinct operand
    (returned, in parameter order), the instruction, and copies of what it calls."""
    source = instr.parent.module if instr.parent is not None else None
    module = Module(f"{source.name if source else 'module'}.{instr.name}")
    cmap = _clone_callees(instr, module)
    entry = Computation(f"bisect.{instr.name}")
    distinct: list[Instruction] = []
    params: dict[int, Instruction] = {}
    for op in instr.operands:
        if id(op) not in params:
            p = make_instruction("parameter", [], {"parameter_number": len(distinct)},
                                 shape=op.shape, name=f"p{len(distinct)}.{op.name}")
            params[id(op)] = p
            distinct.append(op)
            entry.add_instruction(p, uniquify=False)
    copy = instr.clone([params[id(o)] for o in instr.operands], cmap)
    entry.add_instruction(copy, uniquify=False)
    entry.set_root(copy)
    module.add_computation(entry, entry=True, uniquify=False)
    return module, distinct


# -- bisection -----------------------------------------------------------------------------------


def summarize_value(value, shape: Shape, few: int = 6) -> str:
    """``f32[2,3] min=-1 max=4 mean=1.5 [-1, 0, 2, 4, 1, 3]`` (tuples leaf by leaf)."""
    if shape.is_tuple():  # "(" ... "; " ... ")" around the leaves, written with a stack
        parts = ["("]
        stack = [(shape, value, 0)]
        while stack:
            s, v, k = stack.pop()
            if k == len(s.tuple_shapes):
                parts.append(")")
                continue
            if k:
                parts.append("; ")
            stack.append((s, v, k + 1))
            if s.tuple_shapes[k].is_tuple():
                parts.append("(")
                stack.append((s.tuple_shapes[k], v[k], 0))
            else:
                parts.append(summarize_value(v[k], s.tuple_shapes[k], few))
        return "".join(parts)
    if shape.is_token() or value is TOKEN:
        return "token[]"
    a = np.asarray(value)
    head = shape.to_string(print_layout=False)
    if a.size == 0:
        return f"{head} (empty)"
    if a.dtype.kind == "V" or a.dtype == np.bool_:
        a = a.astype(np.float64)
    flat = a.reshape(-1)
    elems = ", ".join(_scalar_text(x) for x in flat[:few]) + (", ..." if flat.size > few else "")
    if np.iscomplexobj(flat):
        return f"{head} [{elems}]"
    with np.errstate(all="ignore"):
        stats = (f"min={_g(float(np.min(flat)))} max={_g(float(np.max(flat)))} "
                 f"mean={_g(float(np.mean(flat.astype(np.float64))))}")
    return f"{head} {stats} [{elems}]"


@dataclass
class Divergence:
    """The first instruction whose output differs when run alone on the tested backend."""

    instruction: Instruction
    text: str
    operands: list[tuple[Instruction, str]]
    leaves: list[LeafComparison] = field(default_factory=list)
    error: str = ""  # the tested backend failed on the instruction
    position: int = 0  # index in the post order
    total: int = 0
    values: tuple[str, str] | None = None  # summaries of (tested, reference) outputs
    backends: tuple[str, str] = ("tested", "reference")

    def report(self) -> str:
        head = (f"first divergent instruction ({self.position + 1} of {self.total} in post "
                f"order, each fed the reference values of its operands):")
        lines = [head, f"  {self.text}"]
        for i, (op, summary) in enumerate(self.operands):
            lines.append(f"  operand {i} %{op.name}: {summary}")
        if self.error:
            lines.append(f"  the tested backend failed: {self.error}")
        for leaf in self.leaves:
            lines.append("  " + leaf.text("output" if len(self.leaves) == 1 else
                                          f"output {leaf.index}"))
        if self.values is not None:
            for backend, summary in zip(self.backends, self.values):
                lines.append(f"  {backend}: {summary}")
        return "\n".join(lines)


def bisect(module: Module, inputs: list, backend: str, reference: str = "interpreter",
           tol: Tolerance = Tolerance(), *, on_step=None) -> Divergence | None:
    """The first instruction of the entry (post order) whose output on ``backend``, given
    the reference values of its operands, differs from the reference beyond ``tol``; None
    when every instruction matches alone. The reference values come from the interpreter
    (``reference`` is checked, and the reference backend must agree with the interpreter
    when it is not the interpreter: its whole-module result is not re-derived per op), or,
    for reference ``xla``, from real XLA:CPU computing the whole module with every entry
    instruction made an output (xlapy.backends.xla.xla_values): each value is XLA's in the
    context of the module. ``on_step(i, total)``: progress."""
    from xlapy.hlo.printer import instruction_to_string

    check_backend(backend)
    check_backend(reference)
    if reference == "xla":
        from xlapy.backends.xla import xla_values

        values = xla_values(module, inputs)
    else:
        _, values = evaluate_recording(module, inputs)
    order = [i for i in module.entry.post_order()
             if i.opcode not in _NOT_ALONE and not i.has_side_effect and id(i) in values
             and all(id(o) in values for o in i.operands)]
    total = len(order)
    for pos, instr in enumerate(order):
        if on_step is not None:
            on_step(pos, total)
        single, operands = single_instruction_module(instr)
        args = [values[id(o)] for o in operands]
        expected = values[id(instr)]
        if reference not in ("interpreter", "xla"):
            expected = run_on_backend(single, args, reference).results[0]
        error = ""
        leaves: list[LeafComparison] = []
        try:
            got = run_on_backend(single, args, backend).results[0]
        except Exception as e:  # noqa: BLE001 - a failure of the tested backend is a finding
            error = f"{type(e).__name__}: {e}"
        else:
            leaves = compare_values(got, expected, instr.shape, tol)
            if all(leaf.ok for leaf in leaves):
                continue
        shown = None if error else (summarize_value(got, instr.shape),
                                    summarize_value(expected, instr.shape))
        return Divergence(
            instr, instruction_to_string(instr, print_operand_shape=True),
            [(o, summarize_value(values[id(o)], o.shape)) for o in instr.operands],
            leaves, error, pos, total, shown, (backend, reference))
    if on_step is not None:
        on_step(total, total)
    return None


# -- progress ------------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on ``stream`` (stderr) redrawn with ``\\r``; silent unless
    ``enabled`` (default: the stream is a terminal)."""

    def __init__(self, total: int, stream=None, enabled: bool | None = None, width: int = 24):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.total = max(int(total), 1)
        self.done = 0
        self.width = width
        self._shown = 0
        self._last = 0.0

    def add_total(self, n: int) -> None:
        self.total += n

    def step(self, label: str = "", n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        self.show(label)

    def show(self, label: str = "", force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and self.done < self.total and now - self._last < 0.05:
            return
        self._last = now
        filled = self.width * self.done // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        line = f"[{bar}] {self.done}/{self.total} {label}"[:100]
        pad = " " * max(self._shown - len(line), 0)
        self.stream.write("\r" + line + pad)
        self.stream.flush()
        self._shown = len(line)

    def clear(self) -> None:
        """Erase the line (before printing results, and at the end)."""
        if self.enabled and self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0


__all__ = ["DEFAULT_ABS_ERROR", "DEFAULT_REL_ERROR", "Divergence", "LeafComparison", "Progress",
           "RecordingContext", "RunResult", "Tolerance", "bisect", "check_backend",
           "compare_arrays", "compare_values", "evaluate_recording", "registered_backends",
           "run_on_backend", "single_instruction_module", "summarize_value"]
