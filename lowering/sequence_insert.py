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
    constant p >= 0, n unknown     ->  Constant<int64 scalar p>   (dtype/shape fix only)
    constant p < 0,  n unknown     ->  Add(Constant<int64 p>, SequenceLength(seq))
    dynamic p                      ->  p' = Cast<to=int64>(p)          if p is int32
                                       p' = Reshape(p', [])            if p is not a scalar
                                       Where(Less(p', 0),
                                             Add(p', SequenceLength(seq)),
                                             p')                       if p's sign is unknown
    p = SequenceLength(seq)        ->  no position at all (appends)

A constant is an initializer (that is not also a graph input) or a Constant
node, at any scope. A constant that is statically out of range is an error.
Positions already in canonical form, including the forms above, are left
alone, so the pass is idempotent.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from lowering.constants import constant_array, constant_node, remove_if_dead_constant
from lowering.errors import LoweringError
from lowering.naming import FreshNamesPass, fresh
from lowering.rewrites import Rewrite
from lowering.scopes import Located, find_nodes, is_onnx_op
from lowering.sequence_length import SequenceLengths
from lowering.type_inference import TypeOracle

logger = logging.getLogger(__name__)

_INT64 = ir.DataType.INT64


class NormalizeSequenceInsertPass(ir.passes.InPlacePass):
    """Rewrite every SequenceInsert position, in every scope, into canonical form.

    Fresh values and nodes are left for :class:`lowering.naming.FreshNamesPass`
    to name; run it afterwards.

    Attributes:
        keep_originals: Keep a copy of each node as it was, for reports.
        rewrites: What the last call changed.
    """

    def __init__(self, *, keep_originals: bool = False) -> None:
        super().__init__()
        self.keep_originals = keep_originals
        self.rewrites: list[Rewrite] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewrites = []
        found = [
            loc
            for loc in find_nodes(model, lambda node: is_onnx_op(node, "SequenceInsert"))
            if len(loc.node.inputs) > 2 and loc.node.inputs[2] is not None
        ]
        if not found:
            return ir.passes.PassResult(model, modified=False)
        lengths = SequenceLengths()
        oracle = None
        if any(_needs_types(loc.node.inputs[2]) for loc in found):
            # Shape inference reads the model by names: name what earlier
            # rewrites left unnamed first.
            FreshNamesPass()(model)
            functions = [
                loc.scope.owner for loc in found if isinstance(loc.scope.owner, ir.Function)
            ]
            oracle = TypeOracle(model, list(dict.fromkeys(functions)))
        # Check every constant first, so that a model with an error is not changed.
        plans = [_Position(loc, lengths, oracle) for loc in found]
        for plan in plans:
            original = ir.serde.serialize_node(plan.located.node) if self.keep_originals else None
            new_nodes = plan.apply()
            if new_nodes is None:
                continue
            self.rewrites.append(
                Rewrite(
                    scope=plan.located.scope.description,
                    node_name=plan.located.node.name or "",
                    op_type="SequenceInsert",
                    original=original,
                    new_nodes=[*new_nodes, plan.located.node],
                )
            )
        return ir.passes.PassResult(model, modified=bool(self.rewrites))


def _needs_types(position: ir.Value) -> bool:
    return constant_array(position) is None and (position.dtype is None or position.shape is None)


class _Position:
    """One SequenceInsert's position: what it is, checked; and its rewrite."""

    def __init__(self, located: Located, lengths: SequenceLengths, oracle: TypeOracle | None):
        self.located = located
        node = located.node
        self.sequence, _, self.position = node.inputs
        self.length = lengths(self.sequence)
        self.value = constant_array(self.position)
        self.dtype, self.shape = self.position.dtype, self.position.shape
        if self.value is None and oracle is not None and (self.dtype is None or self.shape is None):
            twin = oracle.twin(node, located.scope.owner)
            if twin is not None:
                self.dtype = self.dtype or twin.inputs[2].dtype
                self.shape = self.shape or twin.inputs[2].shape
        if self.value is not None:
            self._check_constant()

    def _fail(self, reason: str) -> LoweringError:
        return LoweringError(reason, node=self.located.node, scope=self.located.scope.description)

    def _check_constant(self) -> None:
        value = self.value
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
        if self.value is not None:
            return self._apply_constant()
        return self._apply_dynamic()

    def _apply_constant(self) -> list[ir.Node] | None:
        p, n = int(self.value.reshape(())), self.length
        is_canonical_dtype = self.value.dtype == np.int64 and self.value.ndim == 0
        if n is not None:
            canonical = p + n if p < 0 else p
            if canonical == n:
                return self._drop_position()
            if canonical == p and is_canonical_dtype:
                return None
            return self._use([_constant_node(canonical)])
        if p >= 0:
            return None if is_canonical_dtype else self._use([_constant_node(p)])
        constant = _constant_node(p)
        length = _sequence_length(self.sequence)
        shifted = fresh(ir.node("Add", [constant.outputs[0], length.outputs[0]]))
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
        nodes: list[ir.Node] = []
        p = self.position
        if self.dtype != _INT64:
            cast = fresh(ir.node("Cast", [p], {"to": _INT64}))
            p = fresh(cast.outputs[0], "position")
            p.dtype, p.shape = _INT64, self.shape
            nodes.append(cast)
        if self.shape is None or self.shape.rank() != 0:
            scalar_shape = constant_node(np.array([], np.int64), "scalar_shape")
            reshape = fresh(ir.node("Reshape", [p, scalar_shape.outputs[0]]))
            p = _scalar_int64(reshape.outputs[0], "position")
            nodes += [scalar_shape, reshape]
        if not _known_non_negative(p, self.sequence):
            zero = _constant_node(0, "zero")
            negative = fresh(ir.node("Less", [p, zero.outputs[0]]))
            is_negative = fresh(negative.outputs[0], "is_negative")
            is_negative.dtype, is_negative.shape = ir.DataType.BOOL, ir.Shape([])
            length = _sequence_length(self.sequence)
            shifted = fresh(ir.node("Add", [p, length.outputs[0]]))
            _scalar_int64(shifted.outputs[0], "shifted")
            where = fresh(ir.node("Where", [is_negative, shifted.outputs[0], p]))
            p = _scalar_int64(where.outputs[0], "position")
            nodes += [zero, negative, length, shifted, where]
        return self._use(nodes) if nodes else None

    def _use(self, nodes: list[ir.Node]) -> list[ir.Node]:
        node = self.located.node
        self.located.scope.owner.insert_before(node, nodes)
        old = self.position
        node.replace_input_with(2, nodes[-1].outputs[0])
        remove_if_dead_constant(old)
        return nodes

    def _drop_position(self) -> list[ir.Node]:
        node = self.located.node
        old = self.position
        node.resize_inputs(2)
        remove_if_dead_constant(old)
        return []


def _known_non_negative(value: ir.Value, sequence: ir.Value) -> bool:
    """True where ``value`` cannot be negative, or is this pass's own canonical form."""
    constant = constant_array(value)
    if constant is not None:
        return bool((constant >= 0).all())
    node = value.producer()
    if node is None or node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type in ("SequenceLength", "Shape", "Size"):
        return True
    if node.op_type == "Add":  # p + len(seq) for a constant p in [-len, 0)
        left, right = node.inputs
        right_node = right.producer() if right is not None else None
        return (
            constant_array(left) is not None
            and right_node is not None
            and is_onnx_op(right_node, "SequenceLength")
            and right_node.inputs[0] is sequence
        )
    if node.op_type == "Where":  # Where(p < 0, p + len(seq), p)
        condition, shifted, unshifted = node.inputs
        less = condition.producer()
        add = shifted.producer()
        return (
            less is not None
            and is_onnx_op(less, "Less")
            and less.inputs[0] is unshifted
            and constant_array(less.inputs[1]) is not None
            and not constant_array(less.inputs[1]).any()
            and add is not None
            and is_onnx_op(add, "Add")
            and add.inputs[0] is unshifted
            and add.inputs[1].producer() is not None
            and is_onnx_op(add.inputs[1].producer(), "SequenceLength")
            and add.inputs[1].producer().inputs[0] is sequence
        )
    return False


def _constant_node(value: int, stem: str = "position") -> ir.Node:
    return constant_node(np.array(value, np.int64), stem)


def _sequence_length(sequence: ir.Value) -> ir.Node:
    node = fresh(ir.node("SequenceLength", [sequence]))
    _scalar_int64(node.outputs[0], "length")
    return node


def _scalar_int64(value: ir.Value, stem: str) -> ir.Value:
    value.dtype, value.shape = _INT64, ir.Shape([])
    return fresh(value, stem)
