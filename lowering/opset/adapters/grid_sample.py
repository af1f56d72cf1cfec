"""GridSample-20 renamed its modes and took N-D inputs.

    GridSample-20 <mode="linear"> (4-D x)  <-->  GridSample-16 <mode="bilinear">

The defaults (bilinear at 16, linear at 20) are the same interpolation.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

_TO_16 = {"linear": "bilinear", "cubic": "bicubic", "nearest": "nearest"}
_TO_20 = {value: key for key, value in _TO_16.items()}


@down("GridSample", 16, 20)
def modes_16(rw, node: ir.Node) -> None:
    """Mode linear/cubic -> bilinear/bicubic, on 4-D inputs."""
    if rw.rank(node.inputs[0]) != 4:
        raise Decline(
            "GridSample-16 takes 4-D inputs only, and this one's rank is not known to be 4"
        )
    attr = node.attributes.get("mode")
    mode = attr.as_string() if attr is not None else "linear"
    if mode not in _TO_16:
        raise Decline(f"mode={mode!r} has no equivalent in GridSample-16")
    node.attributes["mode"] = ir.AttrString("mode", _TO_16[mode])


@up("GridSample", 16, 20)
def modes_20(rw, node: ir.Node) -> None:
    """Mode bilinear/bicubic -> linear/cubic."""
    attr = node.attributes.get("mode")
    mode = attr.as_string() if attr is not None else "bilinear"
    node.attributes["mode"] = ir.AttrString("mode", _TO_20[mode])
