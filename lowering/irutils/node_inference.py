"""What ONNX's per-node inference proves about a node's outputs, and what it only claims.

``onnx.shape_inference.infer_node_outputs`` gives the types and shapes of
one node's outputs from its inputs' types, shapes and constant values. Its
dtypes follow from the op's type constraints: they are sound. Its shapes
are a second implementation of each op, and for some ops they are not
the runtime's. MaxPool with ``ceil_mode = 1`` and an end pad::

    x: float[1,1,4], kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1

    index        0   1   2   3 | 4 (pad)
    window 0    [0   1]        |
    window 1            [2   3]|
    window 2                   |[4   5]   starts in the end pad

    ONNX:         ceil((4 + 1 - 2) / 2) + 1 = 3  ->  float[1,1,3]
    onnxruntime:  window 2 dropped, as the spec says  ->  float[1,1,2]

A fold of ``Shape(MaxPool(x))`` on ONNX's answer is a wrong constant. So a
shape is taken only from the ops in op_facts.TRUSTED_SHAPE_OPS, each checked
against onnxruntime on edge attributes and inputs (tests/test_trusted_shapes.py),
and not in the cases of them doubted() names (op_facts.SHAPE_DOUBTED_OPS), and
from the ops seen wrong (op_facts.SHAPES_SEEN_WRONG) in the cases seen_wrong()
clears, such as a NonZero of rank 1 or more. Every other output gets its
dtype and no shape.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import onnx
import onnx_ir as ir

from lowering.irutils.op_facts import (
    POOL_OPS,
    SHAPE_DOUBTED_OPS,
    SHAPES_SEEN_WRONG,
    TRUSTED_SHAPE_OPS,
    is_onnx_domain,
)
from lowering.irutils.shapes import THROUGH_FIRST

Dim = int | str | None  # a known size, a symbolic dim, or unknown


class Operand(NamedTuple):
    """What is known of one input: its dtype, shape and value (each None if not known).

    ``shape`` is None when the rank is unknown; in it, a str is a symbolic
    dim (equal to every other dim of that name), None an unknown dim.
    ``type`` is for inputs that are not tensors (sequences, optionals): their
    type, used in place of ``dtype`` and ``shape``.
    """

    dtype: ir.DataType | None
    shape: Sequence[Dim] | None
    value: np.ndarray | None = None
    type: ir.TypeProtocol | None = None


class Inferred(NamedTuple):
    """What is proven of one output (None where nothing is)."""

    dtype: ir.DataType | None
    shape: tuple[Dim, ...] | None
    #: The type of an output that is not a tensor (a sequence, an optional).
    type: ir.TypeProtocol | None = None

    @property
    def dims(self) -> tuple[int | None, ...] | None:
        """The shape with symbolic dims as unknown (None)."""
        if self.shape is None:
            return None
        return tuple(d if isinstance(d, int) else None for d in self.shape)


_GRAPH_ATTRIBUTES = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def operand(value: ir.Value | None, constant: np.ndarray | None = None) -> Operand | None:
    """What ``value``'s type and shape tell, with ``constant`` its value if known
    (None: the input is absent)."""
    if value is None:
        return None
    if value.type is not None and not isinstance(value.type, ir.TensorType):
        return Operand(None, None, None, value.type)
    dtype = value.dtype if value.type is not None else None
    shape = None
    if value.shape is not None:
        shape = [d if isinstance(d, int) else d.value for d in value.shape]
    return Operand(dtype, shape, constant)


def infer_outputs(node: ir.Node, operands: Sequence[Operand | None], opset: int) -> list[Inferred]:
    """Per output of ``node``, its dtype and, where ONNX's shape is trusted, its shape.

    ``operands[k]`` is what is known of input k (None: the input is absent).
    The node is read for its op type and attributes only; ``opset`` is the
    default domain's version. Nothing proven is (None, None).
    """
    if not is_onnx_domain(node.domain):
        return [Inferred(None, None)] * len(node.outputs)
    if node.op_type == "Constant" and (referred := _referred_constant(node)) is not None:
        return [referred]
    if node.op_type == "SequenceLength":  # a scalar whatever the sequence (its spec)
        return [Inferred(ir.DataType.INT64, ())]
    trusted = _trusted(node, operands)
    results = claimed_outputs(
        node.op_type, node.attributes, operands, opset, len(node.outputs), trusted=trusted
    )
    slice_ = node.op_type == "Slice" and opset >= 10 and not doubted(node, operands)
    if slice_ and (kept := _sliced(operands)) is not None:
        got = results[0].shape
        if got is None or len(got) != len(kept):
            got = kept
        results[0] = results[0]._replace(
            shape=tuple(k if k is not None else d for k, d in zip(kept, got, strict=True))
        )
    return results


#: A Constant whose value a function's attribute gives: its type, by the
#: attribute it is given as (a list of unknown length).
_REFERRED = {
    "value_float": Inferred(ir.DataType.FLOAT, ()),
    "value_floats": Inferred(ir.DataType.FLOAT, (None,)),
    "value_int": Inferred(ir.DataType.INT64, ()),
    "value_ints": Inferred(ir.DataType.INT64, (None,)),
    "value_string": Inferred(ir.DataType.STRING, ()),
    "value_strings": Inferred(ir.DataType.STRING, (None,)),
}


def _referred_constant(node: ir.Node) -> Inferred | None:
    """What a Constant of a function body whose value is a reference (``value_float
    = @alpha``) has, where the attribute's kind tells it; ONNX infers nothing
    of a node with a reference."""
    if len(node.attributes) != 1:
        return None
    ((name, attribute),) = node.attributes.items()
    return _REFERRED.get(name) if attribute.is_ref() else None


def _trusted(node: ir.Node, operands: Sequence[Operand | None]) -> bool:
    """Whether ONNX's shapes of ``node`` are onnxruntime's: a trusted op but in
    the cases :func:`doubted` names, or an op seen wrong in the cases
    :func:`seen_wrong` clears (a NonZero of known rank but 0: ``[rank, ?]``;
    a pool whose windows fit; an Einsum with no size-1 dim to broadcast)."""
    if node.op_type in SHAPES_SEEN_WRONG:
        return not seen_wrong(node, operands)
    return node.op_type in TRUSTED_SHAPE_OPS and not doubted(node, operands)


def _sliced(operands: Sequence[Operand | None]) -> tuple[Dim, ...] | None:
    """What a Slice keeps, where ONNX's inference loses it (computed bounds): its
    input's rank, and the dims of the axes it does not slice.

    Slice changes only the dims of ``axes``; that takes constant axes, all in
    range and distinct (an invalid node proves nothing).
    """
    data = operands[0] if operands else None
    axes = operands[3] if len(operands) > 3 else None
    if data is None or data.shape is None or axes is None or axes.value is None:
        return None
    rank = len(data.shape)
    values = [int(a) for a in np.asarray(axes.value).reshape(-1)]
    if not all(-rank <= a < rank for a in values) or len({a % rank for a in values}) != len(values):
        return None
    sliced = {a % rank for a in values}
    return tuple(None if a in sliced else d for a, d in enumerate(data.shape))


def claimed_outputs(
    op_type: str,
    attributes: Mapping[str, ir.Attr],
    operands: Sequence[Operand | None],
    opset: int,
    outputs: int,
    *,
    trusted: bool = True,
) -> list[Inferred]:
    """What ONNX's inference claims of each of ``outputs`` outputs of a node of
    the default domain's ``op_type`` with ``attributes`` and ``operands``,
    right or wrong (the shapes only if ``trusted``): what onnxruntime, which
    runs the same inference, allocates for them."""
    unknown = [Inferred(None, None)] * outputs
    if any(
        not isinstance(a, ir.Attr) or a.is_ref() or a.type in _GRAPH_ATTRIBUTES
        for a in attributes.values()
    ):
        return unknown
    types: dict[str, onnx.TypeProto] = {}
    data: dict[str, onnx.TensorProto] = {}
    names: list[str] = []
    symbols: set[str] = set()
    for k, known in enumerate(operands):
        if known is None:
            names.append("")
            continue
        name = f"input_{k}"
        names.append(name)
        if known.type is not None:
            types[name] = ir.serde.serialize_type(known.type)
            continue
        if known.dtype is None:
            continue
        shape = None if known.shape is None else list(known.shape)
        types[name] = onnx.helper.make_tensor_type_proto(known.dtype.value, shape)
        symbols.update(d for d in shape or () if isinstance(d, str))
        if known.value is not None and known.value.dtype != object:
            data[name] = onnx.numpy_helper.from_array(known.value, name)
    proto = onnx.NodeProto(
        op_type=op_type, input=names, output=[f"output_{k}" for k in range(outputs)]
    )
    try:
        proto.attribute.extend(ir.serde.serialize_attribute(a) for a in attributes.values())
        schema = onnx.defs.get_schema(op_type, opset, "")
        inferred = onnx.shape_inference.infer_node_outputs(schema, proto, types, data)
    except Exception:  # noqa: BLE001 -- a schema error, inputs the schema refuses: nothing proven
        return unknown
    return [_output(inferred.get(f"output_{k}"), trusted, symbols) for k in range(outputs)]


def _output(type_proto: onnx.TypeProto | None, trusted: bool, symbols: set[str]) -> Inferred:
    if type_proto is None:
        return Inferred(None, None)
    if type_proto.WhichOneof("value") in ("sequence_type", "optional_type"):
        try:  # (its element's dtype: sound; its shape is not read)
            type_ = ir.serde.deserialize_type_proto_for_type(type_proto)
        except Exception:  # noqa: BLE001 -- a half-built type (seq(?)): nothing
            return Inferred(None, None)
        return Inferred(None, None, type_)
    if type_proto.WhichOneof("value") != "tensor_type":
        return Inferred(None, None)
    tensor = type_proto.tensor_type
    try:
        dtype = ir.DataType(tensor.elem_type) if tensor.elem_type else None
    except ValueError:  # a type onnx_ir does not know
        dtype = None
    if not trusted or not tensor.HasField("shape"):
        return Inferred(dtype, None)
    dims = tuple(_dim(d, symbols) for d in tensor.shape.dim)
    if any(isinstance(d, int) and d < 0 for d in dims):
        return Inferred(dtype, None)  # an invalid node (onnxruntime refuses it)
    return Inferred(dtype, dims)


def _dim(dim: onnx.TensorShapeProto.Dimension, symbols: set[str]) -> Dim:
    if dim.HasField("dim_value"):
        return dim.dim_value
    if dim.HasField("dim_param") and dim.dim_param in symbols:
        return dim.dim_param  # a name of the inputs: the same size
    return None


def seen_wrong(node: ir.Node, operands: Sequence[Operand | None]) -> bool:
    """Whether ONNX's inferred shapes of ``node`` may be wrong: an op of
    :data:`~lowering.irutils.op_facts.SHAPES_SEEN_WRONG` (save an Einsum whose every letter that occurs
    twice or more has one size in all operands, known or one symbolic dim:
    only a size-1 dim that broadcasts is misread, and a letter of one
    occurrence, such as the batch letter of a vectorized Einsum, has nothing
    to broadcast with; a NonZero of known rank but 0), or a
    :func:`doubted` case of a trusted op."""
    if node.op_type == "Einsum":
        return not _einsum_sizes_agree(node, operands)
    if node.op_type in POOL_OPS:
        return not _pool_windows_fit(node, operands)
    if node.op_type == "NonZero":  # [rank, ?] is right but for a scalar's rank
        x = operands[0] if operands else None
        return x is None or x.shape is None or len(x.shape) == 0
    return node.op_type in SHAPES_SEEN_WRONG or doubted(node, operands)


def _pool_windows_fit(node: ir.Node, operands: Sequence[Operand | None]) -> bool:
    """A pool whose every window fits its padded input: ceil_mode 0, pads given or
    none (auto_pad NOTSET or VALID), and static spatial sizes d with
    d + pads >= (k - 1) * dilation + 1. There ONNX and onnxruntime both count
    floor((d + pads - window) / stride) + 1 windows (tests/test_trusted_shapes.py);
    they part at ceil_mode 1, SAME padding, and a window wider than the input."""
    attributes = node.attributes
    auto_pad = attributes.get_string("auto_pad", "NOTSET")
    kernel = attributes.get_ints("kernel_shape", None)
    x = operands[0] if operands else None
    if (
        attributes.get_int("ceil_mode", 0) != 0
        or auto_pad not in ("NOTSET", "VALID")
        or not kernel
        or x is None
        or x.shape is None
        or len(x.shape) != len(kernel) + 2
    ):
        return False
    rank = len(kernel)
    none = [0] * (2 * rank)
    pads = list(attributes.get_ints("pads", none)) if auto_pad == "NOTSET" else none
    dilations = list(attributes.get_ints("dilations", [1] * rank))
    if len(pads) != 2 * rank or len(dilations) != rank:
        return False
    return all(
        isinstance(d, int) and d + pads[i] + pads[i + rank] >= (k - 1) * dilations[i] + 1
        for i, (d, k) in enumerate(zip(x.shape[2:], kernel, strict=True))
    )


def _einsum_sizes_agree(node: ir.Node, operands: Sequence[Operand | None]) -> bool:
    equation = node.attributes.get_string("equation", "").replace(" ", "")
    terms = equation.partition("->")[0].split(",")
    if "..." in equation or len(terms) != len(operands):
        return False
    counts = collections.Counter("".join(terms))
    sizes: dict[str, int | str] = {}
    for term, known in zip(terms, operands, strict=True):
        if known is None or known.shape is None or len(known.shape) != len(term):
            return False
        for letter, size in zip(term, known.shape, strict=True):
            if counts[letter] == 1:
                continue  # in one place only: no other dim to broadcast it with
            # A symbolic dim agrees with itself: equal sizes, whatever they are.
            if size is None or sizes.setdefault(letter, size) != size:
                return False
    return True


def may_be_seen_wrong(op_type: str) -> bool:
    """Whether :func:`seen_wrong` can say yes for some node of ``op_type`` (so a
    caller may skip working out the operands of every other node)."""
    return op_type in SHAPES_SEEN_WRONG or op_type in SHAPE_DOUBTED_OPS


def doubted(node: ir.Node, operands: Sequence[Operand | None]) -> bool:
    """The cases of trusted ops where ONNX's shapes and onnxruntime's still differ."""
    rule = _DOUBTED.get(node.op_type)
    if rule is None:
        return False
    return rule(node, operands, [None if o is None else o.value for o in operands])


_Values = list[np.ndarray | None]


def _range_doubted(node: ir.Node, operands: Sequence[Operand | None], values: _Values) -> bool:
    # ONNX counts ceil((limit - start) / delta) after subtracting in the
    # element type; onnxruntime subtracts float bounds in double:
    # Range(-0.17, -10.17, -1.0) is 10 elements to ONNX, 11 to onnxruntime.
    if len(values) != 3 or any(v is None or v.size != 1 for v in values):
        return False  # no constant bounds: ONNX claims the rank only
    start, limit = values[0], values[1]
    assert start is not None and limit is not None  # (for mypy)
    if not np.issubdtype(start.dtype, np.integer):
        return True
    span = int(limit.reshape(())) - int(start.reshape(()))
    info = np.iinfo(start.dtype)
    return not (info.min <= span <= info.max and abs(span) < 2**31)


def _slice_doubted(node: ir.Node, operands: Sequence[Operand | None], values: _Values) -> bool:
    # onnxruntime reads an end of INT64_MAX or INT32_MAX with a negative
    # step as "to the first element"; the spec clamps it to the last (empty).
    ends = values[2] if len(values) > 2 else None
    steps = values[4] if len(values) > 4 else None
    if ends is None or steps is None:
        return False  # all steps 1, or steps unknown: ONNX claims no sliced dim
    if not np.issubdtype(ends.dtype, np.integer) or ends.size != steps.size:
        return True
    through_first = np.isin(
        ends.reshape(-1), [v for v in THROUGH_FIRST if v <= np.iinfo(ends.dtype).max]
    )
    return bool(np.any(through_first & (steps.reshape(-1) < 0)))


def _squeeze_doubted(node: ir.Node, operands: Sequence[Operand | None], values: _Values) -> bool:
    # Empty axes: ONNX squeezes nothing, onnxruntime every dim of size 1.
    axes = node.attributes.get("axes")
    if axes is not None and len(axes.as_ints()) == 0:
        return True
    given = values[1] if len(values) > 1 else None
    return given is not None and given.size == 0


def _prelu_doubted(node: ir.Node, operands: Sequence[Operand | None], values: _Values) -> bool:
    # ONNX gives PRelu its input's shape (the spec broadcasts the slope
    # into X); onnxruntime broadcasts both ways: X [1,3,1] with a slope
    # [1,4] is [1,3,4] to it. Trusted only where the slope fits into X.
    shapes = [None if o is None else o.shape for o in operands[:2]]
    return len(shapes) < 2 or not _broadcasts_into(shapes[1], shapes[0])


#: One rule per op of op_facts.SHAPE_DOUBTED_OPS.
_DOUBTED = {
    "Range": _range_doubted,
    "Slice": _slice_doubted,
    "Squeeze": _squeeze_doubted,
    "PRelu": _prelu_doubted,
}
assert set(_DOUBTED) == SHAPE_DOUBTED_OPS


def _broadcasts_into(small: Sequence[Dim] | None, big: Sequence[Dim] | None) -> bool:
    """Whether ``small`` is proven to broadcast into ``big`` leaving it as it is."""
    if small is None or big is None or len(small) > len(big):
        return False
    return all(s == 1 or (s is not None and s == b) for s, b in zip(small[::-1], big[::-1]))
