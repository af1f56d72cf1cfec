"""A Scan whose results may be empty stacks them along an axis other than 0 by a Transpose.

onnxruntime's Scan kills the process (SIGFPE) stacking an empty result
along an axis other than 0 (measured: `scan_output_axes` 1 of a [2, 0]
result, and of a [0] one); along 0 it runs. A map over the rows
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


_LAST = 'r = Resize <mode = "nearest"> (c, , scales)'
_LAST_FLAT = """z = Resize <mode = "nearest"> (c, , scales)
            flat = Constant <value = int64[1] {-1}> ()
            r = Reshape (z, flat)"""


def _model(width: int, axis: int, flat: bool = False):
    # Each row is sliced to ``width`` columns (0: empty), then a Resize (no
    # batching rule) keeps it: a Scan over the rows, its results maybe empty.
    return parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N,2,3] x) => (float[{"?,?" if flat else "?,?,?"}] y) {{
      s = SplitToSequence <axis = 0, keepdims = 0> (x)
      m = SequenceMap <body = body (float[2,3] e) => (float[{"?" if flat else "?,?"}] r) {{
            starts = Constant <value = int64[1] {{0}}> ()
            ends = Constant <value = int64[1] {{{width}}}> ()
            axes = Constant <value = int64[1] {{1}}> ()
            c = Slice (e, starts, ends, axes)
            scales = Constant <value = float[2] {{1.0, 1.0}}> ()
            {_LAST_FLAT if flat else _LAST}
          }}> (s)
      y = ConcatFromSequence <axis = {axis}, new_axis = 1> (m)
    }}""")


@pytest.mark.parametrize(
    ("flat", "axis"), [(False, 0), (False, 1), (False, 2), (True, 0), (True, 1)]
)
@pytest.mark.parametrize("width", [0, 3])
def test_a_scan_of_empty_results_runs_on_every_axis(width, axis, flat, tmp_path):
    model = _model(width, axis, flat)
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
