"""The lowest opset a model could declare, planned on one node of each kind.

The summary's line "the output could declare default-domain opset N" plans
every node at each opset from 11 up (:func:`plan_node`), with the types of
the one shape analysis (:meth:`Proof.typed`) for the nodes
the lowering left untyped. On 2,000 lowered maps that cost more than the
lowering. But 2,000 maps lowered alike are 2,000 copies of a few nodes, and
a node's plan reads only the node itself (op, attributes, subgraphs) and
what its inputs are (types, shapes, constants), all of which follow from
its inputs' producers. So the main graph's nodes are keyed by that
structure, and only the cone of one node per key is planned::

    x ──> Slice ─> Neg ─> ...   (map 0)      key(Neg) = (Neg, attrs, key(Slice) ...)
    x ──> Slice ─> Neg ─> ...   (map 1)      the same key: not planned again
    ...                                   -> a model of map 0's nodes, typed and planned

Keys are interned as small ints, so a chain of 10,000 nodes is keyed in
linear time. A node with a subgraph, a function's body and a value from an
outer scope get keys of their own (never shared): those are planned as
they are. Where the cone is most of the model, the model itself is planned.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
import onnx_ir as ir

from lowering.irutils.static_values import MAX_ELEMENTS
from lowering.irutils.walk import has_subgraphs, nodes_under


def planned_on_representatives(
    model: ir.Model, lowest: Callable[[ir.Model], int | None]
) -> int | None:
    """``lowest(model)``, computed on the cone of one main-graph node of each kind
    when that is at most half the model."""
    graph = model.graph
    nodes = list(graph)
    keep = _cone(graph, _representatives(nodes))
    if 2 * len(keep) > len(nodes):
        return lowest(model)
    return lowest(_cone_model(model, [node for node in nodes if node in keep]))


def _representatives(nodes: list[ir.Node]) -> list[ir.Node]:
    """The first main-graph node of each structural key."""
    table: dict[tuple, int] = {}
    key_of: dict[ir.Node, int] = {}
    unique = iter(range(-1, -(2**62), -1))  # keys never shared

    def value_key(value: ir.Value | None) -> object:
        if value is None:
            return None
        declared = _declared(value)
        producer = value.producer()
        if producer is not None and producer in key_of:
            return (key_of[producer], value.index(), declared)
        if value.is_graph_input():  # fed (an initializer too is overridable)
            return ("input", value.name, declared)
        tensor = value.const_value
        if tensor is not None and value.is_initializer():
            if tensor.size <= MAX_ELEMENTS:
                return ("constant", declared, tensor.tobytes())
            return next(unique)  # a large weight: its own key (planning never reads it)
        return next(unique)  # from an outer scope, or out of order

    seen: set[int] = set()
    chosen = []
    for node in nodes:
        if has_subgraphs(node):
            key = next(unique)
        else:
            signature = (
                node.domain,
                node.op_type,
                node.overload,
                tuple(sorted((name, _attribute_key(a)) for name, a in node.attributes.items())),
                tuple(value_key(v) for v in node.inputs),
                tuple(_declared(v) for v in node.outputs),
            )
            key = table.setdefault(signature, len(table))
        key_of[node] = key
        if key not in seen:
            seen.add(key)
            chosen.append(node)
    return chosen


def _declared(value: ir.Value) -> tuple:
    shape = value.shape
    dims = None if shape is None else tuple(d if isinstance(d, int) else d.value for d in shape)
    return (_type_key(value.type), dims)


def _type_key(kind: ir.TypeProtocol | None) -> object:
    """A type as a key (``str`` of a type is slow)."""
    if kind is None:
        return None
    inner = getattr(kind, "elem_type", None)
    if isinstance(kind, ir.TensorType) or inner is None:
        return (type(kind).__name__, kind.dtype)
    return (type(kind).__name__, _type_key(inner))


def _attribute_key(attribute: ir.Attr) -> object:
    if attribute.is_ref():
        return ("ref", attribute.ref_attr_name)
    value = attribute.value
    if attribute.type in (ir.AttributeType.TENSOR, ir.AttributeType.SPARSE_TENSOR):
        return (attribute.type, value.dtype, tuple(value.shape), value.tobytes())
    if attribute.type == ir.AttributeType.TENSORS:
        return tuple((t.dtype, tuple(t.shape), t.tobytes()) for t in value)
    return (attribute.type, repr(value))


def _cone(graph: ir.Graph, chosen: list[ir.Node]) -> set[ir.Node]:
    """``chosen`` and every main-graph node they read from, through subgraphs too."""
    keep: set[ir.Node] = set()
    work = list(chosen)
    while work:
        node = work.pop()
        if node in keep:
            continue
        keep.add(node)
        for reader in (node, *nodes_under(node)):
            for value in reader.inputs:
                producer = None if value is None else value.producer()
                if producer is not None and producer.graph is graph and producer not in keep:
                    work.append(producer)
    return keep


def _cone_model(model: ir.Model, cone: list[ir.Node]) -> ir.Model:
    """A model of the main graph's ``cone`` (in order), its inputs, the small
    initializers it reads (a large one becomes an input of its type), the
    declared types of its values, and every function."""
    graph = model.graph
    proto = onnx.GraphProto(name=graph.name or "cone")
    read: set[str] = set()
    for node in cone:
        proto.node.append(ir.serde.serialize_node(node))
        read.update(
            str(v.name) for n in (node, *nodes_under(node)) for v in n.inputs if v is not None
        )
    for value in graph.inputs:
        ir.serde.serialize_value_into(proto.input.add(), value)
    _add_initializers(proto, graph, read)
    _add_declared(proto, graph, cone)
    model_proto = onnx.helper.make_model(
        proto,
        ir_version=model.ir_version,
        opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in model.opset_imports.items()],
    )
    for function in model.functions.values():
        model_proto.functions.append(ir.serde.serialize_function(function))
    return ir.serde.deserialize_model(model_proto)


def _add_initializers(proto: onnx.GraphProto, graph: ir.Graph, read: set[str]) -> None:
    """The initializers the cone reads: a small one as it is, a large one as an input."""
    inputs = {value.name for value in graph.inputs}
    for name, value in graph.initializers.items():
        if name not in read or value.const_value is None:
            continue
        if value.const_value.size <= MAX_ELEMENTS:
            proto.initializer.append(ir.serde.serialize_tensor(value.const_value))
        elif name not in inputs:
            ir.serde.serialize_value_into(proto.input.add(), value)


def _add_declared(proto: onnx.GraphProto, graph: ir.Graph, cone: list[ir.Node]) -> None:
    """The declared types of the cone's values, and the graph outputs it makes."""
    made = {v for node in cone for v in node.outputs}
    for value in made:
        if value.type is not None and not value.is_graph_output():
            ir.serde.serialize_value_into(proto.value_info.add(), value)
    for value in graph.outputs:
        if value in made:
            ir.serde.serialize_value_into(proto.output.add(), value)
