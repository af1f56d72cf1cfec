"""Ops whose axes moved from an attribute to an input are spelt for their opset.

Every op ``lowering.irutils.axes`` knows, at every opset from 11 to 21, in a
one-node model that must pass the full checker and match numpy in
onnxruntime; and the rewrite that emits one outside any map
(``EliminateSequencesPass`` reading a concat of a construct) at 11 to 13.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.irutils.axes import axes_as_input, with_axes
from lowering.passes.fresh_names import FreshNamesPass
from tests.helpers import parse, run

NEWEST = 21  # the newest opset the generator draws maps at
X = np.arange(24, dtype=np.float32).reshape(2, 1, 3, 4)

# op -> (axes, its attributes, numpy's result)
OPS = {
    "Squeeze": ([1], {}, lambda x: np.squeeze(x, 1)),
    "Unsqueeze": ([0, 3], {}, lambda x: x[None, :, :, None]),
    "Split": ([1, 2], {"axis": 2}, lambda x: np.split(x, [1], axis=2)),
    "ReduceSum": ([2, 3], {"keepdims": 0}, lambda x: x.sum(axis=(2, 3))),
    "ReduceMean": ([-1], {"keepdims": 1}, lambda x: x.mean(axis=-1, keepdims=True)),
    "ReduceMax": ([0, 2], {"keepdims": 0}, lambda x: x.max(axis=(0, 2))),
}


@pytest.mark.parametrize("opset", range(11, NEWEST + 1))
@pytest.mark.parametrize("op_type", list(OPS))
def test_an_op_with_axes_is_valid_and_right_at_every_opset(op_type, opset):
    axes, attributes, oracle = OPS[op_type]
    expected = oracle(X)
    expected = expected if isinstance(expected, list) else [expected]
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(X.shape))
    nodes = with_axes(op_type, x, axes, opset, attributes, num_outputs=len(expected))
    outputs = list(nodes[-1].outputs)
    for output, wanted in zip(outputs, expected, strict=True):
        output.type = ir.TensorType(ir.DataType.FLOAT)
        output.shape = ir.Shape(wanted.shape)
    graph = ir.Graph([x], outputs, nodes=nodes, name="g", opset_imports={"": opset})
    model = ir.Model(graph, ir_version=8)
    FreshNamesPass()(model)
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    inputs_of_op = len(proto.graph.node[-1].input)
    assert inputs_of_op == (2 if axes_as_input(op_type, opset) else 1)
    for actual, wanted in zip(run(proto, {"x": X}), expected, strict=True):
        np.testing.assert_allclose(actual, wanted, rtol=1e-6)


def test_only_ops_whose_axes_moved_are_asked_about():
    with pytest.raises(ValueError, match="Concat"):
        axes_as_input("Concat", 13)


@pytest.mark.parametrize("opset", [11, 12, 13])
def test_a_concat_of_a_construct_unsqueezes_as_its_opset_does(opset):
    source = f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g (float[3] a, float[3] b) => (float[3,2] y) {{
          s = SequenceConstruct (a, b)
          y = ConcatFromSequence <axis = 1, new_axis = 1> (s)
        }}"""
    model = ir.serde.deserialize_model(parse(source))
    lowering.EliminateSequencesPass()(model)
    FreshNamesPass()(model)
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    assert "SequenceConstruct" not in {n.op_type for n in proto.graph.node}
    a, b = np.arange(3, dtype=np.float32), np.arange(3, 6, dtype=np.float32)
    (y,) = run(proto, {"a": a, "b": b})
    np.testing.assert_array_equal(y, np.stack([a, b], axis=1))
