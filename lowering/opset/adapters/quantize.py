"""QuantizeLinear and DequantizeLinear-13's axis, on a per-tensor scale.

At 10 the scale is a scalar; 13 added per-axis scales and ``axis`` to say
which axis. With a scalar scale the axis plays no part::

    DequantizeLinear-13 <axis=a> (x, scalar s, z)  -->  DequantizeLinear-10 (x, s, z)
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

_OPS = ["QuantizeLinear", "DequantizeLinear"]


@down(_OPS, 10, 13)
def per_tensor(rw, node: ir.Node) -> None:
    """Drop axis when the scale is a scalar."""
    if rw.rank(node.inputs[1]) != 0:
        raise Decline("its scale is not known to be a scalar (per-axis needs opset 13)")
    node.attributes.pop("axis", None)


@up(_OPS, 10, 13)
def scalar_scale(rw, node: ir.Node) -> None:
    """The 10 op's scale is a scalar, which the 13 op reads the same whatever its axis."""
