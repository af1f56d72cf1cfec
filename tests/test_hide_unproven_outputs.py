"""Lowered maps in If branches and Scan bodies, whose element shapes ONNX infers wrong.

onnxruntime allocates If and Scan outputs from ONNX's inferred shapes; a map
hid its results' shapes in sequences, a lowered map's tensors do not
(:mod:`lowering.passes.hide_unproven_outputs`). MaxPool with ``ceil_mode`` and an
end pad is inferred [1,1,3] on [1,1,4], computed [1,1,2]. Every strategy,
wrapper, reader and source is run against onnxruntime on the original, at
n = 1 and 3 (the readers fail on an empty map in the original too).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.runtimes.sessions import open_session
from tests.helpers import assert_same, lowered, parse

POOL = "MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1>"
READERS = {
    "sequence_at": "o = SequenceAt(m, zero)",
    "concat": "o = ConcatFromSequence <axis = 0, new_axis = 1> (m)",
    "relu_of_at": "a = SequenceAt(m, zero)\n o = Relu(a)",
}
RANKS = {"sequence_at": 3, "concat": 4, "relu_of_at": 3}
SOURCES = {
    "split": "parts = SplitToSequence <axis = 0, keepdims = 0> (x)",
    "construct": "x0 = Gather <axis = 0> (x, zero)\n parts = SequenceConstruct(x0, x0)",
}
OPTIONS = {"auto": {}, "loop": {"strategy": "loop"}, "no_unroll": {"max_unroll": 0}}


def _model(wrapper: str, reader: str, source: str) -> onnx.ModelProto:
    dims = ",".join(f"d{k}" for k in range(RANKS[reader]))
    inner = f"""
        zero = Constant <value = int64 {{0}}> ()
        {SOURCES[source]}
        m = SequenceMap <body = body (float[1,1,4] e) => (float[1,1,w] c) {{
              c = {POOL} (e)
            }}> (parts)
        {READERS[reader]}"""
    other = (  # of the same rank, its own names
        "o2 = Identity(x)"
        if reader == "concat"
        else "k = Constant <value = int64 {0}> ()\n o2 = Gather <axis = 0> (x, k)"
    )
    if wrapper == "scan":
        graph = f"""ys = Scan <num_scan_inputs = 1, body = sb (float[2] r) => (float[{dims}] o) {{
            {inner}
          }}> (xs)"""
    else:
        graph = f"""ys = If (b) <then_branch = tb () => (float[{dims}] o) {{
            {inner}
          }}, else_branch = eb () => (float[{dims}] o2) {{
            {other}
          }}>"""
    return parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N,1,1,4] x, float[K,2] xs, bool b) => (float[S,{dims}] ys) {{
      {graph}
    }}""")


def _run(model: onnx.ModelProto, feeds: dict) -> list:
    return open_session(model.SerializeToString(), optimize=False).run(None, feeds)


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("wrapper", ["scan", "if"])
def test_lowered_maps_in_branches_and_bodies_run_like_the_original(wrapper, reader, source, option):
    model = _model(wrapper, reader, source)
    if wrapper == "if":  # the graph output has no scan axis
        del model.graph.output[0].type.tensor_type.shape.dim[0]
    result = lowered(model, **OPTIONS[option])
    rng = np.random.default_rng(0)
    for n in (1, 3):
        feeds = {
            "x": rng.standard_normal((n, 1, 1, 4)).astype(np.float32),
            "xs": rng.standard_normal((2, 2)).astype(np.float32),
            "b": np.array(True),
        }
        expected = _run(model, feeds)
        assert expected[0].shape[-1] == 2  # ONNX infers 3
        assert_same(_run(result, feeds), expected, f"n={n}")


def test_only_subgraphs_that_hold_a_lowered_map_are_touched():
    """An If whose branch returns a MaxPool of its own (no map in it) keeps its
    output as it was: the hiding is for what the lowering exposed."""
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[1,1,4] img, seq(float[3]) s, bool b) => (float[1,1,w] y, seq(float[3]) t) {{
      y = If (b) <then_branch = tb () => (float[1,1,w] p) {{ p = {POOL} (img) }},
                  else_branch = eb () => (float[1,1,w] q) {{ q = {POOL} (img) }}>
      t = SequenceMap <body = body (float[3] e) => (float[3] c) {{ c = Relu(e) }}> (s)
    }}""")
    result = ir.serde.deserialize_model(lowering.lower(model))
    [if_node] = [n for n in result.graph if n.op_type == "If"]
    for attr in if_node.attributes.values():
        assert [n.op_type for n in attr.as_graph()] == ["MaxPool"]
