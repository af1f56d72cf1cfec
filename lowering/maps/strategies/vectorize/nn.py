"""Batching rules of neural-network ops: convolutions, pools, normalizations, softmax, Pad.

An image op already takes a batch: an element [1, C, H, W] (an image
unsqueezed) is one image, and the stack, squeezed, is the batch. The ops
along one axis (softmax, the normalizations) shift it past the batch axis,
and Pad gives the batch axis no padding::

    Conv(e, W)          ->   Unsqueeze(Conv(Squeeze(E, [1]), W), [1])
    Softmax<axis = a>   ->   Softmax<axis = a + 1>
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from lowering.maps.strategies.vectorize.body_values import BodyValue, Dims, required, show
from lowering.maps.strategies.vectorize.family import RuleFamily

if TYPE_CHECKING:
    from lowering.maps.strategies.vectorize.batcher import Batcher

FAMILY = RuleFamily(__name__)


@FAMILY.rule(
    "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
    "GlobalMaxPool", "GlobalLpPool", "BatchNormalization", "InstanceNormalization", "LRN",
    "DepthToSpace", "SpaceToDepth",
)  # fmt: skip
def _image(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """An element [1, C, H, W] (an image [C, H, W] unsqueezed) is one image of a
    batch: the stack, squeezed, is the batch [n, C, H, W]."""
    x = v.only_first_batched(args, "its image")
    dims = v.dims(x)
    rank = len(dims)
    if rank < 3 or dims[0] != 1:
        raise v.decline(f"its element has shape {show(x.shape)}; it must be one image, [1, C, ...]")
    if any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
        raise v.decline("an output other than the first is read")
    if node.attributes.get_int("training_mode", 0):
        raise v.decline("training_mode is set")
    images = v.squeeze(x.value, [1])
    out = v.like(node, [images, *(a.value if a else None for a in args[1:])])
    channels = dims[1]
    if node.op_type in ("Conv", "ConvTranspose"):
        w = required(args, 2)[1].shape
        groups = node.attributes.get_int("group", 1)
        if w is None:
            channels = None
        elif node.op_type == "Conv":
            channels = w[0]
        else:
            channels = None if w[1] is None else w[1] * groups
    elif node.op_type in ("DepthToSpace", "SpaceToDepth"):
        channels = None
    spatial = (1,) * (rank - 2) if node.op_type.startswith("Global") else (None,) * (rank - 2)
    return [BodyValue(v.unsqueeze(out, [1]), (1, channels, *spatial), True)]


@FAMILY.rule("Softmax", "LogSoftmax", "Hardmax", "LpNormalization")
def _along_axis(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """One axis attribute, shifted. Before opset 13 Softmax flattens from its axis
    on; the batch axis comes before it either way."""
    x = v.only_first_batched(args)
    rank = v.rank(x)
    if rank == 0:
        raise v.decline("its input is a scalar")
    default = 1 if node.op_type != "LpNormalization" and v.opset < 13 else -1
    axis = v.axis(node.attributes.get_int("axis", default), rank)
    return [BodyValue(v.like(node, [x.value], axis=axis + 1), x.shape, True)]


@FAMILY.rule("LayerNormalization")
def _layer_norm(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = v.only_first_batched(args)
    dims = v.dims(x)
    axis = v.axis(node.attributes.get_int("axis", -1), len(dims))
    outs = v.like_all(node, [a.value if a else None for a in args], axis=axis + 1)
    stats = tuple(d if i < axis else 1 for i, d in enumerate(dims))
    return [BodyValue(outs[0], x.shape, True), *(BodyValue(o, stats, True) for o in outs[1:])]


@FAMILY.rule("Pad")
def _pad(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """The batch axis gets no padding: a zero width in front of ``pads``, or
    the ``axes`` shifted by one. In ``wrap`` mode onnxruntime's Pad fails on
    any input with a zero dim, padded or not, so an empty stack (a map over
    no elements, whose body the original never runs) is guarded::

        Slice(Pad<wrap>(Pad<constant>(E, batch end + 1), pads), [0], [-1])

    which needs every dim of an element to be nonzero (else the original
    fails as well, on every element)."""
    x = v.only_first_batched(args)
    pads = required(args, 2)[1]
    value = args[2] if len(args) > 2 else None
    axes = args[3] if len(args) > 3 else None
    dims = v.dims(x)
    rank = len(dims)
    wrap = node.attributes.get_string("mode", "constant") == "wrap"
    guard = wrap and not (v.batch_dim is not None and v.batch_dim > 0)
    if guard and not all(d is not None and d > 0 for d in dims):
        raise v.decline(
            f"in wrap mode onnxruntime's Pad fails on a zero dim, the stack may be empty, "
            f"and the element shape {show(x.shape)} is not known to be nonzero"
        )
    data = x.value
    if guard:
        one_more = v.const([0] * (rank + 1) + [1] + [0] * rank)
        data = v.op("Pad", [data, one_more], {"mode": "constant"})
    shape: Dims
    if axes is not None:
        shifted = [v.axis(int(a), rank) + 1 for a in v.constant(axes, "axes").reshape(-1)]
        widths_in = [pads.value, value.value if value else None, v.const(shifted)]
        shape = (None,) * rank
    else:
        widths = v.constant(pads, "pads").reshape(-1)
        widths_in = [
            v.const([0, *widths[:rank], 0, *widths[rank:]]),
            value.value if value else None,
        ]
        shape = tuple(
            None if d is None else d + int(widths[i]) + int(widths[rank + i])
            for i, d in enumerate(dims)
        )
    out = v.like(node, [data, *widths_in])
    if guard:
        out = v.op("Slice", [out, v.const([0]), v.const([-1])])
    return [BodyValue(out, shape, True)]
