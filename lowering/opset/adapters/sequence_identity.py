"""An Identity of a sequence below opset 14, as a Loop of no trip.

Identity takes a sequence from opset 14 only, and Loop carries one from 13.
TorchScript returns a list from an If branch through an Identity of a value
of the enclosing graph, which no rewrite may bypass (a branch output must be
made in the branch), so ``--target-opset 13`` found it blocking. A Loop that
makes no trip returns its carried value as it came in::

    y = Identity-14(s)   -->   y = Loop-13(0, true, s) <body (i, c, t) => (c, t)>

(an explicit condition: ``onnx.reference`` runs no trip without one, as
docs/decisions.md says). Below 13 no op copies a sequence: it stays a blocker.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import Decline, expansion

_LOOP = 13


@expansion("Identity")
def zero_trip_loop(rw, node: ir.Node) -> None:
    """Identity of a sequence -> a Loop of no trip carrying it."""
    source = node.inputs[0] if node.inputs else None
    if source is None or not isinstance(source.type, ir.SequenceType):
        raise Decline("only an Identity of a sequence has a form below 14")
    if rw.target < _LOOP:
        raise Decline(f"a Loop carries a sequence from opset {_LOOP} only")
    trip = ir.Value(name="trip", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))
    keep_going = ir.Value(name="cond", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))
    carried = ir.Value(name="carried", type=source.type, shape=source.shape)
    body = ir.Graph([trip, keep_going, carried], [keep_going, carried], nodes=[], name="no_trip")
    zero = rw.const(np.array(0, np.int64))
    true = rw.const(np.array(True))
    loop = rw.op("Loop", [zero, true, source], {"body": body}, version=_LOOP)
    rw.reroute(node.outputs[0], loop.outputs[0])
    rw.remove(node)
