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
    y     = If(cond) <..>        ->  y' = Identity(b)           the else branch, inlined,
                                     readers of y' read b        and its Identity bypassed

and every node, Constant and initializer that only served the test is
removed. Runtimes that refuse an ``If`` whose branches give different
shapes (tract), or that convert both branches of it (OpenVINO), then run
the copy.

The fold is local: it looks only at the nodes one unrolling made (the
copies, their element reads and the shared constants), and at the branches
it inlines into them. It folds the tests a body makes of its element
(:data:`ELEMENT_TESTS`), on proven facts only:

    Shape(x), Size(x)                     x of static shape (declared, or inferred below)
    Cast, CastLike                        of a constant, exact and not wrapping (one Cast rule)
    Equal, Less(OrEqual), Greater(OrEqual) of constants (numbers and bools)
    Not, And, Or, Xor                     of bool constants
    Add, Sub, Mul                         of integer constants (wrapping, as runtimes do)

each by its rule in the one constant evaluator (:mod:`lowering.irutils.static_values`);
not Range, Concat or Gather, whose constants would make the model grow.
    If(c)                                 c a constant: the taken branch's nodes take its place
    Identity(x)                           bypassed, unless it must stay (:mod:`lowering.irutils.identities`)

A constant is an initializer that is not also a graph input (a caller can
override those), a ``Constant`` node, or what this fold made. A copy's
values lose their declared shapes when unrolled (elements may differ), and
so do the values of a branch inlined into it (what the branch declared, its
symbolic dims included, was said of one copy's branch: side by side, the
copies' ``M`` would claim one size for elements of 1 and 3 rows), so each
copy node left unfolded gets the types and shapes that
:mod:`lowering.irutils.node_inference` proves from its inputs (ONNX's per-node
inference, shapes only for the ops where it agrees with onnxruntime), which
lets ``Shape``/``Size`` further down fold too. onnxscript's whole-model
optimizer stays behind ``--optimize``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Container

import numpy as np
import onnx_ir as ir

from lowering.irutils.dead_code import unread
from lowering.irutils.identities import bypass_identity
from lowering.irutils.naming import fresh
from lowering.irutils.node_inference import Operand, infer_outputs, operand
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import (
    COMPARISON_OPS,
    SHAPE_READING_OPS,
    is_onnx_domain,
    is_onnx_op,
)
from lowering.irutils.scopes import GraphLike
from lowering.irutils.static_values import evaluate_node, small_constant
from lowering.irutils.walk import graph_of, named_subgraphs, nodes_within, subgraphs

Discard = Callable[[GraphLike, list[ir.Node]], None]


def fold_static(
    owner: GraphLike,
    nodes: list[ir.Node],
    opset: int,
    discard: Discard,
    doubted: Container[ir.Value],
) -> list[ir.Node]:
    """Fold what is static among ``nodes`` (in ``owner``, in order); remove what is left dead.

    Returns the nodes that remain, in graph order, inlined branch nodes
    included. Values these nodes read from elsewhere (constants,
    initializers) are removed too when nothing reads them any more.
    ``discard(graph, nodes)`` takes the nodes to remove, already reading
    nothing: onnx_ir's ``Graph.remove`` scans all of a graph's outputs, so
    a caller folding thousands of copies in one graph removes in one batch.
    ``doubted``: the values whose declared shapes are not facts
    (:attr:`lowering.analysis.proven_shapes.Proof.doubted`): a Shape or Size of
    one is not folded, nor is a shape inferred from one.
    """
    mine = set(nodes)
    outside: set[ir.Value] = set()
    pending = collections.deque(nodes)
    kept: list[ir.Node] = []
    graph = graph_of(owner)
    while pending:
        node = pending.popleft()
        if node.graph is not graph:
            continue
        outside.update(v for v in node.inputs if v is not None and v.producer() not in mine)
        if is_onnx_op(node, "If"):
            inlined = _inline_if(owner, node, discard, outside)
            if inlined is not None:
                mine.update(inlined)
                pending.extendleft(reversed(inlined))
                continue
        elif is_onnx_op(node, "Identity"):
            if bypass_identity(node):
                kept.append(node)  # read by nothing now: removed with the dead
                continue
        elif (
            node.op_type in ELEMENT_TESTS
            and is_onnx_domain(node.domain)
            and _reads_facts(node, doubted)
            and fold_node(node)
        ):
            kept.append(node)
            continue
        _infer_shapes(node, opset, doubted)
        kept.append(node)
    kept = _remove_dead(owner, kept, discard, outside)
    _remove_dead_outside(outside, discard)
    return kept


#: What an unrolled copy folds (the module's policy; every other rule is the
#: evaluator's too, but its results may be larger than what it reads).
ELEMENT_TESTS = (
    SHAPE_READING_OPS
    | COMPARISON_OPS
    | frozenset(["Cast", "CastLike", "Not", "And", "Or", "Xor", "Add", "Sub", "Mul"])
)


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
    result = evaluate_node(node, [small_constant(v) for v in node.inputs])
    if result is None:
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
    taken = _taken_branch(node)
    if taken is None:
        return None
    # Planned: from here on the graph changes.
    name, branch = taken
    constants, results = _initializers_as_constants(branch)
    new_nodes = [*constants, *_moved_out(branch)]
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


def _taken_branch(node: ir.Node) -> tuple[str, ir.Graph] | None:
    """The attribute name and graph of the branch If ``node`` takes, where it
    can be put in the If's place (:func:`_inline_if`); else None."""
    cond = small_constant(node.inputs[0]) if node.inputs else None
    if cond is None or cond.dtype != np.bool_ or cond.size != 1:
        return None
    name = "then_branch" if bool(cond.reshape(())) else "else_branch"
    branch = dict(named_subgraphs(node)).get(name)
    if branch is None or len(branch.outputs) != len(node.outputs) or branch.inputs:
        return None
    if any(o.is_graph_output() for o in node.outputs):
        return None
    if not _made_inside(branch):
        return None
    return name, branch


def _made_inside(branch: ir.Graph) -> bool:
    """Whether each of ``branch``'s results is made in it, by a node or as an
    initializer (so that it can be moved out with the branch's nodes)."""
    return all(
        v.graph is branch and (v.producer() is not None or v.is_initializer())
        for v in branch.outputs
    )


def _initializers_as_constants(branch: ir.Graph) -> tuple[list[ir.Node], list[ir.Value]]:
    """A Constant for each of ``branch``'s initializers, read in its place; and
    the branch's results, with those Constants for the initializers."""
    constants = []
    for initializer in list(branch.initializers.values()):
        constant = fresh(new_node("Constant", [], {"value": initializer.const_value}))
        constant.outputs[0].type, constant.outputs[0].shape = initializer.type, initializer.shape
        constants.append(constant)
    results = list(branch.outputs)
    for initializer, constant in zip(list(branch.initializers.values()), constants, strict=True):
        results = [constant.outputs[0] if v is initializer else v for v in results]
        initializer.replace_all_uses_with(constant.outputs[0])
    return constants, results


def _moved_out(branch: ir.Graph) -> list[ir.Node]:
    """Take ``branch``'s nodes out of it, their outputs' shapes forgotten.

    What the branch declared was said of one run of one copy's branch: its
    symbolic dims were the branch's own names, which each copy's inlined
    branch would now declare side by side in one graph (a 1-row element's
    and a 3-row element's ``M``). Like the copy's own values, the moved
    ones keep their types and get again only the shapes proven later.
    """
    moved = list(branch)
    branch.remove(moved)
    branch.outputs.clear()
    for moved_node in moved:
        for value in moved_node.outputs:
            value.shape = None
    return moved


def _reads_facts(node: ir.Node, doubted: Container[ir.Value]) -> bool:
    """Whether what ``node``'s rule reads of its inputs is a fact: not the
    declared shape of a doubted value (the values are, being constants)."""
    if node.op_type not in SHAPE_READING_OPS:
        return True
    return not any(v is not None and v in doubted for v in node.inputs)


def _infer_shapes(node: ir.Node, opset: int, doubted: Container[ir.Value]) -> None:
    """Give ``node``'s untyped, unshaped outputs what :mod:`lowering.irutils.node_inference`
    proves (from its inputs' shapes where they are facts)."""
    if not is_onnx_domain(node.domain) or all(v.shape is not None for v in node.outputs):
        return
    if any(v is not None and v.type is None for v in node.inputs):
        return
    operands = [
        operand(v, small_constant(v))
        if v is None or v not in doubted
        else Operand(v.dtype, None, small_constant(v))
        for v in node.inputs
    ]
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
