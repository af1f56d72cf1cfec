"""Shape-15's start/end, and Reshape-14's allowzero.

    Shape-15 <start=s, end=e> (x)  -->  Slice(Shape-13(x), [s], [e], [0])

Slice clamps a negative or out-of-range bound to [0, rank] exactly as
Shape-15 does.

``allowzero=1`` only differs from 0 where the shape holds a 0: then the
output has that 0, where Reshape-13 copies the input's dim. So it is
dropped where the shape is a constant without a 0, or where each entry
that may be 0 is the data's own dim at the same position
(``Concat(Shape(x)[0:1], [-1], Shape(x)[2:3])``: a 0 there is what
Reshape-13 copies, and Reshape-13 then fails where Reshape-14 does).

Otherwise a 0 in the shape means the result is empty: with elements,
Reshape-14 fails. No Reshape-13 is written that could see that 0:
onnxruntime type-checks every node when it loads the model, each branch of
an If too, run or not, and to Reshape-13 a constant 0 past the data's rank
is "Invalid position of 0" (it copies a dim that is not there); a 0 it
can copy would give a result where Reshape-14 fails. Every form below
fails where Reshape-14 fails. A constant shape ``s`` holding a 0::

    Expand(fill, s + Gather([0], Size(x)))
                     '- 0 where x is empty; out of range (fails) where it
                        has elements

A computed one, where the data has elements (its static dims, or the
output's, have no 0)::

    Reshape-13(x, s + Gather([0], count(s == 0)))
                      '- 0 where s has no 0 (Reshape-13 is Reshape-14 there);
                         out of range (fails) where it has one

and where the data may be empty, told apart at run time::

    If(Size(x) == 0)
      then: Expand(fill, Where(s == -1, 0, s) + Gather([0], |m - (p != 0)|))
              m = count(s == -1), p = ReduceProd(Where(s == -1, 1, s)):
              an empty result needs a 0 and no -1 (m = 0, p = 0) or one -1
              beside no 0 (m = 1, p != 0); else the index is 1 or more: fails
      else: Reshape-13(x, s + Gather([0], count(s == 0)))    # as above

(``fill`` is a scalar of x's type: Expand takes every type Reshape takes,
strings and bool too, where onnxruntime has its kernel; Size(x) is
ReduceProd(Shape(x)), as onnxruntime's Size-1 takes no float16; each
count and product reduces the vector with its identity in front, never an
empty one, which onnxruntime 1.12 to 1.16 refuse with keepdims 0. A Gather
from [0] is the one guard: 0 at index 0, a failure past it. A 0 beside a
-1 is invalid in Reshape-14, which leaves that -1 undetermined, and ONNX's
shape inference refuses it: a constant one is declined, a computed one
fails.)
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset import schemas
from lowering.opset.registry import Decline, down, up
from lowering.opset.schemas import type_string
from lowering.runtimes.ort_kernels import unsupported

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
    """Drop allowzero where no 0 can reach Reshape-13 or each copies a 0, else
    build the result without one (see the module docstring)."""
    attr = node.attributes.pop("allowzero", None)
    if attr is None or attr.as_int() == 0:
        return
    shape = rw.constant(node.inputs[1])
    if shape is not None and not (shape == 0).any():
        return
    if shape is None and _zeros_copy_themselves(rw, node.inputs[0], node.inputs[1]):
        return
    _without_zeros(rw, node, attr, shape)


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
    rule = _ENTRY_RULES.get(node.op_type)
    return rule(rw, node, depth + 1) if rule is not None else None


def _identity_entries(rw, node: ir.Node, depth: int) -> list | None:
    return _entries(rw, node.inputs[0], depth)


def _cast_entries(rw, node: ir.Node, depth: int) -> list | None:
    """A Cast to int64 (7) keeps the entries."""
    return _entries(rw, node.inputs[0], depth) if node.attributes.get_int("to") == 7 else None


def _shape_entries(rw, node: ir.Node, depth: int) -> list | None:
    source = node.inputs[0]
    rank = rw.rank(source)
    if source is None or rank is None:
        return None
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", rank)
    return [(source, j) for j in range(rank)[start:end]]


def _concat_entries(rw, node: ir.Node, depth: int) -> list | None:
    if node.attributes.get_int("axis") not in (0, -1):
        return None
    parts = [_entries(rw, v, depth) for v in node.inputs]
    if any(p is None for p in parts):
        return None
    return [e for p in parts if p is not None for e in p]


def _gather_entries(rw, node: ir.Node, depth: int) -> list | None:
    if node.attributes.get_int("axis", 0) != 0:
        return None
    gathered = _entries(rw, node.inputs[0], depth)
    indices = rw.constant(node.inputs[1])
    if gathered is None or indices is None or indices.ndim > 1:
        return None
    try:
        return [gathered[int(i)] for i in indices.reshape(-1)]
    except IndexError:
        return None


def _same_entries(rw, node: ir.Node, depth: int) -> list | None:
    """Of a scalar or a 1-D value: the entries are the same, in order."""
    return _entries(rw, node.inputs[0], depth) if rw.rank(node.outputs[0]) == 1 else None


# The ops whose output's entries are known from their inputs' entries.
_ENTRY_RULES = {
    "Identity": _identity_entries,
    "Cast": _cast_entries,
    "Shape": _shape_entries,
    "Concat": _concat_entries,
    "Gather": _gather_entries,
    "Unsqueeze": _same_entries,
    "Squeeze": _same_entries,
    "Reshape": _same_entries,
}


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


def _without_zeros(rw, node: ir.Node, attr: ir.Attr, shape: np.ndarray | None) -> None:
    """The forms of the module docstring: ``shape`` is the constant shape, if it is one."""
    x, s = node.inputs[0], node.inputs[1]
    int64, cast = ir.DataType.INT64, int(ir.DataType.INT64)

    def made(op: str, inputs: list, of=int64, **attributes) -> ir.Value:
        return _typed(rw.op(op, inputs, attributes), of)

    def reduced(op: str, vector: ir.Value, identity: int) -> ir.Value:
        """``op`` of ``[identity, *vector]``: no empty axis is reduced (a scalar's shape,
        a shape to a scalar), which onnxruntime 1.12 to 1.16 refuse with keepdims 0."""
        first = rw.const(np.array([identity], np.int64))
        return made(op, [made("Concat", [first, vector], axis=0)], keepdims=0)

    def zero_count() -> ir.Value:
        zeros = made("Equal", [s, rw.const(np.array(0, np.int64))], _BOOL)
        return reduced("ReduceSum", made("Cast", [zeros], to=cast), 0)

    dims_out, data = rw.static_shape(node.outputs[0]), rw.static_shape(x)
    has_elements = any(d is not None and 0 not in d for d in (dims_out, data))
    if shape is None and has_elements and s is not None:
        fails = made("Gather", [rw.const(np.array([0], np.int64)), zero_count()])
        node.replace_input_with(1, made("Add", [s, fails]))
        return
    problem = _form_problem(rw, x, s, shape)
    if problem is not None:
        node.attributes["allowzero"] = attr
        raise Decline(f"allowzero=1 with a shape that may hold a 0: {problem}")
    assert x is not None and s is not None and x.dtype is not None, "declined above"
    dtype = x.dtype
    fill = _zero(dtype)
    # Size(x), on every type (onnxruntime's Size-1 takes no float16).
    size = reduced("ReduceProd", made("Shape", [x]), 1)
    if shape is not None:
        # The shape holds a 0 (the adapter returns before, where it has none)
        # and no -1 (declined above).
        fails = made("Gather", [rw.const(np.array([0], np.int64)), size])
        dims = made("Add", [rw.const(shape.astype(np.int64)), fails])
        filler = made("Constant", [], dtype, value=fill)
        rw.reroute(node.outputs[0], made("Expand", [filler, dims], dtype))
        rw.remove(node)
        return
    # What the branches read, worked out before the If (none of it fails).
    zeros = zero_count()
    minus_one = made("Equal", [s, rw.const(np.array(-1, np.int64))], _BOOL)
    dims = made("Where", [minus_one, rw.const(np.array(0, np.int64)), s])
    known = made("Where", [minus_one, rw.const(np.array(1, np.int64)), s])
    product = reduced("ReduceProd", known, 1)
    nonzero = made("Not", [made("Equal", [product, rw.const(np.array(0, np.int64))], _BOOL)], _BOOL)
    unknowns = reduced("ReduceSum", made("Cast", [minus_one], to=cast), 0)
    empty_index = made("Abs", [made("Sub", [unknowns, made("Cast", [nonzero], to=cast)])])
    empty = made("Equal", [size, rw.const(np.array(0, np.int64))], _BOOL)

    def inner(op: str, inputs: list, of=int64, **attributes) -> ir.Node:
        """A node of a branch (the plan converts only the sandbox's own nodes:
        these are written at the target, where each means what it does at 14)."""
        attrs = [ir.convenience.convert_attribute(k, v) for k, v in attributes.items()]
        written = ir.Node("", op, inputs, attrs)
        _typed(written, of)
        return written

    def branch(nodes: list[ir.Node], name: str) -> ir.Graph:
        result = nodes[-1].outputs[0]
        result.type = ir.TensorType(dtype)
        return ir.Graph([], [result], nodes=nodes, name=name)

    def guarded(dims: ir.Value, index: ir.Value) -> list[ir.Node]:
        """``dims + Gather([0], index)``: ``dims`` where ``index`` is 0, else a failure."""
        zero = inner("Constant", [], value=ir.tensor(np.array([0], np.int64)))
        fails = inner("Gather", [zero.outputs[0], index])
        return [zero, fails, inner("Add", [dims, fails.outputs[0]])]

    fills = inner("Constant", [], dtype, value=fill)
    empty_dims = guarded(dims, empty_index)
    expanded = inner("Expand", [fills.outputs[0], empty_dims[-1].outputs[0]], dtype)
    then_branch = branch([fills, *empty_dims, expanded], "empty")
    target = guarded(s, zeros)
    reshaped = inner("Reshape", [x, target[-1].outputs[0]], dtype)
    else_branch = branch([*target, reshaped], "with_elements")
    choice = rw.op(
        "If",
        [empty],
        {"then_branch": then_branch, "else_branch": else_branch},
        version=rw.target,
    )
    rw.reroute(node.outputs[0], _typed(choice, dtype))
    rw.remove(node)


_BOOL = ir.DataType.BOOL


def _typed(made: ir.Node, dtype: ir.DataType = ir.DataType.INT64) -> ir.Value:
    """``made``'s output, of element type ``dtype``."""
    made.outputs[0].dtype = dtype
    return made.outputs[0]


def _form_problem(
    rw, x: ir.Value | None, s: ir.Value | None, shape: np.ndarray | None
) -> str | None:
    """Why no form without allowzero can be built, or None."""
    if x is None or s is None:
        return "no data or shape"
    problem = _fill_problem(rw, x)
    if problem is None and shape is not None and (shape == -1).any():
        return "its constant shape holds a 0 beside a -1 (invalid in Reshape-14)"
    return problem


def _zero(dtype: ir.DataType) -> ir.TensorProtocol:
    """A scalar of ``dtype`` to Expand: its value is never read (the result is empty)."""
    if dtype == ir.DataType.STRING:
        return ir.StringTensor(np.array(b"", object), shape=ir.Shape([]))
    return ir.tensor(np.zeros((), dtype.numpy()))


def _fill_problem(rw, x: ir.Value) -> str | None:
    """Why the empty case cannot be built for ``x``'s type: Expand must take it at
    the target, by ONNX's schema and in onnxruntime (which runs the original
    Reshape on every type)."""
    name = type_string(x)
    if name is None or x.dtype is None:
        return "the data's type is unknown"
    schema = schemas.schema("Expand", rw.target)
    assert schema is not None, "Expand exists from opset 8"
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    if name not in allowed["T"]:
        return f"Expand-{schema.since_version} takes no {name}"
    return unsupported("Expand", x.dtype, rw.target)


@up("Reshape", 13, 14)
def copy_zeros(rw, node: ir.Node) -> None:
    """Reshape-14 without allowzero is Reshape-13."""
