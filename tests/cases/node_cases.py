"""One ONNX node to a model, on inputs given as run-time values or constants:
the cases of the shape tests (tests/test_trusted_shapes.py and the tests
built on them), and the ops whose ONNX shapes are not onnxruntime's.

``x(2, 3)`` is a run-time input, ``c([0])`` a constant (an initializer);
:func:`model_of` writes a case's model and :func:`feeds_of` its feeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

from lowering.irutils.node_inference import Operand
from lowering.runtimes.sessions import open_session

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


@dataclasses.dataclass
class In:
    """One input: its value, and whether the model holds it as a constant."""

    value: np.ndarray
    const: bool = False


@dataclasses.dataclass
class Case:
    op: str
    inputs: list[In | None]
    attrs: dict = dataclasses.field(default_factory=dict)
    outputs: int = 1


def x(*shape: int, dtype=np.float32) -> In:
    """A run-time input of ``shape``, of values the op accepts."""
    rng = np.random.default_rng(len(shape) + sum(shape))
    if dtype == np.bool_:
        return In(rng.integers(0, 2, shape).astype(np.bool_))
    if np.issubdtype(dtype, np.integer):
        return In(rng.integers(1, 4, shape).astype(dtype))
    return In(rng.uniform(0.1, 0.9, shape).astype(dtype))


def c(value, dtype=np.int64) -> In:
    """A constant input."""
    return In(np.array(value, dtype), const=True)


def r(value, dtype=np.int64) -> In:
    """A run-time input of this value (the helper does not see it)."""
    return In(np.array(value, dtype))


def both(value, dtype=np.int64) -> list[In]:
    return [c(value, dtype), r(value, dtype)]


def case_node(
    case: Case, outputs: list[str]
) -> tuple[onnx.NodeProto, list[onnx.ValueInfoProto], list[onnx.TensorProto]]:
    """The case's node writing ``outputs``, its graph inputs (``i{k}``, fed by
    :func:`feeds_of`) and its initializers (the constant inputs)."""
    inputs, initializers, names = [], [], []
    for k, given in enumerate(case.inputs):
        if given is None:
            names.append("")
            continue
        name = f"i{k}"
        names.append(name)
        if given.const:
            initializers.append(onnx.numpy_helper.from_array(given.value, name))
        else:
            dtype = helper.np_dtype_to_tensor_dtype(given.value.dtype)
            inputs.append(helper.make_tensor_value_info(name, dtype, given.value.shape))
    node = helper.make_node(case.op, names, outputs)
    node.attribute.extend(attributes_of(case.attrs))
    return node, inputs, initializers


def model_of(case: Case, opset: int) -> onnx.ModelProto:
    outputs = [f"o{k}" for k in range(case.outputs)]
    node, inputs, initializers = case_node(case, outputs)
    graph = helper.make_graph(
        [node], "g", inputs, [onnx.ValueInfoProto(name=n) for n in outputs], initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def ort_run(model: onnx.ModelProto, feeds: dict) -> list:
    """onnxruntime's outputs, on one thread and with no graph optimization:
    its optimizer folds Shape from ONNX's shape inference too."""
    return open_session(model.SerializeToString(), optimize=False, log_severity=4).run(None, feeds)


def feeds_of(case: Case) -> dict[str, np.ndarray]:
    return {f"i{k}": g.value for k, g in enumerate(case.inputs) if g is not None and not g.const}


def attributes_of(attrs: dict) -> list[onnx.AttributeProto]:
    return [
        helper.make_attribute(k, v, attr_type=onnx.AttributeProto.INTS if v == [] else None)
        for k, v in attrs.items()
    ]


def ort_shapes(case: Case, opset: int) -> list[tuple[int, ...]] | None:
    """onnxruntime's output shapes, or None where it refuses the model or its inputs."""
    try:
        return [np.asarray(o).shape for o in ort_run(model_of(case, opset), feeds_of(case))]
    except Exception:  # noqa: BLE001 -- an invalid case: nothing to compare
        return None


def describe(case: Case) -> str:
    inputs = [
        "-" if g is None else f"{g.value.tolist()}" if g.const else f"x{list(g.value.shape)}"
        for g in case.inputs
    ]
    return f"{case.op}({', '.join(inputs)}) {case.attrs}"


def node_of(case: Case) -> ir.Node:
    attributes = [ir.serde.deserialize_attribute(a) for a in attributes_of(case.attrs)]
    return ir.Node("", case.op, [], attributes, num_outputs=case.outputs)


def askings(case: Case) -> Iterator[tuple[str, list[Operand | None], dict[str, int]]]:
    """The ways the helper is asked: (name, operands, the size each symbol stands for)."""
    ways = ["static", "symbolic", "unknown dims", "unknown rank"]
    for way in ways:
        operands: list[Operand | None] = []
        sizes: dict[str, int] = {}
        for k, given in enumerate(case.inputs):
            if given is None:
                operands.append(None)
                continue
            dtype = ir.DataType.from_numpy(given.value.dtype)
            shape: list[int | str | None] | None = list(given.value.shape)
            if given.const or way == "static":
                pass
            elif way == "symbolic":
                shape = [f"s{k}_{i}" for i in range(given.value.ndim)]
                sizes.update(zip(shape, given.value.shape))
            elif way == "unknown dims":
                shape = [None] * given.value.ndim
            else:
                shape = None
            operands.append(Operand(dtype, shape, given.value if given.const else None))
        yield way, operands, sizes


POOL = {"kernel_shape": [2], "strides": [2]}
# Ops whose ONNX shapes differ from onnxruntime's: (case, opset, onnxruntime's shape).
UNTRUSTED = {
    "MaxPool ceil_mode, end pad": (
        Case("MaxPool", [x(1, 1, 4)], {**POOL, "pads": [0, 1], "ceil_mode": 1}), 17, (1, 1, 2),
    ),
    "AveragePool ceil_mode, end pad": (
        Case("AveragePool", [x(1, 1, 4)], {**POOL, "pads": [0, 1], "ceil_mode": 1}), 17, (1, 1, 2),
    ),
    "MaxPool ceil_mode, no pad": (
        Case("MaxPool", [x(1, 1, 4)], {"kernel_shape": [1], "strides": [2], "ceil_mode": 1}),
        17, (1, 1, 2),
    ),
    "MaxPool ceil_mode 2-D": (
        Case("MaxPool", [x(1, 1, 3, 4)], {"kernel_shape": [2, 2], "strides": [2, 2],
             "pads": [0, 0, 1, 1], "ceil_mode": 1}), 17, (1, 1, 2, 2),
    ),
    "LpPool ceil_mode": (
        Case("LpPool", [x(1, 1, 6)], {**POOL, "pads": [0, 1], "ceil_mode": 1}), 18, (1, 1, 3),
    ),
    "ConvTranspose SAME, output_padding": (
        Case("ConvTranspose", [x(1, 1, 4), x(1, 1, 2)],
             {"strides": [2], "auto_pad": "SAME_UPPER", "output_padding": [1]}), 17, (1, 1, 8),
    ),
    "Resize by scales": (
        Case("Resize", [x(1, 1, 5), c([], np.float32), c([1, 1, 1.4], np.float32)]), 13, (1, 1, 7),
    ),
    "Einsum batch broadcast": (
        Case("Einsum", [x(1, 2, 3), x(4, 3, 5)], {"equation": "bij,bjk->bik"}), 13, (4, 2, 5),
    ),
    "NonZero of a scalar": (Case("NonZero", [x()]), 13, (1, 1)),
}  # fmt: skip

# Cases of trusted ops whose ONNX shapes differ from onnxruntime's.
DOUBTED = {
    "Slice: end INT64_MAX, negative step": (
        Case("Slice", [x(3), c([2]), c([INT64_MAX]), c([0]), c([-1])]), 13, (3,),
    ),
    "Slice: end INT32_MAX, negative step": (
        Case("Slice", [x(5), *(c([v], np.int32) for v in (4, 2**31 - 1, 0, -2))]), 13, (3,),
    ),
    "Slice: int64 end INT32_MAX, negative step": (
        Case("Slice", [x(4, 3), c([3]), c([2**31 - 1]), c([0]), c([-1])]), 13, (4, 3),
    ),
    "Squeeze: empty axes attribute": (Case("Squeeze", [x(2, 1)], {"axes": []}), 11, (2,)),
    "PRelu: X broadcast to the slope": (Case("PRelu", [x(1, 3, 1), x(1, 4)]), 13, (1, 3, 4)),
    "PRelu: a slope of higher rank": (Case("PRelu", [x(3), x(2, 3)]), 17, (2, 3)),
    "Squeeze: empty axes input": (Case("Squeeze", [x(2, 1), c([])]), 13, (2,)),
    "Range: float bounds": (
        Case("Range", [c(-0.17, np.float32), c(-10.17, np.float32), c(-1.0, np.float32)]), 13,
        (11,),
    ),
    "Range: int32 span overflows": (
        Case("Range", [c(2**31 - 1, np.int32), c(-(2**31), np.int32), c(-(2**31), np.int32)]),
        13, (2,),
    ),
}  # fmt: skip
#: The cases whose true shape is not computed (lowering.irutils.computed_shapes),
#: so no pin fixes ONNX's claim: a map whose body holds one keeps it in a Loop
#: read through its sequences (lowering.maps.claims; tests/test_claims.py checks
#: that these are all the cases node_pins finds no pin for).
NO_PIN = {"Range: int32 span overflows"}
#: The cases pinned but not respelled (lowering.irutils.respellings), whose
#: static size ONNX claims wrong: onnxruntime allocates the node's own output
#: by it, which no pin after the node reaches, so a map whose body holds one
#: is kept in a Loop read through its sequences too (lowering.maps.claims;
#: fuzz seed 5310; tests/test_claims.py checks that these are all).
MISALLOCATED = {"Range: float bounds"}


def case_nodes(case: Case, out: str) -> tuple[list, list, list, dict]:
    """The case's node writing ``out``, its graph inputs, initializers and feeds."""
    outputs = [out] + [f"extra{k}" for k in range(1, case.outputs)]
    node, inputs, initializers = case_node(case, outputs)
    return [node], inputs, initializers, feeds_of(case)


def exposed_model(name: str) -> tuple[onnx.ModelProto, dict]:
    """``ConcatFromSequence<new_axis = 1>(SequenceConstruct(R, R'))`` of two copies
    of the case's node, beside a map that is lowered (so the construct is read
    back as tensors)."""
    case, opset, shape = {**UNTRUSTED, **DOUBTED}[name]
    first, inputs, initializers, feeds = case_nodes(case, "ra")
    second = onnx.NodeProto()
    second.CopyFrom(first[0])
    second.output[0] = "rb"
    del second.output[1:]
    dtype = ort_run(model_of(case, opset), feeds_of(case))[0].dtype
    onnx_dtype = helper.np_dtype_to_tensor_dtype(dtype)
    body = helper.make_graph(
        [helper.make_node("Neg", ["e"], ["o"])],
        "body",
        [helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("o", onnx.TensorProto.FLOAT, [3])],
    )
    nodes = [
        *first,
        second,
        helper.make_node("SequenceConstruct", ["ra", "rb"], ["s"]),
        helper.make_node("ConcatFromSequence", ["s"], ["Y"], axis=0, new_axis=1),
        helper.make_node("SplitToSequence", ["x"], ["t"], axis=0, keepdims=0),
        helper.make_node("SequenceMap", ["t"], ["m"], body=body),
        helper.make_node("ConcatFromSequence", ["m"], ["Z"], axis=0, new_axis=1),
    ]
    outputs = [
        helper.make_tensor_value_info("Y", onnx_dtype, [None] * (len(shape) + 1)),
        helper.make_tensor_value_info("Z", onnx.TensorProto.FLOAT, [None, None]),
    ]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(nodes, "g", [*inputs, x], outputs, initializers)
    feeds["x"] = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", max(opset, 17))], ir_version=8
    )
    return model, feeds
