"""The CPU backend's worker pool in native code: parallel kernels and GEMMs without Python.

One small LLVM module, compiled once per process, holds the pool (its state is a global of
that module) and three functions native code and Python call:

- ``xlapy_parallel_for(fn, bufs, domain, per_thread)``: run the kernel ``fn(bufs, lo, hi)``
  (``kernel_abi``) over ``[0, domain)`` cut into ``pieces = min(domain, threads *
  per_thread)`` equal ranges (``threads``: the pool's thread count, the caller included).
  The caller publishes a *job* (the kernel, its bufs, the domain, the piece count, a
  counter handing the pieces out in turn, a count of pieces done, the caller's MXCSR) on the
  pool's *board* (one slot), wakes the workers, takes pieces itself, and returns when every
  piece is done. A thread the machine slows down (another process on its core) takes fewer
  pieces: a busy machine slows a call in proportion to the cores it lost, never by a share
  stuck on a descheduled thread. When the board is taken (another thread's job, or a job
  started from inside a piece: nested use) the caller runs the whole domain itself: the pool
  never waits on itself, and the pool's threads never outnumber the cores.
- ``xlapy_gemm(desc)``: a batch of GEMMs of one shape (``G_*`` words: the BLAS routine's
  address - SciPy's single-threaded OpenBLAS - its arguments in BLAS's column-major terms,
  batch strides, and how each matrix is cut: ``G_PANELS`` panels along BLAS's M or N) as
  work items ``batch x panels`` handed out over the pool by ``xlapy_parallel_for``
  (``G_PER_THREAD``: items per thread; 0: all on the calling thread).
- ``xlapy_pool_worker(index)``: a worker's loop, run by the pool's threads (Python threads
  started by ``start``, parked in native code for good: the GIL is released). A worker
  waits for a job whose generation it has not seen: pause instructions for ``SPIN_NS``
  nanoseconds, then ``sched_yield`` until ``YIELD_NS`` (a worker waiting for the next kernel
  of a loop gets it at once, one waiting beside a busy thread gives its core away), then a
  futex sleep on the generation word, which publishing a job bumps (waking the sleepers).

Each job runs on the workers with the MXCSR of the thread that published it (saved and
restored around the job): kernels called from native code do not write MXCSR, so a program
that flushes denormals (denormals.py) flushes on every thread of the pool too.

The board is one job area in the pool's state. A piece is claimed by a compare-and-swap of
the job's control word (sequence number and next piece): it succeeds only while the job read
is still the one on the board with that piece unclaimed. A publisher closes the control
word (the new sequence number, no piece left) before it writes the job's fields (release
stores, read with acquire loads), so a worker that was descheduled while reading a job that
has ended since cannot run a piece twice or a piece of the next job with the previous one's
fields. A publisher waiting for pieces others are running spins
on pause instructions for ``WAIT_SPIN_NS``, then sleeps on the done count (a futex the
thread finishing the last piece wakes), then frees the board.

Python jobs (``threads.parallel``: library routines whose work items are Python code) are
jobs too: their kernel is a ctypes callback (``PY_PIECE``) that runs the Python body on the
pool's thread, so kernels, BLAS calls and Python work share the same threads.

Imports llvmlite, ctypes and the backend's kernel ABI only.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading

from llvmlite import ir

from xlapy.backends.cpu.kernel_abi import BUFS, KERNEL_TYPE

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I8P = I8.as_pointer()
I32P = I32.as_pointer()
I64P = I64.as_pointer()
VOID = ir.VoidType()

# -- the pool's state: int64 words, one cache line per group ----------------------------------
#: The board: taken by the thread whose job is on it (0: free).
S_OWNER = 0
#: The job's control word: its sequence number (high 32 bits), the next piece (low 32 bits).
S_CTRL = 8
#: The job: its kernel and bufs, domain, piece count, the publisher's MXCSR, whether the
#: publisher sleeps on the done count.
S_FN, S_BUFS, S_DOMAIN, S_PIECES, S_MXCSR, S_WAITING = 16, 17, 18, 19, 20, 21
#: Pieces done (a 32-bit futex word).
S_DONE = 24
#: The generation (a 32-bit futex word: bumped by every job published), the sleeping workers.
S_GEN, S_SLEEPERS = 32, 33
#: Settings: threads (the caller included), pause and yield spin times of an idle worker,
#: pause spin of a waiting caller (nanoseconds), libc's syscall and clock_gettime.
S_THREADS, S_SPIN_NS, S_YIELD_NS, S_WAIT_SPIN_NS, S_SYSCALL, S_CLOCK = 40, 41, 42, 43, 44, 45
#: Counters: jobs published on the board, parallel calls run inline (board taken).
S_PUBLISHED, S_INLINE = 48, 49
STATE_WORDS = 56
#: The most pieces a job is cut into (the control word counts them in 32 bits).
MAX_PIECES = 1 << 30

# -- a GEMM descriptor (xlapy_gemm), in BLAS's column-major terms --------------------------------
#: xGEMM's address; the transpose flags ('N'/'T') of BLAS's A and B; M, N, K; lda, ldb, ldc;
#: alpha and beta (16 bytes each: the element's bytes, a complex one's real part first); the
#: batch; A, B, C and their batch strides (bytes); panels per matrix and the axis they cut
#: (0: N, 1: M); the bytes A (axis 1), B (axis 0) and C move per row/column of the cut axis;
#: work items per thread (0: all on the calling thread).
(G_FN, G_TA, G_TB, G_M, G_N, G_K, G_LDA, G_LDB, G_LDC, G_ALPHA, _, G_BETA, _, G_BATCH, G_A,
 G_B, G_C, G_SA, G_SB, G_SC, G_PANELS, G_AXIS, G_STEP_A, G_STEP_B, G_STEP_C,
 G_PER_THREAD) = range(26)
GEMM_WORDS = 26

#: Default waits (nanoseconds): an idle worker spins on pause instructions, then yields,
#: then sleeps; a caller waiting for the last pieces spins, then sleeps.
SPIN_NS = 20_000
YIELD_NS = 200_000
WAIT_SPIN_NS = 50_000
#: Linux x86-64 system calls: futex (private wait/wake), sched_yield.
SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE, SYS_SCHED_YIELD = 202, 128, 129, 24
#: The longest futex sleep (a sleeper then looks again: no wake can be lost for longer).
SLEEP_SLICE_NS = 100_000_000
WAIT_SLICE_NS = 1_000_000

_X86 = platform.machine().lower() in ("x86_64", "amd64")
_SYSCALL_TYPE = ir.FunctionType(I64, [I64], var_arg=True)
_CLOCK_TYPE = ir.FunctionType(I32, [I32, I8P])
_GEMM_TYPE = ir.FunctionType(VOID, [I8P, I8P, I32P, I32P, I32P, I8P, I8P, I32P, I8P, I32P, I8P,
                                    I8P, I32P])
PARALLEL_TYPE = ir.FunctionType(VOID, [I8P, BUFS, I64, I64])
GEMM_DRIVER_TYPE = ir.FunctionType(VOID, [I64P])


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


class _Module:
    """Builds the pool's LLVM module (see the module docstring)."""

    def __init__(self):
        self.mod = ir.Module("xlapy_workers")
        self.mod.triple = ""
        ty = ir.ArrayType(I64, STATE_WORDS)
        self.state = ir.GlobalVariable(self.mod, ty, "xlapy_pool_state")
        self.state.initializer = ir.Constant(ty, None)
        self.state.align = 64
        self.pause = self._intrinsic("llvm.x86.sse2.pause", ir.FunctionType(VOID, [])) \
            if _X86 else None
        mx = ir.FunctionType(VOID, [I8P])
        self.stmxcsr = self._intrinsic("llvm.x86.sse.stmxcsr", mx) if _X86 else None
        self.ldmxcsr = self._intrinsic("llvm.x86.sse.ldmxcsr", mx) if _X86 else None
        self.run_pieces = self._run_pieces()
        self.parallel_for = self._parallel_for()
        self.worker = self._worker()
        self.gemm_items = self._gemm_items()
        self.gemm = self._gemm()

    def _intrinsic(self, name, fnty):
        return ir.Function(self.mod, fnty, name)

    # -- helpers -----------------------------------------------------------------------------

    def word(self, b, k: int):
        return b.gep(self.state, [ir.Constant(I32, 0), ir.Constant(I32, k)])

    def syscall(self, b, *args):
        fn = b.inttoptr(b.load(self.word(b, S_SYSCALL)), _SYSCALL_TYPE.as_pointer())
        return b.call(fn, [_c(a) if isinstance(a, int) else a for a in args])

    def now(self, b, ts):
        """CLOCK_MONOTONIC in nanoseconds (``ts``: an alloca of two i64)."""
        fn = b.inttoptr(b.load(self.word(b, S_CLOCK)), _CLOCK_TYPE.as_pointer())
        b.call(fn, [ir.Constant(I32, 1), b.bitcast(ts, I8P)])
        sec = b.load(b.gep(ts, [_c(0)]))
        nsec = b.load(b.gep(ts, [_c(1)]))
        return b.add(b.mul(sec, _c(1_000_000_000)), nsec)

    def relax(self, b):
        if self.pause is not None:
            b.call(self.pause, [])

    def futex_wait(self, b, word32, expected32, ns: int, ts):
        b.store(_c(ns // 1_000_000_000), b.gep(ts, [_c(0)]))
        b.store(_c(ns % 1_000_000_000), b.gep(ts, [_c(1)]))
        self.syscall(b, SYS_FUTEX, b.ptrtoint(word32, I64), FUTEX_WAIT_PRIVATE,
                     b.zext(expected32, I64), b.ptrtoint(ts, I64), 0, 0)

    def futex_wake(self, b, word32):
        self.syscall(b, SYS_FUTEX, b.ptrtoint(word32, I64), FUTEX_WAKE_PRIVATE, 2 ** 31 - 1)

    # -- running the job's pieces -------------------------------------------------------------

    def _run_pieces(self):
        """``void run_pieces(i1 worker)``: claim the job's pieces one at a time (a CAS of the
        control word: it succeeds only while the job that was read is still the one on the
        board with that piece unclaimed, so the fields read with it are that job's) and run
        them; a worker runs them with the publisher's MXCSR. The thread finishing the last
        piece wakes a sleeping publisher."""
        fn = ir.Function(self.mod, ir.FunctionType(VOID, [I1]), "xlapy_pool_run_pieces")
        fn.linkage = "internal"
        worker = fn.args[0]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        saved = b.alloca(I32, name="mxcsr.saved")
        mxcsr = b.alloca(I32, name="mxcsr.job")
        if self.stmxcsr is not None:
            b.call(self.stmxcsr, [b.bitcast(saved, I8P)])
        head = fn.append_basic_block("head")
        claim = fn.append_basic_block("claim")
        run = fn.append_basic_block("run")
        out = fn.append_basic_block("out")
        b.branch(head)
        b.position_at_end(head)
        ctrl = b.load_atomic(self.word(b, S_CTRL), "seq_cst", 8, name="ctrl")
        kernel = b.inttoptr(b.load_atomic(self.word(b, S_FN), "acquire", 8),
                            KERNEL_TYPE.as_pointer())
        bufs = b.inttoptr(b.load_atomic(self.word(b, S_BUFS), "acquire", 8), BUFS)
        domain = b.load_atomic(self.word(b, S_DOMAIN), "acquire", 8)
        pieces = b.load_atomic(self.word(b, S_PIECES), "acquire", 8)
        job_mxcsr = b.load_atomic(self.word(b, S_MXCSR), "acquire", 8)
        i = b.and_(ctrl, _c(0xFFFFFFFF), name="piece")
        b.cbranch(b.icmp_signed("<", i, pieces), claim, out)
        b.position_at_end(claim)
        got = b.cmpxchg(self.word(b, S_CTRL), ctrl, b.add(ctrl, _c(1)), "seq_cst", "seq_cst")
        b.cbranch(b.extract_value(got, 1), run, head)
        b.position_at_end(run)
        if self.ldmxcsr is not None:
            with b.if_then(worker):
                b.store(b.trunc(job_mxcsr, I32), mxcsr)
                b.call(self.ldmxcsr, [b.bitcast(mxcsr, I8P)])
        lo = b.sdiv(b.mul(domain, i), pieces)
        hi = b.sdiv(b.mul(domain, b.add(i, _c(1))), pieces)
        b.call(kernel, [bufs, lo, hi])
        done = b.bitcast(self.word(b, S_DONE), I32P)
        d = b.add(b.atomic_rmw("add", done, ir.Constant(I32, 1), "seq_cst"), ir.Constant(I32, 1))
        with b.if_then(b.icmp_signed("==", b.sext(d, I64), pieces)):
            waiting = b.load_atomic(self.word(b, S_WAITING), "seq_cst", 8)
            with b.if_then(b.icmp_signed("!=", waiting, _c(0))):
                self.futex_wake(b, done)
        b.branch(head)
        b.position_at_end(out)
        if self.ldmxcsr is not None:
            with b.if_then(worker):
                b.call(self.ldmxcsr, [b.bitcast(saved, I8P)])
        b.ret_void()
        return fn

    # -- the publisher ----------------------------------------------------------------------------

    def _parallel_for(self):
        fn = ir.Function(self.mod, PARALLEL_TYPE, "xlapy_parallel_for")
        kernel_raw, bufs, domain, per_thread = fn.args
        entry = fn.append_basic_block("entry")
        inline = fn.append_basic_block("inline")
        publish = fn.append_basic_block("publish")
        b = ir.IRBuilder(entry)
        kernel = b.bitcast(kernel_raw, KERNEL_TYPE.as_pointer())
        threads = b.load_atomic(self.word(b, S_THREADS), "monotonic", 8)
        want = b.mul(threads, per_thread)
        want = b.select(b.icmp_signed("<", want, _c(MAX_PIECES)), want, _c(MAX_PIECES))
        pieces = b.select(b.icmp_signed("<", domain, want), domain, want, name="pieces")
        ts = b.bitcast(b.alloca(ir.ArrayType(I64, 2), name="ts"), I64P)
        mxcsr = b.alloca(I32, name="mxcsr")
        serial = b.or_(b.icmp_signed("<=", pieces, _c(1)), b.icmp_signed("<=", threads, _c(1)))
        b.cbranch(serial, inline, publish)
        b.position_at_end(inline)
        b.call(kernel, [bufs, _c(0), domain])
        b.ret_void()

        b.position_at_end(publish)
        taken = b.cmpxchg(self.word(b, S_OWNER), _c(0), _c(1), "seq_cst", "seq_cst")
        busy = fn.append_basic_block("busy")
        go = fn.append_basic_block("go")
        b.cbranch(b.extract_value(taken, 1), go, busy)
        b.position_at_end(busy)  # another job is on the board (or this is nested): alone
        b.atomic_rmw("add", self.word(b, S_INLINE), _c(1), "monotonic")
        b.call(kernel, [bufs, _c(0), domain])
        b.ret_void()

        b.position_at_end(go)
        b.store(ir.Constant(I32, 0), mxcsr)
        if self.stmxcsr is not None:
            b.call(self.stmxcsr, [b.bitcast(mxcsr, I8P)])
        # close the control word first (the next sequence number, no piece left): a worker
        # that read the previous job's control word and sees any field of this job fails
        # its claim, so no piece runs with a mix of two jobs' fields or twice
        old = b.load_atomic(self.word(b, S_CTRL), "seq_cst", 8)
        seq = b.add(b.and_(old, _c(~0xFFFFFFFF)), _c(1 << 32))
        b.store_atomic(b.or_(seq, _c(0xFFFFFFFF)), self.word(b, S_CTRL), "seq_cst", 8)
        for k, v in ((S_FN, b.ptrtoint(kernel_raw, I64)), (S_BUFS, b.ptrtoint(bufs, I64)),
                     (S_DOMAIN, domain), (S_PIECES, pieces), (S_MXCSR, b.zext(b.load(mxcsr), I64)),
                     (S_WAITING, _c(0)), (S_DONE, _c(0))):
            b.store_atomic(v, self.word(b, k), "release", 8)
        b.store_atomic(seq, self.word(b, S_CTRL), "seq_cst", 8)  # published
        b.atomic_rmw("add", self.word(b, S_PUBLISHED), _c(1), "monotonic")
        gen = b.bitcast(self.word(b, S_GEN), I32P)
        b.atomic_rmw("add", gen, ir.Constant(I32, 1), "seq_cst")
        sleepers = b.load_atomic(self.word(b, S_SLEEPERS), "seq_cst", 8)
        with b.if_then(b.icmp_signed("!=", sleepers, _c(0))):
            self.futex_wake(b, gen)
        b.call(self.run_pieces, [ir.Constant(I1, 0)])
        # wait for the pieces others run: spin, then sleep on the done count
        done = b.bitcast(self.word(b, S_DONE), I32P)
        pieces32 = b.trunc(pieces, I32)
        t0 = self.now(b, ts)
        head = fn.append_basic_block("wait")
        spin = fn.append_basic_block("wait.spin")
        sleep = fn.append_basic_block("wait.sleep")
        end = fn.append_basic_block("end")
        b.branch(head)
        b.position_at_end(head)
        d = b.load_atomic(done, "seq_cst", 4)
        b.cbranch(b.icmp_signed("==", d, pieces32), end, spin)
        b.position_at_end(spin)
        self.relax(b)
        elapsed = b.sub(self.now(b, ts), t0)
        b.cbranch(b.icmp_signed(">", elapsed, b.load(self.word(b, S_WAIT_SPIN_NS))), sleep,
                  head)
        b.position_at_end(sleep)
        b.store_atomic(_c(1), self.word(b, S_WAITING), "seq_cst", 8)
        d2 = b.load_atomic(done, "seq_cst", 4)
        with b.if_then(b.icmp_signed("!=", d2, pieces32)):
            self.futex_wait(b, done, d2, WAIT_SLICE_NS, ts)
        b.branch(head)
        b.position_at_end(end)
        b.store_atomic(_c(0), self.word(b, S_OWNER), "seq_cst", 8)  # the board is free
        b.ret_void()
        return fn

    # -- a worker ---------------------------------------------------------------------------

    def _worker(self):
        """``void xlapy_pool_worker(i64 index)``: take pieces for good (see the module
        docstring); worker ``index`` takes them while ``index + 1 < threads``."""
        fn = ir.Function(self.mod, ir.FunctionType(VOID, [I64]), "xlapy_pool_worker")
        index = fn.args[0]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ts = b.bitcast(b.alloca(ir.ArrayType(I64, 2), name="ts"), I64P)
        t0 = b.alloca(I64, name="t0")
        gen = b.bitcast(self.word(b, S_GEN), I32P)
        idle = fn.append_basic_block("idle")
        look = fn.append_basic_block("look")
        spin = fn.append_basic_block("spin")
        pause = fn.append_basic_block("pause")
        yield_ = fn.append_basic_block("yield")
        do_yield = fn.append_basic_block("do_yield")
        sleep = fn.append_basic_block("sleep")
        take = fn.append_basic_block("take")
        b.branch(idle)

        def open_job(b):
            """Whether the board holds a job with unclaimed pieces this worker may take."""
            ctrl = b.load_atomic(self.word(b, S_CTRL), "seq_cst", 8)
            pieces = b.load_atomic(self.word(b, S_PIECES), "monotonic", 8)
            threads = b.load_atomic(self.word(b, S_THREADS), "monotonic", 8)
            mine = b.icmp_signed("<", b.add(index, _c(1)), threads)
            return b.and_(mine, b.icmp_signed("<", b.and_(ctrl, _c(0xFFFFFFFF)), pieces))

        b.position_at_end(idle)  # a new wait: its clock starts
        b.store(self.now(b, ts), t0)
        b.branch(look)

        b.position_at_end(look)
        seen = b.load_atomic(gen, "seq_cst", 4, name="seen")
        b.cbranch(open_job(b), take, spin)

        b.position_at_end(spin)
        elapsed = b.sub(self.now(b, ts), b.load(t0))
        b.cbranch(b.icmp_signed("<", elapsed, b.load(self.word(b, S_SPIN_NS))), pause, yield_)
        b.position_at_end(pause)
        self.relax(b)
        b.branch(look)
        b.position_at_end(yield_)
        b.cbranch(b.icmp_signed("<", elapsed, b.load(self.word(b, S_YIELD_NS))), do_yield,
                  sleep)
        b.position_at_end(do_yield)
        self.syscall(b, SYS_SCHED_YIELD)
        b.branch(look)

        b.position_at_end(sleep)
        # announce the sleep, then look again: a job published after this look bumps the
        # generation first, so the futex wait returns at once
        b.atomic_rmw("add", self.word(b, S_SLEEPERS), _c(1), "seq_cst")
        with b.if_then(b.not_(open_job(b))):
            self.futex_wait(b, gen, seen, SLEEP_SLICE_NS, ts)
        b.atomic_rmw("sub", self.word(b, S_SLEEPERS), _c(1), "seq_cst")
        b.branch(idle)

        b.position_at_end(take)
        b.call(self.run_pieces, [ir.Constant(I1, 1)])
        b.branch(idle)
        return fn

    # -- GEMM --------------------------------------------------------------------------------

    def _gemm_items(self):
        """``void gemm_items(i8** desc, i64 lo, i64 hi)`` (a kernel): work items [lo, hi) of
        a GEMM descriptor, item = batch * panels + panel."""
        fn = ir.Function(self.mod, KERNEL_TYPE, "xlapy_gemm_items")
        fn.linkage = "internal"
        raw, lo, hi = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        desc = b.bitcast(raw, I64P)

        def g(k):
            return b.load(b.gep(desc, [_c(k)]))

        def i32_slot(v, name):
            slot = b.alloca(I32, name=name)
            b.store(b.trunc(v, I32), slot)
            return slot

        def byte_slot(v, name):
            slot = b.alloca(I8, name=name)
            b.store(b.trunc(v, I8), slot)
            return slot

        gemm = b.inttoptr(g(G_FN), _GEMM_TYPE.as_pointer())
        ta, tb = byte_slot(g(G_TA), "ta"), byte_slot(g(G_TB), "tb")
        m_full, n_full = g(G_M), g(G_N)
        k = i32_slot(g(G_K), "k")
        lda, ldb, ldc = (i32_slot(g(G_LDA), "lda"), i32_slot(g(G_LDB), "ldb"),
                         i32_slot(g(G_LDC), "ldc"))
        alpha = b.bitcast(b.gep(desc, [_c(G_ALPHA)]), I8P)
        beta = b.bitcast(b.gep(desc, [_c(G_BETA)]), I8P)
        m_slot, n_slot = b.alloca(I32, name="m"), b.alloca(I32, name="n")
        panels = g(G_PANELS)
        axis_m = b.icmp_signed("==", g(G_AXIS), _c(1))
        size = b.select(axis_m, m_full, n_full)
        pa, pb, pc = g(G_A), g(G_B), g(G_C)
        sa, sb, sc = g(G_SA), g(G_SB), g(G_SC)
        step_a = b.select(axis_m, g(G_STEP_A), _c(0))
        step_b = b.select(axis_m, _c(0), g(G_STEP_B))
        step_c = g(G_STEP_C)
        head = fn.append_basic_block("head")
        body = fn.append_basic_block("body")
        call = fn.append_basic_block("call")
        nxt = fn.append_basic_block("next")
        out = fn.append_basic_block("out")
        entry = b.block
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name="i")
        i.add_incoming(lo, entry)
        b.cbranch(b.icmp_signed("<", i, hi), body, out)
        b.position_at_end(body)
        batch = b.sdiv(i, panels)
        p = b.srem(i, panels)
        s0 = b.sdiv(b.mul(size, p), panels)
        s1 = b.sdiv(b.mul(size, b.add(p, _c(1))), panels)
        width = b.sub(s1, s0)
        b.store(b.trunc(b.select(axis_m, width, m_full), I32), m_slot)
        b.store(b.trunc(b.select(axis_m, n_full, width), I32), n_slot)
        a = b.add(b.add(pa, b.mul(batch, sa)), b.mul(s0, step_a))
        bb = b.add(b.add(pb, b.mul(batch, sb)), b.mul(s0, step_b))
        c = b.add(b.add(pc, b.mul(batch, sc)), b.mul(s0, step_c))
        b.cbranch(b.icmp_signed(">", width, _c(0)), call, nxt)
        b.position_at_end(call)
        b.call(gemm, [ta, tb, m_slot, n_slot, k, alpha, b.inttoptr(a, I8P), lda,
                      b.inttoptr(bb, I8P), ldb, beta, b.inttoptr(c, I8P), ldc])
        b.branch(nxt)
        b.position_at_end(nxt)
        i.add_incoming(b.add(i, _c(1)), nxt)
        b.branch(head)
        b.position_at_end(out)
        b.ret_void()
        return fn

    def _gemm(self):
        fn = ir.Function(self.mod, GEMM_DRIVER_TYPE, "xlapy_gemm")
        desc = fn.args[0]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        items = b.mul(b.load(b.gep(desc, [_c(G_BATCH)])), b.load(b.gep(desc, [_c(G_PANELS)])))
        per = b.load(b.gep(desc, [_c(G_PER_THREAD)]))
        raw = b.bitcast(desc, BUFS)
        serial = b.or_(b.icmp_signed("<=", per, _c(0)), b.icmp_signed("<=", items, _c(1)))
        with b.if_else(serial) as (then, otherwise):
            with then:
                b.call(self.gemm_items, [raw, _c(0), items])
            with otherwise:
                b.call(self.parallel_for, [b.bitcast(self.gemm_items, I8P), raw, items, per])
        b.ret_void()
        return fn


# -- the compiled pool ----------------------------------------------------------------------------


def _libc() -> tuple[int, int] | None:
    """The addresses of libc's syscall and clock_gettime (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        found = tuple(ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
                      for name in ("syscall", "clock_gettime"))
    except (OSError, AttributeError):
        return None
    return found if all(found) else None


class Pool:
    """The compiled module, its state words and the pool's threads."""

    def __init__(self, threads: int):
        import llvmlite.binding as llvm

        from xlapy.backends.cpu.jit import get_jit

        get_jit()  # initialises LLVM's native target
        built = _Module()
        parsed = llvm.parse_assembly(str(built.mod))
        parsed.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(opt=2)
        self._engine = llvm.create_mcjit_compiler(parsed, machine)
        self._engine.finalize_object()
        address = self._engine.get_function_address
        self.parallel_for_address = address("xlapy_parallel_for")
        self.gemm_address = address("xlapy_gemm")
        self._worker_address = address("xlapy_pool_worker")
        state = self._engine.get_global_value_address("xlapy_pool_state")
        self.state = (ctypes.c_int64 * STATE_WORDS).from_address(state)
        libc = _libc()
        self.native = libc is not None  # without futexes the pool runs everything inline
        if libc is not None:
            self.state[S_SYSCALL], self.state[S_CLOCK] = libc
        self.state[S_SPIN_NS] = SPIN_NS
        self.state[S_YIELD_NS] = YIELD_NS
        self.state[S_WAIT_SPIN_NS] = WAIT_SPIN_NS
        self.parallel_for = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                             ctypes.c_int64, ctypes.c_int64)(
            self.parallel_for_address)
        self.gemm = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.gemm_address)
        self._run_worker = ctypes.CFUNCTYPE(None, ctypes.c_int64)(self._worker_address)
        self._lock = threading.Lock()
        self._started = 0
        self.threads = 1
        self.set_threads(threads)

    def set_threads(self, count: int) -> int:
        """Use ``count`` threads (the caller included), starting workers as needed;
        returns the previous count."""
        count = max(1, int(count)) if self.native else 1
        with self._lock:
            previous = self.threads
            while self._started < count - 1:
                self._start(self._started)
                self._started += 1
            self.threads = count
            self.state[S_THREADS] = count
        return previous

    def _start(self, index: int) -> None:
        def main():
            from xlapy.backends.cpu import threads

            threads.mark_worker()
            self._run_worker(index)  # never returns (ctypes released the GIL)

        t = threading.Thread(target=main, name=f"xlapy-cpu-worker-{index}", daemon=True)
        t.start()

    def after_fork(self) -> None:
        """In a forked child: the workers did not survive; forget them and any job."""
        self._lock = threading.Lock()
        for k in (S_OWNER, S_SLEEPERS, S_CTRL, S_PIECES, S_DONE):
            self.state[k] = 0
        self._started = 0
        self.set_threads(self.threads)

    def counters(self) -> tuple[int, int]:
        """(jobs published on the board, parallel calls run inline) so far."""
        return int(self.state[S_PUBLISHED]), int(self.state[S_INLINE])


_POOL: list = []
_POOL_LOCK = threading.Lock()


def pool(threads: int) -> Pool:
    """The process's pool (compiled and started on first use with ``threads`` threads)."""
    if not _POOL:
        with _POOL_LOCK:
            if not _POOL:
                made = Pool(threads)
                _POOL.append(made)
                if hasattr(os, "register_at_fork"):
                    os.register_at_fork(after_in_child=made.after_fork)
    return _POOL[0]


__all__ = ["GEMM_DRIVER_TYPE", "GEMM_WORDS", "PARALLEL_TYPE", "Pool", "pool"]
