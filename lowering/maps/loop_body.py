"""What every strategy's rewrite of a map shares: the Loop it builds and how it reads.

Every strategy turns the map's body graph into a Loop body with
:func:`open_body` (each element read at the iteration: ``SequenceAt``, or a
``Slice`` of the split tensor at bounds computed once, :func:`read_slice`),
builds the Loop (:func:`loop_header`, :func:`make_loop`), and puts its nodes
in the map's place with a :class:`Replacer`.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.analysis.proven_shapes import dtype_known
from lowering.analysis.sequence_length import SequenceLengths
from lowering.irutils.axes import axes_as_input, with_axes
from lowering.irutils.constants import constant_node
from lowering.irutils.dead_code import remove_unread
from lowering.irutils.naming import adopt_name, fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.scopes import GraphLike
from lowering.irutils.walk import graphs_within
from lowering.maps.plan import (
    SCALAR_BOOL,
    SCALAR_INT64,
    MapPlan,
    TypeAndShape,
)
from lowering.maps.split_bounds import (
    Bounds,
    keepdims_disputed,
    ragged_split,
    read_bounds,
    split_bounds,
    split_producer,
    split_rank,
)
from lowering.runtimes.ort_kernels import unsupported


def typed(value: ir.Value, type_and_shape: TypeAndShape | None) -> ir.Value:
    """Give ``value`` a whole type, shape included."""
    if type_and_shape is not None:
        value.type, value.shape = type_and_shape
    return value


def open_body(
    plan: MapPlan,
    iteration: ir.Value,
    cond: ir.Value,
    bounds: dict[ir.Value, Bounds] | None = None,
    through_sequences: bool = False,
) -> tuple[list[ir.Node], list[ir.Value]]:
    """Turn the map's body into a Loop body reading element ``iteration``.

    Each body input becomes the current element of a sequence input (which
    takes over the input's name, so the body's nodes keep reading the same
    name) or the outer value itself (a tensor input, read from the enclosing
    scope). A sequence input split by lengths whose ``bounds``
    (:func:`ragged_bounds`) are given is read by ``Slice`` at them; a split
    tensor is sliced, unless ``through_sequences`` (then every element is a
    ``SequenceAt``, as the original reads it). The body's inputs become
    ``(iteration, cond)``; the caller adds any loop-carried ones.

    Returns the nodes that read the elements, already at the top of the
    body, and the values the body computed for each output, already typed.
    """
    body = plan.body
    prologue: list[ir.Node] = []
    replacements: dict[ir.Value, ir.Value] = {}
    for outer, inner, sequence, element in zip(
        plan.inputs, body.inputs, plan.is_sequence, plan.element_types, strict=True
    ):
        if sequence:
            reads = _read_element(
                outer, iteration, element, plan.opset, bounds or {}, through_sequences
            )
            current = typed(reads[-1].outputs[0], element)
            adopt_name(current, inner.name)
            prologue += reads
        else:
            current = outer
        replacements[inner] = current
    results = rebind_inputs(body, replacements, [iteration, cond])
    for result, t in zip(results, plan.result_types, strict=True):
        declare_result(result, body, t)
    prepend(body, prologue)
    return prologue, results


def declare_result(result: ir.Value, body: ir.Graph, element: TypeAndShape) -> None:
    """Give ``result``, a value the body returns, its map's element type where it says less.

    onnxruntime allocates a Scan's results from the shape its body declares
    for each output, and refuses one with none: "Subgraph must have the shape
    set for all outputs". Its own inference cannot always find one (in an
    untyped function it has inlined, through an element of unknown dims read
    from an enclosing Loop body), where :func:`plan_map` did. A Loop stacks
    its scan outputs as they come and needs no shape, but one costs nothing.
    ``element`` is that type: the body's own declaration, refined by the
    node's or by inference, so it says at least as much. An outer-scope value
    is never retyped here: it is not the body's to declare.
    """
    if result.graph is not body:
        return
    if result.type is None or not dtype_known(result.type):
        typed(result, element)
    elif result.shape is None and element[1] is not None and result.type == element[0]:
        result.shape = element[1]


def rebind_inputs(
    body: ir.Graph, replacements: dict[ir.Value, ir.Value], new_inputs: list[ir.Value]
) -> list[ir.Value]:
    """Make the body read ``replacements`` instead of its inputs, which become ``new_inputs``.

    Returns the values the body computes for its outputs, after the swap (a
    body output may be a body input passed straight through). The body's
    outputs are left empty for the caller to fill.
    """
    results = [replacements.get(value, value) for value in body.outputs]
    body.outputs.clear()
    for inner, current in replacements.items():
        inner.replace_all_uses_with(current)
    body.inputs.clear()
    body.inputs.extend(new_inputs)
    return results


def prepend(body: ir.Graph, nodes: list[ir.Node]) -> None:
    """Put ``nodes`` at the top of ``body``."""
    if nodes and body.num_nodes():
        body.insert_before(body.node(0), nodes)
    elif nodes:
        body.extend(nodes)


def split_source(sequence: ir.Value) -> tuple[ir.Value, int, bool] | None:
    """``(X, axis, keepdims)`` when ``sequence`` is ``SplitToSequence(X)`` without split.

    Element i of such a sequence is slice i of X along axis: the lowering
    reads it straight from X with ``Gather`` and counts the elements with
    ``Shape``, so the sequence need not be built at all.
    """
    producer = sequence.producer()
    if (
        producer is None
        or not is_onnx_op(producer, "SplitToSequence")
        or producer.inputs[0] is None
        or (len(producer.inputs) > 1 and producer.inputs[1] is not None)
    ):
        return None
    return (
        producer.inputs[0],
        producer.attributes.get_int("axis", 0),
        bool(producer.attributes.get_int("keepdims", 1)),
    )


def ragged_source(sequence: ir.Value) -> tuple[ir.Value, ir.Value, int] | None:
    """``(X, split, axis)`` when ``sequence`` is ``SplitToSequence(X, split)``.

    Element i of such a sequence is the i-th run of ``split`` (its lengths,
    or one chunk length) along ``axis`` of X, the axis kept (keepdims is
    ignored when a split is given): the elements may differ in length along
    that one axis, and concatenated along it they are X again. None for a
    split not known to be 1-D with keepdims = 0: onnxruntime drops the axis
    of a chunk of 1 there, where the spec keeps it (a disputed reading, left
    as written: :mod:`lowering.maps.split_bounds`).
    """
    producer = split_producer(sequence)
    if producer is None:
        return None
    tensor, split = producer.inputs[0], producer.inputs[1]
    assert tensor is not None and split is not None, "split_producer checks them"
    if keepdims_disputed(producer, split_rank(split)):
        return None
    return tensor, split, producer.attributes.get_int("axis", 0)


def same_length_inputs(plan: MapPlan) -> bool:
    """Whether all the map's sequence inputs provably have one length.

    The trip count is the first input's length (the spec's own expansion);
    a strategy that consumes every input whole (a Scan over several split
    tensors, one batched body over several stacks) is only equivalent when
    the others are no longer, and an error where they are shorter.
    """
    sequences = [v for v, s in zip(plan.inputs, plan.is_sequence, strict=True) if s]
    if all(v is sequences[0] for v in sequences):
        return True
    lengths = SequenceLengths(plan.proof)
    static = [lengths(v) for v in sequences]
    if all(n is not None for n in static):
        return len(set(static)) == 1
    splits = {id(source[1]) if source else None for source in map(ragged_source, sequences)}
    if len(splits) == 1 and None not in splits:
        return True  # each split by one split value: one length
    dims = []
    for value in sequences:
        source = split_source(value)
        if source is None:
            return False
        tensor, axis, _ = source
        shape = plan.proof.declarable(tensor)  # (a dim the proof doubts is no length)
        if shape is None or not -shape.rank() <= axis < shape.rank():
            return False
        dims.append(shape[axis])
    first = dims[0]
    named = isinstance(first, int) or getattr(first, "value", None) is not None
    return named and all(d == first for d in dims)


def ragged_bounds(plan: MapPlan) -> tuple[list[ir.Node], dict[ir.Value, Bounds]]:
    """The bounds of every sequence input split by lengths (or a chunk size), to
    read its elements with Slice (:mod:`lowering.maps.split_bounds`): the
    nodes, to go before the loop, and each input's bounds."""
    nodes: list[ir.Node] = []
    found: dict[ir.Value, Bounds] = {}
    for outer, sequence in zip(plan.inputs, plan.is_sequence, strict=True):
        if not sequence or outer in found or split_source(outer) is not None:
            continue
        source = ragged_split(outer)
        if source is not None:
            found[outer] = split_bounds(source)
            nodes += found[outer].nodes
    return nodes, found


def reads_sequences(plan: MapPlan, through_sequences: bool = False) -> set[str]:
    """The sequence ops a Loop reads the map's inputs with (and counts them):
    none where every sequence input is split (:func:`split_source`,
    :func:`ragged_split`), unless it reads them ``through_sequences``."""
    if through_sequences:
        return {"SequenceAt", "SequenceLength"}
    if all(
        split_source(outer) is not None or ragged_split(outer) is not None
        for outer, sequence in zip(plan.inputs, plan.is_sequence, strict=True)
        if sequence
    ):
        return set()
    ops = {"SequenceAt"}
    first = plan.inputs[0]
    if split_source(first) is None and ragged_split(first) is None:
        ops.add("SequenceLength")
    return ops


def _read_element(
    sequence: ir.Value,
    iteration: ir.Value,
    element: TypeAndShape | None,
    opset: int,
    bounds: dict[ir.Value, Bounds],
    through_sequences: bool = False,
) -> list[ir.Node]:
    """Nodes reading element ``iteration``; the last one's output is the element."""
    if sequence in bounds:
        ragged = ragged_split(sequence)
        assert ragged is not None, "ragged_bounds found the split"
        return read_bounds(ragged.tensor, bounds[sequence], iteration, ragged.axis)
    source = None if through_sequences else split_source(sequence)
    if source is None:
        return [fresh(new_node("SequenceAt", [sequence, iteration]))]
    tensor, axis, keepdims = source
    dtype = element[0].dtype if element is not None else None
    return read_slice(tensor, iteration, axis, keepdims, dtype, opset)


def read_slice(
    tensor: ir.Value,
    index: ir.Value | int,
    axis: int,
    keepdims: bool,
    dtype: ir.DataType | None,
    opset: int,
    size: int = 1,
) -> list[ir.Node]:
    """Nodes reading slice ``index`` (an int64 scalar, or a constant) of ``tensor``.

    With ``keepdims`` the slice keeps ``axis``: ``size`` entries from a
    constant ``index`` (one otherwise). ``Gather`` reads one entry in one op
    where onnxruntime's Gather is right for the element type; elsewhere
    (strings), and for longer slices, ``Slice``, then ``Squeeze`` unless
    ``keepdims``::

        Gather<axis>(X, [i])    keepdims     Slice(X, [i], [i] + size, [axis])
        Gather<axis>(X, i)      otherwise    Squeeze(.., [axis])

    Squeeze takes its axes as an input from opset 13 and as an attribute
    before it. The last node's output is the slice. Without ``dtype``, the
    tensor's own element type says whether Gather is right for it.
    """
    if isinstance(index, np.integer):
        index = int(index)
    if size != 1 and not (keepdims and isinstance(index, int)):
        raise ValueError("a slice longer than one entry needs keepdims and a constant index")
    if dtype is None or dtype == ir.DataType.UNDEFINED:
        dtype = tensor.dtype
    nodes: list[ir.Node] = []

    def as_vector() -> ir.Value:  # [i]
        if isinstance(index, int):
            nodes.append(constant_node(np.array([index], np.int64)))
            return nodes[-1].outputs[0]
        shape = constant_node(np.array([1], np.int64), "one_element")
        reshape = fresh(new_node("Reshape", [index, shape.outputs[0]]))
        typed(fresh(reshape.outputs[0], "index"), (ir.TensorType(ir.DataType.INT64), ir.Shape([1])))
        nodes.extend([shape, reshape])
        return reshape.outputs[0]

    if size == 1 and unsupported("Gather", dtype, opset) is None:
        if keepdims:
            where = as_vector()
        elif isinstance(index, int):
            nodes.append(constant_node(np.array(index, np.int64)))
            where = nodes[-1].outputs[0]
        else:
            where = index
        nodes.append(fresh(new_node("Gather", [tensor, where], {"axis": axis})))
        return nodes
    start = as_vector()
    axes = constant_node(np.array([axis], np.int64), "axis")
    if isinstance(index, int):
        end = index + size
        if index < 0 and end == 0:  # the last entries, counted from the end: up to the end
            end = np.iinfo(np.int64).max
        end_node = constant_node(np.array([end], np.int64))
    else:
        one = constant_node(np.array([1], np.int64), "one")
        nodes.append(one)
        end_node = fresh(new_node("Add", [start, one.outputs[0]]))
        typed(fresh(end_node.outputs[0], "end"), (ir.TensorType(ir.DataType.INT64), ir.Shape([1])))
    sliced = fresh(new_node("Slice", [tensor, start, end_node.outputs[0], axes.outputs[0]]))
    nodes += [axes, end_node, sliced]
    if not keepdims:
        if axes_as_input("Squeeze", opset):  # Slice's axes serve it too
            nodes.append(fresh(new_node("Squeeze", [sliced.outputs[0], axes.outputs[0]])))
        else:
            nodes += with_axes("Squeeze", sliced.outputs[0], [axis], opset)
    return nodes


def loop_header(
    plan: MapPlan,
    bounds: tuple[list[ir.Node], dict[ir.Value, Bounds]] | None = None,
    through_sequences: bool = False,
) -> tuple[list[ir.Node], ir.Value, ir.Value]:
    """The trip count (the first input's length), and a constant true condition.

    The condition is explicit: Loop allows "" for "always", but some
    runtimes (onnx.reference among them) then run no trip at all. The nodes
    of ``bounds`` (:func:`ragged_bounds`) come first; a first input split by
    lengths counts its elements from them; a split tensor's are its size
    along the split axis, unless ``through_sequences`` (SequenceLength).
    """
    first = plan.inputs[0]
    source = None if through_sequences else split_source(first)
    prefix, found = bounds if bounds is not None else ([], {})
    if first in found:
        nodes = list(prefix)
        trip_count = typed(found[first].count, SCALAR_INT64)
    else:
        if source is None:
            reads = [fresh(new_node("SequenceLength", [first]))]
        else:  # the size of the split axis
            tensor, axis, _ = source
            shape = fresh(new_node("Shape", [tensor]))
            typed(fresh(shape.outputs[0], "shape"), (ir.TensorType(ir.DataType.INT64), None))
            where = constant_node(np.array(axis, np.int64), "axis")
            reads = [shape, where, fresh(new_node("Gather", [shape.outputs[0], where.outputs[0]]))]
        nodes = [*prefix, *reads]
        trip_count = typed(fresh(reads[-1].outputs[0], "trip_count"), SCALAR_INT64)
    # A tensor of its own: onnxscript's optimizer lifts Constants to initializers, and
    # serializing those names their tensors, so a tensor shared across models is not read-only.
    always = fresh(ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(np.array(True)))]))
    typed(fresh(always.outputs[0], "true"), SCALAR_BOOL)
    return [*nodes, always], trip_count, always.outputs[0]


def body_signature() -> tuple[ir.Value, ir.Value]:
    """Fresh ``(iteration, cond)`` inputs for a Loop body."""
    iteration = typed(fresh(ir.Value(), "iter"), SCALAR_INT64)
    cond = typed(fresh(ir.Value(), "cond_in"), SCALAR_BOOL)
    return iteration, cond


def keep_going(cond: ir.Value) -> ir.Node:
    """``Identity(cond)``: the body's condition output, never stopping early."""
    node = fresh(new_node("Identity", [cond]))
    typed(fresh(node.outputs[0], "cond_out"), SCALAR_BOOL)
    return node


def make_loop(plan: MapPlan, inputs: list[ir.Value | None], num_outputs: int) -> ir.Node:
    """The Loop that takes the map's place, its name, doc string and metadata."""
    node = plan.node
    return new_node(
        "Loop",
        inputs,
        {"body": plan.body},
        num_outputs=num_outputs,
        name=node.name,
        doc_string=node.doc_string,
        metadata_props=dict(node.metadata_props),
    )


class Replacer:
    """Puts rewrites in the maps' places in time linear in the model.

    onnx_ir's ``replace_nodes_and_values`` and ``Graph.remove`` each scan all
    of a graph's outputs, which is quadratic in a graph with thousands of
    maps whose results are graph outputs. Here each graph's output positions
    are indexed once, and the replaced maps are removed in one batch per
    graph by :meth:`finish`.
    """

    def __init__(self) -> None:
        self._output_positions: dict[GraphLike, dict[ir.Value, list[int]]] = {}
        self._removed: dict[GraphLike, list[ir.Node]] = {}
        self._maybe_dead: set[ir.Value] = set()

    def replace(
        self, plan: MapPlan, new_nodes: list[ir.Node], outputs: list[ir.Value | None]
    ) -> None:
        """Put ``new_nodes`` after the map; ``outputs`` take over its outputs and names.

        An output may be None where the rewrite has left the map's output
        with no use at all.
        """
        node, owner = plan.node, plan.located.scope.owner
        owner.insert_after(node, new_nodes)
        for old, new, t in zip(node.outputs, outputs, plan.output_types, strict=True):
            if new is None:
                continue
            for user, index in list(old.uses()):
                user.replace_input_with(index, new)
            if old.is_graph_output():
                positions = self._positions(owner)
                for index in positions.pop(old):
                    owner.outputs[index] = new
                    positions.setdefault(new, []).append(index)
            name, old.name = old.name, None
            adopt_name(typed(new, t), name)
        inputs = list(node.inputs)
        for index in range(len(node.inputs)):
            node.replace_input_with(index, None)
        # The body now belongs to the new nodes: the map, removed only in
        # finish(), must not hold it meanwhile (an outer map may clone it).
        node.attributes.clear()
        self._removed.setdefault(owner, []).append(node)
        self._maybe_dead.update(
            v for v in inputs if v is not None and (split_source(v) or ragged_split(v))
        )

    def flush_within(self, graph: ir.Graph) -> None:
        """Finish, now, what is pending in ``graph`` and every graph nested in it.

        A strategy that copies a body (unrolling) calls this first: the maps
        already rewritten inside the body, at any depth (in its If and Loop
        branches too), must be gone before the copy, or each copy would
        carry one more SequenceMap that no later step removes.
        """
        self._finish(set(graphs_within(graph)))

    def finish(self) -> None:
        """Remove the replaced maps, and splits whose elements are now read directly."""
        self._finish(None)

    def _finish(self, owners: set[ir.Graph] | None) -> None:
        operands: list[ir.Value] = []  # of the splits removed: a split's constant lengths
        for value in list(self._maybe_dead):
            producer = value.producer()
            if producer is None or producer.graph is None:
                self._maybe_dead.discard(value)
            elif owners is None or producer.graph in owners:
                self._maybe_dead.discard(value)
                if not value.uses() and not value.is_graph_output():
                    self._removed.setdefault(producer.graph, []).append(producer)
                    operands += [v for v in producer.inputs[1:] if v is not None]
                    for index in range(1, len(producer.inputs)):
                        producer.replace_input_with(index, None)
        for owner in list(self._removed):
            if owners is None or owner in owners:
                owner.remove(self._removed.pop(owner))
        for value in operands:
            remove_unread(value)

    def _positions(self, owner: GraphLike) -> dict[ir.Value, list[int]]:
        if owner not in self._output_positions:
            positions: dict[ir.Value, list[int]] = {}
            for index, value in enumerate(owner.outputs):
                positions.setdefault(value, []).append(index)
            self._output_positions[owner] = positions
        return self._output_positions[owner]
