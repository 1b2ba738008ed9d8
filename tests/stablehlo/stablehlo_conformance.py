"""StableHLO's interpreter tests (``stablehlo/tests/interpret/*.mlir`` in openxla/stablehlo)
run through xlapy's StableHLO import on xlapy's backends.

Each test file holds cases separated by ``// -----``; a case is a module whose entry function
(``main``, or its only function) computes values and checks them with the ``check`` dialect
(``check.expect_eq_const %x, dense<...>``, ``check.expect_almost_eq``, ``check.expect_close``
...) or runs a grid of processes with ``interpreter.run_parallel``. This runner reads the
check and interpreter ops (their syntax registered here, test-side, on top of
``xlapy.stablehlo.pretty``), removes the checks from the entry function and returns the
checked values instead, translates the module to HLO with ``xlapy.stablehlo``, runs it
(``interpreter`` or ``cpu``; a ``run_parallel`` of one program as replicas x partitions of one
SPMD module, the infeed queues fed through the client) and evaluates the checks with the
check dialect's semantics (CheckOps.cpp: exact equality, ``|a - b| <= tolerance`` with 1e-4 by
default, ULP distances). A case's outcome is ``pass``, ``fail`` (with the mismatch or the
error) or ``unsupported`` (with the reason: an interpreter-only feature, a quantized type,
an op XLA does not translate either, ...).

The tests are not part of this repository: point ``XLAPY_STABLEHLO_INTERPRET_TESTS`` (or the
command line) at a checkout's ``stablehlo/tests/interpret`` directory::

    python tests/stablehlo/stablehlo_conformance.py /path/to/stablehlo/tests/interpret [--backend cpu]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from xlapy.errors import XlaError  # noqa: E402
from xlapy.stablehlo import mlir as M  # noqa: E402
from xlapy.stablehlo import pretty  # noqa: E402
from xlapy.stablehlo.convert import Converter  # noqa: E402
from xlapy.stablehlo.values import dense_array  # noqa: E402

ENV = "XLAPY_STABLEHLO_INTERPRET_TESTS"


# -- the check and interpreter dialects' syntax ---------------------------------------------


def _check_two_values(p, op, n):
    """``check.expect_eq %a, %b : t`` / ``check.expect_almost_eq %a, %b, tolerance = x : t``."""
    op.operands = [p.use()]
    p.expect(",")
    op.operands.append(p.use())
    if p.eat(","):
        p.expect_keyword("tolerance")
        p.expect("=")
        op.attrs["tolerance"] = p.parse_attr(typed=False)
    pretty.attr_dict(p, op)
    p.expect(":")
    p.parse_type()
    return []


def _check_const(p, op, n):
    """``check.expect_eq_const %a, dense<...> : t (, tolerance = x)? {attrs}?``."""
    op.operands = [p.use()]
    p.expect(",")
    op.attrs["value"] = p.parse_attr()
    if p.eat(","):
        p.expect_keyword("tolerance")
        p.expect("=")
        op.attrs["tolerance"] = p.parse_attr(typed=False)
    pretty.attr_dict(p, op)
    return []


def _check_close(p, op, n):
    op.operands = [p.use()]
    p.expect(",")
    op.operands.append(p.use())
    while p.eat(","):
        key = p.read_bare_id("max_ulp_difference or min_ulp_difference")
        p.expect("=")
        op.attrs[key] = p.parse_attr(typed=False)
    p.expect(":")
    pretty.attr_dict(p, op)
    p.parse_type()
    p.expect(",")
    p.parse_type()
    return []


def _check_serialized(p, op, n):
    op.operands = [p.use()]
    while p.eat(","):
        key = p.read_bare_id("probe_id or iter")
        p.expect("=")
        op.attrs[key] = p.parse_attr(typed=False)
    pretty.attr_dict(p, op)
    p.expect(":")
    p.parse_type()
    return []


def _interpreter_print(p, op, n):
    op.operands = [p.use()]
    pretty.attr_dict(p, op)
    p.expect(":")
    p.parse_type()
    return []


def _interpreter_probe(p, op, n):
    op.operands = [p.use()]
    while p.eat(","):
        key = p.read_bare_id("probe_id")
        p.expect("=")
        op.attrs[key] = p.parse_attr(typed=False)
    pretty.attr_dict(p, op)
    p.expect(":")
    return [p.parse_type()]


pretty.FORMATS.setdefault("check.expect_eq", _check_two_values)
pretty.FORMATS.setdefault("check.expect_almost_eq", _check_two_values)
pretty.FORMATS.setdefault("check.expect_eq_const", _check_const)
pretty.FORMATS.setdefault("check.expect_almost_eq_const", _check_const)
pretty.FORMATS.setdefault("check.expect_close", _check_close)
pretty.FORMATS.setdefault("check.expect_serialized_eq", _check_serialized)
pretty.FORMATS.setdefault("interpreter.print", _interpreter_print)
pretty.FORMATS.setdefault("interpreter.probe", _interpreter_probe)

CHECKS = ("check.expect_eq", "check.expect_almost_eq", "check.expect_eq_const",
          "check.expect_almost_eq_const", "check.expect_close")


# -- the check semantics (stablehlo/tests/CheckOps.cpp, reference/Element.cpp) --------------


def _eq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element ``!=`` of the reference: numeric equality (NaN never equal, -0 == 0)."""
    return a == b


def _almost_eq_real(f: np.ndarray, g: np.ndarray, tol: float) -> np.ndarray:
    f = f.astype(np.float64)
    g = g.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        equal = f == g
        both_nan = np.isnan(f) & np.isnan(g)
        finite = np.isfinite(f) & np.isfinite(g)
        close = finite & (np.abs(f - g) <= tol)
    return equal | both_nan | close


def _almost_eq(a: np.ndarray, b: np.ndarray, tol: float) -> np.ndarray:
    if np.iscomplexobj(a):
        return _almost_eq_real(a.real, b.real, tol) & _almost_eq_real(a.imag, b.imag, tol)
    return _almost_eq_real(a, b, tol)


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ULPDifference of CheckOps.cpp: the number of floats between finite values; 0 for
    bitwise-equal non-finite values or two NaNs; the maximum otherwise."""
    if np.iscomplexobj(a):
        return np.maximum(_ulp_distance(a.real, b.real), _ulp_distance(a.imag, b.imag))
    width = a.dtype.itemsize
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    sign = np.uint64(1) << np.uint64(8 * width - 1)
    ia = a.view(uint).astype(np.uint64)
    ib = b.view(uint).astype(np.uint64)
    ma, mb = ia & ~sign, ib & ~sign
    same_sign = (ia & sign) == (ib & sign)
    with np.errstate(over="ignore"):
        dist = np.where(same_sign, np.where(ma > mb, ma - mb, mb - ma), ma + mb)
    fa = a.astype(np.float64)
    fb = b.astype(np.float64)
    finite = np.isfinite(fa) & np.isfinite(fb)
    special_ok = (ia == ib) | (np.isnan(fa) & np.isnan(fb))
    big = np.uint64(np.iinfo(np.uint64).max)
    return np.where(finite, dist, np.where(special_ok, np.uint64(0), big))


@dataclass
class Check:
    kind: str
    pos: int
    tolerance: float = 1e-4
    expected: np.ndarray | None = None  # for the *_const checks
    min_ulp: int = 0
    max_ulp: int = 1


def _float_attr(a, default: float) -> float:
    if a is None:
        return default
    return float(a.value)


def _int_attr(a, default: int) -> int:
    return default if a is None else int(a.value)


def evaluate_check(check: Check, values: list) -> str | None:
    """None if the check holds, else what differs."""
    a = np.asarray(values[0])
    b = check.expected if check.expected is not None else np.asarray(values[1])
    if a.shape != b.shape:
        return f"{check.kind}: shape {a.shape} vs expected {b.shape}"
    if check.kind in ("check.expect_eq", "check.expect_eq_const"):
        ok = _eq(a, b)
    elif check.kind in ("check.expect_almost_eq", "check.expect_almost_eq_const"):
        ok = _almost_eq(a, b, check.tolerance)
    else:
        d = _ulp_distance(a, b)
        ok = (d >= np.uint64(check.min_ulp)) & (d <= np.uint64(check.max_ulp))
    if np.all(ok):
        return None
    bad = tuple(int(i) for i in np.argwhere(~np.asarray(ok))[0]) if a.ndim else ()
    return (f"{check.kind}: {a[bad] if a.ndim else a!r} (actual) vs "
            f"{b[bad] if b.ndim else b!r} (expected) at index {list(bad)}")


# -- cases ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    file: str
    index: int
    line: int
    status: str  # "pass", "fail", "unsupported"
    detail: str = ""

    @property
    def name(self) -> str:
        return f"{self.file}:{self.line}"


class Unsupported(Exception):
    pass


def split_cases(text: str) -> list[tuple[int, str]]:
    """The ``// -----`` chunks with their first line number; each keeps the whole file's
    line numbering (earlier lines blanked), so errors point into the file."""
    lines = text.split("\n")
    out, start = [], 0
    for i, line in enumerate(lines + ["// -----"]):
        if line.strip() == "// -----":
            chunk = ["" for _ in range(start)] + lines[start:i]
            if any(s.strip() and not s.strip().startswith("//") for s in lines[start:i]):
                out.append((start + 1, "\n".join(chunk)))
            start = i + 1
    return out


_UNSUPPORTED_OPS = {
    "interpreter.print": "interpreter.print is an interpreter-only debugging op",
    "interpreter.probe": "interpreter.probe is interpreter instrumentation",
    "check.expect_serialized_eq": "checks values serialized by interpreter.probe",
    "stablehlo.uniform_quantize": "quantized types: XLA's translation has no HLO form either",
    "stablehlo.uniform_dequantize": "quantized types: XLA's translation has no HLO form either",
}


def _walk(block):
    for op in block.ops:
        yield op
        for region in op.regions:
            for b in region:
                yield from _walk(b)


def _entry(module: M.Op) -> M.Op:
    funcs = [op for op in module.regions[0][0].ops if op.name == "func.func"]
    for f in funcs:
        if f.attrs["sym_name"].value == "main":
            return f
    if len(funcs) == 1:
        return funcs[0]
    raise Unsupported("no main function")


def prepare(text: str):
    """Parse one case; move its checks to outputs. Returns (parser, module, entry name,
    checks with their operand indices into the outputs, run_parallel op or None)."""
    parser = M.MlirParser(text)
    module = parser.parse()
    for f in module.regions[0][0].ops:
        for block in (f.regions[0] if f.regions else []):
            for op in _walk(block):
                if op.name in _UNSUPPORTED_OPS:
                    raise Unsupported(_UNSUPPORTED_OPS[op.name])
                for v in op.operands + op.results:
                    t = v.type
                    if isinstance(t, M.TensorType) and t.elem.startswith("!quant"):
                        raise Unsupported("quantized types: XLA's translation has no HLO form "
                                          "either")
    entry = _entry(module)
    block = entry.regions[0][0]
    checks: list[tuple[Check, list]] = []
    outputs: list = []
    kept = []
    parallel = None
    for op in block.ops:
        if op.name.startswith("check."):
            if op.name not in CHECKS:
                raise Unsupported(f"{op.name} is not supported")
            c = Check(op.name, op.pos)
            c.tolerance = _float_attr(op.attrs.get("tolerance"), 1e-4)
            if op.name.endswith("_const"):
                c.expected = dense_array(op.attrs["value"], parser.resources)
            if op.name == "check.expect_close":
                c.min_ulp = _int_attr(op.attrs.get("min_ulp_difference"), 0)
                c.max_ulp = _int_attr(op.attrs.get("max_ulp_difference"), 1)
            indices = []
            for v in op.operands:
                if v not in outputs:
                    outputs.append(v)
                indices.append(outputs.index(v))
            checks.append((c, indices))
            continue
        if op.name == "interpreter.run_parallel":
            if parallel is not None:
                raise Unsupported("more than one interpreter.run_parallel")
            parallel = op
        kept.append(op)
    if not checks:
        raise Unsupported("no check ops (the case checks printed output with FileCheck)")
    block.ops = kept
    ret = block.ops[-1]
    if ret.name not in ("func.return", "stablehlo.return"):
        raise Unsupported("the entry function does not end with a return")
    ret.operands = list(outputs)
    entry.attrs["function_type"] = M.TypeAttr(M.FunctionType(
        entry.attrs["function_type"].type.inputs, tuple(v.type for v in outputs)))
    entry.attrs["res_attrs"] = M.ArrayAttr([M.DictAttr({}) for _ in outputs])
    return parser, module, entry.attrs["sym_name"].value, checks, parallel, outputs


def _leaves(result) -> list:
    if isinstance(result, tuple):
        out = []
        for r in result:
            out.extend(_leaves(r))
        return out
    return [result]


def _run_single(parser, module, entry, backend: str, n_outputs: int,
                backend_options: dict | None = None) -> list:
    from xlapy.runtime import Client

    hlo = Converter(parser, module).run(entry)
    if backend == "interpreter":
        from xlapy.interpreter import evaluate

        result = evaluate(hlo)
    else:
        result = Client(backend=backend, backend_options=backend_options).compile(hlo)()
    return [result] if n_outputs == 1 else list(result)


def _const_value(parser, v: M.Value):
    owner = v.owner
    if isinstance(owner, M.Op) and owner.name in ("stablehlo.constant", "arith.constant"):
        return dense_array(owner.attrs["value"], parser.resources)
    if isinstance(owner, M.Op) and owner.name in ("stablehlo.after_all",
                                                  "stablehlo.create_token"):
        from xlapy.interpreter.values import TOKEN

        return TOKEN
    raise Unsupported("run_parallel inputs that are not constants")


def _run_parallel(parser, module, op: M.Op, backend: str, outputs: list, driver: str,
                  backend_options: dict | None = None) -> list:
    from xlapy.runtime import Client

    programs = op.attrs.get("programs")
    grid = [[s.name for s in row.items] for row in programs.items]
    names = {n for row in grid for n in row}
    if len(names) != 1:
        raise Unsupported("run_parallel of different programs per process (HLO runs one SPMD "
                          "program)")
    replicas, partitions = len(grid), len(grid[0])
    if any(len(row) != partitions for row in grid):
        raise Unsupported("a ragged run_parallel grid")
    program = names.pop()
    # Only the program (and what it calls) is translated: the driver function holds the
    # interpreter ops.
    block = module.regions[0][0]
    block.ops = [o for o in block.ops if o.name != "func.func"
                 or o.attrs["sym_name"].value not in (driver, )]
    module.attrs["mhlo.num_replicas"] = M.IntAttr(replicas)
    module.attrs["mhlo.num_partitions"] = M.IntAttr(partitions)
    hlo = Converter(parser, module).run(program)
    n = replicas * partitions
    inputs = [_const_value(parser, v) for v in op.operands]
    if len(inputs) % n:
        raise Unsupported("run_parallel inputs do not divide among the processes")
    per = len(inputs) // n
    client = Client(backend=backend, timeout=60, backend_options=backend_options)
    exe = client.compile(hlo, replicas, partitions)
    queues = op.attrs.get("infeed")
    if queues is not None:
        for q in queues.items:
            f = next(o for o in module.regions[0][0].ops if o.name == "func.func"
                     and o.attrs["sym_name"].value == q.name)
            ret = f.regions[0][0].ops[-1]
            for r in range(replicas):
                for p_ in range(partitions):
                    client.infeed(r, tuple(_const_value(parser, v) for v in ret.operands),
                                  partition=p_)
    results = exe.execute([inputs[i * per:(i + 1) * per] for i in range(n)])
    flat = []
    for r in results:
        flat.extend(_leaves(r))
    values = {id(v): flat[i] for i, v in enumerate(op.results)}
    out = []
    for v in outputs:
        if id(v) not in values:
            raise Unsupported("a check on a value not produced by run_parallel")
        out.append(values[id(v)])
    return out


def run_case(text: str, backend: str, backend_options: dict | None = None) -> tuple[str, str]:
    try:
        parser, module, entry, checks, parallel, outputs = prepare(text)
    except Unsupported as e:
        return "unsupported", str(e)
    except XlaError as e:
        return _classify(str(e))
    try:
        if parallel is not None:
            values = _run_parallel(parser, module, parallel, backend, outputs, entry,
                                   backend_options)
        else:
            values = _run_single(parser, module, entry, backend, len(outputs), backend_options)
    except Unsupported as e:
        return "unsupported", str(e)
    except XlaError as e:
        return _classify(str(e))
    problems = []
    for check, indices in checks:
        msg = evaluate_check(check, [values[i] for i in indices])
        if msg:
            line = text.count("\n", 0, check.pos) + 1
            problems.append(f"line {line}: {msg}")
    if problems:
        return "fail", "; ".join(problems)
    return "pass", ""


#: Messages that say the case uses something XLA's translation (or HLO) does not have.
_UNSUPPORTED_MESSAGES = (
    (r"cannot be translated to HLO", None),
    (r"has no XLA element type", None),
    (r"is not supported by xlapy's import", None),
    (r"must be a constant for HLO", None),
)


def _classify(message: str) -> tuple[str, str]:
    first = message.split("\n", 1)[0]
    for pattern, _ in _UNSUPPORTED_MESSAGES:
        if re.search(pattern, first):
            return "unsupported", first
    return "fail", first


def file_label(path: Path) -> str:
    return f"chlo/{path.name}" if path.parent.name == "chlo" else path.name


def case_names(path: Path) -> list[str]:
    return [f"{file_label(path)}:{line}" for line, _ in split_cases(path.read_text())]


def run_file(path: Path, backend: str, backend_options: dict | None = None) -> list[Outcome]:
    """Every case of one test file on ``backend`` (made with ``backend_options``: the cpu
    backend's ``EXACT_NUMERICS`` or ``XLA_NUMERICS``; None: the backend's defaults)."""
    out = []
    for i, (line, chunk) in enumerate(split_cases(path.read_text())):
        status, detail = run_case(chunk, backend, backend_options)
        out.append(Outcome(file_label(path), i, line, status, detail))
    return out


#: The cpu backend's options for the exact HLO semantics (the interpreter's numerics) and
#: for XLA:CPU's default numerics (the backend's own default).
EXACT_NUMERICS = {"allow_excess_precision": False, "flush_denormals": False}
XLA_NUMERICS = {"allow_excess_precision": True, "flush_denormals": True}


def interpret_files(root: Path) -> list[Path]:
    return sorted(root.glob("*.mlir")) + sorted(root.glob("chlo/*.mlir"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="stablehlo/tests/interpret")
    ap.add_argument("--backend", default="interpreter", choices=("interpreter", "cpu"))
    ap.add_argument("--exact-numerics", action="store_true",
                    help="cpu: excess precision and denormal flushing off (XLA:CPU's defaults "
                         "otherwise)")
    ap.add_argument("--show", default="fail,unsupported",
                    help="outcomes to list (comma-separated)")
    args = ap.parse_args(argv)
    counts = {"pass": 0, "fail": 0, "unsupported": 0}
    show = set(args.show.split(","))
    options = EXACT_NUMERICS if args.exact_numerics and args.backend == "cpu" else None
    for path in interpret_files(args.root):
        for o in run_file(path, args.backend, options):
            counts[o.status] += 1
            if o.status in show:
                print(f"{o.status:<11} {o.name}: {o.detail[:300]}")
    total = sum(counts.values())
    print(f"{args.backend}: {total} cases: {counts['pass']} pass, {counts['fail']} fail, "
          f"{counts['unsupported']} unsupported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
