"""``--optimize``: onnxscript's optimizer, kept from what it gets wrong here.

Folding what unrolling made static (Shape of a known tensor, an If on a
constant) is what OpenVINO and tract need. onnxscript's optimizer does it,
but it rewrites the whole model, so it is asked for, not done by default;
and around it this pass keeps what the optimizer would otherwise break:
overridable initializers, declared outputs, empty sequences' element
shapes, the Loop's required inputs, and dims named in bodies.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import onnx_ir as ir

from lowering.irutils.checker import full_check_problem
from lowering.irutils.naming import fresh, name_fresh
from lowering.irutils.node_inference import may_be_seen_wrong
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.scopes import iter_scopes
from lowering.irutils.snapshot import snapshot
from lowering.irutils.static_values import disputed_reading
from lowering.irutils.walk import graphs_within, model_nodes, nodes_within
from lowering.options import check_extra
from lowering.rewrites import LoweringResult


class OptimizePass(ir.passes.InPlacePass):
    """Fold constants with onnxscript's optimizer, keeping overridable initializers overridable.

    See :func:`optimize_keeping_overridables`. Needs the ``optimize`` extra
    (onnxscript): without it, making the pass raises
    :class:`~lowering.options.MissingExtraError`.
    """

    def __init__(self) -> None:
        super().__init__()
        check_extra("optimize")

    def call(self, model: ir.Model) -> LoweringResult:
        refused = optimize_keeping_overridables(model)
        if refused is None:
            return LoweringResult(model, modified=True)
        return LoweringResult(model, modified=False, not_optimized=refused)


def optimize_keeping_overridables(model: ir.Model) -> str | None:
    """Run onnxscript's optimizer, without folding initializers that are graph inputs.

    An initializer that is also a graph input is a default the caller may
    override at run time, not a constant; onnxscript's optimizer folds it
    anyway (``Add(pos, len)`` with ``pos = 0`` becomes ``len``, so feeding
    ``pos = -1`` no longer counts). The optimizer folds every value that has
    a ``const_value``, so those values' tensors are hidden while it runs and
    put back afterwards; they stay registered as initializers, in order::

        pos: input + initializer 0     pos: input, no value       pos: input + initializer 0
        p = Add(pos, len)         ->   p = Add(pos, len)     ->   p = Add(pos, len)
                        hide the tensor          optimize          put the tensor back

    Subgraphs cannot have graph inputs that are initializers, so only the
    main graph needs it. Nodes that runtimes compute two ways are fenced off
    (:func:`_fence_disputed_nodes`). The optimizer's own ONNX shape inference is off: it
    would fold Shape from shapes ONNX gets wrong (MaxPool with ceil_mode:
    inferred [1,1,3], computed [1,1,2]); it folds from the shapes the passes
    proved (:mod:`lowering.irutils.node_inference`). Its rewrite rules are
    :func:`_sound_rewrite_rules`.

    The result must then pass the ONNX checker (:func:`_checker_problem`);
    if it does not, the model is put back as it was before the optimizer
    ran, and the checker's complaint is returned (None when optimized).
    """
    restore = snapshot(model)
    graph = model.graph
    overridable = [(v, v.const_value) for v in graph.inputs if v.name in graph.initializers]
    declared = [(v.type, _copy_shape(v.shape)) for v in graph.outputs]
    _forget_symbolic_dims_in_bodies(model)
    for value, _ in overridable:
        value.const_value = None  # the optimizer folds any value with a const_value
    fenced = _fence_disputed_nodes(model)
    try:
        _run_onnxscript_optimizer(model)
    finally:
        if fenced:
            _unfence(model)
        for value, tensor in overridable:
            value.const_value = tensor
            if value.name not in graph.initializers and value in graph.inputs:
                graph.register_initializer(value)  # the optimizer dropped it as unused
    _restore_required_inputs(model)
    _keep_declared_outputs(graph, declared)
    if _unshare_empty_sequences(graph):
        name_fresh(model)
    problem = _checker_problem(model)
    if problem is not None:
        restore()
        return f"the optimized model fails the ONNX checker, so it was not kept: {problem}"
    return None


#: The domain disputed nodes are moved to while the optimizer runs: it folds
#: and rewrites no op it does not know.
_FENCE_DOMAIN = "lowering.fenced"


def _fence_disputed_nodes(model: ir.Model) -> bool:
    """Hide from the optimizer every node that runtimes compute two ways, and
    the Reshapes that may pin a shape ONNX gets wrong.

    onnxscript folds a node of constants by onnx.reference, which reads
    ``Squeeze(c, [])`` as ONNX does (no dim squeezed) where onnxruntime
    squeezes every unit dim (:func:`lowering.irutils.static_values.disputed_reading`);
    folded, the model would mean one of the two. Moved to a domain of its
    own for the run, such a node is an op the optimizer does not know, so
    it keeps it, and what it reads, as they are::

        y = Squeeze(Constant [[1]], Constant [])      y = Squeeze(Constant [[1]], Constant [])
            -> lowering.fenced::Squeeze -> optimize -> back to the ONNX domain

    Returns whether any node was fenced.
    """
    fenced = [
        node for node in model_nodes(model) if disputed_reading(node) is not None or _may_pin(node)
    ]
    for node in fenced:
        node.domain = _FENCE_DOMAIN  # only default-domain nodes are disputed: they go back to ""
    if fenced:
        model.opset_imports[_FENCE_DOMAIN] = 1
        for function in model.functions.values():
            if any(node.domain == _FENCE_DOMAIN for node in nodes_within(function)):
                function.opset_imports[_FENCE_DOMAIN] = 1
    return bool(fenced)


def _may_pin(node: ir.Node) -> bool:
    """A Reshape of an output ONNX may size wrong: maybe a pin to its computed
    shape (:mod:`lowering.irutils.pins`), which the optimizer
    would merge into the next Reshape, where onnxruntime reads ONNX's wrong
    size again (a Scan output allocated [26] for [28])."""
    data = node.inputs[0] if is_onnx_op(node, "Reshape") and node.inputs else None
    producer = data.producer() if data is not None else None
    return (
        producer is not None
        and is_onnx_domain(producer.domain)
        and may_be_seen_wrong(producer.op_type)
    )


def _unfence(model: ir.Model) -> None:
    """Put fenced nodes, and the copies the optimizer's inliner made of them, back."""
    for node in model_nodes(model):
        if node.domain == _FENCE_DOMAIN:
            node.domain = ""
    model.opset_imports.pop(_FENCE_DOMAIN, None)
    for function in model.functions.values():
        function.opset_imports.pop(_FENCE_DOMAIN, None)


def _run_onnxscript_optimizer(model: ir.Model, rules: Sequence[Any] | None = None) -> None:
    """``onnxscript.optimizer.optimize(model, onnx_shape_inference=False)``, pass for
    pass (onnxscript 0.7's ``optimize_ir``), with ``rules`` (default
    :func:`_sound_rewrite_rules`) as its rewrite rules.

    ``optimize`` takes no rule set: it always applies onnxscript's default
    rules, some of which are wrong for zero-sized dims (:func:`_sound_rewrite_rules`).
    ``tests/test_optimize.py`` checks that, given the default rules, this
    is the optimizer that ``optimize`` runs.
    """
    from onnx_ir.passes import common  # heavy to import; only when asked for
    from onnxscript import rewriter
    from onnxscript.optimizer import _constant_folding

    if rules is None:
        rules = _sound_rewrite_rules()
    folding = _constant_folding.FoldConstantsPass(
        shape_inference=False,
        input_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
        output_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
    )
    rounds = ir.passes.PassManager(
        [
            folding,
            rewriter.RewritePass(rules),
            common.RemoveUnusedNodesPass(),
            common.RemoveUnusedFunctionsPass(),
            common.RemoveUnusedOpsetsPass(),
        ],
        steps=2,
        early_stop=True,
    )
    ir.passes.Sequential(
        common.InlinePass(),
        rounds,
        common.RemoveUnusedNodesPass(),
        common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common.LiftSubgraphInitializersToMainGraphPass(),
        common.DeduplicateInitializersPass(),
        common.CommonSubexpressionEliminationPass(),
        common.OutputFixPass(),
        common.NameFixPass(),
    )(model)


#: onnxscript rewrite rules left out of :func:`_sound_rewrite_rules`, and why.
UNSOUND_REWRITE_RULES = {
    # Flatten(x) -> Reshape(x, [0, -1]), or [d0, d1] from the output's dims,
    # read with 0 as "copy": [0, -1] of x[0,3] is refused ("product of 0 ..
    # with -1"), Flatten<0> of x[0] becomes [1, 0] ("invalid position of 0"),
    # a known output [2, 0] copies x's dim 1 (2x3 elements into [2, 3]); and
    # two Flattens of one x both name their target "x/shape": one is lost.
    "Flatten2Reshape",
    # Slice(x, 0:h) and Slice(x, h:d) on the last axis -> Split<num_outputs = 2>:
    # Split-18's form, written into models of any opset (the checker refuses
    # it below 18: "Unrecognized attribute num_outputs"), and it matches one
    # Slice for both, so a zero-width Slice of x[1,0] becomes a Split of x.
    "SlicesSplit",
    # Reshape(x, computed) -> Reshape<allowzero=1>(x, [-1, 0, ..]) from the
    # output's dims: -1 with a 0 is refused; allowzero before opset 14 too.
    # Replaced by a variant for targets without a 0.
    "MaterializeReshapeShape",
}


def _sound_rewrite_rules() -> list[Any]:
    """onnxscript's default rewrite rules, without UNSOUND_REWRITE_RULES, plus
    MaterializeReshapeShape for targets it can spell without a 0.

    Those rules read a Reshape target's 0 as a size, or write one with a -1:
    Reshape takes a 0 as "copy the input's dim" (without allowzero) and
    cannot infer a -1 next to a 0 (with it), so what they write is refused,
    or wrong, exactly when a dim is zero-sized::

        Flatten(x: [0,3])  ->  Reshape(x, [0, -1])    "product of 0 with -1"
    """
    from onnxscript import rewriter

    kept = [r for r in rewriter._DEFAULT_REWRITE_RULES if r.name not in UNSOUND_REWRITE_RULES]
    return [*kept, *_materialize_without_zeros()]


@functools.cache
def _materialize_without_zeros() -> list[Any]:
    """onnxscript's MaterializeReshapeShape where every materialized dim is > 0 or -1.

    A constant target replaces the computed one when the output's shape is
    known but for at most one dim (that one -1); with a 0 in it, the target
    needs allowzero = 1 (opset 14), and then no -1: it is left computed.
    """
    try:
        from onnxscript.rewriter.rules.common import _materialize_reshape_shape as materialize
    except ImportError:  # an onnxscript without the rule
        return []

    class MaterializeNonZeroReshapeShape(materialize.MaterializeReshapeShape):
        def check(self, context, data, shape):
            result = super().check(context, data, shape)
            if result and 0 in self._new_dims:
                return result.fail("A 0 dim needs allowzero, which cannot go with -1.")
            return result

        def rewrite(self, op, data, shape):
            target = op.Constant(value=ir.tensor(self._new_dims, dtype=ir.DataType.INT64))
            return op.Reshape(data, target)  # no 0 in the target: allowzero changes nothing

    return [MaterializeNonZeroReshapeShape.rule()]


def _checker_problem(model: ir.Model) -> str | None:
    """What the ONNX checker (full_check: strict shape inference) says of ``model``,
    None if it passes.

    The main graph's large initializers are serialized as placeholders and
    checked as graph inputs of their type (:mod:`lowering.irutils.checker`):
    serialized as they are, they would be copied.
    """
    graph = model.graph
    large = {
        name: value.const_value
        for name, value in graph.initializers.items()
        if value.const_value is not None and value.const_value.size > _CHECKED_INITIALIZER_SIZE
    }
    try:
        for name, tensor in large.items():  # a placeholder, not copied (lowering.snapshot)
            graph.initializers[name].const_value = ir.ExternalTensor(
                "", 0, 0, tensor.dtype, shape=ir.Shape(tensor.shape.numpy()), name=name
            )
        proto = ir.serde.serialize_model(model)
    finally:
        for name, tensor in large.items():
            graph.initializers[name].const_value = tensor
    return full_check_problem(proto, lambda t: t.name in large)


#: Initializers of more elements than this are checked by type only (:func:`_checker_problem`).
_CHECKED_INITIALIZER_SIZE = 4096


def _copy_shape(shape: ir.Shape | None) -> ir.Shape | None:
    return None if shape is None else ir.Shape(shape.dims)


def _keep_declared_outputs(
    graph: ir.Graph, declared: list[tuple[ir.TypeProtocol | None, ir.Shape | None]]
) -> None:
    """Give each graph output back the type it declared, unless the optimizer refined it.

    When onnxscript's common-subexpression elimination merges a node that
    computes a graph output into an equal node, the output becomes the
    survivor's value, renamed, with the survivor's declared type. Both
    computations are equal, so both types are true of the value, and
    one may only be more precise than the other, except where the value
    constrains no shape at all: an empty sequence's element shape is whatever
    it was declared to be, and two equal ``SequenceEmpty`` may declare
    ``seq(int64[])`` and ``seq(int64[2])``. The model's interface is what the
    user declared; a refinement of it (a dim found static, as folding finds
    ``float[?,?]`` to be ``float[1,2]``) is kept, anything else is put back.
    """
    for value, (type_, shape) in zip(graph.outputs, declared, strict=True):
        if not _refines(value.type, value.shape, type_, shape):
            value.type = type_
            value.shape = _copy_shape(shape)


def _refines(
    new_type: ir.TypeProtocol | None,
    new_shape: ir.Shape | None,
    old_type: ir.TypeProtocol | None,
    old_shape: ir.Shape | None,
) -> bool:
    """True when the new declaration says all the old one says (and maybe more)."""
    if old_type is not None and new_type != old_type:
        return False
    if old_shape is None:
        return True
    if new_shape is None or new_shape.rank() != old_shape.rank():
        return False
    # A dim the old declaration names (3, or "N") must stay; an unknown one may become anything.
    return all(
        new == old
        for new, old in zip(new_shape.dims, old_shape.dims, strict=True)
        if isinstance(old, int) or old.value is not None
    )


def _unshare_empty_sequences(graph: ir.Graph) -> bool:
    """Let no node read an empty sequence through another value's element shape.

    An empty sequence has no elements, so every element shape declared for it
    is true, and two equal ``SequenceEmpty`` nodes may declare different
    ones. onnxscript's common-subexpression elimination merges them anyway
    (it compares op, inputs and attributes only), and the readers of the one
    removed now read the survivor, with its declaration: ONNX's type checker
    then sees ``Identity`` (which it types as its input) or ``SequenceAt``
    return a rank their own output contradicts. A graph output keeps
    its own declaration and producer; what reads the sequence reads a
    ``SequenceEmpty`` that declares no element shape, which agrees with every
    reader (ONNX infers no element shape for ``SequenceEmpty`` either)::

        y20 = SequenceEmpty()  seq(int64[])        y20 = SequenceEmpty()  seq(int64[])
        y22 = Identity(y20)    seq(int64[?])  ->   e   = SequenceEmpty()  seq(int64, no shape)
        a   = SequenceAt(y20)  int64[2]            y22 = Identity(e)      seq(int64[?])
                                                   a   = SequenceAt(e)    int64[2]

    An empty sequence that is not a graph output only loses its element
    shape. Only the main graph needs this: elimination does not enter
    subgraphs (and functions are inlined before it). Returns True when a
    ``SequenceEmpty`` was added.
    """
    added = False
    for node in list(graph):
        if not is_onnx_op(node, "SequenceEmpty"):
            continue
        value = node.outputs[0]
        if value.shape is None or not value.uses():
            continue
        if not value.is_graph_output():
            value.shape = None
            continue
        readers = ir.Value(type=value.type)
        empty = ir.Node(
            "",
            "SequenceEmpty",
            inputs=(),
            attributes=[ir.Attr(a.name, a.type, a.value) for a in node.attributes.values()],
            outputs=[readers],
            version=node.version,
        )
        graph.insert_after(node, fresh(empty, "empty"))
        for use in list(value.uses()):
            use.node.replace_input_with(use.idx, readers)
        added = True
    return added


def _forget_symbolic_dims_in_bodies(model: ir.Model) -> None:
    """Make every named dim in a subgraph or function unknown, before the optimizer runs.

    A dim named ``R`` in a function, or in a branch or loop body, means one
    size per call or per run of it. Unrolling copies bodies, and the
    optimizer inlines functions, with their shapes as they are, so copies
    over elements of different sizes then share ``R``; the optimizer's shape
    inference spreads ``R`` to the values each copy reads, and onnxruntime
    reuses one buffer for tensors of different shapes ("Shape mismatch
    attempting to re-use buffer")::

        o: int64[R,2] in each copy  ->  e_1, e_2: int64[R,2]   (e_1, e_2: [2,2], [3,2])

    The main graph's own values keep their names: they hold for the model.
    """
    graphs = [g for f in model.functions.values() for g in graphs_within(f)]
    graphs += list(graphs_within(model.graph))[1:]
    for graph in graphs:
        for value in (*graph.inputs, *graph.outputs):
            _forget_symbolic_dims(value)
        for node in graph:
            for value in node.outputs:
                _forget_symbolic_dims(value)


def _forget_symbolic_dims(value: ir.Value) -> None:
    shape = value.shape
    if shape is not None and any(isinstance(d, ir.SymbolicDim) and d.value for d in shape):
        value.shape = ir.Shape([None if isinstance(d, ir.SymbolicDim) else d for d in shape])


# Ops whose trailing optional inputs must still be spelled out ("") up to
# this count: Loop(M, cond) takes both, even when cond is left empty.
_REQUIRED_INPUT_SLOTS = {"Loop": 2}


def _restore_required_inputs(model: ir.Model) -> None:
    """Put back the empty inputs onnxscript's optimizer trims from the end.

    It drops a Loop's empty condition (``Loop(M, "")`` becomes ``Loop(M)``),
    which the checker and onnxruntime refuse: Loop has two required slots.
    """
    for scope in iter_scopes(model):
        for node in scope.owner:
            slots = _REQUIRED_INPUT_SLOTS.get(node.op_type)
            if slots and is_onnx_domain(node.domain) and len(node.inputs) < slots:
                node.resize_inputs(slots)
