"""The calling convention of compiled kernels, shared by every emitter of the CPU backend.

A kernel is an LLVM function ``void NAME(i8** bufs, i64 lo, i64 hi)``:

- ``bufs`` holds the input buffers (in the order the emitter was given its inputs), then the
  output buffers, then the scratch buffers the kernel asked for. Every buffer is a
  C-contiguous row-major array of its element type (``elemental.memory_type``: pred is one
  byte).
- ``[lo, hi)`` is a range of *work items* of ``[0, spec.domain)``. The runtime calls the
  kernel once with ``[0, domain)`` or splits the domain into disjoint ranges run on several
  threads at once; results must not depend on the split (each work item writes its own
  outputs). What a work item is belongs to the emitter: an element, an outer row, a row of
  a reduction's output, a chunk of a long reduction.
- ``spec.then`` (optional) is a second kernel run after the first over its own domain with
  the same ``bufs`` (e.g. combining the partial results a chunked reduction left in scratch).
- ``spec.in_place`` (optional) lists ``(output, input)`` pairs: output buffer ``output``
  holds the contents of input buffer ``input`` when the kernel starts, and the kernel writes
  only the elements it changes (dynamic-update-slice, scatter, select-and-scatter's
  accumulation). The runtime either passes the input's own buffer as the output (when the
  input's value is dead after the step and the caller does not hold it) or copies the input
  into the output first; the kernel cannot tell which, so it must not read that input
  through the input's pointer after writing the output.

An emitter adds the function to an ``llvmlite.ir.Module`` and returns a ``KernelSpec``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from llvmlite import ir

I8 = ir.IntType(8)
I64 = ir.IntType(64)
BUFS = I8.as_pointer().as_pointer()
KERNEL_TYPE = ir.FunctionType(ir.VoidType(), [BUFS, I64, I64])
#: A compiled kernel as Python calls it: ``KERNEL_CFUNC(address)(bufs, lo, hi)``
KERNEL_CFUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


@dataclass
class KernelSpec:
    """A compiled kernel's description (see the module docstring)."""

    name: str
    n_inputs: int
    outputs: list  # Shapes (arrays) of the output buffers, in order
    domain: int
    cost: int = 1  # elements touched per work item: the runtime parallelises when
    #               domain * cost is large
    scratch: list = field(default_factory=list)  # (numpy dtype, element count) per buffer
    then: "KernelSpec | None" = None
    parallel: bool = True  # False: always one call over the whole domain
    in_place: tuple = ()  # (output index, input index): the output starts as the input


def declare_kernel(module: ir.Module, name: str) -> tuple[ir.Function, ir.IRBuilder]:
    """Add ``void name(i8** bufs, i64 lo, i64 hi)`` to ``module``; returns it and a builder
    at its entry block. Arguments are named ``bufs``, ``lo``, ``hi``."""
    fn = ir.Function(module, KERNEL_TYPE, name=name)
    fn.args[0].name, fn.args[1].name, fn.args[2].name = "bufs", "lo", "hi"
    fn.args[0].add_attribute("noalias")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def buffer_pointer(builder: ir.IRBuilder, bufs, k: int, elem_type: ir.Type, name: str):
    """The k-th buffer of ``bufs`` as a pointer to ``elem_type``."""
    slot = builder.gep(bufs, [ir.Constant(I64, k)], inbounds=True, name=f"{name}.slot")
    raw = builder.load(slot, name=f"{name}.raw")
    return builder.bitcast(raw, elem_type.as_pointer(), name=name)


class for_range:
    """``with for_range(builder, start, stop, "i") as i:`` emits a counted loop
    start <= i < stop over i64 values; the builder is left after the loop on exit."""

    def __init__(self, builder: ir.IRBuilder, start, stop, name: str):
        self.b, self.name = builder, name
        self.start = start if isinstance(start, ir.Value) else ir.Constant(I64, int(start))
        self.stop = stop if isinstance(stop, ir.Value) else ir.Constant(I64, int(stop))

    def __enter__(self):
        b = self.b
        pre = b.block
        fn = b.function
        self.header = fn.append_basic_block(f"{self.name}.header")
        self.body = fn.append_basic_block(f"{self.name}.body")
        self.exit = fn.append_basic_block(f"{self.name}.exit")
        b.branch(self.header)
        b.position_at_end(self.header)
        self.i = b.phi(I64, name=self.name)
        self.i.add_incoming(self.start, pre)
        go = b.icmp_signed("<", self.i, self.stop, name=f"{self.name}.cond")
        b.cbranch(go, self.body, self.exit)
        b.position_at_end(self.body)
        return self.i

    def __exit__(self, *exc):
        if exc[0] is not None:
            return False
        b = self.b
        nxt = b.add(self.i, ir.Constant(I64, 1), name=f"{self.name}.next", flags=["nsw"])
        self.i.add_incoming(nxt, b.block)
        self.latch = b.branch(self.header)  # the back edge (it carries the loop's metadata)
        b.position_at_end(self.exit)
        return False

    def blocks(self) -> list:
        """The loop's blocks (after ``__exit__``): its header, its body and every block
        emitted inside the body."""
        blocks = self.b.function.blocks
        first = blocks.index(self.header)
        return [blk for blk in blocks[first:] if blk is not self.exit]


def smin(builder: ir.IRBuilder, x, y, name: str = ""):
    """The smaller of two signed integers (``select``, no branch)."""
    return builder.select(builder.icmp_signed("<", x, y), x, y, name=name)


def smax(builder: ir.IRBuilder, x, y, name: str = ""):
    """The larger of two signed integers (``select``, no branch)."""
    return builder.select(builder.icmp_signed(">", x, y), x, y, name=name)


class _DistinctNode(ir.values.MDValue):
    """A ``distinct`` metadata node (llvmlite's ``add_metadata`` makes uniqued ones): an
    access group, or a loop ID (its first operand itself)."""

    def descr(self, buf):
        buf.append("distinct ")
        super().descr(buf)

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other


def mark_parallel(module: ir.Module, loop: for_range, buffers, hints=()) -> None:
    """Tell LLVM that the iterations of ``loop`` (emitted, its ``with`` closed) are
    independent: every load and store in it addressing one of ``buffers`` (pointer values,
    e.g. ``buffer_pointer``'s) joins one access group, which the loop's
    ``llvm.loop.parallel_accesses`` names. The loop vectoriser then needs no run-time
    overlap checks (nor the scalar copy of the loop they guard). Only for a loop whose
    iterations are work items of this ABI (independent by the contract above) or touch
    disjoint elements of buffers no other buffer of the kernel overlaps. A memory access
    left out of the group (a call, a stack slot) makes LLVM ignore the annotation, so the
    loop is then vectorised as before. ``hints``: more (name, i32 value) loop hints for
    the loop's ID (e.g. ``("llvm.loop.interleave.count", 1)``)."""
    roots = {id(v) for v in buffers}

    def on_buffer(ptr) -> bool:
        while isinstance(ptr, (ir.GEPInstr, ir.CastInstr)):
            if id(ptr) in roots:
                return True
            ptr = ptr.operands[0]
        return id(ptr) in roots

    group = _DistinctNode(module, [], name=str(len(module.metadata)))
    marked = False
    for blk in loop.blocks():
        for instr in blk.instructions:
            if isinstance(instr, ir.LoadInstr) and on_buffer(instr.operands[0]) or \
                    isinstance(instr, ir.StoreInstr) and on_buffer(instr.operands[1]):
                instr.set_metadata("llvm.access.group", group)
                marked = True
    if not marked:
        return
    accesses = module.add_metadata([ir.MetaDataString(module, "llvm.loop.parallel_accesses"),
                                    group])
    extra = [module.add_metadata([ir.MetaDataString(module, name),
                                  ir.Constant(ir.IntType(32), value)]) for name, value in hints]
    loop_id = _DistinctNode(module, [], name=str(len(module.metadata)))
    loop_id.operands = (loop_id, accesses, *extra)
    loop.latch.set_metadata("llvm.loop", loop_id)


__all__ = ["BUFS", "KERNEL_CFUNC", "KERNEL_TYPE", "KernelSpec", "buffer_pointer", "declare_kernel",
           "for_range", "mark_parallel", "smax", "smin"]
