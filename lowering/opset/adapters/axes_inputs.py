"""Axes (and Split's sizes) moved from an attribute to an input.

Squeeze, Unsqueeze, Split and ReduceSum at 13, the other Reduce ops at 18
(Split-13's step down is :mod:`lowering.opset.adapters.split`'s, which
calls this one for constant sizes)::

    ReduceMean-18(x, Constant[1, 2])  <-->  ReduceMean-13 <axes=[1, 2]> (x)

Going down needs the input to be a constant no caller can override; going
up makes the attribute a Constant. ``noop_with_empty_axes`` (in the newer
versions only) matters only when there are no axes: with 1 it makes the op
an Identity, which is what the older version gets; except that ReduceL1,
ReduceL2, ReduceLogSum and ReduceSumSquare still apply their elementwise
part (``ReduceSumSquare(x)`` is ``x * x``, in onnxruntime and ONNX's
reference alike), so these decline and ONNX's function body, a ReduceSum of
that part, is expanded instead. ReduceLogSumExp's part, ``Log(Exp(x))``, is
``x``: onnxruntime computes ``max + log(sum(exp(x - max)))``, exactly ``x``
for one element, where the body's ``Log(Exp(x))`` overflows (float 100 ->
inf) and rounds (int64 2 -> 1.9999999999999998 -> 1), so it is an Identity
too.

A Squeeze without axes removes every dim of size 1, at any version; going
down, where its input's shape is static the axes are written out all the
same, since some readers of Squeeze-11 (tract) insist on the attribute.
Like the lowering's own folding, this takes the declared shape at its word:
a model whose run-time shape contradicts it is not one ONNX describes::

    Squeeze-13(x: float[1,3,1])  -->  Squeeze-11 <axes=[0, 2]> (x)
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.irutils.op_facts import REDUCE_OPS
from lowering.opset.registry import ALL, Decline, down, up

_REDUCE_18 = sorted(op for op in REDUCE_OPS if op != "ReduceSum")
# Reduce ops that are an elementwise op and a sum: without axes and with
# noop_with_empty_axes=1 they apply the elementwise part alone.
_ELEMENTWISE_PART = {
    "ReduceL1": "Abs",
    "ReduceL2": "Sqrt(x * x)",
    "ReduceLogSum": "Log",
    "ReduceSumSquare": "x * x",
}


def _name(node: ir.Node) -> str:
    return "split" if node.op_type == "Split" else "axes"


@down(["Squeeze", "Unsqueeze", "ReduceSum"], 11, 13, outputs=ALL)
@down(_REDUCE_18, 13, 18)
def to_attribute(rw, node: ir.Node) -> None:
    """Constant axes input -> attribute."""
    name = _name(node)
    reduce = node.op_type.startswith("Reduce")
    values = _constant_axes(rw, node, name, reduce)
    if reduce and values is None and node.attributes.get_int("noop_with_empty_axes", 0) != 0:
        _as_identity(rw, node)
        return
    node.attributes.pop("noop_with_empty_axes", None)
    if values is None and node.op_type == "Squeeze":
        values = _ones(node.inputs[0])
    if values is not None:
        node.attributes[name] = ir.AttrInt64s(name, [int(v) for v in values.reshape(-1)])
    node.resize_inputs(1)


def _constant_axes(rw, node: ir.Node, name: str, reduce: bool) -> np.ndarray | None:
    """The axes input's value; None where there is none (or, for a Reduce op, it is empty)."""
    operand = node.inputs[1] if len(node.inputs) > 1 else None
    if operand is None:
        return None
    values = rw.constant(operand)
    if values is None:
        raise Decline(f"its {name} is computed, and the older version needs a constant")
    if values.size == 0:
        if not reduce:
            raise Decline(f"its {name} input is empty")
        return None
    return values


def _as_identity(rw, node: ir.Node) -> None:
    """A Reduce op without axes and with noop_with_empty_axes=1: an Identity."""
    if node.op_type in _ELEMENTWISE_PART:
        # Not an Identity: onnxruntime and ONNX's reference return Abs(x),
        # Log(x), x * x...; ONNX's function body says so with older ops.
        raise Decline(f"noop_with_empty_axes=1 still applies its {_ELEMENTWISE_PART[node.op_type]}")
    identity = rw.op("Identity", [node.inputs[0]])
    rw.reroute(node.outputs[0], identity.outputs[0])
    rw.remove(node)


def _ones(x: ir.Value | None) -> np.ndarray | None:
    """The axes of size 1 of a static shape; None where the shape is not static or has none."""
    dims = None if x is None or x.shape is None else list(x.shape)
    if dims is None or not all(isinstance(d, int) for d in dims):
        return None
    ones = [axis for axis, d in enumerate(dims) if d == 1]
    return np.array(ones, np.int64) if ones else None


@up(["Squeeze", "Unsqueeze", "Split", "ReduceSum"], 11, 13, outputs=ALL)
@up(_REDUCE_18, 13, 18)
def to_input(rw, node: ir.Node) -> None:
    """Axes attribute -> constant input."""
    name = _name(node)
    attr = node.attributes.pop(name, None)
    if attr is None:
        return
    constant = rw.const(np.array(attr.as_ints(), np.int64))
    node.resize_inputs(2)
    node.replace_input_with(1, constant)
