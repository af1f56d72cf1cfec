"""Fold every static SequenceInsert chain into one SequenceConstruct, before maps are lowered.

paddle2onnx builds a map's input one insert at a time; folded, the map
reads the inserted tensors, whose shapes are declared, directly::

    s_0 = SequenceEmpty()
    s_1 = SequenceInsert(s_0, a)      ->   s_2 = SequenceConstruct(a, b)
    s_2 = SequenceInsert(s_1, b)           y   = SequenceMap(s_2)
    y   = SequenceMap(s_2)

The rule, and when it applies, is the first of
:mod:`lowering.sequences.reads`.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.irutils.naming import name_fresh
from lowering.sequences.reads import fold_insert_chains


class FoldInsertChainsPass(ir.passes.InPlacePass):
    """Fold every static insert chain, in every scope, into a SequenceConstruct."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = fold_insert_chains(model)
        if modified:
            name_fresh(model)
        return ir.passes.PassResult(model, modified=modified)
