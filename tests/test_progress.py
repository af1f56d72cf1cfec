"""Progress on long work: a line on a terminal only, never with -q, never into a
pipe or a file, gone before anything else is printed. No test here depends on
timing: the clock and the threshold are injected (a fake clock, or a delay of 0
in a child on a pseudo-terminal)."""

from __future__ import annotations

import io
import os
import pathlib
import re
import subprocess
import sys

import onnx
import pytest

import lowering
from lowering import cli, progress
from lowering.cli import run_pipeline
from tests.cases.report_models import MODELS, many_maps
from tests.helpers import parse

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLEAR = "\r\x1b[K"


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Clock:
    """Seconds that pass only when read: ``step`` each time."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


# --- the line --------------------------------------------------------------------------------


def test_nothing_is_drawn_before_the_delay():
    stream = Terminal()
    line = progress.ProgressLine(stream, delay=10, clock=Clock(1.0))
    for i in range(8):
        line("lowering maps", i, 100)
    line.clear()
    assert stream.getvalue() == ""


def test_counts_are_throttled_and_phases_always_drawn():
    stream = Terminal()
    line = progress.ProgressLine(stream, prefix="p: ", delay=0, interval=1.0, clock=Clock(0.25))
    for i in range(9):  # one count a quarter second: at most one drawn a second
        line("lowering maps", i, 9)
    line("writing the model", 0, 0)  # a new phase: drawn however soon
    drawn = stream.getvalue().split("\r")[1:]
    assert drawn == [
        "p: lowering maps 0/9\x1b[K",
        "p: lowering maps 4/9\x1b[K",
        "p: lowering maps 8/9\x1b[K",
        "p: writing the model\x1b[K",
    ]
    line.clear()
    assert stream.getvalue().endswith("p: writing the model\x1b[K" + CLEAR)
    line.clear()  # once gone, clearing again writes nothing
    assert stream.getvalue().count(CLEAR) == 1


def test_a_line_is_never_longer_than_the_terminal():
    stream = Terminal()
    line = progress.ProgressLine(stream, delay=0, clock=Clock(1.0))
    line("x" * 500, 1, 2)
    assert len(stream.getvalue()) == len("\r") + 79 + len("\x1b[K")  # no size known: 80 columns


@pytest.mark.parametrize(
    ("stream", "term", "shown"),
    [
        (Terminal(), "xterm", True),
        (Terminal(), "dumb", False),
        (io.StringIO(), "xterm", False),
        (object(), "xterm", False),
    ],
)
def test_only_a_terminal_that_moves_the_cursor_gets_a_line(monkeypatch, stream, term, shown):
    monkeypatch.setenv("TERM", term)
    assert progress.on_terminal(stream) is shown  # type: ignore[arg-type]


# --- what the pipeline says ----------------------------------------------------------------


def test_the_pipeline_says_each_step_and_counts_the_maps():
    said = []
    lowering.lower(many_maps(3), progress=lambda *call: said.append(call))
    phases = list(dict.fromkeys(phase for phase, _, _ in said))
    assert phases == [
        "doubted shapes", "specialize", "fold insert chains", "accumulator loops",
        "lower maps", "planning maps", "lowering maps", "eliminate sequences",
        "normalize inserts", "provenance",
    ]  # fmt: skip
    for phase in ("planning maps", "lowering maps"):
        assert [(d, t) for p, d, t in said if p == phase] == [(0, 3), (1, 3), (2, 3)]


def test_the_api_says_nothing_by_default(capsys):
    lowering.lower(many_maps(3))
    assert capsys.readouterr() == ("", "")


# --- the command line ----------------------------------------------------------------------


def _lower_on(monkeypatch, tmp_path, stderr, *argv: str, model=None) -> int:
    onnx.save(model or many_maps(25), tmp_path / "in.onnx")
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(cli, "PROGRESS_DELAY", 0.0)
    monkeypatch.setattr(cli, "_clock", Clock(1.0))  # every count is drawn
    monkeypatch.setenv("TERM", "xterm")
    return cli.main([*argv, str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")])


def test_a_terminal_sees_the_line_and_then_the_summary_alone(monkeypatch, tmp_path):
    terminal = Terminal()
    assert _lower_on(monkeypatch, tmp_path, terminal) == 0
    text = terminal.getvalue()
    drawn, _, summary = text.rpartition(CLEAR)
    assert "\ronnx-lower: lowering maps 24/25\x1b[K" in drawn
    assert "\ronnx-lower: planning maps 0/25\x1b[K" in drawn
    assert "\ronnx-lower: reading the model\x1b[K" in drawn
    assert "\r" not in summary and "\x1b" not in summary
    assert summary.startswith("onnx-lower: lowered 25 SequenceMap nodes in ")
    assert drawn.count("\r") == drawn.count("\x1b[K")  # every drawing ends its line


def test_quiet_and_pipes_get_no_line(monkeypatch, tmp_path):
    terminal = Terminal()
    assert _lower_on(monkeypatch, tmp_path, terminal, "-q") == 0
    assert terminal.getvalue() == ""
    piped = io.StringIO()
    assert _lower_on(monkeypatch, tmp_path, piped) == 0
    assert "\r" not in piped.getvalue() and "\x1b" not in piped.getvalue()
    assert piped.getvalue().startswith("onnx-lower: lowered 25 SequenceMap nodes")


def test_the_line_is_gone_before_an_error(monkeypatch, tmp_path):
    terminal = Terminal()
    refused = parse(MODELS["loop"])
    assert _lower_on(monkeypatch, tmp_path, terminal, "--runtime", "tinygrad", model=refused) == 1
    drawn, _, error = terminal.getvalue().rpartition(CLEAR)
    assert "\ronnx-lower: planning maps 0/1" in drawn
    assert error.startswith("onnx-lower: error: ") and "\r" not in error


def test_the_line_is_gone_before_a_log_record(monkeypatch, tmp_path):
    import logging

    terminal = Terminal()
    said = []

    def lower_and_warn(model, **options):
        options["progress"]("lowering maps", 1, 2)
        logging.getLogger("lowering.test").warning("something to say")
        said.append(True)
        return run_pipeline(model, **options)

    monkeypatch.setattr(cli, "run_pipeline", lower_and_warn)
    handler = logging.StreamHandler(terminal)  # as basicConfig's would, on the terminal
    logging.getLogger().addHandler(handler)
    try:
        assert _lower_on(monkeypatch, tmp_path, terminal) == 0
    finally:
        logging.getLogger().removeHandler(handler)
    assert said and "lowering maps 1/2\x1b[K" + CLEAR + "something to say" in terminal.getvalue()


# --- a real terminal: a child on a pseudo-terminal ------------------------------------------


def _child(tmp_path: pathlib.Path, *argv: str, tty: bool) -> str:
    """Run the CLI in a child with the line's delay 0; its stderr as bytes read back."""
    onnx.save(many_maps(25), tmp_path / "in.onnx")
    code = (
        "import sys, lowering.cli as c; c.PROGRESS_DELAY = 0.0; "
        f"sys.exit(c.main({[*argv, str(tmp_path / 'in.onnx'), str(tmp_path / 'out.onnx')]!r}))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm"}
    if not tty:
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stderr
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the terminal
        os.execve(sys.executable, [sys.executable, "-c", code], env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return out.decode().replace("\r\n", "\n")  # the terminal's own newlines


@pytest.mark.skipif(sys.platform == "win32", reason="no pseudo-terminals")
def test_a_pseudo_terminal_sees_the_line_cleared_and_a_pipe_does_not(tmp_path):
    on_terminal = _child(tmp_path, tty=True)
    drawn, _, summary = on_terminal.rpartition(CLEAR)
    assert re.search(r"\ronnx-lower: (planning|lowering) maps \d+/25\x1b\[K", drawn)
    assert summary.startswith("onnx-lower: lowered 25 SequenceMap nodes") and "\r" not in summary
    assert _child(tmp_path, "-q", tty=True) == ""
    piped = _child(tmp_path, tty=False)
    assert "\r" not in piped and "\x1b" not in piped
    assert re.sub(r"in \d+\.\d\d s", "", piped) == re.sub(r"in \d+\.\d\d s", "", summary)


@pytest.mark.skipif(sys.platform == "win32", reason="no pseudo-terminals")
def test_a_dry_run_on_a_terminal_clears_the_line_before_it_says_anything(tmp_path):
    on_terminal = _child(tmp_path, "--dry-run", tty=True)
    drawn, _, said = on_terminal.rpartition(CLEAR)
    assert re.search(r"\ronnx-lower: (planning|lowering) maps \d+/25\x1b\[K", drawn)
    assert said.startswith("onnx-lower: dry run: nothing written\n") and "\r" not in said
    assert "  inputs: " in said and not (tmp_path / "out.onnx").exists()
