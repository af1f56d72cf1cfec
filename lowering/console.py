"""What the command lines print on stderr, which a reader may have closed.

``onnx-lower IN OUT --report r.json 2>&1 | head -1`` closes the pipe after
one line: the next line printed raises ``BrokenPipeError``. That says
nothing about the run, which goes on as if it had printed: OUT and the
report are written and the exit code is the run's. :func:`say` sends
stderr to the null device on the first broken pipe, so that nothing
printed later (a log record, a traceback, Python's own flush at exit)
fails again. No module of the package is imported here (``--help``).
"""

from __future__ import annotations

import contextlib
import os
import sys

#: The name the command line's lines start with.
PROG = "onnx-lower"
#: The exit code of a run stopped by Ctrl-C (SIGINT), as a shell reports it.
INTERRUPTED = 130


def say(text: str) -> None:
    """Print ``text`` and a newline on stderr; nothing, once no one reads it."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (BrokenPipeError, ValueError):  # closed by the reader; closed in this process
        silence()
    except OSError:  # EPIPE without the subclass on some platforms, EIO of a gone terminal
        silence()


def silence() -> None:
    """From now on, stderr goes to the null device (its file descriptor too, for
    what a library writes there and for the flush at exit)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stderr.fileno())
        os.close(null)
    with contextlib.suppress(Exception):
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 -- for the rest of the process


def interrupted(prog: str, written: str | None = None) -> int:
    """Say in one line that Ctrl-C stopped the run (and whether ``written``, OUT,
    was already in place); its exit code."""
    said = f"{written} was written before" if written else "nothing was written"
    say(f"{prog}: interrupted; {said}")
    return INTERRUPTED


def interrupted_verify() -> int:
    """``onnx-verify``'s line for Ctrl-C (it writes no file worth naming); its exit code."""
    say("onnx-verify: interrupted")
    return INTERRUPTED
