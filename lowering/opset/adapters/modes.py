"""Attribute values a newer version added: fine going down when not used.

(Pad-19's ``wrap`` is written out by :mod:`lowering.opset.adapters.pad`.)

Resize-19 <coordinate_transformation_mode != half_pixel_symmetric> --> Resize-18
ScatterND-18 <reduction not max/min>                                --> ScatterND-16
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

_NEW_VALUES = {
    (("Resize",), 18, 19): ("coordinate_transformation_mode", {"half_pixel_symmetric"}),
    (("ScatterND", "ScatterElements"), 16, 18): ("reduction", {"max", "min"}),
}


def _make(name: str, new_values: set[str]):
    def check_mode(rw, node: ir.Node) -> None:
        attr = node.attributes.get(name)
        if attr is not None and attr.as_string() in new_values:
            raise Decline(f"{name}={attr.as_string()!r} is new in this version")

    def nothing(rw, node: ir.Node) -> None:
        """Every value the older version takes means the same in the newer one."""

    check_mode.__doc__ = f"Keep: {name} is not one of the new values {sorted(new_values)}."
    return check_mode, nothing


for (_ops, _old, _new), (_name, _values) in _NEW_VALUES.items():
    _down, _up = _make(_name, _values)
    down(_ops, _old, _new)(_down)
    up(_ops, _old, _new)(_up)
