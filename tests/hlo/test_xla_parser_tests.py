"""XLA's own parser tests (xla/hlo/parser/hlo_parser_test.cc), case by case, through
tools/xla_parser_tests.py: at each XLA commit of tools/xla_parser_known_failures.json, exactly
the cases listed there fail (with the reason written there), every other case passes.

XLA's C++ file is not part of xlapy: the test reads it from the XLA clone named by
``$XLA_GIT_DIR`` (openxla/xla or a fork holding the commits) and is skipped without one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))

import xla_parser_tests as tool

KNOWN = json.loads((TOOLS / "xla_parser_known_failures.json").read_text())["commits"]


def _source(commit: str) -> str:
    git_dir = os.environ.get("XLA_GIT_DIR")
    if not git_dir:
        pytest.skip("set XLA_GIT_DIR to an XLA clone to run XLA's parser tests")
    proc = subprocess.run(["git", "-C", git_dir, "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True, check=False)
    if proc.returncode:
        pytest.skip(f"the XLA clone {git_dir} does not hold commit {commit}")
    return tool.read_source(git_dir=git_dir, commit=commit)


@pytest.mark.parametrize("commit", sorted(KNOWN))
def test_xla_parser_tests_fail_only_where_known(commit):
    outcomes = tool.run_all(tool.extract(_source(commit)))
    failing = {o.name: o.failures for o in outcomes if not o.ok and o.kind != "n/a"}
    unexpected = {name: why for name, why in failing.items() if name not in KNOWN[commit]}
    assert not unexpected, "\n".join(f"{n}: {w}" for n, w in unexpected.items())
    now_passing = sorted(set(KNOWN[commit]) - set(failing))
    assert not now_passing, f"now passing (remove from the known failures): {now_passing}"


def test_known_failures_give_reasons():
    for commit, cases in KNOWN.items():
        assert cases is not None and all(isinstance(why, str) and why for why in cases.values()), \
            commit
