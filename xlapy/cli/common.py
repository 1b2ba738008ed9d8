"""What every ``xlapy`` subcommand shares: the error type for bad input, reading an
argument that may be ``-`` (stdin), and ``add_command``, which gives every subcommand the
same help layout (description, examples) and the ``--debug`` flag.

Owns no command. Imports nothing from xlapy but ``xlapy.errors``.
"""

from __future__ import annotations

import argparse
import sys

#: Exit codes of the ``xlapy`` command.
EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug in xlapy: an exception nobody raised on purpose
EXIT_BAD_INPUT = 2  # bad arguments or input text (argparse uses 2 as well)


class CommandError(Exception):
    """Bad input detected by a subcommand itself; printed as one error line, exit code 2."""


def read_text_argument(value: str, what: str) -> str:
    """``value`` itself, or all of stdin when it is ``-``; empty text is an error."""
    if value == "-":
        value = sys.stdin.read()
        if not value.strip():
            raise CommandError(f"expected {what} on stdin, got nothing")
    elif not value.strip():
        raise CommandError(f"expected {what}, got an empty argument")
    return value


def read_module_text(path: str) -> str:
    """The HLO text in file ``path``, or all of stdin when it is ``-``; an unreadable file or
    empty text is an error."""
    if path == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise CommandError(f"cannot read {path}: {e.strerror}") from None
    if not text.strip():
        raise CommandError(f"{path}: the module text is empty")
    return text


def check_output_path(path: str, flag: str) -> None:
    """Refuse, before any work, an output path that cannot be written: a directory, a
    missing or unwritable folder. The file is written under exactly this name."""
    import os

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CommandError(f"{flag} {path}: it is a directory; give a file name")
    if not os.path.isdir(folder):
        raise CommandError(f"{flag} {path}: the folder {folder} does not exist")
    if os.path.exists(path) and not os.access(path, os.W_OK) or \
            not os.path.exists(path) and not os.access(folder, os.W_OK):
        raise CommandError(f"{flag} {path}: no permission to write there")


def add_command(subparsers, name: str, *, summary: str, description: str,
                examples: list[tuple[str, str]], run) -> argparse.ArgumentParser:
    """Add subcommand ``name`` running ``run(args) -> int``; ``examples`` are
    (command line, what it shows) pairs printed at the end of ``--help``."""
    width = max(len(cmd) for cmd, _ in examples)
    lines = ["examples:"]
    for cmd, what in examples:
        lines.append(f"  {cmd.ljust(width)}  # {what}" if what else f"  {cmd}")
    parser = subparsers.add_parser(
        name,
        help=summary,
        description=description,
        epilog="\n".join(lines),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # SUPPRESS keeps `xlapy --debug layout ...` working: a subparser default would
    # overwrite the top-level value.
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the Python traceback of an error")
    parser.set_defaults(run=run)
    return parser


def error_text(prog: str, message: str) -> str:
    """``prog: error: message``; further lines of a multi-line message (a parse error's
    excerpt and caret) are indented, keeping the caret under its column."""
    first, *rest = str(message).split("\n")
    return "\n".join([f"{prog}: error: {first}"] + ["  " + line for line in rest])
