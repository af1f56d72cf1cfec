"""A Scan whose results may be empty stacks them along a middle axis by a Transpose.

onnxruntime's Scan kills the process (SIGFPE) stacking an empty result
along an axis strictly inside the stack (measured: `scan_output_axes` 1 of
a [2, 0] result), where axis 0 and the last axis run. A map over the rows
of a split whose body may give an empty result, concatenated with
``new_axis = 1`` on every axis, is run in a child process (a crash would
take pytest with it) against onnxruntime on the original (structural
fuzzer, feature scan_only: a Resize to 0 rows, flattened).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import lowering
from tests.helpers import parse

_RUN = """
import sys, numpy as np, onnx
from lowering.runtimes.sessions import open_session
model = onnx.load(sys.argv[1])
x = np.load(sys.argv[2])
for optimize in (False, True):
    out = open_session(model.SerializeToString(), optimize=optimize).run(None, {"x": x})[0]
    np.save(sys.argv[3], out)
"""


def _model(width: int, axis: int):
    # Each row is sliced to ``width`` columns (0: empty), then a Resize (no
    # batching rule) keeps it: a Scan over the rows, its results maybe empty.
    return parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N,2,3] x) => (float[?,?,?] y) {{
      s = SplitToSequence <axis = 0, keepdims = 0> (x)
      m = SequenceMap <body = body (float[2,3] e) => (float[?,?] r) {{
            starts = Constant <value = int64[1] {{0}}> ()
            ends = Constant <value = int64[1] {{{width}}}> ()
            axes = Constant <value = int64[1] {{1}}> ()
            c = Slice (e, starts, ends, axes)
            scales = Constant <value = float[2] {{1.0, 1.0}}> ()
            r = Resize <mode = "nearest"> (c, , scales)
          }}> (s)
      y = ConcatFromSequence <axis = {axis}, new_axis = 1> (m)
    }}""")


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("width", [0, 3])
def test_a_scan_of_empty_results_runs_on_every_axis(width, axis, tmp_path):
    model = _model(width, axis)
    result = lowering.lower(model)
    assert "Scan" in [n.op_type for n in result.graph.node]
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    np.save(tmp_path / "x.npy", x)
    outputs = {}
    for name, m in (("original", model), ("lowered", result)):
        (tmp_path / f"{name}.onnx").write_bytes(m.SerializeToString())
        run = subprocess.run(
            [sys.executable, "-c", _RUN, str(tmp_path / f"{name}.onnx"), str(tmp_path / "x.npy"),
             str(tmp_path / f"{name}.npy")],
            check=False, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, (name, run.returncode, run.stderr[-500:])
        outputs[name] = np.load(tmp_path / f"{name}.npy")
    assert outputs["lowered"].shape == outputs["original"].shape
    np.testing.assert_array_equal(outputs["lowered"], outputs["original"])
