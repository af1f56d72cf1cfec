"""The Python entry points: ``lowering.lower(model)``, ``lower_in_place`` and
``lower_with_report``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import overload

import onnx
import onnx_ir as ir

from lowering.options import DEFAULT_MAX_UNROLL, Options, RuntimeName, Strategy
from lowering.progress import Callback, silent
from lowering.report import Measure, Report
from lowering.rewrites import LoweringResult, Rewrite
from lowering.steps import Pipeline


def lower_in_place(
    model: ir.Model,
    *,
    normalize_inserts: bool = True,
    strategy: Strategy = "auto",
    max_unroll: int = DEFAULT_MAX_UNROLL,
    runtime: RuntimeName = "onnxruntime",
    optimize: bool = False,
    target_opset: int | None = None,
    ir_version: int | None = None,
    keep_originals: bool = False,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    restore_from: Callable[[], ir.Model] | None = None,
    progress: Callback = silent,
) -> list[Rewrite]:
    """Lower ``model`` in place and say what was rewritten.

    Runs :func:`lowering.pipeline` with these options (see :func:`lower`
    for each): the maps, then the insert positions, then what is asked for.
    ``keep_originals`` keeps a copy of each rewritten node for
    :meth:`Rewrite.before`.

    All or nothing: if any step raises (:class:`LoweringError` for a model
    that cannot be lowered), ``model`` is left exactly as it was. Each pass
    checks before it changes anything, but a later pass can only find its
    problem after an earlier one ran, so the whole pipeline runs as one
    transaction (:func:`lowering.irutils.snapshot.snapshot`). ``restore_from``,
    a function that reads ``model`` again as it was (from the bytes it was
    loaded from), spares that snapshot: the restore reads it instead.
    ``progress`` is told how far it is (:mod:`lowering.progress`; by default
    no one is).
    """
    options = Options(
        normalize_inserts=normalize_inserts,
        strategy=strategy,
        max_unroll=max_unroll,
        runtime=runtime,
        optimize=optimize,
        target_opset=target_opset,
        ir_version=ir_version,
        keep_originals=keep_originals,
        input_shapes=input_shapes,  # type: ignore[arg-type]
    )
    return Pipeline(options, restore_from=restore_from, progress=progress)(model).rewrites


@overload
def lower(
    model: onnx.ModelProto,
    *,
    normalize_inserts: bool = ...,
    strategy: Strategy = ...,
    max_unroll: int = ...,
    runtime: RuntimeName = ...,
    optimize: bool = ...,
    target_opset: int | None = ...,
    ir_version: int | None = ...,
    keep_originals: bool = ...,
    input_shapes: Mapping[str, Sequence[int]] | None = ...,
    progress: Callback = ...,
) -> onnx.ModelProto: ...
@overload
def lower(
    model: ir.Model,
    *,
    normalize_inserts: bool = ...,
    strategy: Strategy = ...,
    max_unroll: int = ...,
    runtime: RuntimeName = ...,
    optimize: bool = ...,
    target_opset: int | None = ...,
    ir_version: int | None = ...,
    keep_originals: bool = ...,
    input_shapes: Mapping[str, Sequence[int]] | None = ...,
    progress: Callback = ...,
) -> ir.Model: ...
def lower(
    model: onnx.ModelProto | ir.Model,
    *,
    normalize_inserts: bool = True,
    strategy: Strategy = "auto",
    max_unroll: int = DEFAULT_MAX_UNROLL,
    runtime: RuntimeName = "onnxruntime",
    optimize: bool = False,
    target_opset: int | None = None,
    ir_version: int | None = None,
    keep_originals: bool = False,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    progress: Callback = silent,
) -> onnx.ModelProto | ir.Model:
    """Rewrite every SequenceMap in ``model`` into an equivalent form without it.

    Options (the same as :func:`lower_in_place`'s): ``strategy`` "auto"
    picks, for each map, the first form that fits: vectorize (the body once
    on the stacked elements, no loop), unroll (a static length of at most
    ``max_unroll``, default 16), scan (split -> map -> concat), uniform (a
    Loop with scan outputs where every output element has one shape: O(n)),
    and the general Loop + SequenceInsert form elsewhere
    (docs/strategies.md); "loop" forces the general form.
    ``runtime`` names the runtime the output is for: where a loop is
    unavoidable it picks a form that runtime runs (a Scan for "tract", a
    Loop with scan outputs for "mnn"), unrolls static maps of any length
    for runtimes with no loop ("tvm", "tinygrad", "iree", "generic"), and raises
    LoweringError for a map it can run in no form. Then,
    unless ``normalize_inserts`` is False, every SequenceInsert position is
    put into canonical form (see :mod:`lowering.passes.normalize_inserts`).
    ``optimize`` folds constants afterwards; ``target_opset`` declares an
    older (or newer) default-domain opset, and then the lowest IR version
    the content allows; ``ir_version`` declares that IR version instead
    (LoweringError if the content needs a higher one). Without either, the
    output keeps the input's IR version. ``input_shapes`` (``{"x": (5, 4)}``)
    fixes the dims of those graph inputs first (the elements' of a sequence
    input), so the proof and the form choice use them and the output's
    inputs declare them (:mod:`lowering.passes.fix_input_shapes`); a name
    that is no input, or dims that contradict a declared rank or static dim,
    raise :class:`~lowering.options.InputShapeError` (a ValueError). ``progress`` is told how far it is
    (:mod:`lowering.progress`; by default no one is).

    What changed the model is recorded in its ``metadata_props``
    (``lowering.version``, ``lowering.options``), only when something was
    rewritten or an opset or IR version declared anew
    (:mod:`lowering.passes.provenance`).

    Takes an ``onnx.ModelProto`` or an ``onnx_ir.Model`` and returns the same
    kind. A ModelProto is left unchanged and a new one is returned; an
    onnx_ir Model is rewritten in place and returned, like any onnx_ir pass.

    Raises:
        LoweringError: the model cannot be lowered; the message names the
            node, the graph it sits in and the reason. The model is left
            exactly as it was.
        ValueError: an option has a value it cannot take.
        TypeError: ``model`` is neither kind of model, or an option is misspelt.
    """
    options = Options(
        normalize_inserts=normalize_inserts,
        strategy=strategy,
        max_unroll=max_unroll,
        runtime=runtime,
        optimize=optimize,
        target_opset=target_opset,
        ir_version=ir_version,
        keep_originals=keep_originals,
        input_shapes=input_shapes,  # type: ignore[arg-type]
    )
    return _lowered(model, options, progress, "lower")[0]


@overload
def lower_with_report(
    model: onnx.ModelProto,
    *,
    normalize_inserts: bool = ...,
    strategy: Strategy = ...,
    max_unroll: int = ...,
    runtime: RuntimeName = ...,
    optimize: bool = ...,
    target_opset: int | None = ...,
    ir_version: int | None = ...,
    keep_originals: bool = ...,
    input_shapes: Mapping[str, Sequence[int]] | None = ...,
    progress: Callback = ...,
) -> tuple[onnx.ModelProto, Report]: ...
@overload
def lower_with_report(
    model: ir.Model,
    *,
    normalize_inserts: bool = ...,
    strategy: Strategy = ...,
    max_unroll: int = ...,
    runtime: RuntimeName = ...,
    optimize: bool = ...,
    target_opset: int | None = ...,
    ir_version: int | None = ...,
    keep_originals: bool = ...,
    input_shapes: Mapping[str, Sequence[int]] | None = ...,
    progress: Callback = ...,
) -> tuple[ir.Model, Report]: ...
def lower_with_report(
    model: onnx.ModelProto | ir.Model,
    *,
    normalize_inserts: bool = True,
    strategy: Strategy = "auto",
    max_unroll: int = DEFAULT_MAX_UNROLL,
    runtime: RuntimeName = "onnxruntime",
    optimize: bool = False,
    target_opset: int | None = None,
    ir_version: int | None = None,
    keep_originals: bool = False,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    progress: Callback = silent,
) -> tuple[onnx.ModelProto, Report] | tuple[ir.Model, Report]:
    """:func:`lower`, and what it did: ``(lowered, report)``.

    The :class:`lowering.Report` is what ``--report FILE.json`` writes
    (``report.to_json()``) and the summary says: every rewritten node with
    its strategy, reason and the runtimes that reject its form, every
    SequenceInsert position left as written and why, the
    declarations and op counts before and after, what ``target_opset``
    converted. Counting costs a walk of the model before and after, and,
    when a node was rewritten, working out the lowest opset the output
    could declare; :func:`lower` does neither. Raises as :func:`lower` does
    (no report: the model is as it was).
    """
    options = Options(
        normalize_inserts=normalize_inserts,
        strategy=strategy,
        max_unroll=max_unroll,
        runtime=runtime,
        optimize=optimize,
        target_opset=target_opset,
        ir_version=ir_version,
        keep_originals=keep_originals,
        input_shapes=input_shapes,  # type: ignore[arg-type]
    )
    lowered, report = _lowered(model, options, progress, "lower_with_report", report=True)
    assert report is not None, "_lowered reports when asked"
    return lowered, report  # type: ignore[return-value]


def _lowered(
    model: onnx.ModelProto | ir.Model,
    options: Options,
    progress: Callback,
    caller: str,
    *,
    report: bool = False,
) -> tuple[onnx.ModelProto | ir.Model, Report | None]:
    """:func:`lower`'s work, and the report when asked for."""
    if isinstance(model, onnx.ModelProto):
        # onnx_ir tensors read through to the proto they came from, and some
        # onnx_ir helpers write to them (get_const_tensor names the tensor):
        # work on a copy so the caller's proto stays exactly as it was. The
        # copy is thrown away on failure, so no transaction is needed.
        working = onnx.ModelProto()
        working.CopyFrom(model)
        ir_model = ir.serde.deserialize_model(working)
        before = Measure.of(ir_model) if report else None
        result = Pipeline(options, atomic=False, progress=progress)(ir_model)
        rewrites = result.rewrites
        said = None if before is None else _report(before, ir_model, result, options)
        if not rewrites and not _declares(options):
            # Nothing to lower: hand back the model exactly, not a re-serialization.
            unchanged = onnx.ModelProto()
            unchanged.CopyFrom(model)
            return unchanged, said
        return ir.serde.serialize_model(ir_model), said
    if isinstance(model, ir.Model):
        before = Measure.of(model) if report else None
        result = Pipeline(options, progress=progress)(model)
        return model, None if before is None else _report(before, model, result, options)
    raise TypeError(
        f"{caller}() expected onnx.ModelProto or onnx_ir.Model, got {type(model).__name__}"
    )


def _declares(options: Options) -> bool:
    """Whether the options declare something anew, whatever is lowered."""
    return (
        options.target_opset is not None
        or options.ir_version is not None
        or options.input_shapes is not None
    )


def _report(before: Measure, model: ir.Model, result: LoweringResult, options: Options) -> Report:
    return Report.of(before, model, result, options)
