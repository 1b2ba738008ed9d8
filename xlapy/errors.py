"""The exception types every xlapy layer raises.

Owns: the error hierarchy and the caret-excerpt formatting of text errors.
Imports nothing from xlapy.
"""

from __future__ import annotations


class XlaError(Exception):
    """Base class of every error xlapy raises on purpose."""


class InvalidArgumentError(XlaError, ValueError):
    """An argument (shape, layout, index, attribute, operand) is not valid for the op.

    The message names the op or function first, then what was expected and what came,
    with shapes in HLO syntax.
    """


class ResourceExhaustedError(XlaError, MemoryError):
    """Memory for a buffer could not be allocated (XLA's RESOURCE_EXHAUSTED). The message
    names what was being computed, the shape of the buffer and its size in bytes."""

    def __init__(self, message: str, nbytes: int | None = None, instruction=None):
        super().__init__(message)
        self.nbytes = nbytes
        self.instruction = instruction  # the instruction being computed, when known


def human_bytes(n: int) -> str:
    """``8796093022232`` -> ``'8.0 TiB'``."""
    size, unit = float(n), "bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024 or unit == "EiB":
            break
        size /= 1024
    return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"


class ParseError(XlaError, ValueError):
    """Text (a shape, layout, literal or HLO module) could not be parsed.

    Carries the 1-based ``line`` and ``column`` of the failure, and ``str(err)`` shows the
    offending line with a caret under the column. ``notes``: (message, position) pairs for
    other places the error concerns (where a name was first defined).

    HLO module text (``what="hlo"``) is framed as XLA's parser frames its errors
    (``was parsing 8:39: error: instruction does not exist: aparam``, the line, a caret; one
    such block per note), so XLA's messages and xlapy's read alike; other texts start with
    ``what:line:column:``.
    """

    def __init__(self, message: str, text: str | None = None, pos: int = 0, what: str = "text",
                 notes: tuple[tuple[str, int], ...] = ()):
        self.message = message
        self.has_text = text is not None
        text = text or ""
        self.text = text
        self.pos = max(0, min(pos, len(text)))
        self.what = what
        self.notes = tuple(notes)
        self.line, self.column, self.excerpt = _locate(text, self.pos)
        super().__init__(self._format())

    def _format(self) -> str:
        if self.what == "hlo" and self.has_text:
            blocks = [_xla_block(self.message, self.line, self.column, self.excerpt)]
            for message, pos in self.notes:
                blocks.append(_xla_block(message, *_locate(self.text, pos)))
            return "\n".join(blocks)
        head = f"{self.what}:{self.line}:{self.column}: {self.message}"
        if not self.has_text:
            return head
        out = f"{head}\n{self.excerpt}\n{' ' * (self.column - 1)}^"
        for message, pos in self.notes:
            line, column, excerpt = _locate(self.text, pos)
            out += f"\n{self.what}:{line}:{column}: note: {message}\n{excerpt}\n{' ' * (column - 1)}^"
        return out


def _locate(text: str, pos: int) -> tuple[int, int, str]:
    """1-based line and column of ``pos`` and the text of its line."""
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    return line, pos - line_start + 1, text[line_start: len(text) if line_end < 0 else line_end]


def _xla_block(message: str, line: int, column: int, excerpt: str) -> str:
    """One error as XLA's HloParserImpl::Error writes it."""
    return f"was parsing {line}:{column}: error: {message}\n{excerpt}\n{' ' * (column - 1)}^"
