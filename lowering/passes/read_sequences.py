"""A model's own sequence chains, read as tensors, each rewrite reported.

paddle2onnx's arrays, onnxscript's split/erase/insert/concat chains and
torch.split's reads hold sequences but no map. The rules of
:mod:`lowering.sequences.reads` read their tensors directly::

    s = SplitToSequence(X, [2, 4])
    y = SequenceAt(s, 1)             ->   y = Slice(X, [2], [6], [axis])

and, where one did, the sequence ops left unread go
(:mod:`lowering.sequences.dead`). Each node rewritten is a
:class:`~lowering.rewrites.Rewrite`, its ``strategy`` the op it became. A
model where no rule applies comes out exactly as it went in (its own
unread sequence ops too). After the maps,
:class:`~lowering.passes.eliminate_sequences.EliminateSequencesPass`
applies the same rules.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.irutils.naming import name_fresh
from lowering.rewrites import LoweringResult
from lowering.sequences.dead import remove_dead_sequences
from lowering.sequences.reads import read_as_tensors


class ReadSequencesPass(ir.passes.InPlacePass):
    """Read tensors straight from a model's known sequences; report each node rewritten.

    Valid on its own, on any model: no rule refuses (each checks its node
    first and leaves it where it does not apply), so it never leaves a
    model half-rewritten.
    """

    def call(self, model: ir.Model) -> LoweringResult:
        rewrites = read_as_tensors(model)
        if rewrites:
            remove_dead_sequences(model)
            name_fresh(model)
        return LoweringResult(model, modified=bool(rewrites), rewrites=rewrites)
