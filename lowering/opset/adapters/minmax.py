"""Max, Min and Clip on integers below 12, where Max-8/Min-8/Clip-11 take floats only.

    Max(a, b, c)  -->  m = Where(Greater(b, a), b, a); Where(Greater(c, m), c, m)
    Clip(x, lo, hi)  -->  m = Where(Less(x, lo), lo, x); Where(Greater(m, hi), hi, m)

Greater/Less and Where take every numeric type from opset 9 and broadcast as
Max does, so the result is the same tensor. Clip-12 is min(max(x, lo), hi)
(numpy's clip, also when lo > hi), which the two selections compute in that
order; an absent bound is no selection. torch writes an int64 Clip for the
source indices of bicubic and nearest-exact interpolation.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset import schemas
from lowering.opset.registry import Decline, down, up


@down(["Max", "Min"], 8, 12)
def compare_and_select(rw, node: ir.Node) -> None:
    """Max/Min on integers -> Greater/Less + Where (floats stay as they are)."""
    old = schemas.schema(node.op_type, 8)
    assert old is not None, "Max-8 and Min-8 exist"
    if schemas.types_not_taken(node, old) is None:
        return
    inputs = [value for value in node.inputs if value is not None]
    if len(inputs) != len(node.inputs) or not inputs:
        raise Decline("it has a missing input")
    compare = "Greater" if node.op_type == "Max" else "Less"
    result = inputs[0]
    for value in inputs[1:]:
        test = rw.op(compare, [value, result], version=12)
        test.outputs[0].dtype = ir.DataType.BOOL
        pick = rw.op("Where", [test.outputs[0], value, result], version=12)
        pick.outputs[0].type = value.type
        result = pick.outputs[0]
    if result is inputs[0]:
        result = rw.op("Identity", [result], version=12).outputs[0]
        result.type = inputs[0].type
    rw.reroute(node.outputs[0], result)
    rw.remove(node)


@up(["Max", "Min"], 8, 12)
def same_on_floats(rw, node: ir.Node) -> None:
    """Max-12/Min-12 take every type the 8 versions do, with the same meaning."""


@down("Clip", 11, 12)
def clip_by_selection(rw, node: ir.Node) -> None:
    """Clip-12 on integers -> Less/Greater + Where (floats stay as they are)."""
    old = schemas.schema("Clip", 11)
    assert old is not None, "Clip-11 exists"
    if schemas.types_not_taken(node, old) is None:
        return
    x = node.inputs[0]
    if x is None:
        raise Decline("it has no input")
    bounds = list(node.inputs[1:3]) + [None] * (3 - len(node.inputs))
    result = x
    for bound, compare in zip(bounds[:2], ("Less", "Greater")):
        if bound is None:
            continue
        test = rw.op(compare, [result, bound], version=12)
        test.outputs[0].dtype = ir.DataType.BOOL
        pick = rw.op("Where", [test.outputs[0], bound, result], version=12)
        pick.outputs[0].type = x.type
        pick.outputs[0].shape = x.shape
        result = pick.outputs[0]
    if result is x:
        result = rw.op("Identity", [x], version=12).outputs[0]
        result.type = x.type
        result.shape = x.shape
    rw.reroute(node.outputs[0], result)
    rw.remove(node)


@up("Clip", 11, 12)
def clip_same_on_floats(rw, node: ir.Node) -> None:
    """Clip-12 takes every type Clip-11 does, with the same meaning."""
