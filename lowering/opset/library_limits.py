"""What ``onnx.version_converter`` cannot take up, checked on each node before it runs.

The library's upward adapters (``onnx/version_converter/adapters/*.h``)
assert on node features they cannot convert, in words that name no node
("Assertion `node->i(attr) == value` failed: Attribute spatial must have
value 1"), and get some wrong. For each entry of
:data:`lowering.opset.library.LIBRARY_UP`, the features its adapters cannot
take are limits here, one small check each, asked of the node before the
library sees the model; a node over a limit is refused with its name and
the reason::

    BatchNormalization-6/7      spatial=0: statistics per element (gone at 9)
    BatchNormalization-6        is_test=0, its default: training (7 has no is_test)
    Dropout-7                   a read mask: the input's type at 7, bool from 10
    Add/Sub/Mul/Div-6, Pow-1    input shapes not static (the adapter asserts on them);
                                broadcast=1 with an axis other than 0 or rank(A) - rank(B)
                                (the adapter lines B up at axis 0: a wrong result)
    Gemm-6                      input shapes not static (the adapter asserts on them)

Shapes are the ones ONNX's inference gives the library (it infers before it
converts). A failure no limit foresees is traced to its node by
:func:`culprit`, which converts each node on its own.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
import onnx.version_converter
import onnx_ir as ir

from lowering.defaults import MIN_OPSET
from lowering.irutils.checker import proto_graphs

Dims = list[int | str | None]


class InferredShapes:
    """The dims ONNX's inference gives each value of a proto, by name (inferred on first use)."""

    def __init__(self, proto: onnx.ModelProto) -> None:
        self._proto = proto
        self._types: dict[str, onnx.ValueInfoProto] | None = None

    def value_info(self, name: str) -> onnx.ValueInfoProto | None:
        if self._types is None:
            try:
                inferred = onnx.shape_inference.infer_shapes(self._proto)
            except Exception:  # noqa: BLE001 -- as the library, which infers leniently
                inferred = self._proto
            self._types = {}
            for graph in proto_graphs(inferred.graph):
                for tensor in graph.initializer:
                    self._types[tensor.name] = onnx.helper.make_tensor_value_info(
                        tensor.name, tensor.data_type, list(tensor.dims)
                    )
                for info in (*graph.input, *graph.value_info, *graph.output):
                    if info.type.HasField("tensor_type"):
                        self._types[info.name] = info
        return self._types.get(name)

    def dims(self, value: ir.Value | None) -> Dims | None:
        """``value``'s dims (an int, a symbol, or None where unknown), or None without a shape."""
        info = self.value_info(value.name or "") if value is not None else None
        if info is None or not info.type.tensor_type.HasField("shape"):
            return None
        return [
            d.dim_value if d.HasField("dim_value") else d.dim_param or None
            for d in info.type.tensor_type.shape.dim
        ]


Limit = Callable[[ir.Node, InferredShapes], str | None]


def _per_element_statistics(node: ir.Node, shapes: InferredShapes) -> str | None:
    if node.attributes.get_int("spatial", 1) == 1:
        return None
    return (
        "spatial=0 (statistics per element, not per channel), which BatchNormalization-9 "
        "and later do not have"
    )


def _training(node: ir.Node, shapes: InferredShapes) -> str | None:
    if node.attributes.get_int("is_test", 0) != 0:
        return None
    return (
        "is_test=0 (training, its default), which onnx.version_converter does not take up: "
        "only is_test=1 (inference)"
    )


def _mask_read(node: ir.Node, shapes: InferredShapes) -> str | None:
    mask = node.outputs[1] if len(node.outputs) > 1 else None
    if mask is None or not (mask.uses() or mask.is_graph_output()):
        return None
    return "its mask is read: Dropout-7's is of the input's type, Dropout-10's a bool tensor"


def _static_shapes(node: ir.Node, shapes: InferredShapes) -> str | None:
    for index, value in enumerate(node.inputs):
        dims = shapes.dims(value)
        if dims is None:
            problem = "no shape"
        elif not all(isinstance(d, int) for d in dims):
            problem = f"dims {[d if d is not None else '?' for d in dims]}"
        else:
            continue
        return (
            "onnx.version_converter takes it up only where ONNX's inference gives every "
            f"input a static shape, and it gives input {index} {problem}"
        )
    return None


def _legacy_axis(node: ir.Node, shapes: InferredShapes) -> str | None:
    axis = node.attributes.get_int("axis")
    if node.attributes.get_int("broadcast", 0) != 1 or axis is None:
        return None
    a, b = (shapes.dims(v) for v in node.inputs[:2])
    if a is not None and b is not None and axis in (0, len(a) - len(b)):
        return None
    return (
        f"legacy broadcast along axis {axis} (broadcast=1), which onnx.version_converter "
        "lines up at axis 0 instead"
    )


#: The limits of each (op, schema version) the library takes up (LIBRARY_UP's keys).
LIMITS: dict[tuple[str, int], tuple[Limit, ...]] = {
    ("BatchNormalization", 6): (_training, _per_element_statistics),
    ("BatchNormalization", 7): (_per_element_statistics,),
    ("Dropout", 7): (_mask_read,),
    **{(op, 6): (_static_shapes, _legacy_axis) for op in ("Add", "Sub", "Mul", "Div")},
    ("Pow", 1): (_static_shapes, _legacy_axis),
    ("Gemm", 6): (_static_shapes,),
}


def over_limit(node: ir.Node, version: int, shapes: InferredShapes) -> str | None:
    """Why the library cannot take ``node`` (at schema ``version``) up, or None."""
    for limit in LIMITS.get((node.op_type, version), ()):
        reason = limit(node, shapes)
        if reason is not None:
            return reason
    return None


def culprit(
    proto: onnx.ModelProto, shapes: InferredShapes, checked: bool
) -> tuple[int, int, str] | None:
    """The first node the library fails on alone: (graph, node) positions and why.

    Graphs are counted in :func:`proto_graphs` order. Each default-domain
    node without subgraphs is converted alone, its inputs and outputs typed
    as ONNX's inference types them in ``proto``: it fails if the library
    raises or (``checked``) writes what the full checker refuses of a node
    that passed it.
    """
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    for graph_index, graph in enumerate(proto_graphs(proto.graph)):
        for node_index, node in enumerate(graph.node):
            if node.domain not in ("", "ai.onnx") or any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                for a in node.attribute
            ):
                continue
            reason = _fails_alone(node, shapes, opset, proto.ir_version, checked)
            if reason is not None:
                return graph_index, node_index, reason
    return None


def _fails_alone(
    node: onnx.NodeProto, shapes: InferredShapes, opset: int, ir_version: int, checked: bool
) -> str | None:
    def typed(names) -> list[onnx.ValueInfoProto]:
        unique = dict.fromkeys(n for n in names if n)
        return [shapes.value_info(n) or onnx.ValueInfoProto(name=n) for n in unique]

    graph = onnx.helper.make_graph([node], "alone", typed(node.input), typed(node.output))
    alone = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", opset)], ir_version=ir_version
    )
    try:
        converted = onnx.version_converter.convert_version(alone, MIN_OPSET)
    except Exception:  # noqa: BLE001 -- the library raises RuntimeError, IndexError...
        return "onnx.version_converter cannot convert it (its adapter's own check fails)"
    if not checked or _refused(alone):
        return None
    converted.ir_version = max(converted.ir_version, 6)  # opset 11's
    if _refused(converted):
        return "onnx.version_converter converts it into what the checker refuses"
    return None


def _refused(proto: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(proto, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        return True
    return False
