"""Fix the dims of named graph inputs before lowering (``--input-shape NAME:D,D,...``).

A map over ``SplitToSequence(x)`` with ``x: float[T,4]`` has no static
length, so a runtime with no loop (tvm, tinygrad) cannot run any form of
it. A deployment often feeds one shape only; saying so lets the proof
(:mod:`lowering.analysis.proven_shapes`, which takes a graph input's
declaration as a fact) and the form choice use it, and the output's inputs
declare it, so a runtime refuses any other shape rather than computing with
a form made for this one::

    g (float[T,4] x) => ...            g (float[5,4] x) => ...
    rows = SplitToSequence(x)    ->    rows = SplitToSequence(x)     length 5: unrolled
    m = SequenceMap(rows)              ...

Only graph inputs change: a declared dim elsewhere (value_info, outputs)
that names the same symbol is left to inference, which agrees with the
input now. A sequence input's element dims can be fixed (its type declares
them); its length cannot, since no ONNX type declares a sequence's length,
and a runtime with no sequence ops cannot take a sequence input at all.

Refused before anything changes (:class:`InputShapeError`, a usage error):
a name that is no graph input, a rank or a static dim that contradicts the
declaration (or the shape of the initializer an overridable input
defaults to), an input of another type (optional, map).
"""

from __future__ import annotations

from collections.abc import Mapping

import onnx_ir as ir

from lowering.options import InputShapeError, check_input_shapes, spelled_shape


def planned_shapes(
    model: ir.Model, shapes: Mapping[str, tuple[int, ...]]
) -> list[tuple[ir.Value, ir.Shape]]:
    """Per named input: the value and its new shape (of its elements, for a sequence).

    Raises :class:`InputShapeError` for the first name that cannot be fixed.
    """
    inputs = {value.name: value for value in model.graph.inputs}
    planned = []
    for name, dims in shapes.items():
        value = inputs.get(name)
        if value is None:
            names = ", ".join(repr(n) for n in inputs) or "none"
            raise InputShapeError(
                name, dims, f"the model has no input {name!r} (its inputs: {names})"
            )
        declared = value.type
        element = declared.elem_type if isinstance(declared, ir.SequenceType) else declared
        if not isinstance(element, ir.TensorType):
            raise InputShapeError(
                name, dims, f"{name!r} is of type {declared}: only tensors and sequences of tensors"
            )
        old = value.shape  # onnx_ir's shape of a sequence value is its elements'
        problem = _contradiction(old, dims)
        if problem is not None:
            raise InputShapeError(name, dims, f"{name!r} is declared {problem}")
        if value.const_value is not None:
            problem = _contradiction(ir.Shape(list(value.const_value.shape.numpy())), dims)
            if problem is not None:
                raise InputShapeError(name, dims, f"{name!r} defaults to an initializer {problem}")
        planned.append((value, ir.Shape(dims)))
    return planned


def _contradiction(old: ir.Shape | None, dims: tuple[int, ...]) -> str | None:
    """How ``dims`` contradict a shape ("[T,4], of rank 2, not 3"), or None."""
    if old is None:
        return None
    if len(old) != len(dims):
        return f"{spelled_shape(old)}, of rank {len(old)}, not {len(dims)}"
    for axis, (was, new) in enumerate(zip(old, dims, strict=True)):
        if isinstance(was, int) and was != new:
            return f"{spelled_shape(old)}: dim {axis} is {was}, not {new}"
    return None


class FixInputShapesPass(ir.passes.InPlacePass):
    """Declare the given dims on the named graph inputs (first in the pipeline)."""

    def __init__(self, input_shapes: Mapping[str, tuple[int, ...]]) -> None:
        super().__init__()
        self.input_shapes = check_input_shapes(input_shapes) or {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        planned = planned_shapes(model, self.input_shapes)  # all checked before any change
        modified = False
        for value, shape in planned:
            if value.shape != shape:
                value.shape = shape
                modified = True
        return ir.passes.PassResult(model, modified=modified)
