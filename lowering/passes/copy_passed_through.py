"""A copy of each input a Loop or Scan body returns as it is, for a runtime that reads it wrong.

Exporters return a loop's unchanged values straight from the body's inputs:
tf2onnx carries a ``while_loop``'s limits and the tensor it slices that
way, and a body may return its condition or its iteration number. ONNX
allows it; OpenVINO's ONNX frontend does not. 2026.4 refuses the Loop ("The
provided loop body graph canonical inputs size (6), does not match the sum
of loop carried dependencies and two mandatory inputs (4)"), and the Scan
("Number of Scan node inputs (3) is less than required (4)"); with each such
output a copy, it runs them right (tests/test_passed_through.py).
So for a runtime whose profile says so
(:meth:`lowering.runtimes.profiles.Runtime.passes_through_wrong`), every
body, at any depth, returns a copy::

    Loop(M, c, v_0, a_0)                    Loop(M, c, v_0, a_0)
      body (i, cond, v, a):                   body (i, cond, v, a):
        a' = Add(a, 1)                 ->       a'    = Add(a, 1)
        => (cond, v, a')                        cond' = Identity(cond)
                                                v'    = Identity(v)
                                                => (cond', v', a')

An Identity computes its input, so the loop means the same. Each output
gets its own copy (an input returned twice gets two), typed as the input
is. Every body is planned before
any is changed. It runs after the passes that may bypass an Identity (the
optimizer), so nothing removes the copies again.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from lowering.irutils.naming import fresh, name_fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_loop
from lowering.irutils.scopes import Located, find_nodes
from lowering.options import RuntimeName, check_runtime
from lowering.rewrites import LoweringResult, Rewrite
from lowering.runtimes.profiles import profile

#: What a Rewrite of this pass says as its strategy (:mod:`lowering.summary` counts them).
STRATEGY = "copied"


@dataclasses.dataclass(frozen=True)
class _Planned:
    """A loop whose body returns inputs, at ``positions`` among its outputs."""

    located: Located
    body: ir.Graph
    positions: tuple[int, ...]


class CopyPassedThroughPass(ir.passes.InPlacePass):
    """Make each Loop or Scan body output that is a body input a copy, for ``runtime``.

    Does nothing for a runtime that runs such bodies right. Each loop changed
    is a :class:`Rewrite` (strategy ``"copied"``, reason: which inputs, and
    what the runtime does with them).
    """

    def __init__(self, runtime: RuntimeName = "onnxruntime") -> None:
        super().__init__()
        self.wrong = profile(check_runtime(runtime)).passes_through_wrong()

    def call(self, model: ir.Model) -> LoweringResult:
        if self.wrong is None:
            return LoweringResult(model, modified=False)
        planned = [p for p in map(_plan, find_nodes(model, is_loop)) if p is not None]
        rewrites = [self._copy(p) for p in planned]
        if rewrites:
            name_fresh(model)
        return LoweringResult(model, modified=bool(rewrites), rewrites=rewrites)

    def _copy(self, planned: _Planned) -> Rewrite:
        body, written, said = planned.body, [], []
        for k in planned.positions:
            passed = body.outputs[k]
            copy = fresh(new_node("Identity", [passed]))
            fresh(copy.outputs[0], "passed")
            copy.outputs[0].type, copy.outputs[0].shape = passed.type, passed.shape
            body.append(copy)
            body.outputs[k] = copy.outputs[0]
            written.append(copy)
            said.append(f"input {passed.name!r} as output {k}")
        node = planned.located.node
        return Rewrite(
            scope=planned.located.scope.description,
            node_name=node.name or "",
            op_type=node.op_type,
            original=None,
            written=written,
            strategy=STRATEGY,
            reason=f"its body returns {', '.join(said)}, which {self.wrong}: now a copy",
        )


def _plan(located: Located) -> _Planned | None:
    attribute = located.node.attributes.get("body")
    if attribute is None or attribute.is_ref() or attribute.type != ir.AttributeType.GRAPH:
        return None
    body = attribute.as_graph()
    inputs = set(body.inputs)
    positions = tuple(k for k, value in enumerate(body.outputs) if value in inputs)
    return _Planned(located, body, positions) if positions else None
