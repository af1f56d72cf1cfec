"""The --verify table (onnx-lower --verify, onnx-verify): past 20 outputs it groups
them as the summary does, mismatches first; "elements" counts the values compared."""

from __future__ import annotations

import pathlib
import subprocess

import onnx

from tests.helpers import cli, parse

H = '<ir_version: 8, opset_import: ["" : 17]>'


def _model(count: int, wrong: frozenset[int] = frozenset()) -> onnx.ModelProto:
    outputs = ", ".join(f"float[3,4] y{i}" for i in range(count))
    body = "\n  ".join(f"y{i} = {'Abs' if i in wrong else 'Neg'}(x)" for i in range(count))
    return parse(f"{H}\ng (float[3,4] x) => ({outputs}) {{\n  {body}\n}}")


def _saved(folder: pathlib.Path, name: str, model: onnx.ModelProto) -> pathlib.Path:
    onnx.save(model, folder / name)
    return folder / name


def _table(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("output "))
    return lines[start:]


def _run(dash_m: str, module: str, *args: object) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS``, in this process."""
    assert dash_m == "-m"
    return cli(list(args), module=module, text=True)


def test_past_20_outputs_the_table_groups_them(tmp_path):
    a = _saved(tmp_path, "a.onnx", _model(25))
    done = _run("-m", "lowering", a, tmp_path / "out.onnx", "--verify", "--runs", "3")
    assert done.returncode == 0, done.stderr
    table = _table(done.stderr)
    assert table[1].split()[:5] == ["25", "outputs", "tensor(float)", "900", "0"]
    assert table[1].endswith("ok") and table[2] == "(-v lists every output)"
    assert table[3] == "(3 runs)"
    listed = _run("-m", "lowering", a, tmp_path / "out.onnx", "--verify", "--runs", "3", "-v")
    rows = [line for line in _table(listed.stderr) if line.startswith("y")]
    assert len(rows) == 25 and all(row.split()[2] == "36" for row in rows)  # 3 runs x 12


def test_20_outputs_are_listed(tmp_path):
    a = _saved(tmp_path, "a.onnx", _model(20))
    done = _run("-m", "lowering", a, tmp_path / "out.onnx", "--verify", "--runs", "2")
    rows = [line for line in _table(done.stderr) if line.startswith("y")]
    assert len(rows) == 20 and rows[0].split()[2] == "24"
    assert "(-v lists every output)" not in done.stderr


def test_mismatches_come_first_each_named(tmp_path):
    a = _saved(tmp_path, "a.onnx", _model(30))
    b = _saved(tmp_path, "b.onnx", _model(30, frozenset({7, 22})))
    done = _run("-m", "lowering.verify", a, b, "--runs", "2")
    assert done.returncode == 1
    table = _table(done.stderr)
    assert table[1].startswith("y7 ") and "MISMATCH" in table[1]
    assert table[2].startswith("y22 ") and "MISMATCH" in table[2]
    assert table[3].split()[:5] == ["28", "more", "outputs", "tensor(float)", "672"]
    assert table[3].endswith("ok")


def test_a_sequence_output_counts_the_values_of_its_elements(tmp_path):
    model = parse(
        f"""{H}
g (float[3,4] x) => (seq(float[4]) s) {{
  s = SplitToSequence <axis = 0, keepdims = 0> (x)
}}"""
    )
    a = _saved(tmp_path, "a.onnx", model)
    done = _run("-m", "lowering.verify", a, a, "--runs", "2")
    assert done.returncode == 0, done.stderr
    assert _table(done.stderr)[1].split()[:3] == ["s", "seq(tensor(float))", "24"]
