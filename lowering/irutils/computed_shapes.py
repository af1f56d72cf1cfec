"""The output shapes of the nodes ONNX infers wrong, computed by the runtime's rules.

:func:`~lowering.irutils.node_inference.seen_wrong` names the nodes whose
ONNX-inferred shapes may not be what onnxruntime computes. For the ones
whose sizes follow from their input shapes and attributes alone, this module
computes them (:mod:`lowering.irutils.shapes`), so that a rewrite can pin a
copied node's output to its true shape, where every runtime reads it::

    y = LpPool <ceil_mode = 1, ...> (x: float[1,2,3])     ONNX: [1,2,2]  computed: [1,2,1]
    p = Reshape(y, [1, 2, 1])                             ONNX: [1,2,1]  a no-op at run time

A dim is an int where it is computed; otherwise it is an input's dim that
the output copies (a symbol or None: a pool's batch and channels, a dim
Slice or Resize leaves), which ONNX's inference copies too, or None for
NonZero's count, which no inference knows. An output with any other dim
not known here (a pool over a length of unknown size, which ONNX may know
where this does not) is not computed, nor are sizes that depend on values
known only at run time (a Range's bounds, a Resize's scales). Every rule
is swept against onnxruntime (tests/test_computed_shapes.py).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from lowering.irutils.node_inference import Dim, Operand
from lowering.irutils.op_facts import POOL_OPS
from lowering.irutils.shapes import (
    conv_transpose_output_size,
    onnxruntime_slice_length,
    pool_output_size,
)

Shape = tuple[Dim, ...]


def computed_shapes(node: ir.Node, operands: Sequence[Operand | None]) -> list[Shape] | None:
    """The shape of each output of ``node``, by onnxruntime's rules; None where
    this module has no rule for the node or its inputs leave one unproven."""
    if node.op_type in POOL_OPS:
        shape = _pool(node, operands)
        return None if shape is None else [shape] * len(node.outputs)  # MaxPool's Indices too
    rule = _RULES.get(node.op_type)
    shape = None if rule is None else rule(node, operands)
    return None if shape is None else [shape]


def _static(operand: Operand | None) -> list[int] | None:
    if operand is None or operand.shape is None:
        return None
    dims = list(operand.shape)
    return dims if all(isinstance(d, int) for d in dims) else None  # type: ignore[return-value]


def _window(node: ir.Node, spatial: int) -> tuple[list[int], list[int], list[int], str] | None:
    attributes = node.attributes
    strides = list(attributes.get_ints("strides", [1] * spatial))
    dilations = list(attributes.get_ints("dilations", [1] * spatial))
    auto_pad = attributes.get_string("auto_pad", "NOTSET")
    pads = list(attributes.get_ints("pads", [0] * (2 * spatial))) if auto_pad == "NOTSET" else []
    if len(strides) != spatial or len(dilations) != spatial:
        return None
    if auto_pad == "NOTSET" and len(pads) != 2 * spatial:
        return None
    return strides, dilations, pads or [0] * (2 * spatial), auto_pad


def _pool(node: ir.Node, operands: Sequence[Operand | None]) -> Shape | None:
    x = operands[0] if operands else None
    kernel = node.attributes.get_ints("kernel_shape", None)
    if x is None or x.shape is None or not kernel or len(x.shape) != len(kernel) + 2:
        return None
    spatial = len(kernel)
    window = _window(node, spatial)
    if window is None:
        return None
    strides, dilations, pads, auto_pad = window
    ceil_mode = node.attributes.get_int("ceil_mode", 0) != 0
    sizes = _spatial(
        x.shape[2:],
        lambda i, d: pool_output_size(
            d, kernel[i], strides[i], dilations[i], (pads[i], pads[i + spatial]), auto_pad,
            ceil_mode,
        ),
    )  # fmt: skip
    return None if sizes is None else (*x.shape[:2], *sizes)


def _conv_transpose(node: ir.Node, operands: Sequence[Operand | None]) -> Shape | None:
    x = operands[0] if operands else None
    w = operands[1] if len(operands) > 1 else None
    weights = _static(w)
    if x is None or x.shape is None or weights is None or len(weights) != len(x.shape):
        return None
    spatial = len(x.shape) - 2
    attributes = node.attributes
    kernel = list(attributes.get_ints("kernel_shape", weights[2:]))
    output_padding = list(attributes.get_ints("output_padding", [0] * spatial))
    output_shape = attributes.get_ints("output_shape", None)
    window = _window(node, spatial)
    if window is None or len(kernel) != spatial or len(output_padding) != spatial:
        return None
    strides, dilations, pads, auto_pad = window
    dims: list[Dim] = [x.shape[0], weights[1] * attributes.get_int("group", 1)]
    if output_shape is not None:
        if len(output_shape) != spatial:
            return None
        return (*dims, *output_shape)
    sizes = _spatial(
        x.shape[2:],
        lambda i, d: conv_transpose_output_size(
            d, kernel[i], strides[i], dilations[i], (pads[i], pads[i + spatial]), auto_pad,
            output_padding[i],
        ),
    )  # fmt: skip
    return None if sizes is None else (*dims, *sizes)


def _spatial(dims: Sequence[Dim], size: Callable[[int, int], int | None]) -> list[int] | None:
    """``size(i, d)`` of each spatial dim ``d``; None if a dim is not known here
    (ONNX may know it) or a size is not computed."""
    sizes = []
    for i, d in enumerate(dims):
        got = size(i, d) if isinstance(d, int) else None
        if got is None:
            return None
        sizes.append(got)
    return sizes


def _einsum(node: ir.Node, operands: Sequence[Operand | None]) -> Shape | None:
    """Each letter's size over its operands, a 1 broadcasting; static shapes only."""
    equation = node.attributes.get_string("equation", "").replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if "..." in equation or len(terms) != len(operands):
        return None
    sizes: dict[str, int] = {}
    for term, known in zip(terms, operands, strict=True):
        dims = _static(known)
        if dims is None or len(dims) != len(term) or len(set(term)) != len(term):
            return None  # (a repeated letter in one term: a diagonal, not computed)
        for letter, d in zip(term, dims, strict=True):
            size = sizes.get(letter)
            if size is None or size == 1:
                sizes[letter] = d
            elif d not in (1, size):
                return None
    if not arrow:
        counts = collections.Counter("".join(terms))
        output = "".join(sorted(letter for letter, count in counts.items() if count == 1))
    if any(letter not in sizes for letter in output):
        return None
    return tuple(sizes[letter] for letter in output)


def _prelu(node: ir.Node, operands: Sequence[Operand | None]) -> Shape | None:
    """X and the slope broadcast both ways (onnxruntime)."""
    shapes = [_static(o) for o in operands[:2]]
    if len(shapes) != 2 or shapes[0] is None or shapes[1] is None:
        return None
    try:
        return tuple(int(d) for d in np.broadcast_shapes(tuple(shapes[0]), tuple(shapes[1])))
    except ValueError:
        return None


def _squeeze(node: ir.Node, operands: Sequence[Operand | None]) -> Shape | None:
    """Empty axes squeeze every dim of size 1 (onnxruntime); other axes ONNX gets right."""
    dims = _static(operands[0] if operands else None)
    axes_attribute = node.attributes.get("axes")
    given = operands[1] if len(operands) > 1 else None
    empty = (axes_attribute is not None and len(axes_attribute.as_ints()) == 0) or (
        given is not None and given.value is not None and given.value.size == 0
    )
    if dims is None or not empty:
        return None
    return tuple(d for d in dims if d != 1)


def _nonzero(node: ir.Node, operands: Sequence[Operand | None]) -> Shape | None:
    """[rank, count]; a scalar's rank counts as 1 (onnxruntime: [1, 0] or [1, 1])."""
    x = operands[0] if operands else None
    if x is None or x.shape is None:
        return None
    return (max(len(x.shape), 1), None)


def _resize(node: ir.Node, operands: Sequence[Operand | None]) -> Shape | None:
    """Each resized dim: ``sizes``, or ``int(scale * dim)`` in float32, as
    onnxruntime computes it (ONNX floors the double product: 5 * 1.4 is 6
    to it, 7 to onnxruntime); ``sizes`` with an aspect-ratio policy: not computed."""
    x = operands[0] if operands else None
    if x is None or x.shape is None or len(operands) < 3:
        return None
    scales = operands[2].value if operands[2] is not None else None
    sizes = operands[3].value if len(operands) > 3 and operands[3] is not None else None
    rank = len(x.shape)
    axes = [a % rank if -rank <= a < rank else rank for a in node.attributes.get_ints("axes", [])]
    axes = axes or list(range(rank))
    dims: list[Dim] = list(x.shape)
    if scales is not None and scales.size:
        if scales.size != len(axes) or rank in axes:
            return None
        for axis, scale in zip(axes, scales.reshape(-1).astype(np.float32), strict=True):
            d = x.shape[axis]
            if isinstance(d, int):
                dims[axis] = int(np.float32(d) * scale)
            elif scale != 1:
                return None
        return tuple(dims)
    policy = node.attributes.get_string("keep_aspect_ratio_policy", "stretch")
    if sizes is None or sizes.size != len(axes) or rank in axes or policy != "stretch":
        return None
    for axis, size in zip(axes, sizes.reshape(-1), strict=True):
        dims[axis] = int(size)
    return tuple(dims)


def _range(node: ir.Node, operands: Sequence[Operand | None]) -> Shape | None:
    """ceil((limit - start) / delta): float bounds in double, as onnxruntime
    counts (ONNX subtracts them in float: Range(-0.17, -10.17, -1.0) is 10
    elements to it, 11 to onnxruntime), integers exactly; an integer span
    that overflows its type: not computed."""
    values = [None if o is None else o.value for o in operands[:3]]
    if len(values) != 3 or any(v is None or v.size != 1 for v in values):
        return None
    start, limit, delta = (v.reshape(()) for v in values)  # type: ignore[union-attr]
    if np.issubdtype(start.dtype, np.integer):
        info = np.iinfo(start.dtype)
        span, step = int(limit) - int(start), int(delta)
        if not info.min <= span <= info.max or step == 0:
            return None
        return (max(0, -(-span // step)),)  # exact (onnxruntime: 3 for Range(0, 2**53 + 1, 2**52))
    span_float = float(limit) - float(start)
    if float(delta) == 0 or not np.isfinite(span_float):
        return None
    return (max(0, int(np.ceil(span_float / float(delta)))),)


def _slice(node: ir.Node, operands: Sequence[Operand | None]) -> Shape | None:
    """Each sliced dim, as onnxruntime reads the bounds
    (:func:`~lowering.irutils.shapes.onnxruntime_slice_length`)."""
    x = operands[0] if operands else None
    bounds = [None if k >= len(operands) or o is None else o.value
              for k, o in enumerate(operands[:5]) if k > 0]  # fmt: skip
    bounds += [None] * (4 - len(bounds))
    starts, ends, axes, steps = bounds
    if x is None or x.shape is None or starts is None or ends is None:
        return None
    rank = len(x.shape)
    count = starts.size
    axes_list = list(range(count)) if axes is None else [int(a) for a in axes.reshape(-1)]
    steps_list = [1] * count if steps is None else [int(t) for t in steps.reshape(-1)]
    if ends.size != count or len(axes_list) != count or len(steps_list) != count:
        return None
    if not np.issubdtype(ends.dtype, np.integer):
        return None
    dims: list[Dim] = list(x.shape)
    for start, end, axis, step in zip(
        starts.reshape(-1), ends.reshape(-1), axes_list, steps_list, strict=True
    ):
        if not -rank <= axis < rank:
            return None
        d = x.shape[axis % rank]
        length = None
        if isinstance(d, int):
            length = onnxruntime_slice_length(d, int(start), int(end), step)
        if length is None:
            return None  # (a dim not known here may be to ONNX)
        dims[axis % rank] = length
    return tuple(dims)


_RULES = {
    "ConvTranspose": _conv_transpose,
    "Einsum": _einsum,
    "NonZero": _nonzero,
    "PRelu": _prelu,
    "Range": _range,
    "Resize": _resize,
    "Slice": _slice,
    "Squeeze": _squeeze,
}
