"""The vectorize strategy's entry points: whether a map can be vectorized, and the rewrite.

:class:`Vectorize`'s fit is a dry run of the :class:`~.batcher.Batcher`,
detached and kept on the fit; :func:`lower_by_vectorizing` attaches it
again and makes the map's outputs read the stacks it returns (the
SequenceAt, SequenceLength and ConcatFromSequence readers read the stack
itself; a split is built only for any other reader). A ragged result (the
body on a tensor split by lengths, :mod:`.ragged`) is read the same way: a
ConcatFromSequence along its ragged axis reads it directly, any other
reader reads it split by the same lengths::

    out = ConcatFromSequence<axis = a>(ys)   ->   out = Identity(Y)
    ys                                       ->   SplitToSequence<axis = a>(Y, L)

Maps are rewritten in the order of their graph, so that a map reading
another one's output finds it as a split of that one's stack, and reads
the stack (:func:`vectorized_stacks` tells the choice what it will be)::

    m1 = SequenceMap(parts) <Neg>        ->  Y1 = Neg(X)
    m2 = SequenceMap(m1) <Abs>               Y2 = Abs(Y1)
    y  = ConcatFromSequence(m2)              y  = Y2
"""

from __future__ import annotations

import dataclasses
import logging

import onnx_ir as ir

from lowering.analysis.proven_shapes import proven_outputs
from lowering.irutils.naming import fresh
from lowering.irutils.node_inference import Operand
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.pins import may_need_pin
from lowering.irutils.static_values import small_constant
from lowering.maps.claims import first_unpinned, seeded
from lowering.maps.loop_body import Replacer, same_length_inputs, typed
from lowering.maps.plan import MapPlan, empty_is_read, tensor_dtype
from lowering.maps.stack_reads import (
    count_of,
    read_stack_in_readers,
)
from lowering.maps.strategies.protocol import Context, Decline, Fit
from lowering.maps.strategies.vectorize.batcher import Batcher
from lowering.maps.strategies.vectorize.batcher import Decline as NotBatched
from lowering.maps.strategies.vectorize.body_values import Ragged
from lowering.runtimes.profiles import op_forms

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Vectorized(Fit):
    """A map found vectorizable: its rewrite, built and detached, and whether
    every sequence input is a split tensor (the stack costs no copy)."""

    batcher: Batcher | None = None
    stack_free: bool = False


class Vectorize:
    """The body once on the stacked elements (:mod:`lowering.maps.strategies.vectorize`).

    ``auto`` asks it twice: first for maps whose inputs are split tensors
    (``stack_free_only``), before unrolling; then for the rest, after.
    """

    name = "vectorize"
    form = "vectorized"

    def __init__(self, stack_free_only: bool = False) -> None:
        self.stack_free_only = stack_free_only

    def fit(self, plan: MapPlan, context: Context, declined: list[Decline]) -> Fit | Decline:
        if plan.node not in context.vectorized:
            context.vectorized[plan.node] = _vectorized(plan, context, self)
        found = context.vectorized[plan.node]
        assert isinstance(found, (Vectorized, Decline)), "judged by this strategy"
        if isinstance(found, Decline):  # said by the second asking, after unrolling
            return dataclasses.replace(found, said=not self.stack_free_only)
        if self.stack_free_only and not found.stack_free:
            return Decline(self.form, "its elements are stacked", said=False)
        if (claim := context.claims(plan)) is not None:
            return Decline(self.form, claim)
        return dataclasses.replace(found, strategy=self)

    def lower(self, plan: MapPlan, replacer: Replacer, fit: Fit, context: Context) -> list[ir.Node]:
        assert isinstance(fit, Vectorized), "Vectorize lowers what it fitted"
        assert fit.batcher is not None, "a fit keeps its dry run"
        return lower_by_vectorizing(plan, replacer, fit.batcher)


def _vectorized(plan: MapPlan, context: Context, strategy: Vectorize) -> Vectorized | Decline:
    """Whether ``plan``'s map can be vectorized, changing nothing: the rewrite
    built and detached, or which node stops it. It reads the stacks of the
    maps to be vectorized before it (``context.upstream``) where it reads
    their outputs, and emits no op that only a later opset than
    ``context.target_opset`` has."""
    form = strategy.form
    if not same_length_inputs(plan):
        return Decline(form, "its sequence inputs may differ in length (the first one's counts)")
    rewrite = Batcher(plan, plan.opset, context.upstream, context.target_opset)
    try:
        rewrite.results = rewrite.run()
        claim = _batched_claim(rewrite, context)  # (attached: its nodes read the model's values)
    except NotBatched as why:
        return Decline(form, str(why))
    except Exception as error:  # a bug in a rule must not stop the lowering
        logger.warning("Vectorizing %r failed: %r", plan.node.name, error, exc_info=True)
        return Decline(form, f"a batching rule failed ({error!r})")
    finally:
        rewrite.detach()
    if claim is not None:
        return Decline(form, claim)
    if any(rewrite.raggeds):
        how = (
            "its elements, split by lengths, are read from the split tensor (row by row, "
            "or reduced by segment)"
        )
    elif rewrite.stack_free:
        how = (
            "its input is a split tensor"
            if len(rewrite.stacks) == 1
            else "its inputs are split tensors"
        )
    else:
        how = "its elements have one static shape and are stacked"
    fit = Vectorized(
        strategy,
        f"every op in its body has a batching rule, and {how}",
        writes=emitted_ops(plan, rewrite),
        computes=tuple(node.op_type for node in plan.body),
        forms=tuple(
            dict.fromkeys(
                f for node in (*rewrite.shared_nodes, *rewrite.created) for f in op_forms(node)[1:]
            )
        ),
        empty_read=empty_is_read(plan),
        batcher=rewrite,
        stack_free=rewrite.stack_free,
    )
    rewrite.settle()
    return fit


def _batched_claim(rewrite: Batcher, context: Context) -> str | None:
    """Why a node the dry run wrote on the stacks (a body op batched, or moved
    out as it is) would show ONNX's inference a shape it may get wrong and
    no pin fixes, as the model's proof proves its operands
    (:mod:`lowering.maps.claims`): a PRelu broadcasting a stack of unknown
    length, which onnxruntime's rule sizes only from static shapes."""
    if not any(may_need_pin(n) for n in rewrite.nodes):
        return None
    proof = seeded(rewrite.nodes, context.claims.proof(), {})
    for node in rewrite.nodes:  # (in order: each step as proven_outputs proves it)
        operands = [proof.operand(v) for v in node.inputs]
        for value, got in zip(node.outputs, proven_outputs(node, operands, rewrite.opset)):
            declared = proof.operand(value)  # (what the batcher declares of a stack)
            if declared is None or got.shape is not None:
                declared = Operand(got.dtype, got.shape, small_constant(value))
            proof.known[value] = declared._replace(dtype=got.dtype or declared.dtype)
    return first_unpinned(rewrite.nodes, proof, rewrite.opset, all_used=True)


def vectorized_stacks(plan: MapPlan, fit: Fit) -> dict[ir.Value, tuple[ir.Value, Ragged | None]]:
    """What a map found vectorizable stacks each of its outputs as (the result,
    and how a ragged one is split), for the maps that read them."""
    if not isinstance(fit, Vectorized) or fit.batcher is None:
        return {}
    rewrite = fit.batcher
    return {
        output: (result, ragged)
        for output, result, ragged in zip(
            plan.node.outputs, rewrite.results, rewrite.result_raggeds, strict=True
        )
    }


def emitted_ops(plan: MapPlan, rewrite: Batcher) -> list[tuple[str, ir.DataType | None]]:
    """The ops, with the element type of their first input, that vectorizing
    ``plan``'s map adds beyond copies of the body's own ops (which run on the
    types they ran on before), for a check against a runtime's kernels; then
    the result is the output's: its SplitToSequence, Reshape or Transpose.
    """
    ops = list(rewrite.emitted)
    for (type_, _), _output in zip(plan.result_types, plan.node.outputs, strict=True):
        dtype = tensor_dtype(type_)
        ops += [(op, dtype) for op in ("SplitToSequence", "Reshape", "Transpose", "Identity")]
    return list(dict.fromkeys(ops))


def lower_by_vectorizing(plan: MapPlan, replacer: Replacer, rewrite: Batcher) -> list[ir.Node]:
    """Rewrite ``plan``'s map as the package sketches; returns the nodes that replace it.

    ``rewrite``: the map's detached rewrite from :class:`Vectorize`'s fit,
    attached again where the map's inputs are still those it was built on.
    """
    # Built on inputs since replaced (another map's output, now a split of its stack)?
    current = list(plan.node.inputs)
    if all(a is b for a, b in zip(rewrite.read_inputs, current, strict=True)):
        rewrite.reattach()
        results = rewrite.results
    else:
        rewrite = Batcher(plan, plan.opset, target_opset=rewrite.lowest_opset)
        try:
            results = rewrite.run()
        except NotBatched:
            rewrite.detach()
            raise
    new_nodes = rewrite.commit(results)
    node = plan.node
    sequences: list[ir.Value | None] = []
    for output, result, ragged, (type_, shape) in zip(
        node.outputs, results, rewrite.result_raggeds, plan.result_types, strict=True
    ):
        if ragged is not None:
            split = _read_ragged(output, result, ragged, type_, shape)
            new_nodes += split
            sequences.append(split[0].outputs[0] if split else None)
            continue
        stack_shape = None if shape is None else ir.Shape([rewrite.batch_dim, *shape])
        stack = typed(result, (type_, stack_shape))
        # SequenceAt, SequenceLength and concats read the stack (stack_reads' rules), the
        # rest the split; an output only the graph returns has no reader (no count built).
        if output.uses():
            count_nodes = count_of(stack, rewrite.batch_dim)
            count = count_nodes[-1].outputs[0]
            constants = read_stack_in_readers(output, stack, type_, shape, count, plan.opset)
            if count.uses():
                new_nodes += count_nodes
            new_nodes += constants
        if output.uses() or output.is_graph_output():
            split = fresh(new_node("SplitToSequence", [stack], {"axis": 0, "keepdims": 0}))
            new_nodes.append(split)
            sequences.append(split.outputs[0])
        else:
            sequences.append(None)
    replacer.replace(plan, new_nodes, sequences)
    # The stacks it shares with other maps, where it read them (placed by commit).
    shared = [node for node in rewrite.shared_nodes if node.graph is not None]
    return [*shared, *new_nodes]


def _read_ragged(
    output: ir.Value,
    result: ir.Value,
    ragged: Ragged,
    type_: ir.TypeProtocol,
    shape: ir.Shape | None,
) -> list[ir.Node]:
    """Let the concats of ``output`` along its ragged axis read ``result`` (the
    body on the split tensor) itself; returns the split for any other reader."""
    if shape is not None:
        dims = [None if i == ragged.axis else d for i, d in enumerate(shape)]
        typed(result, (type_, ir.Shape(dims)))
    else:
        typed(result, (type_, None))
    rank = None if shape is None else len(shape)
    for user, index in list(output.uses()):
        if index != 0 or not is_onnx_op(user, "ConcatFromSequence") or rank is None:
            continue
        axis = user.attributes.get_int("axis", 0)
        if user.attributes.get_int("new_axis", 0) or not -rank <= axis < rank:
            continue
        if axis % rank == ragged.axis:
            user.attributes.clear()
            user.op_type = "Identity"
            user.replace_input_with(0, result)
    if not output.uses() and not output.is_graph_output():
        return []
    split = fresh(new_node("SplitToSequence", [result, ragged.split], {"axis": ragged.axis}))
    return [split]
