"""Put every SequenceInsert position into one canonical form.

SequenceInsert-11 takes an optional position: int32 or int64, in [-n, n],
and by the spec a scalar. Runtimes disagree at the edges: onnxruntime
follows the spec (n appends) and reads the first element of a non-scalar;
``onnx.reference`` computes ``(p + n) % n``, so n inserts at the front and
an empty sequence divides by zero; onnx-mlir assumes a scalar. In canonical
form every runtime agrees:

- a position that means "append" is removed (no third input);
- any other position is an int64 scalar in [0, n), wherever it is valid.

A position outside [-n, n] stays outside, so that a runtime refuses the
insert as it refuses the original. The rewrite adds only what a position
needs::

    constant p, length n known     ->  Constant<int64 scalar (p + n if p < 0 else p)>
                                       or no position at all when that is n
                                       (out of range: an error)
    constant p >= 0, n unknown     ->  guarded, as a dynamic p       (it may be n)
    constant p < 0, n unknown      ->  wrap_negative(Constant<int64 p>, SequenceLength(seq))
    dynamic p                      ->  p' = Cast<to=int64>(p)          if p is int32
                                       p' = Reshape(p', [])            if p is not a scalar
                                       guarded, from opset 13:

        n      = SequenceLength(seq)      (a Constant where n is known)
        is_end = Equal(p', n)
        out    = If(is_end)
                   then: SequenceInsert(seq, x)                       (appends)
                   else: SequenceInsert(seq, x, wrap_negative(p', n))

                                       below 13 (an If cannot return a sequence
                                       there), only the wrap, outside any If:
                                       a p equal to n stays n
    p = SequenceLength(seq)        ->  no position at all (appends)

:func:`~lowering.irutils.positions.wrap_negative` is p + n where p is in
[-n, 0), else p (so a p below -n stays out of range); it is left out where
p's sign is known. A constant is an initializer
(that is not also a graph input) or a Constant node, at any scope, or what
Squeeze, Unsqueeze, Reshape, Cast, Identity and integer arithmetic (Add, Sub,
Mul, Div, Neg, Min, Max) compute from constants
(:mod:`lowering.irutils.static_values`); a folded one becomes a Constant, and the
ops that computed it go where nothing else reads them. The length n is
known through :mod:`lowering.analysis.sequence_length`. A constant that is
statically out of range is an error. Positions already in canonical form,
including the forms above, are left alone, so the pass is idempotent.

``--runtime`` (:mod:`lowering.runtimes.profiles`): no form is written that
the runtime lacks an op of. A guard it cannot run gives way to the form
below 13; a position that every form needs SequenceLength for (dynamic, or
a negative constant over a length not known) is left as written, and the
result says why (:attr:`InsertsResult.kept`, which the pipeline passes on to
the summary and the report). Each rewrite names the runtimes that reject the
ops it added, as the map lowering's rewrites do.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

import numpy as np
import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, prove_model
from lowering.analysis.sequence_length import SequenceLengths
from lowering.errors import LoweringError
from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.dead_code import remove_unread
from lowering.irutils.naming import adopt_name, fresh, name_fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.positions import WRAP_OPS, typed_scalar, wrap_negative, wrapped
from lowering.irutils.scopes import GraphLike, Located, find_nodes
from lowering.irutils.static_values import FOLDABLE_OPS, static_array
from lowering.irutils.walk import named_subgraphs
from lowering.options import RuntimeName, check_runtime, check_target_opset
from lowering.passes.lower_sequence_maps import _rejected
from lowering.rewrites import Kept, LoweringResult, Rewrite
from lowering.runtimes.profiles import Runtime, profile

logger = logging.getLogger(__name__)

_INT64 = ir.DataType.INT64


class NormalizeSequenceInsertPass(ir.passes.InPlacePass):
    """Rewrite every SequenceInsert position, in every scope, into canonical form.

    It names what it creates and returns what it rewrote, and what it left
    as written, in an :class:`InsertsResult`.

    Attributes:
        keep_originals: Keep a copy of each node as it was, for reports.
        target_opset: The default-domain opset the model will declare in the
            end (``--target-opset``), if not its own: below 13 no guard is
            emitted, since an If cannot return a sequence there.
        runtime: The runtime the output is for (:mod:`lowering.runtimes.profiles`):
            no form it lacks an op of is written. A position that would be
            guarded gets its form below 13 instead; one that every form
            needs SequenceLength for (a dynamic or negative position over a
            length not known) is left as written, and the result says why.
    """

    def __init__(
        self,
        *,
        keep_originals: bool = False,
        target_opset: int | None = None,
        runtime: RuntimeName = "onnxruntime",
    ) -> None:
        super().__init__()
        self.keep_originals = keep_originals
        self.target_opset = check_target_opset(target_opset)
        self.runtime = profile(check_runtime(runtime))

    def call(self, model: ir.Model) -> InsertsResult:
        found = [
            loc
            for loc in find_nodes(model, lambda node: is_onnx_op(node, "SequenceInsert"))
            if len(loc.node.inputs) > 2 and loc.node.inputs[2] is not None
        ]
        if not found:
            return InsertsResult(model, modified=False)
        lengths = SequenceLengths()
        proof = None
        if any(_needs_types(loc.node.inputs[2]) for loc in found):
            proof = prove_model(model, fill=True)  # (functions: as their calls give them)
        scopes = _Scopes(model, self.target_opset)
        # Check every constant first, so that a model with an error is not changed.
        plans = [_Position(loc, lengths, proof, scopes, self.runtime) for loc in found]
        rewrites, kept = [], []
        for plan in plans:
            scope, name = plan.located.scope.description, plan.located.node.name or ""
            if plan.form == "keep":
                logger.info(
                    "SequenceInsert %r in %s: its position is left as written (%s)",
                    name,
                    scope,
                    plan.reason,
                )
                kept.append(Kept(scope, name, plan.reason))
                continue
            original = ir.serde.serialize_node(plan.located.node) if self.keep_originals else None
            new_nodes = plan.apply()
            if new_nodes is None:
                continue
            written = [*new_nodes, plan.located.node]
            rewrites.append(
                Rewrite(
                    scope=scope,
                    node_name=name,
                    op_type="SequenceInsert",
                    original=original,
                    written=written,
                    reason=plan.reason,
                    # As the map lowering says it (one mechanism); the append a
                    # guard adds repeats the node's own op.
                    rejecting=functools.partial(_rejected, written, {"SequenceInsert"}),
                )
            )
        if rewrites:
            name_fresh(model)
        return InsertsResult(model, modified=bool(rewrites), rewrites=rewrites, kept=kept)

    def ensures(self, model: ir.Model) -> None:
        """Every position left is an int64 scalar, where its type is declared (and
        the runtime has what every form needs: else some are left as written)."""
        if any(self.runtime.missing(ops) for ops in _FORM_OPS.values()):
            return
        for located in find_nodes(model, lambda node: is_onnx_op(node, "SequenceInsert")):
            inputs = located.node.inputs
            p = inputs[2] if len(inputs) > 2 else None
            if p is None or p.dtype is None:
                continue
            if p.dtype != _INT64 or (p.shape is not None and p.shape.rank() != 0):
                raise ir.passes.PostconditionError(
                    f"SequenceInsert {located.node.name!r} in {located.scope.description} "
                    f"keeps a position of type {p.dtype}{'' if p.shape is None else list(p.shape)}"
                )


@dataclasses.dataclass
class InsertsResult(LoweringResult):
    """What :class:`NormalizeSequenceInsertPass` did.

    Its :attr:`~lowering.rewrites.LoweringResult.kept` lists the inserts left
    as written, since the runtime lacks an op that every form of their
    position needs.
    """


def _needs_types(position: ir.Value | None) -> bool:
    return (
        position is not None
        and static_array(position) is None
        and (position.dtype is None or position.shape is None)
    )


class _Position:
    """One SequenceInsert's position: what it is, checked, the form it gets; and its rewrite."""

    def __init__(
        self,
        located: Located,
        lengths: SequenceLengths,
        proof: Proof | None,
        scopes: _Scopes,
        runtime: Runtime,
    ):
        self.located = located
        self.scopes = scopes
        node = located.node
        sequence, _, position = node.inputs
        if sequence is None or position is None:  # (the pass only finds given positions)
            raise self._fail("its sequence input is empty")
        self.sequence: ir.Value = sequence
        self.position: ir.Value = position
        self.length = lengths(self.sequence)
        self.value = static_array(self.position)
        self.dtype, self.shape = self.position.dtype, self.position.shape
        # The type of the sequence after the insert, for the values a guard adds:
        # the input sequence's elements may have another shape than x.
        typed = proof.typed(self.position) if proof is not None else None
        if typed is not None and self.value is None:
            self.dtype = self.dtype or typed[0].dtype
            self.shape = self.shape or typed[1]
        after = proof.typed(node.outputs[0]) if proof is not None else None
        if node.outputs[0].type is not None:
            after = (node.outputs[0].type, node.outputs[0].shape)
        self.sequence_type = after
        if self.sequence_type is None and self.sequence.type is not None:
            self.sequence_type = (self.sequence.type, None)
        if self.value is not None:
            self._check_constant(self.value)
        self.wraps = self._wraps()
        self.form, self.reason = self._choose(runtime)

    def _fail(self, reason: str) -> LoweringError:
        return LoweringError(reason, node=self.located.node, scope=self.located.scope.description)

    def _check_constant(self, value: np.ndarray) -> None:
        if value.dtype not in (np.int32, np.int64):
            raise self._fail(
                f"its position is a {value.dtype} constant; SequenceInsert takes int32 or int64"
            )
        if value.size != 1:
            raise self._fail(
                f"its position is a constant of shape {list(value.shape)}; "
                "SequenceInsert takes a single position"
            )
        p, n = int(value.reshape(())), self.length
        if n is not None and not -n <= p <= n:
            raise self._fail(
                f"position {p} is out of range for a sequence of length {n}; "
                f"SequenceInsert accepts positions in [{-n}, {n}]"
            )

    def _choose(self, runtime: Runtime) -> tuple[str, str]:
        """The first of :meth:`_forms` whose ops ``runtime`` has, and why the one
        before it (a guard) was passed over; "keep" (left as written) where it
        has none of them."""
        lacked: list[str] = []
        for form in self._forms():
            lacks = runtime.missing(_FORM_OPS.get(form, frozenset()))
            if not lacks:
                if not lacked:
                    return form, ""
                return form, f"{_UNGUARDED}: {runtime.name} has no {lacked[0]}"
            lacked.append(lacks[0])
        return "keep", f"{runtime.name} has no {', '.join(dict.fromkeys(lacked))}"

    def _forms(self) -> list[str]:
        """The forms this position may take, the preferred first.

        "canonical": as it is; "drop": no position (it appends); "fix": an
        int64 scalar (a Constant, or a Cast and a Reshape as needed); "wrap":
        fixed, then :func:`wrap_negative`'s p + n where p is in [-n, 0);
        "guard": fixed, then an append where p == n, else the insert (wrapped
        where p may be negative).
        """
        if self.value is not None:
            p, n = int(self.value.reshape(())), self.length
            if n is not None:  # in range: checked
                if (p + n if p < 0 else p) == n:
                    return ["drop"]
                return ["canonical" if p >= 0 and self._canonical_constant() else "fix"]
            if p < 0:
                return ["wrap"]
            # p may be n at run time, 0 included: on an empty sequence 0 is
            # the end, and onnx.reference's (p + n) % n divides by 0.
            fix = "canonical" if self._canonical_constant() else "fix"
            return ["guard", fix] if self._can_guard() and not self._guarded() else [fix]
        producer = self.position.producer()
        if (
            producer is not None
            and is_onnx_op(producer, "SequenceLength")
            and producer.inputs[0] is self.sequence
        ):
            return ["drop"]  # inserting at len(seq) appends
        if self._guarded() or _known_below_length(self.position, self.sequence):
            return ["canonical"]
        unguarded = "wrap" if self.wraps else "canonical"
        # Below 13 an If cannot return a sequence: p == n stays n.
        return ["guard", unguarded] if self._can_guard() else [unguarded]

    def _canonical_constant(self) -> bool:
        """An int64 scalar Constant (a value folded through Squeeze, Cast, ... becomes one)."""
        value = self.value
        return (
            value is not None
            and value.dtype == np.int64
            and value.ndim == 0
            and constant_array(self.position) is not None
        )

    def _needs_fix(self) -> bool:
        return self.dtype != _INT64 or self.shape is None or self.shape.rank() != 0

    def _wraps(self) -> bool:
        """Whether the position may be negative, so that its form wraps it (a
        constant: only where the length is not known)."""
        if self.value is not None:
            return int(self.value.reshape(())) < 0 and self.length is None
        return self._needs_fix() or not _known_non_negative(self.position, self.sequence)

    def apply(self) -> list[ir.Node] | None:
        """Rewrite the position; returns the new nodes, or None if it was canonical (or kept)."""
        # An earlier insert's guard may have taken over the value this one
        # reads (its If output replaces the insert's): read the node again.
        sequence = self.located.node.inputs[0]
        assert sequence is not None, "checked when planned"
        self.sequence = sequence
        if self.form in ("canonical", "keep"):
            return None
        if self.form == "drop":
            return self._drop_position()
        nodes, p = self._fixed()
        if self.form == "guard":
            return self._guard(nodes, p)
        if self.form == "wrap":
            length = _sequence_length(self.sequence, self.length)
            negative = self.value is not None  # (a constant is wrapped only when negative)
            nodes += [length, *wrap_negative(p, length.outputs[0], negative=negative)]
        return self._use(nodes) if nodes else None

    def _fixed(self) -> tuple[list[ir.Node], ir.Value]:
        """The position as an int64 scalar, and the nodes that make it so: a
        Constant (in [0, n) where n is known), or Cast and Reshape as needed."""
        if self.value is not None:
            k, n = int(self.value.reshape(())), self.length
            if n is not None and k < 0:
                k += n
            elif self._canonical_constant():
                return [], self.position
            constant = _constant_node(k)
            return [constant], constant.outputs[0]
        nodes: list[ir.Node] = []
        p = self.position
        if self.dtype != _INT64:
            cast = fresh(new_node("Cast", [p], {"to": _INT64}))
            p = fresh(cast.outputs[0], "position")
            p.dtype, p.shape = _INT64, self.shape
            nodes.append(cast)
        if self.shape is None or self.shape.rank() != 0:
            scalar_shape = constant_node(np.array([], np.int64), "scalar_shape")
            reshape = fresh(new_node("Reshape", [p, scalar_shape.outputs[0]]))
            p = typed_scalar(reshape.outputs[0], _INT64, "position")
            nodes += [scalar_shape, reshape]
        return nodes, p

    def _can_guard(self) -> bool:
        """Whether the scope's opset lets an If return a sequence (13 and up)."""
        return (self.scopes.opset.get(self.located.scope.owner) or 0) >= 13

    def _guard(self, nodes: list[ir.Node], p: ir.Value) -> list[ir.Node]:
        """Append where p == n, insert at p (made non-negative) elsewhere::

            n      = SequenceLength(seq)
            is_end = Equal(p, n)
            out    = If(is_end)
                       then: SequenceInsert(seq, x)                     (appends)
                       else: SequenceInsert(seq, x, wrap_negative(p, n))

        The node itself moves into the else branch; the If takes over its
        output and its name.
        """
        node, owner = self.located.node, self.located.scope.owner
        length = _sequence_length(self.sequence, self.length)
        n = length.outputs[0]
        equal = fresh(new_node("Equal", [p, n]))
        is_end = typed_scalar(equal.outputs[0], ir.DataType.BOOL, "is_end")
        inner: list[ir.Node] = []
        if self.wraps:
            inner = wrap_negative(p, n)
            p = inner[-1].outputs[0]
        append = fresh(new_node("SequenceInsert", [self.sequence, node.inputs[1]]))
        appended = self._sequence_typed(fresh(append.outputs[0], "appended"))
        output = node.outputs[0]
        guard = fresh(
            new_node(
                "If",
                [is_end],
                {
                    "then_branch": ir.Graph([], [appended], nodes=[append], name="append"),
                    "else_branch": ir.Graph([], [], nodes=[], name="insert"),
                },
            )
        )
        result = guard.outputs[0]
        result.type, result.shape = output.type, output.shape
        self._sequence_typed(result)
        owner.insert_before(node, [*nodes, length, equal, guard])
        output.replace_all_uses_with(result, replace_graph_outputs=True)
        name, output.name = output.name, None
        adopt_name(result, name)
        self._sequence_typed(fresh(output, "inserted"))
        owner.remove(node)
        old = self.position
        node.replace_input_with(2, p)
        remove_unread(old, FOLDABLE_OPS)
        else_branch = guard.attributes["else_branch"].as_graph()
        else_branch.extend([*inner, node])
        else_branch.outputs.append(output)
        return [*nodes, length, equal, guard]

    def _sequence_typed(self, value: ir.Value) -> ir.Value:
        if value.type is None and self.sequence_type is not None:
            value.type, value.shape = self.sequence_type
        return value

    def _guarded(self) -> bool:
        """True for the else branch of this pass's own If: there p != n, and p is canonical."""
        parent = self.scopes.parent.get(self.located.scope.owner)
        if parent is None or parent[1] != "else_branch" or not is_onnx_op(parent[0], "If"):
            return False
        equal = parent[0].inputs[0].producer() if parent[0].inputs[0] is not None else None
        if equal is None or not is_onnx_op(equal, "Equal"):
            return False
        p, n = equal.inputs
        if not _is_length_of(n, self.sequence):
            return False
        wrap = wrapped(self.position)
        reads_p = self.position is p or (wrap is not None and wrap.p is p)
        return reads_p and _known_non_negative(self.position, self.sequence)

    def _use(self, nodes: list[ir.Node]) -> list[ir.Node]:
        node = self.located.node
        self.located.scope.owner.insert_before(node, nodes)
        old = self.position
        node.replace_input_with(2, nodes[-1].outputs[0])
        remove_unread(old, FOLDABLE_OPS)
        return nodes

    def _drop_position(self) -> list[ir.Node]:
        node = self.located.node
        old = self.position
        node.resize_inputs(2)
        remove_unread(old, FOLDABLE_OPS)
        return []


#: The ops each form adds besides Constant, Cast and Reshape (and the node's
#: own SequenceInsert, which a guard's append repeats), checked against
#: ``--runtime`` before anything changes; "drop" and "fix" add none of them.
_FORM_OPS = {
    "wrap": frozenset({"SequenceLength", *WRAP_OPS}),
    "guard": frozenset({"SequenceLength", "Equal", "If", *WRAP_OPS}),
}
#: A guard passed over for the form below 13, as the rewrite's reason says it.
_UNGUARDED = "not guarded against a position equal to the length (onnxruntime appends there)"


def _is_length_of(value: ir.Value | None, sequence: ir.Value) -> bool:
    """Whether ``value`` is ``SequenceLength(sequence)``, or a constant that is its static length."""
    node = value.producer() if value is not None else None
    if node is not None and is_onnx_op(node, "SequenceLength") and node.inputs[0] is sequence:
        return True
    constant = static_array(value) if value is not None else None
    known = SequenceLengths()(sequence) if constant is not None else None
    return (
        known is not None
        and constant is not None
        and constant.size == 1
        and (int(constant.reshape(())) == known)
    )


def _known_below_length(value: ir.Value, sequence: ir.Value) -> bool:
    """True for this pass's wrap of a negative constant p: in [0, n) where p is valid
    (so never n), and out of range where p is."""
    wrap = wrapped(value)
    return (
        wrap is not None
        and wrap.negative
        and _is_length_of(wrap.n, sequence)
        and value.dtype == _INT64
        and value.shape is not None
        and value.shape.rank() == 0
    )


def _known_non_negative(value: ir.Value, sequence: ir.Value) -> bool:
    """True where ``value`` cannot be negative, or is this pass's wrap of a position
    (non-negative wherever the position is valid)."""
    constant = static_array(value)
    if constant is not None:
        return bool((constant >= 0).all())
    node = value.producer()
    if node is None or not is_onnx_domain(node.domain):
        return False
    if node.op_type in ("SequenceLength", "Shape", "Size"):
        return True
    wrap = wrapped(value)
    return wrap is not None and _is_length_of(wrap.n, sequence)


class _Scopes:
    """Each scope's default-domain opset, and the node and attribute holding each subgraph."""

    def __init__(self, model: ir.Model, target_opset: int | None = None) -> None:
        self.opset: dict[GraphLike, int | None] = {}
        self.parent: dict[GraphLike, tuple[ir.Node, str]] = {}
        roots: list[GraphLike] = [model.graph, *model.functions.values()]
        for root in roots:
            imports = root.opset_imports
            opset = imports.get("", imports.get("ai.onnx"))
            if target_opset is not None and opset is not None:
                opset = min(opset, target_opset)
            self._visit(root, opset)

    def _visit(self, owner: GraphLike, opset: int | None) -> None:
        self.opset[owner] = opset
        for node in owner:
            for label, graph in named_subgraphs(node):
                self.parent[graph] = (node, label)
                self._visit(graph, opset)


def _constant_node(value: int, stem: str = "position") -> ir.Node:
    return constant_node(np.array(value, np.int64), stem)


def _sequence_length(sequence: ir.Value, known: int | None) -> ir.Node:
    """n for a guard or a wrap: a Constant where it is ``known`` (sequence elimination
    would fold a SequenceLength of it on a second run), else SequenceLength(sequence)."""
    if known is not None:
        return _constant_node(known, "length")
    node = fresh(new_node("SequenceLength", [sequence]))
    typed_scalar(node.outputs[0], _INT64, "length")
    return node
