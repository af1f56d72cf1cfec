"""The Python entry points: ``lowering.lower(model)``, ``lower_in_place`` and
``lower_with_report``.

Each takes one :class:`~lowering.options.Options` (``options=``) and any of
its fields as keywords, which override it: ``lower(model, runtime="tract")``
is ``lower(model, Options(runtime="tract"))``. The options are named, typed
and documented once, on :class:`~lowering.options.Options`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, overload

import onnx
import onnx_ir as ir

from lowering.options import Options, OptionValues, resolved
from lowering.progress import Callback, silent
from lowering.report import Measure, Report
from lowering.rewrites import Rewrite
from lowering.steps import Pipeline

if TYPE_CHECKING:
    from typing_extensions import Unpack


def lower_in_place(
    model: ir.Model,
    options: Options | None = None,
    *,
    restore_from: Callable[[], ir.Model] | None = None,
    progress: Callback = silent,
    **overrides: Unpack[OptionValues],
) -> list[Rewrite]:
    """Lower ``model`` in place and say what was rewritten: ``lowering.pipeline``'s
    rewrites (:class:`~lowering.options.Options` says what each option does).

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
    chosen = resolved(options, overrides, "lower_in_place")
    return Pipeline(chosen, restore_from=restore_from, progress=progress)(model).rewrites


@overload
def lower(
    model: onnx.ModelProto,
    options: Options | None = None,
    *,
    progress: Callback = silent,
    **overrides: Unpack[OptionValues],
) -> onnx.ModelProto: ...
@overload
def lower(
    model: ir.Model,
    options: Options | None = None,
    *,
    progress: Callback = silent,
    **overrides: Unpack[OptionValues],
) -> ir.Model: ...
def lower(
    model: onnx.ModelProto | ir.Model,
    options: Options | None = None,
    *,
    progress: Callback = silent,
    **overrides: Unpack[OptionValues],
) -> onnx.ModelProto | ir.Model:
    """Rewrite every SequenceMap in ``model`` into an equivalent form without it.

    ``options`` (default: :class:`~lowering.options.Options`' defaults), with
    any of its fields given as keywords in its place, says how: the form of
    each map (``strategy``, ``max_unroll``), the ``runtime`` the output is
    for, the SequenceInsert positions (``normalize_inserts``), ``optimize``,
    the opset and IR version declared (``target_opset``, ``ir_version``),
    fixed ``input_shapes``; each field's doc says more. ``progress`` is told
    how far it is (:mod:`lowering.progress`; by default no one is).

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
    chosen = resolved(options, overrides, "lower")
    return _lowered(model, chosen, progress, "lower")[0]


@overload
def lower_with_report(
    model: onnx.ModelProto,
    options: Options | None = None,
    *,
    progress: Callback = silent,
    **overrides: Unpack[OptionValues],
) -> tuple[onnx.ModelProto, Report]: ...
@overload
def lower_with_report(
    model: ir.Model,
    options: Options | None = None,
    *,
    progress: Callback = silent,
    **overrides: Unpack[OptionValues],
) -> tuple[ir.Model, Report]: ...
def lower_with_report(
    model: onnx.ModelProto | ir.Model,
    options: Options | None = None,
    *,
    progress: Callback = silent,
    **overrides: Unpack[OptionValues],
) -> tuple[onnx.ModelProto, Report] | tuple[ir.Model, Report]:
    """:func:`lower`, and what it did: ``(lowered, report)``; the same options.

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
    chosen = resolved(options, overrides, "lower_with_report")
    lowered, report = _lowered(model, chosen, progress, "lower_with_report", report=True)
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
        said = None if before is None else Report.of(before, ir_model, result, options)
        if not rewrites and not _declares(options):
            # Nothing to lower: hand back the model exactly, not a re-serialization.
            unchanged = onnx.ModelProto()
            unchanged.CopyFrom(model)
            return unchanged, said
        return ir.serde.serialize_model(ir_model), said
    if isinstance(model, ir.Model):
        before = Measure.of(model) if report else None
        result = Pipeline(options, progress=progress)(model)
        return model, None if before is None else Report.of(before, model, result, options)
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
