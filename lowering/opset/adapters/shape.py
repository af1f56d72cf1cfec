"""Shape-15's start/end, and Reshape-14's allowzero.

    Shape-15 <start=s, end=e> (x)  -->  Slice(Shape-13(x), [s], [e], [0])

Slice clamps a negative or out-of-range bound to [0, rank] exactly as
Shape-15 does.

``allowzero=1`` only differs from 0 where the shape holds a 0: then the
output has that 0, where Reshape-13 copies the input's dim. So it is
dropped where no entry can be 0 (a constant without one; the output's or the
data's static dims say so, since a Reshape keeps the count of elements), or
where each entry that may be 0 is the data's own dim at the same position
(``Concat(Shape(x)[0:1], [-1], Shape(x)[2:3])``: a 0 there is what
Reshape-13 copies). Otherwise, since a 0 in the shape means the data is
empty, the two cases are told apart at run time::

    If(Size(x) == 0)
      then: ConstantOfShape(Where(s == -1, 0, s))   # the empty result, 0s kept
      else: Reshape-13(x, s)                        # no 0 in s: the same result

(With elements, a 0 in ``s`` makes Reshape-14 fail; a -1 beside a 0 is
invalid either way, and with no 0 an empty result's -1 is 0.)
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

_INT64_MAX = np.iinfo(np.int64).max


@down("Shape", 13, 15)
def shape_slice(rw, node: ir.Node) -> None:
    """Shape start/end -> Shape + Slice."""
    start = node.attributes.pop("start", None)
    end = node.attributes.pop("end", None)
    first = start.as_int() if start is not None else 0
    if first == 0 and end is None:
        return
    last = end.as_int() if end is not None else _INT64_MAX
    starts = rw.const(np.array([first], np.int64))
    ends = rw.const(np.array([last], np.int64))
    axes = rw.const(np.array([0], np.int64))
    rw.wrap_output(node.outputs[0], "Slice", extra_inputs=[starts, ends, axes])


@up("Shape", 13, 15)
def whole_shape(rw, node: ir.Node) -> None:
    """Shape-15 without start/end is Shape-13."""


@down("Reshape", 13, 14)
def no_allowzero(rw, node: ir.Node) -> None:
    """Drop allowzero where a 0 in the shape copies a 0, else decide on Size(x) == 0."""
    attr = node.attributes.pop("allowzero", None)
    if attr is None or attr.as_int() == 0:
        return
    shape = rw.constant(node.inputs[1])
    if shape is not None and not (shape == 0).any():
        return
    dims = rw.static_shape(node.outputs[0])
    data = rw.static_shape(node.inputs[0])
    if (dims is not None and 0 not in dims) or (data is not None and 0 not in data):
        return
    if _zeros_copy_themselves(rw, node.inputs[0], node.inputs[1]):
        return
    _empty_case_apart(rw, node, attr)


def _real(rw, value: ir.Value) -> ir.Value:
    return rw.sandbox.real.get(value, value)


def _entries(rw, value: ir.Value | None, depth: int = 0) -> list | None:
    """Where each entry of a 1-D int64 ``value`` comes from: an int, or (v, j) for
    dim j of v; None where that is not known."""
    if value is None or depth > 8:
        return None
    constant = rw.constant(value)
    if constant is not None:
        return [int(v) for v in constant.reshape(-1)] if constant.ndim <= 1 else None
    node = _real(rw, value).producer()
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    op = node.op_type
    if op in ("Identity", "Cast") and (op == "Identity" or node.attributes.get_int("to") == 7):
        return _entries(rw, node.inputs[0], depth + 1)
    if op == "Shape":
        source = node.inputs[0]
        rank = rw.rank(source)
        if source is None or rank is None:
            return None
        start = node.attributes.get_int("start", 0)
        end = node.attributes.get_int("end", rank)
        return [(source, j) for j in range(rank)[start:end]]
    if op == "Concat" and node.attributes.get_int("axis") in (0, -1):
        parts = [_entries(rw, v, depth + 1) for v in node.inputs]
        if any(p is None for p in parts):
            return None
        return [e for p in parts if p is not None for e in p]
    if op == "Gather" and node.attributes.get_int("axis", 0) == 0:
        gathered = _entries(rw, node.inputs[0], depth + 1)
        indices = rw.constant(node.inputs[1])
        if gathered is None or indices is None or indices.ndim > 1:
            return None
        try:
            return [gathered[int(i)] for i in indices.reshape(-1)]
        except IndexError:
            return None
    if op in ("Unsqueeze", "Squeeze", "Reshape"):
        # Of a scalar or a 1-D value: the entries are the same, in order.
        return _entries(rw, node.inputs[0], depth + 1) if rw.rank(node.outputs[0]) == 1 else None
    return None


def _zeros_copy_themselves(rw, data: ir.Value | None, shape: ir.Value | None) -> bool:
    """Whether every entry of ``shape`` that may be 0 is ``data``'s dim at its position."""
    entries = _entries(rw, shape)
    if data is None or entries is None:
        return False
    real = _real(rw, data)
    for position, entry in enumerate(entries):
        if isinstance(entry, int):
            if entry == 0:
                return False
            continue
        source, dim = entry
        static = source.shape[dim] if source.shape is not None else None
        if isinstance(static, int) and static != 0:
            continue
        if _real(rw, source) is not real or dim != position:
            return False
    return True


# ConstantOfShape's types (its value attribute's), at every opset from 11.
_FILLABLE = frozenset(
    [
        *(ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.BOOL),
        *(ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64),
        *(ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64),
    ]
)


def _empty_case_apart(rw, node: ir.Node, attr: ir.Attr) -> None:
    """The If on Size(x) == 0 (see the module docstring)."""
    x, s = node.inputs[0], node.inputs[1]
    dtype = x.dtype if x is not None else None
    if x is None or s is None or dtype not in _FILLABLE:
        node.attributes["allowzero"] = attr
        raise Decline("allowzero=1 with a shape that may hold a 0, on a type ConstantOfShape lacks")

    def int64(made: ir.Node, dtype=ir.DataType.INT64) -> ir.Value:
        made.outputs[0].dtype = dtype
        return made.outputs[0]

    size = int64(rw.op("Size", [x]))
    empty = int64(rw.op("Equal", [size, rw.const(np.array(0, np.int64))]), ir.DataType.BOOL)

    def branch(nodes: list[ir.Node], name: str) -> ir.Graph:
        result = nodes[-1].outputs[0]
        result.type = ir.TensorType(dtype)
        return ir.Graph([], [result], nodes=nodes, name=name)

    def const(array: np.ndarray) -> ir.Node:
        made = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(array))])
        made.outputs[0].dtype = ir.DataType.from_numpy(array.dtype)
        return made

    minus_one, zero = const(np.array(-1, np.int64)), const(np.array(0, np.int64))
    unknown = ir.Node("", "Equal", [s, minus_one.outputs[0]])
    unknown.outputs[0].dtype = ir.DataType.BOOL
    dims = ir.Node("", "Where", [unknown.outputs[0], zero.outputs[0], s])
    dims.outputs[0].dtype = ir.DataType.INT64
    fill = ir.tensor(np.zeros([1], dtype.numpy()))
    result = ir.Node("", "ConstantOfShape", [dims.outputs[0]], [ir.AttrTensor("value", fill)])
    then_branch = branch([minus_one, zero, unknown, dims, result], "empty")
    else_branch = branch([ir.Node("", "Reshape", [x, s])], "with_elements")
    choice = rw.op(
        "If",
        [empty],
        {"then_branch": then_branch, "else_branch": else_branch},
        version=rw.target,
    )
    rw.reroute(node.outputs[0], choice.outputs[0])
    rw.remove(node)


@up("Reshape", 13, 14)
def copy_zeros(rw, node: ir.Node) -> None:
    """Reshape-14 without allowzero is Reshape-13."""
