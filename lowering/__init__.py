"""Lower ONNX SequenceMap into Loop, for runtimes that lack it.

Public API: :func:`lower`, the passes :class:`LowerSequenceMapPass`,
:class:`NormalizeSequenceInsertPass` and :class:`FreshNamesPass`, and
:class:`LoweringError`.
"""

from lowering.api import lower, lower_in_place
from lowering.errors import LoweringError
from lowering.naming import FreshNamesPass
from lowering.rewrites import Rewrite
from lowering.sequence_insert import NormalizeSequenceInsertPass
from lowering.sequence_map import LowerSequenceMapPass

__all__ = [
    "FreshNamesPass",
    "LowerSequenceMapPass",
    "LoweringError",
    "NormalizeSequenceInsertPass",
    "Rewrite",
    "lower",
    "lower_in_place",
]
__version__ = "0.1.0"
