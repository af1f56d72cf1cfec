"""Going up from below 11, the Resizes the library writes are fixed wherever it renames them.

``onnx.version_converter`` renames the outputs of the nodes it replaces
that are not graph outputs (``_v_10``). The fixes of its Resizes (asymmetric
coordinates, nearest by floor) found their node by output name, so an
Upsample read by another node went unfixed: half_pixel, 0.92 off (structural
fuzzer, feature old_opset). Every chain of them, at every target, against
onnxruntime on the original.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import helper

import lowering
from tests.cases.node_cases import ort_run
from tests.helpers import assert_same

SCALES = [1.0, 1.0, 1.5, 2.5]


def _upsample(opset: int, mode: str, x: str, y: str) -> list[onnx.NodeProto]:
    if opset == 7:
        return [helper.make_node("Upsample", [x], [y], mode=mode, scales=SCALES)]
    scales = helper.make_node(
        "Constant",
        [],
        [f"{y}_scales"],
        value=onnx.numpy_helper.from_array(np.array(SCALES, np.float32)),
    )
    op = "Resize" if opset == 10 else "Upsample"
    return [scales, helper.make_node(op, [x, f"{y}_scales"], [y], mode=mode)]


def _chain(opset: int, modes: tuple[str, ...], tail: bool) -> onnx.ModelProto:
    nodes, x = [], "x"
    for k, mode in enumerate(modes):
        nodes += _upsample(opset, mode, x, f"u{k}")
        x = f"u{k}"
    outputs = [x]
    if tail:  # the last one read by another node too: renamed as well
        nodes.append(helper.make_node("Relu", [x], ["r"]))
        outputs = ["r"]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 3, 4])],
        [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=3)


@pytest.mark.parametrize("target", [11, 13])
@pytest.mark.parametrize("tail", [False, True])
@pytest.mark.parametrize("modes", list(itertools.product(["nearest", "linear"], repeat=2)))
@pytest.mark.parametrize("opset", [7, 9, 10])
def test_every_resize_the_library_writes_is_fixed(opset, modes, tail, target):
    model = _chain(opset, modes, tail)
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)}
    result = lowering.lower(model, target_opset=target)
    resizes = [n for n in result.graph.node if n.op_type == "Resize"]
    assert len(resizes) == len(modes)
    for node in resizes:
        modes_written = {a.name: a.s for a in node.attribute}
        assert modes_written["coordinate_transformation_mode"] == b"asymmetric"
    assert_same(ort_run(result, feeds), ort_run(model, feeds))
