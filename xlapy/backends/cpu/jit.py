"""One LLVM JIT per process: initialise LLVM once, a target machine for the host CPU,
compile llvmlite.ir modules to native code and hand out function pointers.

    engine = get_jit()
    handle = engine.compile(ir_module)            # optimised, machine code loaded
    ptr = handle.function_address("fused_0")      # call through ctypes

Thread-safe: compilation holds a lock (LLVM's MCJIT is not re-entrant); calling compiled
functions needs no lock.

Every compile ends as an object file: the IR is parsed into its own LLVM context,
optimised, turned into object code by the process's target machine, and the IR, the pass
manager and the context are freed at once; the object is then loaded into an MCJIT engine
over an empty module (the engine owns its own target machine). A loaded program therefore
holds its machine code and little else (an engine that compiled the IR itself kept the
optimised module and code generator state: ~0.75 MB per program instead of ~50 KB).
``CompiledModule.close()``, or dropping its last reference, frees the engine, its target
machine and its code.

llvmlite (0.50 here) gives ``ModulePassManager`` no ``_dispose``, so the C++ pass pipeline
of every compile would leak (~95 KB each); ``_optimise`` frees it explicitly. What llvmlite
still leaks is its PassBuilder's PassInstrumentationCallbacks (allocated in
``LLVMPY_CreatePassBuilder``, never deleted): ~2 KB per compile, out of our reach (sharing
one PassBuilder would instead pile up dangling instrumentation callbacks).

Disk cache: the object file of a module is stored under ``$XLAPY_CACHE_DIR`` (default
``~/.cache/xlapy``) as ``cpu-<key>.o``; ``XLAPY_DISK_CACHE=0`` turns it off. The key is the
SHA-256 of the *key material* (``Jit.key_material``): the SHA-256 of the IR text, the LLVM
and llvmlite versions, the target triple, the host CPU name and features, the optimisation
and code generation settings (the LLVM options the JIT sets included), xlapy's version and
the entry format. An entry is a header then the object bytes:

    magic "XLAPYOBJ" | format u32 | material length u32 | object length u64 |
    SHA-256 of the object | key material (JSON) | SHA-256 of everything before

Entries are written atomically (a temporary file in the same directory, fsync'd, renamed,
the directory fsync'd), so a reader sees a whole entry or none, and processes compiling the
same module at once each write a complete, identical entry. Before any byte reaches LLVM an
entry is checked: magic, format, sizes, the header's checksum, the recorded key material
against this compile's (another module's object under this name, or one built by another
LLVM, CPU or xlapy, is refused), the object's checksum. A bad entry is discarded with one
warning line (logger ``xlapy.backends.cpu.jit``), the module is compiled again and the entry
rewritten.

Whole programs (their plans with this object code: ``cpu-<key>.plan``) are stored in the
same directory by ``plan_cache``, written the same way (``write_atomically``) and loaded
with ``Jit.load``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import tempfile
import threading

import llvmlite
import llvmlite.binding as llvm
from llvmlite.binding import ffi

_LOCK = threading.Lock()
_JIT: "Jit | None" = None
_LOG = logging.getLogger(__name__)

#: The disk entries' format: bump it whenever the header or the key material changes.
FORMAT = 2
MAGIC = b"XLAPYOBJ"
_FIXED = struct.Struct("<8sIIQ32s")  # magic, format, material length, object length, SHA

# Optimisation and code generation (part of every object's key material).
SPEED_LEVEL = 2
LOOP_VECTORIZATION = True
SLP_VECTORIZATION = True
LOOP_UNROLLING = False
LOOP_INTERLEAVING = True
CODEGEN_OPT = 3
CODE_MODEL = "jitdefault"
#: LLVM command-line options set once when the JIT starts (process-wide: they hold for every
#: llvmlite compile in the process). ``-disable-lsr``: no loop strength reduction in code
#: generation. LSR rewrote the induction variables and addresses of every loop, ~40% of
#: the code generation time (MLP fwd+bwd: emit 80 -> 49 ms, transformer_train 180 -> 118),
#: while the kernels ran as fast without it (matmul, mlp_train, softmax, reduce_sum,
#: elementwise, layernorm_train: within noise); it only changes addressing, never the
#: arithmetic, so results keep their bits. ``-post-RA-scheduler=false``: no second
#: instruction scheduling after register allocation (the scheduler before it stays): ~7-12%
#: of the remaining code generation time (MLP emit ~55 -> ~48 ms), the kernels as fast
#: within noise on the out-of-order host (same cases as above, one process, interleaved);
#: it only reorders instructions, so results keep their bits.
LLVM_OPTIONS = ("-disable-lsr", "-post-RA-scheduler=false")


class CompiledModule:
    """A module's machine code, loaded in its own MCJIT engine. ``nbytes``: the object
    code's size; ``from_cache``: whether it came from the disk cache."""

    def __init__(self, engine, object_bytes: int, from_cache: bool, assembly: str | None):
        self._engine = engine
        self.nbytes = object_bytes
        self.from_cache = from_cache
        self._assembly = assembly
        #: The object code itself, kept only when asked for (``compile(keep_object=True)``:
        #: the backend's disk cache of programs stores it, then drops this reference).
        self.object_code: bytes | None = None

    def function_address(self, name: str) -> int:
        address = self._engine.get_function_address(name)
        if not address:
            raise KeyError(f"jit: no function {name!r} in the compiled module")
        return address

    def assembly(self) -> str:
        """The optimised LLVM IR (for inspection: is the loop vectorised?). Kept only when
        asked for at compile time (``keep_assembly``; by default with
        ``use_disk_cache=False``); "" otherwise."""
        return self._assembly or ""

    def close(self) -> None:
        """Free the engine, its target machine and its code now. No function of this module
        may be called afterwards."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()


def cache_dir() -> str | None:
    """Where object files are cached, or None when the disk cache is off."""
    if os.environ.get("XLAPY_DISK_CACHE", "1") == "0":
        return None
    return os.environ.get("XLAPY_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "xlapy")


class Jit:
    """The per-process LLVM state: the host's target (CPU name and features; code
    generation at -O3)."""

    def __init__(self):
        import xlapy

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        for option in LLVM_OPTIONS:
            llvm.set_option("xlapy", option)
        self.target = llvm.Target.from_default_triple()
        self.triple = llvm.get_process_triple()
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        self.target_machine = self._new_target_machine()
        self.last_from_cache = False  # whether the latest compile loaded a cached object
        #: What every object depends on besides its IR (the key material's constant part).
        self.identity = {
            "format": FORMAT,
            "xlapy": xlapy.__version__,
            "llvm": ".".join(str(v) for v in llvm.llvm_version_info),
            "llvmlite": llvmlite.__version__,
            "triple": self.triple,
            "cpu": self.cpu,
            "features": self.features,
            "optimisation": f"O{SPEED_LEVEL} loop-vectorize={LOOP_VECTORIZATION} "
                            f"slp-vectorize={SLP_VECTORIZATION} unroll={LOOP_UNROLLING} "
                            f"interleave={LOOP_INTERLEAVING}",
            "codegen": f"O{CODEGEN_OPT} code-model={CODE_MODEL}",
            "llvm-options": " ".join(LLVM_OPTIONS),
        }
        self._empty_ir = (f'target triple = "{self.triple}"\n'
                          f'target datalayout = "{self.target_machine.target_data}"\n')

    def _new_target_machine(self):
        return self.target.create_target_machine(
            cpu=self.cpu, features=self.features, opt=CODEGEN_OPT, codemodel=CODE_MODEL)

    def _optimise(self, mod) -> None:
        # LLVM's -O2 pipeline with the loop and SLP vectorisers, without loop unrolling: the
        # vectoriser interleaves vector iterations itself and the reduction kernels keep
        # several accumulators, so unrolling bought no measurable speed while it doubled the
        # compile time (MLP fwd+bwd: 590 -> 307 ms, kernels as fast within noise). Loops
        # that gain nothing from interleaving say so in their metadata (the flat elementwise
        # loops: loop_emitter); a reduction's interleaved accumulators are its summation
        # order, so the pipeline's own choice stays.
        pto = llvm.PipelineTuningOptions(speed_level=SPEED_LEVEL)
        pto.loop_vectorization = LOOP_VECTORIZATION
        pto.slp_vectorization = SLP_VECTORIZATION
        pto.loop_unrolling = LOOP_UNROLLING
        pto.loop_interleaving = LOOP_INTERLEAVING
        pb = llvm.create_pass_builder(self.target_machine, pto)
        pm = pb.getModulePassManager()
        try:
            pm.run(mod, pb)
        finally:
            _dispose_pass_manager(pm)
            pb.close()
            pto.close()

    def key_material(self, text: str) -> bytes:
        """What the object code of IR ``text`` is built from (see the module docstring)."""
        material = dict(self.identity, ir_sha256=hashlib.sha256(text.encode()).hexdigest())
        return json.dumps(material, sort_keys=True).encode()

    def cache_key(self, text: str) -> str:
        return hashlib.sha256(self.key_material(text)).hexdigest()

    def compile(self, ir_module, *, use_disk_cache: bool = True,
                keep_assembly: bool | None = None, keep_object: bool = False) -> CompiledModule:
        """Verify, optimise (the -O2 pipeline, vectorisers on), emit and load ``ir_module``;
        the object code comes from the disk cache when the same IR was compiled before.
        ``keep_assembly`` (default: ``not use_disk_cache``) keeps the optimised IR for
        ``assembly()`` and then always compiles; ``keep_object`` keeps the object code as
        ``object_code``."""
        ir_module.triple = self.triple
        ir_module.data_layout = str(self.target_machine.target_data)
        text = str(ir_module)
        keep = (not use_disk_cache) if keep_assembly is None else keep_assembly
        directory = cache_dir() if use_disk_cache else None
        material = self.key_material(text)
        path = None
        obj = None
        if directory is not None:
            path = os.path.join(directory, f"cpu-{hashlib.sha256(material).hexdigest()}.o")
            if not keep:
                obj = _load(path, material)
        from_cache = obj is not None
        assembly = None
        with _LOCK:
            if obj is None:
                obj, assembly = self._emit(text, keep)
            engine = self._engine_for(obj)
        self.last_from_cache = from_cache
        if path is not None and not from_cache:
            _store(path, material, obj)
        compiled = CompiledModule(engine, len(obj), from_cache, assembly)
        if keep_object:
            compiled.object_code = obj
        return compiled

    def load(self, obj: bytes) -> CompiledModule:
        """Object code ``obj``, verified by the caller (the backend's disk cache of whole
        programs, plan_cache), loaded in an engine of its own."""
        with _LOCK:
            engine = self._engine_for(obj)
        self.last_from_cache = True
        return CompiledModule(engine, len(obj), True, None)

    def _emit(self, text: str, keep: bool) -> tuple[bytes, str | None]:
        """Object code of IR ``text`` (and the optimised IR when ``keep``). The IR lives in
        a context of its own, freed here with it."""
        context = llvm.create_context()
        try:
            mod = llvm.parse_assembly(text, context=context)
            try:
                mod.verify()
                self._optimise(mod)
                assembly = str(mod) if keep else None
                return self.target_machine.emit_object(mod), assembly
            finally:
                mod.close()
        finally:
            context.close()

    def _engine_for(self, obj: bytes):
        """An MCJIT engine (with its own target machine) holding object code ``obj``."""
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(self._empty_ir),
                                            self._new_target_machine())
        try:
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))  # the engine takes it
            engine.finalize_object()
            engine.run_static_constructors()
        except BaseException:
            engine.close()
            raise
        return engine


def _dispose_pass_manager(pm) -> None:
    """Free a ModulePassManager: llvmlite's class has no ``_dispose`` (its C++ object, the
    whole optimisation pipeline, would leak); use llvmlite's own when it has one."""
    if type(pm)._dispose is not ffi.ObjectRef._dispose:
        pm.close()
        return
    dispose = getattr(ffi.lib, "LLVMPY_DisposeNewModulePassManger", None)
    if dispose is not None and not pm.closed:
        dispose(pm)
        pm.detach()


# -- the disk cache -----------------------------------------------------------------------------


def pack_parts(fixed: struct.Struct, magic: bytes, version: int, material: bytes,
               parts: list) -> bytes:
    """A disk cache entry of ``parts`` (object entries here, program entries in plan_cache):
    ``fixed`` packs magic, format, the material's length, each part's length and each
    part's SHA-256; then the key material, the SHA-256 of all that, the parts."""
    sha = hashlib.sha256
    head = fixed.pack(magic, version, len(material), *(len(p) for p in parts),
                      *(sha(p).digest() for p in parts)) + material
    return head + sha(head).digest() + b"".join(parts)


def unpack_parts(data: bytes, fixed: struct.Struct, magic: bytes, version: int,
                 material: bytes, kind: str, corrupt: tuple) -> tuple[list | None, str]:
    """The parts (memoryviews) of entry ``data`` (``pack_parts``) if it is whole and was
    built from ``material``, else (None, what is wrong). ``kind`` names the entry in a bad
    magic's message, ``corrupt`` each part in a bad checksum's."""
    view = memoryview(data)
    if len(data) < fixed.size:
        return None, f"is truncated ({len(data)} bytes, shorter than a header)"
    fields = fixed.unpack_from(view)
    n = len(corrupt)
    lengths, shas = fields[3:3 + n], fields[3 + n:]
    if fields[0] != magic:
        return None, f"is not an xlapy {kind} entry (bad magic)"
    if fields[1] != version:
        return None, f"has format version {fields[1]}, expected {version}"
    head_end = fixed.size + fields[2]
    size = head_end + 32 + sum(lengths)
    if len(data) != size:
        return None, (f"has {len(data)} bytes where its header says {size} "
                      f"(truncated or extended)")
    if hashlib.sha256(view[:head_end]).digest() != view[head_end:head_end + 32]:
        return None, "has a corrupt header (checksum mismatch)"
    recorded = bytes(view[fixed.size:head_end])
    if recorded != material:
        return None, f"was built from something else ({_difference(recorded, material)})"
    start = head_end + 32
    parts = []
    for length, sha, what in zip(lengths, shas, corrupt):
        part = view[start:start + length]
        if hashlib.sha256(part).digest() != sha:
            return None, f"has {what} (checksum mismatch)"
        parts.append(part)
        start += length
    return parts, ""


def read_entry(path: str, unpack, log: logging.Logger):
    """What ``unpack(data)`` (``(value, "")`` or ``(None, what is wrong)``) makes of the
    entry at ``path``, or None: no entry, or a bad one (``discard_entry``)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    value, problem = unpack(data)
    if value is None:
        discard_entry(path, problem, log)
    return value


def discard_entry(path: str, problem: str, log: logging.Logger) -> None:
    """One warning line on ``log`` for the bad entry at ``path``; the entry is removed (the
    caller compiles and rewrites it)."""
    log.warning("xlapy: disk cache entry %s %s; discarded, compiling again", path, problem)
    try:
        os.remove(path)
    except OSError:
        pass


def pack_entry(material: bytes, obj: bytes) -> bytes:
    """A disk entry: the header (see the module docstring), then the object bytes."""
    return pack_parts(_FIXED, MAGIC, FORMAT, material, [obj])


def unpack_entry(data: bytes, material: bytes) -> tuple[bytes | None, str]:
    """The object bytes of entry ``data`` if it is whole and was built from ``material``,
    else (None, what is wrong)."""
    parts, problem = unpack_parts(data, _FIXED, MAGIC, FORMAT, material, "object",
                                  ("corrupt object code",))
    return (None, problem) if parts is None else (bytes(parts[0]), "")


def _difference(recorded: bytes, expected: bytes) -> str:
    try:
        got = json.loads(recorded)
        want = json.loads(expected)
        keys = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
    except (ValueError, TypeError, AttributeError):
        return "unreadable key material"
    return "differs in " + ", ".join(keys) if keys else "differs"


def _load(path: str, material: bytes) -> bytes | None:
    """The verified object bytes cached at ``path``, or None (no entry, or a bad one: then
    one warning line and the entry is removed; the caller compiles and rewrites it)."""
    return read_entry(path, lambda data: unpack_entry(data, material), _LOG)


def _store(path: str, material: bytes, obj: bytes) -> None:
    """Write the entry for ``obj`` atomically and durably (temporary file, fsync, rename,
    directory fsync); a cache that cannot be written is skipped silently - it only costs
    time."""
    write_atomically(path, pack_entry(material, obj))


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (a temporary ``.cpu-*.tmp`` in the
    same directory, fsync, rename, directory fsync): readers see the whole file or none.
    A directory that cannot be written is skipped silently (a cache only costs time)."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".cpu-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def get_jit() -> Jit:
    """The process's Jit (created on first use)."""
    global _JIT
    with _LOCK:
        if _JIT is None:
            _JIT = Jit()
        return _JIT


__all__ = ["FORMAT", "CompiledModule", "Jit", "cache_dir", "discard_entry", "get_jit",
           "pack_entry", "pack_parts", "read_entry", "unpack_entry", "unpack_parts",
           "write_atomically"]
