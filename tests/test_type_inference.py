"""Types taken from ONNX shape inference claim no more than the model does.

Inference names an unknown dim itself (``unk__0``) and hands the name on,
also through a sequence's element type to every element read from it. The
long structural fuzz run found the result: a map lowered to a Loop, with
elements at different positions declared with the same dim, and
onnxruntime reusing one's buffer for the other ("Shape mismatch attempting
to re-use buffer. {1,2} != {2,2}").
"""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.type_inference import TypeOracle
from tests.helpers import assert_same, parse, run
from tests.test_optimize import FUZZ, _fuzz_feeds


@pytest.mark.parametrize(
    ("element", "expected"),
    [("bool[?,2]", [None, 2]), ("bool[N,2]", ["N", 2]), ("bool[3,2]", [3, 2])],
)
def test_an_untyped_body_gets_the_dims_the_model_declares_and_no_invented_ones(element, expected):
    model = ir.serde.deserialize_model(
        parse(f"""<ir_version: 8, opset_import: ["" : 17]>
        g (seq({element}) s) => (seq({element}) y) {{
          y = SequenceMap <body = body (e) => (d) {{ d = Not (e) }}> (s)
        }}""")
    )
    (node,) = model.graph
    twin = TypeOracle(model).twin(node, model.graph)
    assert twin is not None
    body = twin.attributes["body"].as_graph()
    for value in (body.inputs[0], body.outputs[0]):
        dims = [d.value if isinstance(d, ir.SymbolicDim) else d for d in value.shape]
        assert dims == expected


@pytest.mark.parametrize("strategy", ["auto", "loop"])
def test_elements_read_at_different_positions_do_not_share_an_invented_dim(strategy):
    """The fuzzer's shrunk example: nested maps in Loop, Scan, If and function
    bodies over ragged boolean sequences, untyped bodies."""
    model = onnx.load(FUZZ / "inferred_dims_sequence_elements.onnx")
    feeds = _fuzz_feeds("inferred_dims_sequence_elements")
    expected = run(lowering.lower(model, max_unroll=1000), feeds)  # unrolled: no Loop at all
    result = lowering.lower(model, strategy=strategy, max_unroll=0)
    onnx.checker.check_model(result, full_check=True)
    assert_same(run(result, feeds), expected)
