"""The compiled CPU backend (issue 7): ``xlapy.Client(backend="cpu")``, the default of
``xlapy run``.

Modules: backend (passes, plans of steps, the compile caches: ``CpuBackend``,
``compile_module``), loop_emitter (loop fusions as LLVM loop nests), reduction (reduce and
reduce-window kernels), control_flow (while loops compiled whole), elemental and indexing
(per-opcode element generators, as XLA's elemental IR emitter), library (dot, convolution,
sort, FFT through BLAS/NumPy), buffers (recycled output memory, the two-core split),
kernel_abi (the kernels' calling convention), jit (LLVM through llvmlite, the disk cache).
"""


def clear_caches(disk: bool = True) -> None:
    """Forget compiled programs: in memory and, with ``disk``, the disk cache's object files."""
    from xlapy.backends.cpu.backend import clear_caches as clear

    clear(disk)


__all__ = ["clear_caches"]
