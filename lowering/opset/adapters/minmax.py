"""Max and Min on integers below 12, where Max-8/Min-8 take floats only.

    Max(a, b, c)  -->  m = Where(Greater(b, a), b, a); Where(Greater(c, m), c, m)

Greater/Less and Where take every numeric type from opset 9 and broadcast as
Max does, so the result is the same tensor.
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
