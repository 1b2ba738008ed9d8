"""The disk cache of whole programs: a module compiled before, in this process or another,
is loaded with its plan - no passes, no planning, no LLVM IR, no IR print - only its object
code into an engine and the native entry's per-call data rebuilt.

**The key** is the SHA-256 of the *key material* (``key_material``), a JSON object of:

- ``program``: the in-memory cache's key of the *input* module (``program_cache
  .fingerprint``: its complete print, every literal's bytes, its config, the pass pipeline
  and the backend's options, the JIT's identity: xlapy, LLVM and llvmlite versions, target
  triple, host CPU name and features, optimisation settings);
- ``source``: the SHA-256 of every ``.py`` file of the xlapy package (``source_fingerprint``,
  computed once per process): an edited xlapy never loads a plan an older one made;
- what planning reads from the host besides the module: the worker pool's thread count
  (GEMM descriptors cut work for it), the user's BLAS thread setting, what decides between
  generated GEMMs and BLAS (``gemm_kernel.planning_inputs``: the host's and the BLAS
  kernel's vector widths, which OPENBLAS_CORETYPE changes), the NumPy, SciPy and Python
  versions (which library paths exist).

A stored program's object code may call the packed GEMM's shared cores (gemm_packed.py),
which live outside it; they are made known to LLVM (``gemm_packed.provide_cores``) before
the object is loaded.

The object-code cache (jit.py) needs none of this: its key is the IR text itself, which
holds whatever planning decided. A program entry is keyed before any IR exists, so every
input of planning is in its key instead.

**What is stored** (``cpu-<key>.plan`` in the disk cache's directory, next to the object
entries, ``jit.cache_dir()``; ``XLAPY_PLAN_CACHE=0`` keeps object entries only):

    magic "XLAPYPRG" | format u32 | material length u32 | plan, object, constants lengths
    (u64 each) | SHA-256 of each of the three | key material (JSON) |
    SHA-256 of everything before | plan (JSON) | object code | constants

The *plan* is the native entry's description (``native.NativeEntry``): the entry symbol to
call, the parameters' and the root's shapes, the result -> parameter aliases of donation,
the workspace size, the constants' dtypes, dimensions and places in the constants part,
the cancel polls of the host table (their descriptions, in table order), whether a run
needs the executor's Run, the largest GEMM (BLAS calls bounded to one thread), and the
instructions (name, opcode, shape) that out-of-memory errors name. Nothing in it is an
address of this process: native code finds BLAS, the worker pool and the host callbacks in
the function table the context word points at (executor.py), filled at run time, as for
any object entry.

**Which programs are stored**: those whose entry runs as one native function
(``native.compile_entry``) that never calls back into Python except for cancel polls. The
others keep the full compile on every process (correct, just slower), ``unpersistable``
says why:

- programs on the Python plan executor (tokens, opaque values, dynamic shapes);
- programs with host calls (``executor.StepCall``): interpreted instructions, library
  calls native code does not take (sort through NumPy, FFT, convolution, LAPACK, a dot
  whose operands BLAS cannot read in place), while loops that stay in Python - a host call
  runs a step over HLO instructions this cache does not keep;
- programs with collectives, replica-id or partition-id (their steps and the run table
  live in Python: collectives.py).

**Verification**, before any byte is used: magic, format, sizes, the header's checksum,
the recorded key material against this compile's (another module's plan, another xlapy
source, CPU, LLVM, thread count...: refused), then each part's checksum; a plan that does
not decode is refused too. A bad entry is discarded with one warning line (logger
``xlapy.backends.cpu.plan_cache``), the module compiled again and the entry rewritten.
Entries are written atomically (``jit.write_atomically``), so concurrent processes compiling
one module each write the same whole entry.

A restored program (``backend.RestoredProgram``) runs exactly as the compiled one does; its
plans (``entry``, ``kernels``, ``module``, for inspection) are made again on first access.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import struct
import threading

import numpy as np

from xlapy.backends.cpu import executor
from xlapy.backends.cpu.jit import (
    discard_entry,
    pack_parts,
    read_entry,
    unpack_parts,
    write_atomically,
)
from xlapy.backends.cpu.native import NativeEntry, leaf_shapes
from xlapy.errors import InvalidArgumentError

_LOG = logging.getLogger(__name__)

#: The entries' format: bump whenever the header, the key material or the plan changes.
FORMAT = 1
MAGIC = b"XLAPYPRG"
_FIXED = struct.Struct("<8sIIQQQ32s32s32s")  # magic, format, lengths, the parts' SHA-256
SUFFIX = ".plan"

_SOURCE: list = []  # the source fingerprint, once computed
_SOURCE_LOCK = threading.Lock()


def source_fingerprint() -> str:
    """SHA-256 of every ``.py`` file of the xlapy package (relative path, size, bytes), in
    path order; computed once per process."""
    if _SOURCE:
        return _SOURCE[0]
    with _SOURCE_LOCK:
        if not _SOURCE:
            import xlapy

            root = os.path.dirname(os.path.abspath(xlapy.__file__))
            files = []
            for folder, dirs, names in os.walk(root):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                files += [os.path.join(folder, n) for n in names if n.endswith(".py")]
            h = hashlib.sha256(b"xlapy-source\0")
            for path in sorted(files):
                with open(path, "rb") as f:
                    data = f.read()
                h.update(f"{os.path.relpath(path, root)}\0{len(data)}\0".encode())
                h.update(data)
            _SOURCE.append(h.hexdigest())
    return _SOURCE[0]


def _host() -> dict:
    """What planning reads from the host besides the module and the JIT's identity."""
    import sys

    import scipy

    from xlapy.backends.cpu import gemm_kernel, threads

    return {"workers": threads.WORKERS, "user_blas_threads": threads.USER_BLAS_THREADS,
            "gemm": gemm_kernel.planning_inputs(),
            "numpy": np.__version__, "scipy": scipy.__version__,
            "python": f"{platform.python_implementation()} {sys.version.split()[0]}"}


def key_material(program_key: str) -> bytes:
    """The key material of the program whose in-memory key is ``program_key``."""
    material = dict(_host(), format=FORMAT, program=program_key, source=source_fingerprint())
    return json.dumps(material, sort_keys=True).encode()


def cache_dir() -> str | None:
    """Where program entries are stored: the disk cache's directory (``jit.cache_dir()``),
    None when the disk cache is off or ``XLAPY_PLAN_CACHE=0`` (object entries only)."""
    from xlapy.backends.cpu.jit import cache_dir as objects_dir

    if os.environ.get("XLAPY_PLAN_CACHE", "1") == "0":
        return None
    return objects_dir()


def entry_path(directory: str, material: bytes) -> str:
    return os.path.join(directory, f"cpu-{hashlib.sha256(material).hexdigest()}{SUFFIX}")


# -- what is stored ---------------------------------------------------------------------------


def unpersistable(program) -> str | None:
    """Why ``program`` (a freshly compiled backend.CpuProgram) cannot be stored, or None."""
    from xlapy.backends.cpu.control_flow import CompiledWhileStep
    from xlapy.backends.cpu.steps import KernelStep

    native = program.native
    if native is None:
        return "it runs on the Python plan executor"
    if program.run_table_size:
        return "it has collectives or device ids"
    for call in native.host_table.calls:
        if not isinstance(call, executor.Polling):
            return f"it calls {getattr(getattr(call, 'instr', None), 'name', 'Python')} " \
                   f"out to Python"
    for step in program.kernels:
        if step is not native and not isinstance(step, (KernelStep, CompiledWhileStep)):
            return f"it holds a {type(step).__name__}"
    return None


def _instr_ref(instr):
    return None if instr is None else [instr.name, instr.opcode, str(instr.shape)]


def encode(program, symbol: str) -> tuple[bytes, bytes]:
    """(plan JSON, constants) of a persistable ``program`` whose entry function is
    ``symbol`` in its object code."""
    native = program.native
    consts, blob, offset = [], [], 0
    for a in native.consts:
        a = np.ascontiguousarray(a)
        data = a.reshape(-1).view(np.uint8).tobytes()
        consts.append([a.dtype.str, list(a.shape), offset, len(data)])
        blob.append(data)
        offset += len(data)
    entry = program.entry.comp
    params = sorted(entry.parameters, key=lambda p: p.parameter_number)
    plan = {
        "symbol": symbol,
        "root": str(native.shape),
        "params": [str(p.shape) for p in params],
        "aliases": [[j, pnum, list(path), leaf]
                    for j, (pnum, path, leaf) in sorted(native.aliases.items())],
        "consts": consts,
        "ws_bytes": int(native.ws_bytes),
        "max_gemm": int(native.max_gemm),
        "needs_run": bool(native.needs_run),
        "polls": [call.what for call in native.host_table.calls],
        "result_instrs": [_instr_ref(i) for i in native.result_instrs],
        "ws_instr": _instr_ref(native.ws_instr),
    }
    return json.dumps(plan, sort_keys=True).encode(), b"".join(blob)


class _InstrRef:
    """Stands for an instruction of the optimised module in an out-of-memory error
    (``steps._named``: its name, opcode and shape, parsed when first read)."""

    __slots__ = ("_shape", "_text", "name", "opcode")

    def __init__(self, ref):
        self.name, self.opcode, self._text = str(ref[0]), str(ref[1]), str(ref[2])
        self._shape = None

    @property
    def shape(self):
        if self._shape is None:
            from xlapy.shape import parse_shape

            self._shape = parse_shape(self._text)
        return self._shape


def decode(plan_json: bytes, consts_blob: bytes) -> tuple[NativeEntry, str]:
    """(the native entry, its symbol) of a stored plan; the entry's ``fn`` is left for the
    caller to bind. Raises InvalidArgumentError when the plan does not describe an
    entry."""
    from xlapy.shape import parse_shape

    try:
        plan = json.loads(plan_json)
        root = parse_shape(plan["root"])
        params = [parse_shape(t) for t in plan["params"]]
        param_leaves = [leaf_shapes(p) for p in params]
        results = leaf_shapes(root)
        if results is None or any(p is None for p in param_leaves):
            raise ValueError("a shape the native entry cannot take")
        aliases = {int(j): (int(pnum), tuple(int(x) for x in path), int(leaf))
                   for j, pnum, path, leaf in plan["aliases"]}
        consts = []
        for dt, dims, offset, n in plan["consts"]:
            dtype = np.dtype(dt)
            dims = tuple(int(d) for d in dims)
            if offset < 0 or offset + n > len(consts_blob) or \
                    n != dtype.itemsize * int(np.prod(dims, dtype=np.int64)):
                raise ValueError("a constant outside the constants part")
            consts.append(np.frombuffer(consts_blob, dtype, n // dtype.itemsize, offset)
                          .reshape(dims).copy() if n else np.empty(dims, dtype))
        table = executor.HostTable()
        for what in plan["polls"]:
            table.add(executor.Polling(str(what)))
        name = str(plan["symbol"])
        entry = NativeEntry(root, name, param_leaves, results, aliases)
        entry.consts = consts
        entry.ws_bytes = int(plan["ws_bytes"])
        entry.host_table = table
        entry.max_gemm = int(plan["max_gemm"])
        entry.needs_run = bool(plan["needs_run"])
        refs = plan["result_instrs"]
        if len(refs) != len(results):
            raise ValueError("result instructions do not match the results")
        entry.result_instrs = [None if r is None else _InstrRef(r) for r in refs]
        entry.ws_instr = None if plan["ws_instr"] is None else _InstrRef(plan["ws_instr"])
        entry.finish([p.is_tuple() for p in params])
    except (ValueError, TypeError, KeyError, IndexError, AttributeError,
            InvalidArgumentError) as e:
        raise InvalidArgumentError(f"an unreadable plan ({type(e).__name__}: {e})") from None
    return entry, name


# -- entries ----------------------------------------------------------------------------------


def pack_entry(material: bytes, plan: bytes, obj: bytes, consts: bytes) -> bytes:
    """A disk entry (see the module docstring)."""
    return pack_parts(_FIXED, MAGIC, FORMAT, material, [plan, obj, consts])


def unpack_entry(data: bytes, material: bytes) -> tuple[tuple | None, str]:
    """((plan, object, constants), "") if entry ``data`` is whole and was built from
    ``material``, else (None, what is wrong)."""
    parts, problem = unpack_parts(data, _FIXED, MAGIC, FORMAT, material, "program",
                                  ("a corrupt plan", "corrupt object code",
                                   "corrupt constants"))
    if parts is None:
        return None, problem
    return (bytes(parts[0]), bytes(parts[1]), parts[2]), ""


def discard(path: str, problem: str) -> None:
    """One warning line for the bad entry at ``path``; the entry is removed."""
    discard_entry(path, problem, _LOG)


def load(path: str, material: bytes) -> tuple | None:
    """The verified parts (plan, object, constants) of the entry at ``path``, or None (no
    entry, or a bad one: ``discard``ed)."""
    return read_entry(path, lambda data: unpack_entry(data, material), _LOG)


def store(path: str, material: bytes, plan: bytes, obj: bytes, consts: bytes) -> None:
    write_atomically(path, pack_entry(material, plan, obj, consts))


__all__ = ["FORMAT", "cache_dir", "decode", "encode", "entry_path", "key_material", "load",
           "pack_entry", "source_fingerprint", "store", "unpack_entry", "unpersistable"]
