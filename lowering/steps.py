"""The steps of the pipeline: every pass :func:`lowering.lower` runs, in order, written once.

(:func:`lowering.pipeline` returns them as one pass; the module has its own
name so that importing it never hides that function.)

::

    FixInputShapesPass            the dims input_shapes fixes   (input_shapes=...)
    DoubtedShapesPass             no declared shape ONNX's inference may have got wrong
                                  (with a sequence op, or target_opset=N)
    SpecializeFunctionsPass       a copy of a function per graph a call gives its map
    FoldInsertChainsPass      *   static insert chains become one SequenceConstruct
    LowerAccumulatorLoopsPass  +  sequences Loops accumulate, as scan outputs or a Concat
    LowerSequenceMapPass      *   every SequenceMap, in the form chosen for it
    EliminateSequencesPass    **  the sequence ops the lowering left, read as tensors
    ReadSequencesPass         ++  the user's chains read as tensors, each rewrite reported
    NormalizeSequenceInsertPass   canonical positions      (unless normalize_inserts=False)
    OptimizePass              *** onnxscript's optimizer   (optimize=True)
    CopyPassedThroughPass         a copy of each input a loop body returns as it is
                                  (for a runtime that reads it wrong: openvino)
    FillEmptyStartsPass           each empty constant a loop carries in, as a ConstantOfShape
                                  (for a runtime that reads it wrong: openvino)
    ConstantValueFormPass     *** Constants as ``value``   (for TVM, MNN: they read no other form)
    TargetOpsetPass               declare target_opset     (target_opset=N)
    IrVersionPass                 the lowest IR version    (target_opset=N or ir_version=N)
    ProvenancePass            ****  metadata_props naming the tool, its version and options

    *    only when the model holds a SequenceMap
    +    only when the model holds a sequence op other than SequenceMap
    **   only when a map was lowered
    ++   only when the model holds a sequence op other than SequenceMap, and no map was lowered
    ***  only when a map, a position or a sequence op was rewritten
    **** only when a node was rewritten, or an opset or the IR version declared anew

So a model with nothing to lower comes out exactly as it went in. Each pass
names what it creates; the pipeline adds only the order, the conditions and
the transaction: a refusal (:class:`LoweringError`, raised as itself, never
wrapped) leaves the model as it was, names included. The steps say how far
they are to a :data:`lowering.progress.Callback` (by default, to no one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import onnx_ir as ir

from lowering import __version__
from lowering.errors import LoweringError, refusal
from lowering.irutils.op_facts import SEQUENCE_OPS, is_onnx_domain
from lowering.irutils.scopes import find_nodes
from lowering.irutils.snapshot import restorer, snapshot
from lowering.options import Options, OptionValues, resolved
from lowering.passes.constant_form import ConstantValueFormPass
from lowering.passes.copy_passed_through import CopyPassedThroughPass
from lowering.passes.doubted_shapes import DoubtedShapesPass
from lowering.passes.eliminate_sequences import EliminateSequencesPass
from lowering.passes.fill_empty_starts import FillEmptyStartsPass
from lowering.passes.fix_input_shapes import FixInputShapesPass, planned_shapes
from lowering.passes.fold_insert_chains import FoldInsertChainsPass
from lowering.passes.ir_version import IrVersionPass
from lowering.passes.lower_accumulator_loops import LowerAccumulatorLoopsPass
from lowering.passes.lower_sequence_maps import LowerSequenceMapPass
from lowering.passes.normalize_inserts import NormalizeSequenceInsertPass
from lowering.passes.optimize import OptimizePass
from lowering.passes.provenance import ProvenancePass
from lowering.passes.read_sequences import ReadSequencesPass
from lowering.passes.specialize_functions import SpecializeFunctionsPass, SpecializeResult
from lowering.passes.target_opset import TargetOpsetPass
from lowering.progress import Callback, silent
from lowering.rewrites import Kept, LoweringResult, stays
from lowering.runtimes.profiles import profile

if TYPE_CHECKING:
    from typing_extensions import Unpack


@dataclasses.dataclass(frozen=True)
class Step:
    """One pass of the pipeline and when it runs (``when`` reads what ran before)."""

    name: str
    make: Callable[[Options, Progress], ir.passes.PassBase]
    when: Callable[[Options, Progress], bool]


@dataclasses.dataclass
class Progress:
    """What the steps run so far did, for the next steps' conditions.

    ``changed``: a node was rewritten, or the opsets or IR version declared
    differ from the input's (what the CLI writes anew rather than copying).
    ``tell``: where the steps say how far they are (:mod:`lowering.progress`).
    """

    has_maps: bool = False
    has_sequences: bool = False  # a sequence op other than SequenceMap
    maps_lowered: bool = False
    rewritten: bool = False
    changed: bool = False
    tell: Callback = silent


STEPS: tuple[Step, ...] = (
    Step(
        "fix input shapes",
        lambda o, p: FixInputShapesPass(o.input_shapes),  # type: ignore[arg-type]
        lambda o, p: o.input_shapes is not None,
    ),
    Step(
        "doubted shapes",
        lambda o, p: DoubtedShapesPass(),
        lambda o, p: p.has_maps or p.has_sequences or o.target_opset is not None,
    ),
    Step("specialize", lambda o, p: SpecializeFunctionsPass(), lambda o, p: True),
    Step("fold insert chains", lambda o, p: FoldInsertChainsPass(), lambda o, p: p.has_maps),
    Step(
        "accumulator loops",
        lambda o, p: LowerAccumulatorLoopsPass(o.runtime, o.target_opset),
        lambda o, p: p.has_sequences,
    ),
    Step(
        "lower maps",
        lambda o, p: LowerSequenceMapPass(
            o.strategy,
            max_unroll=o.max_unroll,
            runtime=o.runtime,
            keep_originals=o.keep_originals,
            target_opset=o.target_opset,
            progress=p.tell,
        ),
        lambda o, p: p.has_maps,
    ),
    Step("eliminate sequences", lambda o, p: EliminateSequencesPass(), lambda o, p: p.maps_lowered),
    Step(
        "read sequences",
        lambda o, p: ReadSequencesPass(),
        lambda o, p: p.has_sequences and not p.maps_lowered,
    ),
    Step(
        "normalize inserts",
        lambda o, p: NormalizeSequenceInsertPass(
            keep_originals=o.keep_originals, target_opset=o.target_opset, runtime=o.runtime
        ),
        lambda o, p: o.normalize_inserts,
    ),
    Step("optimize", lambda o, p: OptimizePass(), lambda o, p: o.optimize and p.rewritten),
    Step(
        "copy passed through",
        lambda o, p: CopyPassedThroughPass(o.runtime),
        lambda o, p: profile(o.runtime).passes_through_wrong() is not None,
    ),
    Step(
        "fill empty starts",
        lambda o, p: FillEmptyStartsPass(o.runtime),
        lambda o, p: profile(o.runtime).empty_starts_wrong() is not None,
    ),
    Step(
        "constant form",
        lambda o, p: ConstantValueFormPass(),
        lambda o, p: p.rewritten and profile(o.runtime).constant_shorthands,
    ),
    Step(
        "target opset",
        lambda o, p: TargetOpsetPass(o.target_opset),  # type: ignore[arg-type]
        lambda o, p: o.target_opset is not None,
    ),
    Step(
        "ir version",
        lambda o, p: IrVersionPass(o.ir_version),
        lambda o, p: o.target_opset is not None or o.ir_version is not None,
    ),
    Step("provenance", lambda o, p: ProvenancePass(__version__, o), lambda o, p: p.changed),
)


class Pipeline(ir.passes.InPlacePass):
    """:data:`STEPS` as one in-place pass; returns a :class:`LoweringResult`.

    ``atomic``: keep the model to put back on failure (:mod:`lowering.irutils.snapshot`);
    off only where the caller throws the model away on failure (``lower`` on a
    ModelProto works on a copy). ``restore_from``: instead of a snapshot, read
    the model again from what the caller already holds (the CLI: the bytes or
    file it read), which costs nothing unless the lowering fails. ``progress``:
    told each step's name as it starts, and the maps' counts
    (:mod:`lowering.progress`).
    """

    def __init__(
        self,
        options: Options,
        *,
        atomic: bool = True,
        restore_from: Callable[[], ir.Model] | None = None,
        progress: Callback = silent,
    ) -> None:
        super().__init__()
        self.options = options
        self.atomic = atomic
        self.restore_from = restore_from
        self.progress = progress

    def __call__(self, model_or_result: ir.Model | ir.passes.PassResult, /) -> LoweringResult:
        result = super().__call__(model_or_result)
        assert isinstance(result, LoweringResult), "Pipeline.call returns a LoweringResult"
        return result

    @property
    def passes(self) -> list[ir.passes.PassBase]:
        """Every pass the pipeline may run with its options, in order (each runs
        only when its step says: these are the ones whose step could say so,
        whether or not a map is lowered)."""
        states = [
            Progress(
                has_maps=True,
                has_sequences=True,
                maps_lowered=lowered,
                rewritten=True,
                changed=True,
            )
            for lowered in (True, False)
        ]
        return [
            step.make(self.options, states[0])
            for step in STEPS
            if any(step.when(self.options, state) for state in states)
        ]

    def call(self, model: ir.Model) -> LoweringResult:
        restore = None
        if self.atomic:
            from_source = self.restore_from
            restore = snapshot(model) if from_source is None else restorer(model, from_source)
        try:
            return self._call(model)
        except BaseException:
            if restore is not None:
                restore()
            raise

    def _call(self, model: ir.Model) -> LoweringResult:
        if self.options.input_shapes is not None:  # a usage error, raised as itself
            planned_shapes(model, self.options.input_shapes)
        ops = {located.node.op_type for located in find_nodes(model, _is_sequence_op)}
        progress = Progress(
            has_maps="SequenceMap" in ops,
            has_sequences=bool(ops - {"SequenceMap"}),
            tell=self.progress,
        )
        declared = _declared(model)
        fixed = False
        total = LoweringResult(model, modified=False)
        specialized: SpecializeResult | None = None
        for step in STEPS:
            if not step.when(self.options, progress):
                continue
            self.progress(step.name, 0, 0)
            pass_ = step.make(self.options, progress)
            try:
                result = _run(pass_, model)
            except LoweringError as error:
                if specialized is None and not stays(total.kept):
                    raise
                if specialized is not None:  # name the function the user wrote
                    error = specialized.unspecialized(error)
                raise _with_stays(error, total.kept) from None
            total.modified = total.modified or result.modified
            if isinstance(pass_, FixInputShapesPass):
                fixed = result.modified
            if isinstance(result, SpecializeResult):
                specialized = result if result.modified else None
            if isinstance(pass_, LowerSequenceMapPass):
                progress.maps_lowered = result.modified
            if isinstance(result, LoweringResult):
                total.rewrites += result.rewrites
                total.kept += result.kept
                total.conversions += result.conversions
                total.not_optimized = total.not_optimized or result.not_optimized
                progress.rewritten = progress.rewritten or bool(result.rewrites)
            progress.changed = (
                bool(total.rewrites or total.conversions) or fixed or _declared(model) != declared
            )
        return total


def _with_stays(error: LoweringError, kept: list[Kept]) -> LoweringError:
    """``error``, saying too why each Loop accumulator stays a sequence: where
    one does, the target has no sequences (a ``--target-opset`` whose Loop
    carries none), so it is among what the target refuses."""
    said = stays(kept)
    if not said:
        return error
    return LoweringError(
        f"{error.reason}; {said}", node=error.node, scope=error.scope, details=error.details
    )


def pipeline(
    options: Options | None = None,
    *,
    progress: Callback = silent,
    **overrides: Unpack[OptionValues],
) -> Pipeline:
    """The passes of :func:`lowering.lower`, as one onnx_ir pass, for ``options``
    (with any field given as a keyword in its place, as ``lower`` takes them).

    ``lowering.pipeline(strategy="loop")(model).rewrites`` is what
    ``lowering.lower_in_place(model, strategy="loop")`` returns, and its
    ``kept`` the SequenceInsert positions left as written (and why).
    ``progress``: see :class:`Pipeline`.
    """
    return Pipeline(resolved(options, overrides, "pipeline"), progress=progress)


def _declared(model: ir.Model) -> tuple:
    """The opsets the model and its functions import, and its IR version."""
    return (
        model.ir_version,
        dict(model.opset_imports),
        [dict(f.opset_imports) for f in model.functions.values()],
    )


def _is_sequence_op(node: ir.Node) -> bool:
    return is_onnx_domain(node.domain) and (
        node.op_type == "SequenceMap" or node.op_type in SEQUENCE_OPS
    )


def _run(pass_: ir.passes.PassBase, model: ir.Model) -> ir.passes.PassResult:
    """Run one pass, raising a refusal as itself rather than in onnx_ir's wrapper."""
    try:
        return pass_(model)
    except ir.passes.PassError as error:
        refused = refusal(error)
        if refused is not None:
            raise refused from None
        raise
