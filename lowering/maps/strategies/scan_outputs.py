"""The uniform-shape strategy: a Loop with scan outputs, then one SplitToSequence each.

When every output element has the same shape (:mod:`lowering.maps.uniform_shapes`),
the body's outputs can be stacked by the Loop itself as scan outputs, and
each stack split back into a sequence once. That is O(n), where appending
to a loop-carried sequence is O(n^2) in onnxruntime, and needs only opset 11::

    outs_1..outs_m = SequenceMap(s_0, a_1, .., a_k)
                     <body (e_0, e_1, .., e_k) => (y_1, .., y_m)>

becomes::

    n    = SequenceLength(s_0)
    true = Constant<value = true>()
    stack_1..stack_m = Loop(n, true)
      body (iter, cond):
        +------------------------------------------------------------+
        | e_0 = SequenceAt(s_0, iter)        for every sequence input |
        | ... the original body nodes, unchanged ...                  |
        | cond' = Identity(cond)                                      |
        +------------------------------------------------------------+
        => (cond', y_1, .., y_m)             y_j stacked: [n, *shape_j]
    outs_j = SplitToSequence<axis = 0, keepdims = 0>(stack_j)   j = 1..m

An empty input gives n = 0, stacks of shape [0, *shape_j], and empty
sequences of the right element type. A sequence input that is
``SplitToSequence(X, split)`` (lengths or a chunk size) is read with Slice
at bounds computed before the Loop, and n is their count
(:mod:`lowering.maps.split_bounds`)::

    e_0 = SequenceAt(s_0, iter)   ->   e_0 = Slice(X, Gather(starts, [iter]),
                                                  Gather(ends, [iter]), [axis])

The split is made only for readers that need a sequence. SequenceAt,
SequenceLength and ConcatFromSequence read the stack itself
(:mod:`lowering.maps.stack_reads`)::

    y = SequenceAt(outs_j, i)            y = Gather<axis = 0>(stack_j, i')
    c = SequenceLength(outs_j)     ->    c = Gather(Shape(stack_j), 0)
    z = ConcatFromSequence(outs_j)       z = stack_j, Transpose or Reshape of it

so a map read only that way leaves no sequence op behind.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
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
from lowering.maps.plan import MapPlan, tensor_dtype
from lowering.maps.stack_reads import read_stack_in_readers
from lowering.maps.strategies.protocol import Context, Decline, Fit
from lowering.maps.uniform_shapes import uniform_reason


def lower_to_scan_outputs(plan: MapPlan, replacer: Replacer) -> list[ir.Node]:
    """Rewrite ``plan``'s map as sketched above; returns the nodes that replace it."""
    body = plan.body
    iteration, cond = body_signature()
    bounds = ragged_bounds(plan)
    _, results = open_body(plan, iteration, cond, bounds[1])
    stop = keep_going(cond)
    body.append(stop)
    scanned = []
    for result, t in zip(results, plan.result_types, strict=True):
        if result.graph is not body or result in scanned:
            # A scan output must be a value of this body, and each one distinct.
            copy = fresh(new_node("Identity", [result]))
            body.append(copy)
            result = typed(copy.outputs[0], t)
        scanned.append(result)
    body.outputs.extend([stop.outputs[0], *scanned])

    header, trip_count, always = loop_header(plan, bounds)
    loop = make_loop(plan, [trip_count, always], len(plan.node.outputs))
    new_nodes = [*header, loop]
    sequences: list[ir.Value | None] = []
    for output, stack, (type_, shape) in zip(
        plan.node.outputs, loop.outputs, plan.result_types, strict=True
    ):
        stack_shape = None if shape is None else ir.Shape([None, *shape])
        typed(fresh(stack, "stack"), (type_, stack_shape))
        new_nodes += read_stack_in_readers(output, stack, type_, shape, trip_count, plan.opset)
        if output.uses() or output.is_graph_output():
            split = fresh(new_node("SplitToSequence", [stack], {"axis": 0, "keepdims": 0}))
            new_nodes.append(split)
            sequences.append(split.outputs[0])
        else:
            sequences.append(None)  # every consumer now reads the stack
    replacer.replace(plan, new_nodes, sequences)
    return new_nodes


def uniform_of(plan: MapPlan, context: Context) -> tuple[bool, str]:
    """:func:`uniform_reason`, judged once per map for the strategies that ask."""
    if plan.node not in context.uniform:
        context.uniform[plan.node] = uniform_reason(plan)
    return context.uniform[plan.node]


class ScanOutputs:
    """A Loop whose scan outputs stack results of one shape (this module)."""

    name = "uniform"
    form = "a Loop with scan outputs"

    def fit(self, plan: MapPlan, context: Context, declined: list[Decline]) -> Fit | Decline:
        uniform, why = uniform_of(plan, context)
        if not uniform:
            return Decline(None, why)  # explains every form after it
        if (claim := context.claims(plan)) is not None:
            return Decline(self.form, claim)
        return Fit(
            self,
            why,
            writes=[
                (op, tensor_dtype(t))
                for t, _ in plan.result_types
                for op in ("Loop", "SplitToSequence", "Reshape")
            ],
            needs=frozenset({"Loop"} | reads_sequences(plan)),
        )

    def lower(self, plan: MapPlan, replacer: Replacer, fit: Fit, context: Context) -> list[ir.Node]:
        return lower_to_scan_outputs(plan, replacer)
