"""Shapes ONNX's inference gets wrong: pinned where they are computed, else not declared.

Exporters and simplifiers run ONNX's shape inference and keep what it says
as ``value_info``; the checker and runtimes run it again. Where it is wrong
(:mod:`lowering.analysis.proven_shapes`), every reader of shapes is too: an
insert position that equals the declared length read as an append, a map
unrolled for the declared count, ``SequenceAt(split, -1)`` read at the
declared last column, an expansion shaped by the declaration, a rewrite's
``Mul`` of the wrong [12] and a true [11] that the checker refuses. This
pass, first in the pipeline, makes every shape inference will see a fact:

- a node ONNX sizes wrong whose input shapes are proven static, whose true
  shape is computed, and whose declared shape says another size, is pinned
  to it, where it is made, by a Reshape (:mod:`lowering.irutils.pins`; a
  node nothing declares wrong is left to the steps that copy or read it);
- the outputs of a call of a model-local function holding such an op are
  pinned after the call where they are computed for it (onnxruntime's
  optimizer inlines the function and folds a Shape of them from its own
  inference: :func:`_call_pins`);
- every declaration the proof still doubts is forgotten, dim by dim (a dim
  the proof gives too, the same size or symbol, stays; so does the rank,
  but where an op ONNX gives another rank is upstream)::

    R = Resize(X: float[1,5], scales [1, 1.4])     R = Resize(X, scales [1, 1.4])
    value_info R: float[1,6]                  ->   P = Reshape(R, [1, 7])        (R: float)
    Y = Relu(R): float[1,6]                        Y = Relu(P): float[1,?]
    s = SplitToSequence(Q): seq(float[3])          s = SplitToSequence(Q): seq(float)
                                                   (Q = MaxPool<ceil_mode>(float[1,1,?]): not computed)

Nothing is declared in place of a forgotten dim: ONNX's inference would
contradict it. An output of the main graph or of an If, Loop or Scan body
keeps its declared rank even where that is doubted (the checker, and
onnxruntime's Scan, require one); graph inputs are what the caller feeds,
and stay as declared.
A model with no op ONNX sizes wrong is left as it is.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, call_shapes, default_opset, prove_model
from lowering.irutils.naming import name_fresh
from lowering.irutils.node_inference import Dim, may_be_seen_wrong
from lowering.irutils.op_facts import is_onnx_domain
from lowering.irutils.pins import Pin, apply_pin, plan_pins
from lowering.irutils.scopes import iter_scopes
from lowering.irutils.walk import model_nodes, nodes_within, subgraphs


class DoubtedShapesPass(ir.passes.InPlacePass):
    """Pin what ONNX sizes wrong where the true shape is computed; forget what is not proven."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not any(_may_be_seen_wrong(node) for node in model_nodes(model)):
            # Nothing to doubt: every doubt starts at such a node (so no proof).
            return ir.passes.PassResult(model, modified=False)
        proof = prove_model(model)
        pins = [
            pin
            for pin in plan_pins(_statically_wrong(model, proof), proof)
            if pin.value is not None and _contradicts(pin.value.shape, pin.computed)
        ]
        pins += _call_pins(model, proof)
        for pin in pins:
            apply_pin(pin, model.graph)
        changed = bool(pins)
        if pins:  # (else the model is as it was proven)
            proof = prove_model(model)
        ranked = _ranked_outputs(model)
        for value in proof.doubted:
            if value.shape is None:
                continue
            kept = proof.declarable(value, keep_rank=value in ranked)
            if kept != value.shape:
                value.shape = kept
                changed = True
        if pins:
            name_fresh(model)
        return ir.passes.PassResult(model, modified=changed)


def _may_be_seen_wrong(node: ir.Node) -> bool:
    return is_onnx_domain(node.domain) and may_be_seen_wrong(node.op_type)


def _statically_wrong(model: ir.Model, proof: Proof) -> list[tuple[ir.Node, int, None]]:
    """The nodes whose input shapes are all proven static and whose shapes
    ONNX's inference may get wrong: where it claims a wrong size."""
    return [
        (node, scope.opset(model) or 1, None)
        for scope in iter_scopes(model)
        for node in scope.owner
        if is_onnx_domain(node.domain)
        and may_be_seen_wrong(node.op_type)
        and all(v is None or _static(proof.shape(v)) for v in node.inputs)
    ]


def _static(shape: tuple[Dim, ...] | None) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _call_pins(model: ir.Model, proof: Proof) -> list[Pin]:
    """The outputs of calls, in the main graph and its subgraphs, of model-local
    functions ``proof`` (the model's) doubts, whose shapes are computed for the call
    (:func:`~lowering.analysis.proven_shapes.call_shapes`): each pinned after
    the call, whether declared or not.

    onnxruntime inlines the function and, with its optimizer, folds a Shape
    of the output from its own inference of the op inside; a pin after the
    call is what that Shape then reads (a Shape the lowering writes, a trip
    count, included; for an op in the graph itself, the pins of the rewrites
    that copy or read it do this, but they see no call)::

        r = local.f0(x: float[1,5])      r = local.f0(x)
        n = Shape(r)            ->       p = Reshape(r, [1, 7])     f0: Resize by 1.4
                                         n = Shape(p)               (ONNX: [1,6])
    """
    if not proof.doubting:
        return []
    opset = default_opset(model.opset_imports)
    pins = []
    for node in nodes_within(model.graph):
        function = model.functions.get(node.op_identifier())
        if function is None or node.op_identifier() not in proof.doubting:
            continue
        operands = [proof.operand(v) for v in node.inputs]
        shapes = call_shapes(function, operands, model.functions)
        for value, shape in zip(node.outputs, shapes, strict=True):
            if shape is None or not all(isinstance(d, int) for d in shape):
                continue
            if not value.uses() and not value.is_graph_output():
                continue
            allowzero = 0 in shape
            if allowzero and opset < 14:
                continue  # (Reshape reads a 0 as a copy before allowzero)
            known = proof.operand(value)
            dtype = None if known is None else known.dtype
            pins.append(Pin(node, value, shape, allowzero, dtype))
    return pins


def _ranked_outputs(model: ir.Model) -> set[ir.Value]:
    """The outputs whose declared rank stays, doubted or not: the main graph's
    (the checker requires one) and those of the If, Loop and Scan bodies
    (onnxruntime requires one of a Scan's); a SequenceMap's body, which the
    lowering reads the rank of, is not among them."""
    ranked = set(model.graph.outputs)
    for node in model_nodes(model):
        if node.op_type != "SequenceMap":
            ranked.update(v for sub in subgraphs(node) for v in sub.outputs)
    return ranked


def _contradicts(shape: ir.Shape | None, computed: tuple[Dim, ...] | None) -> bool:
    """Whether ``shape`` declares a size other than ``computed`` says."""
    if shape is None or computed is None or len(shape) != len(computed):
        return False
    return any(
        isinstance(d, int) and isinstance(c, int) and d != c
        for d, c in zip(shape, computed, strict=True)
    )
