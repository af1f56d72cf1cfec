"""The README is true: its commands run and print what it shows, its claims hold.

Every ```console block is a transcript: ``$ `` lines are commands, the lines
after one are its output (stdout and stderr), compared exactly except for
the elapsed time. They run in a temporary folder holding a copy of
``examples/``. ``pip`` lines are setup, not run. Every ```python block runs
too, beside a ``model.onnx``.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from lowering.sessions import open_session
from tests.helpers import parse
from tests.test_differential import CASES

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
TIME = re.compile(r"\(in \d+\.\d\d s\)")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, flags=re.DOTALL | re.MULTILINE)


def _transcripts() -> list[tuple[str, str]]:
    """(command, expected output) for every command in every console block."""
    pairs: list[tuple[str, list[str]]] = []
    for block in _blocks("console"):
        for line in block.splitlines():
            if line.startswith("$ "):
                pairs.append((line[2:], []))
            else:
                pairs[-1][1].append(line)
    return [(command, "\n".join(out)) for command, out in pairs]


TRANSCRIPTS = [(c, out) for c, out in _transcripts() if not c.startswith("pip ")]


def test_the_readme_has_transcripts():
    assert len(TRANSCRIPTS) >= 2 and len(_blocks("python")) >= 2


@pytest.fixture
def folder(tmp_path) -> pathlib.Path:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copy(ROOT / "examples" / "torch_atleast_2d.onnx", tmp_path / "model.onnx")
    return tmp_path


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.mark.parametrize("command, expected", TRANSCRIPTS, ids=[c for c, _ in TRANSCRIPTS])
def test_console_transcript(folder, command, expected):
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "lowering"], f"unknown command in the README: {command}"
    result = subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=folder,
        env=_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    printed = (result.stdout + result.stderr).rstrip("\n")
    assert TIME.sub("(in T)", printed) == TIME.sub("(in T)", expected)


@pytest.mark.parametrize("code", _blocks("python"))
def test_python_block(folder, code):
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env=_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# --- the "Why" section --------------------------------------------------------------------


def test_onnx_expands_torchs_untyped_map_with_dtype_0():
    model = onnx.load(ROOT / "examples" / "torch_atleast_2d.onnx")
    node = next(n for n in model.graph.node if n.op_type == "SequenceMap")
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in [*inferred.graph.value_info, *inferred.graph.input]}
    schema = onnx.defs.get_schema("SequenceMap", model.opset_import[0].version)
    body = onnx.FunctionProto()
    body.ParseFromString(
        schema.get_context_dependent_function(
            node.SerializeToString(), [types[i].SerializeToString() for i in node.input]
        )
    )
    empties = [n for n in body.node if n.op_type == "SequenceEmpty"]
    assert empties and all(a.i == 0 for n in empties for a in n.attribute if a.name == "dtype")


def test_onnxruntime_runs_torchs_untyped_maps():
    data = ROOT / "tests" / "data" / "torch"
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        session = open_session(data / f"{name}.onnx")
        expected = np.load(data / f"{name}.npz")
        feeds = {i.name: expected[f"input_{k}"] for k, i in enumerate(session.get_inputs())}
        for k, output in enumerate(session.run(None, feeds)):
            np.testing.assert_array_equal(output, expected[f"output_{k}"])


def test_onnxruntime_fails_on_a_nested_map():
    with pytest.raises(Exception, match="INVALID_GRAPH.*_inlfunc_SequenceMap"):
        ort.InferenceSession(
            parse(CASES["nested_sequence_map"].text).SerializeToString(),
            providers=["CPUExecutionProvider"],
        )
