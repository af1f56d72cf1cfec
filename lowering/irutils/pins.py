"""Pins: an output ONNX's inference sizes wrong, reshaped to the shape onnxruntime computes.

Where a rewrite puts a node of :func:`~lowering.irutils.node_inference.seen_wrong`
where ONNX's inference reads static shapes (a copy of a map's body, an
element a sequence held, what a conversion reads), its wrong claim reaches
the nodes whose inference checks it: the checker refuses a Concat of two
copies ("Can't merge shape info"), onnxruntime allocates an If output or a
Scan result by it, or folds a Shape from it. Each output whose true shape is
computed (:mod:`lowering.irutils.computed_shapes`) is pinned to it where it
is made, which every runtime runs and most make a no-op; its readers, and a
graph output it is, read the pin. Where the node can be respelled into a
form ONNX sizes right (:mod:`lowering.irutils.respellings`), it is, since
onnxruntime allocates the node's own output by that inference, which no pin
after it reaches::

    y = LpPool <ceil_mode = 1> (x: float[1,2,3])      y = LpPool <ceil_mode = 1> (x)
    z = Concat(y, w)                             ->    p = Reshape(y, [1, 2, 1])
                                                       z = Concat(p, w)

An output with neither has no pin (:func:`node_pins` says None): a rewrite
that would expose it chooses another form first (a map's strategy declines,
:mod:`lowering.maps.claims`; the sequence elimination leaves the read). A
node pinned but not respelled keeps ONNX's wrong size on its own output
(:func:`misallocated_output`), which a rewrite does not copy either.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

import numpy as np
import onnx_ir as ir

from lowering.irutils.computed_shapes import computed_shapes
from lowering.irutils.constants import constant_node
from lowering.irutils.naming import adopt_name, fresh
from lowering.irutils.node_inference import (
    Dim,
    Operand,
    claimed_outputs,
    may_be_seen_wrong,
    operand,
    seen_wrong,
)
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_domain
from lowering.irutils.respellings import Respelling, apply_respelling, respelling
from lowering.irutils.static_values import small_constant
from lowering.irutils.walk import nodes_under


class Proven(Protocol):
    """What is proven of values (:class:`lowering.analysis.proven_shapes.Proof`)."""

    def operand(self, value: ir.Value | None) -> Operand | None: ...


class Pin(NamedTuple):
    """One output pinned to its ``computed`` shape (``dtype``: its proven dtype,
    where known), or (no ``value``) its node ``respelled``; the nodes written
    join ``written``, where given (the rewrite's list)."""

    node: ir.Node
    value: ir.Value | None
    computed: tuple[Dim, ...] | None
    allowzero: bool
    dtype: ir.DataType | None
    written: list[ir.Node] | None = None
    respelled: Respelling | None = None


def node_pins(
    node: ir.Node,
    proven: Sequence[Operand | None],
    opset: int,
    dtypes: Sequence[ir.DataType | None] = (),
    *,
    all_used: bool = False,
) -> list[Pin] | None:
    """How ``node`` (given ``proven``, what is proven of its inputs) is spelled
    and its used outputs pinned so that ONNX's inference sizes them right: []
    where it does already; None where an output ONNX may size wrong has no
    pin (its shape is not computed, or is 0 where a Reshape cannot say so).
    ``dtypes``: each output's proven dtype, which the pin declares;
    ``all_used``: count every output as read (a rewrite not yet wired in)."""
    if not is_onnx_domain(node.domain) or not seen_wrong(node, proven):
        return []
    shapes = computed_shapes(node, proven)
    used = [v for v in node.outputs if all_used or v.uses() or v.is_graph_output()]
    respelled = respelling(node, proven, shapes, opset) if used else None
    pins = [] if respelled is None else [Pin(node, None, None, False, None, None, respelled)]
    for k, value in enumerate(node.outputs):
        if value not in used:
            continue
        allowzero = None if shapes is None else _allowzero(shapes[k], opset)
        if shapes is not None and allowzero is not None:
            dtype = dtypes[k] if k < len(dtypes) else None
            pins.append(Pin(node, value, shapes[k], allowzero, dtype))
        elif respelled is None:
            return None
    return pins


def may_need_pin(node: ir.Node) -> bool:
    """Whether ``node`` may be one ONNX sizes wrong, as its inputs' declared
    shapes and constant values tell (a proof can only know more: this only
    says where proving is worth its cost, as a Slice of constant bounds
    never is)."""
    if not is_onnx_domain(node.domain) or not may_be_seen_wrong(node.op_type):
        return False
    return seen_wrong(node, [operand(v, small_constant(v)) for v in node.inputs])


def plan_pins(
    nodes: Iterable[tuple[ir.Node, int, list[ir.Node] | None]], proof: Proven
) -> list[Pin]:
    """The pins of ``nodes`` (each with its scope's default-domain opset and the
    list the nodes written join) and of the nodes in their subgraphs, as
    ``proof`` proves their inputs; changes nothing (:func:`apply_pin` does
    each). A node with no pin is left as it is: the rewrites that copy or
    expose one choose another form first."""
    planned: list[Pin] = []
    seen: set[ir.Node] = set()  # (a node listed twice, as a copy and as read)
    for entry, opset, written in nodes:
        for node in (entry, *nodes_under(entry)):
            if node in seen or node.graph is None or not may_be_seen_wrong(node.op_type):
                continue
            seen.add(node)
            proven = [proof.operand(v) for v in node.inputs]
            dtypes = [None if (o := proof.operand(v)) is None else o.dtype for v in node.outputs]
            pins = node_pins(node, proven, opset, dtypes)
            planned += [pin._replace(written=written) for pin in pins or ()]
    return planned


def read_producers(written: Iterable[ir.Node]) -> list[ir.Node]:
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


def unpinned_output(
    node: ir.Node, proven: Sequence[Operand | None], opset: int, *, all_used: bool = False
) -> int | None:
    """The first used output of ``node`` (given ``proven``) that ONNX may size
    wrong and no pin fixes; None where :func:`node_pins` has its pins."""
    if node_pins(node, proven, opset, all_used=all_used) is not None:
        return None
    shapes = computed_shapes(node, proven)
    return next(
        k
        for k, v in enumerate(node.outputs)
        if (all_used or v.uses() or v.is_graph_output())
        and (shapes is None or _allowzero(shapes[k], opset) is None)
    )


def misallocated_output(
    node: ir.Node, proven: Sequence[Operand | None], opset: int, *, all_used: bool = False
) -> int | None:
    """The first used output of ``node`` (given ``proven``) that onnxruntime
    still allocates by ONNX's wrong size once pinned: a Reshape pin after
    the node reaches its readers, not the node's own output, which only a
    respelling sizes right. Where the node is copied (a map's body
    unrolled, vectorized, in a Scan over a split), the planner hands that
    output a freed buffer of the claimed size, or hands its true-sized
    buffer on to a later value of the claimed size ("Shape mismatch
    attempting to re-use buffer. {1,2,2} != {1,2,3}"); None
    where every such output is respelled, or needs no pin."""
    pins = node_pins(node, proven, opset, all_used=all_used)
    if not pins or any(pin.respelled is not None for pin in pins):
        return None
    claimed = claimed_outputs(node.op_type, node.attributes, proven, opset, len(node.outputs))
    for pin in pins:
        k = node.outputs.index(pin.value)
        dims = claimed[k].shape
        static = dims is not None and all(isinstance(d, int) for d in dims)
        if static and tuple(dims or ()) != tuple(pin.computed or ()):
            return k
    return None


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


def apply_pin(pin: Pin, main: ir.Graph) -> None:
    """Respell the node, or put the Reshape after it that its readers then read.

    An output of ``main`` (the model's graph) stays the node's own: onnxruntime
    sizes a model's output by what the kernel computes, while an inner value
    gets a buffer planned by ONNX's wrong size ("Shape mismatch attempting to
    re-use buffer"). It keeps only the dims ONNX's inference agrees on::

        y = Slice(x)   (y: a model output)      y = Slice(x)       (y: float[?])
        z = Abs(y)                        ->    p = Reshape(y, [3])
                                                z = Abs(p)
    """
    node, value = pin.node, pin.value
    graph = node.graph
    assert graph is not None
    if pin.respelled is not None:
        written = apply_respelling(pin.respelled)
        if pin.written is not None:
            pin.written.extend(written)
    if value is None or pin.computed is None:
        return
    kept = graph is main and value.is_graph_output()
    if kept:
        _declare_agreed(value, pin)
        if not value.uses():
            return
    target = [d if isinstance(d, int) else 0 for d in pin.computed]
    shape = constant_node(np.array(target, np.int64))
    attributes = {"allowzero": 1} if pin.allowzero else {}
    reshape = fresh(new_node("Reshape", [value, shape.outputs[0]], attributes))
    at = reshape.outputs[0]
    if pin.dtype is not None:
        at.type = ir.TensorType(pin.dtype)
        at.shape = ir.Shape(list(pin.computed))
    for user, k in [use for use in value.uses() if use.node is not reshape]:
        user.replace_input_with(k, at)
    if not kept:
        for k, output in enumerate(graph.outputs):
            if output is value:
                graph.outputs[k] = at
        if value.name:
            adopt_name(at, value.name)
            value.name = None
            fresh(value)
        value.shape = None
    graph.insert_after(node, [shape, reshape])
    if pin.written is not None:
        pin.written.extend([shape, reshape])


def _declare_agreed(value: ir.Value, pin: Pin) -> None:
    """Declare of a model output the computed dims its declaration agrees on
    (ONNX's inference writes that declaration, or none), the rest unknown."""
    assert pin.computed is not None
    declared = value.shape
    if declared is None or len(declared) != len(pin.computed):
        declared = ir.Shape([None] * len(pin.computed))
    agreed = [d if declared[k] == d else None for k, d in enumerate(pin.computed)]
    value.shape = ir.Shape(agreed)
    if value.type is None and pin.dtype is not None:
        value.type = ir.TensorType(pin.dtype)
