"""Nodes built the way ``ir.node`` builds them, without its cost.

``ir.node`` infers each attribute's type by checking the value against
onnx_ir's runtime protocols, which costs ~0.3 ms a node on Python 3.11: with
10,000 maps in a model, a third of the pass went there. The values rewrites
pass are almost always Python ints, floats, strings, lists of one of those,
tensors and graphs, whose types are known from their class; anything else is
left to onnx_ir's own conversion, so the result is the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx_ir as ir


def _all(values, kinds) -> bool:
    return all(isinstance(v, kinds) for v in values)


def attribute(name: str, value) -> ir.Attr:
    """``value`` as attribute ``name``, typed as ``ir.node`` types it.

    numpy scalars count as the Python numbers they hold (``ir.node`` refuses
    them). Plain Python values are told by their class first: an isinstance
    check against onnx_ir's protocol classes costs microseconds.
    """
    kind = type(value)
    if kind is int or kind is bool:
        return ir.AttrInt64(name, int(value))
    if kind is float:
        return ir.AttrFloat32(name, value)
    if kind is str:
        return ir.AttrString(name, value)
    if kind is list or kind is tuple:
        if value and _all(value, bool | int | np.integer):
            return ir.AttrInt64s(name, [int(v) for v in value])
        if value and _all(value, float | np.floating):
            return ir.AttrFloat32s(name, [float(v) for v in value])
        if value and _all(value, str):
            return ir.AttrStrings(name, list(value))
        return ir.convenience.convert_attribute(name, value)
    if isinstance(value, np.integer):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, np.floating):
        return ir.AttrFloat32(name, float(value))
    if isinstance(value, ir.Attr):
        if value.name != name:
            raise ValueError(f"Attribute name {value.name!r} does not match provided name {name!r}")
        return value
    if isinstance(value, ir.Tensor | ir.StringTensor):
        return ir.AttrTensor(name, value)
    if isinstance(value, ir.Graph):
        return ir.AttrGraph(name, value)
    return ir.convenience.convert_attribute(name, value)


def new_node(
    op_type: str,
    inputs: Sequence[ir.Value | None],
    attributes: Mapping[str, object] | None = None,
    *,
    domain: str = "",
    num_outputs: int | None = None,
    outputs: Sequence[ir.Value] | None = None,
    name: str | None = None,
    doc_string: str | None = None,
    metadata_props: dict[str, str] | None = None,
) -> ir.Node:
    """The node ``ir.node(op_type, inputs, attributes, ...)`` makes."""
    attrs = [attribute(key, value) for key, value in (attributes or {}).items()]
    return ir.Node(
        domain,
        op_type,
        inputs,
        attrs,
        num_outputs=num_outputs,
        outputs=outputs,
        name=name,
        doc_string=doc_string,
        metadata_props=metadata_props,
    )
