"""``xlapy bench``'s BLAS report: which BLAS library and kernel the cpu backend's GEMMs run
on, and, when the environment pins OpenBLAS below the host's best kernel
(``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 host), the GEMM cases measured again with the
variable unset, in a subprocess (the user's setting is never changed in this process), so the
figure users see is known either way.

The host's best kernel is the one OpenBLAS picks by itself: a subprocess without
``OPENBLAS_CORETYPE`` asks ``openblas_get_corename``. The unpinned run is ``python -m xlapy
bench`` itself on the GEMM cases (``suite.GEMM_CASES``) with ``--json``; its rows are printed
beside the pinned ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

#: Set in the unpinned subprocess (so it does not start another one).
UNPINNED_MARK = "XLAPY_BENCH_UNPINNED"
_CORE_PROBE = ("from xlapy.backends.cpu import blas; import json; "
               "print(json.dumps(blas.library_info()))")


def _env_unpinned() -> dict:
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env[UNPINNED_MARK] = "1"
    # the subprocess imports this xlapy, wherever it comes from
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def blas_state() -> dict:
    """The backend's BLAS (``blas.library_info()``) plus ``unpinned_core``: the kernel
    OpenBLAS picks with ``OPENBLAS_CORETYPE`` unset (None when it is not set, or the probe
    failed) and ``pinned_below``: True when the two differ."""
    from xlapy.backends.cpu import blas, threads

    try:
        info = blas.library_info()
    except Exception as e:  # noqa: BLE001 - no BLAS is reported, never fatal to the bench
        info = {"path": None, "config": None, "core": None, "threads": None,
                "coretype": os.environ.get("OPENBLAS_CORETYPE"), "error": str(e)}
    info["user_threads"] = threads.USER_BLAS_THREADS
    info["workers"] = threads.WORKERS
    info["unpinned_core"] = None
    info["pinned_below"] = False
    if info.get("coretype") and not os.environ.get(UNPINNED_MARK):
        try:
            done = subprocess.run([sys.executable, "-c", _CORE_PROBE], env=_env_unpinned(),
                                  capture_output=True, text=True, timeout=60, check=True)
            info["unpinned_core"] = json.loads(done.stdout.strip().splitlines()[-1])["core"]
        except (subprocess.SubprocessError, OSError, ValueError, KeyError, IndexError):
            info["unpinned_core"] = None
        core = (info.get("core") or "").lower()
        best = (info["unpinned_core"] or "").lower()
        info["pinned_below"] = bool(best) and best != core
    return info


def describe(info: dict) -> list[str]:
    """The report's BLAS lines."""
    lib = os.path.basename(info["path"]) if info.get("path") else "not found"
    head = (f"BLAS (cpu backend GEMMs): {info.get('config') or 'unknown build'} "
            f"[{lib}], kernel {info.get('core') or 'unknown'}")
    lines = [head]
    if info.get("coretype"):
        text = f"  OPENBLAS_CORETYPE={info['coretype']} (the environment's, left as it is)"
        if info.get("unpinned_core"):
            text += f"; unset, OpenBLAS picks {info['unpinned_core']}"
            if info.get("pinned_below"):
                text += ": pinned below the host's best (GEMM cases also run unpinned, below)"
        lines.append(text)
    user = info.get("user_threads")
    threads = (f"BLAS threads as the user set them ({user})" if user
               else "BLAS single-threaded inside the backend's pool")
    lines.append(f"  threads: the backend's pool of {info.get('workers')}; {threads}")
    return lines


def run_unpinned(args, names: list[str], gemm_cases) -> tuple[list[dict], str | None]:
    """The GEMM cases among ``names`` measured by a ``python -m xlapy bench`` subprocess with
    ``OPENBLAS_CORETYPE`` unset: (their JSON rows, an error text or None)."""
    chosen = [n for n in names if n in gemm_cases]
    if not chosen:
        return [], None
    with tempfile.TemporaryDirectory(prefix="xlapy-bench-") as tmp:
        out = os.path.join(tmp, "unpinned.json")
        cmd = [sys.executable, "-m", "xlapy", "bench", "--cases", ",".join(chosen),
               "--json", out, "--order", args.order, "--seed", str(args.seed),
               "--backend", args.backend]
        if args.tiny:
            cmd.append("--tiny")
        elif args.quick:
            cmd.append("--quick")
        for flag in ("repeats", "budget", "timeout"):
            value = getattr(args, flag)
            if value is not None:
                cmd += [f"--{flag}", str(value)]
        if args.no_jax:
            cmd.append("--no-jax")
        try:
            subprocess.run(cmd, env=_env_unpinned(), capture_output=True, text=True,
                           check=False, timeout=3600)
            with open(out, encoding="utf-8") as f:
                data = json.load(f)
        except (subprocess.SubprocessError, OSError, ValueError) as e:
            return [], f"the unpinned run failed: {e}"
    return data.get("cases", []), None


__all__ = ["UNPINNED_MARK", "blas_state", "describe", "run_unpinned"]
