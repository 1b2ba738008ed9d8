"""The module a command reads from a file or stdin, whatever form it is in: HLO text, or
one of XLA's protos, binary or text (HloModuleProto, an ``--xla_dump_hlo_as_proto`` dump's
HloProto, an HloSnapshot with its arguments), told apart by content (xlapy.proto.files).

Owns ``read_module(path)`` -> LoadedHlo (``.module``, ``.arguments`` of a snapshot) and
``NotAnHloModuleError`` re-exported for the commands that skip such files in a glob.
Imports xlapy.proto; nothing here imports the protobuf package until a proto is read.
"""

from __future__ import annotations

import os
import sys

from xlapy.cli.common import CommandError
from xlapy.proto.files import LoadedHlo, NotAnHloModuleError, load_hlo


def read_module(path: str) -> LoadedHlo:
    """The module in file ``path`` (``-``: stdin): HLO text or an HLO proto."""
    return load_hlo(read_module_bytes(path), "stdin" if path == "-" else path)


def read_module_bytes(path: str) -> bytes | str:
    """The content of file ``path`` (``-``: stdin), for ``load_hlo``; empty is an error."""
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)  # bytes for protos; a text stream has none
        data = stream.read() if stream is not None else sys.stdin.read()
    else:
        if os.path.isdir(path):  # a dump folder's per-module subdirectory, say
            raise NotAnHloModuleError(f"{path}: not an HLO module (a directory)")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise CommandError(f"cannot read {path}: {e.strerror}") from None
    if not data.strip():
        raise CommandError(f"{path}: the module text is empty")
    return data


__all__ = ["LoadedHlo", "NotAnHloModuleError", "read_module"]
