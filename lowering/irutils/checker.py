"""ONNX's full checker on a model whose weights are stand-ins: the one way to run it.

A pass that checks what it (or a library) wrote must not copy or read the
model's weights to do so: those may be gigabytes, or external data. The
weights are left out of the serialized copy as placeholders; in the copy
the checker sees, each becomes a main-graph input of its type and shape,
which is all the checker's strict shape inference reads of them (a shape
or an axis is a small constant, never a placeholder)::

    initializer w: float[4096,4096] (placeholder)   ->   graph input w: float[4096,4096]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import onnx


def proto_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and its subgraphs, parents first (:func:`lowering.irutils.walk.graphs_within`'s order)."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from proto_graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from proto_graphs(sub)


def full_check_problem(
    proto: onnx.ModelProto, stand_in: Callable[[onnx.TensorProto], bool]
) -> str | None:
    """What ``onnx.checker.check_model(full_check=True)`` says of ``proto``, None if it passes.

    Each initializer (of any graph) for which ``stand_in`` is true is checked
    as a main-graph input of its type; ``proto`` itself is not changed.
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    inputs = {i.name for i in copy.graph.input}
    for graph in proto_graphs(copy.graph):
        for tensor in [t for t in graph.initializer if stand_in(t)]:
            graph.initializer.remove(tensor)
            if tensor.name not in inputs:
                copy.graph.input.append(
                    onnx.helper.make_tensor_value_info(
                        tensor.name, tensor.data_type, list(tensor.dims)
                    )
                )
                inputs.add(tensor.name)
    try:
        onnx.checker.check_model(copy, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        return str(error).strip()
    return None
