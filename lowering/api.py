"""The Python entry point: ``lowering.lower(model)``."""

from __future__ import annotations

from typing import TypeVar, overload

import onnx
import onnx_ir as ir

from lowering.errors import LoweringError
from lowering.naming import FreshNamesPass
from lowering.sequence_map import LowerSequenceMapPass, Rewrite

ModelT = TypeVar("ModelT", onnx.ModelProto, ir.Model)


def lower_in_place(model: ir.Model) -> list[Rewrite]:
    """Lower ``model`` in place and say what was rewritten.

    Runs :class:`LowerSequenceMapPass` and then names the fresh values and
    nodes. If the model cannot be lowered, :class:`LoweringError` is raised
    before anything is changed.
    """
    sequence_maps = LowerSequenceMapPass()
    try:
        ir.passes.PassManager([sequence_maps, FreshNamesPass()])(model)
    except ir.passes.PassError as error:
        # PassManager wraps what a pass raises; users want the LoweringError.
        cause = error.__cause__
        while isinstance(cause, ir.passes.PassError):
            cause = cause.__cause__
        if isinstance(cause, LoweringError):
            raise cause from None
        raise
    return sequence_maps.rewrites


@overload
def lower(model: onnx.ModelProto) -> onnx.ModelProto: ...
@overload
def lower(model: ir.Model) -> ir.Model: ...
def lower(model):
    """Rewrite every SequenceMap in ``model`` into an equivalent Loop.

    Takes an ``onnx.ModelProto`` or an ``onnx_ir.Model`` and returns the same
    kind. A ModelProto is left unchanged and a new one is returned; an
    onnx_ir Model is rewritten in place and returned, like any onnx_ir pass.

    Raises:
        LoweringError: the model cannot be lowered; the message names the
            node, the graph it sits in and the reason.
    """
    if isinstance(model, onnx.ModelProto):
        ir_model = ir.serde.deserialize_model(model)
        if not lower_in_place(ir_model):
            # Nothing to lower: hand back the model exactly, not a re-serialization.
            unchanged = onnx.ModelProto()
            unchanged.CopyFrom(model)
            return unchanged
        return ir.serde.serialize_model(ir_model)
    if isinstance(model, ir.Model):
        lower_in_place(model)
        return model
    raise TypeError(f"expected onnx.ModelProto or onnx_ir.Model, got {type(model).__name__}")
