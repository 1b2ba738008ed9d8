"""``xlapy bench``: the speed suite of benchmarks/suite.py. In one process and one run, every
case runs on xlapy (``--backend``, default cpu), on XLA:CPU through ``jax.jit`` (when jax is
importable; jax is imported here, lazily, never by the rest of xlapy) and as eager NumPy, on
the same seeded inputs; the table gives the medians, the ratios, every case's target (the
largest accepted xlapy/XLA ratio, in suite.py) and whether it is met, then the geometric mean
of xlapy/XLA, the copy-bandwidth reference and the compile times of the compile cases.

Measuring: every side runs once untimed (the warm-up: the first call compiles), then
``--repeats`` timed runs (time.perf_counter, jax results blocked on); the median counts.
``--order blocks`` (default): each side (xlapy, XLA, NumPy, and for memory-bound cases a copy
of reused buffers) runs its timed runs back to back after one more untimed run, because
NumPy's OpenBLAS and XLA's Eigen threads keep spinning after their work and slow whichever
side runs next (xlapy's MLP: ~50 ms alone, ~100 ms when taking turns with NumPy);
``--order turns``: the sides take turns run by run, so a change of the machine's load hits
all of them. A side whose warm-up is
slow gets fewer timed runs (at most ``--budget`` seconds of them, at least one; marked ``*``).
xlapy runs on Buffers made once (return_buffers=True), as jax runs on device arrays.
xlapy's warm-up result is checked against NumPy's (each case's tolerance in suite.py): a mismatch is printed loudly, marks the row, and makes the exit code
1. With ``--quick``/``--tiny`` an xlapy compile or run over ``--timeout`` seconds (default 30)
is abandoned (a SIGALRM interrupts the Python work; native code finishes its call first)
and the row says ``skipped: >30 s``.

xlapy runs the committed jax dumps benchmarks/hlo/<case>.<tier>.hlo and XLA the jax
functions of benchmarks/make_hlo.py they were dumped from; when jax lowers a function to a
different text than the committed dump (a different jax version), a warning says so.
The suite is found at ``$XLAPY_BENCHMARKS``, else inside an installed xlapy (the wheel ships
benchmarks/ as the package ``xlapy._benchmarks``; setup.py), else as benchmarks/ beside the
xlapy package of a source checkout.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import signal
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from xlapy.cli.common import CommandError, add_command

_DEFAULT_REPEATS = {"full": 7, "quick": 5, "tiny": 3}
_DEFAULT_TIMEOUT = {"full": 900.0, "quick": 30.0, "tiny": 30.0}
_DEFAULT_BUDGET = {"full": 60.0, "quick": 4.0, "tiny": 2.0}
_COMPILE_COLD_RUNS = 3
#: The environment switch of the cpu backend's disk cache (xlapy/backends/cpu/jit.py).
_DISK_CACHE_SWITCH = "XLAPY_DISK_CACHE"


def register(subparsers) -> None:
    p = add_command(
        subparsers, "bench",
        summary="time xlapy against XLA:CPU (jax) and NumPy on the benchmark suite",
        description="Measure the wall time of the benchmark suite's cases (matmul, softmax, "
        "layernorm, conv2d, sort, an MLP training step, ...; see --list) in one process: every "
        "case on xlapy (--backend, default cpu), on XLA:CPU through jax.jit (if jax is "
        "installed) and as eager NumPy, on the same seeded inputs, after one untimed warm-up "
        "run that compiles. Prints the median times, the ratios xlapy/XLA and xlapy/NumPy, "
        "each case's target (the largest accepted xlapy/XLA ratio) and whether it is met, the geometric mean of xlapy/XLA, the achieved "
        "bandwidth of memory-bound cases against a measured copy, and the compile time of "
        "the MLP module (cold and cached). Exit code 1 when an xlapy result differs from "
        "NumPy's.",
        examples=[
            ("xlapy bench --quick", "smaller sizes, the whole run in under a minute"),
            ("xlapy bench", "full sizes (several minutes)"),
            ("xlapy bench --quick --cases softmax,matmul", "some cases only"),
            ("xlapy bench --json out.json", "also write every figure as JSON"),
            ("xlapy bench --list", "the cases and their sizes"),
        ],
        run=run,
    )
    sizes = p.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true",
                       help="smaller sizes: the whole run takes under a minute")
    sizes.add_argument("--tiny", action="store_true",
                       help="tiny sizes (seconds; for tests of the command itself)")
    p.add_argument("--cases", metavar="A,B", help="comma-separated case names (default all; "
                   "see --list)")
    p.add_argument("--order", choices=["blocks", "turns"], default="blocks",
                   help="blocks (default): each side's timed runs back to back, after one "
                   "untimed run; turns: the sides take turns run by run")
    p.add_argument("--repeats", type=int, metavar="N",
                   help="timed runs per side after the warm-up (default 7; --quick 5)")
    p.add_argument("--budget", type=float, metavar="SECONDS",
                   help="time one side may spend on its timed runs; a slower side gets fewer "
                   "runs, at least one (default 60; --quick 4)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="skip an xlapy case whose compile or single run exceeds this (default "
                   "30 with --quick/--tiny, 900 otherwise)")
    p.add_argument("--backend", default="cpu", metavar="NAME",
                   help="xlapy runtime backend to benchmark (default cpu)")
    p.add_argument("--no-jax", action="store_true",
                   help="leave out XLA:CPU even when jax is installed")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs (default 0)")
    p.add_argument("--json", metavar="OUT", help="write every figure to this JSON file")
    p.add_argument("--list", action="store_true", help="list the cases and exit")


# -- running ------------------------------------------------------------------------------------


class _Timeout(Exception):
    """An xlapy compile or run went past --timeout."""


@contextmanager
def _deadline(seconds):
    """Raise _Timeout in this (main) thread after ``seconds``: SIGALRM interrupts Python code
    between bytecodes; a native call in progress finishes first. The alarm repeats every
    50 ms until it lands (an exception raised inside a gc callback is dropped by Python),
    and is disarmed before the block's end can be interrupted. No-op off the main thread
    or without setitimer."""
    if (seconds is None or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        yield
        return
    armed = [True]

    def fire(signum, frame):
        if armed[0]:
            raise _Timeout()

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class _Timing:
    median: float
    runs: int
    reduced: bool  # fewer timed runs than --repeats (a slow side)


def _measure(fn, repeats: int, budget: float, timeout=None):
    """Warm up (one untimed call, whose result is returned), then time up to ``repeats``
    calls, fewer when the warm-up says they would take over ``budget`` seconds."""
    with _deadline(timeout):
        start = time.perf_counter()
        result = fn()
        first = time.perf_counter() - start
    runs = repeats
    if first * repeats > budget:
        runs = max(1, int(budget / first)) if first > 0 else repeats
    times = []
    for _ in range(runs):
        with _deadline(timeout):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return result, _Timing(statistics.median(times), runs, runs < repeats)


def _warm(fn, timeout=None):
    """(result, seconds) of one untimed call (the warm-up: a first call compiles)."""
    with _deadline(timeout):
        start = time.perf_counter()
        result = fn()
        return result, time.perf_counter() - start


#: Seconds between two sides' blocks of timed runs, for the previous side's threads to go idle.
SETTLE_S = 0.3


def _interleaved(sides: dict, repeats: int, budget: float, order: str = "turns"):
    """Timed runs of every side: ``sides`` maps a name to (fn, warm-up seconds, timeout).
    ``order`` "turns": the sides take turns run by run; "blocks": each side's runs back to
    back, after a pause of SETTLE_S and one untimed run (the thread pools of the previous
    side keep spinning for a while after their work: NumPy's OpenBLAS threads for ~0.1 s,
    which made the next side's 1024^3 GEMMs 17-27 ms instead of 12 ms for that long). A
    side whose warm-up says ``repeats`` runs would take over ``budget`` seconds gets fewer
    (at least one). Returns ({name: _Timing}, {name: the exception that stopped it})."""
    planned = {k: repeats if first * repeats <= budget or first <= 0
               else max(1, int(budget / first)) for k, (_, first, _) in sides.items()}
    times: dict = {k: [] for k in sides}
    failed: dict = {}

    def one(k, fn, timeout, record=True):
        try:
            with _deadline(timeout):
                start = time.perf_counter()
                fn()
                if record:
                    times[k].append(time.perf_counter() - start)
        except (_Timeout, Exception) as e:  # noqa: BLE001 - the caller reports it
            failed[k] = e

    if order == "blocks":
        for i, (k, (fn, _, timeout)) in enumerate(sides.items()):
            if i:
                time.sleep(SETTLE_S)
            if planned[k] > 1:
                one(k, fn, timeout, record=False)
            while k not in failed and len(times[k]) < planned[k]:
                one(k, fn, timeout)
    else:
        for _ in range(max(planned.values(), default=0)):
            for k, (fn, _, timeout) in sides.items():
                if k not in failed and len(times[k]) < planned[k]:
                    one(k, fn, timeout)
    timings = {k: _Timing(statistics.median(v), len(v), planned[k] < repeats)
               for k, v in times.items() if k not in failed}
    return timings, failed


@dataclass
class _Row:
    """One line of the table (times in seconds; None where a side did not run)."""

    case: str
    size: str
    kind: str = "run"  # run | compile
    xlapy: _Timing | None = None
    xla: _Timing | None = None
    numpy: _Timing | None = None
    xlapy_note: str = ""  # replaces the xlapy cell (skipped, error)
    xla_note: str = ""
    numpy_note: str = ""
    target: float | None = None  # largest accepted xlapy/XLA, or seconds for target_abs
    target_abs: bool = False  # target is an absolute time, not a ratio
    check: str = ""
    mismatch: bool = False
    error: bool = False
    bytes: int | None = None
    copy_bps: float | None = None  # the copy reference measured alongside (memory-bound)
    xla_check: str = ""

    def ratio(self, other: _Timing | None) -> float | None:
        if self.xlapy is None or other is None or self.mismatch or self.error:
            return None
        return self.xlapy.median / other.median

    def target_text(self) -> str:
        if self.target is None:
            return "-"
        if self.target_abs:
            return f"< {self.target * 1e3:g} ms"
        return f"<= {self.target:g}x"

    def status(self) -> str:
        if self.mismatch:
            return "MISMATCH"
        if self.xlapy_note:
            return self.xlapy_note
        if self.target is None:
            return "-"
        if self.target_abs:
            if self.xlapy is None:
                return "-"
            return "met" if self.xlapy.median < self.target else "missed"
        ratio = self.ratio(self.xla)
        if ratio is None:
            return "n/a (no XLA)"
        return "met" if ratio <= self.target else "missed"


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.3f} s"


def _cell(timing: _Timing | None, note: str) -> str:
    if note:
        return note
    if timing is None:
        return "-"
    return _fmt_time(timing.median) + ("*" if timing.reduced else "")


def _fmt_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def _fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def benchmarks_dir() -> Path:
    """Where the suite is: ``$XLAPY_BENCHMARKS``, else the ``xlapy._benchmarks`` package an
    installed wheel carries (setup.py maps benchmarks/ there), else benchmarks/ beside the
    xlapy package of a source checkout."""
    import xlapy

    env = os.environ.get("XLAPY_BENCHMARKS")
    if env:
        return Path(env)
    package = Path(xlapy.__file__).resolve().parent
    installed = package / "_benchmarks"
    if (installed / "suite.py").is_file():
        return installed
    return package.parent / "benchmarks"


def _load_suite():
    """benchmarks/suite.py (see benchmarks_dir), imported as ``suite`` with its directory on
    sys.path (make_hlo.py imports it by that name)."""
    where = benchmarks_dir()
    if not (where / "suite.py").is_file():
        how = ("XLAPY_BENCHMARKS names a directory without suite.py"
               if os.environ.get("XLAPY_BENCHMARKS") else
               "this xlapy was installed without its benchmark suite (a wheel carries it as "
               "xlapy/_benchmarks; reinstall with pip install xlapy, or point "
               "XLAPY_BENCHMARKS at a checkout's benchmarks directory)")
        raise CommandError(f"no benchmark suite at {where / 'suite.py'}: {how}")
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))
    suite = importlib.import_module("suite")
    if Path(suite.__file__).resolve() != (where / "suite.py").resolve():
        raise CommandError(f"another module named 'suite' ({suite.__file__}) shadows "
                           f"{where / 'suite.py'}")
    return suite


def _load_jax(no_jax: bool):
    """(jax, make_hlo) or (None, why not)."""
    if no_jax:
        return None, "left out"
    try:
        import jax
    except ImportError:
        return None, "jax not installed"
    make_hlo = importlib.import_module("make_hlo")
    return (jax, make_hlo), ""


def _clear_memory_cache(backend: str) -> str:
    """Empty the backend's in-memory compile cache; returns what was called."""
    if backend != "cpu":
        return "no compile cache for this backend"
    from xlapy.backends.cpu import clear_caches

    clear_caches(disk=False)  # the disk cache's rows need its object files
    return "xlapy.backends.cpu.clear_caches(disk=False)"


@contextmanager
def _environ(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _leaves(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


class _Bench:
    def __init__(self, args, suite, tier: str):
        self.args = args
        self.suite = suite
        self.tier = tier
        self.repeats = args.repeats or _DEFAULT_REPEATS[tier]
        self.budget = args.budget if args.budget is not None else _DEFAULT_BUDGET[tier]
        self.timeout = args.timeout if args.timeout is not None else _DEFAULT_TIMEOUT[tier]
        self.jax_pair, self.jax_note = _load_jax(args.no_jax)
        self.warnings: list[str] = []
        self.rows: list[_Row] = []
        self.cleared = ""  # what the cold compiles cleared
        self.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

    def say(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        self.say(f"bench: warning: {text}")

    def skipped(self) -> str:
        return f"skipped: >{self.timeout:g} s"

    # -- one execution case -------------------------------------------------------------------

    def run_case(self, case) -> _Row:
        """One execution case: the warm-up of every side (NumPy's result is the reference
        xlapy's and XLA's are checked against), then the timed runs of the sides in turn
        (round-robin, so a change of the machine's load hits every side alike)."""
        import numpy as np

        from xlapy.runtime import Client

        suite, tier = self.suite, self.tier
        params = case.sizes[tier]
        row = _Row(case.name, case.describe(params), target=case.target)
        inputs = suite.make_inputs(case, tier, self.args.seed)
        text = case.hlo_path(tier).read_text()
        self.say(f"bench: {case.name} ({row.size}) ...")
        sides = {}  # name -> (fn, warm-up seconds, timeout)

        def numpy_call():
            return case.numpy(params, *inputs)

        want, first = _warm(numpy_call)
        sides["numpy"] = (numpy_call, first, None)
        if case.memory_bound:
            row.bytes = suite.moved_bytes(inputs, want)
            _, first = _warm(self.copy_once)
            sides["copy"] = (self.copy_once, first, None)

        try:
            client = Client(backend=self.args.backend)
            with _deadline(self.timeout):
                exe = client.compile(text)
            buffers = [client.buffer_from_pyval(np.asarray(a)) for a in inputs]

            def xlapy_call():
                return exe.execute([buffers], return_buffers=True)[0]

            got, first = _warm(xlapy_call, self.timeout)
            sides["xlapy"] = (xlapy_call, first, self.timeout)
            got = tuple(b.to_numpy() for b in got) if isinstance(got, tuple) else got.to_numpy()
            ok, row.check = suite.check_result(case, got, want)
            if not ok:
                row.mismatch = True
                self.warn(f"MISMATCH in {case.name}: xlapy's result differs from NumPy's "
                          f"({row.check}); its time means nothing")
            del got
        except (_Timeout, Exception) as e:  # noqa: BLE001 - reported, the run goes on
            self._xlapy_failed(row, e)

        if self.jax_pair is None:
            row.xla_note = self.jax_note
        else:
            jax, make_hlo = self.jax_pair
            jitted = jax.jit(make_hlo.jax_function(case.name, tier))
            jargs = [jax.device_put(a) for a in inputs]
            lowered = jitted.lower(*jargs).as_text(dialect="hlo")
            if lowered != text:
                self.warn(f"jax {jax.__version__} lowers {case.name} to a different module "
                          f"than {case.hlo_path(tier).name} (regenerate with "
                          f"python benchmarks/make_hlo.py): xlapy and XLA may differ in "
                          f"what they run")

            def xla_call():
                return jax.block_until_ready(jitted(*jargs))

            xla_out, _ = _warm(xla_call)  # the first call compiles
            _, first = _warm(xla_call)  # what a run costs (plans the timed runs, as xlapy's)
            sides["xla"] = (xla_call, first, None)
            xla_out = tuple(np.asarray(o) for o in xla_out) \
                if isinstance(xla_out, (tuple, list)) else np.asarray(xla_out)
            ok, row.xla_check = suite.check_result(case, xla_out, want)
            if not ok:
                self.warn(f"XLA:CPU differs from NumPy on {case.name} ({row.xla_check}): "
                          f"the NumPy reference or its tolerance is suspect")
            del xla_out

        timings, failures = _interleaved(sides, self.repeats, self.budget, self.args.order)
        row.numpy = timings.get("numpy")
        row.xla = timings.get("xla")
        if "copy" in timings:
            row.copy_bps = 2 * self.copy_src.nbytes / timings["copy"].median
        if "xlapy" in failures:
            self._xlapy_failed(row, failures["xlapy"])
        else:
            row.xlapy = timings.get("xlapy")
        for side in ("numpy", "xla", "copy"):
            if side in failures:
                raise failures[side]
        self.say(f"bench:   NumPy {_cell(row.numpy, '')}, xlapy "
                 f"{_cell(row.xlapy, row.xlapy_note)}, XLA {_cell(row.xla, row.xla_note)}")
        return row

    def _xlapy_failed(self, row: _Row, e: BaseException) -> None:
        row.xlapy = None
        if isinstance(e, _Timeout):
            row.xlapy_note = self.skipped()
            return
        row.error = True
        row.xlapy_note = "error"
        first = str(e).strip().split("\n")[0][:120]
        self.warn(f"xlapy failed on {row.case}: {type(e).__name__}: {first}")

    # -- the compile case ----------------------------------------------------------------------

    def run_compile(self, ccase) -> list[_Row]:
        """Rows of compile case ``ccase`` (suite.CompileCase): cold (in-memory cache cleared
        before every compile, disk cache off); with ``ccase.cached``, also disk (in-memory
        cache cleared, the disk cache on and holding the module: a new process compiling a
        module compiled before) and cached (in memory)."""
        from xlapy.runtime import Client

        suite, tier = self.suite, self.tier
        case = suite.module_case(ccase.module)
        text = case.hlo_path(tier).read_text()
        size = f"{case.hlo_path(tier).name}"
        name = ccase.name
        cold = _Row(f"{name} cold", size, kind="compile", target=ccase.target)
        rows = [cold]
        disk = cached = None
        if ccase.cached:
            disk = _Row(f"{name} disk cache", size, kind="compile",
                        target=suite.COMPILE_CACHED_TARGET_S, target_abs=True)
            cached = _Row(f"{name} cached", size, kind="compile",
                          target=suite.COMPILE_CACHED_TARGET_S, target_abs=True)
            rows += [disk, cached]
            disk.xla_note = cached.xla_note = "-"
        for r in rows:
            r.numpy_note = "-"
        backend = self.args.backend
        self.say(f"bench: {name} ({size}) ...")

        def compile_once():
            return Client(backend=backend).compile(text)

        def timed(before) -> _Timing:
            times = []
            for _ in range(_COMPILE_COLD_RUNS):
                self.cleared = before()
                with _deadline(self.timeout):
                    start = time.perf_counter()
                    compile_once()
                    times.append(time.perf_counter() - start)
            return _Timing(statistics.median(times), len(times), False)

        try:
            with _environ(_DISK_CACHE_SWITCH, "0"):
                cold.xlapy = timed(lambda: _clear_memory_cache(backend))
            if ccase.cached:
                compile_once()  # the disk cache holds the module now (if there is one)
                disk.xlapy = timed(lambda: _clear_memory_cache(backend))
                compile_once()
                _, cached.xlapy = _measure(compile_once, self.repeats, self.budget,
                                           self.timeout)
        except _Timeout:
            for r in rows:
                if r.xlapy is None:
                    r.xlapy_note = self.skipped()
        except Exception as e:  # noqa: BLE001 - reported in the table, the run goes on
            for r in rows:
                if r.xlapy is None:
                    r.error, r.xlapy_note = True, "error"
            first = str(e).strip().split("\n")[0][:120]
            self.warn(f"xlapy failed to compile {size}: {type(e).__name__}: {first}")
        if self.jax_pair is None:
            cold.xla_note = self.jax_note
        else:
            cold.xla = self._xla_compile_time(case)
        return rows

    def _xla_compile_time(self, case) -> _Timing:
        import numpy as np

        jax, make_hlo = self.jax_pair
        inputs = self.suite.make_inputs(case, self.tier, self.args.seed)
        specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in inputs]
        fn = make_hlo.jax_function(case.name, self.tier)
        old = jax.config.jax_enable_compilation_cache
        jax.config.update("jax_enable_compilation_cache", False)
        try:
            times = []
            for _ in range(_COMPILE_COLD_RUNS):
                jax.clear_caches()
                lowered = jax.jit(fn).lower(*specs)
                start = time.perf_counter()
                lowered.compile()
                times.append(time.perf_counter() - start)
        finally:
            jax.config.update("jax_enable_compilation_cache", old)
        return _Timing(statistics.median(times), len(times), False)

    # -- the copy reference ----------------------------------------------------------------------

    def copy_once(self) -> None:
        import numpy as np

        np.copyto(self.copy_dst, self.copy_src)

    def copy_bandwidth(self) -> tuple[float, int]:
        """(bytes/s, buffer bytes) of np.copyto between two reused buffers, read + write
        counted (STREAM's copy); the buffers stay for the copies measured alongside the
        memory-bound cases."""
        import numpy as np

        n = self.suite.COPY_ELEMENTS[self.tier]
        self.copy_src = np.ones(n, np.float32)
        self.copy_dst = np.zeros(n, np.float32)
        _, timing = _measure(self.copy_once, max(self.repeats, 5), self.budget)
        return 2 * self.copy_src.nbytes / timing.median, self.copy_src.nbytes


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max([len(h)] + [len(r[i]) for r in rows if r]) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) if r else "" for r in rows]
    return out


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _select(suite, spec: str | None) -> list[str]:
    if not spec:
        return list(suite.ALL_CASE_NAMES)
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in suite.ALL_CASE_NAMES]
    if unknown or not names:
        raise CommandError(f"--cases: unknown case {', '.join(map(repr, unknown)) or '(none)'}; "
                           f"the cases are {', '.join(suite.ALL_CASE_NAMES)}")
    return [n for n in suite.ALL_CASE_NAMES if n in names]


def _list_cases(suite) -> int:
    rows = []
    for name in suite.ALL_CASE_NAMES:
        if name in suite.COMPILE_CASES:
            cc = suite.COMPILE_CASES[name]
            c = suite.module_case(cc.module)
            sizes = [c.hlo_path(t).name for t in ("full", "quick")]
            target = f"cold <= {cc.target:g}x XLA" + (", cached/disk < 10 ms" if cc.cached
                                                        else "")
            summary = f"compile time of the {cc.module} module"
        else:
            c = suite.CASES[name]
            sizes = [c.describe(c.sizes[t]) for t in ("full", "quick")]
            target = f"<= {c.target:g}x XLA" + (", >= 80% copy GB/s" if c.memory_bound else "")
            summary = c.summary
        rows.append([name, *sizes, target, summary])
    for line in _table(["case", "size", "--quick size", "target", "what"], rows, set()):
        print(line)
    return 0


def run(args) -> int:
    import numpy as np

    suite = _load_suite()
    if args.list:
        return _list_cases(suite)
    tier = "tiny" if args.tiny else "quick" if args.quick else "full"
    if args.repeats is not None and args.repeats < 1:
        raise CommandError(f"--repeats must be at least 1, got {args.repeats}")
    for name in ("timeout", "budget"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise CommandError(f"--{name} must be positive, got {value:g}")
    names = _select(suite, args.cases)
    from xlapy.backends.base import backend_names

    if args.backend not in backend_names():
        raise CommandError(f"--backend: unknown backend {args.backend!r}; available: "
                           f"{', '.join(backend_names())}")
    bench = _Bench(args, suite, tier)
    started = time.perf_counter()
    copy_bps, copy_bytes = bench.copy_bandwidth()
    for name in names:
        if name in suite.COMPILE_CASES:
            bench.rows.extend(bench.run_compile(suite.COMPILE_CASES[name]))
        else:
            bench.rows.append(bench.run_case(suite.CASES[name]))
    bench.blas, bench.unpinned, bench.unpinned_error = None, [], None
    if args.backend == "cpu":  # the BLAS kernel, and GEMMs unpinned
        from xlapy.cli import bench_blas

        bench.blas = bench_blas.blas_state()
        if bench.blas["pinned_below"]:
            bench.say("bench: OpenBLAS is pinned below the host's best kernel: running the "
                      "GEMM cases again with OPENBLAS_CORETYPE unset (a subprocess)")
            bench.unpinned, bench.unpinned_error = bench_blas.run_unpinned(
                args, names, getattr(suite, "GEMM_CASES", ()))
    elapsed = time.perf_counter() - started
    _report(bench, copy_bps, copy_bytes, elapsed, np.__version__)
    if args.json:
        _write_json(bench, copy_bps, copy_bytes, elapsed)
    bad = [r for r in bench.rows if r.mismatch or r.error]
    return 1 if bad else 0


def _xla_label(bench) -> str:
    if bench.jax_pair is None:
        return f"XLA:CPU {bench.jax_note}"
    return f"XLA:CPU (jax {bench.jax_pair[0].__version__}, jax.jit)"


def _report(bench, copy_bps: float, copy_bytes: int, elapsed: float, numpy_version: str) -> None:
    tier_text = {"full": "full sizes", "quick": "--quick sizes", "tiny": "--tiny sizes"}
    print(f"xlapy bench, {tier_text[bench.tier]}: xlapy backend {bench.args.backend!r} vs "
          f"{_xla_label(bench)} vs NumPy {numpy_version} (eager); {os.cpu_count()} CPUs")
    print(f"median of {bench.repeats} timed runs after a warm-up (* fewer: a side gets at "
          f"most {bench.budget:g} s of timed runs); ratios < 1 mean xlapy is faster")
    if bench.load is not None:
        busy = " (other work shares the CPUs: the figures are noisy)" \
            if bench.load > 0.5 * (os.cpu_count() or 1) else ""
        print(f"load average at the start: {bench.load:.2f}{busy}")
    print()
    rows = []
    kinds = []
    for r in bench.rows:
        if kinds and kinds[-1] != r.kind:
            rows.append([])
        kinds.append(r.kind)
        rows.append([r.case, r.size, _cell(r.xlapy, r.xlapy_note), _cell(r.xla, r.xla_note),
                     _cell(r.numpy, r.numpy_note), _fmt_ratio(r.ratio(r.xla)),
                     _fmt_ratio(r.ratio(r.numpy)), r.target_text(), r.status()])
    headers = ["case", "size", "xlapy", "XLA", "NumPy", "xlapy/XLA", "xlapy/NumPy", "target",
               "result"]
    for line in _table(headers, rows, {2, 3, 4, 5, 6}):
        print(line)

    print()
    runs = [r for r in bench.rows if r.kind == "run"]
    ratios = [(r.case, r.ratio(r.xla)) for r in runs]
    have = [v for _, v in ratios if v is not None]
    left_out = [c for c, v in ratios if v is None]
    if have:
        g = _geomean(have)
        verdict = "met" if g < bench.suite.GEOMEAN_TARGET else "missed"
        extra = f"; left out: {', '.join(left_out)}" if left_out else ""
        print(f"geometric mean of xlapy/XLA over {len(have)} cases: {g:.2f}x "
              f"(target < {bench.suite.GEOMEAN_TARGET:g}x: {verdict}){extra}")
    else:
        why = bench.jax_note if bench.jax_pair is None else "no case has both times"
        print(f"geometric mean of xlapy/XLA: n/a ({why})")

    memory = [r for r in runs if r.bytes]
    print(f"copy bandwidth (np.copyto between reused {_fmt_bytes(copy_bytes)} buffers, read + "
          f"write counted): {copy_bps / 1e9:.2f} GB/s at the start of the run")
    if memory:
        mrows = []
        target = bench.suite.BANDWIDTH_TARGET
        for r in memory:
            copy = r.copy_bps or copy_bps
            cells = [r.case, _fmt_bytes(r.bytes), f"{copy / 1e9:.2f}"]
            for t, bad in ((r.xlapy, r.mismatch or r.error), (r.xla, False)):
                if t is None or bad:
                    cells += ["-", "-"]
                else:
                    gbps = r.bytes / t.median
                    cells += [f"{gbps / 1e9:.2f}", f"{100 * gbps / copy:.0f}%"]
            if r.mismatch:
                verdict = "MISMATCH"
            elif r.xlapy is None:
                verdict = r.xlapy_note or "-"
            else:
                verdict = "met" if r.bytes / r.xlapy.median >= target * copy else "missed"
            mrows.append(cells + [f">= {100 * target:.0f}%", verdict])
        print()
        print("memory-bound cases (bytes: inputs read once + outputs written once; copy: "
              "measured in turn with the case's runs):")
        for line in _table(["case", "bytes", "copy GB/s", "xlapy GB/s", "of copy", "XLA GB/s",
                            "of copy", "target", "result"], mrows, {1, 2, 3, 4, 5, 6}):
            print(line)
    if any(r.kind == "compile" for r in bench.rows):
        print()
        print(f"compile_*: Client.compile of the HLO text, median of "
              f"{_COMPILE_COLD_RUNS}; cold: {bench.cleared} before each and "
              f"{_DISK_CACHE_SWITCH}=0;")
        print(f"  disk cache: {bench.cleared} before each, the disk cache on; cached: "
              f"the in-memory cache hit.")
        print("  XLA: jax.jit(f).lower(..).compile() with jax's caches cleared (lowering not "
              "timed).")
    _report_blas(bench)
    problems = [r for r in bench.rows if r.mismatch or r.error]
    print()
    for w in bench.warnings:
        print(f"warning: {w}")
    if problems:
        print(f"!!! {len(problems)} case(s) with WRONG OR NO xlapy results: "
              f"{', '.join(r.case for r in problems)} !!!")
    print(f"total time {elapsed:.1f} s")


def _report_blas(bench) -> None:
    """The BLAS lines, and the GEMM cases measured with OPENBLAS_CORETYPE unset."""
    if getattr(bench, "blas", None) is None:
        return
    from xlapy.cli import bench_blas

    print()
    for line in bench_blas.describe(bench.blas):
        print(line)
    if bench.unpinned_error:
        print(f"  {bench.unpinned_error}")
    if bench.unpinned:
        pinned = {r.case: r for r in bench.rows}
        rows = []
        for c in bench.unpinned:
            r = pinned.get(c["case"])
            rows.append([c["case"], _fmt_ratio(r.ratio(r.xla)) if r else "-",
                         _fmt_time((c.get("xlapy") or {}).get("median_s")),
                         _fmt_time((c.get("xla") or {}).get("median_s")),
                         _fmt_ratio(c.get("xlapy_over_xla")), c.get("result") or "-"])
        print(f"GEMM cases with OPENBLAS_CORETYPE unset (kernel {bench.blas['unpinned_core']}; "
              f"XLA's own GEMMs do not use OpenBLAS):")
        for line in _table(["case", "pinned xlapy/XLA", "xlapy", "XLA", "unpinned xlapy/XLA",
                            "result"], rows, {1, 2, 3, 4}):
            print(line)


def _write_json(bench, copy_bps: float, copy_bytes: int, elapsed: float) -> None:
    def timing(t: _Timing | None):
        return None if t is None else {"median_s": t.median, "runs": t.runs}

    cases = []
    for r in bench.rows:
        cases.append({
            "case": r.case, "kind": r.kind, "size": r.size,
            "xlapy": timing(r.xlapy), "xla": timing(r.xla), "numpy": timing(r.numpy),
            "xlapy_note": r.xlapy_note or None, "xla_note": r.xla_note or None,
            "xlapy_over_xla": r.ratio(r.xla), "xlapy_over_numpy": r.ratio(r.numpy),
            "target": r.target_text(), "result": r.status(),
            "check": r.check or None, "xla_check": r.xla_check or None,
            "mismatch": r.mismatch, "error": r.error,
            "bytes": r.bytes,
            "copy_bandwidth_bytes_per_s": r.copy_bps,
            "xlapy_bandwidth_fraction_of_copy": (r.bytes / r.xlapy.median / r.copy_bps
                                                 if r.bytes and r.xlapy and r.copy_bps
                                                 else None),
        })
    have = [r.ratio(r.xla) for r in bench.rows if r.kind == "run" and r.ratio(r.xla)]
    data = {
        "tier": bench.tier, "backend": bench.args.backend, "repeats": bench.repeats,
        "budget_s": bench.budget, "timeout_s": bench.timeout, "seed": bench.args.seed,
        "cpus": os.cpu_count(), "load_average_at_start": bench.load,
        "jax": bench.jax_pair[0].__version__ if bench.jax_pair else bench.jax_note,
        "copy_bandwidth_bytes_per_s": copy_bps, "copy_buffer_bytes": copy_bytes,
        "geomean_xlapy_over_xla": _geomean(have) if have else None,
        "cases": cases, "warnings": bench.warnings, "elapsed_s": elapsed,
        "blas": getattr(bench, "blas", None),
        "unpinned_gemm_cases": getattr(bench, "unpinned", []),
    }
    try:
        with open(bench.args.json, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
    except OSError as e:
        raise CommandError(f"cannot write {bench.args.json}: {e.strerror}") from None


__all__ = ["register", "run"]
