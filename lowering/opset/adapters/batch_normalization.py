"""BatchNormalization: inference mode down to 9, and one type for all at 14.

BatchNormalization-14 added training_mode (default 0) and dropped the
training outputs of 9 that inference never produces; with training_mode 0
and only Y used, 14 is 9. BatchNormalization-15 lets scale/bias and
mean/var take other types than X; 14 needs one type (the relabel's type check
enforces it).

    BatchNormalization-15 <training_mode=0> (x, s, b, m, v) -> y
        -->  BatchNormalization-9 (x, s, b, m, v) -> y     (x, s, b, m, v of one type)
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset.registry import ALL, Decline, down, up


@down("BatchNormalization", 9, 14, outputs=ALL)
def inference_only(rw, node: ir.Node) -> None:
    """Inference BatchNormalization: drop training_mode=0."""
    if node.attributes.get_int("training_mode", 0):
        raise Decline("training_mode=1 has no equivalent before opset 14")
    if any(output.uses() or output.is_graph_output() for output in node.outputs[1:]):
        raise Decline("its running statistics are read")
    node.attributes.pop("training_mode", None)


@up("BatchNormalization", 9, 14, outputs=ALL)
def inference_up(rw, node: ir.Node) -> None:
    """BatchNormalization-9 in inference mode (only Y) is 14 with training_mode 0."""
    if len(node.outputs) > 1:
        raise Decline("its training outputs have no equivalent at opset 14")


@down("BatchNormalization", 14, 15, outputs=ALL)
def one_type(rw, node: ir.Node) -> None:
    """Keep: every input has X's type (checked against BatchNormalization-14)."""


@up("BatchNormalization", 14, 15, outputs=ALL)
def more_types(rw, node: ir.Node) -> None:
    """BatchNormalization-15 takes every type combination 14 does."""
