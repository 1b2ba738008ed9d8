"""StableHLO's interpreter tests through xlapy's StableHLO import, on the interpreter and on
the cpu backend with the exact HLO numerics and with XLA:CPU's (see stablehlo_conformance.py).
Skipped unless ``XLAPY_STABLEHLO_INTERPRET_TESTS`` points at a checkout's
``stablehlo/tests/interpret`` directory (the tests are not part of this repository;
``python tools/stablehlo_interpret_tests.py --fetch-only`` fetches them at the pinned commit).

Every case must pass, except those listed below with the reason; a listed case that starts
passing fails too (the list must be kept true)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stablehlo_conformance import (
    ENV,
    EXACT_NUMERICS,
    XLA_NUMERICS,
    case_names,
    interpret_files,
    run_file,
)

ROOT = os.environ.get(ENV)

#: file:line of a case -> (outcome, why). Outcomes the runner reports that are not "pass".
EXPECTED = {
    # XLA's translation or HLO rejects the program (xlapy gives XLA's error):
    "all_to_all.mlir:127": ("fail", "variadic all_to_all with split/concat dimensions: XLA "
                                    "exports a tuple all-to-all, whose operands must have one "
                                    "shape"),
    "bitcast_convert.mlir:1": ("fail", "i1 is 1 bit in StableHLO, pred 8 bits in HLO: XLA's "
                                       "bitcast-convert shape check rejects i1[64] -> i64"),
    "bitcast_convert.mlir:35": ("fail", "i64 -> i1[64]: as above"),
    "cbrt.mlir:11": ("fail", "HLO cbrt takes floating point only (XLA's shape inference)"),
    "collective_broadcast.mlir:1": ("fail", "replica_groups {{2,1}}: HLO needs groups to name "
                                            "replicas 0..n-1"),
    "collective_broadcast.mlir:114": ("fail", "as above"),
    # HLO's semantics, which xlapy follows, differ from the StableHLO interpreter's:
    "all_gather.mlir:51": ("fail", "cross-replica-and-partition groups: XLA orders the "
                                   "participants replica-major, the StableHLO interpreter "
                                   "partition-major (stablehlo issue 1933)"),
    "reduce_precision.mlir:11": ("fail", "reduce_precision e5m0 of NaN: XLA:CPU gives NaN "
                                         "(checked through jax), the interpreter inf"),
    "maximum.mlir:153": ("fail", "complex maximum: XLA:CPU compares the real parts only "
                                 "(lhs when equal; tests/fixtures/xla_hlo), the StableHLO "
                                 "interpreter (real, imaginary) lexicographically"),
    "maximum.mlir:163": ("fail", "as above (c128)"),
    "minimum.mlir:153": ("fail", "complex minimum: as maximum"),
    "minimum.mlir:163": ("fail", "as above (c128)"),
}
#: More on the cpu backend with XLA:CPU's default numerics (docs/numerics.md), which flushes
#: denormals: ceil/floor of a denormal input give XLA:CPU's answer for zero.
EXPECTED_XLA_NUMERICS = {
    f"{op}.mlir:{line}": ("fail", "XLA:CPU flushes the denormal input to zero")
    for op in ("ceil", "floor") for line in (1, 20, 29)
}
#: Outcomes "unsupported" are the runner's own verdicts (reason in the outcome): interpreter
#: instrumentation (probe, print), quantized types, FileCheck-only cases, run_parallel of
#: different programs, collective_reduce (no HLO op). They are counted, not listed.

FILES = interpret_files(Path(ROOT)) if ROOT else []


@pytest.mark.skipif(not ROOT, reason=f"set {ENV} to stablehlo/tests/interpret of a checkout")
@pytest.mark.parametrize("backend", ["interpreter", "cpu", "cpu-xla-numerics"])
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_interpret_file(path, backend):
    problems = []
    expectations = EXPECTED
    options = EXACT_NUMERICS if backend == "cpu" else None
    if backend == "cpu-xla-numerics":
        backend, options = "cpu", XLA_NUMERICS
        expectations = {**EXPECTED, **EXPECTED_XLA_NUMERICS}
    for outcome in run_file(path, backend, options):
        expected = expectations.get(outcome.name, ("pass", ""))[0]
        if outcome.status == "unsupported":
            continue
        if outcome.status != expected:
            problems.append(f"{outcome.name}: {outcome.status} (expected {expected}): "
                            f"{outcome.detail[:400]}")
    assert not problems, "\n".join(problems)


def test_expectations_name_real_cases():
    if not ROOT:
        pytest.skip(f"set {ENV}")
    names = {n for p in FILES for n in case_names(p)}
    assert set(EXPECTED) <= names and set(EXPECTED_XLA_NUMERICS) <= names
