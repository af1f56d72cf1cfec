"""Writing the forms :mod:`lowering.loops.accumulators` planned for a Loop's accumulators.

The Loop is written anew (its carried values and scan outputs change in
number); its other carried values and scan outputs, and their names, stay.

``stack`` (uniform elements, appended every iteration)::

    acc_0 = SequenceEmpty()                       ys, .. = Loop(M, cond, ..)
    acc_n, .. = Loop(M, cond, .., acc_0)            body (i, c, ..):
      body (i, c, .., acc):                 ->        +-------------------+
        +---------------------------+                 | ... y = f(i) ...  |
        | ... y = f(i) ...          |                 +-------------------+
        | acc' = SequenceInsert(acc, y)               => (c', .., y)     y: [n, *shape]
        +---------------------------+
        => (c', .., acc')                         z = reader of ys  (read_stack_in_readers)
    z = reader(acc_n)

with ``ys`` reversed (Slice with step -1) for a prepend.

``concat`` (ragged elements, or appends under an If)::

    acc_0 = SequenceEmpty()                       whole_0 = ConstantOfShape([d_0, .., 0, ..])
    acc_n, .. = Loop(M, cond, .., acc_0)          whole_n, .., lengths_n =
      body (i, c, .., acc):                           Loop(M, cond, .., whole_0, .., [])
        +---------------------------+      ->       body (i, c, .., whole, .., lengths):
        | acc' = SequenceInsert(acc, y)               +------------------------------------+
        +---------------------------+                 | whole'   = Concat<axis>(whole, y)   |
        => (c', .., acc')                             | lengths' = Concat(lengths,          |
                                                      |             Shape(y)[axis:axis+1]) |
                                                      +------------------------------------+
    z = reader(acc_n)                             z = reader of whole_n, lengths_n (concat_reads)

(y Unsqueezed along ``axis`` first for a concat with new_axis; ``lengths`` only
where a reader needs it.) Under an If, the inserting branch writes those
Concats and the other branch passes ``whole`` and ``lengths`` on.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.irutils.axes import with_axes
from lowering.irutils.constants import constant_node
from lowering.irutils.dead_code import remove_unread
from lowering.irutils.naming import adopt_name, fresh
from lowering.irutils.nodes import new_node
from lowering.loops.accumulators import Accumulator, Bound, runs_once
from lowering.loops.concat_reads import lengths_count, nonempty, read_concat_in_readers
from lowering.maps.plan import typed
from lowering.maps.strategies.uniform import count_of, read_stack_in_readers

_INT64_VECTOR = (ir.TensorType(ir.DataType.INT64), ir.Shape([None]))


def rewrite_loop(loop: ir.Node, accumulators: list[Accumulator], opset: int) -> list[ir.Node]:
    """Rewrite ``accumulators`` of ``loop`` (the module docstring); returns the nodes written."""
    graph = loop.graph
    assert graph is not None, "the pass rewrites loops in a graph"
    body = loop.attributes["body"].as_graph()
    by_k = {a.k: a for a in accumulators}
    carried = len(loop.inputs) - 2
    once = runs_once(loop)
    before: list[ir.Node] = []  # the initial values
    inputs: list[ir.Value | None] = [loop.inputs[0], loop.inputs[1]]
    body_inputs = [body.inputs[0], body.inputs[1]]
    body_outputs = [body.outputs[0]]
    kept: list[tuple[ir.Value, int]] = []  # an old loop output, its index in the new loop
    wholes: dict[int, int] = {}  # accumulator k: the new index of its concat
    lengths: dict[int, tuple[ir.Value, ir.Value, ir.Value]] = {}  # k: initial, inner, next
    scans: list[tuple[Accumulator, ir.Value]] = []
    for k in range(carried):
        accumulator = by_k.get(k)
        if accumulator is None:
            kept.append((loop.outputs[k], len(inputs) - 2))
            inputs.append(loop.inputs[2 + k])
            body_inputs.append(body.inputs[2 + k])
            body_outputs.append(body.outputs[1 + k])
        elif accumulator.form == "stack":
            scans.append((accumulator, _scanned(accumulator, body)))
        else:
            initial, grown, counted = _concat_in_body(accumulator, body, opset, once)
            before += initial
            wholes[k] = len(inputs) - 2
            inputs.append(initial[-1].outputs[0])
            body_inputs.append(body.inputs[2 + k])
            body_outputs.append(grown)
            if counted is not None:
                lengths[k] = counted
    counts: dict[int, int] = {}
    for k, (no_lengths, inner, grown) in lengths.items():
        counts[k] = len(inputs) - 2
        inputs.append(no_lengths)
        body_inputs.append(inner)
        body_outputs.append(grown)
        producer = no_lengths.producer()
        assert producer is not None, "_concat_in_body makes the empty lengths"
        empty_shape = producer.inputs[0]
        maker = empty_shape.producer() if empty_shape is not None else None
        assert maker is not None, "a Constant gives the empty lengths' shape"
        before += [maker, producer]
    new_carried = len(inputs) - 2
    old_scans = list(body.outputs[1 + carried :])
    kept += [(loop.outputs[carried + i], new_carried + i) for i in range(len(old_scans))]
    body_outputs += [*old_scans, *(value for _, value in scans)]
    body.inputs.clear()
    body.inputs.extend(body_inputs)
    body.outputs.clear()
    body.outputs.extend(body_outputs)

    new_loop = new_node(
        "Loop",
        inputs,
        {"body": body},
        num_outputs=new_carried + len(old_scans) + len(scans),
        name=loop.name,
        doc_string=loop.doc_string,
        metadata_props=dict(loop.metadata_props),
    )
    loop.attributes.clear()  # the body belongs to the new Loop
    graph.insert_before(loop, before)
    graph.insert_after(loop, new_loop)
    for old, index in kept:
        _take_over(old, new_loop.outputs[index], graph)
    after: list[ir.Node] = []
    for at, (accumulator, value) in enumerate(scans):
        stack = new_loop.outputs[new_carried + len(old_scans) + at]
        type_ = _element_type(accumulator)[0]
        typed(fresh(stack, "stack"), (type_, ir.Shape([None, *accumulator.shape])))
        after += _stack_readers(accumulator, stack, once, opset)
    for k, index in wholes.items():
        accumulator = by_k[k]
        whole = new_loop.outputs[index]
        carried_shape = body_outputs[1 + index].shape
        typed(fresh(whole, "whole"), (_element_type(accumulator)[0], carried_shape))
        lengths_out: ir.Value | None = None
        if k in counts:
            lengths_out = typed(fresh(new_loop.outputs[counts[k]], "lengths"), _INT64_VECTOR)
        source = whole
        if accumulator.reads("ConcatFromSequence") and not _nonempty(accumulator, once):
            assert lengths_out is not None, "_concat_in_body carries the lengths to check"
            guard = lengths_count(lengths_out)
            guard += nonempty(whole, guard[-1].outputs[0])
            after += guard
            source = guard[-1].outputs[0]
        after += read_concat_in_readers(
            accumulator.output,
            source,
            lengths_out,
            accumulator.axis,
            accumulator.new_axis,
            _element_type(accumulator),
            opset,
        )
    graph.insert_after(new_loop, after)
    old_inputs = list(loop.inputs)
    for index in range(len(loop.inputs)):
        loop.replace_input_with(index, None)
    graph.remove(loop, safe=True)
    for old_input in old_inputs:
        remove_unread(old_input, {"SequenceEmpty", "Constant"})
    for node in after:
        if node.graph is not None and node.op_type in _COUNTING:
            remove_unread(node.outputs[0], _COUNTING)
    return [n for n in [*before, new_loop, *after] if n.graph is not None]


#: What counting a stack's elements writes: removed again where no reader needs the count.
_COUNTING = frozenset({"Shape", "Gather", "Constant"})


def _element_type(accumulator: Accumulator) -> tuple[ir.TypeProtocol, ir.Shape]:
    return ir.TensorType(accumulator.dtype), ir.Shape(list(accumulator.shape))


def _nonempty(accumulator: Accumulator, once: bool) -> bool:
    """Whether the sequence is proven to hold an element: the loop runs once and appends."""
    return once and accumulator.branch is None


def _take_over(old: ir.Value, new: ir.Value, graph: ir.Graph) -> None:
    """``new`` takes over ``old``'s readers, graph output places and name."""
    for user, index in list(old.uses()):
        user.replace_input_with(index, new)
    for index, value in enumerate(graph.outputs):
        if value is old:
            graph.outputs[index] = new
    new.type, new.shape = old.type, old.shape
    name, old.name = old.name, None
    adopt_name(new, name)


def _scanned(accumulator: Accumulator, body: ir.Graph) -> ir.Value:
    """Remove the insert of a ``stack`` accumulator; returns the value to scan out."""
    insert, element = accumulator.insert, accumulator.element
    body.remove(insert, safe=False)
    for index in range(len(insert.inputs)):
        insert.replace_input_with(index, None)
    producer = element.producer()
    if producer is None or producer.graph is not body or element in body.outputs:
        copy = fresh(new_node("Identity", [element]))
        body.append(copy)
        element = copy.outputs[0]
    # Declared, so that onnxruntime stacks no trip at all as [0, *shape].
    return typed(
        fresh(element, "scanned") if element.name is None else element, _element_type(accumulator)
    )


def _stack_readers(
    accumulator: Accumulator, stack: ir.Value, once: bool, opset: int
) -> list[ir.Node]:
    """The readers of a ``stack`` accumulator read ``stack`` (reversed for a prepend)."""
    nodes: list[ir.Node] = []
    type_, shape = _element_type(accumulator)
    if accumulator.prepend:
        starts = constant_node(np.array([-1], np.int64), "starts")
        ends = constant_node(np.array([np.iinfo(np.int64).min], np.int64), "ends")
        axes = constant_node(np.array([0], np.int64), "axes")
        steps = constant_node(np.array([-1], np.int64), "steps")
        inputs = [stack, *(c.outputs[0] for c in (starts, ends, axes, steps))]
        reverse = fresh(new_node("Slice", inputs))
        stack = typed(fresh(reverse.outputs[0], "reversed"), (type_, stack.shape))
        nodes += [starts, ends, axes, steps, reverse]
    if accumulator.reads("ConcatFromSequence") and not _nonempty(accumulator, once):
        first = constant_node(np.array([0], np.int64), "zero")
        dims = fresh(new_node("Shape", [stack]))
        typed(fresh(dims.outputs[0], "stack_dims"), (ir.TensorType(ir.DataType.INT64), None))
        one = constant_node(np.array([1], np.int64), "one")
        head = fresh(new_node("Slice", [dims.outputs[0], first.outputs[0], one.outputs[0]]))
        typed(
            fresh(head.outputs[0], "count_dims"), (ir.TensorType(ir.DataType.INT64), ir.Shape([1]))
        )
        nodes += [first, dims, one, head]
        guard = nonempty(stack, head.outputs[0])
        nodes += guard
        stack = guard[-1].outputs[0]
    count = count_of(stack, None)
    nodes += count
    nodes += read_stack_in_readers(
        accumulator.output, stack, type_, shape, count[-1].outputs[0], opset
    )
    return nodes


def _concat_in_body(
    accumulator: Accumulator, body: ir.Graph, opset: int, once: bool
) -> tuple[list[ir.Node], ir.Value, tuple[ir.Value, ir.Value, ir.Value] | None]:
    """Grow a ``concat`` accumulator by Concat in the body (or its If's branch).

    Returns the nodes making its empty start (the last one's output), the
    body output that carries it on, and the lengths' ``(initial, inner,
    next)`` where a reader needs them.
    """
    a = accumulator
    insert, inner, element = a.insert, body.inputs[2 + a.k], a.element
    where = insert.graph
    assert where is not None
    dims: list[int | str | None] = list(a.shape)
    if a.new_axis:
        dims.insert(a.axis, 1)
    carried_shape = ir.Shape([None if i == a.axis else d for i, d in enumerate(dims)])
    carried_type = (ir.TensorType(a.dtype), carried_shape)
    typed(inner, carried_type)
    nodes: list[ir.Node] = []
    part = element
    if a.new_axis:
        nodes += with_axes("Unsqueeze", element, [a.axis], opset)
        part = typed(fresh(nodes[-1].outputs[0], "part"), (ir.TensorType(a.dtype), ir.Shape(dims)))
    pair = [part, inner] if a.prepend else [inner, part]
    concat = fresh(new_node("Concat", pair, {"axis": a.axis}))
    grown = typed(fresh(concat.outputs[0], "whole"), carried_type)
    nodes.append(concat)
    needs_lengths = (
        a.reads("SequenceAt")
        or a.reads("SequenceLength")
        or (a.reads("ConcatFromSequence") and not _nonempty(a, once))
    )
    counted = None
    if needs_lengths:
        lengths_in = typed(fresh(ir.Value(), "lengths"), _INT64_VECTOR)
        shape = fresh(new_node("Shape", [part]))
        typed(fresh(shape.outputs[0], "part_shape"), (ir.TensorType(ir.DataType.INT64), None))
        start = constant_node(np.array([a.axis], np.int64), "start")
        end = constant_node(np.array([a.axis + 1], np.int64), "end")
        size = fresh(new_node("Slice", [shape.outputs[0], start.outputs[0], end.outputs[0]]))
        typed(fresh(size.outputs[0], "length"), (ir.TensorType(ir.DataType.INT64), ir.Shape([1])))
        pair = [size.outputs[0], lengths_in] if a.prepend else [lengths_in, size.outputs[0]]
        more = fresh(new_node("Concat", pair, {"axis": 0}))
        lengths_next = typed(fresh(more.outputs[0], "lengths"), _INT64_VECTOR)
        nodes += [shape, start, end, size, more]
        # ConstantOfShape, not a Constant of no element: OpenVINO reads an empty
        # constant a Loop carries as a scalar (passes/fill_empty_starts.py).
        none = constant_node(np.array([0], np.int64), "no_lengths_shape")
        zeros = ir.tensor(np.zeros(1, np.int64))
        empty = fresh(new_node("ConstantOfShape", [none.outputs[0]], {"value": zeros}))
        typed(
            fresh(empty.outputs[0], "no_lengths"), (ir.TensorType(ir.DataType.INT64), ir.Shape([0]))
        )
        counted = (empty.outputs[0], lengths_in, lengths_next)
    where.insert_before(insert, nodes)
    for index, value in enumerate(where.outputs):
        if value is insert.outputs[0]:
            where.outputs[index] = grown
    where.remove(insert, safe=False)
    for index in range(len(insert.inputs)):
        insert.replace_input_with(index, None)
    if a.branch is not None:
        branch_node, j, passing = a.branch
        passed = passing.outputs[j]
        if passed is not inner:
            typed(passed, carried_type)
        typed(branch_node.outputs[j], carried_type)
        grown = branch_node.outputs[j]
        if counted is not None:
            copy = fresh(new_node("Identity", [counted[1]]))
            typed(fresh(copy.outputs[0], "lengths"), _INT64_VECTOR)
            passing.append(copy)
            where.outputs.append(counted[2])
            passing.outputs.append(copy.outputs[0])
            branch_node.resize_outputs(len(branch_node.outputs) + 1)
            out = typed(fresh(branch_node.outputs[-1], "lengths"), _INT64_VECTOR)
            counted = (counted[0], counted[1], out)
    start_dims: list[int | str] = []
    for i, d in enumerate(dims):
        assert i == a.axis or d is not None, "the planner checked every other dim is fixed"
        start_dims.append(0 if i == a.axis or d is None else d)
    start_shape = _start_shape(start_dims, a.bound)
    zero = ir.tensor(np.zeros(1, a.dtype.numpy()))
    empty_node = fresh(new_node("ConstantOfShape", [start_shape[-1].outputs[0]], {"value": zero}))
    typed(fresh(empty_node.outputs[0], "empty"), (ir.TensorType(a.dtype), ir.Shape(start_dims)))
    return [*start_shape, empty_node], grown, counted


def _start_shape(dims: list[int | str], bound: Bound) -> list[ir.Node]:
    """Nodes computing ``dims`` as an int64 vector: a constant where all are
    static, else a Concat of constants and the graph inputs' dims."""
    if all(isinstance(d, int) for d in dims):
        return [constant_node(np.array(dims, np.int64), "empty_shape")]
    nodes: list[ir.Node] = []
    pieces: list[ir.Value] = []
    for dim in dims:
        if isinstance(dim, int):
            nodes.append(constant_node(np.array([dim], np.int64), "dim"))
        else:
            value, axis = bound[dim]
            shape = fresh(new_node("Shape", [value]))
            typed(fresh(shape.outputs[0], "input_shape"), (ir.TensorType(ir.DataType.INT64), None))
            at = constant_node(np.array([axis], np.int64), "axis")
            nodes += [shape, at, fresh(new_node("Gather", [shape.outputs[0], at.outputs[0]]))]
        pieces.append(
            typed(nodes[-1].outputs[0], (ir.TensorType(ir.DataType.INT64), ir.Shape([1])))
        )
    concat = fresh(new_node("Concat", pieces, {"axis": 0}))
    typed(
        fresh(concat.outputs[0], "empty_shape"),
        (ir.TensorType(ir.DataType.INT64), ir.Shape([len(dims)])),
    )
    return [*nodes, concat]
