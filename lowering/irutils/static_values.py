"""Values known before the model runs: constants, and a few ops applied to them.

Exporters rarely write a SequenceInsert position or a Loop trip count as a
bare constant. paddle2onnx writes ``Squeeze(Constant int64[1])``; others
reshape, cast or pass the constant through Identity. :func:`static_array`
computes such values with numpy, through an allowlist of ops whose result
is fixed by their inputs and attributes::

    Constant / initializer (not a graph input)   -> its tensor
    Identity(s)                                  -> s
    Cast<to>(s)          integer s, integer to   -> s, if every value fits in ``to``
    Squeeze(s[, axes])   axes input or attribute -> s without those size-1 axes
    Unsqueeze(s, axes)   axes input or attribute -> s with new size-1 axes
    Reshape(s, shape)    shape constant          -> s reshaped (0 copies, -1 infers)

Anything else, or a malformed use of these (an axis out of range, a squeezed
axis of size other than 1, a Cast that would wrap), is not static: the value
is left to the runtime, whose error then stays in place. An initializer that
is also a graph input is never static, since a caller may feed another value.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array
from lowering.irutils.op_facts import is_onnx_domain

INTEGER_TYPES = frozenset(
    [
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
    ]
)


def static_array(value: ir.Value | None) -> np.ndarray | None:
    """The value's contents when they are known without running the model."""
    constant = constant_array(value)
    if constant is not None or value is None:
        return constant
    node = value.producer()
    if node is None or not is_onnx_domain(node.domain):
        return None
    rule = _RULES.get(node.op_type)
    if rule is None or not node.inputs or node.inputs[0] is None:
        return None
    source = static_array(node.inputs[0])
    if source is None:
        return None
    try:
        return rule(node, source)
    except (ValueError, IndexError, TypeError):
        return None  # a malformed use: leave it to the runtime


def _identity(node: ir.Node, source: np.ndarray) -> np.ndarray | None:
    return source


def _cast(node: ir.Node, source: np.ndarray) -> np.ndarray | None:
    target = ir.DataType(node.attributes.get_int("to", 0))
    if target not in INTEGER_TYPES or source.dtype.kind not in "iu":
        return None
    dtype = target.numpy()
    info = np.iinfo(dtype)
    if source.size and (source.min() < info.min or source.max() > info.max):
        return None  # would wrap: runtimes need not agree
    return source.astype(dtype)


def _axes(node: ir.Node) -> list[int] | None:
    """The axes of a Squeeze or Unsqueeze, or None if it has none.

    Raises ValueError where they are given but not static.
    """
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = static_array(node.inputs[1])
        if axes is None or axes.ndim > 1:
            raise ValueError("axes not static")
        return [int(a) for a in axes.reshape(-1)]
    attr = node.attributes.get("axes")
    if attr is None:
        return None
    return list(attr.as_ints())


def _normalized(axes: list[int], rank: int) -> list[int]:
    result = [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in result) or len(set(result)) != len(result):
        raise ValueError("bad axes")
    return result


def _squeeze(node: ir.Node, source: np.ndarray) -> np.ndarray | None:
    axes = _axes(node)
    if axes is None:
        return source.reshape([d for d in source.shape if d != 1])
    axes = _normalized(axes, source.ndim)
    if any(source.shape[a] != 1 for a in axes):
        return None
    return source.reshape([d for i, d in enumerate(source.shape) if i not in axes])


def _unsqueeze(node: ir.Node, source: np.ndarray) -> np.ndarray | None:
    axes = _axes(node)
    if not axes:
        return None
    rank = source.ndim + len(axes)
    new = _normalized(axes, rank)
    dims = iter(source.shape)
    return source.reshape([1 if i in new else next(dims) for i in range(rank)])


def _reshape(node: ir.Node, source: np.ndarray) -> np.ndarray | None:
    if len(node.inputs) < 2:
        return None
    shape = static_array(node.inputs[1])
    if shape is None or shape.ndim != 1 or shape.dtype != np.int64:
        return None
    allow_zero = node.attributes.get_int("allowzero", 0)
    dims = []
    for i, d in enumerate(int(d) for d in shape):
        if d == 0 and not allow_zero:
            d = source.shape[i]  # IndexError past the input's rank: not static
        dims.append(d)
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        return None
    return source.reshape(dims)


_RULES: dict[str, Callable[[ir.Node, np.ndarray], np.ndarray | None]] = {
    "Identity": _identity,
    "Cast": _cast,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Reshape": _reshape,
}


#: What :func:`static_array` folds through: the ops a folded value's chain may hold.
FOLDABLE_OPS = frozenset({"Constant", *_RULES})
