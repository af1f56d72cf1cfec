"""Softmax, LogSoftmax and Hardmax below 13 flatten at their axis; going up to
13 and later, the result is reshaped back to the input's shape, which may
hold a 0.

Reshape-13 reads a 0 in its shape as "copy the data's dim here", and the
flattened data is 2-D: a 0 past position 1 was "Invalid position of 0" in
onnxruntime, a 0 at position 1 copied the wrong dim (structural fuzzer,
feature old_opset). The Reshape is written as Reshape-14 with allowzero,
which the Reshape adapter converts for 13 without a Reshape-13 that could
see the 0. Every op, axis and position of a 0, against onnxruntime on the
original.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import lowering
from tests.cases.node_cases import ort_run
from tests.helpers import assert_same

SHAPES = [(4, 2, 5, 0), (4, 0, 5, 3), (0, 2, 5, 3), (4, 2, 5, 3)]


@pytest.mark.parametrize("target", [13, 14])
@pytest.mark.parametrize("axis", [1, 2, -3])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_a_coerced_softmax_goes_up_on_empty_inputs(op, shape, axis, target):
    node = helper.make_node(op, ["x"], ["y"], axis=axis)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 1, ["a", "b", "c", "d"])],
        [helper.make_tensor_value_info("y", 1, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=6)
    feeds = {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    result = lowering.lower(model, target_opset=target)
    assert_same(ort_run(result, feeds), ort_run(model, feeds))
