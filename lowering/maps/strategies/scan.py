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
along axis 0 and read as :func:`lowering.maps.stack_reads.read_stack_in_readers`
reads a Loop's stack (a Transpose for a stack along another axis)::

    y = SequenceAt(ys, i)         ->  y = Gather<axis = 0>(out, i')
    c = SequenceLength(ys)        ->  c = Gather(Shape(out), 0)
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof
from lowering.irutils.axes import with_axes
from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.naming import adopt_name, fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.pins import may_need_pin
from lowering.irutils.walk import graphs_within, nodes_within, outer_values
from lowering.maps.loop_body import (
    Replacer,
    declare_result,
    prepend,
    rebind_inputs,
    same_length_inputs,
    split_source,
    typed,
)
from lowering.maps.plan import SCALAR_BOOL, SCALAR_INT64, MapPlan, TypeAndShape, tensor_dtype
from lowering.maps.stack_reads import (
    concat_kind,
    count_of,
    read_stack,
    read_stack_in_readers,
    stack_read_kind,
)
from lowering.maps.strategies.protocol import Context, Decline, Fit
from lowering.maps.strategies.scan_outputs import uniform_of
from lowering.runtimes.ort_kernels import unsupported


def scan_axes(plan: MapPlan, stack_reads: bool = False) -> list[int] | None:
    """The scan output axis of each output, when the map fits a Scan; else None.

    Every reader of an output must be a concat of the stack along one axis,
    or, with ``stack_reads`` (for runtimes without Loop), any reader that
    :func:`lowering.maps.stack_reads.read_stack_in_readers` serves from a stack
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


def may_run_empty(plan: MapPlan, main_graph: ir.Graph) -> bool:
    """Whether the original can run ``plan``'s map over no element and go on: its
    split is not proven to have a slice, and a reader other than a concat where
    the map runs can read the empty sequence (onnxruntime fails on an empty
    Scan, so :func:`lower_to_scan` is asked to guard it)."""
    node = plan.node
    source = split_source(plan.inputs[plan.is_sequence.index(True)])
    assert source is not None, "scan_axes takes only maps whose sequences are splits"
    tensor, axis, _ = source
    return not _proven_nonempty(tensor, axis, main_graph) and not all(
        is_onnx_op(user, "ConcatFromSequence") and user.graph is node.graph
        for output in node.outputs
        for user, _ in output.uses()
    )


def lower_to_scan(
    plan: MapPlan,
    replacer: Replacer,
    axes: list[int],
    guard: bool = True,
    proof: Proof | None = None,
) -> list[ir.Node]:
    """Rewrite ``plan``'s map and its concats as one Scan; returns the new nodes.

    With ``guard`` (where :func:`may_run_empty`), the Scan runs inside an If on
    its count. ``proof``: what is proven of the split tensors, whose slices'
    dims the body's scan inputs then declare (ONNX's inference gives them
    those, and the pins in the body are computed from them).
    """
    node = plan.node
    inputs = _scan_inputs(plan, proof)
    # The elements are inputs before looking for outer values.
    results = rebind_inputs(plan.body, inputs.replacements, inputs.elements)
    prepend(plan.body, inputs.prologue)
    states, scanned = _scan_body(plan, results, inputs.elements)

    # onnxruntime's Scan kills the process (SIGFPE) stacking an empty result
    # along an axis other than 0 (a [2,0] along 1, a [0] along 1): a stack of
    # results that may be empty is built along 0 and transposed.
    built = [
        axis if axis == 0 or _never_empty(t[1]) else 0
        for axis, t in zip(axes, plan.result_types, strict=True)
    ]
    scan = new_node(
        "Scan",
        [*states, *inputs.tensors],
        {
            "body": plan.body,
            "num_scan_inputs": len(inputs.tensors),
            "scan_input_axes": inputs.axes,
            "scan_output_axes": built,
        },
        num_outputs=len(states) + len(scanned),
        name=node.name,
        doc_string=node.doc_string,
        metadata_props=dict(node.metadata_props),
    )
    for value in scan.outputs[: len(states)]:
        fresh(value, "final_state")
    stacks = list(scan.outputs[len(states) :])
    for stack, axis, (type_, shape) in zip(stacks, built, plan.result_types, strict=True):
        typed(fresh(stack, "stack"), (type_, _stacked(shape, axis)))
    new_nodes: list[ir.Node] = [scan]
    if guard:
        new_nodes = _unless_empty(scan, stacks, inputs.tensors[0], inputs.axes[0], built, plan)
        stacks = list(new_nodes[-1].outputs)
    new_nodes += _move_stacks(stacks, axes, built, plan)
    for output, stack, axis, result_type in zip(
        node.outputs, stacks, axes, plan.result_types, strict=True
    ):
        new_nodes += _read_output(output, stack, axis, result_type, plan.opset)
    replacer.replace(plan, new_nodes, [None] * len(node.outputs))
    return new_nodes


@dataclasses.dataclass
class _ScanInputs:
    """What the split tensors become: the Scan's scan inputs and the body's."""

    tensors: list[ir.Value] = dataclasses.field(default_factory=list)
    axes: list[int] = dataclasses.field(default_factory=list)
    elements: list[ir.Value] = dataclasses.field(default_factory=list)
    prologue: list[ir.Node] = dataclasses.field(default_factory=list)
    replacements: dict[ir.Value, ir.Value] = dataclasses.field(default_factory=dict)


def _scan_inputs(plan: MapPlan, proof: Proof | None) -> _ScanInputs:
    """Each split the map reads becomes a scan input, and its body input a slice."""
    inputs = _ScanInputs()
    for outer, inner, sequence, element in zip(
        plan.inputs, plan.body.inputs, plan.is_sequence, plan.element_types, strict=True
    ):
        if not sequence:
            inputs.replacements[inner] = outer  # read from outside, then made a state
            continue
        source = split_source(outer)
        assert source is not None, "scan_axes takes only maps whose sequences are splits"
        tensor, axis, keepdims = source
        inputs.tensors.append(tensor)
        inputs.axes.append(axis)
        sliced = fresh(ir.Value(), "slice")
        if element is not None:
            shape = _unkept(element[1], axis) if keepdims else element[1]
            typed(sliced, (element[0], _sliced(shape, tensor, axis, proof)))
        inputs.elements.append(sliced)
        current = sliced
        if keepdims:
            inputs.prologue += with_axes("Unsqueeze", sliced, [axis], plan.opset)
            current = typed(inputs.prologue[-1].outputs[0], element)
        adopt_name(current, inner.name)
        inputs.replacements[inner] = current
    return inputs


def _unkept(shape: ir.Shape | None, axis: int) -> ir.Shape | None:
    """A keepdims element's ``shape`` without its unit dim at ``axis``: a Scan's slice."""
    if shape is None or len(shape) == 0:
        return shape
    return ir.Shape([d for i, d in enumerate(shape) if i != axis % len(shape)])


def _scan_body(
    plan: MapPlan, results: list[ir.Value], elements: list[ir.Value]
) -> tuple[list[ir.Value], list[ir.Value]]:
    """Make ``plan.body`` a Scan body; returns the outer values passed in as
    states, and the body outputs scanned out.

    Scan states are tensors: an outer sequence (or a value of unknown type)
    stays an outer-scope reference, which every runtime that runs sequences
    resolves. So does a tensor of unknown rank: onnxruntime allocates a
    Scan's results from the shapes its body declares, and refuses a body
    output with none ("Subgraph must have the shape set").
    """
    body = plan.body
    states = [value for value in outer_values(body) if _is_shaped_tensor(value)]
    state_inputs = [_state_input(outer, body) for outer in states]
    results = [state_inputs[states.index(r)] if r in states else r for r in results]
    state_outputs = []
    for state in state_inputs:
        keep = fresh(new_node("Identity", [state]))
        assert state.type is not None, "a state has its outer value's type"
        typed(keep.outputs[0], (state.type, state.shape))
        body.append(keep)
        state_outputs.append(keep.outputs[0])
    scanned: list[ir.Value] = []
    for result, t in zip(results, plan.result_types, strict=True):
        if result.graph is not body or result in scanned or result.is_graph_input():
            copy = fresh(new_node("Identity", [result]))
            body.append(copy)
            result = typed(copy.outputs[0], t)
        declare_result(result, body, t)
        scanned.append(result)
    body.inputs.clear()
    body.inputs.extend([*state_inputs, *elements])
    body.outputs.extend([*state_outputs, *scanned])
    return states, scanned


def _state_input(outer: ir.Value, body: ir.Graph) -> ir.Value:
    """A body input of ``outer``'s type that the body reads in its place."""
    assert outer.type is not None, "states are typed and shaped tensors"
    state = typed(fresh(ir.Value(), "state"), (outer.type, outer.shape))
    _replace_uses_inside(outer, state, body)
    return state


def _move_stacks(
    stacks: list[ir.Value], axes: list[int], built: list[int], plan: MapPlan
) -> list[ir.Node]:
    """Transposes moving each stack built along 0 to its readers' axis; ``stacks``
    is updated in place."""
    nodes: list[ir.Node] = []
    for k, (axis, was, (type_, shape)) in enumerate(
        zip(axes, built, plan.result_types, strict=True)
    ):
        if axis == was:
            continue
        rank = len(shape or ())
        perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
        moved = fresh(new_node("Transpose", [stacks[k]], {"perm": perm}))
        nodes.append(moved)
        stacks[k] = typed(fresh(moved.outputs[0], "stack"), (type_, _stacked(shape, axis)))
    return nodes


def _read_output(
    output: ir.Value, stack: ir.Value, axis: int, result_type: TypeAndShape, opset: int
) -> list[ir.Node]:
    """The nodes that serve ``output``'s readers from ``stack``, built along ``axis``."""
    type_, shape = result_type
    assert shape is not None, "scan_axes takes only outputs of known shape"
    kinds = [concat_kind(user, index, len(shape), shape) for user, index in output.uses()]
    if all(kind is not None and kind[1] == axis for kind in kinds):
        nodes: list[ir.Node] = []
        for user, _ in list(output.uses()):
            nodes += read_stack(user, stack, shape)
        return nodes
    # Stacked along 0 for readers of other kinds or axes (scan_axes with stack_reads).
    count_nodes = count_of(stack, None)
    count = count_nodes[-1].outputs[0]
    constants = read_stack_in_readers(output, stack, type_, shape, count, opset)
    return [*(count_nodes if count.uses() else []), *constants]


def _sliced(
    shape: ir.Shape | None, tensor: ir.Value, axis: int, proof: Proof | None
) -> ir.Shape | None:
    """``shape``, a scan input's slice of ``tensor`` along ``axis``, with each
    dim it leaves unknown that ``proof`` proves of ``tensor``."""
    whole = None if proof is None else proof.shape(tensor)
    if whole is None or not -len(whole) <= axis < len(whole):
        return shape
    proven = [d for i, d in enumerate(whole) if i != axis % len(whole)]
    if shape is None:
        return ir.Shape([d if isinstance(d, int) else None for d in proven])
    if len(shape) != len(proven):
        return shape
    return ir.Shape(
        [
            p if isinstance(p, int) and not isinstance(d, int) else d
            for d, p in zip(shape, proven, strict=True)
        ]
    )


def _proven_nonempty(tensor: ir.Value, axis: int, main_graph: ir.Graph) -> bool:
    """Whether ``tensor`` has a dim above 0 along ``axis``: a constant's, or one the
    main graph's input declares (onnxruntime refuses a feed of another). Another
    value's declared shape may be inference's mistake."""
    array = constant_array(tensor)
    shape: ir.Shape | None
    if array is not None:
        shape = ir.Shape(array.shape)
    elif tensor.is_graph_input() and tensor.graph is main_graph:
        shape = tensor.shape
    else:
        return False
    if shape is None or not -len(shape) <= axis < len(shape):
        return False
    dim = shape[axis]
    return isinstance(dim, int) and dim > 0


def _never_empty(shape: ir.Shape | None) -> bool:
    """Whether an element of ``shape`` is proven to hold a value."""
    return shape is not None and all(isinstance(d, int) and d > 0 for d in shape)


def _stacked(shape: ir.Shape | None, axis: int) -> ir.Shape:
    """``shape`` with a stack's axis of unknown size at ``axis``."""
    assert shape is not None, "scan_axes takes only outputs of known shape"
    dims: list[int | ir.SymbolicDim | None] = [*shape]
    dims.insert(axis, None)
    return ir.Shape(dims)


def _unless_empty(
    scan: ir.Node,
    stacks: list[ir.Value],
    tensor: ir.Value,
    axis: int,
    axes: list[int],
    plan: MapPlan,
) -> list[ir.Node]:
    """Nodes running ``scan`` only when ``tensor`` has a slice along ``axis``; the
    last is an If whose outputs are the stacks (empty ones on no slice).

    onnxruntime's Scan fails on an empty scan input ("Invalid dim0_offset of
    0"; along an axis other than 0 it kills the process), where a map over
    an empty sequence runs and its SequenceLength is 0 (OpenVINO and tract run
    the empty Scan)::

        n     = Gather(Shape(X), axis)
        stack = If(Greater(n, 0))
                  then: Scan(.., X)                     the stacks, as before
                  else: Expand(zeros, [.., n, ..])      0 along the stack axis

    The empty stack is expanded to a computed shape, not written as a
    constant: tract unifies the shapes of the two branches (a [0, 3]
    constant is no [n, 3]) and OpenVINO refuses a constant with a 0 dim in
    a branch. An element dim is a number, or read from the scan input or
    state that declares the same symbol; any other is 0 (no element gave
    it a value) and the If declares it unknown.
    """
    shape = fresh(new_node("Shape", [tensor]))
    typed(fresh(shape.outputs[0], "input_shape"), (ir.TensorType(ir.DataType.INT64), None))
    index = constant_node(np.array(axis, np.int64), "axis")
    count = fresh(new_node("Gather", [shape.outputs[0], index.outputs[0]]))
    typed(fresh(count.outputs[0], "count"), SCALAR_INT64)
    zero = constant_node(np.array(0, np.int64), "zero")
    nonempty = fresh(new_node("Greater", [count.outputs[0], zero.outputs[0]]))
    typed(fresh(nonempty.outputs[0], "nonempty"), SCALAR_BOOL)
    outer = [v for v in scan.inputs if v is not None]
    empties: list[ir.Node] = []
    results: list[ir.Value] = []
    chosen: list[ir.Value] = []
    for stack_axis, (type_, element) in zip(axes, plan.result_types, strict=True):
        assert element is not None, "scan_axes takes only outputs of known shape"
        dims: list[int | ir.SymbolicDim | None] = [*element]
        dims.insert(stack_axis, None)
        nodes = _empty_stack(type_, dims, stack_axis, count.outputs[0], outer, plan.opset)
        empties += nodes
        known = ir.Shape([d if isinstance(d, int) else None for d in dims])
        results.append(typed(fresh(nodes[-1].outputs[0], "empty_stack"), (type_, known)))
        chosen.append(typed(fresh(ir.Value(), "stack"), (type_, known)))
    then_branch = ir.Graph([], stacks, nodes=[scan], name="scan_elements")
    else_branch = ir.Graph([], results, nodes=empties, name="no_elements")
    choice = new_node(
        "If",
        [nonempty.outputs[0]],
        {"then_branch": then_branch, "else_branch": else_branch},
        outputs=chosen,
    )
    return [shape, index, count, zero, nonempty, choice]


def _empty_stack(
    type_: ir.TypeProtocol,
    dims: list[int | ir.SymbolicDim | None],
    stack_axis: int,
    count: ir.Value,
    outer: list[ir.Value],
    opset: int,
) -> list[ir.Node]:
    """Nodes making a stack of ``count`` (0) elements; the last one's output.

    ``Expand(zeros, shape)``, where ``shape`` has ``count`` at the stack
    axis; a dtype onnxruntime has no Expand for gets the constant.
    """
    dtype = tensor_dtype(type_)
    assert dtype is not None, "a Scan's results are tensors of known dtype"
    if unsupported("Expand", dtype, opset) is not None:
        empty = _filled([0 if d is None or not isinstance(d, int) else d for d in dims], dtype)
        return [constant_node(empty, "empty_stack", dtype)]
    nodes: list[ir.Node] = []
    pieces: list[ir.Value] = []
    for position, dim in enumerate(dims):
        if position == stack_axis:
            nodes += with_axes("Unsqueeze", count, [0], opset)
            pieces.append(
                typed(nodes[-1].outputs[0], (ir.TensorType(ir.DataType.INT64), ir.Shape([1])))
            )
            continue
        source = _declaring(dim, outer)
        if source is not None:
            value, at = source
            shape = fresh(new_node("Shape", [value]))
            typed(
                fresh(shape.outputs[0], "declared_shape"), (ir.TensorType(ir.DataType.INT64), None)
            )
            index = constant_node(np.array([at], np.int64), "dim")
            read = fresh(new_node("Gather", [shape.outputs[0], index.outputs[0]]))
            nodes += [shape, index, read]
            pieces.append(
                typed(
                    fresh(read.outputs[0], "dim"), (ir.TensorType(ir.DataType.INT64), ir.Shape([1]))
                )
            )
            continue
        number = constant_node(np.array([dim if isinstance(dim, int) else 0], np.int64), "dim")
        nodes.append(number)
        pieces.append(number.outputs[0])
    concat = fresh(new_node("Concat", pieces, {"axis": 0}))
    typed(
        fresh(concat.outputs[0], "empty_shape"),
        (ir.TensorType(ir.DataType.INT64), ir.Shape([len(dims)])),
    )
    zeros = constant_node(_filled([1] * len(dims), dtype), "zeros", dtype)
    expand = fresh(new_node("Expand", [zeros.outputs[0], concat.outputs[0]]))
    return [*nodes, concat, zeros, expand]


def _declaring(
    dim: int | ir.SymbolicDim | None, values: list[ir.Value]
) -> tuple[ir.Value, int] | None:
    """A value among ``values`` declaring the named symbolic ``dim``, and where."""
    if not isinstance(dim, ir.SymbolicDim) or dim.value is None:
        return None
    for value in values:
        for at, declared in enumerate(value.shape or ()):
            if isinstance(declared, ir.SymbolicDim) and declared.value == dim.value:
                return value, at
    return None


def _filled(shape: list[int], dtype: ir.DataType) -> np.ndarray:
    """Zeros of ``shape`` for a tensor of ``dtype`` (empty strings for STRING)."""
    if dtype == ir.DataType.STRING:
        return np.full(shape, b"", object)
    return np.zeros(shape, dtype.numpy())


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


# Why a Scan over a split that may be empty is left bare (lower_to_scan).
_UNGUARDED = (
    "its Scan is not guarded against no element, since the graph has an If and "
    "tract loads one If per graph: onnxruntime fails on it when the split is empty "
    "(tract runs it)"
)


@dataclasses.dataclass(frozen=True)
class ScanFit(Fit):
    """A Scan fits: the scan output axis of each output (:func:`scan_axes`)."""

    axes: tuple[int, ...] = ()


class Scan:
    """Split -> map -> concat as one Scan (this module).

    The axes are judged once, when the Scan is chosen, from the readers of
    the map's outputs. The maps rewritten before this one cannot change
    them: a map earlier in its graph cannot read its outputs, and a map of
    an inner graph (rewritten first) copies the readers its graph holds as
    they are, a concat into a concat, and adds none.
    """

    name = "scan"
    form = "a Scan"

    def fit(self, plan: MapPlan, context: Context, declined: list[Decline]) -> Fit | Decline:
        uniform, why = uniform_of(plan, context)
        if not uniform:
            return Decline(self.form, why, said=False)
        axes = scan_axes(plan, context.scan_reads_stacks)
        if axes is None:
            runtime = context.runtime
            # Said where the runtime has no Loop to take it instead.
            said = bool(runtime.missing({"Loop"})) and runtime.loops
            return Decline(self.form, "that takes split inputs of one length, read as stacks", said)
        if (claim := context.claims(plan)) is not None:
            return Decline(self.form, claim)
        dtypes = [t[0].dtype if t is not None else None for t in plan.element_types] + [
            tensor_dtype(t) for t, _ in plan.result_types
        ]
        return ScanFit(
            self,
            f"split -> map -> concat, and {why}",
            writes=[(op, d) for d in dtypes for op in ("Scan", "Unsqueeze", "Reshape")],
            needs=frozenset({"Scan"}),
            axes=tuple(axes),
        )

    def lower(self, plan: MapPlan, replacer: Replacer, fit: Fit, context: Context) -> list[ir.Node]:
        assert isinstance(fit, ScanFit), "Scan.fit made it"
        guard = may_run_empty(plan, context.main_graph)
        if guard and not _may_guard(plan, context):
            guard = False
            context.notes[plan.node] = _UNGUARDED
        # The slices' dims, where the body holds an op its pins are computed for.
        pinned = any(may_need_pin(node) for node in nodes_within(plan.body))
        return lower_to_scan(
            plan, replacer, list(fit.axes), guard, context.claims.proof() if pinned else None
        )


def _may_guard(plan: MapPlan, context: Context) -> bool:
    """Whether ``plan``'s Scan may have the If that skips it on no element: a
    runtime that loads one If per graph has it only where it is the first."""
    graph = plan.node.graph
    if context.runtime.one_if_per_graph and graph is not None:
        if graph in context.guarded or any(is_onnx_op(node, "If") for node in graph):
            return False
        context.guarded.add(graph)
    return True
