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
proven (:func:`lowering.analysis.proven_shapes.prove`), in a subgraph that
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
copied node whose true shape is computed
(:mod:`lowering.irutils.computed_shapes`) is pinned to it where it is made,
which every runtime runs; another is passed through a sequence the same way
(:func:`plan_copied_shapes`). Its consumers, and a graph output it is, read
the pinned or hidden value. Where a pin is planned, the node is also
respelled, where it can be, into a form ONNX's inference sizes right
(:mod:`lowering.irutils.respellings`): onnxruntime allocates the node's own
output by that inference, which no pin after it reaches::

    y = LpPool <ceil_mode = 1> (x: float[1,2,3])      y = LpPool <ceil_mode = 1> (x)
    z = Concat(y, w)                             ->    p = Reshape(y, [1, 2, 1])
                                                       z = Concat(p, w)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, prove, prove_model
from lowering.errors import LoweringError
from lowering.irutils.computed_shapes import computed_shapes
from lowering.irutils.constants import constant_node
from lowering.irutils.naming import adopt_name, fresh, name_fresh
from lowering.irutils.node_inference import (
    Dim,
    may_be_seen_wrong,
    operand,
    seen_wrong,
)
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.respellings import Respelling, apply_respelling, respelling
from lowering.irutils.scopes import iter_scopes
from lowering.irutils.static_values import small_constant
from lowering.irutils.walk import GraphLike, graphs_within, nodes_under, nodes_within
from lowering.options import check_runtime
from lowering.runtimes.profiles import RUNTIMES, Runtime, profile

HIDING_OPS = frozenset({"SequenceEmpty", "SequenceInsert", "SequenceAt"})


class HideUnprovenOutputsPass(ir.passes.InPlacePass):
    """Hide the unproven If-branch and Scan-body outputs around the scopes of lowered maps.

    ``lowered_in``: the graphs and functions maps were lowered in, and
    ``copied``: the nodes the rewrites copied, exposed or read there, each
    with its scope's opset (what
    :class:`~lowering.passes.lower_sequence_maps.MapsResult` and
    :class:`~lowering.passes.eliminate_sequences.EliminationResult` say).
    Without them (a pass composed on its own), every If and Scan, and every
    node whose input shapes are all proven static, which ONNX's inference
    would size wrong. Runs after
    :class:`~lowering.passes.eliminate_sequences.EliminateSequencesPass`,
    which would read the hiding sequence back as the tensor. For a
    ``runtime`` without the :data:`HIDING_OPS`, the If and Scan
    outputs are left, and a copied output whose shape is not computed is
    refused (:func:`plan_copied_shapes`), before anything changes.
    """

    def __init__(
        self,
        lowered_in: set[GraphLike] | None = None,
        copied: Iterable[Copied] | None = None,
        runtime: str = "onnxruntime",
    ) -> None:
        super().__init__()
        self.lowered_in = lowered_in
        self.copied = None if copied is None else list(copied)
        self.runtime = profile(check_runtime(runtime))

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        sequences = not self.runtime.missing(HIDING_OPS)
        copied = statically_wrong(model) if self.copied is None else self.copied
        planned = plan_copied_shapes(copied, self.runtime)  # (a refusal: here)
        hidden = hide_unproven_outputs(model, self.lowered_in) if sequences else 0
        for hiding in planned:
            apply_hiding(hiding)
        hidden += len(planned)
        if hidden:
            name_fresh(model)
        return ir.passes.PassResult(model, modified=bool(hidden))


def read_producers(written: list[ir.Node]) -> list[ir.Node]:
    """The nodes outside ``written`` whose outputs the ``written`` nodes read (a
    split's source, whose Shape a trip count reads, or a Scan slices; what an
    expansion computes with), where ONNX may size them wrong: onnxruntime's
    optimizer folds such a Shape from ONNX's inference, and the checker
    meets its claim beside true sizes, so each is pinned where its shape is
    computed."""
    inside = {n for node in written for n in (node, *nodes_under(node))}
    return list(
        dict.fromkeys(
            producer
            for node in inside
            for value in node.inputs
            if value is not None
            and (producer := value.producer()) is not None
            and producer not in inside
            and producer.graph is not None
            and may_be_seen_wrong(producer.op_type)
        )
    )


def statically_wrong(model: ir.Model, *, fill: bool = True) -> list[Copied]:
    """The nodes of ``model`` whose input shapes are all proven static and whose
    shapes ONNX's inference may get wrong: where it claims a wrong size.
    ``fill``: infer the shapes of untyped values too (what rewrites made)."""
    proof = prove_model(model, fill=fill)
    return [
        Copied(node, scope.opset(model) or 1, None, scope.description, None, only_read=True)
        for scope in iter_scopes(model)
        for node in scope.owner
        if is_onnx_domain(node.domain)
        and may_be_seen_wrong(node.op_type)
        and all(v is None or _static(proof.shape(v)) for v in node.inputs)
    ]


def _static(shape: tuple[Dim, ...] | None) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def hide_unproven_outputs(model: ir.Model, lowered_in: set[GraphLike] | None) -> int:
    """Hide the unproven outputs of the If branches and Scan bodies of ``model``
    that hold, at any depth, a graph of ``lowered_in`` (the scopes of lowered
    maps; a function among them, or None: every If and Scan).
    Returns how many outputs were hidden."""
    within = lowered_in or set()
    anywhere = lowered_in is None or any(isinstance(s, ir.Function) for s in within)
    scopes: list[GraphLike] = [model.graph, *model.functions.values()]
    tainted = prove_model(model).doubted
    hidden = 0
    for scope in scopes:
        for node in nodes_within(scope):
            if not (is_onnx_op(node, "If") or is_onnx_op(node, "Scan")):
                continue
            for attr in node.attributes.values():
                if attr.type != ir.AttributeType.GRAPH:
                    continue
                sub = attr.as_graph()
                if not anywhere and not any(g in within for g in graphs_within(sub)):
                    continue
                for index, value in enumerate(list(sub.outputs)):
                    if value in tainted and _hide(sub, index, value, is_onnx_op(node, "Scan")):
                        hidden += 1
    return hidden


class Copied(NamedTuple):
    """A node whose outputs a rewrite put where ONNX's inference sees static
    shapes: copied out of a map's body (into its scope, or into the body of
    the Scan or Loop it became), or an element a sequence hid, now read as a
    tensor. With its scope's opset, the rewrite's ``written`` list, which the
    nodes hiding its outputs join (so the rewrite's rejections count their
    sequence ops), and the node a refusal names: the map, or the reader."""

    node: ir.Node
    opset: int
    written: list[ir.Node] | None = None
    scope: str | None = None  # the map's scope, as messages name it
    origin: ir.Node | None = None  # the node the user wrote (a map, a sequence reader)
    only_read: bool = False  # read, not copied: never refused (left where nothing hides it)


class _Hiding(NamedTuple):
    """How one output of a copied node is hidden: pinned to its ``computed``
    shape, or (``computed`` None) passed through a sequence; ``dtype``: its
    dtype, where known (a sequence needs it). Or (no ``value``) how the node
    is spelled so that ONNX sizes it right (:mod:`lowering.irutils.respellings`),
    which a pin after it cannot make onnxruntime allocate."""

    node: ir.Node
    value: ir.Value | None
    computed: tuple[Dim, ...] | None
    allowzero: bool
    dtype: ir.DataType | None
    written: list[ir.Node] | None
    respelled: Respelling | None = None


def plan_copied_shapes(
    copied: Iterable[Copied], runtime: Runtime = RUNTIMES["onnxruntime"], *, hide: bool = True
) -> list[_Hiding]:
    """How to hide the outputs of the nodes of ``copied`` (and of their
    subgraphs) whose shapes ONNX may infer wrong, where they are made;
    changes nothing (:func:`apply_hiding` does each).

    ``copied``: the nodes a map's body was copied into its scope as (removed
    ones are skipped). An output whose true shape is computed
    (:func:`~lowering.irutils.computed_shapes.computed_shapes`) is pinned to
    it by a Reshape, which every runtime runs and most make a no-op; another
    is passed through a sequence, given its proven dtype
    (:func:`~lowering.analysis.proven_shapes.prove`, which also feeds each
    computed shape to the next copy; one of no known dtype is left:
    SequenceEmpty needs it). For a ``runtime`` without sequences, such an output is refused:
    :class:`LoweringError` names its node. A graph output among them keeps
    its name and declaration, on the hidden value. Without ``hide``, only
    the pins are planned.
    """
    sequences = not runtime.missing(HIDING_OPS)
    planned: list[_Hiding] = []
    proof = Proof()
    proven_in: set[ir.Graph] = set()
    seen: set[ir.Node] = set()  # (a copy a rewrite then exposed is listed twice)
    for node, entry in [(n, e) for e in copied for n in (e.node, *nodes_under(e.node))]:
        opset, written = entry.opset, entry.written
        graph = node.graph
        if graph is None or not is_onnx_domain(node.domain) or not may_be_seen_wrong(node.op_type):
            continue
        if node in seen:
            continue
        seen.add(node)
        operands = [operand(v, small_constant(v)) for v in node.inputs]
        if not seen_wrong(node, operands):
            continue
        if graph not in proven_in:  # (only where a copied node may be wrong: it costs a walk)
            prove(graph, opset, proof)
            proven_in.update(graphs_within(graph))
        proven = [proof.operand(v) for v in node.inputs]
        if not seen_wrong(node, proven):
            continue  # proven right, with the shapes proven for its inputs
        shapes = computed_shapes(node, proven)
        used = [v for v in node.outputs if v.uses() or v in graph.outputs]
        respelled = respelling(node, proven, shapes, opset) if used else None
        if respelled is not None:  # (then ONNX sizes it right: nothing more to hide)
            planned.append(_Hiding(node, None, None, False, None, written, respelled))
        for k, value in enumerate(node.outputs):
            if value not in used:
                continue
            allowzero = None if shapes is None else _allowzero(shapes[k], opset)
            known = proof.operand(value)
            dtype = None if known is None else known.dtype
            if shapes is not None and allowzero is not None:
                planned.append(_Hiding(node, value, shapes[k], allowzero, dtype, written))
                continue
            if respelled is not None:
                continue
            if not hide or (not sequences and entry.only_read):
                continue  # (read, not copied: the runtime infers it for itself)
            if not sequences:
                raise LoweringError(
                    f"--runtime {runtime.name}: ONNX infers a wrong shape for output {k} of "
                    f"{_describe(node)}, which the rewrite of this node reads as a tensor, "
                    "and its shape is not computed here; the runtime has no sequence ops "
                    "to hide it with",
                    node=entry.origin or node,
                    scope=entry.scope,
                )
            if dtype is not None:
                planned.append(_Hiding(node, value, None, False, dtype, written))
    return planned


def _describe(node: ir.Node) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else node.op_type


def _allowzero(shape: tuple[Dim, ...], opset: int) -> bool | None:
    """Whether the Reshape that pins ``shape`` (0: a dim the output copies from
    an input, or NonZero's count, kept as it is) needs ``allowzero``; None if
    no Reshape pins it (a computed size 0 beside a kept dim, or one before
    Reshape-14)."""
    if 0 not in [d for d in shape if isinstance(d, int)]:
        return False
    if all(isinstance(d, int) for d in shape) and opset >= 14:
        return True
    return None


def apply_hiding(hiding: _Hiding) -> None:
    node, value = hiding.node, hiding.value
    graph = node.graph
    assert graph is not None
    if hiding.respelled is not None:
        written = apply_respelling(hiding.respelled)
        if hiding.written is not None:
            hiding.written.extend(written)
    if value is None:
        return
    if hiding.computed is not None:
        target = [d if isinstance(d, int) else 0 for d in hiding.computed]
        shape = constant_node(np.array(target, np.int64))
        attributes = {"allowzero": 1} if hiding.allowzero else {}
        reshape = fresh(new_node("Reshape", [value, shape.outputs[0]], attributes))
        nodes, at = [shape, reshape], reshape.outputs[0]
        if hiding.dtype is not None:
            at.type = ir.TensorType(hiding.dtype)
            at.shape = ir.Shape(list(hiding.computed))
    else:
        assert hiding.dtype is not None
        rank = None if value.shape is None else len(value.shape)
        nodes, at = _hiding(value, hiding.dtype, rank)
        at.shape = None if value.shape is None else ir.Shape(list(value.shape))
    value.replace_all_uses_with(at, replace_graph_outputs=True)
    if value.name:
        adopt_name(at, value.name)
        value.name = None
        fresh(value)
    if hiding.computed is None:
        assert hiding.dtype is not None
        value.type = ir.TensorType(hiding.dtype)
        nodes[1].replace_input_with(1, value)
    else:
        nodes[1].replace_input_with(0, value)
    value.shape = None
    graph.insert_after(node, nodes)
    if hiding.written is not None:
        hiding.written.extend(nodes)


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
