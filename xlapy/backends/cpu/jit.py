"""One LLVM JIT per process: initialise LLVM once, a target machine for the host CPU at -O3,
compile llvmlite.ir modules to native code and hand out function pointers.

    engine = get_jit()
    handle = engine.compile(ir_module)            # optimised, machine code emitted
    ptr = handle.function_address("fused_0")      # call through ctypes

Thread-safe: compilation holds a lock (LLVM's MCJIT is not re-entrant); calling compiled
functions needs no lock. Compiled modules stay alive as long as their handle.
"""

from __future__ import annotations

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


class Jit:
    """The per-process LLVM state: host target machine (-O3, host CPU name and features)."""

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
        pto = llvm.PipelineTuningOptions(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(self.target_machine, pto)
        pm = pb.getModulePassManager()
        pm.run(mod, pb)

    def compile(self, ir_module) -> CompiledModule:
        """Verify, optimise (-O3 for the host) and emit ``ir_module`` (llvmlite.ir.Module)."""
        ir_module.triple = self.triple
        ir_module.data_layout = str(self.target_machine.target_data)
        text = str(ir_module)
        with _LOCK:
            mod = llvm.parse_assembly(text)
            mod.verify()
            self._optimise(mod)
            # the engine owns (and frees) its target machine: give each engine its own
            engine = llvm.create_mcjit_compiler(mod, self._new_target_machine())
            engine.finalize_object()
            engine.run_static_constructors()
        return CompiledModule(engine, mod, text)


def get_jit() -> Jit:
    """The process's Jit (created on first use)."""
    global _JIT
    with _LOCK:
        if _JIT is None:
            _JIT = Jit()
        return _JIT


__all__ = ["CompiledModule", "Jit", "get_jit"]
