"""Nodes ONNX sizes wrong, copied by a map's rewrite: the cases, and the models
that copy them (a map over two elements of shapes ONNX sizes apart, stacked).

Read by tests/test_claims.py and tests/test_respellings.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import helper

from tests.cases.node_cases import DOUBTED, UNTRUSTED, Case, attributes_of, c, x

# Each op whose ONNX shape is not onnxruntime's (tests/cases/node_cases.py
# lists them), mapped over two elements of different shapes for which
# onnxruntime computes one shape and ONNX infers two, and stacked. The
# original's element type has the differing dim unknown, so its inference
# sees none; unrolled, each copy reads its static element and ONNX's two
# shapes meet in the stack's Concat ("Can't merge shape info"), unless they
# are pinned. The loop forms keep the body's unknown dim.
COPIED = {
    **UNTRUSTED,
    **DOUBTED,
    # The fuzz example of seed 2401: auto_pad SAME_LOWER with ceil_mode.
    "LpPool SAME_LOWER, ceil_mode": (
        Case("LpPool", [x(1, 2, 3)], {"kernel_shape": [2], "strides": [3], "dilations": [1],
             "auto_pad": "SAME_LOWER", "p": 1, "ceil_mode": 1}), 18, (1, 2, 1),
    ),
}  # fmt: skip


COPIED = {k: v for k, v in COPIED.items() if not v[0].inputs[0].const}  # an element to map


# The cases whose sizes are not computed (lowering.irutils.computed_shapes),
# where ONNX claims a size: the map stays a Loop read through its sequences,
# or a runtime without sequence ops refuses it, saying why.
NOT_COMPUTED = {
    "Resize by sizes, not_larger": (
        Case("Resize", [x(1, 1, 4, 6), c([], np.float32), c([], np.float32), c([1, 1, 2, 2])],
             {"keep_aspect_ratio_policy": "not_larger"}), 18, (1, 1, 2, 2),
    ),
    "Einsum with an ellipsis": (
        Case("Einsum", [x(1, 2, 3), x(4, 3, 5)], {"equation": "...ij,...jk->...ik"}), 13,
        (4, 2, 5),
    ),
}  # fmt: skip


COPIED = {**COPIED, **NOT_COMPUTED}


def with_element(case: Case, shape: tuple[int, ...]) -> Case:
    value = np.random.default_rng(len(shape)).uniform(0.1, 0.9, shape)
    element = type(case.inputs[0])(value.astype(case.inputs[0].value.dtype))
    return dataclasses.replace(case, inputs=[element, *case.inputs[1:]])


def stacked_map(case: Case, other: Case | None, opset: int, result: np.ndarray) -> onnx.ModelProto:
    """SequenceConstruct(a, b), mapped by ``case``'s op (its other inputs
    constants of the body) to elements like ``result``, stacked by
    ConcatFromSequence. With no ``other``: a map over SplitToSequence(x) of
    4 elements like ``case``'s, whose body reshapes the result to
    ``result``'s shape (vectorized, a Reshape to [-1, ..]: ONNX checks the count)."""
    first = case.inputs[0].value
    second = first if other is None else other.inputs[0].value
    dtype = helper.np_dtype_to_tensor_dtype(first.dtype)
    out = helper.np_dtype_to_tensor_dtype(result.dtype)
    body_nodes, names = [], ["e"]
    for k, given in enumerate(case.inputs[1:], 1):
        names.append("" if given is None else f"c{k}")
        if given is not None:
            tensor = onnx.numpy_helper.from_array(given.value)
            body_nodes.append(helper.make_node("Constant", [], [f"c{k}"], value=tensor))
    op = helper.make_node(case.op, names, ["y" if other is None else "z"])
    op.attribute.extend(attributes_of(case.attrs))
    body_nodes.append(op)
    if other is None:
        target = onnx.numpy_helper.from_array(np.array(result.shape, np.int64))
        body_nodes.append(helper.make_node("Constant", [], ["shape"], value=target))
        body_nodes.append(helper.make_node("Reshape", ["y", "shape"], ["z"]))
    element = [a if a == b else None for a, b in zip(first.shape, second.shape, strict=True)]
    body = helper.make_graph(
        body_nodes, "body", [helper.make_tensor_value_info("e", dtype, element)],
        [helper.make_tensor_value_info("z", out, None)],
    )  # fmt: skip
    if other is None:
        inputs = [helper.make_tensor_value_info("x", dtype, [4, *first.shape])]
        source = helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0)
    else:
        inputs = [
            helper.make_tensor_value_info("a", dtype, first.shape),
            helper.make_tensor_value_info("b", dtype, second.shape),
        ]
        source = helper.make_node("SequenceConstruct", ["a", "b"], ["s"])
    graph = helper.make_graph(
        [
            source,
            helper.make_node("SequenceMap", ["s"], ["m"], body=body),
            helper.make_node("ConcatFromSequence", ["m"], ["o"], axis=0, new_axis=1),
        ],
        "g",
        inputs,
        [helper.make_tensor_value_info("o", out, [None] * (result.ndim + 1))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


# The fuzz example of seed 2402: vectorized, ConvTranspose's [4,2,10,9] (180
# elements each, 160 computed) meets the Reshape to [-1,1,8,10,2].
RESHAPED = {
    **COPIED,
    "ConvTranspose SAME_LOWER, output_padding 2-D": (
        Case("ConvTranspose", [x(1, 3, 5, 4), c(np.ones((3, 2, 3, 2)), np.float32),
             c([0, 1], np.float32)], {"kernel_shape": [3, 2], "strides": [2, 2],
             "dilations": [1, 2], "auto_pad": "SAME_LOWER", "output_padding": [0, 1]}),
        17, (1, 2, 10, 8),
    ),
}  # fmt: skip
