"""The Python entry point: ``lowering.lower(model)``."""

from __future__ import annotations

from typing import Any, overload

import onnx
import onnx_ir as ir

from lowering.errors import LoweringError
from lowering.map_unroll import DEFAULT_MAX_UNROLL
from lowering.naming import FreshNamesPass
from lowering.rewrites import Rewrite
from lowering.sequence_insert import NormalizeSequenceInsertPass
from lowering.sequence_map import LowerSequenceMapPass
from lowering.target_opset import TargetOpsetPass


def lower_in_place(
    model: ir.Model,
    *,
    normalize_inserts: bool = True,
    strategy: str = "auto",
    max_unroll: int = DEFAULT_MAX_UNROLL,
    optimize: bool = False,
    target_opset: int | None = None,
    keep_originals: bool = False,
) -> list[Rewrite]:
    """Lower ``model`` in place and say what was rewritten.

    Runs :class:`LowerSequenceMapPass` with ``strategy``, then (unless
    ``normalize_inserts`` is False) :class:`NormalizeSequenceInsertPass`, then
    names the fresh values and nodes. ``keep_originals`` keeps a copy of each
    rewritten node for :meth:`Rewrite.before`. ``optimize`` runs onnxscript's
    optimizer afterwards (constant folding, Ifs on constants inlined, unused
    values removed), when anything was lowered. ``target_opset`` then
    declares that default-domain opset (see :mod:`lowering.target_opset`). A pass that finds a model it cannot handle raises
    :class:`LoweringError` before it changes anything.
    """
    sequence_maps = LowerSequenceMapPass(
        strategy, max_unroll=max_unroll, keep_originals=keep_originals
    )
    inserts = NormalizeSequenceInsertPass(keep_originals=keep_originals)
    passes: list[ir.passes.PassBase] = [sequence_maps]
    if normalize_inserts:
        passes.append(inserts)
    passes.append(FreshNamesPass())
    # PassManager wraps what a pass raises; users want the LoweringError.
    _run(ir.passes.PassManager(passes), model)
    if optimize and (sequence_maps.rewrites or inserts.rewrites):
        # Folding what unrolling made static (Shape of a known tensor, an If
        # on a constant) is what OpenVINO and tract need; it rewrites the
        # whole model, so it is asked for, not done by default.
        import onnxscript.optimizer  # heavy to import; only when asked for

        onnxscript.optimizer.optimize(model)
    if target_opset is not None:
        _run(ir.passes.PassManager([TargetOpsetPass(target_opset), FreshNamesPass()]), model)
    return [*sequence_maps.rewrites, *inserts.rewrites]


def _run(pass_: ir.passes.PassBase, model: ir.Model) -> None:
    """Run one pass, raising what it raises rather than onnx_ir's wrapper."""
    try:
        pass_(model)
    except ir.passes.PassError as error:
        cause = error.__cause__
        while isinstance(cause, ir.passes.PassError):
            cause = cause.__cause__
        if isinstance(cause, LoweringError):
            raise cause from None
        raise


@overload
def lower(model: onnx.ModelProto, **options: Any) -> onnx.ModelProto: ...
@overload
def lower(model: ir.Model, **options: Any) -> ir.Model: ...
def lower(model, **options):
    """Rewrite every SequenceMap in ``model`` into an equivalent Loop.

    Options, as keywords (the same as :func:`lower_in_place`'s):
    ``strategy`` "auto" picks, for each map, unrolling where its length is
    static and at most ``max_unroll`` (default 16), a Loop with scan outputs
    where every output element has one shape (O(n) in onnxruntime), and the
    general Loop + SequenceInsert form elsewhere; "loop" forces the general
    form. Then, unless ``normalize_inserts`` is False, every SequenceInsert
    position is put into canonical form (see :mod:`lowering.sequence_insert`).

    Takes an ``onnx.ModelProto`` or an ``onnx_ir.Model`` and returns the same
    kind. A ModelProto is left unchanged and a new one is returned; an
    onnx_ir Model is rewritten in place and returned, like any onnx_ir pass.

    Raises:
        LoweringError: the model cannot be lowered; the message names the
            node, the graph it sits in and the reason.
    """
    if isinstance(model, onnx.ModelProto):
        # onnx_ir tensors read through to the proto they came from, and some
        # onnx_ir helpers write to them (get_const_tensor names the tensor):
        # work on a copy so the caller's proto stays exactly as it was.
        working = onnx.ModelProto()
        working.CopyFrom(model)
        ir_model = ir.serde.deserialize_model(working)
        rewrites = lower_in_place(ir_model, **options)
        if not rewrites and options.get("target_opset") is None:
            # Nothing to lower: hand back the model exactly, not a re-serialization.
            unchanged = onnx.ModelProto()
            unchanged.CopyFrom(model)
            return unchanged
        return ir.serde.serialize_model(ir_model)
    if isinstance(model, ir.Model):
        lower_in_place(model, **options)
        return model
    raise TypeError(f"expected onnx.ModelProto or onnx_ir.Model, got {type(model).__name__}")
