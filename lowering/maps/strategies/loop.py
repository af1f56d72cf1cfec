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
so n elements cost O(n^2). :mod:`lowering.maps.strategies.uniform` avoids that where
element shapes are uniform.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
from lowering.maps.plan import (
    MapPlan,
    Replacer,
    body_signature,
    keep_going,
    loop_header,
    make_loop,
    open_body,
    typed,
)


def lower_to_sequence_loop(plan: MapPlan, replacer: Replacer) -> list[ir.Node]:
    """Rewrite ``plan``'s map as sketched above; returns the nodes that replace it."""
    body = plan.body
    iteration, cond = body_signature(plan)
    accumulators = [typed(fresh(ir.Value(), "acc"), t) for t in plan.output_types]
    _, results = open_body(plan, iteration, cond)
    body.inputs.extend(accumulators)
    appends = []
    for acc, result, t in zip(accumulators, results, plan.output_types, strict=True):
        append = fresh(new_node("SequenceInsert", [acc, result]))
        typed(fresh(append.outputs[0], "acc_next"), t)
        appends.append(append)
    stop = keep_going(cond)
    body.extend([*appends, stop])
    body.outputs.extend([stop.outputs[0], *(a.outputs[0] for a in appends)])

    header, trip_count, always = loop_header(plan)
    empties = []
    for t in plan.result_types:
        empty = fresh(new_node("SequenceEmpty", [], {"dtype": t[0].dtype.value}))
        typed(fresh(empty.outputs[0], "empty"), (ir.SequenceType(t[0]), None))
        empties.append(empty)
    loop = make_loop(
        plan, [trip_count, always, *(e.outputs[0] for e in empties)], len(plan.node.outputs)
    )
    new_nodes = [*header, *empties, loop]
    replacer.replace(plan, new_nodes, list(loop.outputs))
    return new_nodes
