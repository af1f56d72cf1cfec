"""Put every SequenceInsert position into one canonical form.

SequenceInsert-11 takes an optional position: int32 or int64, in [-n, n],
and by the spec a scalar. Runtimes disagree at the edges: onnxruntime
follows the spec (n appends) and reads the first element of a non-scalar;
``onnx.reference`` computes ``(p + n) % n``, so n inserts at the front and
an empty sequence divides by zero; onnx-mlir assumes a scalar. In canonical
form every runtime agrees:

- a position that means "append" is removed (no third input);
- any other position is an int64 scalar in [0, n).

The rewrite adds only what a position needs::

    constant p, length n known     ->  Constant<int64 scalar (p + n if p < 0 else p)>
                                       or no position at all when that is n
    constant p = 0, n unknown      ->  Constant<int64 scalar 0>     (dtype/shape fix only)
    constant p > 0, n unknown      ->  guarded, as a dynamic p       (it may be n)
    constant p < 0, n unknown      ->  Add(Constant<int64 p>, SequenceLength(seq))
    dynamic p                      ->  p' = Cast<to=int64>(p)          if p is int32
                                       p' = Reshape(p', [])            if p is not a scalar
                                       guarded, from opset 13:

        n      = SequenceLength(seq)
        is_end = Equal(p', n)
        out    = If(is_end)
                   then: SequenceInsert(seq, x)                       (appends)
                   else: SequenceInsert(seq, x, Where(p' < 0, p' + n, p'))

                                       below 13 (an If cannot return a sequence
                                       there), only the Where, outside any If:
                                       a p equal to n stays n
    p = SequenceLength(seq)        ->  no position at all (appends)

The Where is left out where p's sign is known. A constant is an initializer
(that is not also a graph input) or a Constant node, at any scope, or what
Squeeze, Unsqueeze, Reshape, Cast and Identity compute from constants
(:mod:`lowering.irutils.static_values`); a folded one becomes a Constant, and the
ops that computed it go where nothing else reads them. The length n is
known through :mod:`lowering.analysis.sequence_length`. A constant that is
statically out of range is an error. Positions already in canonical form,
including the forms above, are left alone, so the pass is idempotent.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from lowering.analysis.sequence_length import SequenceLengths
from lowering.analysis.type_inference import TypeOracle
from lowering.errors import LoweringError
from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.dead_code import remove_unread
from lowering.irutils.naming import adopt_name, fresh, name_fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.scopes import GraphLike, Located, find_nodes
from lowering.irutils.static_values import FOLDABLE_OPS, static_array
from lowering.irutils.walk import named_subgraphs
from lowering.options import check_target_opset
from lowering.rewrites import LoweringResult, Rewrite

logger = logging.getLogger(__name__)

_INT64 = ir.DataType.INT64


class NormalizeSequenceInsertPass(ir.passes.InPlacePass):
    """Rewrite every SequenceInsert position, in every scope, into canonical form.

    It names what it creates and returns what it rewrote in a
    :class:`~lowering.rewrites.LoweringResult`.

    Attributes:
        keep_originals: Keep a copy of each node as it was, for reports.
        target_opset: The default-domain opset the model will declare in the
            end (``--target-opset``), if not its own: below 13 no guard is
            emitted, since an If cannot return a sequence there.
    """

    def __init__(self, *, keep_originals: bool = False, target_opset: int | None = None) -> None:
        super().__init__()
        self.keep_originals = keep_originals
        self.target_opset = check_target_opset(target_opset)

    def call(self, model: ir.Model) -> LoweringResult:
        found = [
            loc
            for loc in find_nodes(model, lambda node: is_onnx_op(node, "SequenceInsert"))
            if len(loc.node.inputs) > 2 and loc.node.inputs[2] is not None
        ]
        if not found:
            return LoweringResult(model, modified=False)
        lengths = SequenceLengths()
        oracle = None
        if any(_needs_types(loc.node.inputs[2]) for loc in found):
            # Shape inference reads the model by names: name what the
            # model left unnamed first.
            name_fresh(model)
            # (A node in a subgraph of a function is typed with that function.)
            functions = [loc.scope.function for loc in found if loc.scope.function is not None]
            oracle = TypeOracle(model, list(dict.fromkeys(functions)))
        scopes = _Scopes(model, self.target_opset)
        # Check every constant first, so that a model with an error is not changed.
        plans = [_Position(loc, lengths, oracle, scopes) for loc in found]
        rewrites = []
        for plan in plans:
            original = ir.serde.serialize_node(plan.located.node) if self.keep_originals else None
            new_nodes = plan.apply()
            if new_nodes is None:
                continue
            rewrites.append(
                Rewrite(
                    scope=plan.located.scope.description,
                    node_name=plan.located.node.name or "",
                    op_type="SequenceInsert",
                    original=original,
                    written=[*new_nodes, plan.located.node],
                )
            )
        if rewrites:
            name_fresh(model)
        return LoweringResult(model, modified=bool(rewrites), rewrites=rewrites)

    def ensures(self, model: ir.Model) -> None:
        """Every position left is an int64 scalar, where its type is declared."""
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


def _needs_types(position: ir.Value | None) -> bool:
    return (
        position is not None
        and static_array(position) is None
        and (position.dtype is None or position.shape is None)
    )


class _Position:
    """One SequenceInsert's position: what it is, checked; and its rewrite."""

    def __init__(
        self,
        located: Located,
        lengths: SequenceLengths,
        oracle: TypeOracle | None,
        scopes: _Scopes,
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
        twin = oracle.twin(node, located.scope.owner) if oracle is not None else None
        if twin is not None and self.value is None:
            twin_position = twin.inputs[2]
            assert twin_position is not None, "the twin copies this node, whose position is given"
            self.dtype = self.dtype or twin_position.dtype
            self.shape = self.shape or twin_position.shape
        after = [node.outputs[0], *([twin.outputs[0]] if twin is not None else [])]
        self.sequence_type = next(((v.type, v.shape) for v in after if v.type), None)
        if self.sequence_type is None and self.sequence.type is not None:
            self.sequence_type = (self.sequence.type, None)
        if self.value is not None:
            self._check_constant(self.value)

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

    def apply(self) -> list[ir.Node] | None:
        """Rewrite the position; returns the new nodes, or None if it was canonical."""
        # An earlier insert's guard may have taken over the value this one
        # reads (its If output replaces the insert's): read the node again.
        sequence = self.located.node.inputs[0]
        assert sequence is not None, "checked when planned"
        self.sequence = sequence
        if self.value is not None:
            return self._apply_constant(self.value)
        return self._apply_dynamic()

    def _apply_constant(self, value: np.ndarray) -> list[ir.Node] | None:
        p, n = int(value.reshape(())), self.length
        # A value folded through Squeeze, Cast, ... becomes a Constant too.
        is_canonical_dtype = (
            value.dtype == np.int64
            and value.ndim == 0
            and constant_array(self.position) is not None
        )
        if n is not None:
            canonical = p + n if p < 0 else p
            if canonical == n:
                return self._drop_position()
            if canonical == p and is_canonical_dtype:
                return None
            return self._use([_constant_node(canonical)])
        if p >= 0:
            nodes = [] if is_canonical_dtype else [_constant_node(p)]
            if self._can_guard() and not self._guarded():
                # p may be n at run time, 0 included: on an empty sequence
                # 0 is the end, and onnx.reference's (p + n) % n divides by 0.
                return self._guard(nodes, nodes[-1].outputs[0] if nodes else self.position)
            return self._use(nodes) if nodes else None
        constant = _constant_node(p)
        length = _sequence_length(self.sequence)
        shifted = fresh(new_node("Add", [constant.outputs[0], length.outputs[0]]))
        _scalar_int64(shifted.outputs[0], "position")
        return self._use([constant, length, shifted])

    def _apply_dynamic(self) -> list[ir.Node] | None:
        producer = self.position.producer()
        if (
            producer is not None
            and is_onnx_op(producer, "SequenceLength")
            and producer.inputs[0] is self.sequence
        ):
            return self._drop_position()  # inserting at len(seq) appends
        if self._guarded() or _known_below_length(self.position, self.sequence):
            return None
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
            p = _scalar_int64(reshape.outputs[0], "position")
            nodes += [scalar_shape, reshape]
        if self._can_guard():
            return self._guard(nodes, p)
        # Below 13 an If cannot return a sequence: p == n stays n.
        if not _known_non_negative(p, self.sequence):
            length = _sequence_length(self.sequence)
            nodes += [length, *_wrap_negative(p, length.outputs[0])]
            p = nodes[-1].outputs[0]
        return self._use(nodes) if nodes else None

    def _can_guard(self) -> bool:
        """Whether the scope's opset lets an If return a sequence (13 and up)."""
        return (self.scopes.opset.get(self.located.scope.owner) or 0) >= 13

    def _guard(self, nodes: list[ir.Node], p: ir.Value) -> list[ir.Node]:
        """Append where p == n, insert at p (made non-negative) elsewhere::

            n      = SequenceLength(seq)
            is_end = Equal(p, n)
            out    = If(is_end)
                       then: SequenceInsert(seq, x)                     (appends)
                       else: SequenceInsert(seq, x, Where(p < 0, p + n, p))

        The node itself moves into the else branch; the If takes over its
        output and its name.
        """
        node, owner = self.located.node, self.located.scope.owner
        length = _sequence_length(self.sequence)
        n = length.outputs[0]
        equal = fresh(new_node("Equal", [p, n]))
        is_end = fresh(equal.outputs[0], "is_end")
        is_end.dtype, is_end.shape = ir.DataType.BOOL, ir.Shape([])
        inner: list[ir.Node] = []
        if not _known_non_negative(p, self.sequence):
            inner = _wrap_negative(p, n)
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
        length = n.producer() if n is not None else None
        if (
            length is None
            or not is_onnx_op(length, "SequenceLength")
            or length.inputs[0] is not self.sequence
        ):
            return False
        where = self.position.producer()
        reads_p = self.position is p or (
            where is not None and is_onnx_op(where, "Where") and where.inputs[2] is p
        )
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


def _known_below_length(value: ir.Value, sequence: ir.Value) -> bool:
    """True for ``Add(c, SequenceLength(seq))`` with a constant c < 0: in [0, n) if valid.

    (This pass's rewrite of a negative constant position over a sequence of
    unknown length.)
    """
    node = value.producer()
    if node is None or not is_onnx_op(node, "Add") or value.dtype != _INT64:
        return False
    left, right = node.inputs
    constant = static_array(left)
    length = right.producer() if right is not None else None
    return (
        constant is not None
        and constant.size == 1
        and int(constant.reshape(())) < 0
        and length is not None
        and is_onnx_op(length, "SequenceLength")
        and length.inputs[0] is sequence
        and value.shape is not None
        and value.shape.rank() == 0
    )


def _known_non_negative(value: ir.Value, sequence: ir.Value) -> bool:
    """True where ``value`` cannot be negative, or is this pass's own canonical form."""
    constant = static_array(value)
    if constant is not None:
        return bool((constant >= 0).all())
    node = value.producer()
    if node is None or not is_onnx_domain(node.domain):
        return False
    if node.op_type in ("SequenceLength", "Shape", "Size"):
        return True
    if node.op_type == "Add":  # p + len(seq) for a constant p in [-len, 0)
        left, right = node.inputs
        right_node = right.producer() if right is not None else None
        return (
            static_array(left) is not None
            and right_node is not None
            and is_onnx_op(right_node, "SequenceLength")
            and right_node.inputs[0] is sequence
        )
    if node.op_type == "Where":  # Where(p < 0, p + len(seq), p)
        condition, shifted, unshifted = node.inputs
        less = condition.producer() if condition is not None else None
        add = shifted.producer() if shifted is not None else None
        if less is None or not is_onnx_op(less, "Less") or less.inputs[0] is not unshifted:
            return False
        bound = static_array(less.inputs[1])
        if bound is None or bound.any():
            return False
        if add is None or not is_onnx_op(add, "Add") or add.inputs[0] is not unshifted:
            return False
        length = add.inputs[1].producer() if add.inputs[1] is not None else None
        return (
            length is not None
            and is_onnx_op(length, "SequenceLength")
            and length.inputs[0] is sequence
        )
    return False


def _wrap_negative(p: ir.Value, length: ir.Value) -> list[ir.Node]:
    """``Where(p < 0, p + length, p)``; the last node's output is the result."""
    zero = _constant_node(0, "zero")
    negative = fresh(new_node("Less", [p, zero.outputs[0]]))
    is_negative = fresh(negative.outputs[0], "is_negative")
    is_negative.dtype, is_negative.shape = ir.DataType.BOOL, ir.Shape([])
    shifted = fresh(new_node("Add", [p, length]))
    _scalar_int64(shifted.outputs[0], "shifted")
    where = fresh(new_node("Where", [is_negative, shifted.outputs[0], p]))
    _scalar_int64(where.outputs[0], "position")
    return [zero, negative, shifted, where]


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


def _sequence_length(sequence: ir.Value) -> ir.Node:
    node = fresh(new_node("SequenceLength", [sequence]))
    _scalar_int64(node.outputs[0], "length")
    return node


def _scalar_int64(value: ir.Value, stem: str) -> ir.Value:
    value.dtype, value.shape = _INT64, ir.Shape([])
    return fresh(value, stem)
