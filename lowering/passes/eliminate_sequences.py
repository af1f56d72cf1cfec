"""After the maps: the sequences their forms wrote, read as tensors, and the rest removed.

An unrolled map (:mod:`lowering.maps.strategies.unroll`) writes its
elements into a ``SequenceConstruct`` and reads them back with
``SequenceAt``; a Scan or a vectorized map reads a split's elements the
same way. The rules of :mod:`lowering.sequences.reads` read those tensors
directly, and every sequence op then left unread goes
(:mod:`lowering.sequences.dead`)::

    s = SequenceConstruct(t_0, t_1)
    y = SequenceAt(s, 1)             ->   y = Identity(t_1)
    n = SequenceLength(s)                 n = Constant(2)

What it rewrites is part of lowering the maps, which report it
(:class:`~lowering.passes.lower_sequence_maps.LowerSequenceMapPass`): it
reports no rewrite of its own. For a model whose maps were not lowered,
:class:`~lowering.passes.read_sequences.ReadSequencesPass` applies the same
rules and reports each.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.irutils.naming import name_fresh
from lowering.rewrites import LoweringResult
from lowering.sequences.dead import remove_dead_sequences
from lowering.sequences.reads import read_as_tensors


class EliminateSequencesPass(ir.passes.InPlacePass):
    """Read tensors straight from the sequences the maps wrote; drop every dead sequence op.

    Valid on its own, on any model: no rule refuses (each checks its node
    first and leaves it where it does not apply), so it never leaves a
    model half-rewritten. Reports no :class:`~lowering.rewrites.Rewrite`.
    """

    def call(self, model: ir.Model) -> LoweringResult:
        modified = bool(read_as_tensors(model))
        modified = remove_dead_sequences(model) or modified
        if modified:
            name_fresh(model)
        return LoweringResult(model, modified=modified)
