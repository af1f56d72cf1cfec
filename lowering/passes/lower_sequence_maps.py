"""Lower every ``SequenceMap`` into plain ops, a Scan, or a ``Loop``.

SequenceMap-17 is defined only as a function that every runtime must expand
itself, and many never do. This pass writes an expansion into the model. It
chooses, for each map, the first strategy (:data:`AUTO`, each behind one
protocol: :mod:`lowering.maps.strategies.protocol`) that fits and whose ops
onnxruntime has kernels for on the element types involved
(:mod:`lowering.runtimes.ort_kernels`):

- ``vectorize`` (:mod:`lowering.maps.strategies.vectorize`): every body op has a
  batching rule; the body runs once on the stacked elements, no loop.
- ``unroll`` (:mod:`lowering.maps.strategies.unroll`): a small static length; one copy
  of the body per element, folded where unrolling made things static.
- ``scan`` (:mod:`lowering.maps.strategies.scan`): split -> map -> concat.
- ``uniform`` (:mod:`lowering.maps.strategies.scan_outputs`): when every output element has
  the same shape, a Loop with scan outputs, its stacks read directly. O(n).
- ``loop`` (:mod:`lowering.maps.strategies.loop`): otherwise, a Loop that appends to
  loop-carried sequences with ``SequenceInsert``. Always correct (the ops of
  the original's own expansion), O(n^2) in onnxruntime.

In the Loop forms, the body graph object itself becomes the Loop body: its
nodes, initializers, Constant nodes, outer-scope references, value names
and nested subgraphs stay as they were (names that would collide across
scopes are renamed by :func:`lowering.irutils.naming.name_fresh`). The new
nodes take the map's node name, doc string and metadata, and the map's
outputs keep their names, so consumers and graph outputs are untouched.

``--runtime NAME`` (:mod:`lowering.runtimes.profiles`) leaves out the forms NAME
cannot run, and refuses a map NAME can run in no form. Whatever the runtime,
each rewrite says which runtimes will reject the form it got.

Every map is planned and checked (:mod:`lowering.maps.plan`) before any is
rewritten, so a model that fails is left unchanged.
"""

from __future__ import annotations

import functools
import logging

import onnx_ir as ir

from lowering.analysis.proven_shapes import prove_model
from lowering.analysis.sequence_length import SequenceLengths
from lowering.irutils.constants import SharedConstants
from lowering.irutils.identities import bypass_made_identities, identities_in
from lowering.irutils.naming import name_fresh
from lowering.irutils.op_facts import PORTABILITY_OPS, is_onnx_op
from lowering.irutils.pins import apply_pin, may_need_pin, plan_pins, read_producers
from lowering.irutils.scopes import Located, find_nodes, link_outer_outputs
from lowering.irutils.walk import GraphLike, has_subgraphs, nodes_under, nodes_within, subgraphs
from lowering.maps.claims import Claims
from lowering.maps.loop_body import Replacer
from lowering.maps.plan import MapPlan, declares_enough, empty_is_read, plan_map
from lowering.maps.strategies.loop import SequenceLoop
from lowering.maps.strategies.protocol import Context, Fit, choose
from lowering.maps.strategies.protocol import Strategy as Form
from lowering.maps.strategies.scan import Scan
from lowering.maps.strategies.scan_outputs import ScanOutputs
from lowering.maps.strategies.unroll import Unroll
from lowering.maps.strategies.vectorize import Vectorize, vectorized_stacks
from lowering.options import (
    DEFAULT_MAX_UNROLL,
    RuntimeName,
    Strategy,
    check_max_unroll,
    check_runtime,
    check_strategy,
    check_target_opset,
)
from lowering.progress import Callback, silent
from lowering.rewrites import LoweringResult, Rewrite
from lowering.runtimes.profiles import EMPTY_STACK, REFUSED_OPS, op_forms, profile, rejections

logger = logging.getLogger(__name__)

#: The forms "auto" asks, in order (:func:`lowering.maps.strategies.protocol.choose`):
#: a map over split tensors is vectorized before it is unrolled, any other after.
AUTO: tuple[Form, ...] = (
    Vectorize(stack_free_only=True),
    Unroll(),
    Vectorize(),
    Scan(),
    ScanOutputs(),
    SequenceLoop(),
    Unroll(anyway=True),
)
#: ``--strategy loop``: the general Loop, unrolled only where the runtime runs no Loop.
LOOP: tuple[Form, ...] = (SequenceLoop(forced=True), Unroll(anyway=True))


class LowerSequenceMapPass(ir.passes.InPlacePass):
    """Replace every SequenceMap, in every scope, with an equivalent form without it.

    It names what it creates, and returns what it rewrote in a
    :class:`~lowering.rewrites.LoweringResult`. A map whose body is a
    function's graph attribute needs :class:`SpecializeFunctionsPass` first;
    the sequence ops unrolling leaves are for :class:`EliminateSequencesPass`
    (both are steps of :func:`lowering.pipeline`).

    Attributes:
        strategy: "auto" picks, for each map, the first strategy that fits
            (the module's docstring): vectorized where every body op has a
            batching rule; unrolled when its length is static and at most
            ``max_unroll``; one Scan for split -> map -> concat; a Loop with
            scan outputs when its output shapes are uniform; the general
            Loop + SequenceInsert form otherwise. "loop" forces the general
            form everywhere.
        max_unroll: The longest static length that "auto" unrolls (0: never).
        runtime: The runtime the output is for (:mod:`lowering.runtimes.profiles`):
            where a loop is unavoidable, a form it runs is chosen (a Scan
            for tract, a Loop with scan outputs for MNN); a runtime with
            neither Loop nor Scan gets every map of static length unrolled
            whatever its length (so does a map of static length that would
            otherwise need a loop the runtime lacks), and a map that it can
            run in no form is refused with a :class:`LoweringError` before
            any map is rewritten.
        keep_originals: Keep a copy of each map as it was, for reports
            (:meth:`lowering.rewrites.Rewrite.before`).
        progress: Told ``("planning maps", i, n)`` and ``("lowering maps", i, n)``
            as it goes (:mod:`lowering.progress`; the default says nothing).
    """

    def __init__(
        self,
        strategy: Strategy = "auto",
        *,
        max_unroll: int = DEFAULT_MAX_UNROLL,
        runtime: RuntimeName = "onnxruntime",
        keep_originals: bool = False,
        target_opset: int | None = None,
        progress: Callback = silent,
    ) -> None:
        super().__init__()
        self.strategy = check_strategy(strategy)
        self.target_opset = check_target_opset(target_opset)
        self.max_unroll = check_max_unroll(max_unroll)
        self.runtime = profile(check_runtime(runtime))
        self.keep_originals = keep_originals
        self.progress = progress

    def call(self, model: ir.Model) -> LoweringResult:
        planned = self._plan(model)
        if planned is None:
            return LoweringResult(model, modified=False)
        rewrites = self._rewrite(model, *planned)
        _pin(model, planned[0], rewrites)
        name_fresh(model)
        return LoweringResult(model, modified=True, rewrites=rewrites)

    def _rewrite(
        self,
        model: ir.Model,
        plans: list[MapPlan],
        functions: list[ir.Function],
        context: Context,
        choices: list[tuple[Fit, str]],
    ) -> list[Rewrite]:
        """Rewrite the planned maps, innermost first; returns what was rewritten."""
        originals = [
            ir.serde.serialize_node(plan.node) if self.keep_originals else None for plan in plans
        ]
        body_ops = [_portability_ops(plan.body) for plan in plans]
        empty_read = [empty_is_read(plan) for plan in plans]  # (before the readers change)
        # The Identities already there, the user's, stay whatever they copy.
        written_by_user = identities_in(model)
        # Planned and checked: from here on the model changes.
        link_outer_outputs(model)
        for opset_imports in (model.opset_imports, *(f.opset_imports for f in functions)):
            _import_default_domain(opset_imports)
        replaced: dict[int, list[ir.Node]] = {}
        replacer = Replacer()
        for done, index in enumerate(_rewrite_order(plans)):
            self.progress("lowering maps", done, len(plans))
            plan, (fit, _) = plans[index], choices[index]
            replaced[index] = fit.strategy.lower(plan, replacer, fit, context)
            logger.debug("Lowered SequenceMap %r (%s)", plan.node.name, fit.strategy.name)
        replacer.finish()
        # The rewrites' Identities that copy for nothing (a concat read as the
        # stack itself, a copy of a body's Identity) go.
        removed = bypass_made_identities(model, written_by_user)
        if removed:
            for index, nodes in replaced.items():
                replaced[index] = [node for node in nodes if node not in removed]
        reasons = [
            "; ".join(filter(None, [why, context.notes.get(plan.node)]))
            for plan, (_, why) in zip(plans, choices, strict=True)
        ]
        return [
            Rewrite(
                scope=plan.located.scope.description,
                node_name=plan.node.name or "",
                op_type="SequenceMap",
                original=originals[index],
                written=replaced[index],
                strategy=choices[index][0].strategy.name,
                reason=reasons[index],
                rejecting=functools.partial(
                    _rejected,
                    replaced[index],
                    body_ops[index],
                    vectorized=choices[index][0].strategy.name == "vectorize",
                    empty_read=empty_read[index],
                    forms=choices[index][0].forms,
                ),
            )
            for index, plan in enumerate(plans)
        ]

    def _plan(
        self, model: ir.Model
    ) -> tuple[list[MapPlan], list[ir.Function], Context, list[tuple[Fit, str]]] | None:
        """Plan every map and choose its form, changing nothing; None if there are none.

        Returns the plans (outer maps first), the functions that hold maps,
        the run's context and each plan's chosen fit with its reason.

        Raises:
            LoweringError: A map is malformed, or the target runtime runs no form of it.
        """
        found = find_nodes(model, lambda node: is_onnx_op(node, "SequenceMap"))
        if not found:
            return None
        # The functions holding maps, at any depth of their subgraphs.
        functions = list(
            dict.fromkeys(loc.scope.function for loc in found if loc.scope.function is not None)
        )
        # (Untyped values typed too, where a map leaves types to inference:
        # a pass of per-node inference over the whole model.)
        proof = prove_model(model, fill=not all(declares_enough(loc.node) for loc in found))
        interfaces: dict[GraphLike, set[str]] = {}  # per graph, the dims its inputs declare
        plans = [plan_map(loc, _opset(model, loc), proof, interfaces) for loc in found]
        shared = SharedConstants()  # one per value per graph, for every map of this run
        for plan in plans:
            plan.constants = shared
        context = Context(
            self.runtime,
            self.max_unroll,
            SequenceLengths(proof),
            model.graph,
            target_opset=self.target_opset,
            scan_reads_stacks="Loop" in self.runtime.lacks,
            claims=Claims(lambda: prove_model(model, fill=True)),
        )
        strategies = LOOP if self.strategy == "loop" else AUTO
        # In the order of each graph, as they are rewritten (_rewrite_order): a
        # map that reads a vectorized map's output will read its stack.
        choices = []
        for done, plan in enumerate(plans):
            self.progress("planning maps", done, len(plans))
            choices.append(choose(plan, context, strategies))
            context.upstream.update(vectorized_stacks(plan, choices[-1][0]))
        return plans, functions, context, choices

    def ensures(self, model: ir.Model) -> None:
        left = find_nodes(model, lambda node: is_onnx_op(node, "SequenceMap"))
        if left:
            raise ir.passes.PostconditionError(
                f"{len(left)} SequenceMap node(s) left, first in {left[0].scope.description}"
            )


def _pin(model: ir.Model, plans: list[MapPlan], rewrites: list[Rewrite]) -> None:
    """Pin what the rewrites wrote or read that ONNX may size wrong, where its
    shape is computed (:mod:`lowering.irutils.pins`): the copies of the body's
    nodes on static shapes, and the tensors read in place of sequences. Every
    form chosen was judged to need no other (:mod:`lowering.maps.claims`)."""
    nodes = [
        (node, plan.opset, rewrite.written)
        for plan, rewrite in zip(plans, rewrites, strict=True)
        for node in (*rewrite.written, *read_producers(rewrite.written))
    ]
    if not any(may_need_pin(n) for node, _, _ in nodes for n in (node, *nodes_under(node))):
        return
    for pin in plan_pins(nodes, prove_model(model, fill=True)):
        apply_pin(pin, model.graph)


def _rewrite_order(plans: list[MapPlan]) -> list[int]:
    """The plans' indices in the order to rewrite them: innermost graphs first
    (an outer map's uniformity was judged on its body as written, and each
    rewrite only touches its own body and scope), and within a graph in its
    order, so that a map reading another's output finds it rewritten.

    ``plans`` come a scope at a time, outer scopes first (``find_nodes``).
    """
    groups: list[list[int]] = []
    for index, plan in enumerate(plans):
        owner = plan.located.scope.owner
        if groups and plans[groups[-1][0]].located.scope.owner is owner:
            groups[-1].append(index)
        else:
            groups.append([index])
    return [index for group in reversed(groups) for index in group]


def _portability_ops(graph: ir.Graph) -> set[str]:
    """The loop and sequence ops in ``graph`` and the graphs nested in it."""
    return {
        node.op_type
        for node in nodes_within(graph)
        if node.op_type in PORTABILITY_OPS and is_onnx_op(node, node.op_type)
    }


def _rejected(
    new_nodes: list[ir.Node],
    had: set[str],
    vectorized: bool = False,
    empty_read: bool = True,
    forms: tuple[str, ...] = (),
) -> list[tuple[str, str]]:
    """The runtimes that cannot run the loop or sequence ops that lowering a
    map added (those its body already had aside), and for a vectorized form
    the ops some profile refuses or gets wrong as it writes them (a scatter
    with a reduction; on an empty stack, where the original goes on past a
    map over no element: ``empty_read``), and the forms its fit names
    (``forms``: a Loop growing a ragged Concat), as :func:`rejections` says.
    """
    added: set[str] = set()
    refused: set[str] = set(forms) & REFUSED_OPS
    for node in new_nodes:
        if node.graph is None:  # removed again, such as a SequenceConstruct read back
            continue
        if not is_onnx_op(node, node.op_type):
            continue
        if node.op_type in PORTABILITY_OPS:
            added.add(node.op_type)
        if vectorized and _as_refused(node, empty_read):
            refused.update(form for form in op_forms(node) if form in REFUSED_OPS)
        if has_subgraphs(node):
            for graph in subgraphs(node):
                added |= _portability_ops(graph)
    return rejections((added - had) | refused)


def _as_refused(node: ir.Node, empty_read: bool) -> bool:
    """Whether ``node`` is as the profiles refuse it: a scatter only with a
    reduction, an op onnxruntime 1.12-1.31 get wrong on an empty stack only
    where that stack is read."""
    if node.op_type in EMPTY_STACK:
        return empty_read
    if not node.op_type.startswith("Scatter"):
        return True
    reduction = node.attributes.get("reduction")
    return reduction is not None and reduction.value != "none"


def _opset(model: ir.Model, located: Located) -> int:
    """The default-domain opset that the map's scope imports."""
    return located.scope.opset(model) or 17


def _import_default_domain(opset_imports: dict[str, int]) -> None:
    """Make sure nodes in the "" domain resolve where only "ai.onnx" is imported.

    New nodes use the canonical spelling of the default domain: ONNX's
    checker knows no schema under "ai.onnx", though runtimes accept it.
    """
    if "" not in opset_imports and "ai.onnx" in opset_imports:
        opset_imports[""] = opset_imports["ai.onnx"]
