"""StableHLO input: MLIR text (what ``jax.jit(f).lower(x).as_text()`` and ``jax.export``
hand around) read into an HLO Module, as XLA's own StableHLO-to-HLO translation does::

    m = xlapy.parse_stablehlo(text)      # an xlapy.Module, ready to verify, run, print
    xlapy.is_stablehlo_text(text)        # True for MLIR (module @..., func.func ...)

Owns the public entry points and the content sniffing the CLI uses (``parse_module_text``
takes HLO or StableHLO text). The pieces: ``mlir`` (the MLIR syntax), ``pretty`` (ops'
custom syntax), ``values`` (types and literals), ``convert`` (the translation's structure),
``lowerings`` (one rule per StableHLO op), ``chlo`` (CHLO decompositions).
"""

from __future__ import annotations

import re

from xlapy.errors import InvalidArgumentError

__all__ = ["is_stablehlo_text", "parse_module_text", "parse_stablehlo"]

_MLIR_START = re.compile(
    r"\A(?:\s|//[^\n]*\n|#[A-Za-z_][\w$.]*\s*=[^\n]*\n)*"
    r"(?:module\b|builtin\.module\b|func\.func\b|\"?func\.func\"?|sdy\.mesh\b)")


def is_stablehlo_text(text: str) -> bool:
    """Whether ``text`` is MLIR (a ``module``, or top-level ``func.func``s) rather than HLO
    text (which starts with ``HloModule`` or a computation)."""
    return isinstance(text, str) and _MLIR_START.match(text) is not None


def parse_stablehlo(text: str, *, entry: str | None = None):
    """Translate StableHLO MLIR text into an HLO Module.

    ``entry`` names the function that becomes the entry computation (default ``main``, or
    the module's only function). Errors are ParseErrors with the line and column of the
    MLIR text (``stablehlo:12:5: ...``)."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"parse_stablehlo: expected MLIR text (str), got "
                                   f"{type(text).__name__}")
    from xlapy.stablehlo.convert import Converter
    from xlapy.stablehlo.mlir import MlirParser

    parser = MlirParser(text)
    module_op = parser.parse()
    return Converter(parser, module_op).run(entry)


def parse_module_text(text: str):
    """HLO text or StableHLO text (told apart by content) as a Module."""
    if is_stablehlo_text(text):
        return parse_stablehlo(text)
    from xlapy.parser import parse_hlo_module

    return parse_hlo_module(text)

