"""``--runtime X`` says when X will refuse the output (issue 34, item 5).

Where ops X's profile lacks remain in the output, whether the tool wrote
them or they came with IN, the CLI writes nothing and exits 1 with one
line naming each op, how many, and where the first is;
``--allow-unsupported`` writes it anyway, with that line as a warning
(said even with ``-q``). A model left with none of them is written as
before, and onnxruntime (the default) lacks nothing.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from lowering.cli import main
from lowering.runtimes.profiles import RUNTIMES
from tests.helpers import op_types, parse, run

H = '<ir_version: 8, opset_import: ["" : 17]>'

MODELS = {
    # A sequence the graph returns: no form removes it.
    "returned": f"""{H}
    g (float[2] a, float[2] b) => (seq(float[2]) s) {{
      [build] s = SequenceConstruct(a, b)
    }}""",
    # Elements of two shapes read at a fed position: SequenceAt stays.
    "ragged read": f"""{H}
    g (float[2,3] x, float[1,3] y, int64 i) => (float[?,3] z) {{
      s = SequenceConstruct(x, y)
      [read] z = SequenceAt(s, i)
    }}""",
    # No sequence op left: written, whatever the runtime.
    "read as tensors": f"""{H}
    g (float[2,3] x, float[2,3] y, int64 i) => (float[2,3] z) {{
      s = SequenceConstruct(x, y)
      z = SequenceAt(s, i)
    }}""",
}
#: What each model leaves: the ops a runtime lacking them refuses.
LEFT = {
    "returned": {"SequenceConstruct"},
    "ragged read": {"SequenceConstruct", "SequenceAt"},
    "read as tensors": set(),
}


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
@pytest.mark.parametrize("name", list(MODELS))
def test_a_runtime_that_would_refuse_the_output_is_said_in_one_line(
    tmp_path, capsys, name, runtime
):
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(parse(MODELS[name]), source)
    refused = sorted(LEFT[name] & RUNTIMES[runtime].lacks)
    code = main([str(source), str(target), "--runtime", runtime])
    err = capsys.readouterr().err
    if not refused:
        assert code == 0 and target.exists()
        assert "lacks" not in err
        return
    assert code == 1 and not target.exists(), "nothing written"
    [line] = err.splitlines()
    assert line.startswith(f"onnx-lower: error: {source}: {runtime} lacks ops the output holds: ")
    for op in refused:
        assert f"{op} x1 (first: node " in line
    assert "in main graph 'g'" in line and "--allow-unsupported" in line
    # Allowed: written, computing what IN computes, and said as a warning even with -q.
    code = main([str(source), str(target), "--runtime", runtime, "--allow-unsupported", "-q"])
    [warning] = capsys.readouterr().err.splitlines()
    assert code == 0 and target.exists()
    assert warning.startswith(f"onnx-lower: warning: {target}: {runtime} lacks ops the output")
    assert set(refused) <= set(op_types(onnx.load(target)))


def test_the_refusal_is_in_the_report(tmp_path):
    source, target, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(parse(MODELS["returned"]), source)
    code = main([str(source), str(target), "--runtime", "tract", "--report", str(report), "-q"])
    assert code == 1
    written = json.loads(report.read_text())
    assert written["exit_code"] == 1
    assert "tract lacks ops the output holds: SequenceConstruct x1" in written["error"]


def test_a_model_read_as_tensors_runs_as_its_original(tmp_path):
    """The model the other runtimes accept is the original's computation."""
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    model = parse(MODELS["read as tensors"])
    onnx.save(model, source)
    assert main([str(source), str(target), "--runtime", "tinygrad", "-q"]) == 0
    x, y = np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)
    for i in range(-2, 2):
        feeds = {"x": x, "y": y, "i": np.array(i, np.int64)}
        np.testing.assert_array_equal(run(onnx.load(target), feeds)[0], run(model, feeds)[0])
