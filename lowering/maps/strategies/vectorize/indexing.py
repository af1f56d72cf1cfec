"""Batching rules of ops that pick elements by index: Gather, GatherElements, Slice, OneHot.

The data's axes shift by one; indices that differ from element to element
are taken only where the batch axis lines up with them (Gather on axis 0 of
invariant data, GatherElements with both operands stacked)::

    Gather<axis = a>(e, i)   ->   Gather<axis = a + 1>(E, i)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array
from lowering.irutils.shapes import slice_length
from lowering.maps.strategies.vectorize.body_values import BodyValue, Dims, required
from lowering.maps.strategies.vectorize.family import RuleFamily

if TYPE_CHECKING:
    from lowering.maps.strategies.vectorize.batcher import Batcher

FAMILY = RuleFamily(__name__)


@FAMILY.rule("Gather")
def _gather(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    data, indices = required(args)
    dims = v.dims(data)
    axis = v.axis(node.attributes.get_int("axis", 0), len(dims))
    index_dims = indices.shape
    if index_dims is None:
        raise v.decline("the rank of its indices is unknown")
    shape: Dims
    if data.batched and not indices.batched:
        out = v.like(node, [data.value, indices.value], axis=axis + 1)
        shape = (*dims[:axis], *index_dims, *dims[axis + 1 :])
    elif indices.batched and not data.batched:
        if axis != 0:
            raise v.decline("its indices differ from element to element, on an axis other than 0")
        out = v.like(node, [data.value, indices.value], axis=0)
        shape = (*index_dims, *dims[1:])
    else:
        raise v.decline("both its data and its indices differ from element to element")
    return [BodyValue(out, shape, True)]


@FAMILY.rule("GatherElements")
def _gather_elements(
    v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]
) -> list[BodyValue]:
    data, indices = required(args)
    axis = v.axis(node.attributes.get_int("axis", 0), v.rank(data))
    out = v.like(node, [v.batched(data), v.batched(indices)], axis=axis + 1)
    return [BodyValue(out, indices.shape, True)]


@FAMILY.rule("Slice")
def _slice(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """Starts, ends and steps stay as they are; the axes, made explicit, shift."""
    x = v.only_first_batched(args)
    _, starts, ends = required(args, 3)
    axes = args[3] if len(args) > 3 else None
    steps = args[4] if len(args) > 4 else None
    dims = v.dims(x)
    rank = len(dims)
    if axes is not None:
        axes_list = [v.axis(int(a), rank) for a in v.constant(axes, "axes").reshape(-1)]
    else:
        count = starts.shape[0] if starts.shape and len(starts.shape) == 1 else None
        if count is None:
            raise v.decline("it has no axes and the number of its starts is unknown")
        if count > rank:
            raise v.decline(f"it slices {count} axes of an element of rank {rank}")
        axes_list = list(range(count))
    # (the axes in the bounds' type: Slice takes one index type, int32 or int64)
    known = constant_array(starts.value)
    int32 = starts.value.dtype == ir.DataType.INT32 or (
        known is not None and known.dtype == np.int32
    )
    index = np.int32 if int32 else np.int64
    out = v.like(
        node,
        [
            x.value,
            starts.value,
            ends.value,
            v.const([a + 1 for a in axes_list], index),
            steps.value if steps else None,
        ],
    )
    shape: list[int | None] = list(dims)
    first, last = constant_array(starts.value), constant_array(ends.value)
    step_values = constant_array(steps.value) if steps is not None else np.ones(len(axes_list))
    for j, axis in enumerate(axes_list):
        dim = shape[axis]
        if dim is None or first is None or last is None or step_values is None:
            shape[axis] = None
            continue
        start, end = int(first.reshape(-1)[j]), int(last.reshape(-1)[j])
        shape[axis] = slice_length(dim, start, end, int(step_values.reshape(-1)[j]))
    return [BodyValue(out, tuple(shape), True)]


@FAMILY.rule("OneHot")
def _one_hot(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    indices = v.only_first_batched(args, "its indices")
    operands = required(args)
    index_dims = v.dims(indices)
    rank = len(index_dims) + 1
    axis = v.axis(node.attributes.get_int("axis", -1), rank)
    out = v.like(node, [a.value for a in operands], axis=axis + 1)
    depth = constant_array(operands[1].value)
    size = int(depth.reshape(-1)[0]) if depth is not None else None
    return [BodyValue(out, (*index_dims[:axis], size, *index_dims[axis:]), True)]
