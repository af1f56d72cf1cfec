"""Lower ONNX SequenceMap into Loop, Scan or plain ops, for runtimes that lack it.

Public API: :func:`lower` (and :func:`lower_in_place` for onnx_ir models;
:func:`lower_with_report` for the lowered model and its :class:`Report`);
:func:`pipeline`, the same as one onnx_ir pass; the passes it runs, each
valid on its own (:class:`FixInputShapesPass`, :class:`DoubtedShapesPass`,
:class:`SpecializeFunctionsPass`, :class:`FoldInsertChainsPass`,
:class:`LowerAccumulatorLoopsPass`, :class:`LowerSequenceMapPass`, :class:`EliminateSequencesPass`,
:class:`ReadSequencesPass`, :class:`NormalizeSequenceInsertPass`, :class:`OptimizePass`,
:class:`CopyPassedThroughPass`, :class:`FillEmptyStartsPass`, :class:`ConstantValueFormPass`, :class:`TargetOpsetPass`, :class:`IrVersionPass`) and
:class:`FreshNamesPass`; :class:`Options`; :class:`LoweringError` and
:func:`refusal` (the refusal inside an onnx_ir ``PassError``); and
``lowering.verify.compare``.

Imported lazily (PEP 562): ``import lowering`` costs nothing, so that
``onnx-lower --help`` imports neither onnx nor onnx_ir; each name loads its
module when first read.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lowering.api import lower, lower_in_place, lower_with_report
    from lowering.errors import LoweringError, refusal
    from lowering.options import OptionError, Options
    from lowering.passes.constant_form import ConstantValueFormPass
    from lowering.passes.copy_passed_through import CopyPassedThroughPass
    from lowering.passes.doubted_shapes import DoubtedShapesPass
    from lowering.passes.eliminate_sequences import EliminateSequencesPass
    from lowering.passes.fill_empty_starts import FillEmptyStartsPass
    from lowering.passes.fix_input_shapes import FixInputShapesPass
    from lowering.passes.fold_insert_chains import FoldInsertChainsPass
    from lowering.passes.fresh_names import FreshNamesPass
    from lowering.passes.ir_version import IrVersionPass
    from lowering.passes.lower_accumulator_loops import LowerAccumulatorLoopsPass
    from lowering.passes.lower_sequence_maps import LowerSequenceMapPass
    from lowering.passes.normalize_inserts import NormalizeSequenceInsertPass
    from lowering.passes.optimize import OptimizePass
    from lowering.passes.read_sequences import ReadSequencesPass
    from lowering.passes.specialize_functions import SpecializeFunctionsPass
    from lowering.passes.target_opset import TargetOpsetPass
    from lowering.report import Report
    from lowering.rewrites import LoweringResult, Rewrite
    from lowering.steps import Pipeline, pipeline

#: Where each public name lives.
_HOMES = {
    "lower": "lowering.api",
    "lower_in_place": "lowering.api",
    "lower_with_report": "lowering.api",
    "LoweringError": "lowering.errors",
    "refusal": "lowering.errors",
    "OptionError": "lowering.options",
    "Options": "lowering.options",
    "ConstantValueFormPass": "lowering.passes.constant_form",
    "CopyPassedThroughPass": "lowering.passes.copy_passed_through",
    "DoubtedShapesPass": "lowering.passes.doubted_shapes",
    "EliminateSequencesPass": "lowering.passes.eliminate_sequences",
    "FillEmptyStartsPass": "lowering.passes.fill_empty_starts",
    "FixInputShapesPass": "lowering.passes.fix_input_shapes",
    "FoldInsertChainsPass": "lowering.passes.fold_insert_chains",
    "FreshNamesPass": "lowering.passes.fresh_names",
    "IrVersionPass": "lowering.passes.ir_version",
    "LowerAccumulatorLoopsPass": "lowering.passes.lower_accumulator_loops",
    "LowerSequenceMapPass": "lowering.passes.lower_sequence_maps",
    "NormalizeSequenceInsertPass": "lowering.passes.normalize_inserts",
    "OptimizePass": "lowering.passes.optimize",
    "ReadSequencesPass": "lowering.passes.read_sequences",
    "SpecializeFunctionsPass": "lowering.passes.specialize_functions",
    "TargetOpsetPass": "lowering.passes.target_opset",
    "Pipeline": "lowering.steps",
    "pipeline": "lowering.steps",
    "Report": "lowering.report",
    "LoweringResult": "lowering.rewrites",
    "Rewrite": "lowering.rewrites",
}

__all__ = [
    "ConstantValueFormPass",
    "CopyPassedThroughPass",
    "DoubtedShapesPass",
    "EliminateSequencesPass",
    "FillEmptyStartsPass",
    "FixInputShapesPass",
    "FoldInsertChainsPass",
    "FreshNamesPass",
    "IrVersionPass",
    "LowerAccumulatorLoopsPass",
    "LowerSequenceMapPass",
    "LoweringError",
    "LoweringResult",
    "NormalizeSequenceInsertPass",
    "OptimizePass",
    "OptionError",
    "Options",
    "Pipeline",
    "ReadSequencesPass",
    "Report",
    "Rewrite",
    "SpecializeFunctionsPass",
    "TargetOpsetPass",
    "lower",
    "lower_in_place",
    "lower_with_report",
    "pipeline",
    "refusal",
]
__version__ = "0.1.0"


def _lazy_names(module: str, homes: dict[str, str]) -> tuple[Callable, Callable]:
    """``module``'s PEP 562 ``__getattr__`` and ``__dir__``: each name of ``homes``
    is imported from its home when first read (here and in :mod:`lowering.verify`)."""
    namespace = sys.modules[module].__dict__

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value  # once: later reads find it
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__


__getattr__, __dir__ = _lazy_names(__name__, _HOMES)
