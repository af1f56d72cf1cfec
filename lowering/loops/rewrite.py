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

import dataclasses

import numpy as np
import onnx_ir as ir

from lowering.irutils.axes import with_axes
from lowering.irutils.constants import constant_node
from lowering.irutils.dead_code import remove_unread
from lowering.irutils.naming import adopt_name, fresh
from lowering.irutils.nodes import new_node
from lowering.loops.accumulators import Accumulator, Bound, runs_once
from lowering.loops.concat_reads import lengths_count, nonempty, read_concat_in_readers
from lowering.maps.loop_body import typed
from lowering.maps.stack_reads import count_of, read_stack_in_readers

_INT64_VECTOR = (ir.TensorType(ir.DataType.INT64), ir.Shape([None]))


def rewrite_loop(loop: ir.Node, accumulators: list[Accumulator], opset: int) -> list[ir.Node]:
    """Rewrite ``accumulators`` of ``loop`` (the module docstring); returns the nodes written."""
    graph = loop.graph
    assert graph is not None, "the pass rewrites loops in a graph"
    body = loop.attributes["body"].as_graph()
    by_k = {a.k: a for a in accumulators}
    carried = len(loop.inputs) - 2
    once = runs_once(loop)
    face = _interface(loop, body, by_k, opset, once)
    new_carried = len(face.inputs) - 2
    old_scans = list(body.outputs[1 + carried :])
    face.kept += [(loop.outputs[carried + i], new_carried + i) for i in range(len(old_scans))]
    face.body_outputs += [*old_scans, *(value for _, value in face.scans)]
    body.inputs.clear()
    body.inputs.extend(face.body_inputs)
    body.outputs.clear()
    body.outputs.extend(face.body_outputs)

    new_loop = new_node(
        "Loop",
        face.inputs,
        {"body": body},
        num_outputs=new_carried + len(old_scans) + len(face.scans),
        name=loop.name,
        doc_string=loop.doc_string,
        metadata_props=dict(loop.metadata_props),
    )
    loop.attributes.clear()  # the body belongs to the new Loop
    graph.insert_before(loop, face.before)
    graph.insert_after(loop, new_loop)
    for old, index in face.kept:
        _take_over(old, new_loop.outputs[index], graph)
    after: list[ir.Node] = []
    first_scan = new_carried + len(old_scans)
    for at, (accumulator, _) in enumerate(face.scans):
        stack = new_loop.outputs[first_scan + at]
        type_ = _element_type(accumulator)[0]
        typed(fresh(stack, "stack"), (type_, ir.Shape([None, *accumulator.shape])))
        after += _stack_readers(accumulator, stack, once, opset)
    for k, index in face.wholes.items():
        lengths = new_loop.outputs[face.counts[k]] if k in face.counts else None
        carried_shape = face.body_outputs[1 + index].shape
        after += _concat_readers(
            by_k[k], new_loop.outputs[index], lengths, carried_shape, once, opset
        )
    graph.insert_after(new_loop, after)
    _remove_replaced(loop, after)
    return [n for n in [*face.before, new_loop, *after] if n.graph is not None]


@dataclasses.dataclass
class _Interface:
    """The new Loop's inputs and its body's, gathered in order: the carried
    values that stay and each concat, then the concats' lengths."""

    inputs: list[ir.Value | None]
    body_inputs: list[ir.Value]
    body_outputs: list[ir.Value]
    before: list[ir.Node] = dataclasses.field(default_factory=list)  # the initial values
    # An old loop output, its index in the new loop.
    kept: list[tuple[ir.Value, int]] = dataclasses.field(default_factory=list)
    wholes: dict[int, int] = dataclasses.field(default_factory=dict)  # k: its concat's index
    counts: dict[int, int] = dataclasses.field(default_factory=dict)  # k: its lengths' index
    scans: list[tuple[Accumulator, ir.Value]] = dataclasses.field(default_factory=list)

    def carry(self, initial: ir.Value | None, inner: ir.Value, result: ir.Value) -> int:
        """Add a carried value; returns its index among the new Loop's outputs."""
        index = len(self.inputs) - 2
        self.inputs.append(initial)
        self.body_inputs.append(inner)
        self.body_outputs.append(result)
        return index


def _interface(
    loop: ir.Node, body: ir.Graph, by_k: dict[int, Accumulator], opset: int, once: bool
) -> _Interface:
    """Rewrite each accumulator in ``body``; what the new Loop carries."""
    face = _Interface(
        [loop.inputs[0], loop.inputs[1]], [body.inputs[0], body.inputs[1]], [body.outputs[0]]
    )
    lengths: dict[int, tuple[ir.Value, ir.Value, ir.Value]] = {}  # k: initial, inner, next
    for k in range(len(loop.inputs) - 2):
        accumulator = by_k.get(k)
        if accumulator is None:
            index = face.carry(loop.inputs[2 + k], body.inputs[2 + k], body.outputs[1 + k])
            face.kept.append((loop.outputs[k], index))
        elif accumulator.form == "stack":
            face.scans.append((accumulator, _scanned(accumulator, body)))
        else:
            initial, grown, counted = _concat_in_body(accumulator, body, opset, once)
            face.before += initial
            face.wholes[k] = face.carry(initial[-1].outputs[0], body.inputs[2 + k], grown)
            if counted is not None:
                lengths[k] = counted
    for k, counted in lengths.items():
        face.counts[k] = face.carry(*counted)
        face.before += _lengths_start(counted[0])
    return face


def _lengths_start(no_lengths: ir.Value) -> list[ir.Node]:
    """The nodes making the empty lengths :func:`_lengths_in_body` starts from."""
    producer = no_lengths.producer()
    assert producer is not None, "_concat_in_body makes the empty lengths"
    empty_shape = producer.inputs[0]
    maker = empty_shape.producer() if empty_shape is not None else None
    assert maker is not None, "a Constant gives the empty lengths' shape"
    return [maker, producer]


def _concat_readers(
    accumulator: Accumulator,
    whole: ir.Value,
    lengths: ir.Value | None,
    carried_shape: ir.Shape | None,
    once: bool,
    opset: int,
) -> list[ir.Node]:
    """The readers of a ``concat`` accumulator read ``whole`` and its ``lengths``
    (checked to be nonempty where a ConcatFromSequence would fail on none)."""
    typed(fresh(whole, "whole"), (_element_type(accumulator)[0], carried_shape))
    lengths_out: ir.Value | None = None
    if lengths is not None:
        lengths_out = typed(fresh(lengths, "lengths"), _INT64_VECTOR)
    nodes: list[ir.Node] = []
    source = whole
    if accumulator.reads("ConcatFromSequence") and not _nonempty(accumulator, once):
        assert lengths_out is not None, "_concat_in_body carries the lengths to check"
        guard = lengths_count(lengths_out)
        guard += nonempty(whole, guard[-1].outputs[0])
        nodes += guard
        source = guard[-1].outputs[0]
    return nodes + read_concat_in_readers(
        accumulator.output,
        source,
        lengths_out,
        accumulator.axis,
        accumulator.new_axis,
        _element_type(accumulator),
        opset,
    )


def _remove_replaced(loop: ir.Node, after: list[ir.Node]) -> None:
    """Remove the old ``loop``, the starts only it read, and the counts no reader needs."""
    graph = loop.graph
    assert graph is not None, "the pass rewrites loops in a graph"
    old_inputs = list(loop.inputs)
    for index in range(len(loop.inputs)):
        loop.replace_input_with(index, None)
    graph.remove(loop, safe=True)
    for old_input in old_inputs:
        remove_unread(old_input, {"SequenceEmpty", "Constant"})
    for node in after:
        if node.graph is not None and node.op_type in _COUNTING:
            remove_unread(node.outputs[0], _COUNTING)


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
    counted = None
    if _needs_lengths(a, once):
        counting, counted = _lengths_in_body(a, part)
        nodes += counting
    where.insert_before(insert, nodes)
    for index, value in enumerate(where.outputs):
        if value is insert.outputs[0]:
            where.outputs[index] = grown
    where.remove(insert, safe=False)
    for index in range(len(insert.inputs)):
        insert.replace_input_with(index, None)
    if a.branch is not None:
        grown, counted = _through_branch(a, where, inner, carried_type, counted)
    return _empty_start(a, dims), grown, counted


def _needs_lengths(a: Accumulator, once: bool) -> bool:
    """Whether a reader needs each element's length: to find an element, to
    count them, or to check a concat has one."""
    return (
        a.reads("SequenceAt")
        or a.reads("SequenceLength")
        or (a.reads("ConcatFromSequence") and not _nonempty(a, once))
    )


def _lengths_in_body(
    a: Accumulator, part: ir.Value
) -> tuple[list[ir.Node], tuple[ir.Value, ir.Value, ir.Value]]:
    """The nodes adding ``part``'s length along the concat's axis to the carried
    lengths; and the lengths' ``(initial, inner, next)``."""
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
    # ConstantOfShape, not a Constant of no element: OpenVINO reads an empty
    # constant a Loop carries as a scalar (passes/fill_empty_starts.py).
    none = constant_node(np.array([0], np.int64), "no_lengths_shape")
    zeros = ir.tensor(np.zeros(1, np.int64))
    empty = fresh(new_node("ConstantOfShape", [none.outputs[0]], {"value": zeros}))
    typed(fresh(empty.outputs[0], "no_lengths"), (ir.TensorType(ir.DataType.INT64), ir.Shape([0])))
    return [shape, start, end, size, more], (empty.outputs[0], lengths_in, lengths_next)


def _through_branch(
    a: Accumulator,
    where: ir.Graph,
    inner: ir.Value,
    carried_type: tuple[ir.TypeProtocol, ir.Shape],
    counted: tuple[ir.Value, ir.Value, ir.Value] | None,
) -> tuple[ir.Value, tuple[ir.Value, ir.Value, ir.Value] | None]:
    """Carry the concat (and its lengths) out of the If whose branch ``where``
    grows it; the other branch passes both on. Returns the If's outputs of the two."""
    assert a.branch is not None, "only an insert under an If has a branch"
    branch_node, j, passing = a.branch
    passed = passing.outputs[j]
    if passed is not inner:
        typed(passed, carried_type)
    typed(branch_node.outputs[j], carried_type)
    grown = branch_node.outputs[j]
    if counted is None:
        return grown, None
    copy = fresh(new_node("Identity", [counted[1]]))
    typed(fresh(copy.outputs[0], "lengths"), _INT64_VECTOR)
    passing.append(copy)
    where.outputs.append(counted[2])
    passing.outputs.append(copy.outputs[0])
    branch_node.resize_outputs(len(branch_node.outputs) + 1)
    out = typed(fresh(branch_node.outputs[-1], "lengths"), _INT64_VECTOR)
    return grown, (counted[0], counted[1], out)


def _empty_start(a: Accumulator, dims: list[int | str | None]) -> list[ir.Node]:
    """The nodes making the concat's start: no element, the other dims fixed."""
    start_dims: list[int | str] = []
    for i, d in enumerate(dims):
        assert i == a.axis or d is not None, "the planner checked every other dim is fixed"
        start_dims.append(0 if i == a.axis or d is None else d)
    start_shape = _start_shape(start_dims, a.bound)
    zero = ir.tensor(np.zeros(1, a.dtype.numpy()))
    empty_node = fresh(new_node("ConstantOfShape", [start_shape[-1].outputs[0]], {"value": zero}))
    typed(fresh(empty_node.outputs[0], "empty"), (ir.TensorType(a.dtype), ir.Shape(start_dims)))
    return [*start_shape, empty_node]


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
