"""Fold, inside unrolled copies of a map body, what unrolling made static.

A body is written for every element at once, so it tests at run time what
an element looks like. torch's ``atleast_1d`` asks for its element's rank::

    shape = Shape(e)
    rank  = Size(shape)
    zero  = CastLike(Constant<0>, rank)
    cond  = Equal(rank, zero)
    y     = If(cond) <then: Reshape(e, [1]), else: Identity(e)>

Once unrolled (:mod:`lowering.maps.strategies.unroll`), each copy reads one known
element, a graph input ``b: float[3]`` say, and the test has one answer::

    shape = Shape(b)             ->  Constant<int64[1] {3}>     b's shape is static
    rank  = Size(shape)          ->  Constant<1>                shape's shape is [1]
    zero  = CastLike(0, rank)    ->  Constant<0>
    cond  = Equal(rank, zero)    ->  Constant<false>
    y     = If(cond) <..>        ->  y' = Identity(b)           the else branch, inlined

and every node, Constant and initializer that only served the test is
removed. Runtimes that refuse an ``If`` whose branches give different
shapes (tract), or that convert both branches of it (OpenVINO), then run
the copy.

The fold is local: it looks only at the nodes one unrolling made (the
copies, their element reads and the shared constants), and at the branches
it inlines into them. It folds a closed list of ops, on proven facts only:

    Shape(x), Size(x)                     x of static shape (declared, or inferred below)
    Cast, CastLike                        of a constant, between integer, bool and float types
    Equal, Less(OrEqual), Greater(OrEqual) of constants (numbers and bools)
    Not, And, Or, Xor                     of bool constants
    Add, Sub, Mul                         of integer constants (wrapping, as runtimes do)
    If(c)                                 c a constant: the taken branch's nodes take its place

A constant is an initializer that is not also a graph input (a caller can
override those), a ``Constant`` node, or what this fold made. A copy's
values lose their declared shapes when unrolled (elements may differ), so
each copy node left unfolded gets the types and shapes that
:mod:`lowering.irutils.node_inference` proves from its inputs (ONNX's per-node
inference, shapes only for the ops where it agrees with onnxruntime), which
lets ``Shape``/``Size`` further down fold too. onnxscript's whole-model
optimizer stays behind ``--optimize``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array
from lowering.irutils.dead_code import unread
from lowering.irutils.naming import fresh
from lowering.irutils.node_inference import infer_outputs, operand
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.scopes import GraphLike
from lowering.irutils.static_values import INTEGER_TYPES
from lowering.irutils.walk import nodes_within, subgraphs

# Larger results stay computed at run time: a fold must not make the model grow.
MAX_FOLDED_ELEMENTS = 1024

_INTEGERS = INTEGER_TYPES
_FLOATS = frozenset([ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE])
_NUMBERS = _INTEGERS | _FLOATS | {ir.DataType.BOOL}

Rule = Callable[[ir.Node, list[np.ndarray | None]], np.ndarray | None]
Discard = Callable[[GraphLike, list[ir.Node]], None]


def _remove_now(owner: GraphLike, nodes: list[ir.Node]) -> None:
    owner.remove(nodes)


def fold_static(
    owner: GraphLike, nodes: list[ir.Node], opset: int, discard: Discard = _remove_now
) -> list[ir.Node]:
    """Fold what is static among ``nodes`` (in ``owner``, in order); remove what is left dead.

    Returns the nodes that remain, in graph order, inlined branch nodes
    included. Values these nodes read from elsewhere (constants,
    initializers) are removed too when nothing reads them any more.
    ``discard(graph, nodes)`` takes the nodes to remove, already reading
    nothing: onnx_ir's ``Graph.remove`` scans all of a graph's outputs, so
    a caller folding thousands of copies in one graph removes in one batch.
    """
    mine = set(nodes)
    outside: set[ir.Value] = set()
    pending = collections.deque(nodes)
    kept: list[ir.Node] = []
    while pending:
        node = pending.popleft()
        if node.graph is not owner:
            continue
        outside.update(v for v in node.inputs if v is not None and v.producer() not in mine)
        if is_onnx_op(node, "If"):
            inlined = _inline_if(owner, node, discard, outside)
            if inlined is not None:
                mine.update(inlined)
                pending.extendleft(reversed(inlined))
                continue
        elif is_onnx_domain(node.domain) and fold_node(node):
            kept.append(node)
            continue
        _infer_shapes(node, opset)
        kept.append(node)
    kept = _remove_dead(owner, kept, discard, outside)
    _remove_dead_outside(outside, discard)
    return kept


def release(graph: ir.Graph) -> set[ir.Value]:
    """Make the nodes of a graph no longer in the model stop reading any value.

    A detached graph (a map body after unrolling, an If branch not taken)
    still counts as a reader of the outer values its nodes read, which
    would keep them from ever looking dead. Returns those outer values.
    """
    nodes = list(nodes_within(graph))
    inside = {graph, *(node.graph for node in nodes)}
    released: set[ir.Value] = set()
    for node in nodes:
        released.update(v for v in node.inputs if v is not None and v.graph not in inside)
        for index in range(len(node.inputs)):
            node.replace_input_with(index, None)
    return released


def fold_node(node: ir.Node) -> bool:
    """Turn ``node`` into a Constant holding its value, if its rule can work it out."""
    rule = _RULES.get(node.op_type)
    if rule is None or len(node.outputs) != 1:
        return False
    if any(isinstance(a, ir.Attr) and a.is_ref() for a in node.attributes.values()):
        return False
    values = [_small_constant(v) for v in node.inputs]
    try:
        result = rule(node, values)
    except ValueError:  # operands that do not broadcast, an unknown type: not ours to judge
        return False
    if result is None or result.size > MAX_FOLDED_ELEMENTS:
        return False
    output = node.outputs[0]
    dtype = ir.DataType.from_numpy(result.dtype)
    if output.type is not None and output.dtype not in (dtype, ir.DataType.UNDEFINED):
        return False  # the model says otherwise: leave it to the runtime
    for index in range(len(node.inputs)):
        node.replace_input_with(index, None)
    node.resize_inputs(0)
    node.op_type = "Constant"
    node.domain = ""
    node.version = None
    node.attributes.clear()
    node.attributes["value"] = ir.AttrTensor("value", ir.Tensor(result))
    output.dtype = dtype
    output.shape = ir.Shape(result.shape)
    return True


def _small_constant(value: ir.Value | None) -> np.ndarray | None:
    """The value of a constant of at most MAX_FOLDED_ELEMENTS elements.

    Larger initializers (weights, maybe external) are never read into memory.
    """
    tensor = value.const_value if value is not None else None
    if tensor is not None and tensor.size > MAX_FOLDED_ELEMENTS:
        return None
    array = constant_array(value)
    return array if array is None or array.size <= MAX_FOLDED_ELEMENTS else None


def _static_shape(value: ir.Value | None) -> list[int] | None:
    if value is None or value.shape is None or not value.shape.is_static():
        return None
    return [d for d in value.shape if isinstance(d, int)]  # is_static(): all of them


def _shape(node: ir.Node, values) -> np.ndarray | None:
    dims = _static_shape(node.inputs[0])
    if dims is None:
        return None
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", len(dims))
    return np.array(dims[start:end], np.int64)  # Shape clamps start and end like a slice


def _size(node: ir.Node, values) -> np.ndarray | None:
    dims = _static_shape(node.inputs[0])
    return None if dims is None else np.array(int(np.prod(dims, dtype=np.int64)), np.int64)


def _castable(source: ir.DataType, target: ir.DataType) -> bool:
    """Casts whose result numpy computes exactly as ONNX defines it.

    Float to integer is left out: ONNX leaves out-of-range values and NaN
    undefined. So are strings, bfloat16 and the float8 types.
    """
    exact = _INTEGERS | {ir.DataType.BOOL}
    return (source in exact and target in _NUMBERS) or (source in _FLOATS and target in _FLOATS)


def _cast_to(value: np.ndarray | None, target: ir.DataType) -> np.ndarray | None:
    if value is None or value.dtype == object:
        return None
    source = ir.DataType.from_numpy(value.dtype)
    if not _castable(source, target):
        return None
    return value.astype(target.numpy())


def _cast(node: ir.Node, values) -> np.ndarray | None:
    to = node.attributes.get_int("to")
    if to is None:
        return None
    return _cast_to(values[0], ir.DataType(to))  # (an unknown ``to`` raises ValueError)


def _cast_like(node: ir.Node, values) -> np.ndarray | None:
    like = node.inputs[1]
    if like is None or like.type is None or not isinstance(like.type, ir.TensorType):
        return None
    if like.type.dtype == ir.DataType.UNDEFINED:
        return None
    return _cast_to(values[0], like.type.dtype)


def _of_types(types: frozenset, function: Callable[..., np.ndarray]) -> Rule:
    """A rule applying ``function`` to constant inputs of one dtype among ``types``."""

    def rule(node: ir.Node, values) -> np.ndarray | None:
        if not values or any(v is None or v.dtype == object for v in values):
            return None
        dtypes = {ir.DataType.from_numpy(v.dtype) for v in values}
        if len(dtypes) != 1 or not dtypes <= types:
            return None
        with np.errstate(over="ignore"):  # integer arithmetic wraps in ONNX runtimes too
            return np.asarray(function(*values))

    return rule


_BOOL = frozenset([ir.DataType.BOOL])

_RULES: dict[str, Rule] = {
    "Shape": _shape,
    "Size": _size,
    "Cast": _cast,
    "CastLike": _cast_like,
    "Equal": _of_types(_NUMBERS, np.equal),
    "Less": _of_types(_NUMBERS, np.less),
    "LessOrEqual": _of_types(_NUMBERS, np.less_equal),
    "Greater": _of_types(_NUMBERS, np.greater),
    "GreaterOrEqual": _of_types(_NUMBERS, np.greater_equal),
    "Not": _of_types(_BOOL, np.logical_not),
    "And": _of_types(_BOOL, np.logical_and),
    "Or": _of_types(_BOOL, np.logical_or),
    "Xor": _of_types(_BOOL, np.logical_xor),
    "Add": _of_types(_INTEGERS, np.add),
    "Sub": _of_types(_INTEGERS, np.subtract),
    "Mul": _of_types(_INTEGERS, np.multiply),
}


def _inline_if(
    owner: GraphLike, node: ir.Node, discard: Discard, outside: set[ir.Value]
) -> list[ir.Node] | None:
    """Put the branch an If on a constant takes in the If's place; returns its nodes.

    ::

        y = If(Constant<true>) <then_branch = () => (r) { .. r = .. }, else_branch = ..>
                                     |
                                     v
        .. r = ..                   (the then branch's nodes; readers of y read r)

    Declined (None) when the condition is not a known bool, when a branch
    output is not made inside the branch, or when an If output is a graph
    output (which the If's caller tracks).
    """
    cond = _small_constant(node.inputs[0]) if node.inputs else None
    if cond is None or cond.dtype != np.bool_ or cond.size != 1:
        return None
    name = "then_branch" if bool(cond.reshape(())) else "else_branch"
    attr = node.attributes.get(name)
    if not isinstance(attr, ir.Attr) or attr.is_ref() or attr.type != ir.AttributeType.GRAPH:
        return None
    branch = attr.as_graph()
    if len(branch.outputs) != len(node.outputs) or branch.inputs:
        return None
    if any(o.is_graph_output() for o in node.outputs):
        return None
    if any(
        v.graph is not branch or (v.producer() is None and not v.is_initializer())
        for v in branch.outputs
    ):
        return None
    # Planned: from here on the graph changes.
    constants = []
    for initializer in list(branch.initializers.values()):
        constant = fresh(new_node("Constant", [], {"value": initializer.const_value}))
        constant.outputs[0].type, constant.outputs[0].shape = initializer.type, initializer.shape
        constants.append(constant)
    results = list(branch.outputs)
    for initializer, constant in zip(list(branch.initializers.values()), constants, strict=True):
        results = [constant.outputs[0] if v is initializer else v for v in results]
        initializer.replace_all_uses_with(constant.outputs[0])
    moved = list(branch)
    branch.remove(moved)
    branch.outputs.clear()
    new_nodes = [*constants, *moved]
    if new_nodes:
        owner.insert_before(node, new_nodes)
    for output, result in zip(node.outputs, results, strict=True):
        if result.type is None and output.type is not None:
            result.type = output.type
        if result.shape is None and output.shape is not None:
            result.shape = output.shape
        output.replace_all_uses_with(result)
    for index in range(len(node.inputs)):
        node.replace_input_with(index, None)
    for other in node.attributes.values():
        if (
            isinstance(other, ir.Attr)
            and other.type == ir.AttributeType.GRAPH
            and other.name != name
        ):
            outside |= release(other.as_graph())
    node.attributes.clear()
    discard(owner, [node])
    return new_nodes


def _infer_shapes(node: ir.Node, opset: int) -> None:
    """Give ``node``'s untyped, unshaped outputs what :mod:`lowering.irutils.node_inference` proves."""
    if not is_onnx_domain(node.domain) or all(v.shape is not None for v in node.outputs):
        return
    if any(v is not None and v.type is None for v in node.inputs):
        return
    operands = [operand(v, _small_constant(v)) for v in node.inputs]
    for output, proven in zip(node.outputs, infer_outputs(node, operands, opset), strict=True):
        if output.type is None and proven.dtype is not None:
            output.type = ir.TensorType(proven.dtype)
        if output.shape is None and proven.shape is not None:
            output.shape = ir.Shape(proven.shape)


def _remove_dead(
    owner: GraphLike, nodes: list[ir.Node], discard: Discard, outside: set[ir.Value]
) -> list[ir.Node]:
    """Remove, from last to first, the nodes among ``nodes`` whose outputs nothing reads."""
    dead: list[ir.Node] = []
    for node in reversed(nodes):
        if not unread(node):
            continue
        for index in range(len(node.inputs)):
            node.replace_input_with(index, None)
        for graph in subgraphs(node):
            outside |= release(graph)
        dead.append(node)
    if dead:
        discard(owner, dead)
    gone = set(dead)
    return [node for node in nodes if node not in gone]


def _remove_dead_outside(values: set[ir.Value], discard: Discard) -> None:
    """Remove the Constants and initializers among ``values`` that nothing reads any more.

    An initializer that is also a graph input stays: it is part of the
    model's interface.
    """
    for value in values:
        if value.uses() or value.is_graph_output() or value.is_graph_input():
            continue
        producer = value.producer()
        if producer is not None and is_onnx_op(producer, "Constant"):
            if producer.graph is not None:
                discard(producer.graph, [producer])
        elif (
            value.is_initializer()
            and value.name is not None
            and value.graph is not None
            and value.graph.initializers.get(value.name) is value
        ):
            del value.graph.initializers[value.name]
