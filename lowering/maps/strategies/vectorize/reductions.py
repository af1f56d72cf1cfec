"""Batching rules of ops along axes of their input: reductions, scans, selections.

Only the input differs from element to element; its axes shift by one past
the batch axis, which is never reduced::

    ReduceSum<axes = [0]>(e)   ->   ReduceSum<axes = [1]>(E)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from lowering.irutils.axes import axes_as_input
from lowering.irutils.op_facts import REDUCE_OPS
from lowering.maps.strategies.vectorize.body_values import BodyValue, required
from lowering.maps.strategies.vectorize.family import RuleFamily

if TYPE_CHECKING:
    from lowering.maps.strategies.vectorize.batcher import Batcher

FAMILY = RuleFamily(__name__)


def reduced_axes(
    v: Batcher, node: ir.Node, args: Sequence[BodyValue | None], rank: int
) -> list[int] | None:
    """The axes a Reduce* node reduces in an element of ``rank``, sorted and
    non-negative; None where it reduces nothing (empty axes, noop_with_empty_axes)."""
    if rank == 0:
        raise v.decline("it reduces a scalar")
    axes = v.listed_axes(node, args)
    if not axes:
        if node.attributes.get_int("noop_with_empty_axes", 0):
            return None
        axes = list(range(rank))
    return sorted({v.axis(a, rank) for a in axes})


def reduce_along(
    v: Batcher, node: ir.Node, x: ir.Value, axes: list[int], keepdims: int | None = None
) -> ir.Value:
    """A copy of Reduce* ``node`` on ``x`` over ``axes`` (of ``x`` itself), spelt for
    the opset; ``keepdims`` replaces the node's own where given."""
    kept = node.attributes.get_int("keepdims", 1) if keepdims is None else keepdims
    if axes_as_input(node.op_type, v.opset):
        return v.like(node, [x, v.const(axes)], drop=("noop_with_empty_axes",), keepdims=kept)
    return v.like(node, [x], axes=axes, keepdims=kept)


@FAMILY.rule(*sorted(REDUCE_OPS))
def _reduce(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = v.only_first_batched(args)
    dims = v.dims(x)
    rank = len(dims)
    keepdims = node.attributes.get_int("keepdims", 1)
    axes = reduced_axes(v, node, args, rank)
    if axes is None:
        out = v.like(node, [x.value], drop=("axes",))
        return [BodyValue(out, x.shape, True)]
    shifted = [a + 1 for a in axes]
    out = reduce_along(v, node, x.value, shifted)
    shape = tuple(1 if i in axes else d for i, d in enumerate(dims) if keepdims or i not in axes)
    return [BodyValue(out, shape, True)]


@FAMILY.rule("ArgMax", "ArgMin")
def _arg_reduce(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = v.only_first_batched(args)
    dims = v.dims(x)
    rank = len(dims)
    if rank == 0:
        raise v.decline("it reduces a scalar")
    axis = v.axis(node.attributes.get_int("axis", 0), rank)
    keepdims = node.attributes.get_int("keepdims", 1)
    out = v.like(node, [x.value], axis=axis + 1)
    shape = tuple(1 if i == axis else d for i, d in enumerate(dims) if keepdims or i != axis)
    return [BodyValue(out, shape, True, ir.DataType.INT64)]


@FAMILY.rule("CumSum")
def _cumsum(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = v.only_first_batched(args)
    axis = v.constant(required(args, 2)[1], "axis")
    shifted = v.axis(int(axis.reshape(-1)[0]), v.rank(x)) + 1
    return [BodyValue(v.like(node, [x.value, v.const(shifted, axis.dtype)]), x.shape, True)]


@FAMILY.rule("TopK")
def _topk(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    v.only_first_batched(args)
    x, k = required(args)
    dims = v.dims(x)
    axis = v.axis(node.attributes.get_int("axis", -1), len(dims))
    values, indices = v.like_all(node, [x.value, k.value], num_outputs=2, axis=axis + 1)
    shape = tuple(None if i == axis else d for i, d in enumerate(dims))
    return [BodyValue(values, shape, True), BodyValue(indices, shape, True, ir.DataType.INT64)]
