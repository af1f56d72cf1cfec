"""Dropout-12 moved ``ratio`` to an input and added ``training_mode``.

In inference (no training_mode, or a constant false) Dropout passes its
input through at every version, so only the ratio moves::

    Dropout-12(x, Constant r)  <-->  Dropout-10 <ratio=r> (x)
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import Decline, down, up


@down("Dropout", 10, 12)
def ratio_attribute(rw, node: ir.Node) -> None:
    """Inference Dropout: constant ratio input -> attribute."""
    training = node.inputs[2] if len(node.inputs) > 2 else None
    if training is not None:
        value = rw.constant(training)
        if value is None or value.size != 1 or bool(value.reshape(-1)[0]):
            raise Decline("training_mode is not a constant false")
    ratio = node.inputs[1] if len(node.inputs) > 1 else None
    value = rw.constant(ratio) if ratio is not None else None
    if ratio is not None and value is None:
        raise Decline("its ratio is computed, and Dropout-10 needs a constant")
    node.attributes.pop("seed", None)
    if value is not None:
        node.attributes["ratio"] = ir.AttrFloat32("ratio", float(value.reshape(-1)[0]))
    node.resize_inputs(1)


@up("Dropout", 10, 12)
def ratio_input(rw, node: ir.Node) -> None:
    """Dropout-10's ratio attribute -> a constant input (inference either way)."""
    attr = node.attributes.pop("ratio", None)
    if attr is None:
        return
    node.resize_inputs(2)
    node.replace_input_with(1, rw.const(np.array(attr.as_float(), np.float32)))
