"""Subgraph outputs whose shapes onnxruntime would take from a wrong inference.

onnxruntime allocates the outputs of an If, and the scan outputs of a Scan,
from the shapes ONNX inference gives the branch or body outputs, and fails
when the kernel computes another (MaxPool with ``ceil_mode``: inferred
[1,1,3,5], computed [1,1,2,5]; "Mismatch between expected shape and shape
from first output"). A SequenceMap hid those shapes: its results are
sequences, and what is read out of them has no inferred shape. A lowered
map's results are tensors, so a Scan body that returned
``SequenceAt(map output, 0)`` now returns a Gather of a stack whose shape
onnxruntime believes. Each If-branch or Scan-body output whose shape is not
proven (:func:`lowering.analysis.type_inference.unproven_shapes`), in a subgraph that
holds a lowered map, is passed through a sequence again, which keeps its
value and hides its shape (the rank stays declared: Scan needs one)::

    body (...) => (y: float[?,?,?,?])      body (...) => (o: float[?,?,?,?])
      y = Gather(stack, i)           ->      y = Gather(stack, i)
                                             s = SequenceInsert(SequenceEmpty<float>(), y)
                                             o = SequenceAt(s, 0)

The cost is one copy of each such output per branch taken or iteration.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.analysis.type_inference import unproven_shapes
from lowering.irutils.constants import constant_node
from lowering.irutils.naming import fresh, name_fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.walk import GraphLike, graphs_within, nodes_within

HIDING_OPS = frozenset({"SequenceEmpty", "SequenceInsert", "SequenceAt"})


class HideUnprovenOutputsPass(ir.passes.InPlacePass):
    """Hide the unproven If-branch and Scan-body outputs around the scopes of lowered maps.

    ``lowered_in``: the graphs and functions maps were lowered in (what
    :class:`~lowering.passes.lower_sequence_maps.MapsResult` says). Runs after
    :class:`~lowering.passes.eliminate_sequences.EliminateSequencesPass`,
    which would read the hiding sequence back as the tensor.
    """

    # It keeps a pipeline's shared scope index right (lowering.irutils.scopes).
    shares_scopes = True

    def __init__(self, lowered_in: set[GraphLike]) -> None:
        super().__init__()
        self.lowered_in = lowered_in

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        hidden = hide_unproven_outputs(model, self.lowered_in)
        if hidden:
            name_fresh(model)
        return ir.passes.PassResult(model, modified=bool(hidden))


def hide_unproven_outputs(model: ir.Model, lowered_in: set[GraphLike]) -> int:
    """Hide the unproven outputs of the If branches and Scan bodies of ``model``
    that hold, at any depth, a graph of ``lowered_in`` (the scopes of lowered
    maps; a function among them: every If and Scan, which may call it).
    Returns how many outputs were hidden."""
    anywhere = any(isinstance(scope, ir.Function) for scope in lowered_in)
    scopes: list[GraphLike] = [model.graph, *model.functions.values()]
    hidden = 0
    for scope in scopes:
        tainted = unproven_shapes(scope)
        for node in nodes_within(scope):
            if not (is_onnx_op(node, "If") or is_onnx_op(node, "Scan")):
                continue
            for attr in node.attributes.values():
                if attr.type != ir.AttributeType.GRAPH:
                    continue
                sub = attr.as_graph()
                if not anywhere and not any(g in lowered_in for g in graphs_within(sub)):
                    continue
                for index, value in enumerate(list(sub.outputs)):
                    if value in tainted and _hide(sub, index, value, is_onnx_op(node, "Scan")):
                        hidden += 1
    return hidden


def _hide(graph: ir.Graph, index: int, value: ir.Value, needs_rank: bool) -> bool:
    type_ = value.type
    if not isinstance(type_, ir.TensorType) or type_.dtype == ir.DataType.UNDEFINED:
        return False
    rank = None if value.shape is None else len(value.shape)
    if rank is None and needs_rank:
        return False  # Scan refuses a body output without a rank
    empty = fresh(new_node("SequenceEmpty", [], {"dtype": type_.dtype.value}))
    empty.outputs[0].type = ir.SequenceType(ir.TensorType(type_.dtype))
    insert = fresh(new_node("SequenceInsert", [empty.outputs[0], value]))
    insert.outputs[0].type = empty.outputs[0].type
    zero = constant_node(np.array(0, np.int64))
    at = fresh(new_node("SequenceAt", [insert.outputs[0], zero.outputs[0]]))
    at.outputs[0].type = ir.TensorType(type_.dtype)
    if rank is not None:
        at.outputs[0].shape = ir.Shape([None] * rank)
    graph.extend([empty, insert, zero, at])
    graph.outputs[index] = at.outputs[0]
    return True
