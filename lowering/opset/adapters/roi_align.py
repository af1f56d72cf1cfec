"""RoiAlign-16's coordinate_transformation_mode.

RoiAlign-10 behaves as ``output_half_pixel``; RoiAlign-16 defaults to
``half_pixel``, which also no longer forces each roi to be at least one pixel.
So going up says ``output_half_pixel`` explicitly, and going down needs it::

    RoiAlign-10 (x, rois, i)  <-->  RoiAlign-16 <coordinate_transformation_mode="output_half_pixel"> (x, rois, i)
    RoiAlign-16 (x, rois, i)  -->   blocked: needs opset 16
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

_NAME = "coordinate_transformation_mode"


@down("RoiAlign", 10, 16)
def output_half_pixel_down(rw, node: ir.Node) -> None:
    """Drop coordinate_transformation_mode="output_half_pixel"."""
    attr = node.attributes.get(_NAME)
    mode = attr.as_string() if attr is not None else "half_pixel"
    if mode != "output_half_pixel":
        raise Decline(f"{_NAME}={mode!r} has no equivalent in RoiAlign-10")
    del node.attributes[_NAME]


@up("RoiAlign", 10, 16)
def output_half_pixel_up(rw, node: ir.Node) -> None:
    """Say coordinate_transformation_mode="output_half_pixel", RoiAlign-10's behaviour."""
    node.attributes[_NAME] = ir.AttrString(_NAME, "output_half_pixel")
