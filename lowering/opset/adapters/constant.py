"""Constant-12's value_float(s)/value_int(s)/value_string(s) -> a value tensor at 11.

Constant <value_ints=[3, 2]>  -->  Constant <value=int64[2] {3, 2}>
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

_KINDS = {
    "value_int": np.int64,
    "value_ints": np.int64,
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_string": np.object_,
    "value_strings": np.object_,
}


@down("Constant", 11, 12)
def value_tensor(rw, node: ir.Node) -> None:
    """value_int(s)/value_float(s)/value_string(s) -> value tensor."""
    names = [n for n in node.attributes if n in _KINDS]
    if not names:
        return
    (name,) = names
    attr = node.attributes[name]
    if attr.is_ref():
        raise Decline(f"its {name} refers to a function attribute")
    value = attr.value
    tensor: ir.TensorProtocol
    if name.startswith("value_string"):
        # A string tensor is an ir.StringTensor: ir.tensor of an object array
        # makes a Tensor that cannot be serialized.
        strings = [value] if name == "value_string" else list(value)
        data = [v.encode() if isinstance(v, str) else v for v in strings]
        shape = ir.Shape([] if name == "value_string" else [len(data)])
        tensor = ir.StringTensor(data, shape=shape)
    else:
        tensor = ir.tensor(np.array(value, _KINDS[name]))
    del node.attributes[name]
    node.attributes["value"] = ir.AttrTensor("value", tensor)


@up("Constant", 11, 12)
def nothing(rw, node: ir.Node) -> None:
    """Constant-12 takes every attribute Constant-11 does."""
