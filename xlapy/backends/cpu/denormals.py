"""Denormal floats flushed to zero, as XLA:CPU does (the CPU backend's default).

XLA:CPU runs every computation with the x86 MXCSR bits FTZ (flush results that would be
denormal to a zero of the same sign) and DAZ (read denormal inputs of arithmetic as zero)
set (``tsl::port::ScopedFlushDenormal`` around the execution). Measured on jaxlib 0.10.2
(tools/gen_numerics_fixtures.py): for f32 and f64, ``sign``, ``round``, ``floor``, ``log``,
``sqrt``, ``rsqrt``, ``compare``, ``maximum``, float->int and f32<->f64 conversions read a
denormal as +-0, and a product or quotient whose exact result is denormal gives +-0; data
movement and sign-bit operations (``abs``, ``negate``, ``bitcast-convert``, a ``copy``) keep
the denormal's bits. bf16 is computed in f32 after an exact (bit shift) widening, so its
denormals flush in arithmetic the same way; f16 widens through F16C (which ignores DAZ) to a
normal f32 and narrows without FTZ, so f16 keeps its denormals.

How the CPU backend does the same:

- every generated kernel and native function (``kernel_abi.KERNEL_TYPE``: the entry
  computation's function, a compiled while's, a collective's) gets an entry point, its
  name plus ``ENTRY_SUFFIX`` (``entry_name``), that sets FTZ|DAZ, calls the function and
  restores the caller's MXCSR, whichever thread runs it (it calls the function ``noinline``:
  a copy of every kernel inlined into its entry point doubled the code LLVM generates for
  kernels that stay inlinable, those a compiled while inlines); Python binds the entry points,
  while native code (a native function calling its kernels, loops and collectives) calls
  the functions themselves, so MXCSR is written once per call from Python, not once per
  kernel call (``ldmxcsr`` costs tens of cycles: three per iteration made a scalar loop 8x
  slower than XLA's); every function of the LLVM module carries
  ``"denormal-fp-math"="preserve-sign,preserve-sign"`` (and the f32 variant) so that
  LLVM's constant folding agrees with the hardware;
- the thread running a program holds FTZ|DAZ for the whole run, so the steps the backend
  runs with the interpreter's NumPy kernels flush too: the Python plan executor runs
  inside ``flushing``; a native entry's host calls run inside its entry point;
- library calls that run on other threads (the BLAS's own worker threads for dot) do not
  flush: a dot whose inputs or products are denormal can still differ from XLA:CPU.

The interpreter does not flush unless asked (``Client(backend="interpreter",
backend_options={"flush_denormals": True})``: the same ``flushing`` around its run; NumPy's
SIMD transcendental functions that take a float apart with integer operations do not see
DAZ, so there the interpreter's answer can still differ from XLA:CPU's).
"""

from __future__ import annotations

import contextlib
import ctypes
import platform
import threading

from llvmlite import ir

from xlapy.backends.cpu.kernel_abi import KERNEL_TYPE

#: MXCSR bits: FTZ (bit 15) and DAZ (bit 6).
FTZ_DAZ = 0x8040

#: The function attributes telling LLVM that denormals are flushed (inputs and outputs,
#: keeping the sign), as MXCSR FTZ|DAZ makes the hardware do.
ATTRIBUTES = ('"denormal-fp-math-f32"="preserve-sign,preserve-sign"',)

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_MXCSR_FN = ir.FunctionType(ir.VoidType(), [_I8P])


def supported() -> bool:
    """FTZ/DAZ are x86 MXCSR bits: elsewhere nothing is flushed."""
    return platform.machine().lower() in ("x86_64", "amd64")


def _intrinsic(module: ir.Module, name: str):
    existing = module.globals.get(name)
    return existing if existing is not None else module.declare_intrinsic(name, fnty=_MXCSR_FN)


#: The suffix of a kernel's flushing entry point (``flush_in_module``).
ENTRY_SUFFIX = ".ftz"


def entry_name(name: str, flush: bool) -> str:
    """The symbol Python calls for kernel ``name``: its flushing entry point when the module
    was compiled with ``flush_in_module`` (``flush``), else the kernel itself."""
    return name + ENTRY_SUFFIX if flush and supported() else name


def flush_in_module(module: ir.Module) -> None:
    """Make every kernel of ``module`` flush denormals when called through its entry point
    (see the module docstring). Run once, after the emitters added their functions and
    before the module is compiled."""
    if not supported():
        return
    stmxcsr = _intrinsic(module, "llvm.x86.sse.stmxcsr")
    ldmxcsr = _intrinsic(module, "llvm.x86.sse.ldmxcsr")
    for fn in list(module.functions):
        if fn.is_declaration:
            continue
        for attribute in ATTRIBUTES:  # llvmlite knows no string attributes; they print as is
            set.add(fn.attributes, attribute)
        if fn.ftype != KERNEL_TYPE or fn.linkage in ("internal", "private"):
            continue  # not a kernel, or one only native code calls
        entry = ir.Function(module, KERNEL_TYPE, name=fn.name + ENTRY_SUFFIX)
        for attribute in ATTRIBUTES:
            set.add(entry.attributes, attribute)
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        saved = b.alloca(_I32, name="mxcsr.saved")
        flushed = b.alloca(_I32, name="mxcsr.flush")
        b.call(stmxcsr, [b.bitcast(saved, _I8P)])
        b.store(b.or_(b.load(saved), ir.Constant(_I32, FTZ_DAZ)), flushed)
        b.call(ldmxcsr, [b.bitcast(flushed, _I8P)])
        b.call(fn, list(entry.args), attrs=("noinline",))  # one copy of the kernel's code
        b.call(ldmxcsr, [b.bitcast(saved, _I8P)])
        b.ret_void()


# -- the calling thread's MXCSR -------------------------------------------------------------------

_LOCK = threading.Lock()
_ACCESS: list = []  # (engine, get, set) once made


def _access():
    """Native ``i32 get()`` and ``void set(i32)`` of the calling thread's MXCSR (compiled
    once with LLVM; None where unsupported)."""
    if not supported():
        return None
    with _LOCK:
        if not _ACCESS:
            import llvmlite.binding as llvm

            from xlapy.backends.cpu.jit import get_jit

            get_jit()  # initialises LLVM's native target
            mod = ir.Module("xlapy_mxcsr")
            st, ld = _intrinsic(mod, "llvm.x86.sse.stmxcsr"), _intrinsic(mod, "llvm.x86.sse.ldmxcsr")
            getter = ir.Function(mod, ir.FunctionType(_I32, []), "xlapy_mxcsr_get")
            b = ir.IRBuilder(getter.append_basic_block("entry"))
            slot = b.alloca(_I32)
            b.call(st, [b.bitcast(slot, _I8P)])
            b.ret(b.load(slot))
            setter = ir.Function(mod, ir.FunctionType(ir.VoidType(), [_I32]), "xlapy_mxcsr_set")
            b = ir.IRBuilder(setter.append_basic_block("entry"))
            slot = b.alloca(_I32)
            b.store(setter.args[0], slot)
            b.call(ld, [b.bitcast(slot, _I8P)])
            b.ret_void()
            parsed = llvm.parse_assembly(str(mod))
            parsed.verify()
            machine = llvm.Target.from_default_triple().create_target_machine()
            engine = llvm.create_mcjit_compiler(parsed, machine)
            engine.finalize_object()
            get = ctypes.CFUNCTYPE(ctypes.c_uint32)(engine.get_function_address("xlapy_mxcsr_get"))
            put = ctypes.CFUNCTYPE(None, ctypes.c_uint32)(
                engine.get_function_address("xlapy_mxcsr_set"))
            _ACCESS.append((engine, get, put))
    return _ACCESS[0]


@contextlib.contextmanager
def flushing(enabled: bool = True):
    """FTZ|DAZ set in the calling thread for the block (restored after); nothing when
    ``enabled`` is false or on a machine without MXCSR."""
    access = _access() if enabled else None
    if access is None:
        yield
        return
    _, get, put = access
    saved = get()
    put(saved | FTZ_DAZ)
    try:
        yield
    finally:
        put(saved)


__all__ = ["ATTRIBUTES", "ENTRY_SUFFIX", "FTZ_DAZ", "entry_name", "flush_in_module", "flushing",
           "supported"]
