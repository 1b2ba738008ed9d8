#!/usr/bin/env python
"""Regenerate the StableHLO text of the golden jax fixtures in ``tests/stablehlo/fixtures/``.

Usage::

    python tools/dump_stablehlo_fixtures.py [--out tests/stablehlo/fixtures] [--only name,...]

For every program of ``tools/dump_jax_fixtures.py``'s corpus (the same functions, arguments,
jit options and x64 setting) this writes ``<name>.mlir``:
``jax.jit(f, keep_unused=True, ...).lower(*args).as_text()``, the StableHLO module jax hands
to XLA, whose HLO translation is ``tests/fixtures/jax/<name>.pre.hlo``. The inputs and XLA's
outputs stay in ``tests/fixtures/jax/<name>.npz``: the test runs the StableHLO text on them.

The programs named in ``WITH_LOCATIONS`` are written with ``as_text(debug_info=True)``
(``loc(...)`` on every op, ``#loc`` aliases at the end), so the import is tested on the
locations jax prints as well.

jax is a test-only dependency: this script imports it, xlapy never does.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "stablehlo" / "fixtures"

WITH_LOCATIONS = {"mlp_grad", "scan_rnn", "cond", "sort_2d", "scatter_add", "nested_jit_call"}


def _corpus():
    spec = importlib.util.spec_from_file_location("dump_jax_fixtures",
                                                  REPO_ROOT / "tools" / "dump_jax_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["dump_jax_fixtures"] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", default=None, help="comma-separated program names")
    args = ap.parse_args(argv)
    fixtures = _corpus()
    import jax

    programs = {p.name: p for p in fixtures.CORPUS}
    names = list(programs)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in programs]
        if unknown:
            print(f"error: unknown program(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        p = programs[name]
        rng = np.random.default_rng(p.seed)
        inputs = tuple(np.asarray(a) for a in p.make_args(rng))
        with jax.enable_x64(p.x64):
            lowered = jax.jit(p.fn, keep_unused=True, **p.jit_kwargs).lower(*inputs)
            text = lowered.as_text(debug_info=name in WITH_LOCATIONS)
        if not text.endswith("\n"):
            text += "\n"
        (args.out / f"{name}.mlir").write_text(text)
        print(f"{name:<26} {len(text.splitlines()):>5} lines")
    if not args.only:
        for f in sorted(args.out.glob("*.mlir")):
            if f.stem not in programs:
                print(f"removing stale {f.name}")
                f.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
