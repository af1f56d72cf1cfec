"""Nodes ONNX sizes wrong, spelled so that its inference sizes them right.

onnxruntime sizes each output from ONNX's inference before a kernel runs,
and its memory planner may hand a node a freed buffer of that size. Where
the inference is wrong (:func:`~lowering.irutils.node_inference.seen_wrong`)
and the kernel computes another shape, the run fails ("Shape mismatch
attempting to re-use buffer. {0,3} != {4,3}"); a Reshape pin after the
node (:mod:`lowering.irutils.pins`) cannot reach the
node's own allocation. So a node the pin planner pins (copied, exposed or
read by a rewrite), whose inputs' shapes are proven static and whose true
shape is computed (:mod:`lowering.irutils.computed_shapes`), is spelled
another way that computes the same values, one rule per op, where ONNX's
inference of the new spelling gives the computed shape (checked on the node
before anything changes)::

    PRelu(x: [1,2,1], slope: [1,3])          PRelu(Expand(x, [1,2,3]), slope)
    Einsum<'ab,b->ab'>(x: [2,1], y: [5])     Einsum(Expand(x, [2,5]), y)
    NonZero(s: [])                           NonZero(Reshape(s, [1]))
    Squeeze(x: [2,1], axes [])               Squeeze(x, [1])
    Slice(x, [3], [INT64_MAX], [0], [-1])    Slice(x, [3], [INT64_MIN], [0], [-1])
    ConvTranspose<SAME_UPPER, out_pad>       ConvTranspose<pads = [h.., t..]>
    MaxPool<ceil_mode = 1, pads [0, 1]>      MaxPool<pads = [0, e']>  (same windows)
    MaxPool<SAME_UPPER, dilations [2]>       MaxPool<pads = [h, e']>
    Resize(x: [1,5], scales [1, 1.4])        Resize(x, sizes [1, 7])  (7 / 5 is 1.4 in float32)

Why each means the same: broadcasting X before PRelu, or an operand before
Einsum, changes no element; a scalar and its [1] hold one element; the
explicit axes are the unit dims onnxruntime squeezes; onnxruntime reads an
end of INT32_MAX or INT64_MAX with a negative step as through the first
element, which the type's minimum is to every reader; the pads onnxruntime
computes for SAME, written out; a max pool, an LpPool (a pad adds |0|^p)
or an average pool that counts no pad (``count_include_pad = 0``) does not
see its pads, so floor mode with an end pad e' that gives the same windows
is the ceil-mode pool; onnxruntime resizes by ``sizes`` with the scales
``sizes / dim`` in float32, the very scales given. The Squeeze and Slice
rules need no shape: with none known (a function's input, which
onnxruntime sizes once it inlines the call) a Squeeze loses its empty axes
(every unit dim, which ONNX infers wherever it knows the dims).

What has no such spelling keeps its pin: a Resize by scales that no sizes
give back, an AveragePool that counts its pads in ceil mode (its last
window's divisor), a Range of float bounds (onnxruntime adds the delta
step by step). Its own output keeps ONNX's wrong size, so no form copies
it (:func:`~lowering.irutils.pins.misallocated_output`; a map's strategy
declines, :mod:`lowering.maps.claims`): the copies' buffers, planned by
that size, were handed on to later values. Where it stays,
ONNX claims the size from what the original holds too (a Range's bounds, a
Resize's scales, the shape its body declares), so the output shows
onnxruntime no wrong size the original did not; hiding the size from
onnxruntime's inference (scales it cannot read) would write nodes only to
fool it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import onnx_ir as ir

from lowering.irutils.computed_shapes import Shape
from lowering.irutils.constants import constant_node
from lowering.irutils.dead_code import remove_unread
from lowering.irutils.naming import fresh
from lowering.irutils.node_inference import Dim, Operand, claimed_outputs, seen_wrong
from lowering.irutils.nodes import attribute, new_node
from lowering.irutils.shapes import THROUGH_FIRST


class Respelling(NamedTuple):
    """How to spell ``node`` (planned; :func:`apply_respelling` does it):
    input k becomes ``op(input k, constant)`` for each ``wrapped[k] = (op,
    constant)``, or the constant ``replaced[k]`` (None: absent); each
    attribute of ``attributes`` is set (None: removed)."""

    node: ir.Node
    wrapped: dict[int, tuple[str, np.ndarray]]
    replaced: dict[int, np.ndarray | None]
    attributes: dict[str, object | None]
    #: The proven dtype of each wrapped input, where known.
    dtypes: dict[int, ir.DataType] | None = None


_Rule = Callable[[ir.Node, Sequence[Operand | None], Shape, int], Respelling | None]
_ShapeFreeRule = Callable[[ir.Node, Sequence[Operand | None], int], Respelling | None]


def respelling(
    node: ir.Node,
    operands: Sequence[Operand | None],
    computed: Sequence[Shape] | None,
    opset: int,
) -> Respelling | None:
    """How to spell ``node`` so that ONNX's inference gives the ``computed``
    shapes of its outputs from ``operands`` (what is proven of its inputs);
    None where it does already, or no rule of this module fits. With no
    ``computed`` shapes (an input's shape not known), only a spelling that
    ONNX's inference is trusted on whatever the shapes (a Slice's end, a
    Squeeze with no axes), which :func:`seen_wrong` then no longer names."""
    if computed is not None and sized_right(
        node.op_type, node.attributes, operands, opset, computed
    ):
        return None
    found = _rule_respelling(node, operands, computed, opset)
    if found is None:
        return None
    dtypes = {k: o.dtype for k in found.wrapped if (o := operands[k]) is not None and o.dtype}
    found = found._replace(dtypes=dtypes)
    attributes = {name: a for name, a in node.attributes.items() if name not in found.attributes}
    attributes.update(
        {name: attribute(name, a) for name, a in found.attributes.items() if a is not None}
    )
    respelled = _respelled_operands(found, operands)
    if computed is None:
        probe = ir.Node(node.domain, node.op_type, [], list(attributes.values()))
        return None if seen_wrong(probe, respelled) else found
    return found if sized_right(node.op_type, attributes, respelled, opset, computed) else None


def _rule_respelling(
    node: ir.Node,
    operands: Sequence[Operand | None],
    computed: Sequence[Shape] | None,
    opset: int,
) -> Respelling | None:
    """What the rule of ``node``'s op writes; a rule that needs a shape, only
    with the ``computed`` ones."""
    if node.op_type in _SHAPE_FREE_RULES:
        return _SHAPE_FREE_RULES[node.op_type](node, operands, opset)
    if node.op_type in _RULES and computed is not None:
        return _RULES[node.op_type](node, operands, computed[0], opset)
    return None


def _respelled_operands(
    found: Respelling, operands: Sequence[Operand | None]
) -> list[Operand | None]:
    """What is known of the inputs as ``found`` spells them."""
    respelled = list(operands) + [None] * max(
        0, max(found.replaced, default=-1) + 1 - len(operands)
    )
    for k, (_, shape) in found.wrapped.items():
        known = respelled[k]  # (Expand and Reshape to a static shape: that shape)
        respelled[k] = None if known is None else Operand(known.dtype, [int(d) for d in shape])
    for k, replacement in found.replaced.items():
        respelled[k] = _constant_operand(replacement)
    while respelled and respelled[-1] is None:
        respelled.pop()
    return respelled


def _constant_operand(constant: np.ndarray | None) -> Operand | None:
    if constant is None:
        return None
    return Operand(ir.DataType.from_numpy(constant.dtype), list(constant.shape), constant)


def sized_right(
    op_type: str,
    attributes,
    operands: Sequence[Operand | None],
    opset: int,
    computed: Sequence[Shape],
) -> bool:
    """Whether ONNX's inference gives each output its ``computed`` shape."""
    claimed = claimed_outputs(op_type, attributes, operands, opset, len(computed))
    return all(c.shape is not None and _same(c.shape, s) for c, s in zip(claimed, computed))


def _same(claimed: Sequence[Dim], computed: Shape) -> bool:
    """The same rank and dims; a dim not computed (a symbol, None) claims no other size."""
    return len(claimed) == len(computed) and all(
        c == s if isinstance(s, int) else not isinstance(c, int)
        for c, s in zip(claimed, computed, strict=True)
    )


def apply_respelling(found: Respelling) -> list[ir.Node]:
    """Spell ``found.node`` as planned; returns the nodes written before it."""
    node = found.node
    graph = node.graph
    assert graph is not None
    written: list[ir.Node] = []
    for k, (op, constant) in found.wrapped.items():
        shape = constant_node(constant.astype(np.int64))
        wrapper = fresh(new_node(op, [node.inputs[k], shape.outputs[0]]))
        dtype = (found.dtypes or {}).get(k)
        if dtype is not None:  # (else left untyped: a shape needs a type)
            wrapper.outputs[0].type = ir.TensorType(dtype)
            wrapper.outputs[0].shape = ir.Shape([int(d) for d in constant])
        written += [shape, wrapper]
        node.replace_input_with(k, wrapper.outputs[0])
    needed = max(found.replaced, default=-1) + 1
    if needed > len(node.inputs):
        node.resize_inputs(needed)
    for k, replacement in found.replaced.items():
        old = node.inputs[k]
        made = None if replacement is None else constant_node(replacement)
        node.replace_input_with(k, None if made is None else made.outputs[0])
        if made is not None:
            written.append(made)
        remove_unread(old)  # (a Constant nothing else reads)
    while node.inputs and node.inputs[-1] is None:
        node.resize_inputs(len(node.inputs) - 1)
    for name, value in found.attributes.items():
        if value is None:
            node.attributes.pop(name, None)
        else:
            node.attributes[name] = attribute(name, value)
    if written:
        graph.insert_before(node, written)
    return written


def _static(known: Operand | None) -> list[int] | None:
    if known is None or known.shape is None or not all(isinstance(d, int) for d in known.shape):
        return None
    return [int(d) for d in known.shape]  # type: ignore[arg-type]


def _static_shape(shape: Shape) -> list[int] | None:
    return [int(d) for d in shape] if all(isinstance(d, int) for d in shape) else None  # type: ignore[arg-type]


def _prelu(node: ir.Node, operands, computed: Shape, opset: int) -> Respelling | None:
    """X broadcast to the output's shape (Expand: opset 8), the slope then fits into it."""
    target = _static_shape(computed)
    if target is None or opset < 8 or _static(operands[0] if operands else None) is None:
        return None
    return Respelling(node, {0: ("Expand", np.array(target, np.int64))}, {}, {})


def _einsum(node: ir.Node, operands, computed: Shape, opset: int) -> Respelling | None:
    """Each operand broadcast to its letters' sizes (computed_shapes' rule)."""
    equation = node.attributes.get_string("equation", "").replace(" ", "")
    terms = equation.partition("->")[0].split(",")
    if "..." in equation or len(terms) != len(operands):
        return None
    shapes = [_static(o) for o in operands]
    sizes: dict[str, int] = {}
    for term, dims in zip(terms, shapes, strict=True):
        if dims is None or len(dims) != len(term):
            return None
        for letter, d in zip(term, dims, strict=True):
            sizes[letter] = d if sizes.get(letter, 1) == 1 else sizes[letter]
    wrapped = {}
    for k, (term, dims) in enumerate(zip(terms, shapes, strict=True)):
        target = [sizes[letter] for letter in term]
        if target != dims:
            wrapped[k] = ("Expand", np.array(target, np.int64))
    return Respelling(node, wrapped, {}, {}) if wrapped else None


def _nonzero(node: ir.Node, operands, computed: Shape, opset: int) -> Respelling | None:
    """A scalar's one element as a [1] (onnxruntime counts its rank as 1)."""
    if _static(operands[0] if operands else None) != []:
        return None
    return Respelling(node, {0: ("Reshape", np.array([1], np.int64))}, {}, {})


def _squeeze(node: ir.Node, operands, opset: int) -> Respelling | None:
    """The unit dims onnxruntime squeezes for empty axes, written out; none, or
    dims not known: no axes (every unit dim, which ONNX infers where it knows them)."""
    given = node.attributes.get("axes")
    axes = operands[1] if len(operands) > 1 else None
    if not (
        (given is not None and not given.as_ints())
        or (axes is not None and axes.value is not None and axes.value.size == 0)
    ):
        return None  # (axes given: ONNX squeezes them, as onnxruntime does)
    dims = _static(operands[0] if operands else None)
    unit = [] if dims is None else [i for i, d in enumerate(dims) if d == 1]
    if opset >= 13:
        return Respelling(node, {}, {1: np.array(unit, np.int64) if unit else None}, {})
    return Respelling(node, {}, {}, {"axes": unit or None})


def _slice(node: ir.Node, operands, opset: int) -> Respelling | None:
    """An end of INT32_MAX or INT64_MAX with a negative step, through the first
    element to onnxruntime, as the ends' type's minimum."""
    ends = operands[2].value if len(operands) > 2 and operands[2] is not None else None
    steps = operands[4].value if len(operands) > 4 and operands[4] is not None else None
    if ends is None or steps is None or ends.size != steps.size:
        return None
    if not np.issubdtype(ends.dtype, np.integer):
        return None
    info = np.iinfo(ends.dtype)
    through = np.isin(ends, [v for v in THROUGH_FIRST if v <= info.max]) & (
        steps.reshape(ends.shape) < 0
    )
    if not through.any():
        return None
    return Respelling(node, {}, {2: np.where(through, info.min, ends).astype(ends.dtype)}, {})


def _conv_transpose(node: ir.Node, operands, computed: Shape, opset: int) -> Respelling | None:
    """SAME's pads, as onnxruntime computes them from the computed size:
    the total ``unpadded - size``, its odd one at the tail for SAME_UPPER."""
    auto_pad = node.attributes.get_string("auto_pad", "NOTSET")
    x = _static(operands[0] if operands else None)
    w = _static(operands[1] if len(operands) > 1 else None)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER") or x is None or w is None:
        return None
    if node.attributes.get("output_shape") is not None or len(w) != len(x):
        return None
    spatial = len(x) - 2
    attributes = node.attributes
    kernel = list(attributes.get_ints("kernel_shape", w[2:]))
    strides = list(attributes.get_ints("strides", [1] * spatial))
    dilations = list(attributes.get_ints("dilations", [1] * spatial))
    output_padding = list(attributes.get_ints("output_padding", [0] * spatial))
    if not len(kernel) == len(strides) == len(dilations) == len(output_padding) == spatial:
        return None
    heads, tails = [], []
    for i, d in enumerate(x[2:]):
        size = computed[2 + i]
        unpadded = strides[i] * (d - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1
        if not isinstance(size, int) or unpadded < size:
            return None
        total = unpadded - size
        small, large = total // 2, total - total // 2
        heads.append(small if auto_pad == "SAME_UPPER" else large)
        tails.append(large if auto_pad == "SAME_UPPER" else small)
    return Respelling(node, {}, {}, {"auto_pad": None, "pads": heads + tails})


def _pool(node: ir.Node, operands, computed: Shape, opset: int) -> Respelling | None:
    """Floor mode with end pads that give the same windows, for a pool that
    does not see its pads: MaxPool, LpPool (a pad adds |0|^p), and AveragePool
    with count_include_pad 0; SAME's head pads as onnxruntime computes them
    (from the undilated kernel, :func:`~lowering.irutils.shapes.pool_output_size`)."""
    if not _sees_no_pads(node):
        return None
    window = _pool_window(node, operands)
    if window is None:
        return None
    tails = _floor_tails(window, computed)
    if tails is None:
        return None
    new_pads = window.pads[: len(window.kernel)] + tails
    return Respelling(node, {}, {}, {"auto_pad": None, "ceil_mode": None, "pads": new_pads})


def _sees_no_pads(node: ir.Node) -> bool:
    """Whether ``node`` is a pool whose windows count no pad (:func:`_pool`)."""
    attributes = node.attributes
    if node.op_type == "AveragePool" and attributes.get_int("count_include_pad", 0) != 0:
        return False
    return node.op_type in ("MaxPool", "AveragePool", "LpPool")


class _PoolWindow(NamedTuple):
    """A pool's static input shape, and its windows' kernel, pads, strides and dilations."""

    x: list[int]
    kernel: list[int]
    pads: list[int]
    strides: list[int]
    dilations: list[int]


def _pool_window(node: ir.Node, operands) -> _PoolWindow | None:
    """The pool's windows, SAME's head pads computed; None where the input's
    shape is not static or the attributes do not fit it."""
    attributes = node.attributes
    x = _static(operands[0] if operands else None)
    kernel = list(attributes.get_ints("kernel_shape", []))
    if x is None or not kernel or len(x) != len(kernel) + 2:
        return None
    spatial = len(kernel)
    auto_pad = attributes.get_string("auto_pad", "NOTSET")
    pads = _explicit_pads(attributes, auto_pad, spatial)
    strides = list(attributes.get_ints("strides", [1] * spatial))
    dilations = list(attributes.get_ints("dilations", [1] * spatial))
    if len(pads) != 2 * spatial or len(strides) != spatial or len(dilations) != spatial:
        return None
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        _same_heads(x, kernel, strides, auto_pad, pads)
    elif auto_pad != "NOTSET" and auto_pad != "VALID":
        return None
    if any(not 0 <= p < k for p, k in zip(pads, kernel)):
        return None  # (onnxruntime takes no pad as wide as the kernel)
    return _PoolWindow(x, kernel, pads, strides, dilations)


def _explicit_pads(attributes, auto_pad: str, spatial: int) -> list[int]:
    """The pads attribute where auto_pad is NOTSET; else, or empty, zeros."""
    pads = list(attributes.get_ints("pads", [0] * 2 * spatial)) if auto_pad == "NOTSET" else []
    return pads or [0] * 2 * spatial


def _same_heads(
    x: list[int], kernel: list[int], strides: list[int], auto_pad: str, pads: list[int]
) -> None:
    """Set ``pads``' heads to those onnxruntime computes for SAME (undilated)."""
    for i, d in enumerate(x[2:]):
        needed = (-(-d // strides[i]) - 1) * strides[i] + kernel[i] - d
        pads[i] = needed // 2 if auto_pad == "SAME_UPPER" else (needed + 1) // 2


def _floor_tails(window: _PoolWindow, computed: Shape) -> list[int] | None:
    """The least end pads with which floor mode gives the ``computed`` counts of
    windows; None where none narrower than the kernel does."""
    x, kernel, pads, strides, dilations = window
    tails = []
    for i, d in enumerate(x[2:]):
        count = computed[2 + i]
        if not isinstance(count, int) or count < 1:
            return None
        span = (kernel[i] - 1) * dilations[i] + 1
        # floor((d + head + tail - span) / stride) + 1 == count, the least tail >= 0
        tail = max(0, (count - 1) * strides[i] + span - d - pads[i])
        if (d + pads[i] + tail - span) // strides[i] + 1 != count or tail >= kernel[i]:
            return None
        tails.append(tail)
    return tails


def _resize(node: ir.Node, operands, computed: Shape, opset: int) -> Respelling | None:
    """Scales whose every resized size gives them back (``float32(size) /
    float32(dim)``, as onnxruntime computes the scales of ``sizes``), as sizes."""
    given = _scaled_by(operands, opset)
    if given is None:
        return None
    x, scales = given
    mode = node.attributes.get_string("coordinate_transformation_mode", "half_pixel")
    if mode == "tf_crop_and_resize":
        return None  # (the spec sizes it by its roi too: not checked here)
    rank = len(x)
    axes = [a % rank for a in node.attributes.get_ints("axes", [])] or list(range(rank))
    sizes = _sizes_of_scales(x, axes, scales.reshape(-1).astype(np.float32), computed)
    if sizes is None:
        return None
    # (no scales from Resize-13 on; an empty tensor before, which onnxscript's
    # optimizer may fold into one the checker then reads as given)
    replaced: dict[int, np.ndarray | None] = {
        2: None if opset >= 13 else np.array([], np.float32),
        3: np.array(sizes, np.int64),
    }
    return Respelling(node, {}, replaced, {"keep_aspect_ratio_policy": None})


def _scaled_by(operands, opset: int) -> tuple[list[int], np.ndarray] | None:
    """A Resize's static input shape and its constant scales, where it is
    given those and no sizes (from opset 11, where sizes can replace them)."""
    x = _static(operands[0] if operands else None)
    scales = operands[2].value if len(operands) > 2 and operands[2] is not None else None
    if opset < 11 or x is None or scales is None or not scales.size:
        return None
    if len(operands) > 3 and operands[3] is not None:
        return None
    return x, scales


def _sizes_of_scales(
    x: list[int], axes: list[int], scales: np.ndarray, computed: Shape
) -> list[int] | None:
    """The ``computed`` size along each of ``axes``, where each gives back its
    scale as onnxruntime computes it from sizes; else None."""
    if len(axes) != scales.size:
        return None
    sizes = []
    for axis, scale in zip(axes, scales, strict=True):
        size = computed[axis]
        if not isinstance(size, int) or size < 1 or x[axis] < 1:
            return None
        if np.float32(size) / np.float32(x[axis]) != scale:
            return None
        sizes.append(size)
    return sizes


_RULES: dict[str, _Rule] = {
    "AveragePool": _pool,
    "ConvTranspose": _conv_transpose,
    "Einsum": _einsum,
    "LpPool": _pool,
    "MaxPool": _pool,
    "NonZero": _nonzero,
    "PRelu": _prelu,
    "Resize": _resize,
}
#: The rules that need no shape: what they write ONNX infers right for any.
_SHAPE_FREE_RULES: dict[str, _ShapeFreeRule] = {"Slice": _slice, "Squeeze": _squeeze}
