"""The command lines where the streams around them misbehave (issue 37), run as a user
runs them, in a child process: a stderr closed by its reader (``2>&1 | head -1``),
Ctrl-C, a terminal where a binary model would go; and IN == OUT, the data files OUT
reads and the messages, whose streams are ordinary, in this process."""

from __future__ import annotations

import json
import os
import pathlib
import pty
import signal
import subprocess
import sys
import textwrap

import onnx
import pytest

from tests.helpers import cli, parse, weighted_model

ROOT = pathlib.Path(__file__).resolve().parents[1]

SIMPLE = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y) {
  [the_map] y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
}"""

# The body calls an op nobody knows: the lowering fails (exit 1).
UNKNOWABLE = """<ir_version: 8, opset_import: ["" : 17, "custom" : 1]>
g (seq(float[N]) x) => (float z) {
  [mystery] y = SequenceMap <body = body (float[N] a) => (c) { c = custom.Foo(a) }> (x)
  z = custom.Bar(y)
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
        ran = cli(words[1:], cwd=tmp_path, text=True, module=COMMANDS[words[0]])
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


# --- a terminal where a binary model would go ----------------------------------------------


def _on_a_terminal(command: list[str], which: str, cwd: pathlib.Path) -> tuple[int, bytes, str]:
    """Run ``command`` with stdout or stdin (``which``) a pseudo-terminal; the exit code,
    what reached the terminal, and stderr."""
    main, child = pty.openpty()
    streams = {"stdout": subprocess.PIPE, "stdin": subprocess.DEVNULL}
    streams[which] = child
    done = subprocess.run(
        command, **streams, stderr=subprocess.PIPE, cwd=cwd, env=_env(), check=False, timeout=60
    )
    os.close(child)
    os.set_blocking(main, False)
    try:
        shown = os.read(main, 1 << 16)
    except OSError:  # nothing written: EAGAIN, or EIO once the other end is closed
        shown = b""
    os.close(main)
    return done.returncode, shown, done.stderr.decode()


def test_out_dash_on_a_terminal_is_refused_as_gzip_does(tmp_path, model):
    code, shown, err = _on_a_terminal(
        [sys.executable, "-m", "lowering", str(model), "-"], "stdout", tmp_path
    )
    assert code == 2 and shown == b""
    assert err.splitlines()[-1] == (
        "onnx-lower: error: refusing to write a binary model to a terminal; "
        "redirect stdout or name OUT"
    )


def test_in_dash_on_a_terminal_is_refused(tmp_path):
    code, _, err = _on_a_terminal(
        [sys.executable, "-m", "lowering", "-", str(tmp_path / "out.onnx")], "stdin", tmp_path
    )
    assert code == 2 and not (tmp_path / "out.onnx").exists()
    assert "refusing to read a binary model from a terminal" in err.splitlines()[-1]


def test_out_dash_into_a_pipe_still_streams(tmp_path, model):
    done = subprocess.run(
        [sys.executable, "-m", "lowering", "-q", str(model), "-"],
        capture_output=True,
        env=_env(),
        check=True,
    )
    assert "SequenceMap" not in {n.op_type for n in onnx.load_from_string(done.stdout).graph.node}


# --- IN == OUT: allowed, replaced atomically once the lowering succeeded -------------------


def _lower(*args: object, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return cli(list(args), cwd=cwd, text=True)


def test_in_equals_out_replaces_in_with_its_lowering(tmp_path, model):
    done = _lower(model, model, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"lowered 1 SequenceMap node in {model} -> {model}" in done.stderr
    assert "SequenceMap" not in {n.op_type for n in onnx.load(model).graph.node}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


def test_in_equals_out_is_left_as_it_was_when_the_lowering_fails(tmp_path):
    source = tmp_path / "in.onnx"
    onnx.save(parse(UNKNOWABLE), source)
    before = source.read_bytes()
    done = _lower(source, source, cwd=tmp_path)
    assert done.returncode == 1 and "cannot be determined" in done.stderr
    assert source.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


# --- which data files OUT reads ------------------------------------------------------------


def test_the_summary_names_ins_data_files_that_out_reads(tmp_path):
    source = weighted_model(tmp_path, 2, 64, real=True)
    report = tmp_path / "r.json"
    done = _lower(source, tmp_path / "out.onnx", "--report", report, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        f"  {tmp_path / 'out.onnx'} reads its weights from weights.bin beside it "
        f"({source}'s data file, not copied): ship it with {tmp_path / 'out.onnx'}, "
        "or give --external-data NAME for a file of its own"
    ) in done.stderr.splitlines()
    assert json.loads(report.read_text())["files"]["shared"] == ["weights.bin"]


@pytest.mark.parametrize("where", ["elsewhere", "external-data", "unchanged"])
def test_the_summary_names_no_shared_file_when_out_has_its_own(tmp_path, where):
    (tmp_path / "in").mkdir()
    source = weighted_model(tmp_path / "in", 2, 64, real=True)
    out = tmp_path / ("out" if where == "elsewhere" else "in") / "out.onnx"
    out.parent.mkdir(exist_ok=True)
    flags = ["--external-data", "out.onnx.data"] if where == "external-data" else []
    if where == "unchanged":  # nothing to lower: OUT is IN's bytes, and reads IN's data
        model = onnx.load(source, load_external_data=False)
        del model.graph.node[:]
        model.graph.node.append(onnx.helper.make_node("Identity", ["x"], ["y"]))
        onnx.save(model, source)
    done = _lower(source, out, *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = "reads its weights from weights.bin beside it" in done.stderr
    assert said == (where == "unchanged"), done.stderr


def test_help_and_the_docs_say_what_in_equals_out_does():
    """One decision, said alike: allowed, IN replaced once the lowering succeeded."""
    done = subprocess.run(
        [sys.executable, "-m", "lowering", "--help"],
        capture_output=True,
        text=True,
        env={**_env(), "COLUMNS": "200"},
        check=True,
    )
    assert (
        "never modified unless it is also OUT (then replaced atomically, only once the "
        "lowering succeeded)" in done.stdout
    )
    robustness = " ".join((ROOT / "docs" / "robustness.md").read_text().split())
    assert (
        "IN == OUT is allowed and replaces IN, atomically and only once the lowering "
        "succeeded" in robustness
    )
    assert "even when IN == OUT" not in robustness


# --- messages ------------------------------------------------------------------------------

CUSTOM = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (float[N] y) {
  [foo] y = FooBar(x)
}"""


def test_a_custom_op_in_the_default_domain_needs_no_opset(tmp_path):
    source = tmp_path / "foo.onnx"
    onnx.save(parse(CUSTOM), source)
    done = _lower(source, tmp_path / "out.onnx", "--target-opset", "11", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        f"onnx-lower: error: {source}: the model cannot declare opset 11 (FooBar x1 is not an "
        "ONNX op at opset 17): FooBar (node 'foo' in main graph 'g'): FooBar is not an ONNX op "
        "at opset 17, the opset the model declares (a custom op needs a domain of its own)\n"
    )
    assert "needs" not in done.stderr.replace("needs a domain", "")


def test_the_checker_warning_says_what_was_done(tmp_path):
    source = tmp_path / "foo.onnx"
    onnx.save(parse(CUSTOM), source)
    done = _lower(source, tmp_path / "out.onnx", cwd=tmp_path)
    assert done.returncode == 0
    warning, summary = done.stderr.splitlines()
    assert warning.endswith("; it was copied as it is") and "lowered" not in warning
    assert "nothing to lower" in summary and "unchanged, byte for byte" in summary
