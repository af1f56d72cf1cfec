"""Rewrite the sequences Loops accumulate as tensors: scan outputs or a carried Concat.

Exporters write ``list.append`` in a loop as a Loop carrying a sequence from
``SequenceEmpty`` (:mod:`lowering.loops.accumulators` has the pattern and
the forms, :mod:`lowering.loops.rewrite` the sketches). Each one whose
readers a form serves becomes a stack the Loop builds as a scan output
(elements of one static shape, appended every iteration) or a tensor it
grows by Concat, with the elements' lengths where a reader needs them; the
readers read those instead. Every loop is planned before any is changed.
Ragged elements (a concat along a dim they may differ in) get the Concat
only for a target without sequences (``--runtime`` openvino, tract, ..., or
``--target-opset`` below 13): the Concat copies O(n^2) bytes, and
onnxruntime runs the sequence as written faster at 1,000 rows
(docs/performance.md).

A sequence the graph returns stays as it is built, where the target has
sequences. A ``--runtime`` without sequence ops, or a ``--target-opset``
whose Loop carries none (below 13), cannot return it: that is refused in
one line naming the loop, rather than written unchanged. For such a target,
an accumulator no form serves is a :class:`~lowering.rewrites.Kept` saying
why ("'acc' stays a sequence: the element's rank is not proven"), which the
summary, ``--report`` and ``--runtime``'s refusal say.
"""

from __future__ import annotations

import functools
import logging

import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, prove_model
from lowering.errors import LoweringError
from lowering.irutils.identities import bypass_made_identities, identities_in
from lowering.irutils.naming import name_fresh
from lowering.irutils.op_facts import PORTABILITY_OPS, is_onnx_op
from lowering.irutils.pins import apply_pin, plan_pins
from lowering.irutils.scopes import Located, find_nodes
from lowering.irutils.walk import nodes_within
from lowering.loops.accumulators import Accumulator, Stays, bound_dims, plan_accumulators
from lowering.loops.rewrite import rewrite_loop
from lowering.options import RuntimeName, check_runtime
from lowering.rewrites import Kept, LoweringResult, Rewrite
from lowering.runtimes.profiles import RAGGED_CONCAT, profile, rejections

logger = logging.getLogger(__name__)

#: The first opset whose Loop carries sequences.
LOOP_SEQUENCES_SINCE = 13

#: What an accumulator loop and its readers run.
_SEQUENCE_READS = frozenset(
    {"SequenceEmpty", "SequenceInsert", "SequenceAt", "SequenceLength", "ConcatFromSequence"}
)


class LowerAccumulatorLoopsPass(ir.passes.InPlacePass):
    """Rewrite every accumulator loop a form serves; refuse a returned one the target cannot hold.

    Each rewritten Loop is a :class:`Rewrite` (op_type "Loop", strategy
    "stack", "concat" or both, reason: what each accumulator became).
    """

    def __init__(self, runtime: RuntimeName = "onnxruntime", target_opset: int | None = None):
        super().__init__()
        self.runtime = profile(check_runtime(runtime))
        self.target_opset = target_opset
        # The target runs the sequence ops as written (docs/performance.md: a carried
        # Concat of ragged elements copies O(n^2) bytes, slower than onnxruntime's sequence).
        self.has_sequences = not self.runtime.missing(_SEQUENCE_READS) and (
            target_opset is None or target_opset >= LOOP_SEQUENCES_SINCE
        )

    def call(self, model: ir.Model) -> LoweringResult:
        loops = find_nodes(model, lambda n: is_onnx_op(n, "Loop"))
        if not loops:
            return LoweringResult(model, modified=False)
        plans, kept, proof = self._plan(model, loops)
        users = identities_in(model)  # the user's Identities stay, whatever they copy
        rewrites = [_rewrite(located, opset, chosen) for located, opset, chosen in plans]
        # What an element is computed from, now exposed, pinned where ONNX sizes it wrong
        # (each has a pin: plan_accumulator checked).
        doubted = [
            (node, opset, rewrite.written)
            for (_, opset, chosen), rewrite in zip(plans, rewrites, strict=True)
            for accumulator in chosen
            for node in accumulator.doubted
        ]
        for pin in plan_pins(doubted, proof):
            apply_pin(pin, model.graph)
        if rewrites:
            # A concat read as the carried tensor itself, and the like, copy for nothing.
            removed = bypass_made_identities(model, users)
            for rewrite in rewrites:
                rewrite.written[:] = [node for node in rewrite.written if node not in removed]
            name_fresh(model)
        return LoweringResult(model, modified=bool(rewrites), rewrites=rewrites, kept=kept)

    def _plan(
        self, model: ir.Model, loops: list[Located]
    ) -> tuple[list[tuple[Located, int, list[Accumulator]]], list[Kept], Proof]:
        """The accumulators to rewrite in each loop, what the summary says of
        those that stay, and the proof they were planned on; before anything
        changes."""
        proof = prove_model(model, fill=True)
        bound = bound_dims(model.graph)
        plans: list[tuple[Located, int, list[Accumulator]]] = []
        kept: list[Kept] = []
        for located in loops:
            opset = located.scope.opset(model) or 1
            known = bound if located.scope.function is None else {}
            accumulators, stays = plan_accumulators(located.node, proof, opset, known)
            for returned in (a for a in accumulators if a.returned):
                self._check_returned(located, returned)
            chosen = self._chosen(accumulators, stays)
            if not self.has_sequences:  # (else the sequence runs as written: nothing to say)
                kept += [_kept(located, stay) for stay in stays]
            if chosen:
                plans.append((located, opset, chosen))
        return plans, kept, proof

    def _chosen(self, accumulators: list[Accumulator], stays: list[Stays]) -> list[Accumulator]:
        """The accumulators rewritten for this target; ``stays`` gains those the
        target would miscompute."""
        chosen = [
            a for a in accumulators if not a.returned and not (a.ragged and self.has_sequences)
        ]
        if (wrong := self.runtime.miscomputed([RAGGED_CONCAT])) is not None:
            stays += [Stays(a.output, wrong) for a in chosen if a.ragged]
            chosen = [a for a in chosen if not a.ragged]
        return chosen

    def _check_returned(self, located: Located, accumulator: Accumulator) -> None:
        """Refuse a sequence the graph returns where the target cannot hold one."""
        name = accumulator.output.name
        lacking = self.runtime.missing({"SequenceInsert", "SequenceEmpty"})
        if lacking:
            raise LoweringError(
                f"the graph returns the sequence {name!r} it accumulates, and --runtime "
                f"{self.runtime.name} has no sequences ({lacking[0]})",
                node=located.node,
                scope=located.scope.description,
            )
        if self.target_opset is not None and self.target_opset < LOOP_SEQUENCES_SINCE:
            raise LoweringError(
                f"the graph returns the sequence {name!r} it accumulates, and Loop-"
                f"{self.target_opset} carries no sequence (Loop carries them since opset "
                f"{LOOP_SEQUENCES_SINCE})",
                node=located.node,
                scope=located.scope.description,
            )


def _rewrite(located: Located, opset: int, chosen: list[Accumulator]) -> Rewrite:
    """Rewrite ``chosen``, accumulators of one loop; what the summary says of it."""
    written = rewrite_loop(located.node, chosen, opset)
    loop = next(n for n in written if n.op_type == "Loop")
    forms = sorted({a.form for a in chosen})
    return Rewrite(
        scope=located.scope.description,
        node_name=located.node.name or "",
        op_type="Loop",
        original=None,
        written=written,
        strategy="+".join(forms),
        reason="accumulated " + "; ".join(a.describe() for a in chosen),
        rejecting=functools.partial(_rejected, loop, any(a.ragged for a in chosen)),
    )


def _kept(located: Located, stays: Stays) -> Kept:
    said = stays.describe()
    logger.info("Loop %r in %s: %s", located.node.name, located.scope.description, said)
    return Kept(located.scope.description, located.node.name or "", said, op_type="Loop")


def _rejected(loop: ir.Node, ragged: bool) -> list[tuple[str, str]]:
    return rejections(_portability_ops(loop) | ({RAGGED_CONCAT} if ragged else set()))


def _portability_ops(loop: ir.Node) -> set[str]:
    """The loop and sequence ops the rewritten Loop still holds, itself included."""
    ops = {"Loop"}
    for graph in (
        a.as_graph() for a in loop.attributes.values() if a.type == ir.AttributeType.GRAPH
    ):
        ops |= {n.op_type for n in nodes_within(graph) if n.op_type in PORTABILITY_OPS}
    return ops
