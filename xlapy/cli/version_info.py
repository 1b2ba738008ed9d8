"""``xlapy --version``: what a bug report needs to know about this installation - the versions
of xlapy, Python and the libraries it computes with (numpy, ml_dtypes, scipy, llvmlite and the
LLVM inside it), the BLAS the CPU backend's dot and convolution call (SciPy's bundled OpenBLAS:
its build configuration and the kernel it picked for this CPU) and NumPy's, and the host CPU
as LLVM sees it (name and vector features: what the CPU backend compiles for).

Every line is found out, never assumed: a library that cannot be loaded or asked says so on
its line instead of failing the command. Imports its libraries only when called.
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import sys

#: LLVM feature names worth a line, in the order shown: the vector extensions that decide
#: which kernels run (XLA:CPU and OpenBLAS pick theirs by the same flags).
_VECTOR_FEATURES = (
    "sse4.2", "avx", "avx2", "fma", "f16c", "avxvnni",
    "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512vnni", "avx512bf16",
    "avx512fp16", "amx-tile", "amx-int8", "amx-bf16",
)


def _module_version(name: str) -> str:
    try:
        module = __import__(name)
    except ImportError as e:
        return f"not importable ({e})"
    return str(getattr(module, "__version__", "unknown version"))


def _openblas_lines(label: str, package: str, folders: tuple[str, ...], suffix: str) -> list[str]:
    """``label: OpenBLAS <config>, kernel <corename>, <n> threads`` for the OpenBLAS shipped
    in ``package``'s wheel (its .libs folder), asked through its own functions (``suffix``:
    the 64-bit-integer build's symbol suffix)."""
    try:
        module = __import__(package)
    except ImportError:
        return [f"{label}: {package} not importable"]
    base = os.path.dirname(os.path.dirname(module.__file__))
    paths = []
    for folder in folders:
        paths += sorted(glob.glob(os.path.join(base, folder, "lib*openblas*.so*")))
    if not paths:
        return [f"{label}: no bundled OpenBLAS found beside {package} (a system BLAS?)"]
    try:
        lib = ctypes.CDLL(paths[0])
    except OSError as e:
        return [f"{label}: cannot load {paths[0]}: {e}"]

    def call(stem: str, restype):
        for prefix in ("scipy_openblas", "openblas"):
            fn = getattr(lib, f"{prefix}_{stem}{suffix}", None) or \
                getattr(lib, f"{prefix}_{stem}", None)
            if fn is not None:
                fn.restype = restype
                fn.argtypes = []
                return fn()
        return None

    config = call("get_config", ctypes.c_char_p)
    core = call("get_corename", ctypes.c_char_p)
    threads = call("get_num_threads", ctypes.c_int)
    text = " ".join(config.decode().split()) if config else "OpenBLAS (no get_config)"
    parts = [text if text.startswith("OpenBLAS") else f"OpenBLAS {text}"]
    if core:
        parts.append(f"kernel {core.decode().strip()}")
    if threads is not None:
        parts.append(f"{threads} threads")
    return [f"{label}: {', '.join(parts)} ({os.path.basename(paths[0])})"]


def _llvm_lines() -> list[str]:
    try:
        import llvmlite
        import llvmlite.binding as llvm
    except ImportError as e:
        return [f"llvmlite: not importable ({e})"]
    llvm_version = ".".join(str(v) for v in llvm.llvm_version_info)
    lines = [f"llvmlite {llvmlite.__version__}, LLVM {llvm_version}"]
    try:
        name = llvm.get_host_cpu_name()
        features = llvm.get_host_cpu_features()
    except Exception as e:  # noqa: BLE001 - an old or odd llvmlite: report, do not fail
        return lines + [f"host CPU: LLVM cannot tell ({type(e).__name__}: {e})"]
    present = [f for f in _VECTOR_FEATURES if features.get(f)]
    has_512 = any(f.startswith("avx512") for f in present)
    lines.append(f"host CPU: {name} ({platform.machine()}, {os.cpu_count()} logical cores); "
                 f"vector features: {' '.join(present) or 'none of ' + ' '.join(_VECTOR_FEATURES)}"
                 f"{'' if has_512 else ' (no AVX-512)'}")
    return lines


def version_text() -> str:
    """The lines ``xlapy --version`` prints."""
    from xlapy import __version__

    lines = [f"xlapy {__version__} ({os.path.dirname(os.path.dirname(__file__))})",
             f"Python {platform.python_version()} ({sys.executable})"]
    for name in ("numpy", "ml_dtypes", "scipy"):
        lines.append(f"{name} {_module_version(name)}")
    lines += _llvm_lines()
    lines += _openblas_lines("BLAS of the CPU backend (SciPy's)", "scipy",
                             ("scipy.libs", os.path.join("scipy_openblas32", "lib")), "")
    lines += _openblas_lines("BLAS of NumPy", "numpy",
                             ("numpy.libs", os.path.join("scipy_openblas64", "lib")), "64_")
    return "\n".join(lines)


__all__ = ["version_text"]
