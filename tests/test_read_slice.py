"""``read_slice``: every way the rewrites read part of a tensor, against numpy.

Floats take Gather where one entry is read, strings always Slice (onnxruntime's
Gather is wrong on them); indices count from either end, constant or fed;
slices of any length keep the axis; Squeeze spells its axes for the opset.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from lowering.maps.loop_body import read_slice
from lowering.passes.fresh_names import FreshNamesPass
from tests.helpers import run

X = np.arange(5 * 3, dtype=np.float32).reshape(5, 3)


def _model(elem: ir.DataType, index, axis, keepdims, size, opset, shape) -> onnx.ModelProto:
    x = ir.Value(name="x", type=ir.TensorType(elem), shape=ir.Shape(X.shape))
    inputs = [x]
    if index == "fed":
        index = ir.Value(name="i", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))
        inputs.append(index)
    nodes = read_slice(x, index, axis, keepdims, elem, opset, size=size)
    y = nodes[-1].outputs[0]
    y.type, y.shape = ir.TensorType(elem), ir.Shape(shape)
    graph = ir.Graph(inputs, [y], nodes=nodes, name="g", opset_imports={"": opset})
    model = ir.Model(graph, ir_version=8)
    FreshNamesPass()(model)
    return ir.to_proto(model)


# (index, axis, keepdims, size) -> the numpy slice
CASES = {
    "first_row": (0, 0, False, 1, lambda x: x[0]),
    "last_row_negative": (-1, 0, False, 1, lambda x: x[-1]),
    "numpy_index": (np.int64(2), 1, False, 1, lambda x: x[:, 2]),
    "row_kept": (3, 0, True, 1, lambda x: x[3:4]),
    "rows_kept": (1, 0, True, 3, lambda x: x[1:4]),
    "last_rows_negative": (-2, 0, True, 2, lambda x: x[-2:]),
    "middle_rows_negative": (-4, 0, True, 2, lambda x: x[-4:-2]),
    "no_rows": (2, 0, True, 0, lambda x: x[2:2]),
    "fed_index": ("fed", 0, False, 1, lambda x: x[-2]),
}


@pytest.mark.parametrize("opset", [12, 17])
@pytest.mark.parametrize("elem", ["float", "string"])
@pytest.mark.parametrize("name", list(CASES))
def test_a_slice_reads_what_numpy_reads(name, elem, opset):
    index, axis, keepdims, size, oracle = CASES[name]
    dtype = ir.DataType.FLOAT if elem == "float" else ir.DataType.STRING
    x = X if elem == "float" else X.astype(np.int64).astype(str).astype(object)
    expected = oracle(x)
    proto = _model(dtype, index, axis, keepdims, size, opset, expected.shape)
    onnx.checker.check_model(proto, full_check=True)
    ops = [node.op_type for node in proto.graph.node]
    assert ("Gather" in ops) == (elem == "float" and size == 1)
    feeds = {"x": x} if index != "fed" else {"x": x, "i": np.array(-2, np.int64)}
    (y,) = run(proto, feeds)
    assert y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)


def test_a_longer_slice_needs_a_constant_index_and_the_axis_kept():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(X.shape))
    with pytest.raises(ValueError, match="longer than one entry"):
        read_slice(x, 1, 0, False, ir.DataType.FLOAT, 17, size=2)
