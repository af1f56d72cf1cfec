"""Constant values: read without touching the model, made, and cleaned up.

``onnx_ir.convenience.get_const_tensor`` names the tensor it returns, which
writes through to the proto a model was read from. The rewrites here only
look, so they read constants with :func:`constant_array`. They make the
constants they need with :func:`constant_node`, and drop the ones their
rewrites leave unread with :func:`lowering.irutils.dead_code.remove_unread`.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.irutils.naming import fresh
from lowering.irutils.op_facts import is_onnx_op

_LIST_ATTRIBUTES = {"value_ints": np.int64, "value_floats": np.float32}
_SCALAR_ATTRIBUTES = {"value_int": np.int64, "value_float": np.float32}


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """The contents of an initializer or Constant output no caller can override."""
    if value is None or value.is_graph_input():
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    node = value.producer()
    if node is None or not is_onnx_op(node, "Constant"):
        return None
    for name, attr in node.attributes.items():
        if not isinstance(attr, ir.Attr) or attr.is_ref():
            return None
        if name == "value":
            return attr.as_tensor().numpy()
        if name in _SCALAR_ATTRIBUTES:
            return np.array(attr.value, _SCALAR_ATTRIBUTES[name])
        if name in _LIST_ATTRIBUTES:
            return np.array(attr.value, _LIST_ATTRIBUTES[name])
    return None


def constant_node(value: np.ndarray, stem: str | None = None) -> ir.Node:
    """A fresh Constant node holding ``value`` (numbers), its output typed."""
    # ir.Node with a typed attribute: ir.node's and ir.tensor's conversions
    # check protocols, and cost ~0.5 ms a node.
    node = fresh(ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.Tensor(value))]))
    output = fresh(node.outputs[0], stem)
    output.dtype = ir.DataType.from_numpy(value.dtype)
    output.shape = ir.Shape(value.shape)
    return node
