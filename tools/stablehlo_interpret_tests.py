#!/usr/bin/env python
"""StableHLO's interpreter tests on xlapy, reproducibly: fetch ``stablehlo/tests/interpret``
of openxla/stablehlo at a pinned commit, run every case through xlapy's StableHLO import
(tests/stablehlo/stablehlo_conformance.py) on the interpreter, on the cpu backend with the
exact HLO numerics and on the cpu backend with XLA:CPU's default numerics (excess precision,
flushed denormals; docs/numerics.md), and print the counts per configuration.

    python tools/stablehlo_interpret_tests.py                 # fetch (network), then run
    python tools/stablehlo_interpret_tests.py --tests DIR     # an existing interpret/ folder
    python tools/stablehlo_interpret_tests.py --git REPO      # from a local clone (git archive)
    python tools/stablehlo_interpret_tests.py --fetch-only    # just put the files in --dest

Fetching needs network access to github.com (the tarball of the pinned commit, read as a
stream; only ``stablehlo/tests/interpret/`` is written) unless ``--git`` names a clone that
holds the commit. The files land in ``--dest`` (default: ``stablehlo-interpret-<commit>`` in
the system's temporary directory) and are not part of this repository. The same folder makes
tests/stablehlo/test_stablehlo_conformance.py run (``XLAPY_STABLEHLO_INTERPRET_TESTS=DIR``).
Run from the repository root.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: openxla/stablehlo v1.20.0.
COMMIT = "3c9301c116f97fbaf696959a0ede32712aec587b"
FOLDER = "stablehlo/tests/interpret"
TARBALL = "https://codeload.github.com/openxla/stablehlo/tar.gz/{commit}"

#: (label, backend, backend options): the configurations counted.
CONFIGURATIONS = (
    ("interpreter", "interpreter", None),
    ("cpu, exact numerics", "cpu", "exact"),
    ("cpu, XLA:CPU's numerics", "cpu", "xla"),
)


def _extract(tar: tarfile.TarFile, dest: Path) -> int:
    """Write the members under ``<top>/stablehlo/tests/interpret/`` to ``dest``."""
    count = 0
    for member in tar:
        parts = member.name.split("/", 1)
        if len(parts) < 2 or not parts[1].startswith(FOLDER + "/") or not member.isfile():
            continue
        rel = Path(parts[1][len(FOLDER) + 1:])
        if rel.is_absolute() or ".." in rel.parts:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(tar.extractfile(member).read())
        count += 1
    return count


def fetch(commit: str, dest: Path, git: Path | None = None) -> Path:
    """``stablehlo/tests/interpret`` at ``commit`` in ``dest`` (kept when already there)."""
    if dest.is_dir() and any(dest.glob("*.mlir")):
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    if git is not None:
        data = subprocess.run(["git", "-C", str(git), "archive", "--prefix=top/", commit,
                               FOLDER], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            count = _extract(tar, dest)
    else:
        url = TARBALL.format(commit=commit)
        print(f"fetching {url} ...", file=sys.stderr)
        with urllib.request.urlopen(url, timeout=120) as response, \
                tarfile.open(fileobj=response, mode="r|gz") as tar:
            count = _extract(tar, dest)
    if not count:
        raise SystemExit(f"no {FOLDER}/ files at {commit}")
    print(f"{count} files in {dest}", file=sys.stderr)
    return dest


def run(tests: Path) -> dict:
    """Counts per configuration: {label: {"pass": n, "fail": n, "unsupported": n,
    "failing": [case, ...], "seconds": t}}."""
    sys.path[:0] = [str(ROOT / "tests" / "stablehlo"), str(ROOT)]
    import stablehlo_conformance as conformance

    out = {}
    files = conformance.interpret_files(tests)
    for label, backend, options in CONFIGURATIONS:
        opts = {"exact": conformance.EXACT_NUMERICS, "xla": conformance.XLA_NUMERICS,
                None: None}[options]
        counts = {"pass": 0, "fail": 0, "unsupported": 0}
        failing = []
        start = time.perf_counter()
        for path in files:
            for outcome in conformance.run_file(path, backend, opts):
                counts[outcome.status] += 1
                if outcome.status == "fail":
                    failing.append(outcome.name)
        out[label] = {**counts, "failing": failing,
                      "seconds": round(time.perf_counter() - start, 1)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commit", default=COMMIT, help="openxla/stablehlo commit (full hash)")
    ap.add_argument("--dest", type=Path, default=None,
                    help="where the fetched files go (default: a folder named after the "
                         "commit in the temporary directory)")
    ap.add_argument("--git", type=Path, default=None,
                    help="a local clone of openxla/stablehlo holding the commit (no network)")
    ap.add_argument("--tests", type=Path, default=None,
                    help="an existing stablehlo/tests/interpret folder (no fetching)")
    ap.add_argument("--fetch-only", action="store_true", help="fetch, do not run")
    ap.add_argument("--json", type=Path, default=None, help="also write the counts here")
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    tests = args.tests
    if tests is None:
        dest = args.dest or Path(tempfile.gettempdir()) / f"stablehlo-interpret-{args.commit}"
        tests = fetch(args.commit, dest, args.git)
    if args.fetch_only:
        print(tests)
        return 0
    results = run(tests)
    total = None
    for label, r in results.items():
        total = r["pass"] + r["fail"] + r["unsupported"]
        print(f"{label:<26} {r['pass']:>4} pass {r['fail']:>3} fail {r['unsupported']:>3} "
              f"unsupported of {total} ({r['seconds']} s)")
        if r["failing"]:
            print("    failing: " + ", ".join(r["failing"]))
    if args.json:
        args.json.write_text(json.dumps({"commit": args.commit, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
