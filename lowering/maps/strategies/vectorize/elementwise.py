"""Batching rules of pointwise ops: unary ones, broadcasting ones, and the identities.

A pointwise op needs no change but its operands' ranks: a batched operand
is unsqueezed after the batch axis to the highest rank, so that numpy
broadcasting, aligned on the right, never reaches the batch axis::

    Add(e, u)   e: [3], u: [2, 3]   ->   Add(Unsqueeze(E, [1]), u)   E: [n, 1, 3]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array
from lowering.irutils.op_facts import BROADCAST_POINTWISE_OPS, UNARY_POINTWISE_OPS
from lowering.maps.strategies.vectorize.body_values import BodyValue, broadcast_dims, required
from lowering.maps.strategies.vectorize.family import RuleFamily

if TYPE_CHECKING:
    from lowering.maps.strategies.vectorize.batcher import Batcher

FAMILY = RuleFamily(__name__)


@FAMILY.rule(*sorted(UNARY_POINTWISE_OPS))
def _elementwise_unary(
    v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]
) -> list[BodyValue]:
    """Pointwise on its first operand; Clip's bounds must be the same for every element."""
    x = v.only_first_batched(args, "its input")
    out = v.like(node, [x.value, *(a.value if a else None for a in args[1:])])
    return [BodyValue(out, x.shape, True)]


@FAMILY.rule("CastLike")
def _cast_like(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x, target = required(args)
    out = v.like(node, [x.value, target.value])
    return [BodyValue(out, x.shape, x.batched)]


@FAMILY.rule(*sorted(BROADCAST_POINTWISE_OPS))
def _elementwise_broadcast(
    v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]
) -> list[BodyValue]:
    """Batched operands are unsqueezed after the batch axis to the highest rank, so
    that numpy broadcasting, aligned on the right, never reaches the batch axis."""
    shapes = [v.dims(a) for a in args if a is not None]
    top = max(len(s) for s in shapes)
    inputs = [None if a is None else v.lift(a, top) if a.batched else a.value for a in args]
    return [BodyValue(v.like(node, inputs), broadcast_dims(shapes), True)]


@FAMILY.rule("PRelu")
def _prelu(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """PRelu broadcasts both ways in onnxruntime ([2,1,3] with a [2,1] slope is
    [2,2,3], where ONNX infers X's shape): batched as the broadcasting ops are."""
    x, slope = required(args)
    if not x.batched:
        raise v.decline("its slope differs from element to element but its input does not")
    shapes = [v.dims(x), v.dims(slope)]
    top = max(len(s) for s in shapes)
    inputs = [v.lift(a, top) if a.batched else a.value for a in (x, slope)]
    return [BodyValue(v.like(node, inputs), broadcast_dims(shapes), True)]


@FAMILY.rule("Dropout")
def _dropout(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """Dropout for inference is the identity; training, or a mask read, is not batched."""
    x = required(args, 1)[0]
    training = args[2] if len(args) > 2 else None
    mode = constant_array(training.value) if training is not None else np.array(False)
    training_mode = node.attributes.get_int("training_mode", 0)
    if mode is None or bool(mode) or training_mode:
        raise v.decline("it may be in training mode")
    if any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
        raise v.decline("its mask is read")
    if not x.batched:
        raise v.decline("its ratio or mode differs from element to element")
    return [BodyValue(v.op("Identity", [x.value]), x.shape, True)]
