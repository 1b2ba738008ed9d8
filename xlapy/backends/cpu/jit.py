"""One LLVM JIT per process: initialise LLVM once, a target machine for the host CPU,
compile llvmlite.ir modules to native code and hand out function pointers.

    engine = get_jit()
    handle = engine.compile(ir_module)            # optimised, machine code emitted
    ptr = handle.function_address("fused_0")      # call through ctypes

Thread-safe: compilation holds a lock (LLVM's MCJIT is not re-entrant); calling compiled
functions needs no lock. Compiled modules stay alive as long as their handle.

Machine code is cached on disk: the object file of a module is stored under
``$XLAPY_CACHE_DIR`` (default ``~/.cache/xlapy``) in ``cpu-<key>.o``, the key being the
SHA-256 of the module's IR text, the host CPU name and features and the LLVM version, so a
later compile of the same IR loads the object instead of optimising and generating code.
``XLAPY_DISK_CACHE=0`` turns the disk cache off.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading

import llvmlite.binding as llvm

_LOCK = threading.Lock()
_JIT: "Jit | None" = None


class CompiledModule:
    """A module's machine code, owned by its own MCJIT engine."""

    def __init__(self, engine, llvm_module, text: str):
        self._engine = engine
        self._module = llvm_module
        self.ir_text = text

    def function_address(self, name: str) -> int:
        address = self._engine.get_function_address(name)
        if not address:
            raise KeyError(f"jit: no function {name!r} in the compiled module")
        return address

    def assembly(self) -> str:
        """The optimised LLVM IR (for inspection: is the loop vectorised?)."""
        return str(self._module)


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
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.target = llvm.Target.from_default_triple()
        self.triple = llvm.get_process_triple()
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        self.target_machine = self._new_target_machine()

    def _new_target_machine(self):
        return self.target.create_target_machine(
            cpu=self.cpu, features=self.features, opt=3, codemodel="jitdefault")

    def _optimise(self, mod) -> None:
        # LLVM's -O2 pipeline with the loop and SLP vectorisers, without loop unrolling: the
        # vectoriser interleaves vector iterations itself and the reduction kernels keep
        # several accumulators, so unrolling bought no measurable speed while it doubled the
        # compile time (MLP fwd+bwd: 590 -> 307 ms, kernels as fast within noise).
        pto = llvm.PipelineTuningOptions(speed_level=2)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = False
        pb = llvm.create_pass_builder(self.target_machine, pto)
        pm = pb.getModulePassManager()
        pm.run(mod, pb)

    def cache_key(self, text: str) -> str:
        h = hashlib.sha256()
        for part in (text, self.triple, self.cpu, self.features, str(llvm.llvm_version_info)):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def compile(self, ir_module, *, use_disk_cache: bool = True) -> CompiledModule:
        """Verify, optimise (the -O2 pipeline, vectorisers on) and emit ``ir_module``;
        the object code comes from the disk cache when the same IR was compiled before."""
        ir_module.triple = self.triple
        ir_module.data_layout = str(self.target_machine.target_data)
        text = str(ir_module)
        directory = cache_dir() if use_disk_cache else None
        path = None
        cached = None
        if directory is not None:
            path = os.path.join(directory, f"cpu-{self.cache_key(text)}.o")
            try:
                with open(path, "rb") as f:
                    cached = f.read()
            except OSError:
                cached = None
        with _LOCK:
            if cached is not None:  # an empty module, the cached object file added to it
                mod = llvm.parse_assembly(
                    f'target triple = "{self.triple}"\n'
                    f'target datalayout = "{self.target_machine.target_data}"\n')
                engine = llvm.create_mcjit_compiler(mod, self._new_target_machine())
                obj = llvm.ObjectFileRef.from_data(cached)
                engine.add_object_file(obj)
                produced: list[bytes] = []
            else:
                mod = llvm.parse_assembly(text)
                mod.verify()
                self._optimise(mod)
                engine = llvm.create_mcjit_compiler(mod, self._new_target_machine())
                produced = []
                obj = None
                if path is not None:
                    produced.append(self.target_machine.emit_object(mod))
            engine.finalize_object()
            engine.run_static_constructors()
        self.last_from_cache = cached is not None
        if path is not None and cached is None and produced:
            _store(path, produced[0])
        compiled = CompiledModule(engine, mod, text)
        compiled._object = obj  # the engine refers to the object file: keep it alive
        return compiled


def _store(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file renamed); a cache that cannot
    be written is skipped silently - it only costs time."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


def get_jit() -> Jit:
    """The process's Jit (created on first use)."""
    global _JIT
    with _LOCK:
        if _JIT is None:
            _JIT = Jit()
        return _JIT


__all__ = ["CompiledModule", "Jit", "cache_dir", "get_jit"]
