"""Axes as the opset spells them: an attribute before, an input after.

Squeeze, Unsqueeze, Split (its sizes) and ReduceSum take their axes as an
int64 input from opset 13, the other Reduce ops from 18; before that, as an
attribute. A rewrite that emits one of them at the opset of the scope it
writes into asks here::

    opset >= 13:  a = Constant[axes]; Unsqueeze(x, a)
    opset <  13:  Unsqueeze <axes = [...]> (x)
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_node
from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import AXES_INPUT_SINCE


def axes_as_input(op_type: str, opset: int) -> bool:
    """Whether ``op_type`` at ``opset`` takes its axes as an input."""
    since = AXES_INPUT_SINCE.get(op_type)
    if since is None:
        raise ValueError(f"{op_type} takes no axes that moved to an input")
    return opset >= since


@dataclasses.dataclass(frozen=True)
class AxesForm:
    """How nodes of one op take one list of axes at one opset: ``nodes`` to
    add once (the constant, from 13 or 18), then ``inputs`` to append to each
    node's own and ``attributes`` to give it."""

    nodes: list[ir.Node]
    inputs: list[ir.Value]
    attributes: dict[str, object]


def axes_form(op_type: str, axes: list[int], opset: int) -> AxesForm:
    """``axes`` (Split: its sizes) for ``op_type`` nodes at ``opset``, shared by any number of them."""
    name = "split" if op_type == "Split" else "axes"
    if not axes_as_input(op_type, opset):
        return AxesForm([], [], {name: [int(a) for a in axes]})
    constant = constant_node(np.array(axes, np.int64), name)
    return AxesForm([constant], [constant.outputs[0]], {})


def with_axes(
    op_type: str,
    x: ir.Value,
    axes: list[int],
    opset: int,
    attributes: dict[str, object] | None = None,
    num_outputs: int | None = None,
) -> list[ir.Node]:
    """Fresh nodes applying ``op_type`` to ``x`` along ``axes`` (Split: with these
    sizes), spelt for ``opset``; the op is the last node."""
    form = axes_form(op_type, axes, opset)
    op = new_node(
        op_type,
        [x, *form.inputs],
        {**(attributes or {}), **form.attributes},
        num_outputs=num_outputs,
    )
    return [*form.nodes, fresh(op)]
