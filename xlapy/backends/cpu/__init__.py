"""The compiled CPU backend (issue 7, first step): elementwise fusions compiled to native
code with LLVM (llvmlite), every other instruction through the interpreter's kernels.

Modules: jit (one LLVM target machine per process; compile IR modules, get function
pointers), elemental (per-opcode element generators, as XLA's elemental IR emitter),
backend (CpuBackend: fusion of elementwise chains, the DeviceProgram, the compile cache).
"""
