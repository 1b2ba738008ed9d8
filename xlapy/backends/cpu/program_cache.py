"""The CPU backend's in-memory program cache: what a compiled program is keyed by, and how
many programs stay.

**The key** (``fingerprint(module)``) is the SHA-256 of everything a program depends on:

- the build: this cache's format, the pass pipeline, and the JIT's identity (xlapy, LLVM and
  llvmlite versions, target triple, host CPU name and features, optimisation and code
  generation settings: ``Jit.identity``);
- the module printed with every option that shows information on (``KEY_PRINT_OPTIONS``):
  layouts in every shape, operand shapes, metadata, backend_config, frontend attributes,
  shardings, control predecessors, the async ops in full. No backend reads metadata or
  frontend attributes, and names do not change what a module computes, but they are
  in the key all the same: a module that differs only there misses, which costs a compile,
  never a wrong result, and the cached program's ``verified`` flag stays exact;
- every literal in the module (constants, custom-call ``literal=``) as its shape and raw
  bytes: the printer elides constants of more than 10 elements as ``{...}`` (two modules
  differing only there would print the same and share one program), and a printed
  float says nothing about a NaN's payload;
- the module config, every entry as its repr (those the header does not print included).

What the printer leaves out is either a default (an attribute equal to its default value,
a shape without layout) or ignored by every backend (all-reduce's ``mode=``, which XLA
ignores too; a layout's legacy ``padded_dimensions``/``padding_value``, which no code reads).

**The bound**: least recently used programs are dropped beyond ``programs`` entries or
``bytes`` (an estimate per program: object code, an engine's fixed cost, the constants the
program holds, ~2 KiB of Python objects per instruction). Limits come from
``XLAPY_CPU_CACHE_PROGRAMS`` (default 256) and ``XLAPY_CPU_CACHE_BYTES`` (default 512M;
suffixes K, M, G), read when the cache is first used, or ``set_cache_limits()``; 0 programs
turns the cache off. Eviction only drops the cache's reference: a program an Executable
holds stays valid, and its engine and machine code are freed with its last reference.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.shape.layout import PaddingValue
from xlapy.shape.literal import Literal

#: Bump when what the key covers changes.
KEY_FORMAT = 1

#: The printer's options for the key: everything that can hide information shown.
#: Large constants stay elided here: their bytes are hashed instead (exact, and cheaper
#: than formatting millions of numbers).
KEY_PRINT_OPTIONS = HloPrintOptions(
    print_large_constants=False, print_metadata=True, print_metadata_only_op_name=False,
    print_backend_config=True, print_operand_shape=True, print_operand_names=True,
    print_program_shape=True, print_percent=True, print_control_dependencies=True,
    print_operand_index_annotation_interval=0, include_layout_in_shapes=True,
    print_result_shape=True, print_extra_attributes=True, print_frontend_attributes=True,
    syntax_sugar_async_ops=False, print_ids=True, compact_gte=False)

DEFAULT_PROGRAMS = 256
DEFAULT_BYTES = 512 << 20
ENGINE_BYTES = 64 << 10  # an MCJIT engine, its target machine and code pages (measured ~50 KB)
INSTRUCTION_BYTES = 2 << 10  # Python objects per instruction of the optimised module

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def fingerprint(module, build: str) -> str:
    """The key of ``module``'s program (see the module docstring); ``build``: the pipeline
    and the JIT's identity."""
    h = hashlib.sha256(f"xlapy-cpu-program/{KEY_FORMAT}\0{build}\0".encode())
    h.update(module_to_string(module, KEY_PRINT_OPTIONS).encode())
    for key in sorted(module.config):
        h.update(f"\0config {key}={module.config[key]!r}".encode())
    for comp in module.computations:
        for instr in comp.instructions:
            for name, value in instr.attrs.items():
                if isinstance(value, Literal):
                    h.update(f"\0literal {comp.name}/{instr.name}/{name}".encode())
                    _hash_literal(h, value)
            layout = instr.shape.layout if instr.shape.is_array() else None
            if layout is not None and (layout.padded_dimensions or layout.padding_value != PaddingValue.ZERO_PAD):
                h.update(f"\0legacy layout {comp.name}/{instr.name} {layout!r}".encode())
    return h.hexdigest()


def _hash_literal(h, lit: Literal) -> None:
    shape = lit.shape
    if shape.is_tuple():
        h.update(f"({len(lit.elements)}".encode())
        for e in lit.elements:
            _hash_literal(h, e)
        h.update(b")")
        return
    if not shape.is_array():
        h.update(f"{shape}".encode())
        return
    arr = np.ascontiguousarray(lit.array)
    h.update(f"{shape} {arr.dtype.str} {arr.shape} elided={lit.elided}:".encode())
    h.update(arr.reshape(-1).view(np.uint8))


# -- limits ---------------------------------------------------------------------------------------


def _env_size(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    unit = text[-1].upper() if text[-1].isalpha() else ""
    number = text[:-1] if unit else text
    if unit not in _SUFFIXES or not number.strip().isdigit():
        raise InvalidArgumentError(f"{name}: expected a non-negative integer with an optional "
                                   f"K, M or G suffix, got {text!r}")
    return int(number) * _SUFFIXES[unit]


def _check_limit(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidArgumentError(f"set_cache_limits: {what} must be an integer >= 0, "
                                   f"got {value!r}")
    return int(value)


class ProgramCache:
    """An LRU map key -> program, bounded by count and estimated bytes (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._limits: tuple[int, int] | None = None  # read from the environment on first use
        self.hits = self.misses = self.evictions = 0

    def _limits_locked(self) -> tuple[int, int]:
        if self._limits is None:
            self._limits = (_env_size("XLAPY_CPU_CACHE_PROGRAMS", DEFAULT_PROGRAMS),
                            _env_size("XLAPY_CPU_CACHE_BYTES", DEFAULT_BYTES))
        return self._limits

    def limits(self) -> dict:
        with self._lock:
            programs, nbytes = self._limits_locked()
        return {"programs": programs, "bytes": nbytes}

    def set_limits(self, programs=None, nbytes=None) -> None:
        with self._lock:
            old_programs, old_bytes = self._limits_locked()
            self._limits = (old_programs if programs is None else
                            _check_limit(programs, "programs"),
                            old_bytes if nbytes is None else _check_limit(nbytes, "bytes"))
            self._evict_locked()

    def get(self, key: str, count_miss: bool = True):
        """The program of ``key`` (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += count_miss
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: str, program, nbytes: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (program, nbytes)
            self._bytes += nbytes
            self._evict_locked()

    def _evict_locked(self) -> None:
        programs, nbytes = self._limits_locked()
        while self._entries and (len(self._entries) > programs or self._bytes > nbytes):
            _, (_, size) = self._entries.popitem(last=False)
            self._bytes -= size
            self.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def info(self) -> dict:
        with self._lock:
            programs, nbytes = self._limits_locked()
            return {"programs": len(self._entries), "bytes": self._bytes,
                    "max_programs": programs, "max_bytes": nbytes, "hits": self.hits,
                    "misses": self.misses, "evictions": self.evictions}


__all__ = ["KEY_PRINT_OPTIONS", "ProgramCache", "fingerprint"]
