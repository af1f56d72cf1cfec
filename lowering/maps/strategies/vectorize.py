"""The vectorize strategy: the body applied once to all elements, no loop at all.

A SequenceMap whose body only does things that can take one more leading
axis is "vmap" in ONNX: stack the elements, run each op once on the stack,
and read the results from the stacked outputs. No Loop, no Scan, so it runs
where neither exists, and at tensor speed::

    parts = SplitToSequence<axis = a, keepdims = k>(X)             (no split)
    ys    = SequenceMap(parts, t) <body (e, u) => (y)>
    out   = ConcatFromSequence<axis = b, new_axis = 1>(ys)

becomes::

    E   = X                              a = 0, k = 0: the stack is X itself
        | Unsqueeze(X, [1])              a = 0, k = 1
        | Transpose(X, a to the front)   a != 0 (then Unsqueeze at a + 1 if k = 1)
    +---------------------------------------------------------------+
    | each body node, rewritten by its op's batching rule:           |
    |   Add(e, u)          -> Add(Unsqueeze(E, ..), u)   ranks lined |
    |   ReduceSum<axes=[0]>(e) -> ReduceSum<axes=[1]>(E)  axes + 1    |
    |   MatMul(e, W)       -> MatMul(E, W)                             |
    |   Reshape(e, s)      -> Reshape(E, [0 or -1, *s])               |
    |   Conv(e, W)         -> Unsqueeze(Conv(Squeeze(E, [1]), W), [1]) |
    |   Shape(e)           -> Slice(Shape(E), [1], [max])  (no batch) |
    |   Constant(), ops on outer values only -> moved out unchanged   |
    +---------------------------------------------------------------+
    Y   = what the body computes, with a leading batch axis: [n, *shape]
    out = Y                              b = 0 (Transpose for b != 0;
                                         Reshape for new_axis = 0)
    ys  = SplitToSequence<axis = 0, keepdims = 0>(Y)   only if still read

A sequence that is not a split, whose elements have one static shape, is
stacked with ``ConcatFromSequence<axis = 0, new_axis = 1>``; one zero element
is appended first and sliced off after, because onnxruntime's
ConcatFromSequence fails on an empty sequence.

Every body value is either *batched* (it differs from element to element
and now has the batch axis in front) or *invariant* (an outer-scope value,
an initializer, a Constant, or a deterministic op on invariant values; it is
computed once, outside). Each op has one rule (the registry ``_RULES``, an
allowlist in the manner of JAX's ``primitive_batchers``) that says how to
apply it to batched operands and what the element shape of its outputs is.
An op without a rule, an operand a rule cannot take (a computed Reshape
shape, batched Gather data and indices, an element rank that is unknown),
or a subgraph stops the strategy, and the reason names the node: the map
then gets the next strategy.

The rules are written against element shapes: an element of rank r is a
batched tensor of rank r + 1. Axes shift by one; operands broadcast against
each other are unsqueezed after the batch axis to one rank, so that
broadcasting never reaches the batch axis; a batch size of 0 works
throughout (Reshape copies the batch axis with 0 or infers it with -1,
never both with a zero-sized product). The default-domain opset decides
whether axes are attributes or inputs.

The analysis is a dry run of the same rewrite: it builds the new nodes
without inserting them and then detaches them, so a map that cannot be
vectorized is left exactly as it was. When the map is then vectorized, the
detached nodes are attached again rather than built twice.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import cast

import numpy as np
import onnx_ir as ir

from lowering.irutils.axes import axes_as_input
from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.naming import fresh
from lowering.irutils.node_inference import Operand, infer_outputs
from lowering.irutils.nodes import attribute, new_node
from lowering.irutils.op_facts import REDUCE_OPS, SAME_DTYPE_OPS, is_onnx_domain, is_onnx_op
from lowering.irutils.shapes import slice_length
from lowering.maps.plan import (
    MapPlan,
    Replacer,
    same_length_inputs,
    split_source,
    tensor_dtype,
    typed,
)
from lowering.maps.strategies.uniform import (
    concat_kind,
    count_of,
    read_stack,
    read_stack_in_readers,
)

Dims = tuple  # of int | None: an element shape with a known rank
_INT64_MAX = np.iinfo(np.int64).max
logger = logging.getLogger(__name__)
_MEMO = "vectorized"  # a map's detached rewrite, from vectorize_reason to lower_by_vectorizing


class _Decline(Exception):
    """A body that cannot be vectorized; the message says why."""


@dataclasses.dataclass
class _Info:
    """A body value in the rewrite: its new value and what is known of its element."""

    value: ir.Value
    shape: Dims | None  # of one element (None: rank unknown)
    batched: bool
    dtype: ir.DataType | None = None


def vectorize_reason(plan: MapPlan, opset: int) -> tuple[bool, bool, str]:
    """``(vectorizable, stack_free, why)`` for ``plan``'s map, changing nothing.

    ``stack_free``: every sequence input is a split tensor, so the stack
    costs no copy. ``why`` says why it can, or which node stops it.
    """
    if not same_length_inputs(plan):
        return False, False, "its sequence inputs may differ in length (the first one's counts)"
    rewrite = _Vectorizer(plan, opset)
    try:
        rewrite.results = rewrite.run()
    except _Decline as why:
        return False, False, str(why)
    except Exception as error:  # a bug in a rule must not stop the lowering
        logger.warning("Vectorizing %r failed: %r", plan.node.name, error, exc_info=True)
        return False, False, f"a batching rule failed ({error!r})"
    finally:
        rewrite.detach()
    plan.memo[_MEMO] = rewrite  # the rewrite reattaches it rather than build it again
    if rewrite.stack_free:
        how = (
            "its input is a split tensor"
            if len(rewrite.stacks) == 1
            else "its inputs are split tensors"
        )
    else:
        how = "its elements have one static shape and are stacked"
    return True, rewrite.stack_free, f"every op in its body has a batching rule, and {how}"


def emitted_ops(plan: MapPlan) -> list[tuple[str, ir.DataType | None]]:
    """The ops, with the element type of their first input, that vectorizing
    ``plan``'s map adds beyond copies of the body's own ops (which run on the
    types they ran on before), for a check against a runtime's kernels.

    Only for a map :func:`vectorize_reason` found vectorizable; then the
    result is the output's: its SplitToSequence, Reshape or Transpose.
    """
    rewrite = cast("_Vectorizer | None", plan.memo.get(_MEMO))
    if rewrite is None:
        raise ValueError("emitted_ops() is only for a map found vectorizable")
    ops = list(rewrite.emitted)
    for (type_, _), output in zip(plan.result_types, plan.node.outputs, strict=True):
        dtype = tensor_dtype(type_)
        ops += [(op, dtype) for op in ("SplitToSequence", "Reshape", "Transpose", "Identity")]
    return list(dict.fromkeys(ops))


def lower_by_vectorizing(plan: MapPlan, replacer: Replacer, opset: int) -> list[ir.Node]:
    """Rewrite ``plan``'s map as sketched above; returns the nodes that replace it.

    The map must have been found vectorizable by :func:`vectorize_reason`.
    """
    rewrite = cast("_Vectorizer | None", plan.memo.pop(_MEMO, None))
    if rewrite is not None and rewrite.opset == opset:
        rewrite.reattach()
        results = rewrite.results
    else:
        rewrite = _Vectorizer(plan, opset)
        try:
            results = rewrite.run()
        except _Decline:
            rewrite.detach()
            raise
    new_nodes = rewrite.commit(results)
    node = plan.node
    sequences: list[ir.Value | None] = []
    for output, result, (type_, shape) in zip(
        node.outputs, results, plan.result_types, strict=True
    ):
        stack_shape = None if shape is None else ir.Shape([rewrite.batch_dim, *shape])
        stack = typed(result, (type_, stack_shape))
        rank = None if shape is None else len(shape)
        # SequenceAt, SequenceLength and concats read the stack (scan_outputs' rules).
        count_nodes = count_of(stack, rewrite.batch_dim)
        count = count_nodes[-1].outputs[0]
        constants = read_stack_in_readers(output, stack, type_, shape, count, opset)
        if count.uses():
            new_nodes += count_nodes
        new_nodes += constants
        for user, index in list(output.uses()):
            kind = concat_kind(user, index, rank, shape)
            if kind is None:
                new_nodes += _merge_along(user, index, stack, shape)
                continue
            along = stack
            if kind == ("stack", kind[1]) and kind[1] != 0 and rank is not None:
                b = kind[1]
                perm = [*range(1, b + 1), 0, *range(b + 1, rank + 1)]
                transpose = fresh(new_node("Transpose", [stack], {"perm": perm}))
                new_nodes.append(transpose)
                along = transpose.outputs[0]
            new_nodes += read_stack(user, along, shape)
        if output.uses() or output.is_graph_output():
            split = fresh(new_node("SplitToSequence", [stack], {"axis": 0, "keepdims": 0}))
            new_nodes.append(split)
            sequences.append(split.outputs[0])
        else:
            sequences.append(None)
    replacer.replace(plan, new_nodes, sequences)
    return new_nodes


def _merge_along(user: ir.Node, index: int, stack: ir.Value, shape) -> list[ir.Node]:
    """Let ``ConcatFromSequence<axis = k, new_axis = 0>`` with k > 0 read the stack::

        ConcatFromSequence<axis = k>(seq) == Reshape(Transpose(stack, 0 to k),
                                                     [d_0, .., d_k-1, -1, d_k+1, ..])

    when every other dim of the element is static and non-zero, so that -1 is
    resolved even for an empty stack. Returns the new nodes (none if it does not apply).
    """
    if index != 0 or not is_onnx_op(user, "ConcatFromSequence") or shape is None:
        return []
    rank, axis = len(shape), user.attributes.get_int("axis", 0)
    if user.attributes.get_int("new_axis", 0) or not -rank <= axis < rank or rank == 0:
        return []
    k = axis % rank
    dims = list(shape)
    if k == 0 or not all(isinstance(d, int) and d > 0 for i, d in enumerate(dims) if i != k):
        return []
    perm = [*range(1, k + 1), 0, *range(k + 1, rank + 1)]
    transpose = fresh(new_node("Transpose", [stack], {"perm": perm}))
    target = constant_node(np.array([*dims[:k], -1, *dims[k + 1 :]], np.int64), "merged_shape")
    user.attributes.clear()
    user.op_type = "Reshape"
    user.replace_input_with(0, transpose.outputs[0])
    user.resize_inputs(2)
    user.replace_input_with(1, target.outputs[0])
    return [transpose, target]


class _Vectorizer:
    """One vectorization of one map: built by :meth:`run`, then committed or detached."""

    def __init__(self, plan: MapPlan, opset: int) -> None:
        self.plan = plan
        self.opset = opset
        self.body = plan.body
        self.nodes: list[ir.Node] = []  # the new nodes and the moved ones, in order
        self.created: list[ir.Node] = []
        self.moved: list[ir.Node] = []
        self.info: dict[ir.Value, _Info] = {}
        self.stacks: list[ir.Value] = []
        self.stack_free = True
        self._batch_size: ir.Value | None = None
        self._constants: dict[tuple, ir.Value] = {}
        self._node: ir.Node | None = None  # the body node being batched, for reasons
        self._inputs: list[list[ir.Value | None]] = []
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
        results = []
        for k, value in enumerate(self.body.outputs):
            info = self.arg(value)
            result = info.value if info.batched else self.broadcast(info, f"output {k}")
            producer = result.producer()
            if producer is None or producer not in self.created or result in results:
                result = self.op("Identity", [result])  # never retype a value not made here
            results.append(result)
        return results

    def detach(self) -> None:
        """Undo a dry run: the new nodes stop using the model's values."""
        self._inputs = [list(node.inputs) for node in self.created]
        for node in self.created:
            _detach(node)

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
        return list(self.nodes)

    def decline(self, why: str) -> _Decline:
        if self._node is not None:
            node = self._node
            where = f"node {node.name!r} ({node.op_type})" if node.name else node.op_type
            return _Decline(f"{where}: {why}")
        return _Decline(why)

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
            source = split_source(outer)
            if source is not None:
                stack, shape = self._split_stack(outer, *source, shape)
            else:
                stack, shape = self._concat_stack(outer, dtype, shape)
                self.stack_free = False
            self.stacks.append(stack)
            if dtype is not None and self.dtype_of(stack) is None:
                self._dtypes[stack] = dtype  # what ops on the stack are checked on
            self.info[inner] = _Info(stack, shape, True, dtype)

    def _split_stack(self, sequence, tensor, axis, keepdims, shape):
        dims = _dims(tensor.shape)
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
        if not self.stacks and dims is not None:
            self.batch_dim = dims[axis]  # the number of elements, when static
        stack = tensor
        if axis != 0:
            perm = [axis, *(i for i in range(rank) if i != axis)]
            stack = self.op("Transpose", [stack], {"perm": perm})
        if keepdims:
            stack = self.unsqueeze(stack, [axis + 1])
        return stack, shape

    def _concat_stack(self, sequence, dtype, shape):
        if shape is None or None in shape:
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
            return self.op("Concat", parts, {"axis": 0}), shape
        if dtype is None or dtype == ir.DataType.STRING:
            # ConstantOfShape, which makes the filler, takes no strings.
            raise self.decline(f"elements of type {dtype} cannot be stacked")
        try:
            zero = ir.Tensor(np.zeros([1], dtype.numpy()), dtype=dtype)
        except Exception as error:  # noqa: BLE001 -- no numpy twin (string, float8, ...)
            raise self.decline(f"elements of type {dtype} cannot be stacked: {error}") from None
        # onnxruntime's ConcatFromSequence fails on an empty sequence: append a
        # zero element, stack, and slice it off again.
        filler = self.op("ConstantOfShape", [self.const(shape)], {"value": zero})
        appended = self.op("SequenceInsert", [sequence, filler])
        stacked = self.op("ConcatFromSequence", [appended], {"axis": 0, "new_axis": 1})
        stack = self.op("Slice", [stacked, self.const([0]), self.const([-1])])
        return stack, shape

    def _visit(self, node: ir.Node) -> None:
        if not is_onnx_domain(node.domain):
            raise self.decline(f"an op of domain {node.domain!r} has no batching rule")
        for attr in node.attributes.values():
            if not isinstance(attr, ir.Attr) or attr.is_ref():
                raise self.decline(f"its attribute {attr.name!r} refers to a function attribute")
            if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
                raise self.decline("it has a subgraph")
        args = [None if value is None else self.arg(value) for value in node.inputs]
        if not any(a is not None and a.batched for a in args):
            if node.op_type not in _INVARIANT_OPS:
                raise self.decline("it reads no element, but is not known to be deterministic")
            self.nodes.append(node)
            self.moved.append(node)
            inferred = _infer_outputs(node, args, self.opset)
            for output, (dtype, dims) in zip(node.outputs, inferred, strict=True):
                known = _value_dims(output)
                dtype = output.dtype if output.type is not None else dtype
                self.info[output] = _Info(
                    output, known if known is not None else dims, False, dtype
                )
            return
        rule = _RULES.get(node.op_type)
        if rule is None:
            raise self.decline("it has no batching rule")
        infos = rule(self, node, args)
        for output, info in zip(node.outputs, infos, strict=False):
            if info.dtype is None and output.type is not None:
                info.dtype = output.dtype
            made_here = info.value.producer() in self.created
            if info.dtype is not None and info.value.type is None and made_here:
                info.value.type = ir.TensorType(info.dtype)
            self.info[output] = info

    def arg(self, value: ir.Value) -> _Info:
        info = self.info.get(value)
        if info is None:
            if value.graph is self.body and value.is_initializer():
                constant = self.op("Constant", [], {"value": value.const_value})
                info = _Info(constant, _value_dims(value), False, value.dtype)
            else:
                info = self._outer(value)
            self.info[value] = info
        return info

    @staticmethod
    def _outer(value: ir.Value) -> _Info:
        return _Info(value, _value_dims(value), False, value.dtype if value.type else None)

    # -- building blocks ----------------------------------------------------

    def op(self, op_type, inputs, attributes=None, num_outputs=1):
        attrs = [attribute(name, value) for name, value in (attributes or {}).items()]
        node = fresh(ir.Node("", op_type, inputs, attrs, num_outputs=num_outputs))
        dtype = self.dtype_of(inputs[0]) if inputs else None
        if op_type not in ("Constant",):
            self.emitted.append((op_type, dtype))
        if op_type == "Shape":
            dtype = ir.DataType.INT64
        elif op_type in ("Constant", "ConstantOfShape"):
            dtype = attrs[0].value.dtype if attrs else ir.DataType.FLOAT
        for output in node.outputs:
            self._dtypes[output] = dtype
        self.created.append(node)
        self.nodes.append(node)
        return node.outputs[0] if num_outputs == 1 else list(node.outputs)

    def dtype_of(self, value: ir.Value | None) -> ir.DataType | None:
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
        return info.dtype if info is not None else None

    def like(self, node: ir.Node, inputs, drop=(), num_outputs=None, **overrides):
        """A copy of body node ``node`` reading ``inputs``, its attributes changed."""
        attributes: dict[str, object] = {
            name: ir.Attr(name, attr.type, attr.value)
            for name, attr in node.attributes.items()
            if name not in drop and name not in overrides
        }
        attributes.update(overrides)
        emitted = len(self.emitted)
        outs = self.op(
            node.op_type, inputs, attributes, num_outputs=num_outputs or len(node.outputs)
        )
        del self.emitted[emitted:]  # the body's own op, on the types it ran on before
        for new, old in zip(outs if isinstance(outs, list) else [outs], node.outputs, strict=False):
            if old.type is not None and old.dtype not in (None, ir.DataType.UNDEFINED):
                self._dtypes[new] = old.dtype
            elif node.op_type not in SAME_DTYPE_OPS:
                self._dtypes[new] = None  # unknown; self.op assumed the first input's
        return outs

    def const(self, values, dtype=np.int64) -> ir.Value:
        array = np.array(values, dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key in self._constants:
            return self._constants[key]
        node = fresh(ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.Tensor(array))]))
        node.outputs[0].dtype = ir.DataType.from_numpy(array.dtype)
        node.outputs[0].shape = ir.Shape(array.shape)
        self.created.append(node)
        self.nodes.append(node)
        self._constants[key] = node.outputs[0]
        return node.outputs[0]

    def unsqueeze(self, value: ir.Value, axes: list[int]) -> ir.Value:
        producer = value.producer()
        if (  # Unsqueeze(Squeeze(v, axes), axes) == v, for a Squeeze made here
            producer in self.created
            and producer.op_type == "Squeeze"
            and producer.meta.get("vectorize_axes") == tuple(axes)
        ):
            return producer.inputs[0] or value
        return self._axes_op("Unsqueeze", value, axes)

    def squeeze(self, value: ir.Value, axes: list[int]) -> ir.Value:
        producer = value.producer()
        if (
            producer in self.created
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
        out.producer().meta["vectorize_axes"] = tuple(axes)
        return out

    def lift(self, info: _Info, rank: int) -> ir.Value:
        """A batched value with its element unsqueezed, after the batch axis, to ``rank``."""
        have = self.rank(info)
        if have >= rank:
            return info.value
        return self.unsqueeze(info.value, list(range(1, rank - have + 1)))

    def batch_size(self) -> ir.Value:
        """``[n]``, read from the first stack."""
        if self._batch_size is None:
            shape = self.op("Shape", [self.stacks[0]])
            self._batch_size = self.op("Slice", [shape, self.const([0]), self.const([1])])
        return self._batch_size

    def broadcast(self, info: _Info, what: str) -> ir.Value:
        """An invariant value repeated n times along a new batch axis."""
        if info.shape is None:
            raise self.decline(f"{what} is the same for every element, and its rank is unknown")
        rank = len(info.shape)
        # Tile, not Expand: onnxruntime's optimizer drops an Expand of [1, ..]
        # to [0, 1, ..] (an empty batch) and keeps one element.
        repeats = self.op("Concat", [self.batch_size(), self.const([1] * rank)], {"axis": 0})
        return self.op("Tile", [self.unsqueeze(info.value, [0]), repeats])

    def batched(self, info: _Info) -> ir.Value:
        return info.value if info.batched else self.broadcast(info, repr(info.value.name))

    def rank(self, info: _Info) -> int:
        if info.shape is None:
            name = info.value.name
            raise self.decline(f"the rank of {name!r} is unknown" if name else "a rank is unknown")
        return len(info.shape)

    def constant(self, info: _Info | None, what: str) -> np.ndarray | None:
        """The value of an invariant operand that must be a constant (None if absent)."""
        if info is None:
            return None
        array = None if info.batched else constant_array(info.value)
        if array is None:
            raise self.decline(f"its {what} is not a constant")
        return array

    def axis(self, axis: int, rank: int) -> int:
        if not -rank <= axis < rank:
            raise self.decline(f"axis {axis} is out of range for rank {rank}")
        return axis % rank

    def only_first_batched(self, args: list[_Info | None], what: str = "its data") -> None:
        if args[0] is None or not args[0].batched or any(a and a.batched for a in args[1:]):
            raise self.decline(f"only {what} may differ from element to element")


def _detach(node: ir.Node) -> None:
    for index in range(len(node.inputs)):
        node.replace_input_with(index, None)


def _infer_outputs(node: ir.Node, args, opset: int) -> list[tuple[ir.DataType | None, Dims | None]]:
    """Dtypes and proven shapes of an invariant node's outputs (a ConstantOfShape's
    shape is its input's value, for example): :mod:`lowering.irutils.node_inference`."""
    operands = [
        None
        if a is None
        else Operand(a.dtype, a.shape, None if a.batched else constant_array(a.value))
        for a in args
    ]
    return [(o.dtype, o.dims) for o in infer_outputs(node, operands, opset)]


def _dims(shape) -> Dims | None:
    if shape is None:
        return None
    return tuple(d if isinstance(d, int) else None for d in shape)


def _value_dims(value: ir.Value) -> Dims | None:
    dims = _dims(value.shape)
    if dims is None:
        array = constant_array(value)
        if array is not None:
            dims = tuple(array.shape)
    return dims


def _broadcast_dims(shapes: list[Dims]) -> Dims:
    """Numpy broadcasting of element shapes; None where it cannot be told."""
    rank = max(len(s) for s in shapes)
    out: list[int | None] = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        out.append(1 if not dims else dims.pop() if len(dims) == 1 and None not in dims else None)
    return tuple(out)


def _prod(dims) -> int | None:
    if any(d is None for d in dims):
        return None
    return int(np.prod(dims, dtype=np.int64))


# -- batching rules ---------------------------------------------------------
# Each takes the vectorizer, the body node and its operands, builds the
# batched nodes, and returns the outputs' infos. A rule that cannot batch
# its node raises the vectorizer's decline() with the reason.

Rule = Callable[[_Vectorizer, ir.Node, list], list[_Info]]
_RULES: dict[str, Rule] = {}


def _rule(*op_types: str):
    def register(function: Rule) -> Rule:
        for op_type in op_types:
            _RULES[op_type] = function
        return function

    return register


@_rule(
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Cast", "Ceil",
    "Celu", "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
    "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal",
    "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
    "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Clip",
)  # fmt: skip
def _elementwise_unary(v: _Vectorizer, node: ir.Node, args) -> list[_Info]:
    """Pointwise on its first operand; Clip's bounds must be the same for every element."""
    v.only_first_batched(args, "its input")
    x = args[0]
    out = v.like(node, [x.value, *(a.value if a else None for a in args[1:])])
    return [_Info(out, x.shape, True)]


@_rule("CastLike")
def _cast_like(v, node, args):
    x, target = args
    out = v.like(node, [x.value, target.value])
    return [_Info(out, x.shape, x.batched)]


@_rule(
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor",
    "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "BitShift", "BitwiseAnd",
    "BitwiseOr", "BitwiseXor", "Where",
)  # fmt: skip
def _elementwise_broadcast(v, node, args):
    """Batched operands are unsqueezed after the batch axis to the highest rank, so
    that numpy broadcasting, aligned on the right, never reaches the batch axis."""
    ranks = [v.rank(a) for a in args if a is not None]
    top = max(ranks)
    inputs = [None if a is None else v.lift(a, top) if a.batched else a.value for a in args]
    shape = _broadcast_dims([a.shape for a in args if a is not None])
    return [_Info(v.like(node, inputs), shape, True)]


@_rule("PRelu")
def _prelu(v, node, args):
    x, slope = args
    if not x.batched:
        raise v.decline("its slope differs from element to element but its input does not")
    rank = v.rank(x)
    slope_value = v.lift(slope, rank) if slope.batched else slope.value
    return [_Info(v.like(node, [x.value, slope_value]), x.shape, True)]


def _matmul_dims(a: Dims, b: Dims) -> Dims:
    va, vb = len(a) == 1, len(b) == 1
    a = (1, *a) if va else a
    b = (*b, 1) if vb else b
    dims = [*_broadcast_dims([a[:-2], b[:-2]]), a[-2], b[-1]]
    if vb:
        dims.pop(-1)
    if va:
        dims.pop(-2 if not vb else -1)
    return tuple(dims)


def _pad(v: _Vectorizer, value: ir.Value, rank: int, target: int) -> ir.Value:
    if target <= rank:
        return value
    return v.unsqueeze(value, list(range(1, target - rank + 1)))


def _batched_matmul(v, a: _Info, b: _Info) -> ir.Value:
    """MatMul with numpy's semantics for the element, on stacks."""
    ra, rb = v.rank(a), v.rank(b)
    if ra == 0 or rb == 0:
        raise v.decline("MatMul of a scalar")
    A, B = a.value, b.value
    if a.batched and b.batched:
        squeeze = []
        if ra == 1:  # [n, k] -> [n, 1, k]
            A, ra = v.unsqueeze(A, [1]), 2
            squeeze.append(-2)
        if rb == 1:  # [n, k] -> [n, k, 1]
            B, rb = v.unsqueeze(B, [2]), 2
            squeeze.append(-1)
        top = max(ra, rb)
        out = v.op("MatMul", [_pad(v, A, ra, top), _pad(v, B, rb, top)])
        if squeeze:
            out = v.squeeze(out, sorted(top + 1 + s for s in squeeze))
        return out
    if a.batched:
        if ra == 1 and rb > 2:  # a vector against a stack of matrices
            A = _pad(v, v.unsqueeze(A, [1]), 2, rb)
            return v.squeeze(v.op("MatMul", [A, B]), [rb - 1])
        if ra >= 2 and rb > ra:
            A = _pad(v, A, ra, rb)
        return v.op("MatMul", [A, B])
    if rb == 1:
        if ra == 1:  # a dot product is symmetric
            return v.op("MatMul", [B, A])
        B = _pad(v, v.unsqueeze(B, [2]), 2, ra)
        return v.squeeze(v.op("MatMul", [A, B]), [ra])
    if ra > rb:
        B = _pad(v, B, rb, ra)
    return v.op("MatMul", [A, B])


@_rule("MatMul")
def _matmul(v, node, args):
    a, b = args
    out = _batched_matmul(v, a, b)
    return [_Info(out, _matmul_dims(a.shape, b.shape), True)]


@_rule("Gemm")
def _gemm(v, node, args):
    """alpha * A' B' + beta * C, as MatMul, Mul and Add: Gemm takes only matrices."""
    a, b, c = (*args, None)[:3]
    attrs = node.attributes
    alpha, beta = attrs.get_float("alpha", 1.0), attrs.get_float("beta", 1.0)
    if c is None or beta == 0.0:
        c = None
    dtype = a.dtype or b.dtype
    if (alpha != 1.0 or (c is not None and beta != 1.0)) and dtype is None:
        raise v.decline("alpha or beta is not 1 and the element type is unknown")
    operands = []
    for info, flag in ((a, "transA"), (b, "transB")):
        if v.rank(info) != 2:
            raise v.decline("Gemm takes matrices")
        value = info.value
        if attrs.get_int(flag, 0):
            value = v.op("Transpose", [value], {"perm": [0, 2, 1] if info.batched else [1, 0]})
        operands.append(_Info(value, info.shape, info.batched))
    rows = a.shape[1 if attrs.get_int("transA", 0) else 0]
    cols = b.shape[0 if attrs.get_int("transB", 0) else 1]
    if a.batched or b.batched:
        out = _batched_matmul(v, *operands)
    else:
        out = v.op("MatMul", [operands[0].value, operands[1].value])
    if alpha != 1.0:
        out = v.op("Mul", [out, v.const(alpha, dtype.numpy())])
    if c is not None:
        bias = c.value
        if beta != 1.0:
            bias = v.op("Mul", [bias, v.const(beta, dtype.numpy())])
        if c.batched:
            bias = _pad(v, bias, v.rank(c), 2)
        out = v.op("Add", [out, bias])
    batched = a.batched or b.batched or (c is not None and c.batched)
    return [_Info(out, (rows, cols), batched)]


def _axes_as_input(v: _Vectorizer, op_type: str) -> bool:
    return axes_as_input(op_type, v.opset)


@_rule(*sorted(REDUCE_OPS))
def _reduce(v, node, args):
    v.only_first_batched(args)
    x = args[0]
    rank = v.rank(x)
    if rank == 0:
        raise v.decline("it reduces a scalar")
    keepdims = node.attributes.get_int("keepdims", 1)
    noop = node.attributes.get_int("noop_with_empty_axes", 0)
    as_input = _axes_as_input(v, node.op_type)
    if as_input:
        array = v.constant(args[1] if len(args) > 1 else None, "axes")
        axes = None if array is None else [int(a) for a in array.reshape(-1)]
    else:
        axes = node.attributes.get_ints("axes", None)
        axes = None if axes is None else list(axes)
    if not axes:
        if noop:
            out = v.like(node, [x.value], drop=("axes",))
            return [_Info(out, x.shape, True)]
        axes = list(range(rank))
    axes = sorted({v.axis(a, rank) for a in axes})
    shifted = [a + 1 for a in axes]
    if as_input:
        out = v.like(node, [x.value, v.const(shifted)], drop=("noop_with_empty_axes",))
    else:
        out = v.like(node, [x.value], axes=shifted)
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes)
    return [_Info(out, shape, True)]


@_rule("ArgMax", "ArgMin")
def _arg_reduce(v, node, args):
    v.only_first_batched(args)
    x = args[0]
    rank = v.rank(x)
    if rank == 0:
        raise v.decline("it reduces a scalar")
    axis = v.axis(node.attributes.get_int("axis", 0), rank)
    keepdims = node.attributes.get_int("keepdims", 1)
    out = v.like(node, [x.value], axis=axis + 1)
    shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape) if keepdims or i != axis)
    return [_Info(out, shape, True, ir.DataType.INT64)]


@_rule("Softmax", "LogSoftmax", "Hardmax", "LpNormalization")
def _along_axis(v, node, args):
    """One axis attribute, shifted. Before opset 13 Softmax flattens from its axis
    on; the batch axis comes before it either way."""
    v.only_first_batched(args)
    x = args[0]
    rank = v.rank(x)
    if rank == 0:
        raise v.decline("its input is a scalar")
    default = 1 if node.op_type != "LpNormalization" and v.opset < 13 else -1
    axis = v.axis(node.attributes.get_int("axis", default), rank)
    return [_Info(v.like(node, [x.value], axis=axis + 1), x.shape, True)]


@_rule("LayerNormalization")
def _layer_norm(v, node, args):
    v.only_first_batched(args)
    x = args[0]
    rank = v.rank(x)
    axis = v.axis(node.attributes.get_int("axis", -1), rank)
    outs = v.like(node, [a.value if a else None for a in args], axis=axis + 1)
    outs = outs if isinstance(outs, list) else [outs]
    stats = tuple(d if i < axis else 1 for i, d in enumerate(x.shape))
    return [_Info(outs[0], x.shape, True), *(_Info(o, stats, True) for o in outs[1:])]


@_rule("CumSum")
def _cumsum(v, node, args):
    v.only_first_batched(args)
    x = args[0]
    axis = v.constant(args[1], "axis")
    shifted = v.axis(int(axis.reshape(-1)[0]), v.rank(x)) + 1
    return [_Info(v.like(node, [x.value, v.const(shifted, axis.dtype)]), x.shape, True)]


@_rule("Concat")
def _concat(v, node, args):
    rank = max(v.rank(a) for a in args)
    axis = v.axis(node.attributes.get_int("axis", 0), rank)
    out = v.like(node, [v.batched(a) for a in args], axis=axis + 1)
    sizes = [a.shape[axis] for a in args]
    shape = [
        (None if None in sizes else sum(sizes))
        if i == axis
        else next((a.shape[i] for a in args if a.shape[i] is not None), None)
        for i in range(rank)
    ]
    return [_Info(out, tuple(shape), True)]


@_rule("Split")
def _split(v, node, args):
    v.only_first_batched(args)
    x = args[0]
    rank = v.rank(x)
    axis = v.axis(node.attributes.get_int("axis", 0), rank)
    inputs = [x.value, *(a.value if a else None for a in args[1:])]
    outs = v.like(node, inputs, axis=axis + 1)
    outs = outs if isinstance(outs, list) else [outs]
    shape = tuple(None if i == axis else d for i, d in enumerate(x.shape))
    return [_Info(o, shape, True) for o in outs]


@_rule("Slice")
def _slice(v, node, args):
    """Starts, ends and steps stay as they are; the axes, made explicit, shift."""
    v.only_first_batched(args)
    x, starts, ends, axes, steps = (*args, None, None, None)[:5]
    rank = v.rank(x)
    if axes is not None:
        axes_list = [v.axis(int(a), rank) for a in v.constant(axes, "axes").reshape(-1)]
    else:
        count = starts.shape[0] if starts.shape and len(starts.shape) == 1 else None
        if count is None:
            raise v.decline("it has no axes and the number of its starts is unknown")
        if count > rank:
            raise v.decline(f"it slices {count} axes of an element of rank {rank}")
        axes_list = list(range(count))
    out = v.like(
        node,
        [
            x.value,
            starts.value,
            ends.value,
            v.const([a + 1 for a in axes_list]),
            steps.value if steps else None,
        ],
    )
    shape: list[int | None] = list(x.shape)
    bounds = [constant_array(a.value) if a is not None else None for a in (starts, ends)]
    step_values = constant_array(steps.value) if steps is not None else np.ones(len(axes_list))
    for j, axis in enumerate(axes_list):
        dim = shape[axis]
        if dim is None or bounds[0] is None or bounds[1] is None or step_values is None:
            shape[axis] = None
            continue
        start, end = int(bounds[0].reshape(-1)[j]), int(bounds[1].reshape(-1)[j])
        shape[axis] = slice_length(dim, start, end, int(step_values.reshape(-1)[j]))
    return [_Info(out, tuple(shape), True)]


@_rule("Gather")
def _gather(v, node, args):
    data, indices = args
    rank = v.rank(data)
    axis = v.axis(node.attributes.get_int("axis", 0), rank)
    index_dims = indices.shape if indices.shape is not None else None
    if index_dims is None:
        raise v.decline("the rank of its indices is unknown")
    if data.batched and not indices.batched:
        out = v.like(node, [data.value, indices.value], axis=axis + 1)
        shape = (*data.shape[:axis], *index_dims, *data.shape[axis + 1 :])
    elif indices.batched and not data.batched:
        if axis != 0:
            raise v.decline("its indices differ from element to element, on an axis other than 0")
        out = v.like(node, [data.value, indices.value], axis=0)
        shape = (*index_dims, *data.shape[1:])
    else:
        raise v.decline("both its data and its indices differ from element to element")
    return [_Info(out, shape, True)]


@_rule("GatherElements")
def _gather_elements(v, node, args):
    data, indices = args
    axis = v.axis(node.attributes.get_int("axis", 0), v.rank(data))
    out = v.like(node, [v.batched(data), v.batched(indices)], axis=axis + 1)
    return [_Info(out, indices.shape, True)]


@_rule("Transpose")
def _transpose(v, node, args):
    x = args[0]
    rank = v.rank(x)
    perm = node.attributes.get_ints("perm", None)
    perm = list(reversed(range(rank))) if perm is None else [v.axis(p, rank) for p in perm]
    out = v.like(node, [x.value], perm=[0, *(p + 1 for p in perm)])
    return [_Info(out, tuple(x.shape[p] for p in perm), True)]


@_rule("Flatten")
def _flatten(v, node, args):
    x = args[0]
    rank = v.rank(x)
    axis = node.attributes.get_int("axis", 1)
    if not -rank <= axis <= rank:
        raise v.decline(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    rows, cols = _prod(x.shape[:axis]), _prod(x.shape[axis:])
    if not rows or not cols:
        raise v.decline(f"the element shape {_show(x.shape)} is not static and non-empty")
    out = v.op("Reshape", [x.value, v.const([-1, rows, cols])])
    return [_Info(out, (rows, cols), True)]


@_rule("Reshape")
def _reshape(v: _Vectorizer, node: ir.Node, args: list[_Info | None]) -> list[_Info]:
    """The batch axis is kept: with 0 (copy) when the target has no -1, or with
    -1 when every other dim is known and non-zero; never both, which onnxruntime
    cannot resolve for an empty batch."""
    v.only_first_batched(args)
    x, target = args
    assert x is not None, "only_first_batched checked that it is given"
    array = v.constant(target, "shape (a computed shape)")
    assert array is not None, "Reshape's shape is a required input"
    wanted = [int(d) for d in array.reshape(-1)]
    allowzero = node.attributes.get_int("allowzero", 0)
    if allowzero and 0 in wanted:
        raise v.decline("its shape has a 0 and allowzero = 1")
    dims = x.shape
    resolved: list[int | None] = [
        (dims[j] if dims is not None and j < len(dims) else None) if d == 0 else d
        for j, d in enumerate(wanted)
    ]
    if -1 in resolved:
        j = resolved.index(-1)
        known = _prod([d for i, d in enumerate(resolved) if i != j])
        total = _prod(dims) if dims is not None else None
        if known and total is not None:
            resolved[j] = total // known
    data = x.value
    if all(isinstance(d, int) and d > 0 for d in resolved):
        shape = v.const([-1, *resolved])
    elif -1 not in wanted:
        shape = v.const([0, *wanted])
    else:  # the -1, computed: the element's size over its other dims
        data, shape = _computed_target(v, x, wanted, dims)
    out = v.op("Reshape", [data, shape])
    return [_Info(out, tuple(d if d != -1 else None for d in resolved), True)]


def _computed_target(
    v: _Vectorizer, x: _Info, wanted: list[int], dims
) -> tuple[ir.Value, ir.Value]:
    """``(data, target)`` for a Reshape of the stack whose element target has a -1
    at ``j``: the -1 is computed as the element's size over its other dims.

    Reshape reads a 0 as "copy the input's dim", so a computed 0 (an empty
    element) must meet a 0 in the input: the stack is first flattened per
    element and given unit dims up to ``j``, so that its dim ``j + 1`` is the
    element's size, which is 0 exactly when the computed dim is::

        stack [n, *d]  --Flatten<1>-->  [n, s]  --Unsqueeze 1..j-->  [n, 1, .., 1, s]
        target [0, t_0, .., t_j-1, s / P, t_j+1, ..]   (copies read from the stack's shape)

    Every other dim of the target is explicit. One of them is 0 only where the
    element's own Reshape fails (P = 0 leaves the -1 undefined). The target is
    built with Gather, Mul and Add, not Concat: onnxruntime's Reshape fusion
    turns a Concat it cannot resolve back into a -1, which an empty batch
    cannot resolve.
    """
    j = wanted.index(-1)
    stack_shape = v.op("Shape", [x.value])
    size = v.op(
        "ReduceProd",
        [v.op("Slice", [stack_shape, v.const([1]), v.const([_INT64_MAX])])],
        {"keepdims": 1},
    )
    static, copied = 1, []
    base = [0]  # the batch dim, copied
    for i, d in enumerate(wanted):
        if i == j:
            base.append(0)
        elif d != 0:
            static *= d
            base.append(d)
        elif dims is not None and i < len(dims) and dims[i] is not None:
            static *= dims[i]
            base.append(dims[i])
        else:
            copied.append(i)
            base.append(0)
    others = v.const([static])
    target = v.const(base)
    if copied:
        gathered = v.op("Gather", [stack_shape, v.const([i + 1 for i in copied])], {"axis": 0})
        others = v.op("Mul", [others, v.op("ReduceProd", [gathered], {"keepdims": 1})])
        # each copied dim, read from the stack's shape, in its place
        index = [i + 1 if i in copied else 0 for i in range(-1, len(wanted))]
        mask = [1 if i in copied else 0 for i in range(-1, len(wanted))]
        placed = v.op("Gather", [stack_shape, v.const(index)], {"axis": 0})
        target = v.op("Add", [target, v.op("Mul", [placed, v.const(mask)])])
    missing = v.op("Div", [size, v.op("Max", [others, v.const([1])])])
    where = [1 if i == j + 1 else 0 for i in range(len(base))]
    target = v.op("Add", [target, v.op("Mul", [missing, v.const(where)])])
    data = v.op("Flatten", [x.value], {"axis": 1})
    if j > 0:
        data = v.unsqueeze(data, list(range(1, j + 1)))
    return data, target


@_rule("Squeeze")
def _squeeze(v, node, args):
    v.only_first_batched(args)
    x = args[0]
    rank = v.rank(x)
    if _axes_as_input(v, "Squeeze"):
        array = v.constant(args[1] if len(args) > 1 else None, "axes")
        axes = None if array is None else [int(a) for a in array.reshape(-1)]
    else:
        axes = node.attributes.get_ints("axes", None)
    if not axes:  # none, or an empty list: runtimes read both as "every unit dim"
        if None in x.shape:
            raise v.decline("it has no axes and the element shape is not static")
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    axes = sorted({v.axis(a, rank) for a in axes})
    out = v.squeeze(x.value, [a + 1 for a in axes])
    return [_Info(out, tuple(d for i, d in enumerate(x.shape) if i not in axes), True)]


@_rule("Unsqueeze")
def _unsqueeze(v, node, args):
    v.only_first_batched(args)
    x = args[0]
    if _axes_as_input(v, "Unsqueeze"):
        axes = [int(a) for a in v.constant(args[1], "axes").reshape(-1)]
    else:
        axes = list(node.attributes.get_ints("axes", []))
    if not axes:
        raise v.decline("its axes are empty")
    rank = v.rank(x) + len(axes)
    axes = sorted({v.axis(a, rank) for a in axes})
    out = v.unsqueeze(x.value, [a + 1 for a in axes])
    rest = iter(x.shape)
    return [_Info(out, tuple(1 if i in axes else next(rest) for i in range(rank)), True)]


@_rule("Expand")
def _expand(v, node, args):
    v.only_first_batched(args)
    x, target = args
    if target.shape is None or len(target.shape) != 1 or target.shape[0] is None:
        raise v.decline("the length of its shape is unknown")
    rank = max(v.rank(x), target.shape[0])
    out = v.like(node, [v.lift(x, rank), target.value])
    array = constant_array(target.value)
    if array is not None:
        shape = _broadcast_dims([x.shape, tuple(int(d) for d in array)])
    else:
        shape = (None,) * rank
    return [_Info(out, shape, True)]


@_rule("Tile")
def _tile(v, node, args):
    v.only_first_batched(args)
    x, repeats = args
    array = constant_array(repeats.value)
    if array is not None:
        counts = v.const([1, *array.reshape(-1)])
        shape = tuple(None if d is None else d * int(r) for d, r in zip(x.shape, array))
    else:
        counts = v.op("Concat", [v.const([1]), repeats.value], {"axis": 0})
        shape = (None,) * v.rank(x)
    return [_Info(v.like(node, [x.value, counts]), shape, True)]


@_rule("Pad")
def _pad_rule(v, node, args):
    """The batch axis gets no padding: a zero width in front of ``pads``, or
    the ``axes`` shifted by one. In ``wrap`` mode onnxruntime's Pad fails on
    any input with a zero dim, padded or not, so an empty stack (a map over
    no elements, whose body the original never runs) is guarded::

        Slice(Pad<wrap>(Pad<constant>(E, batch end + 1), pads), [0], [-1])

    which needs every dim of an element to be nonzero (else the original
    fails as well, on every element)."""
    v.only_first_batched(args)
    x, pads, value, axes = (*args, None, None, None)[:4]
    rank = v.rank(x)
    wrap = node.attributes.get_string("mode", "constant") == "wrap"
    guard = wrap and not (v.batch_dim is not None and v.batch_dim > 0)
    if guard and not all(d is not None and d > 0 for d in x.shape):
        raise v.decline(
            f"in wrap mode onnxruntime's Pad fails on a zero dim, the stack may be empty, "
            f"and the element shape {_show(x.shape)} is not known to be nonzero"
        )
    data = x.value
    if guard:
        one_more = v.const([0] * (rank + 1) + [1] + [0] * rank)
        data = v.op("Pad", [data, one_more], {"mode": "constant"})
    if axes is not None:
        shifted = [v.axis(int(a), rank) + 1 for a in v.constant(axes, "axes").reshape(-1)]
        widths_in = [pads.value, value.value if value else None, v.const(shifted)]
        shape = (None,) * rank
    else:
        widths = v.constant(pads, "pads").reshape(-1)
        widths_in = [
            v.const([0, *widths[:rank], 0, *widths[rank:]]),
            value.value if value else None,
        ]
        shape = tuple(
            None if d is None else d + int(widths[i]) + int(widths[rank + i])
            for i, d in enumerate(x.shape)
        )
    out = v.like(node, [data, *widths_in])
    if guard:
        out = v.op("Slice", [out, v.const([0]), v.const([-1])])
    return [_Info(out, shape, True)]


@_rule("Shape")
def _shape(v, node, args):
    """Every element of a stack has one shape: the stack's without its first dim."""
    x = args[0]
    rank = v.rank(x)
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    dims = x.shape[start:end]
    if None not in dims:
        return [_Info(v.const(list(dims)), (len(dims),), False, ir.DataType.INT64)]
    shape = v.op("Shape", [x.value])
    out = v.op("Slice", [shape, v.const([start + 1]), v.const([end + 1])])
    return [_Info(out, (max(end - start, 0),), False, ir.DataType.INT64)]


@_rule("Size")
def _size(v, node, args):
    x = args[0]
    if x.shape is not None and None not in x.shape:
        return [_Info(v.const(_prod(x.shape)), (), False, ir.DataType.INT64)]
    shape = v.op("Shape", [x.value])
    dims = v.op("Slice", [shape, v.const([1]), v.const([_INT64_MAX])])
    return [_Info(v.op("ReduceProd", [dims], {"keepdims": 0}), (), False, ir.DataType.INT64)]


@_rule("TopK")
def _topk(v, node, args):
    v.only_first_batched(args)
    x, k = args
    rank = v.rank(x)
    axis = v.axis(node.attributes.get_int("axis", -1), rank)
    values, indices = v.like(node, [x.value, k.value], axis=axis + 1, num_outputs=2)
    shape = tuple(None if i == axis else d for i, d in enumerate(x.shape))
    return [_Info(values, shape, True), _Info(indices, shape, True, ir.DataType.INT64)]


@_rule("Einsum")
def _einsum(v: _Vectorizer, node: ir.Node, args: list[_Info | None]) -> list[_Info]:
    """A letter the equation does not use names the batch axis of each batched operand."""
    equation = node.attributes.get_string("equation", "").replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    if "..." in equation or not arrow:
        raise v.decline("its equation has an ellipsis or no explicit output")
    terms = inputs.split(",")
    if len(terms) != len(args):
        raise v.decline("its equation does not match its inputs")
    operands = [a for a in args if a is not None]
    assert len(operands) == len(args), "Einsum's inputs are all required"
    batch = next(
        c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba" if c not in equation
    )
    batched = [batch + t if a.batched else t for t, a in zip(terms, operands, strict=True)]
    out = v.like(
        node, [a.value for a in operands], equation=f"{','.join(batched)}->{batch}{output}"
    )
    sizes: dict[str, int | None] = {}
    for term, a in zip(terms, operands, strict=True):
        for letter, d in zip(term, a.shape or (None,) * len(term), strict=False):
            sizes[letter] = d if sizes.get(letter) is None else sizes[letter]
    return [_Info(out, tuple(sizes.get(c) for c in output), True)]


@_rule("OneHot")
def _one_hot(v, node, args):
    v.only_first_batched(args, "its indices")
    indices = args[0]
    rank = v.rank(indices) + 1
    axis = v.axis(node.attributes.get_int("axis", -1), rank)
    out = v.like(node, [a.value for a in args], axis=axis + 1)
    depth = constant_array(args[1].value)
    size = int(depth.reshape(-1)[0]) if depth is not None else None
    return [_Info(out, (*indices.shape[:axis], size, *indices.shape[axis:]), True)]


@_rule("Dropout")
def _dropout(v, node, args):
    """Dropout for inference is the identity; training, or a mask read, is not batched."""
    x, _, training = (*args, None, None)[:3]
    mode = constant_array(training.value) if training is not None else np.array(False)
    if mode is None or bool(mode) or node.attributes.get_int("training_mode", 0):
        raise v.decline("it may be in training mode")
    if any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
        raise v.decline("its mask is read")
    if not x.batched:
        raise v.decline("its ratio or mode differs from element to element")
    return [_Info(v.op("Identity", [x.value]), x.shape, True)]


@_rule("Trilu")
def _trilu(v, node, args):
    v.only_first_batched(args)
    x = args[0]
    if v.rank(x) < 2:
        raise v.decline("Trilu takes matrices")
    return [_Info(v.like(node, [a.value if a else None for a in args]), x.shape, True)]


@_rule(
    "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
    "GlobalMaxPool", "GlobalLpPool", "BatchNormalization", "InstanceNormalization", "LRN",
    "DepthToSpace", "SpaceToDepth",
)  # fmt: skip
def _image(v, node, args):
    """An element [1, C, H, W] (an image [C, H, W] unsqueezed) is one image of a
    batch: the stack, squeezed, is the batch [n, C, H, W]."""
    v.only_first_batched(args, "its image")
    x = args[0]
    rank = v.rank(x)
    if rank < 3 or x.shape[0] != 1:
        raise v.decline(
            f"its element has shape {_show(x.shape)}; it must be one image, [1, C, ...]"
        )
    if any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
        raise v.decline("an output other than the first is read")
    if node.attributes.get_int("training_mode", 0):
        raise v.decline("training_mode is set")
    images = v.squeeze(x.value, [1])
    out = v.like(node, [images, *(a.value if a else None for a in args[1:])], num_outputs=1)
    channels = x.shape[1]
    if node.op_type in ("Conv", "ConvTranspose"):
        w = args[1].shape
        groups = node.attributes.get_int("group", 1)
        if w is None:
            channels = None
        elif node.op_type == "Conv":
            channels = w[0]
        else:
            channels = None if w[1] is None else w[1] * groups
    elif node.op_type in ("DepthToSpace", "SpaceToDepth"):
        channels = None
    spatial = (1,) * (rank - 2) if node.op_type.startswith("Global") else (None,) * (rank - 2)
    return [_Info(v.unsqueeze(out, [1]), (1, channels, *spatial), True)]


# Ops that may run once, outside, on values the same for every element.
_INVARIANT_OPS = frozenset([*_RULES, "Constant", "ConstantOfShape", "Range"])


def _show(dims: Dims | None) -> str:
    if dims is None:
        return "of unknown rank"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
