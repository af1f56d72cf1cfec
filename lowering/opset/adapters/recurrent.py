"""LSTM, GRU and RNN-14's layout.

layout=0 (the default) is the layout of 7. With layout=1 (batch first), the
older op sees transposed inputs and its outputs are transposed back::

    X [b,s,i] --Transpose(1,0,2)--> op-7 --Y [s,d,b,h]--Transpose(2,0,1,3)--> [b,s,d,h]
    initial_h/c [b,d,h] --Transpose(1,0,2)-->     --Y_h/Y_c [d,b,h]--Transpose(1,0,2)-->
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset.registry import ALL, down, up

_OPS = ["LSTM", "GRU", "RNN"]
_STATE_INPUTS = {"LSTM": (5, 6), "GRU": (5,), "RNN": (5,)}


@down(_OPS, 7, 14, outputs=ALL)
def sequence_first(rw, node: ir.Node) -> None:
    """layout: drop 0; 1 -> Transposes around the op."""
    attr = node.attributes.pop("layout", None)
    if attr is None or attr.as_int() == 0:
        return
    for index in (0, *_STATE_INPUTS[node.op_type]):
        value = node.inputs[index] if index < len(node.inputs) else None
        if value is not None:
            moved = rw.op("Transpose", [value], {"perm": [1, 0, 2]})
            moved.outputs[0].type = value.type
            node.replace_input_with(index, moved.outputs[0])
    for index, output in enumerate(node.outputs):
        if output.uses() or output.is_graph_output() or output in rw.sandbox.graph.outputs:
            perm = [2, 0, 1, 3] if index == 0 else [1, 0, 2]
            rw.wrap_output(output, "Transpose", {"perm": perm})


@up(_OPS, 7, 14, outputs=ALL)
def layout_default(rw, node: ir.Node) -> None:
    """The 14 op without layout is the 7 op."""
