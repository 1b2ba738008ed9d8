"""The progress line of a long ``xlapy run``: once a run has taken ``XLAPY_PROGRESS_DELAY``
seconds (default 2), a line on stderr redrawn four times a second says what runs, for how long,
and (on the interpreter) how many instructions and while-loop iterations it has evaluated;
erased when the run ends. Only when stderr is a terminal (``--progress always/never``
overrides): piped or redirected output gets nothing.

Owns: ``RunTicker``. The counts come from xlapy.interpreter.evaluator.COUNTERS, installed
for the duration of the run; the compiled CPU backend runs whole loops natively, so there
the line shows the elapsed time only.
"""

from __future__ import annotations

import os
import sys
import threading
import time

#: Seconds before the line appears (a short run never shows one).
DEFAULT_DELAY = 2.0


def _delay() -> float:
    try:
        return max(float(os.environ.get("XLAPY_PROGRESS_DELAY", DEFAULT_DELAY)), 0.0)
    except ValueError:
        return DEFAULT_DELAY


class RunTicker:
    """``with RunTicker("m.hlo on cpu", mode):`` around a run. ``mode``: ``auto`` (a line
    when ``stream``, default stderr, is a terminal), ``always`` or ``never``."""

    def __init__(self, what: str, mode: str = "auto", stream=None, interval: float = 0.25):
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        if mode == "auto":
            isatty = getattr(self.stream, "isatty", None)
            self.enabled = bool(isatty and isatty())
        else:
            self.enabled = mode == "always"
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = 0
        self._counters = None
        self._previous = None

    def __enter__(self) -> RunTicker:
        if not self.enabled:
            return self
        from xlapy.interpreter import evaluator

        self._previous = evaluator.COUNTERS
        self._counters = evaluator.RunCounters()
        evaluator.COUNTERS = self._counters
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="xlapy-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if not self.enabled:
            return
        from xlapy.interpreter import evaluator

        self._stop.set()
        self._thread.join()
        evaluator.COUNTERS = self._previous
        if self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()

    def line(self) -> str:
        """The text drawn now."""
        c = self._counters
        parts = [f"running {self.what}: {time.monotonic() - self._start:.1f} s"]
        if c is not None and c.instructions:
            parts.append(f"{c.instructions:,} instructions")
        if c is not None and c.iterations:
            parts.append(f"{c.iterations:,} while iterations")
        return ", ".join(parts)

    def _loop(self) -> None:
        if self._stop.wait(_delay()):
            return
        while True:
            text = self.line()[:120]
            pad = " " * max(self._shown - len(text), 0)
            try:
                self.stream.write("\r" + text + pad)
                self.stream.flush()
            except (OSError, ValueError):  # the terminal went away: stop drawing
                return
            self._shown = len(text)
            if self._stop.wait(self.interval):
                return


__all__ = ["DEFAULT_DELAY", "RunTicker"]
