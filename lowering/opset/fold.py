"""Read a value that a short chain of shape ops computes from constants.

torch.onnx writes axes and shapes as small computations rather than
constants: ``ReduceMean(x, Reshape(Constant[1], Constant[-1]))``,
``Reshape(x, Concat(Constant[2], Constant[8]))``. Going below the opset where
such an input became an attribute needs its value. This evaluates, with
numpy, only the ops whose meaning on small integer tensors is plain
(Constant, Identity, Cast, Reshape, Concat, Squeeze, Unsqueeze, Gather,
integer Add, Sub, Mul and Range, and Shape of a tensor whose shape is
static), and only from constants that no
caller can override. Anything else is "not a constant".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array
from lowering.irutils.op_facts import is_onnx_domain

_MAX_DEPTH = 8
_MAX_ELEMENTS = 1024


def fold(value: ir.Value | None, depth: int = 0) -> np.ndarray | None:
    """The value of ``value`` if it is a constant or computed from constants, else None."""
    if value is None:
        return None
    direct = constant_array(value)
    if direct is not None:
        return direct
    node = value.producer()
    if node is None or depth > _MAX_DEPTH or not is_onnx_domain(node.domain):
        return None
    rule = _RULES.get(node.op_type)
    if rule is None or len(node.outputs) != 1:
        return None
    if node.op_type == "Shape":
        return _shape(node)
    inputs = [fold(v, depth + 1) if v is not None else None for v in node.inputs]
    if any(v is None for v in inputs[:1]) or any(
        v is None and original is not None for v, original in zip(inputs, node.inputs)
    ):
        return None
    try:
        result = rule(node, inputs)
    except (ValueError, IndexError, TypeError):
        return None
    if result is None or result.size > _MAX_ELEMENTS:
        return None
    return np.asarray(result)


def _ints(node: ir.Node, name: str) -> list[int] | None:
    attr = node.attributes.get(name)
    return list(attr.as_ints()) if attr is not None else None


def _axes(node: ir.Node, inputs) -> list[int] | None:
    if len(inputs) > 1 and inputs[1] is not None:
        return [int(a) for a in inputs[1].reshape(-1)]
    return _ints(node, "axes")


def _reshape(node: ir.Node, inputs) -> np.ndarray:
    data, shape = inputs[0], [int(s) for s in inputs[1].reshape(-1)]
    if node.attributes.get_int("allowzero", 0) == 0:
        shape = [data.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return data.reshape(shape)


def _cast(node: ir.Node, inputs) -> np.ndarray | None:
    target = ir.DataType(node.attributes.get_int("to", 0))
    if not (target.is_integer() and inputs[0].dtype.kind in "iu"):
        return None
    return inputs[0].astype(target.numpy())


def _squeeze(node: ir.Node, inputs) -> np.ndarray:
    axes = _axes(node, inputs)
    return np.squeeze(inputs[0], axis=tuple(axes) if axes else None)


def _unsqueeze(node: ir.Node, inputs) -> np.ndarray | None:
    axes = _axes(node, inputs)
    if axes is None:  # malformed: no axes input or attribute; left unfolded
        return None
    result = inputs[0]
    rank = result.ndim + len(axes)
    for axis in sorted(a + rank if a < 0 else a for a in axes):
        result = np.expand_dims(result, axis)
    return result


def _shape(node: ir.Node) -> np.ndarray | None:
    x = node.inputs[0]
    if x is None or x.shape is None or not all(isinstance(d, int) for d in x.shape):
        return None
    dims = np.array(list(x.shape), np.int64)
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", len(dims))
    return dims[start:end]


def _integers(function: Callable) -> Callable:
    """An elementwise rule applied to integer tensors only (no rounding questions)."""

    def rule(node: ir.Node, inputs) -> np.ndarray | None:
        if not all(v.dtype.kind in "iu" for v in inputs):
            return None
        return function(*inputs)

    return rule


_RULES: dict[str, Callable] = {
    "Add": _integers(np.add),
    "Sub": _integers(np.subtract),
    "Mul": _integers(np.multiply),
    "Range": _integers(
        lambda start, limit, delta: np.arange(
            start.item(), limit.item(), delta.item(), dtype=start.dtype
        )
    ),
    "Identity": lambda node, inputs: inputs[0],
    "Cast": _cast,
    "Reshape": _reshape,
    "Concat": lambda node, inputs: np.concatenate(inputs, axis=node.attributes.get_int("axis")),
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Gather": lambda node, inputs: np.take(
        inputs[0], inputs[1], axis=node.attributes.get_int("axis", 0)
    ),
    "Shape": lambda node, inputs: _shape(node),
}

FOLDED_OPS = frozenset(_RULES)
