"""Replay files (verify-runK-*.npz): where they go (--replay-dir, else $TMPDIR),
written only where a replay can help; inputs the two models differ on said first."""

from __future__ import annotations

import pathlib
import subprocess

import onnx

from tests.helpers import cli, parse

H = '<ir_version: 8, opset_import: ["" : 17]>'
A = H + "\ng (float[3] x) => (float[3] y, float[3] z) {\n  y = Neg(x)\n  z = Abs(x)\n}"
OTHERS = {
    "renamed input": A.replace("x", "w"),
    "other static dim": A.replace("[3]", "[4]"),
    "other input kind": A.replace("(float[3] x)", "(int64[3] x)").replace(
        "y = Neg(x)\n  z = Abs(x)", "f = Cast <to = 1> (x)\n  y = Neg(f)\n  z = Abs(f)"
    ),
}
WRONG = A.replace("z = Abs(x)", "z = Neg(x)")  # differs on values: a replay reproduces it
RENAMED_OUTPUT = A.replace("float[3] z)", "float[3] q)").replace("z = Abs", "q = Abs")


def _verify(tmp: pathlib.Path, *args: object, lower: bool = False) -> subprocess.CompletedProcess:
    module = "lowering" if lower else "lowering.verify"
    return cli(list(args), module=module, text=True, env={"TMPDIR": str(tmp)})


def _saved(folder: pathlib.Path, name: str, text: str) -> pathlib.Path:
    onnx.save(parse(text), folder / name)
    return folder / name


def _replays(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(folder.glob("verify-run*.npz"))


def _folders(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    (tmp_path / "tmp").mkdir()
    (tmp_path / "models").mkdir()
    return tmp_path / "tmp", tmp_path / "models"


def test_inputs_that_differ_are_said_first_and_nothing_is_saved(tmp_path):
    tmp, models = _folders(tmp_path)
    a = _saved(models, "a.onnx", A)
    for name, text in OTHERS.items():
        b = _saved(models, "b.onnx", text)
        done = _verify(tmp, a, b, "--runs", "3")
        assert done.returncode == 1, name
        lines = done.stderr.splitlines()
        assert lines[0].startswith("B cannot take A's inputs: "), (name, lines)
        said = lines[0].removeprefix("B cannot take A's inputs: ")
        assert lines[-1] == f"{b} does not match {a}: {said}"
        assert _replays(tmp) == [] and "replay" not in done.stderr, name


def test_other_outputs_are_not_replayed(tmp_path):
    tmp, models = _folders(tmp_path)
    done = _verify(tmp, _saved(models, "a.onnx", A), _saved(models, "b.onnx", RENAMED_OUTPUT))
    assert done.returncode == 1 and "output 1 is 'z' in A but 'q' in B" in done.stderr
    assert _replays(tmp) == []


def test_a_value_mismatch_is_saved_in_tmpdir_and_replays(tmp_path):
    tmp, models = _folders(tmp_path)
    a, b = _saved(models, "a.onnx", A), _saved(models, "b.onnx", WRONG)
    done = _verify(tmp, a, b, "--runs", "3")
    assert done.returncode == 1
    (saved,) = _replays(tmp)
    assert f"inputs of failing run 0 saved to {saved}; replay with --inputs {saved}" in done.stderr
    again = _verify(tmp, a, b, "--inputs", saved)
    assert again.returncode == 1 and "(1 run)" in again.stderr
    assert _replays(tmp) == [saved]  # a replay of a file saves no copy


def test_replay_dir_says_where_both_commands_save(tmp_path):
    tmp, models = _folders(tmp_path)
    replays = tmp_path / "replays"
    replays.mkdir()
    a, b = _saved(models, "a.onnx", A), _saved(models, "b.onnx", WRONG)
    done = _verify(tmp, a, b, "--runs", "2", "--replay-dir", replays)
    assert done.returncode == 1
    (saved,) = _replays(replays)
    assert saved.name.startswith("verify-run0-") and str(saved) in done.stderr
    assert _replays(tmp) == []
    # onnx-lower --verify: a model lowered right saves nothing, wherever asked
    lowered = _verify(tmp, a, models / "out.onnx", "--verify", "--replay-dir", replays, lower=True)
    assert lowered.returncode == 0 and _replays(replays) == [saved]


def test_a_replay_dir_that_cannot_be_used_is_a_usage_error(tmp_path):
    tmp, models = _folders(tmp_path)
    a = _saved(models, "a.onnx", A)
    for lower, args in ((False, [a, a]), (True, [a, models / "out.onnx", "--verify"])):
        done = _verify(tmp, *args, "--replay-dir", tmp_path / "nowhere", lower=lower)
        assert done.returncode == 2
        assert f"--replay-dir {tmp_path / 'nowhere'}: no such folder" in done.stderr
    assert not (models / "out.onnx").exists()
