"""Resize-18's new attributes, and Resize-11's required roi and scales.

    Resize-18 <antialias=0, keep_aspect_ratio_policy="stretch", no axes>  -->  Resize-13
    Resize-13(x, , , sizes)  -->  Resize-11(x, roi=[], scales=[], sizes)
    Resize-11 <not tf_half_pixel_for_nn>  -->  Resize-13 (the same node)

At 11, ``roi`` and ``scales`` are required inputs; an empty tensor stands
for "not given" (roi only acts under tf_crop_and_resize, and scales must be
empty when sizes is given). Going up, Resize-13 reads an empty roi and
scales as Resize-11 does; the one thing 13 removed is the
``tf_half_pixel_for_nn`` coordinate mode, which blocks.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

_DEFAULTS_18 = {"antialias": 0, "keep_aspect_ratio_policy": "stretch"}


@down("Resize", 13, 18)
def default_policies(rw, node: ir.Node) -> None:
    """Drop antialias=0, keep_aspect_ratio_policy=stretch (no axes)."""
    if "axes" in node.attributes:
        raise Decline("its axes attribute is new in Resize-18")
    for name, default in _DEFAULTS_18.items():
        attr = node.attributes.get(name)
        if attr is not None and attr.value != default:
            raise Decline(f"{name}={attr.value!r} is new in Resize-18")
    for name in _DEFAULTS_18:
        node.attributes.pop(name, None)


@up("Resize", 13, 18)
def same_resize(rw, node: ir.Node) -> None:
    """Resize-18's new attributes are absent: their defaults are Resize-13."""


@down("Resize", 11, 13)
def required_inputs(rw, node: ir.Node) -> None:
    """Empty roi and scales where Resize-13 leaves them out."""
    inputs = list(node.inputs) + [None] * (4 - len(node.inputs))
    empty = np.zeros((0,), np.float32)
    for index in (1, 2):
        if inputs[index] is None:
            inputs[index] = rw.const(empty)
    if len(node.inputs) < 3:
        node.resize_inputs(3)
    for index in (1, 2):
        if node.inputs[index] is not inputs[index]:
            node.replace_input_with(index, inputs[index])


@up("Resize", 11, 13)
def same_resize_11(rw, node: ir.Node) -> None:
    """Resize-11 is Resize-13 but for the tf_half_pixel_for_nn mode 13 removed."""
    attr = node.attributes.get("coordinate_transformation_mode")
    if attr is not None and attr.value == "tf_half_pixel_for_nn":
        raise Decline("coordinate_transformation_mode tf_half_pixel_for_nn is not in Resize-13")
