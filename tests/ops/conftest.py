"""tests/ops: every interpreter evaluation is checked on the compiled CPU backend as well
(backend_check.py says how and what is compared; XLAPY_BACKEND_CHECK=0 switches it off)."""

from __future__ import annotations

import backend_check
import pytest

#: Op tests whose evaluation the CPU backend gets wrong today, by node id, with the bug.
#: Marked xfail(strict=True, raises=BackendMismatch) while the check is on, so a fix of the
#: backend turns them into XPASS failures: then delete the entry.
KNOWN_BACKEND_BUGS: dict[str, str] = {}


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
