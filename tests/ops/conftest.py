"""tests/ops: every interpreter evaluation is checked on the compiled CPU backend as well
(backend_check.py says how and what is compared; XLAPY_BACKEND_CHECK=0 switches it off)."""

from __future__ import annotations

import backend_check
import pytest

#: Op tests whose evaluation the CPU backend gets wrong today, by node id, with the bug.
#: Marked xfail(strict=True, raises=BackendMismatch) while the check is on, so a fix of the
#: backend turns them into XPASS failures: then delete the entry.
_DYNAMIC = ("a fused loop over a bounded dynamic dimension (f32[<=n]) runs over the bound, "
            "not the runtime size: the result has the bound's size and reads past the operand")
KNOWN_BACKEND_BUGS: dict[str, str] = {
    "tests/ops/test_elementwise_eval.py::test_dynamic_operands_use_their_runtime_size": _DYNAMIC,
    "tests/ops/test_slice_eval.py::test_dynamic_slice_of_a_too_short_dynamic_operand_is_an_error":
        _DYNAMIC,
    "tests/ops/test_slice_eval.py::test_dynamic_slice_index_types[u64-18446744073709551615-0]":
        "a u64 dynamic-slice start >= 2^63 clamps to the end (read as unsigned); the "
        "interpreter reads start indices as s64 (2^64-1 is -1: start 0)",
}


def pytest_collection_modifyitems(config, items):
    if not backend_check.enabled():
        return
    for item in items:
        reason = KNOWN_BACKEND_BUGS.get(item.nodeid)
        if reason:
            item.add_marker(pytest.mark.xfail(strict=True, raises=backend_check.BackendMismatch,
                                              reason=f"cpu backend: {reason}"))


@pytest.fixture(autouse=True)
def _backend_check(monkeypatch):
    if not backend_check.enabled():
        yield
        return
    for module, name in backend_check.patch_targets():
        monkeypatch.setattr(module, name, backend_check.checked_evaluate)
    backend_check.STATS.failures.clear()
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield  # the test's own failure, if any, propagates first
    failures = backend_check.STATS.failures
    if failures and backend_check.enabled():
        text = "\n\n".join(failures)
        failures.clear()
        raise backend_check.BackendMismatch(text)
    return result


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if backend_check.enabled() and backend_check.STATS.evaluations:
        terminalreporter.write_line(backend_check.STATS.summary())
