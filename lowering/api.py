"""The Python entry point: ``lowering.lower(model)``."""

from __future__ import annotations

from typing import Literal, overload

import onnx
import onnx_ir as ir

from lowering.errors import LoweringError
from lowering.irutils.collector import collector_paused
from lowering.irutils.naming import FreshNamesPass, fresh
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.scopes import iter_scopes
from lowering.irutils.snapshot import snapshot
from lowering.irutils.walk import graphs_within
from lowering.maps.strategies.unroll import DEFAULT_MAX_UNROLL
from lowering.passes.constant_form import ConstantValueFormPass
from lowering.passes.lower_sequence_maps import STRATEGIES, LowerSequenceMapPass
from lowering.passes.normalize_inserts import NormalizeSequenceInsertPass
from lowering.passes.target_opset import MIN_OPSET, TargetOpsetPass
from lowering.rewrites import Rewrite
from lowering.runtimes.profiles import RUNTIMES

#: How each map is lowered: see :func:`lower`.
Strategy = Literal["auto", "loop"]
#: The runtime the output is for: see :mod:`lowering.runtimes.profiles`.
RuntimeName = Literal["onnxruntime", "openvino", "tract", "mnn", "tvm", "tinygrad", "generic"]


def lower_in_place(
    model: ir.Model,
    *,
    normalize_inserts: bool = True,
    strategy: Strategy = "auto",
    max_unroll: int = DEFAULT_MAX_UNROLL,
    runtime: RuntimeName = "onnxruntime",
    optimize: bool = False,
    target_opset: int | None = None,
    keep_originals: bool = False,
) -> list[Rewrite]:
    """Lower ``model`` in place and say what was rewritten.

    Runs :class:`LowerSequenceMapPass` with ``strategy``, then (unless
    ``normalize_inserts`` is False) :class:`NormalizeSequenceInsertPass`, then
    names the fresh values and nodes. ``keep_originals`` keeps a copy of each
    rewritten node for :meth:`Rewrite.before`. ``optimize`` runs onnxscript's
    optimizer afterwards (constant folding, Ifs on constants inlined, unused
    values removed), when anything was lowered; initializers that are also
    graph inputs stay overridable. ``target_opset`` then declares that
    default-domain opset (see :mod:`lowering.passes.target_opset`).

    All or nothing: if any step raises (:class:`LoweringError` for a model
    that cannot be lowered), ``model`` is left exactly as it was. Each pass
    checks before it changes anything, but a later pass can only find its
    problem after an earlier one ran, so the whole pipeline runs as one
    transaction: the model is kept serialized (weights by reference, not
    copied) and put back on failure; see :func:`lowering.irutils.snapshot.snapshot`.
    """
    _check_options(strategy, max_unroll, runtime, target_opset)
    restore = snapshot(model)
    try:
        return _lower(
            model,
            normalize_inserts=normalize_inserts,
            strategy=strategy,
            max_unroll=max_unroll,
            runtime=runtime,
            optimize=optimize,
            target_opset=target_opset,
            keep_originals=keep_originals,
        )
    except BaseException:
        restore()
        raise


def _check_options(strategy: str, max_unroll: int, runtime: str, target_opset: int | None) -> None:
    """Bad option values are the caller's mistake: ValueError, before any work."""
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if isinstance(max_unroll, bool) or not isinstance(max_unroll, int) or max_unroll < 0:
        raise ValueError(f"max_unroll must be an int of at least 0, not {max_unroll!r}")
    if target_opset is not None:
        highest = onnx.defs.onnx_opset_version()
        if not isinstance(target_opset, int) or not MIN_OPSET <= target_opset <= highest:
            raise ValueError(
                f"target_opset must be from {MIN_OPSET} to {highest} (the installed onnx's "
                f"newest), not {target_opset!r}"
            )


def _lower(
    model: ir.Model,
    *,
    normalize_inserts: bool,
    strategy: Strategy,
    max_unroll: int,
    runtime: RuntimeName,
    optimize: bool,
    target_opset: int | None,
    keep_originals: bool,
) -> list[Rewrite]:
    sequence_maps = LowerSequenceMapPass(
        strategy, max_unroll=max_unroll, runtime=runtime, keep_originals=keep_originals
    )
    inserts = NormalizeSequenceInsertPass(keep_originals=keep_originals, target_opset=target_opset)
    passes: list[ir.passes.PassBase] = [sequence_maps]
    if normalize_inserts:
        passes.append(inserts)
    # PassManager wraps what a pass raises; users want the LoweringError.
    _run(ir.passes.PassManager(passes), model)
    # A model with nothing to lower is left exactly as it came, names included.
    rewritten = bool(sequence_maps.rewrites or inserts.rewrites)
    if rewritten:
        _run(FreshNamesPass(), model)
    if optimize and rewritten:
        # Folding what unrolling made static (Shape of a known tensor, an If
        # on a constant) is what OpenVINO and tract need; it rewrites the
        # whole model, so it is asked for, not done by default.
        optimize_keeping_overridables(model)
    if rewritten:
        # TVM reads a Constant only in its ``value`` form (lowering.passes.constant_form).
        _run(ConstantValueFormPass(), model)
    converted: list[Rewrite] = []
    if target_opset is not None:
        opset = TargetOpsetPass(target_opset)
        _run(opset, model)
        if opset.expanded or opset.adapted:  # relabelling alone makes no new values
            _run(FreshNamesPass(), model)
        converted = [
            Rewrite("the model", "", "TargetOpset", None, [], how, f"{op} x{count}")
            for how, done in (("expanded", opset.expanded), ("adapted", opset.adapted))
            for op, count in sorted(done.items())
        ]
    return [*sequence_maps.rewrites, *inserts.rewrites, *converted]


def optimize_keeping_overridables(model: ir.Model) -> None:
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
    main graph needs it. The optimizer's own ONNX shape inference is off: it
    would fold Shape from shapes ONNX gets wrong (MaxPool with ceil_mode:
    inferred [1,1,3], computed [1,1,2]); it folds from the shapes the passes
    proved (:mod:`lowering.irutils.node_inference`).
    """
    import onnxscript.optimizer  # heavy to import; only when asked for

    graph = model.graph
    overridable = [(v, v.const_value) for v in graph.inputs if v.name in graph.initializers]
    declared = [(v.type, _copy_shape(v.shape)) for v in graph.outputs]
    _forget_symbolic_dims_in_bodies(model)
    for value, _ in overridable:
        value.const_value = None  # the optimizer folds any value with a const_value
    try:
        onnxscript.optimizer.optimize(model, onnx_shape_inference=False)
    finally:
        for value, tensor in overridable:
            value.const_value = tensor
            if value.name not in graph.initializers and value in graph.inputs:
                graph.register_initializer(value)  # the optimizer dropped it as unused
    _restore_required_inputs(model)
    _keep_declared_outputs(graph, declared)
    if _unshare_empty_sequences(graph):
        _run(FreshNamesPass(), model)


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


def _run(pass_: ir.passes.PassBase, model: ir.Model) -> None:
    """Run one pass, raising what it raises rather than onnx_ir's wrapper."""
    try:
        # Paused for our passes only (lowering.irutils.collector): onnxscript's
        # optimizer (``optimize``) runs with the collector as the caller left it.
        with collector_paused():
            pass_(model)
    except ir.passes.PassError as error:
        cause = error.__cause__
        while isinstance(cause, ir.passes.PassError):
            cause = cause.__cause__
        if isinstance(cause, LoweringError):
            raise cause from None
        raise


@overload
def lower(
    model: onnx.ModelProto,
    *,
    normalize_inserts: bool = ...,
    strategy: Strategy = ...,
    max_unroll: int = ...,
    runtime: RuntimeName = ...,
    optimize: bool = ...,
    target_opset: int | None = ...,
    keep_originals: bool = ...,
) -> onnx.ModelProto: ...
@overload
def lower(
    model: ir.Model,
    *,
    normalize_inserts: bool = ...,
    strategy: Strategy = ...,
    max_unroll: int = ...,
    runtime: RuntimeName = ...,
    optimize: bool = ...,
    target_opset: int | None = ...,
    keep_originals: bool = ...,
) -> ir.Model: ...
def lower(
    model: onnx.ModelProto | ir.Model,
    *,
    normalize_inserts: bool = True,
    strategy: Strategy = "auto",
    max_unroll: int = DEFAULT_MAX_UNROLL,
    runtime: RuntimeName = "onnxruntime",
    optimize: bool = False,
    target_opset: int | None = None,
    keep_originals: bool = False,
) -> onnx.ModelProto | ir.Model:
    """Rewrite every SequenceMap in ``model`` into an equivalent Loop.

    Options (the same as :func:`lower_in_place`'s): ``strategy`` "auto"
    picks, for each map, unrolling where its length is static and at most
    ``max_unroll`` (default 16), a Loop with scan outputs where every output
    element has one shape (O(n) in onnxruntime), and the general Loop +
    SequenceInsert form elsewhere; "loop" forces the general form.
    ``runtime`` names the runtime the output is for: where a loop is
    unavoidable it picks a form that runtime runs (a Scan for "tract", a
    Loop with scan outputs for "mnn"), unrolls static maps of any length
    for runtimes with no loop ("tvm", "tinygrad", "generic"), and raises
    LoweringError for a map it can run in no form. Then,
    unless ``normalize_inserts`` is False, every SequenceInsert position is
    put into canonical form (see :mod:`lowering.passes.normalize_inserts`).
    ``optimize`` folds constants afterwards; ``target_opset`` declares an
    older (or newer) default-domain opset.

    Takes an ``onnx.ModelProto`` or an ``onnx_ir.Model`` and returns the same
    kind. A ModelProto is left unchanged and a new one is returned; an
    onnx_ir Model is rewritten in place and returned, like any onnx_ir pass.

    Raises:
        LoweringError: the model cannot be lowered; the message names the
            node, the graph it sits in and the reason. The model is left
            exactly as it was.
        ValueError: an option has a value it cannot take.
        TypeError: ``model`` is neither kind of model, or an option is misspelt.
    """
    if isinstance(model, onnx.ModelProto):
        _check_options(strategy, max_unroll, runtime, target_opset)
        # onnx_ir tensors read through to the proto they came from, and some
        # onnx_ir helpers write to them (get_const_tensor names the tensor):
        # work on a copy so the caller's proto stays exactly as it was. The
        # copy is thrown away on failure, so no transaction is needed.
        working = onnx.ModelProto()
        working.CopyFrom(model)
        ir_model = ir.serde.deserialize_model(working)
        rewrites = _lower(
            ir_model,
            normalize_inserts=normalize_inserts,
            strategy=strategy,
            max_unroll=max_unroll,
            runtime=runtime,
            optimize=optimize,
            target_opset=target_opset,
            keep_originals=keep_originals,
        )
        if not rewrites and target_opset is None:
            # Nothing to lower: hand back the model exactly, not a re-serialization.
            unchanged = onnx.ModelProto()
            unchanged.CopyFrom(model)
            return unchanged
        return ir.serde.serialize_model(ir_model)
    if isinstance(model, ir.Model):
        lower_in_place(
            model,
            normalize_inserts=normalize_inserts,
            strategy=strategy,
            max_unroll=max_unroll,
            runtime=runtime,
            optimize=optimize,
            target_opset=target_opset,
            keep_originals=keep_originals,
        )
        return model
    raise TypeError(
        f"lower() expected onnx.ModelProto or onnx_ir.Model, got {type(model).__name__}"
    )
