"""Dropout-12 moved ``ratio`` to an input and added ``training_mode``.

In inference (no training_mode, or a constant false) Dropout passes its
input through at every version, so only the ratio moves::

    Dropout-12(x, Constant r)  <-->  Dropout-10 <ratio=r> (x)

The mask is not the same: in inference onnxruntime's Dropout-12 (and
later) returns an all-true mask, as ONNX's reference does, but its
Dropout-10 an all-false one. Going down, a mask that is read becomes the
constant it is at 12::

    y, m = Dropout-12(x)  -->  y = Dropout-10(x); m = ConstantOfShape <value=true> (Shape(x))

Going up, what Dropout-10's mask means is the runtime's (onnxruntime: all
false, ONNX's reference: all true), so a node whose mask is read is refused.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import ALL, Decline, down, up


@down("Dropout", 10, 12, outputs=ALL)
def ratio_attribute(rw, node: ir.Node) -> None:
    """Inference Dropout: constant ratio input -> attribute; a read mask -> a constant true."""
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
    if len(node.outputs) > 1:
        mask = node.outputs[1]
        if rw.is_read(mask):
            shape = rw.op("Shape", [node.inputs[0]])
            shape.outputs[0].dtype = ir.DataType.INT64
            true = rw.op(
                "ConstantOfShape", [shape.outputs[0]], {"value": ir.tensor(np.array([True]))}
            )
            rw.reroute(mask, true.outputs[0])
            node.resize_outputs(1)


@up("Dropout", 10, 12, outputs=ALL)
def ratio_input(rw, node: ir.Node) -> None:
    """Dropout-10's ratio attribute -> a constant input (inference either way)."""
    if len(node.outputs) > 1 and rw.is_read(node.outputs[1]):
        raise Decline(
            "its mask is read, and Dropout-10's mask in inference is left to the runtime "
            "(onnxruntime: all false; Dropout-12's: all true)"
        )
    attr = node.attributes.pop("ratio", None)
    if attr is None:
        return
    node.resize_inputs(2)
    node.replace_input_with(1, rw.const(np.array(attr.as_float(), np.float32)))
