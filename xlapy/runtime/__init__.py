"""The runtime: run HLO on devices (PJRT's shape): devices as threads of one process, or
one device per MPI rank.

``Client`` compiles modules into ``Executable``s for replicas x partitions devices, holds
``Buffer``s on its ``Device``s, and owns the channels and feeds; replicas and partitions run
as threads sharing a ``ThreadedCollectives``. ``register_custom_call`` (Python targets) and
``register_custom_call_library`` (C targets through XLA's ``void f(void* out, void** in)``
ABI) decide which custom-call targets HLO can reach. The backends a Client compiles with
are registered in xlapy/backends/base.py (re-exported here: ``register_backend``,
``BACKENDS``, ``Backend``, ``DeviceProgram``, ``InterpreterBackend``).

Modules: client (Client, Device, Buffer, Executable), placement (device numbering,
replica-group checks), threaded_collectives (rendezvous and the combine helpers other
backends reuse), channels (send/recv pairing, host transfers, feeds), custom_call_library,
mpi_collectives and mpi_run (one device per MPI rank: ``run_distributed``).
"""

from xlapy.backends.base import BACKENDS, Backend, DeviceProgram, register_backend
from xlapy.backends.interpreter import InterpreterBackend
from xlapy.interpreter.custom_calls import register_custom_call, unregister_custom_call
from xlapy.runtime.client import Buffer, Client, Device, Executable, ExecutionError
from xlapy.runtime.custom_call_library import register_custom_call_library
from xlapy.runtime.placement import default_device_assignment
from xlapy.runtime.threaded_collectives import (
    CollectiveTimeoutError,
    DeadlockError,
    ExecutionState,
    RendezvousAbortedError,
    ThreadedCollectives,
)

__all__ = [
    "BACKENDS", "Backend", "Buffer", "Client", "CollectiveTimeoutError", "DeadlockError",
    "Device", "DeviceProgram", "Executable", "ExecutionError", "ExecutionState",
    "InterpreterBackend", "RendezvousAbortedError", "ThreadedCollectives",
    "default_device_assignment", "register_backend", "register_custom_call",
    "register_custom_call_library", "unregister_custom_call",
]
