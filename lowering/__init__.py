"""Lower ONNX SequenceMap into Loop, Scan or plain ops, for runtimes that lack it.

Public API: :func:`lower` (and :func:`lower_in_place` for onnx_ir models),
the passes :class:`LowerSequenceMapPass`, :class:`NormalizeSequenceInsertPass`,
:class:`EliminateSequencesPass`, :class:`TargetOpsetPass` and
:class:`FreshNamesPass`, :class:`LoweringError`, and ``lowering.verify.compare``.
"""

from lowering.api import lower, lower_in_place
from lowering.errors import LoweringError
from lowering.irutils.naming import FreshNamesPass
from lowering.passes.eliminate_sequences import EliminateSequencesPass
from lowering.passes.lower_sequence_maps import LowerSequenceMapPass
from lowering.passes.normalize_inserts import NormalizeSequenceInsertPass
from lowering.passes.target_opset import TargetOpsetPass
from lowering.rewrites import Rewrite

__all__ = [
    "EliminateSequencesPass",
    "FreshNamesPass",
    "LowerSequenceMapPass",
    "LoweringError",
    "NormalizeSequenceInsertPass",
    "Rewrite",
    "TargetOpsetPass",
    "lower",
    "lower_in_place",
]
__version__ = "0.1.0"
