"""Split -> Map -> Concat becomes one Scan, with no sequence types at all.

The most common shape of a SequenceMap in practice splits a tensor, maps
each slice, and concatenates the results. That is exactly what ``Scan``
does, and Scan is what runtimes without sequence support run (OpenVINO,
tract)::

    parts = SplitToSequence<axis = a, keepdims = k>(X)            (no split)
    ys    = SequenceMap(parts, t) <body (e, u) => (y)>
    out   = ConcatFromSequence<axis = b, new_axis = 1>(ys)

becomes::

    _, out = Scan<num_scan_inputs = 1, scan_input_axes = [a],
                  scan_output_axes = [b]>(t, X)
      body (u, e'):                  u: a state the body returns unchanged
        +-------------------------------------------------+
        | e = Unsqueeze(e', [a])         only if k = 1     |
        | ... the original body nodes, unchanged ...       |
        | u' = Identity(u)                                 |
        +-------------------------------------------------+
        => (u', y)

A ``ConcatFromSequence<axis = 0, new_axis = 0>`` takes the stack along axis
0 and merges it: ``Reshape(out, [-1, *shape[1:]])``. Several mapped inputs
become several scan inputs.

Every tensor the body reads from an enclosing scope, the map's tensor inputs
included, is passed in as a state variable that the body returns unchanged:
OpenVINO's Scan converter rejects bodies that read outer-scope values, and
this works in OpenVINO and tract alike. Scan states are tensors, so an
outer *sequence* the body reads stays an outer-scope reference (a model
that reads one needs a runtime with sequences anyway); so does a tensor of
unknown rank, since onnxruntime allocates every Scan result from the shape
the body declares for it. For the same reason each body output declares
the element shape the plan found (:func:`lowering.maps.plan.declare_result`).

It applies when every sequence input is a ``SplitToSequence`` without
``split``, every output element has one shape, and every reader of every
output is such a ``ConcatFromSequence`` (agreeing on the output axis).

For a runtime without ``Loop`` (tract, ``--runtime tract``), where the map
would otherwise be a Loop with scan outputs, readers may also be SequenceAt,
SequenceLength and concats along different axes: the output is stacked
along axis 0 and read as :func:`lowering.maps.strategies.uniform.read_stack_in_readers`
reads a Loop's stack (a Transpose for a stack along another axis)::

    y = SequenceAt(ys, i)         ->  y = Gather<axis = 0>(out, i')
    c = SequenceLength(ys)        ->  c = Gather(Shape(out), 0)
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.irutils.axes import with_axes
from lowering.irutils.naming import adopt_name, fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.walk import graphs_within
from lowering.maps.plan import (
    MapPlan,
    Replacer,
    TypeAndShape,
    declare_result,
    prepend,
    rebind_inputs,
    same_length_inputs,
    split_source,
    tensor_dtype,
    typed,
)
from lowering.maps.strategies.uniform import (
    concat_kind,
    count_of,
    read_stack,
    read_stack_in_readers,
    stack_read_kind,
)


def scan_axes(plan: MapPlan, stack_reads: bool = False) -> list[int] | None:
    """The scan output axis of each output, when the map fits a Scan; else None.

    Every reader of an output must be a concat of the stack along one axis,
    or, with ``stack_reads`` (for runtimes without Loop), any reader that
    :func:`lowering.maps.strategies.uniform.read_stack_in_readers` serves from a stack
    along axis 0: SequenceAt and SequenceLength as well.
    """
    node = plan.node
    if not all(
        split_source(outer) is not None
        for outer, sequence in zip(plan.inputs, plan.is_sequence, strict=True)
        if sequence
    ):
        return None
    if not same_length_inputs(plan):  # a Scan takes every scan input whole
        return None
    axes = []
    for output, (type_, shape) in zip(node.outputs, plan.result_types, strict=True):
        if output.is_graph_output() or not output.uses() or shape is None:
            return None
        rank = len(shape)
        kinds = [concat_kind(user, index, rank, shape) for user, index in output.uses()]
        wanted = {kind[1] for kind in kinds if kind is not None}
        if None not in kinds and len(wanted) == 1:
            axes.append(wanted.pop())
        elif stack_reads and all(
            stack_read_kind(user, index, shape, tensor_dtype(type_), plan.opset) is not None
            for user, index in output.uses()
        ):
            axes.append(0)
        else:
            return None
    return axes


def lower_to_scan(plan: MapPlan, replacer: Replacer, axes: list[int]) -> list[ir.Node]:
    """Rewrite ``plan``'s map and its concats as one Scan; returns the new nodes."""
    node, body = plan.node, plan.body
    new_nodes: list[ir.Node] = []
    scan_inputs: list[ir.Value] = []
    scan_input_axes: list[int] = []
    element_inputs: list[ir.Value] = []
    prologue: list[ir.Node] = []
    replacements: dict[ir.Value, ir.Value] = {}
    for outer, inner, sequence, element in zip(
        plan.inputs, body.inputs, plan.is_sequence, plan.element_types, strict=True
    ):
        if not sequence:
            replacements[inner] = outer  # read from outside, then made a state below
            continue
        source = split_source(outer)
        assert source is not None, "scan_axes takes only maps whose sequences are splits"
        tensor, axis, keepdims = source
        scan_inputs.append(tensor)
        scan_input_axes.append(axis)
        sliced = fresh(ir.Value(), "slice")
        if element is not None:
            shape = element[1]
            if keepdims and shape is not None and len(shape) > 0:
                shape = ir.Shape([d for i, d in enumerate(shape) if i != axis % len(shape)])
            typed(sliced, (element[0], shape))
        element_inputs.append(sliced)
        if keepdims:
            prologue += with_axes("Unsqueeze", sliced, [axis], plan.opset)
            current = typed(prologue[-1].outputs[0], element)
            adopt_name(current, inner.name)
        else:
            current = sliced
            adopt_name(current, inner.name)
        replacements[inner] = current
    # The elements are inputs before looking for outer values.
    results = rebind_inputs(body, replacements, element_inputs)
    prepend(body, prologue)

    # Scan states are tensors: an outer sequence (or a value of unknown
    # type) stays an outer-scope reference, which every runtime that runs
    # sequences resolves. So does a tensor of unknown rank: onnxruntime
    # allocates a Scan's results from the shapes its body declares, and
    # refuses a body output with none ("Subgraph must have the shape set").
    states = [value for value in _outer_values(body) if _is_shaped_tensor(value)]
    state_inputs = []
    state_types: list[TypeAndShape] = []
    for outer in states:
        assert outer.type is not None, "states are typed and shaped tensors"
        state_types.append((outer.type, outer.shape))
        state = typed(fresh(ir.Value(), "state"), state_types[-1])
        _replace_uses_inside(outer, state, body)
        state_inputs.append(state)
    results = [state_inputs[states.index(r)] if r in states else r for r in results]
    state_outputs = []
    for state, state_type in zip(state_inputs, state_types, strict=True):
        keep = fresh(new_node("Identity", [state]))
        typed(keep.outputs[0], state_type)
        body.append(keep)
        state_outputs.append(keep.outputs[0])
    scanned = []
    for result, t in zip(results, plan.result_types, strict=True):
        if result.graph is not body or result in scanned or result.is_graph_input():
            copy = fresh(new_node("Identity", [result]))
            body.append(copy)
            result = typed(copy.outputs[0], t)
        declare_result(result, body, t)
        scanned.append(result)
    body.inputs.clear()
    body.inputs.extend([*state_inputs, *element_inputs])
    body.outputs.extend([*state_outputs, *scanned])

    scan = new_node(
        "Scan",
        [*states, *scan_inputs],
        {
            "body": body,
            "num_scan_inputs": len(scan_inputs),
            "scan_input_axes": scan_input_axes,
            "scan_output_axes": axes,
        },
        num_outputs=len(states) + len(scanned),
        name=node.name,
        doc_string=node.doc_string,
        metadata_props=dict(node.metadata_props),
    )
    for value in scan.outputs[: len(states)]:
        fresh(value, "final_state")
    new_nodes.append(scan)
    for output, stack, axis, (type_, shape) in zip(
        node.outputs, scan.outputs[len(states) :], axes, plan.result_types, strict=True
    ):
        assert shape is not None, "scan_axes takes only outputs of known shape"
        dims: list[int | ir.SymbolicDim | None] = [*shape]
        dims.insert(axis, None)
        typed(fresh(stack, "stack"), (type_, ir.Shape(dims)))
        rank = len(shape)
        kinds = [concat_kind(user, index, rank, shape) for user, index in output.uses()]
        if all(kind is not None and kind[1] == axis for kind in kinds):
            for user, _ in list(output.uses()):
                new_nodes += read_stack(user, stack, shape)
            continue
        # Stacked along 0 for readers of other kinds or axes (scan_axes with stack_reads).
        count_nodes = count_of(stack, None)
        count = count_nodes[-1].outputs[0]
        constants = read_stack_in_readers(output, stack, type_, shape, count, plan.opset)
        new_nodes += [*(count_nodes if count.uses() else []), *constants]
    replacer.replace(plan, new_nodes, [None] * len(node.outputs))
    return new_nodes


def _outer_values(body: ir.Graph) -> list[ir.Value]:
    """Values the body, or a graph nested in it, reads from an enclosing scope."""
    inside = set(graphs_within(body))
    found: dict[ir.Value, None] = {}
    for graph in inside:
        for node in graph:
            for value in node.inputs:
                if value is not None and value.graph not in inside:
                    found[value] = None
        for value in graph.outputs:
            if value.graph not in inside:
                found[value] = None
    return list(found)


def _is_shaped_tensor(value: ir.Value) -> bool:
    return (
        isinstance(value.type, ir.TensorType)
        and value.type.dtype != ir.DataType.UNDEFINED
        and value.shape is not None
    )


def _replace_uses_inside(outer: ir.Value, state: ir.Value, body: ir.Graph) -> None:
    inside = set(graphs_within(body))
    for user, index in list(outer.uses()):
        if user.graph in inside:
            user.replace_input_with(index, state)
    for graph in inside:
        for index, value in enumerate(graph.outputs):
            if value is outer and graph is not body:
                graph.outputs[index] = state
