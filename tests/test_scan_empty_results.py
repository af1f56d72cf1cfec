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
x = np.load(sys.argv[1])
for path in sys.argv[2:]:
    model = onnx.load(path)
    for optimize in (False, True):
        out = open_session(model.SerializeToString(), optimize=optimize).run(None, {"x": x})[0]
    np.save(path[: -len(".onnx")] + ".npy", out)
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


CASES = [
    (width, axis, flat)
    for width in (0, 3)
    for flat, axis in [(False, 0), (False, 1), (False, 2), (True, 0), (True, 1)]
]


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Every case's original and lowered model, run in one child process (a
    crash kills the child, and the cases it had not reached fail with it)."""
    folder = tmp_path_factory.mktemp("scans")
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    np.save(folder / "x.npy", x)
    paths = []
    for case in CASES:
        model = _model(*case)
        result = lowering.lower(model)
        assert "Scan" in [n.op_type for n in result.graph.node], case
        for name, m in (("original", model), ("lowered", result)):
            paths.append(folder / ("{}-{}-{}-{}.onnx".format(name, *case)))
            paths[-1].write_bytes(m.SerializeToString())
    run = subprocess.run(
        [sys.executable, "-c", _RUN, str(folder / "x.npy"), *map(str, paths)],
        check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return folder, run


@pytest.mark.parametrize(("width", "axis", "flat"), CASES)
def test_a_scan_of_empty_results_runs_on_every_axis(ran, width, axis, flat):
    folder, run = ran
    outputs = {}
    for name in ("original", "lowered"):
        path = folder / f"{name}-{width}-{axis}-{flat}.npy"
        assert path.exists(), (name, run.returncode, run.stderr[-500:])
        outputs[name] = np.load(path)
    assert outputs["lowered"].shape == outputs["original"].shape
    np.testing.assert_array_equal(outputs["lowered"], outputs["original"])
