"""The batcher: the interpreter that walks a map's body once, on stacked elements.

:class:`Batcher` stacks the map's sequence inputs, visits each body node in
order and either moves it out unchanged (it reads no element: an invariant
op) or applies its op's batching rule (:data:`RULES`, merged from the rule
families this module imports), and returns the stacked value of each body
output. Rules build their nodes with its building blocks (:meth:`Batcher.op`,
:meth:`Batcher.like`, :meth:`Batcher.unsqueeze`, ...), which record every
node they make, so that a dry run can be detached and attached again.

An input split by lengths is *ragged* (:class:`~.body_values.Ragged`): its
elements are not stacked but left concatenated, as the split tensor, and a
node with a ragged operand is batched by :data:`RAGGED_RULES` (the
:mod:`.ragged` family) instead; an op without a rule there declines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import overload

import numpy as np
import numpy.typing as npt
import onnx_ir as ir

from lowering.analysis.proven_shapes import proven_outputs
from lowering.irutils.axes import axes_as_input
from lowering.irutils.constants import constant_array
from lowering.irutils.naming import fresh
from lowering.irutils.node_inference import Operand, seen_wrong
from lowering.irutils.nodes import attribute, new_node
from lowering.irutils.op_facts import (
    RANK_SEEN_WRONG,
    SAME_DTYPE_OPS,
    is_onnx_domain,
    is_onnx_op,
)
from lowering.irutils.static_values import small_constant
from lowering.maps.loop_body import ragged_source, split_source
from lowering.maps.plan import MapPlan
from lowering.maps.strategies.vectorize import (
    elementwise,
    indexing,
    linear_algebra,
    nn,
    ragged,
    reductions,
    shape_ops,
)
from lowering.maps.strategies.vectorize.body_values import BodyValue, Dims, Ragged, static
from lowering.maps.strategies.vectorize.family import Rule, RuleFamily

#: Every family of batching rules; a new family module is listed here.
FAMILIES: tuple[RuleFamily, ...] = (
    elementwise.FAMILY,
    reductions.FAMILY,
    shape_ops.FAMILY,
    indexing.FAMILY,
    linear_algebra.FAMILY,
    nn.FAMILY,
)


def _merged(families: Sequence[RuleFamily]) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for family in families:
        for op_type, rule in family.rules.items():
            if op_type in rules:
                raise ValueError(f"{op_type} has batching rules in two families ({family.module})")
            rules[op_type] = rule
    return rules


#: The batching rule of each op (an allowlist, like JAX's ``primitive_batchers``).
RULES: dict[str, Rule] = _merged(FAMILIES)

#: The families of rules for ragged operands (elements of different lengths).
RAGGED_FAMILIES: tuple[RuleFamily, ...] = (ragged.FAMILY,)

#: The rule of each op that takes ragged operands.
RAGGED_RULES: dict[str, Rule] = _merged(RAGGED_FAMILIES)

#: Where a map's input is the output of a map to be vectorized before it (in
#: its graph), what that map's rewrite stacks it as: the result and, for a
#: ragged one, how it is split. The later map then reads the stack.
Upstream = Mapping[ir.Value, tuple[ir.Value, Ragged | None]]

# Ops that may run once, outside, on values the same for every element.
_INVARIANT_OPS = frozenset([*RULES, "Constant", "ConstantOfShape", "Range"])


class Decline(Exception):
    """A body that cannot be vectorized; the message says why."""


class Batcher:
    """One vectorization of one map: built by :meth:`run`, then committed or detached."""

    def __init__(
        self,
        plan: MapPlan,
        opset: int,
        upstream: Upstream | None = None,
        target_opset: int | None = None,
    ) -> None:
        self.plan = plan
        self.opset = opset
        # Ops are spelt for ``opset``; an op that a lower target (--target-opset)
        # lacks, which the down-conversion could not undo, is not emitted.
        self.lowest_opset = opset if target_opset is None else min(opset, target_opset)
        self.upstream = upstream or {}
        self.read_inputs = list(plan.node.inputs)  # what the rewrite was built on
        self.body = plan.body
        self.nodes: list[ir.Node] = []  # the new nodes and the moved ones, in order
        self.created: list[ir.Node] = []
        self.moved: list[ir.Node] = []
        self.info: dict[ir.Value, BodyValue] = {}
        self.stacks: list[ir.Value] = []
        self.raggeds: list[Ragged | None] = []  # of each stack
        self.result_raggeds: list[Ragged | None] = []  # of each result
        self.cache: dict[Hashable, ir.Value] = {}  # values rules share (segment ids)
        self.stack_free = True
        self._batch_size: ir.Value | None = None
        self._shared: list[ir.Value] = []  # from plan.constants, placed by commit
        self._node: ir.Node | None = None  # the body node being batched, for reasons
        self._inputs: list[Sequence[ir.Value | None]] = []
        self.results: list[ir.Value] = []
        self.batch_dim: int | None = None
        self.emitted: list[tuple[str, ir.DataType | None]] = []  # ops beyond the body's
        self._dtypes: dict[ir.Value, ir.DataType | None] = {}

    # -- the walk ---------------------------------------------------------

    def run(self) -> list[ir.Value]:
        """Build the rewrite; returns the stacked value of each body output."""
        self._stack_inputs()
        for node in self.body:
            self._node = node
            self._visit(node)
        self._node = None
        results: list[ir.Value] = []
        self.result_raggeds = []
        for k, value in enumerate(self.body.outputs):
            info = self.arg(value)
            result = info.value if info.batched else self.broadcast(info, f"output {k}")
            self.result_raggeds.append(info.ragged if info.batched else None)
            producer = result.producer()
            if producer is None or producer not in self.created or result in results:
                result = self.op("Identity", [result])  # never retype a value not made here
            results.append(result)
        return results

    def detach(self) -> None:
        """Undo a dry run: the new nodes stop using the model's values."""
        self._inputs = [node.inputs for node in self.created]  # (onnx_ir's tuples, kept)
        for node in self.created:
            _detach(node)

    def settle(self) -> None:
        """Let go of what only judging read (the ops emitted, the dtypes and
        values the rules tracked): a fit keeps its run until the rewrite, every
        map's at once, and all it reads then is the nodes and results."""
        self.emitted.clear()
        self._dtypes.clear()
        self.cache.clear()

    def reattach(self) -> None:
        """Redo a detached run. Nothing it reads changes in between: rewrites
        of other maps only touch their own bodies and their outputs' readers,
        and a body with a map in it is never vectorized."""
        for node, inputs in zip(self.created, self._inputs, strict=True):
            for index, value in enumerate(inputs):
                node.replace_input_with(index, value)

    def commit(self, results: list[ir.Value]) -> list[ir.Node]:
        """Take the moved nodes out of the body and drop the rest of it."""
        for node in self.moved:
            for index, value in enumerate(node.inputs):
                if value is not None and value in self.info:
                    node.replace_input_with(index, self.info[value].value)
        self.body.outputs.clear()
        moved = set(self.moved)
        rest = [node for node in self.body if node not in moved]
        for node in rest:
            _detach(node)
        for node in reversed(self.moved):  # e.g. a Constant only the body's own ops read
            if not any(o.uses() or o.is_graph_output() or o in results for o in node.outputs):
                self.moved.remove(node)
                self.nodes.remove(node)
                _detach(node)
                rest.append(node)
        for node in reversed(self.created):  # e.g. the stack of an input the body ignores
            if not any(o.uses() or o in results for o in node.outputs):
                self.nodes.remove(node)
                _detach(node)
        if self.moved:
            self.body.remove(self.moved)
        if rest:
            self.body.remove(rest)
        self.body.inputs.clear()
        self.plan.constants.place(self._shared)
        return list(self.nodes)

    @property
    def shared_nodes(self) -> list[ir.Node]:
        """The nodes of the stacks it reads that other maps may read too."""
        return [n for value in self._shared for n in self.plan.constants.nodes_of(value)]

    def decline(self, why: str) -> Decline:
        """The reason to give up, naming the body node being batched."""
        if self._node is not None:
            node = self._node
            where = f"node {node.name!r} ({node.op_type})" if node.name else node.op_type
            return Decline(f"{where}: {why}")
        return Decline(why)

    def _stack_inputs(self) -> None:
        node, plan = self.plan.node, self.plan
        for outer, inner, sequence, element in zip(
            node.inputs, self.body.inputs, plan.is_sequence, plan.element_types, strict=True
        ):
            assert outer is not None  # plan_map refuses omitted inputs
            if not sequence:
                self.info[inner] = self._outer(outer)
                continue
            dtype = element[0].dtype if element is not None else None
            shape = _dims(element[1]) if element is not None else None
            source, ragged_from = split_source(outer), ragged_source(outer)
            producer = outer.producer()
            if outer in self.upstream and producer is not None:
                if producer.graph is not node.graph:
                    raise self.decline(f"{outer.name!r} is a map's output in another graph")
                result, how = self.upstream[outer]
                if how is None:
                    source, ragged_from = (result, 0, False), None
                else:
                    source, ragged_from = None, (result, how.split, how.axis)
            split_by: Ragged | None = None
            if source is not None:
                stack, shape = self._split_stack(outer, *source, shape)
            elif ragged_from is not None:
                stack, shape, split_by = self._ragged_stack(*ragged_from, shape)
            else:
                stack, shape = self._concat_stack(outer, dtype, shape)
                self.stack_free = False
            self.stacks.append(stack)
            self.raggeds.append(split_by)
            if dtype is not None and self.dtype_of(stack) is None:
                self._dtypes[stack] = dtype  # what ops on the stack are checked on
            self.info[inner] = BodyValue(stack, shape, True, dtype, split_by)

    def _ragged_stack(
        self, tensor: ir.Value, split: ir.Value, axis: int, shape: Dims | None
    ) -> tuple[ir.Value, Dims, Ragged]:
        """The elements of ``SplitToSequence<axis>(tensor, split)`` left as ``tensor``."""
        dims = self.proven_dims(tensor)
        rank = len(dims) if dims is not None else len(shape) if shape is not None else None
        if rank is None:
            raise self.decline(f"the rank of {tensor.name!r}, split by lengths, is unknown")
        if not -rank <= axis < rank:
            raise self.decline(f"{tensor.name!r} is split on axis {axis}, out of range")
        axis %= rank
        if shape is None or len(shape) != rank:
            assert dims is not None, "the rank came from the tensor's shape"
            shape = dims
        shape = tuple(None if i == axis else d for i, d in enumerate(shape))
        split_dims = _dims(self.plan.proof.declarable(split))
        if not self.stacks and split_dims is not None and len(split_dims) == 1:
            self.batch_dim = split_dims[0]  # the number of elements, when static (declared)
        return tensor, shape, Ragged(axis, split)

    def _split_stack(
        self, sequence: ir.Value, tensor: ir.Value, axis: int, keepdims: bool, shape: Dims | None
    ) -> tuple[ir.Value, Dims]:
        dims = self.proven_dims(tensor)
        rank = len(dims) if dims is not None else None
        if rank is None and shape is not None:
            rank = len(shape) + (0 if keepdims else 1)
        if axis < 0:
            if rank is None:
                raise self.decline(f"the rank of {tensor.name!r}, split on axis {axis}, is unknown")
            axis += rank
        if shape is None and dims is not None:
            shape = (*dims[:axis], *([1] if keepdims else []), *dims[axis + 1 :])
        if shape is None:
            raise self.decline(f"the rank of the elements of {sequence.name!r} is unknown")
        assert rank is not None, "known from the tensor's shape or the element's"
        declared = _dims(self.plan.proof.declarable(tensor))
        if not self.stacks and declared is not None and len(declared) == rank:
            # The number of elements, when static: what the stack's type may
            # declare (a proven size ONNX infers otherwise would contradict it).
            self.batch_dim = declared[axis]
        stack = tensor
        if axis != 0:
            perm = [axis, *(i for i in range(rank) if i != axis)]
            stack = self.op("Transpose", [stack], {"perm": perm})
        if keepdims:
            stack = self.unsqueeze(stack, [axis + 1])
        return stack, shape

    def _concat_stack(
        self, sequence: ir.Value, dtype: ir.DataType | None, shape: Dims | None
    ) -> tuple[ir.Value, Dims]:
        static_shape = static(shape)
        if static_shape is None:
            raise self.decline(
                f"the elements of {sequence.name!r} may differ in shape (not a SplitToSequence "
                "without split, nor of static shape)"
            )
        producer = sequence.producer()
        if (
            producer is not None
            and is_onnx_op(producer, "SequenceConstruct")
            and producer.inputs
            and all(v is not None for v in producer.inputs)
        ):
            # The elements are at hand: stack them, and the count is static.
            parts = [self.unsqueeze(v, [0]) for v in producer.inputs if v is not None]
            if not self.stacks:
                self.batch_dim = len(parts)
            return self.op("Concat", parts, {"axis": 0}), tuple(static_shape)
        if dtype is None or dtype == ir.DataType.STRING:
            # ConstantOfShape, which makes the filler, takes no strings.
            raise self.decline(f"elements of type {dtype} cannot be stacked")
        owner, constants = self.plan.located.scope.owner, self.plan.constants
        try:
            # One filler per element shape and type in the graph, shared by its maps.
            filler = constants.zeros(owner, static_shape, dtype)
        except Exception as error:  # noqa: BLE001 -- no numpy twin (string, float8, ...)
            raise self.decline(f"elements of type {dtype} cannot be stacked: {error}") from None
        self.emitted += [("ConstantOfShape", ir.DataType.INT64)] + [
            (op, dtype) for op in ("SequenceInsert", "ConcatFromSequence", "Slice")
        ]

        def build() -> list[ir.Node]:
            # onnxruntime's ConcatFromSequence fails on an empty sequence: append
            # a zero element, stack, and slice it off again.
            appended = fresh(new_node("SequenceInsert", [sequence, filler]))
            stacked = fresh(
                new_node("ConcatFromSequence", appended.outputs, {"axis": 0, "new_axis": 1})
            )
            ends = [constants.constant(owner, np.array([k], np.int64)) for k in (0, -1)]
            sliced = fresh(new_node("Slice", [stacked.outputs[0], *ends]))
            stack = fresh(sliced.outputs[0])
            # Its elements' shape, which the plan proves, declared (the pins of
            # the ops on it are computed from it: lowering.irutils.pins).
            stack.type, stack.shape = ir.TensorType(dtype), ir.Shape([None, *static_shape])
            return [appended, stacked, sliced]

        # One stack per sequence in the graph, shared by every map that stacks it
        # (as elements of one type and shape: a body that declares another gets its own).
        key = ("stack", sequence, dtype, tuple(static_shape))
        stack = constants.shared(owner, key, build, sequence)
        self._shared.append(stack)
        return stack, tuple(static_shape)

    def _visit(self, node: ir.Node) -> None:
        if not is_onnx_domain(node.domain):
            raise self.decline(f"an op of domain {node.domain!r} has no batching rule")
        for attr in node.attributes.values():
            if not isinstance(attr, ir.Attr) or attr.is_ref():
                raise self.decline(f"its attribute {attr.name!r} refers to a function attribute")
            if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
                raise self.decline("it has a subgraph")
        args = [None if value is None else self.arg(value) for value in node.inputs]
        if any(a is not None and a.ragged is not None for a in args):
            ragged_rule = RAGGED_RULES.get(node.op_type)
            if ragged_rule is None:
                raise self.decline(
                    "it has no batching rule for elements of different lengths (split by lengths)"
                )
            self._record(node, ragged_rule(self, node, args), args)
            return
        if not any(a is not None and a.batched for a in args):
            if node.op_type not in _INVARIANT_OPS:
                raise self.decline("it reads no element, but is not known to be deterministic")
            self.nodes.append(node)
            self.moved.append(node)
            proven = self._proven(node, args)
            for output, (dtype, dims) in zip(node.outputs, proven, strict=True):
                known = _element_shape(node, self.proven_dims(output), dims, False)
                dtype = output.dtype if output.type is not None else dtype
                self.info[output] = BodyValue(output, known, False, dtype)
            return
        rule = RULES.get(node.op_type)
        if rule is None:
            raise self.decline("it has no batching rule")
        self._record(node, rule(self, node, args), args)

    def _record(
        self, node: ir.Node, infos: list[BodyValue], args: Sequence[BodyValue | None]
    ) -> None:
        """Keep what the rule made of ``node``'s outputs, their element shapes as
        the one shape analysis proves them (:func:`_element_shape`)."""
        proven = self._proven(node, args)
        wrong = seen_wrong(node, _operands(args))
        for output, info, (_, dims) in zip(node.outputs, infos, proven, strict=False):
            info = dataclasses.replace(info, shape=_element_shape(node, info.shape, dims, wrong))
            if info.dtype is None and output.type is not None:
                info.dtype = output.dtype
            made_here = info.value.producer() in self.created
            if info.dtype is not None and info.value.type is None and made_here:
                info.value.type = ir.TensorType(info.dtype)
            self.info[output] = info

    def arg(self, value: ir.Value) -> BodyValue:
        """What is known of ``value``, which a body node reads."""
        info = self.info.get(value)
        if info is None:
            if value.graph is self.body and value.is_initializer():
                constant = self.op("Constant", [], {"value": value.const_value})
                info = BodyValue(constant, self.proven_dims(value), False, value.dtype)
            else:
                info = self._outer(value)
            self.info[value] = info
        return info

    def _outer(self, value: ir.Value) -> BodyValue:
        return BodyValue(value, self.proven_dims(value), False, value.dtype if value.type else None)

    def proven_dims(self, value: ir.Value) -> Dims | None:
        """What is proven of the shape of ``value``, as the model was planned
        (an outer scope's value, an initializer, an invariant node's output):
        the one shape analysis's
        (:attr:`MapPlan.proof`), never a declaration it doubts; its rank where
        only its dims are doubted."""
        proof = self.plan.proof
        dims = _dims(proof.declarable(value))
        proven = proof.shape(value)
        if proven is not None and (dims is None or len(dims) == len(proven)):
            dims = tuple(
                p if isinstance(p, int) else d
                for p, d in zip(proven, dims or (None,) * len(proven), strict=True)
            )
        if dims is None:
            array = constant_array(value)
            if array is not None:
                dims = tuple(array.shape)
        return dims

    def _proven(
        self, node: ir.Node, args: Sequence[BodyValue | None]
    ) -> list[tuple[ir.DataType | None, Dims | None]]:
        """Dtypes and proven element shapes of ``node``'s outputs, from what is
        known of its operands (:func:`~lowering.analysis.proven_shapes.proven_outputs`:
        a ConstantOfShape's shape is its input's value, an Einsum's is computed
        by onnxruntime's rule, ...)."""
        return [(o.dtype, o.dims) for o in proven_outputs(node, _operands(args), self.opset)]

    # -- building blocks ----------------------------------------------------

    def op(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, object] | None = None,
    ) -> ir.Value:
        """A new node of ``op_type`` (one output), recorded as made here."""
        return self._build(op_type, inputs, attributes, 1)[0]

    def _build(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, object] | None,
        num_outputs: int,
    ) -> list[ir.Value]:
        """The node, its trailing absent inputs left out: the same in ONNX, and IREE
        compiles no Slice given an empty ``steps`` (docs/runtimes.md)."""
        inputs = list(inputs)
        while inputs and inputs[-1] is None:
            inputs.pop()
        attrs = [attribute(name, value) for name, value in (attributes or {}).items()]
        node = fresh(ir.Node("", op_type, inputs, attrs, num_outputs=num_outputs))
        dtype = self.dtype_of(inputs[0]) if inputs else None
        if op_type not in ("Constant",):
            self.emitted.append((op_type, dtype))
        if op_type == "Shape":
            dtype = ir.DataType.INT64
        elif op_type == "Cast":
            dtype = ir.DataType(attrs[0].value)
        elif op_type in ("Constant", "ConstantOfShape"):
            dtype = attrs[0].value.dtype if attrs else ir.DataType.FLOAT
        for output in node.outputs:
            self._dtypes[output] = dtype
        self.created.append(node)
        self.nodes.append(node)
        return list(node.outputs)

    def dtype_of(self, value: ir.Value | None) -> ir.DataType | None:
        """The element type of ``value`` (of its elements, for a sequence), if known."""
        if value is None:
            return None
        type_ = value.type
        while isinstance(type_, ir.SequenceType):  # a sequence's ops: its elements' type
            type_ = type_.elem_type
        if isinstance(type_, ir.TensorType) and type_.dtype != ir.DataType.UNDEFINED:
            return type_.dtype
        if value in self._dtypes:
            return self._dtypes[value]
        info = self.info.get(value)
        if info is not None and info.dtype is not None:
            return info.dtype
        array = constant_array(value)  # an untyped Constant's output
        return ir.DataType.from_numpy(array.dtype) if array is not None else None

    def like(
        self,
        node: ir.Node,
        inputs: Sequence[ir.Value | None],
        drop: Sequence[str] = (),
        **overrides: object,
    ) -> ir.Value:
        """A copy of body node ``node`` reading ``inputs``, its attributes changed;
        its one output (the body node's only one, or its first: the others unread)."""
        return self.like_all(node, inputs, drop, 1, **overrides)[0]

    def like_all(
        self,
        node: ir.Node,
        inputs: Sequence[ir.Value | None],
        drop: Sequence[str] = (),
        num_outputs: int | None = None,
        **overrides: object,
    ) -> list[ir.Value]:
        """:meth:`like` with ``num_outputs`` outputs (default: as many as ``node``'s)."""
        attributes: dict[str, object] = {
            name: ir.Attr(name, attr.type, attr.value)
            for name, attr in node.attributes.items()
            if name not in drop and name not in overrides
        }
        attributes.update(overrides)
        emitted = len(self.emitted)
        outs = self._build(node.op_type, inputs, attributes, num_outputs or len(node.outputs))
        del self.emitted[emitted:]  # the body's own op, on the types it ran on before
        for new, old in zip(outs, node.outputs, strict=False):
            if old.type is not None and old.dtype not in (None, ir.DataType.UNDEFINED):
                self._dtypes[new] = old.dtype
            elif node.op_type not in SAME_DTYPE_OPS:
                self._dtypes[new] = None  # unknown; self.op assumed the first input's
        return outs

    def const(self, values: npt.ArrayLike, dtype: npt.DTypeLike = np.int64) -> ir.Value:
        """A Constant of ``values``, one per distinct value in the map's graph
        (:class:`~lowering.irutils.constants.SharedConstants`, placed by :meth:`commit`)."""
        value = self.plan.constants.constant(self.plan.located.scope.owner, np.array(values, dtype))
        self._shared.append(value)
        return value

    def unsqueeze(self, value: ir.Value, axes: list[int]) -> ir.Value:
        """``Unsqueeze(value, axes)``, spelt for the opset; undoes a Squeeze made here."""
        producer = value.producer()
        if (  # Unsqueeze(Squeeze(v, axes), axes) == v, for a Squeeze made here
            producer is not None
            and producer in self.created
            and producer.op_type == "Squeeze"
            and producer.meta.get("vectorize_axes") == tuple(axes)
        ):
            return producer.inputs[0] or value
        return self._axes_op("Unsqueeze", value, axes)

    def squeeze(self, value: ir.Value, axes: list[int]) -> ir.Value:
        """``Squeeze(value, axes)``, spelt for the opset; undoes an Unsqueeze made here."""
        producer = value.producer()
        if (
            producer is not None
            and producer in self.created
            and producer.op_type == "Unsqueeze"
            and producer.meta.get("vectorize_axes") == tuple(axes)
        ):
            return producer.inputs[0] or value
        return self._axes_op("Squeeze", value, axes)

    def _axes_op(self, op_type: str, value: ir.Value, axes: list[int]) -> ir.Value:
        if not axes:  # an empty axes list means "every unit dim" to a Squeeze: never emit one
            return self.op("Identity", [value])
        if axes_as_input(op_type, self.opset):
            out = self.op(op_type, [value, self.const(axes)])
        else:
            out = self.op(op_type, [value], {"axes": list(axes)})
        producer = out.producer()
        assert producer is not None, "made by self.op"
        producer.meta["vectorize_axes"] = tuple(axes)
        return out

    def lift(self, info: BodyValue, rank: int) -> ir.Value:
        """A batched value with its element unsqueezed, after the batch axis, to ``rank``."""
        return self.lift_value(info.value, self.rank(info), rank)

    def lift_value(self, value: ir.Value, have: int, rank: int) -> ir.Value:
        """:meth:`lift` of a stack whose element has rank ``have``."""
        if have >= rank:
            return value
        return self.unsqueeze(value, list(range(1, rank - have + 1)))

    def batch_size(self) -> ir.Value:
        """``[n]``, read from the first stack (from its lengths, for a ragged one)."""
        if self._batch_size is None:
            first = self.raggeds[0]
            if first is not None:
                self._batch_size = self.op("Shape", [ragged.lengths_of(self, first)])
            else:
                shape = self.op("Shape", [self.stacks[0]])
                self._batch_size = self.op("Slice", [shape, self.const([0]), self.const([1])])
        return self._batch_size

    def broadcast(self, info: BodyValue, what: str) -> ir.Value:
        """An invariant value repeated n times along a new batch axis."""
        if info.shape is None:
            raise self.decline(f"{what} is the same for every element, and its rank is unknown")
        rank = len(info.shape)
        # Tile, not Expand: onnxruntime's optimizer drops an Expand of [1, ..]
        # to [0, 1, ..] (an empty batch) and keeps one element.
        repeats = self.op("Concat", [self.batch_size(), self.const([1] * rank)], {"axis": 0})
        return self.op("Tile", [self.unsqueeze(info.value, [0]), repeats])

    def batched(self, info: BodyValue) -> ir.Value:
        """``info``'s value as a stack: an invariant one broadcast."""
        return info.value if info.batched else self.broadcast(info, repr(info.value.name))

    def dims(self, info: BodyValue) -> Dims:
        """The element shape of ``info``, which a rule needs the rank of."""
        if info.shape is None:
            name = info.value.name
            raise self.decline(f"the rank of {name!r} is unknown" if name else "a rank is unknown")
        return info.shape

    def rank(self, info: BodyValue) -> int:
        """The element rank of ``info``, which a rule needs."""
        return len(self.dims(info))

    @overload
    def constant(self, info: BodyValue, what: str) -> np.ndarray: ...
    @overload
    def constant(self, info: BodyValue | None, what: str) -> np.ndarray | None: ...
    def constant(self, info: BodyValue | None, what: str) -> np.ndarray | None:
        """The value of an invariant operand that must be a constant (None if absent)."""
        if info is None:
            return None
        array = None if info.batched else constant_array(info.value)
        if array is None:
            raise self.decline(f"its {what} is not a constant")
        return array

    def listed_axes(self, node: ir.Node, args: Sequence[BodyValue | None]) -> list[int] | None:
        """The axes ``node`` lists, as its input or attribute (as the opset spells
        them, :func:`axes_as_input`); None where it lists none."""
        if axes_as_input(node.op_type, self.opset):
            array = self.constant(args[1] if len(args) > 1 else None, "axes")
            return None if array is None else [int(a) for a in array.reshape(-1)]
        listed = node.attributes.get_ints("axes", None)
        return None if listed is None else list(listed)

    def axis(self, axis: int, rank: int) -> int:
        """``axis`` of an element of ``rank``, made non-negative."""
        if not -rank <= axis < rank:
            raise self.decline(f"axis {axis} is out of range for rank {rank}")
        return axis % rank

    def only_first_batched(
        self, args: Sequence[BodyValue | None], what: str = "its data"
    ) -> BodyValue:
        """The first operand, the only one that may differ from element to element."""
        first = args[0]
        if first is None or not first.batched or any(a and a.batched for a in args[1:]):
            raise self.decline(f"only {what} may differ from element to element")
        return first


def _detach(node: ir.Node) -> None:
    for index in range(len(node.inputs)):
        node.replace_input_with(index, None)


def _operands(args: Sequence[BodyValue | None]) -> list[Operand | None]:
    """What is known of a body node's inputs, each of one element (the value of a
    small constant only: a weight is never read for its shape)."""
    return [
        None
        if a is None
        else Operand(a.dtype, a.shape, None if a.batched else small_constant(a.value))
        for a in args
    ]


def _element_shape(
    node: ir.Node, ruled: Dims | None, proven: Dims | None, wrong: bool
) -> Dims | None:
    """The element shape of an output of ``node``: what the one shape analysis
    proves of it, each dim it leaves unknown from the batching rule's; for a
    node whose ONNX-inferred shape is seen wrong (``wrong``), the proof's
    alone (the rule's rank, every dim unknown, where it has none: unless the
    op is one ONNX may give another rank, :data:`RANK_SEEN_WRONG`)::

        e: [3,1,4]   Einsum<ijk,ijk->ijk>(e, b: [3,2,4])   rule: [3,?,4]   proven: [3,2,4]
    """
    if proven is not None:
        if wrong or ruled is None or len(ruled) != len(proven):
            return proven
        return tuple(p if p is not None else r for p, r in zip(proven, ruled, strict=True))
    if not wrong:
        return ruled
    if ruled is None or node.op_type in RANK_SEEN_WRONG:
        return None
    return (None,) * len(ruled)


def _dims(shape: ir.Shape | None) -> Dims | None:
    if shape is None:
        return None
    return tuple(d if isinstance(d, int) else None for d in shape)
