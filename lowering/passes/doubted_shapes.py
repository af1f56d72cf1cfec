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
  to it, where it is made, by the Reshape of
  :class:`~lowering.passes.hide_unproven_outputs.HideUnprovenOutputsPass`
  (a node nothing declares wrong is left to the steps that copy or read it);
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

from lowering.analysis.proven_shapes import prove_model
from lowering.irutils.naming import name_fresh
from lowering.irutils.node_inference import Dim
from lowering.irutils.walk import model_nodes, subgraphs
from lowering.passes.hide_unproven_outputs import (
    apply_hiding,
    plan_copied_shapes,
    statically_wrong,
)


class DoubtedShapesPass(ir.passes.InPlacePass):
    """Pin what ONNX sizes wrong where the true shape is computed; forget what is not proven."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        pins = [
            pin
            for pin in plan_copied_shapes(statically_wrong(model, fill=False), hide=False)
            if pin.value is not None and _contradicts(pin.value.shape, pin.computed)
        ]
        for pin in pins:
            apply_hiding(pin)
        changed = bool(pins)
        proof = prove_model(model)
        ranked = _ranked_outputs(model)
        for value in proof.doubted:
            if value.shape is None:
                continue
            declared = [d if isinstance(d, int) else d.value for d in value.shape]
            proven = proof.shape(value)
            kept: list[Dim] | None = None
            if proven is not None and len(proven) == len(declared):
                kept = [d if d == p else None for d, p in zip(declared, proven, strict=True)]
            elif value in ranked or value not in proof.rank_doubted:
                kept = [None] * len(declared)
            if kept != declared:
                value.shape = None if kept is None else ir.Shape(kept)
                changed = True
        if pins:
            name_fresh(model)
        return ir.passes.PassResult(model, modified=changed)


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
