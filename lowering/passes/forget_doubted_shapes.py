"""Forget the declared shapes that may come from ONNX's wrong inference.

Exporters and simplifiers run ONNX's shape inference and keep what it says
as ``value_info``. Where it is wrong (:mod:`lowering.analysis.proven_shapes`),
every reader of declared shapes would be too: an insert position that
equals the declared length read as an append, a map unrolled for the
declared count, ``SequenceAt(split, -1)`` read at the declared last column,
an expansion shaped by the declaration. This pass, first in the pipeline,
forgets each declaration the proof doubts::

    R = Resize(X: float[1,5], scales [1, 1.4])   value_info R: float[1,6]   ->  float[1,?]
    s = SplitToSequence<axis = 1>(R)             seq(float[1])             ->  seq(float)
    Y = Relu(R)                                  graph output float[1,6]   ->  float[1,?]

A dim the proof gives too (the same size, or the same symbol) stays.
Nothing is declared in place of the others, not even a computed size:
ONNX's inference, in the checker and in runtimes, would contradict it. A
graph output keeps its declared rank, which the checker requires; graph
inputs are what the caller feeds, and their declarations stay. A model
with no shape ONNX gets wrong is left as it is.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.analysis.proven_shapes import prove_model
from lowering.irutils.node_inference import Dim


class ForgetDoubtedShapesPass(ir.passes.InPlacePass):
    """Forget every declared shape that :func:`~lowering.analysis.proven_shapes.prove` doubts."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        changed = False
        proof = prove_model(model)
        for value in proof.doubted:
            if value.shape is None:
                continue
            declared = [d if isinstance(d, int) else d.value for d in value.shape]
            proven = proof.shape(value)
            kept: list[Dim] | None = None
            if proven is not None and len(proven) == len(declared):
                kept = [d if d == p else None for d, p in zip(declared, proven, strict=True)]
            elif value.is_graph_output():  # (of any graph: one of the main graph needs it)
                kept = [None] * len(declared)
            if kept != declared:
                value.shape = None if kept is None else ir.Shape(kept)
                changed = True
        return ir.passes.PassResult(model, modified=changed)
