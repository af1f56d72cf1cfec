"""Pad-18's optional ``axes`` input.

    Pad-18(x, pads, value)  -->  Pad-13(x, pads, value)

Without ``axes``, ``pads`` covers every axis, as at 13.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset.registry import Decline, down, up


@down("Pad", 13, 18)
def every_axis(rw, node: ir.Node) -> None:
    """Pad without an axes input: the same op."""
    if len(node.inputs) > 3 and node.inputs[3] is not None:
        raise Decline("its axes input is new in Pad-18")
    if len(node.inputs) > 3:
        node.resize_inputs(3)


@up("Pad", 13, 18)
def no_axes(rw, node: ir.Node) -> None:
    """Pad-13 has no axes input: Pad-18 without one pads every axis."""
