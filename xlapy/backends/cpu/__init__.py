"""The compiled CPU backend: ``xlapy.Client(backend="cpu")``, the default of
``xlapy run``.

Modules: backend (passes, then the plans: ``CpuBackend``, ``compile_module``), steps (the
plans' steps and how a plan runs), program_cache (the in-memory program cache: keys, the LRU bound), loop_emitter (loop
fusions as LLVM loop nests), reduction (reduce and reduce-window kernels), control_flow
(while loops compiled whole), elemental and indexing (per-opcode element generators, as
XLA's elemental IR emitter), library (dot, convolution, sort, FFT through BLAS/NumPy),
buffers (recycled output memory, the two-core split), kernel_abi (the kernels' calling
convention), jit (LLVM through llvmlite, the disk cache).

The caches: compiled programs in memory, least recently used dropped beyond
``XLAPY_CPU_CACHE_PROGRAMS`` programs (default 256) or ``XLAPY_CPU_CACHE_BYTES`` estimated
bytes (default 512M; K/M/G suffixes), or the limits ``set_cache_limits`` sets; object code
and whole programs (plan_cache: loaded without compiling) on disk under ``$XLAPY_CACHE_DIR``
(default ``~/.cache/xlapy``; ``XLAPY_DISK_CACHE=0`` turns it off, ``XLAPY_PLAN_CACHE=0`` the
program entries alone), each entry checked before use.
"""


def clear_caches(disk: bool = True) -> None:
    """Forget compiled programs: in memory and, with ``disk``, the disk cache's entries.
    Programs held by Executables stay valid."""
    from xlapy.backends.cpu.backend import clear_caches as clear

    clear(disk)


def set_cache_limits(programs: int | None = None, bytes: int | None = None) -> None:
    """Bound the in-memory program cache: at most ``programs`` programs and ``bytes``
    estimated bytes (None: unchanged; 0 programs: no caching). Least recently used
    programs beyond the bounds are dropped at once."""
    from xlapy.backends.cpu.backend import PROGRAMS

    PROGRAMS.set_limits(programs, bytes)


def cache_limits() -> dict:
    """``{"programs": n, "bytes": b}``: the program cache's bounds."""
    from xlapy.backends.cpu.backend import PROGRAMS

    return PROGRAMS.limits()


def cache_info() -> dict:
    """The program cache now: programs and estimated bytes held, the bounds, hits, misses,
    evictions."""
    from xlapy.backends.cpu.backend import PROGRAMS

    return PROGRAMS.info()


__all__ = ["cache_info", "cache_limits", "clear_caches", "set_cache_limits"]
