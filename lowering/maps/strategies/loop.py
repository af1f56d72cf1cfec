"""The general strategy: a Loop that appends to loop-carried sequences.

It is correct for every SequenceMap, whatever shapes its elements have::

    outs_1..outs_m = SequenceMap(s_0, a_1, .., a_k)
                     <body (e_0, e_1, .., e_k) => (y_1, .., y_m)>

becomes::

    n       = SequenceLength(s_0)
    true    = Constant<value = true>()
    empty_j = SequenceEmpty<dtype = element type of y_j>()        j = 1..m
    outs_1..outs_m = Loop(n, true, empty_1, .., empty_m)
      body (iter, cond, acc_1, .., acc_m):
        +------------------------------------------------------------+
        | e_0 = SequenceAt(s_0, iter)        for every sequence input |
        | e_i = SequenceAt(a_i, iter)        (a tensor input a_i is   |
        |                                     read from outer scope) |
        | ... the original body nodes, unchanged ...                  |
        | acc_j' = SequenceInsert(acc_j, y_j)          j = 1..m       |
        | cond'  = Identity(cond)                                     |
        +------------------------------------------------------------+
        => (cond', acc_1', .., acc_m')

Its cost: onnxruntime's SequenceInsert copies the sequence on every call,
so n elements cost O(n^2). :mod:`lowering.maps.strategies.scan_outputs` avoids that where
element shapes are uniform.

No sequence is built where none is needed. A sequence input split by
lengths (or a chunk size) is read with ``Slice`` at bounds computed once
before the loop (:mod:`lowering.maps.split_bounds`), and an output that only
``ConcatFromSequence`` nodes read (all with one axis and new_axis) is built
by concatenating in the loop, from an empty tensor whose other dims are
the element's static ones::

    parts = SplitToSequence<axis = a>(X, L)
    ys    = SequenceMap(parts) <body (e) => (y)>          y: [2, ?] (NonZero)
    out   = ConcatFromSequence<axis = 1>(ys)

becomes::

    ends, starts, n = CumSum(L) (+ guard), ends - L, Size(L)
    init = ConstantOfShape<value = 0>([2, 0])
    out  = Loop(n, true, init)
      body (iter, cond, acc):
        +-------------------------------------------------------------+
        | e = Slice(X, Gather(starts, [iter]), Gather(ends, [iter]), [a]) |
        | ... the original body nodes, unchanged ...                     |
        | acc' = Concat<axis = 1>(acc, y)     (Unsqueeze(y, [axis]) first |
        |                                      for new_axis = 1)          |
        +-------------------------------------------------------------+
        => (cond', acc')

(the form :mod:`lowering.loops.concat_form` judges, as for an exporter's
accumulator loop; still O(n^2) in the bytes copied, but 3x faster than the sequence form
in onnxruntime at 4000 elements, and it runs in OpenVINO). Like the other
stack readers (:func:`lowering.maps.stack_reads.read_stack_in_readers`),
a concat of no elements gives the empty ``init`` where onnxruntime's
ConcatFromSequence fails. Strings keep the sequence form
(docs/decisions.md), as does an output whose element has a dim other than
the concat axis that is not static (the empty start needs it), or that the
graph returns or anything else reads.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from lowering.irutils.axes import with_axes
from lowering.irutils.constants import constant_node
from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op
from lowering.loops.concat_form import ConcatForm, concat_form
from lowering.maps.loop_body import (
    Replacer,
    body_signature,
    keep_going,
    loop_header,
    make_loop,
    open_body,
    ragged_bounds,
    reads_sequences,
    typed,
)
from lowering.maps.plan import MapPlan, TypeAndShape, tensor_dtype
from lowering.maps.strategies.protocol import Context, Decline, Fit
from lowering.runtimes.profiles import RAGGED_CONCAT


def concat_built(plan: MapPlan, k: int) -> ConcatForm | None:
    """How output ``k`` is built by Concat in the loop (the module docstring);
    None where it needs a sequence."""
    output = plan.node.outputs[k]
    type_, shape = plan.result_types[k]
    dtype = tensor_dtype(type_)
    if output.is_graph_output() or not output.uses() or shape is None or dtype is None:
        return None
    read = _concat_read(output)
    if read is None:
        return None
    form = concat_form(tuple(shape), dtype, *read, plan.opset, lambda d: isinstance(d, int))
    return None if isinstance(form, str) else form


def _concat_read(output: ir.Value) -> tuple[int, bool] | None:
    """The ``(axis, new_axis)`` of the ConcatFromSequence that every reader of
    ``output`` is; None where a reader is another op or they differ."""
    uses = output.uses()
    if not all(
        index == 0 and is_onnx_op(user, "ConcatFromSequence") and user.graph is not None
        for user, index in uses
    ):
        return None
    readers = {
        (user.attributes.get_int("axis", 0), user.attributes.get_int("new_axis", 0) != 0)
        for user, _ in uses
    }
    if len(readers) != 1:
        return None
    return readers.pop()


def loop_form_ops(plan: MapPlan, through_sequences: bool = False) -> set[str]:
    """The loop and sequence ops :func:`lower_to_sequence_loop` writes for ``plan``."""
    ops = {"Loop"} | reads_sequences(plan, through_sequences)
    if through_sequences or any(
        concat_built(plan, k) is None for k in range(len(plan.node.outputs))
    ):
        ops |= {"SequenceEmpty", "SequenceInsert"}
    return ops


def lower_to_sequence_loop(
    plan: MapPlan, replacer: Replacer, through_sequences: bool = False
) -> list[ir.Node]:
    """Rewrite ``plan``'s map as sketched above; returns the nodes that replace it.

    ``through_sequences``: the elements are read with SequenceAt and counted
    with SequenceLength, and every result appended with SequenceInsert, as
    the original's own expansion does (no split tensor read, no Concat built:
    :mod:`lowering.maps.claims`)."""
    body = plan.body
    iteration, cond = body_signature()
    count = len(plan.node.outputs)
    builds = [None if through_sequences else concat_built(plan, k) for k in range(count)]
    carried_types: list[TypeAndShape] = []
    for build, t, (type_, _) in zip(builds, plan.output_types, plan.result_types, strict=True):
        if build is None:
            carried_types.append(t)
        else:
            carried_types.append(
                (
                    type_,
                    ir.Shape([None if i == build.axis else d for i, d in enumerate(build.dims)]),
                )
            )
    accumulators = [typed(fresh(ir.Value(), "acc"), t) for t in carried_types]
    bounds: tuple[list[ir.Node], dict] = ([], {}) if through_sequences else ragged_bounds(plan)
    _, results = open_body(plan, iteration, cond, bounds[1], through_sequences)
    body.inputs.extend(accumulators)
    appends: list[ir.Node] = []
    for acc, result, t, build in zip(accumulators, results, carried_types, builds, strict=True):
        if build is None:
            appends.append(fresh(new_node("SequenceInsert", [acc, result])))
        else:
            part = result
            if build.new_axis:
                appends += with_axes("Unsqueeze", result, [build.axis], plan.opset)
                part = appends[-1].outputs[0]
            appends.append(fresh(new_node("Concat", [acc, part], {"axis": build.axis})))
        typed(fresh(appends[-1].outputs[0], "acc_next"), t)
    stop = keep_going(cond)
    body.extend([*appends, stop])
    body.outputs.extend([stop.outputs[0], *_carried_outputs(appends, len(accumulators))])

    header, trip_count, always = loop_header(plan, bounds, through_sequences)
    initial: list[ir.Node] = []
    for build, t in zip(builds, plan.result_types, strict=True):
        dtype = t[0].dtype
        if build is None:
            initial.append(fresh(new_node("SequenceEmpty", [], {"dtype": dtype.value})))
            typed(fresh(initial[-1].outputs[0], "empty"), (ir.SequenceType(t[0]), None))
        else:
            dims = [d for d in build.start if isinstance(d, int)]
            assert len(dims) == len(build.start), "concat_built: every other dim static"
            shape = constant_node(np.array(dims, np.int64), "empty_shape")
            zero = ir.tensor(np.zeros(1, ir.DataType(dtype).numpy()))
            empty = fresh(new_node("ConstantOfShape", [shape.outputs[0]], {"value": zero}))
            typed(fresh(empty.outputs[0], "empty"), (t[0], ir.Shape(dims)))
            initial += [shape, empty]
    starts = [n.outputs[0] for n in initial if n.op_type != "Constant"]
    loop = make_loop(plan, [trip_count, always, *starts], len(plan.node.outputs))
    new_nodes = [*header, *initial, loop]
    outputs: list[ir.Value | None] = []
    for output, value, build, t in zip(
        plan.node.outputs, loop.outputs, builds, carried_types, strict=True
    ):
        if build is None:
            outputs.append(value)
            continue
        typed(fresh(value, "concat"), t)
        for user, _ in list(output.uses()):  # the concats read the tensor built
            user.attributes.clear()
            user.op_type = "Identity"
            user.replace_input_with(0, value)
        outputs.append(None)
    replacer.replace(plan, new_nodes, outputs)
    return new_nodes


def _grows_ragged(plan: MapPlan) -> bool:
    """Whether an output is built by a Concat of pieces whose size along its axis
    may differ between iterations (a form some runtimes get wrong: RAGGED_CONCAT)."""
    return any(
        (build := concat_built(plan, k)) is not None and build.ragged
        for k in range(len(plan.node.outputs))
    )


def _carried_outputs(appends: list[ir.Node], count: int) -> list[ir.Value]:
    """The accumulators' next values: the last node of each append (an Unsqueeze may go first)."""
    nexts = [node.outputs[0] for node in appends if node.op_type in ("SequenceInsert", "Concat")]
    assert len(nexts) == count, "one SequenceInsert or Concat per accumulator"
    return nexts


@dataclasses.dataclass(frozen=True)
class LoopFit(Fit):
    """The general Loop: read through its sequences where a split tensor read,
    or a Concat built, would show ONNX's inference a shape no pin fixes."""

    through_sequences: bool = False


class SequenceLoop:
    """The general Loop over sequences (this module): every map fits it, and it
    writes only the ops the original's own expansion uses, so it runs wherever
    the original does; a runtime without them refuses it (``refusal``)."""

    name = "loop"
    form = "a Loop"

    def __init__(self, forced: bool = False) -> None:
        self.forced = forced

    def fit(self, plan: MapPlan, context: Context, declined: list[Decline]) -> Fit | Decline:
        runtime = context.runtime
        claim = context.claims(plan)
        through = claim is not None
        if not runtime.loops:
            problem = (
                f"{runtime.name} runs neither Loop nor Scan, and the map can be neither "
                "unrolled nor vectorized"
            )
        elif lacks := runtime.missing(loop_form_ops(plan, through)):
            problem = f"the map needs a Loop over sequences, and {runtime.name} has no {lacks[0]}"
        else:
            why = "forced by --strategy loop" if self.forced else ""
            if claim is not None:
                read = f"its elements read and its results built through sequences: {claim}"
                why = f"{why}; {read}" if why else read
            ragged = not through and _grows_ragged(plan)
            forms = (RAGGED_CONCAT,) if ragged else ()
            return LoopFit(self, why, forms=forms, through_sequences=through)
        return Decline(self.form, problem, said=False, refusal=True)

    def lower(self, plan: MapPlan, replacer: Replacer, fit: Fit, context: Context) -> list[ir.Node]:
        through = isinstance(fit, LoopFit) and fit.through_sequences
        return lower_to_sequence_loop(plan, replacer, through)
