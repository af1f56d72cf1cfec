"""The command lines where the streams around them misbehave (issue 37), run as a user
runs them, in a child process: a stderr closed by its reader (``2>&1 | head -1``),
Ctrl-C, a terminal where a binary model would go, IN == OUT."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import onnx
import pytest

from tests.helpers import parse, weighted_model

ROOT = pathlib.Path(__file__).resolve().parents[1]

SIMPLE = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y) {
  [the_map] y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
}"""


def _env() -> dict[str, str]:
    """The child imports this checkout's lowering, whatever is installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.fixture
def model(tmp_path) -> pathlib.Path:
    path = tmp_path / "in.onnx"
    onnx.save(parse(SIMPLE), path)
    return path


def _with_closed_stderr(command: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    """``command 2>&1 | head -0``: stderr (and stdout) a pipe whose reader is gone
    before the first line."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            command, stdout=write, stderr=write, cwd=cwd, env=_env(), check=False, timeout=120
        )
    finally:
        os.close(write)


# --- a closed stderr -----------------------------------------------------------------------


@pytest.mark.parametrize("flags", [[], ["-v"], ["--verify", "--runs", "2"]])
def test_a_closed_stderr_loses_neither_out_nor_the_report(tmp_path, model, flags):
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    done = _with_closed_stderr(
        [sys.executable, "-m", "lowering", str(model), str(out), "--report", str(report), *flags],
        tmp_path,
    )
    assert done.returncode == 0
    assert "SequenceMap" not in {n.op_type for n in onnx.load(out).graph.node}
    written = json.loads(report.read_text())
    assert written["exit_code"] == 0 and written["error"] is None
    assert [node["name"] for node in written["nodes"]] == ["the_map"]


def test_a_closed_stderr_keeps_a_failures_exit_code_and_report(tmp_path):
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    missing = tmp_path / "missing.onnx"
    done = _with_closed_stderr(
        [sys.executable, "-m", "lowering", str(missing), str(out), "--report", str(report)],
        tmp_path,
    )
    assert done.returncode == 1 and not out.exists()
    assert "no such file" in json.loads(report.read_text())["error"]


def test_a_closed_stderr_through_head(tmp_path, model):
    """The shell pipeline itself: ``... 2>&1 | head -1`` prints the first line."""
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    command = (
        f"{sys.executable} -m lowering {model} {out} --report {report} -v 2>&1 | head -1; "
        'echo "exit=${PIPESTATUS[0]}"'
    )
    done = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, env=_env(), check=True
    )
    first, last = done.stdout.splitlines()[0], done.stdout.splitlines()[-1]
    assert first.startswith("onnx-lower: lowered 1 SequenceMap node")
    assert last == "exit=0" and out.exists() and report.exists()


def test_onnx_verify_with_a_closed_stderr_keeps_its_exit_code(tmp_path, model):
    done = _with_closed_stderr(
        [sys.executable, "-m", "lowering.verify", str(model), str(model), "--runs", "2"], tmp_path
    )
    assert done.returncode == 0


# --- Ctrl-C --------------------------------------------------------------------------------

#: Runs the command line, sending itself SIGINT at the moment it renames the
#: staged OUT into place: a real Ctrl-C in the middle of the write.
INTERRUPTED_WRITE = textwrap.dedent(
    """
    import os, signal, sys, time
    from lowering import model_io
    commit = model_io._commit
    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
        return commit(*args, **kwargs)
    model_io._commit = interrupted
    from lowering.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def test_ctrl_c_while_writing_exits_130_in_one_line_leaving_nothing(tmp_path):
    (tmp_path / "in").mkdir()
    source = weighted_model(tmp_path / "in", 2, 64, real=True)
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    before = sorted(p.name for p in tmp_path.rglob("*"))
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_WRITE, str(source), str(out), "--report", str(report)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        check=False,
        timeout=60,
    )
    assert done.returncode == 130
    assert done.stderr == "onnx-lower: interrupted; nothing was written\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no OUT, data, stage, report


def test_ctrl_c_while_reading_a_fifo_exits_130_in_one_line(tmp_path):
    fifo = tmp_path / "in.onnx"
    os.mkfifo(fifo)
    child = subprocess.Popen(
        [sys.executable, "-m", "lowering", str(fifo), str(tmp_path / "out.onnx")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    with open(fifo, "wb"):  # returns once the child has opened IN: it waits in read()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 130
    assert (out, err) == ("", "onnx-lower: interrupted; nothing was written\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


def test_ctrl_c_in_onnx_verify_exits_130_in_one_line(tmp_path):
    fifo = tmp_path / "a.onnx"
    os.mkfifo(fifo)
    child = subprocess.Popen(
        [sys.executable, "-m", "lowering.verify", str(fifo), str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    with open(fifo, "wb"):
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 130
    assert (out, err) == ("", "onnx-verify: interrupted\n")


# --- --help: exit codes, a working example, and what it imports -----------------------------

COMMANDS = {"onnx-lower": "lowering", "onnx-verify": "lowering.verify"}


@pytest.mark.parametrize("prog", COMMANDS)
def test_help_lists_the_exit_codes_and_its_examples_work(tmp_path, prog):
    done = subprocess.run(
        [sys.executable, "-m", COMMANDS[prog], "--help"],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    text = done.stdout
    codes = text.split("exit codes:\n", 1)[1].split("\n\n", 1)[0]
    assert [line.split()[0] for line in codes.splitlines() if not line.startswith("     ")] == [
        "0", "1", "2", "3", "130",
    ]  # fmt: skip
    examples = text.split("example", 1)[1].split(":\n", 1)[1]
    commands = [line.split() for line in examples.splitlines() if line.startswith("  onnx-")]
    assert commands and any(words[0] == prog for words in commands)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "torch_atleast_2d.onnx").write_bytes(
        (ROOT / "examples" / "torch_atleast_2d.onnx").read_bytes()
    )
    for words in commands:
        if "--inputs" in words:  # replays a file the run before would have saved
            continue
        ran = subprocess.run(
            [sys.executable, "-m", COMMANDS[words[0]], *words[1:]],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=_env(),
            check=False,
        )
        assert ran.returncode == 0, (words, ran.stderr)


@pytest.mark.parametrize("prog", COMMANDS)
def test_help_imports_neither_onnx_nor_numpy(prog):
    """``python -X importtime`` lists every module imported: none of these."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", COMMANDS[prog], "--help"],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    heavy = {m for m in imported if m.split(".")[0] in {"onnx", "onnx_ir", "numpy", "onnxruntime"}}
    assert "lowering.cli" in imported or "lowering.verify.cli" in imported
    assert heavy == set()
