"""The Python entry point: ``lowering.lower(model)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import overload

import onnx
import onnx_ir as ir

from lowering.options import DEFAULT_MAX_UNROLL, Options, RuntimeName, Strategy
from lowering.rewrites import Rewrite
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
    restore_from: Callable[[], ir.Model] | None = None,
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
    )
    return Pipeline(options, restore_from=restore_from)(model).rewrites


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
    for runtimes with no loop ("tvm", "tinygrad", "generic"), and raises
    LoweringError for a map it can run in no form. Then,
    unless ``normalize_inserts`` is False, every SequenceInsert position is
    put into canonical form (see :mod:`lowering.passes.normalize_inserts`).
    ``optimize`` folds constants afterwards; ``target_opset`` declares an
    older (or newer) default-domain opset, and then the lowest IR version
    the content allows; ``ir_version`` declares that IR version instead
    (LoweringError if the content needs a higher one). Without either, the
    output keeps the input's IR version.

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
    )
    if isinstance(model, onnx.ModelProto):
        # onnx_ir tensors read through to the proto they came from, and some
        # onnx_ir helpers write to them (get_const_tensor names the tensor):
        # work on a copy so the caller's proto stays exactly as it was. The
        # copy is thrown away on failure, so no transaction is needed.
        working = onnx.ModelProto()
        working.CopyFrom(model)
        ir_model = ir.serde.deserialize_model(working)
        rewrites = Pipeline(options, atomic=False)(ir_model).rewrites
        if not rewrites and target_opset is None and ir_version is None:
            # Nothing to lower: hand back the model exactly, not a re-serialization.
            unchanged = onnx.ModelProto()
            unchanged.CopyFrom(model)
            return unchanged
        return ir.serde.serialize_model(ir_model)
    if isinstance(model, ir.Model):
        Pipeline(options)(model)
        return model
    raise TypeError(
        f"lower() expected onnx.ModelProto or onnx_ir.Model, got {type(model).__name__}"
    )
