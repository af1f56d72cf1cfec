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

Unrolling and vectorizing copy a body's nodes into the map's scope, where
ONNX inference, which a body's element type kept to the body, now reads
static shapes: its wrong answer for an op of
:func:`~lowering.irutils.node_inference.seen_wrong` then reaches nodes whose
inference checks it, and the checker refuses a model onnxruntime runs
(LpPool with ``ceil_mode`` on [1,2,3] and [1,2,2], inferred [1,2,2] and
[1,2,1], computed [1,2,1] twice: "Can't merge shape info" on their Concat;
a ConvTranspose inferred [4,2,10,9], computed [4,2,10,8]: the vectorized
Reshape to [-1,1,8,10,2] is "incompatible shapes"). Each output of such a
copied node is passed through a sequence the same way, where it is made
(:func:`hide_copied_shapes`); its consumers, and a graph output it is, read
the hidden value.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import onnx_ir as ir

from lowering.analysis.type_inference import unproven_shapes
from lowering.irutils.constants import constant_node
from lowering.irutils.naming import adopt_name, fresh, name_fresh
from lowering.irutils.node_inference import (
    Operand,
    infer_outputs,
    may_be_seen_wrong,
    operand,
    seen_wrong,
)
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.static_values import small_constant
from lowering.irutils.walk import GraphLike, graphs_within, nodes_within, subgraphs

HIDING_OPS = frozenset({"SequenceEmpty", "SequenceInsert", "SequenceAt"})


class HideUnprovenOutputsPass(ir.passes.InPlacePass):
    """Hide the unproven If-branch and Scan-body outputs around the scopes of lowered maps.

    ``lowered_in``: the graphs and functions maps were lowered in, and
    ``copied``: the nodes unrolling and vectorizing wrote there, each with
    its scope's opset (what
    :class:`~lowering.passes.lower_sequence_maps.MapsResult` says). Runs after
    :class:`~lowering.passes.eliminate_sequences.EliminateSequencesPass`,
    which would read the hiding sequence back as the tensor.
    """

    # It keeps a pipeline's shared scope index right (lowering.irutils.scopes).
    shares_scopes = True

    def __init__(
        self, lowered_in: set[GraphLike], copied: Iterable[tuple[ir.Node, int]] = ()
    ) -> None:
        super().__init__()
        self.lowered_in = lowered_in
        self.copied = list(copied)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        hidden = hide_unproven_outputs(model, self.lowered_in)
        hidden += hide_copied_shapes(self.copied)
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


class Copied(NamedTuple):
    """A node a map's rewrite copied into its scope, its scope's opset, and the
    rewrite's ``written`` list, which the nodes hiding its outputs join (so the
    rewrite's rejections count their sequence ops)."""

    node: ir.Node
    opset: int
    written: list[ir.Node] | None = None


def hide_copied_shapes(copied: Iterable[tuple[ir.Node, int]]) -> int:
    """Hide the outputs of the nodes of ``copied`` (and of their subgraphs) whose
    shapes ONNX may infer wrong, where they are made; returns how many were hidden.

    ``copied``: the nodes a map's body was copied into its scope as, each
    with its scope's opset (removed ones are skipped). An untyped output is
    given the dtype ONNX infers (:func:`_infer_dtypes`); one of no known dtype
    is left (SequenceEmpty needs it). A graph output among them keeps its
    name and declaration, on the hidden value.
    """
    hidden = 0
    dtypes: dict[ir.Value, ir.DataType | None] = {}
    typed: set[ir.Graph] = set()
    entries = [Copied(*entry) for entry in copied]
    for node, opset, written in [
        (n, e.opset, e.written) for e in entries for n in (e.node, *_nested(e.node))
    ]:
        graph = node.graph
        if graph is None or not is_onnx_domain(node.domain) or not may_be_seen_wrong(node.op_type):
            continue
        operands = [operand(v, small_constant(v)) for v in node.inputs]
        if not seen_wrong(node, operands):
            continue
        if graph not in typed:  # rewrites leave values untyped: their dtypes, in order
            typed.add(graph)
            _infer_dtypes(graph, opset, dtypes)
        for value in node.outputs:
            if not value.uses() and value not in graph.outputs:
                continue
            dtype = dtypes.get(value)
            if dtype is None:
                continue
            rank = None if value.shape is None else len(value.shape)
            nodes, at = _hiding(value, dtype, rank)
            at.shape = None if value.shape is None else ir.Shape(list(value.shape))
            value.replace_all_uses_with(at, replace_graph_outputs=True)
            if value.name:
                adopt_name(at, value.name)
                value.name = None
                fresh(value)
            value.type, value.shape = ir.TensorType(dtype), None
            nodes[1].replace_input_with(1, value)
            graph.insert_after(node, nodes)
            if written is not None:
                written += nodes
            hidden += 1
    return hidden


def _infer_dtypes(graph: ir.Graph, opset: int, dtypes: dict[ir.Value, ir.DataType | None]) -> None:
    """The dtype of each value of ``graph`` (into ``dtypes``): declared, or what
    ONNX infers from its inputs' dtypes (sound, unlike its shapes)."""

    def known(value: ir.Value | None) -> Operand | None:
        got = operand(value, small_constant(value))
        if value is None or got is None or got.dtype is not None or got.type is not None:
            return got
        return got._replace(dtype=dtypes.get(value))

    for node in graph:
        declared = [_declared_dtype(v) for v in node.outputs]
        inferred = (
            infer_outputs(node, [known(v) for v in node.inputs], opset) if None in declared else []
        )
        for k, value in enumerate(node.outputs):
            dtypes[value] = declared[k] if declared[k] is not None else inferred[k].dtype


def _declared_dtype(value: ir.Value) -> ir.DataType | None:
    type_ = value.type
    if isinstance(type_, ir.TensorType) and type_.dtype != ir.DataType.UNDEFINED:
        return type_.dtype
    return None


def _nested(node: ir.Node) -> list[ir.Node]:
    return [n for sub in subgraphs(node) for n in nodes_within(sub)]


def _hide(graph: ir.Graph, index: int, value: ir.Value, needs_rank: bool) -> bool:
    type_ = value.type
    if not isinstance(type_, ir.TensorType) or type_.dtype == ir.DataType.UNDEFINED:
        return False
    rank = None if value.shape is None else len(value.shape)
    if rank is None and needs_rank:
        return False  # Scan refuses a body output without a rank
    nodes, at = _hiding(value, type_.dtype, rank)
    graph.extend(nodes)
    graph.outputs[index] = at
    return True


def _hiding(
    value: ir.Value, dtype: ir.DataType, rank: int | None
) -> tuple[list[ir.Node], ir.Value]:
    """The nodes that pass ``value`` through a sequence, and the value read back
    (of ``dtype`` and ``rank`` unknown dims)."""
    empty = fresh(new_node("SequenceEmpty", [], {"dtype": dtype.value}))
    empty.outputs[0].type = ir.SequenceType(ir.TensorType(dtype))
    insert = fresh(new_node("SequenceInsert", [empty.outputs[0], value]))
    insert.outputs[0].type = empty.outputs[0].type
    zero = constant_node(np.array(0, np.int64))
    at = fresh(new_node("SequenceAt", [insert.outputs[0], zero.outputs[0]]))
    at.outputs[0].type = ir.TensorType(dtype)
    if rank is not None:
        at.outputs[0].shape = ir.Shape([None] * rank)
    return [empty, insert, zero, at], at.outputs[0]
