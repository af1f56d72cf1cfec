"""Batching rules of ops that move, reshape or measure data without computing on it.

Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile, Transpose, Concat,
Split, Shape and Size: the batch axis is kept in front (copied by Reshape,
prepended to perms and repeats), and a shape read is the stack's without
its first dim::

    Reshape(e, s)   ->   Reshape(E, [0 or -1, *s])
    Expand(e, s)    ->   Expand(E, [1, ..., *s])       (1s to the stack's rank)
    Shape(e)        ->   Slice(Shape(E), [1], [max])     (the same for every element)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from lowering.irutils.axes import axes_as_input
from lowering.irutils.constants import constant_array
from lowering.irutils.shapes import INT64_MAX
from lowering.maps.strategies.vectorize.body_values import (
    BodyValue,
    Dims,
    broadcast_dims,
    prod,
    required,
    show,
    static,
)
from lowering.maps.strategies.vectorize.family import RuleFamily

if TYPE_CHECKING:
    from lowering.maps.strategies.vectorize.batcher import Batcher

FAMILY = RuleFamily(__name__)


@FAMILY.rule("Reshape")
def _reshape(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """The batch axis is kept: with 0 (copy) when the target has no -1, or with
    -1 when every other dim is known and non-zero; never both, which onnxruntime
    cannot resolve for an empty batch."""
    v.only_first_batched(args)
    x, target = required(args)
    array = v.constant(target, "shape (a computed shape)")
    wanted = [int(d) for d in array.reshape(-1)]
    allowzero = node.attributes.get_int("allowzero", 0)
    if allowzero and 0 in wanted:
        raise v.decline("its shape has a 0 and allowzero = 1")
    dims = x.shape
    resolved = _resolved(wanted, dims)
    data = x.value
    positive = [d for d in resolved if d is not None and d > 0]
    if len(positive) == len(resolved):
        shape = v.const([-1, *positive])
    elif -1 not in wanted:
        shape = v.const([0, *wanted])
    else:  # the -1, computed: the element's size over its other dims
        data, shape = _computed_target(v, x, wanted, dims)
    out = v.op("Reshape", [data, shape])
    return [BodyValue(out, tuple(d if d != -1 else None for d in resolved), True)]


def _resolved(wanted: list[int], dims: Dims | None) -> list[int | None]:
    """The element's target: a 0 the input's dim it copies, a -1 the size it
    computes where the dims are known (else None, or -1 left)."""
    resolved: list[int | None] = [
        (dims[j] if dims is not None and j < len(dims) else None) if d == 0 else d
        for j, d in enumerate(wanted)
    ]
    if -1 in resolved:
        j = resolved.index(-1)
        known = prod([d for i, d in enumerate(resolved) if i != j])
        total = prod(dims) if dims is not None else None
        if known and total is not None:
            resolved[j] = total // known
    return resolved


def _computed_target(
    v: Batcher, x: BodyValue, wanted: list[int], dims: Dims | None
) -> tuple[ir.Value, ir.Value]:
    """``(data, target)`` for a Reshape of the stack whose element target has a -1
    at ``j``: the -1 is computed as the element's size over its other dims.

    Reshape reads a 0 as "copy the input's dim", so a computed 0 (an empty
    element) must meet a 0 in the input: the stack is first flattened per
    element and given unit dims up to ``j``, so that its dim ``j + 1`` is the
    element's size, which is 0 exactly when the computed dim is::

        stack [n, *d]  --Flatten<1>-->  [n, s]  --Unsqueeze 1..j-->  [n, 1, .., 1, s]
        target [0, t_0, .., t_j-1, s / P, t_j+1, ..]   (copies read from the stack's shape)

    Every other dim of the target is explicit. One of them is 0 only where the
    element's own Reshape fails (P = 0 leaves the -1 undefined). The target is
    built with Gather, Mul and Add, not Concat: onnxruntime's Reshape fusion
    turns a Concat it cannot resolve back into a -1, which an empty batch
    cannot resolve.
    """
    j = wanted.index(-1)
    stack_shape = v.op("Shape", [x.value])
    size = v.op(
        "ReduceProd",
        [v.op("Slice", [stack_shape, v.const([1]), v.const([INT64_MAX])])],
        {"keepdims": 1},
    )
    static, copied = 1, []
    base = [0]  # the batch dim, copied
    for i, d in enumerate(wanted):
        if i == j:
            base.append(0)
        elif d != 0:
            static *= d
            base.append(d)
        elif dims is not None and i < len(dims) and (dim := dims[i]) is not None:
            static *= dim
            base.append(dim)
        else:
            copied.append(i)
            base.append(0)
    others = v.const([static])
    target = v.const(base)
    if copied:
        gathered = v.op("Gather", [stack_shape, v.const([i + 1 for i in copied])], {"axis": 0})
        others = v.op("Mul", [others, v.op("ReduceProd", [gathered], {"keepdims": 1})])
        # each copied dim, read from the stack's shape, in its place
        index = [i + 1 if i in copied else 0 for i in range(-1, len(wanted))]
        mask = [1 if i in copied else 0 for i in range(-1, len(wanted))]
        placed = v.op("Gather", [stack_shape, v.const(index)], {"axis": 0})
        target = v.op("Add", [target, v.op("Mul", [placed, v.const(mask)])])
    missing = v.op("Div", [size, v.op("Max", [others, v.const([1])])])
    where = [1 if i == j + 1 else 0 for i in range(len(base))]
    target = v.op("Add", [target, v.op("Mul", [missing, v.const(where)])])
    data = v.op("Flatten", [x.value], {"axis": 1})
    if j > 0:
        data = v.unsqueeze(data, list(range(1, j + 1)))
    return data, target


@FAMILY.rule("Flatten")
def _flatten(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = required(args, 1)[0]
    dims = v.dims(x)
    rank = len(dims)
    axis = node.attributes.get_int("axis", 1)
    if not -rank <= axis <= rank:
        raise v.decline(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    rows, cols = prod(dims[:axis]), prod(dims[axis:])
    if not rows or not cols:
        raise v.decline(f"the element shape {show(x.shape)} is not static and non-empty")
    out = v.op("Reshape", [x.value, v.const([-1, rows, cols])])
    return [BodyValue(out, (rows, cols), True)]


@FAMILY.rule("Squeeze")
def _squeeze(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = v.only_first_batched(args)
    dims = v.dims(x)
    rank = len(dims)
    axes = v.listed_axes(node, args)
    if not axes:  # none, or an empty list: runtimes read both as "every unit dim"
        if None in dims:
            raise v.decline("it has no axes and the element shape is not static")
        axes = [i for i, d in enumerate(dims) if d == 1]
    axes = sorted({v.axis(a, rank) for a in axes})
    out = v.squeeze(x.value, [a + 1 for a in axes])
    return [BodyValue(out, tuple(d for i, d in enumerate(dims) if i not in axes), True)]


@FAMILY.rule("Unsqueeze")
def _unsqueeze(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = v.only_first_batched(args)
    if axes_as_input("Unsqueeze", v.opset):
        axes = [int(a) for a in v.constant(required(args, 2)[1], "axes").reshape(-1)]
    else:
        axes = list(node.attributes.get_ints("axes", []))
    if not axes:
        raise v.decline("its axes are empty")
    rank = v.rank(x) + len(axes)
    axes = sorted({v.axis(a, rank) for a in axes})
    out = v.unsqueeze(x.value, [a + 1 for a in axes])
    rest = iter(v.dims(x))
    return [BodyValue(out, tuple(1 if i in axes else next(rest) for i in range(rank)), True)]


@FAMILY.rule("Expand")
def _expand(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    v.only_first_batched(args)
    x, target = required(args)
    length = target.shape[0] if target.shape is not None and len(target.shape) == 1 else None
    if length is None:
        raise v.decline("the length of its shape is unknown")
    dims = v.dims(x)
    rank = max(len(dims), length)
    # The shape padded with 1s to the stack's rank (a shorter one broadcasts the same),
    # which IREE needs (docs/runtimes.md).
    array = constant_array(target.value)
    if array is not None:
        full = v.const([1] * (rank + 1 - length) + [int(d) for d in array.reshape(-1)])
    else:
        ones = v.const([1] * (rank + 1 - length))
        full = v.op("Concat", [ones, target.value], {"axis": 0})
    out = v.like(node, [v.lift(x, rank), full])
    shape: Dims
    if array is not None:
        shape = broadcast_dims([dims, tuple(int(d) for d in array)])
    else:
        shape = (None,) * rank
    return [BodyValue(out, shape, True)]


@FAMILY.rule("Tile")
def _tile(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    v.only_first_batched(args)
    x, repeats = required(args)
    dims = v.dims(x)
    array = constant_array(repeats.value)
    shape: Dims
    if array is not None:
        counts = v.const([1, *array.reshape(-1)])
        shape = tuple(None if d is None else d * int(r) for d, r in zip(dims, array))
    else:
        counts = v.op("Concat", [v.const([1]), repeats.value], {"axis": 0})
        shape = (None,) * len(dims)
    return [BodyValue(v.like(node, [x.value, counts]), shape, True)]


@FAMILY.rule("Transpose")
def _transpose(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = required(args, 1)[0]
    dims = v.dims(x)
    rank = len(dims)
    listed = node.attributes.get_ints("perm", None)
    perm = list(reversed(range(rank))) if listed is None else [v.axis(p, rank) for p in listed]
    out = v.like(node, [x.value], perm=[0, *(p + 1 for p in perm)])
    return [BodyValue(out, tuple(dims[p] for p in perm), True)]


@FAMILY.rule("Concat")
def _concat(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    parts = required(args)
    shapes = [v.dims(a) for a in parts]
    rank = max(len(s) for s in shapes)
    axis = v.axis(node.attributes.get_int("axis", 0), rank)
    out = v.like(node, [v.batched(a) for a in parts], axis=axis + 1)
    sizes = [s[axis] for s in shapes]
    known = [d for d in sizes if d is not None]
    shape = [
        (sum(known) if len(known) == len(sizes) else None)
        if i == axis
        else next((s[i] for s in shapes if s[i] is not None), None)
        for i in range(rank)
    ]
    return [BodyValue(out, tuple(shape), True)]


@FAMILY.rule("Split")
def _split(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = v.only_first_batched(args)
    dims = v.dims(x)
    axis = v.axis(node.attributes.get_int("axis", 0), len(dims))
    inputs = [x.value, *(a.value if a else None for a in args[1:])]
    outs = v.like_all(node, inputs, axis=axis + 1)
    shape = tuple(None if i == axis else d for i, d in enumerate(dims))
    return [BodyValue(o, shape, True) for o in outs]


@FAMILY.rule("Shape")
def _shape(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """Every element of a stack has one shape: the stack's without its first dim."""
    x = required(args, 1)[0]
    element = v.dims(x)
    rank = len(element)
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    known = static(element[start:end])
    if known is not None:
        return [BodyValue(v.const(known), (len(known),), False, ir.DataType.INT64)]
    shape = v.op("Shape", [x.value])
    out = v.op("Slice", [shape, v.const([start + 1]), v.const([end + 1])])
    return [BodyValue(out, (max(end - start, 0),), False, ir.DataType.INT64)]


@FAMILY.rule("Size")
def _size(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = required(args, 1)[0]
    count = prod(x.shape) if x.shape is not None else None
    if count is not None:
        return [BodyValue(v.const(count), (), False, ir.DataType.INT64)]
    shape = v.op("Shape", [x.value])
    dims = v.op("Slice", [shape, v.const([1]), v.const([INT64_MAX])])
    return [BodyValue(v.op("ReduceProd", [dims], {"keepdims": 0}), (), False, ir.DataType.INT64)]
