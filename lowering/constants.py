"""Reading constant values without touching the model.

``onnx_ir.convenience.get_const_tensor`` names the tensor it returns, which
writes through to the proto a model was read from. The rewrites here only
look, so they read constants with :func:`constant_array`.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.scopes import is_onnx_op

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
