"""Constants stated plainly: in the ``value`` form, and not behind a CastLike.

Since opset 12 a Constant can hold its tensor in seven attributes; torch
writes ``value_ints`` for the shapes and axes it computes. TVM's Relax
frontend reads only ``value`` ("no value in Constant") and so refuses every
torch export. The other forms are shorthands for one tensor each, so the
rewrite is exact::

    Constant<value_int = 3>             ->  Constant<value = int64 {3}>
    Constant<value_ints = [1, 2]>       ->  Constant<value = int64[2] {1, 2}>
    Constant<value_float = 0.5>         ->  Constant<value = float {0.5}>
    Constant<value_floats = [..]>       ->  Constant<value = float[k] {..}>
    Constant<value_string = "a">        ->  Constant<value = string {"a"}>
    Constant<value_strings = [..]>      ->  Constant<value = string[k] {..}>

``sparse_value`` stays (its dense form could be huge), and so does an
attribute that refers to a function's attribute (``value_ints = @axes``):
its value is known only at the call. The node, its name and its output stay.

torch writes a Conv without bias as ``Expand(CastLike(Constant 0, x), ..)``.
CastLike reads only the element type of its second input, so where that
type is declared the result is a constant; MNN's converter cannot see that
and refuses the Conv ("Conv's bias input should be Constant!")::

    c = Constant<value = float {0}>()          y = Constant<value = float {0}>()
    y = CastLike(c, x)             (x: float)  ->

Only casts that numpy computes exactly as ONNX defines them are folded
(:func:`lowering.irutils.static_fold.fold_node`): between integer, bool and float
types, never float to integer; a Constant or initializer left unread is
removed.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.irutils.dead_code import remove_unread, remove_unread_initializer
from lowering.irutils.naming import name_fresh
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.static_fold import fold_node
from lowering.irutils.walk import model_nodes

# Attribute -> (numpy type, whether it holds a list).
_SHORTHANDS = {
    "value_int": (np.int64, False),
    "value_ints": (np.int64, True),
    "value_float": (np.float32, False),
    "value_floats": (np.float32, True),
    "value_string": (object, False),
    "value_strings": (object, True),
}


class ConstantValueFormPass(ir.passes.InPlacePass):
    """Rewrite each Constant shorthand, in every graph and function, as ``value``,
    and each CastLike of a constant to a declared type as the Constant it is."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model_nodes(model)):
            modified |= _rewrite(node) or _fold_cast_like(node)
        if modified:
            name_fresh(model)
        return ir.passes.PassResult(model, modified=modified)


def _fold_cast_like(node: ir.Node) -> bool:
    if not is_onnx_op(node, "CastLike"):
        return False
    source = node.inputs[0]
    if not fold_node(node):
        return False
    remove_unread(source)
    remove_unread_initializer(source)
    return True


def _rewrite(node: ir.Node) -> bool:
    if not is_onnx_op(node, "Constant") or len(node.attributes) != 1:
        return False
    ((name, attribute),) = node.attributes.items()
    if name not in _SHORTHANDS or attribute.is_ref():
        return False
    numpy_type, is_list = _SHORTHANDS[name]
    value = attribute.value
    tensor: ir.TensorProtocol
    if numpy_type is object:  # onnx_ir holds string attributes as str, tensors as bytes
        strings = [v.encode() if isinstance(v, str) else v for v in (value if is_list else [value])]
        encoded = np.array(strings if is_list else strings[0], dtype=object)
        tensor = ir.StringTensor(encoded, shape=ir.Shape(encoded.shape))
    else:
        tensor = ir.tensor(np.array(list(value) if is_list else value, dtype=numpy_type))
    node.attributes.clear()
    node.attributes["value"] = ir.AttrTensor("value", tensor)
    return True
