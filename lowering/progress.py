"""How far a long lowering has got: what the steps say, and the line the CLI shows.

A lowering of 3,000 maps takes seconds. The pipeline and the passes that
loop over many nodes call a :data:`Callback` with a phase and a count
(``("lowering maps", 1200, 3000)``; ``total`` 0 for a phase with no count);
the API's default is :func:`silent`. The command line passes a
:class:`ProgressLine`, which draws one line on a terminal and takes it away
again::

    stderr a terminal, not -q:   ...2 s of nothing...
                                 \\r onnx-lower: lowering maps 1200/3000
                                 \\r onnx-lower: lowering maps 2400/3000
                                 \\r\\x1b[K          (cleared: then the summary)

Nothing is drawn before ``delay`` seconds (a short run prints exactly what
it printed before), a count at most every ``interval`` seconds (a phase
that starts is always drawn, or a long step would sit under the last
count of the one before), and :meth:`ProgressLine.clear` erases the line
before anything else is written to the stream. The clock is injected, so
tests need no timing. No module of the package is imported here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TextIO

#: ``(phase, done, total)``: ``total`` 0 when the phase has no count.
Callback = Callable[[str, int, int], None]

#: Seconds of work before the line first shows (the CLI's threshold).
DELAY = 2.0
#: Seconds between two counts drawn (at most ten a second).
INTERVAL = 0.1


def silent(phase: str, done: int, total: int) -> None:
    """The API's default: say nothing."""


class ProgressLine:
    """A progress line on ``stream``, drawn with ``\\r`` and erased with ``\\r\\x1b[K``.

    Callable as a :data:`Callback`. ``prefix`` starts the line (the CLI's
    name); ``clock`` returns seconds (``time.monotonic``), and ``delay`` and
    ``interval`` are in its seconds.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        prefix: str = "",
        delay: float = DELAY,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.prefix = prefix
        self.delay = delay
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self.shown = False  # a line is on the terminal now
        self._last_drawn = 0.0
        self._phase = ""

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = self.clock()
        if now - self.started < self.delay:
            self._phase = phase
            return
        if phase == self._phase and self.shown and now - self._last_drawn < self.interval:
            return  # throttled: the phase is on the line, and a count was drawn just now
        self._phase = phase
        text = f"{self.prefix}{phase} {done}/{total}" if total else f"{self.prefix}{phase}"
        self.stream.write("\r" + text[: self._width()] + "\x1b[K")
        self.stream.flush()
        self.shown = True
        self._last_drawn = now

    def clear(self) -> None:
        """Erase the line, if one is shown (before any other output, and at the end)."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False

    def _width(self) -> int:
        """Shorter than the terminal: a line that wraps cannot be taken back with ``\\r``."""
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
        return max(columns - 1, 20) if columns else 79  # 0: a terminal that says no size


def on_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal that takes ``\\r`` and ``\\x1b[K``: never a pipe
    or a file, nor a terminal that says it is dumb."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed, or no such method
        return False
    return tty and os.environ.get("TERM") != "dumb"
