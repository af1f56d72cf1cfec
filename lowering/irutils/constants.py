"""Constant values: read without touching the model, made, and cleaned up.

``onnx_ir.convenience.get_const_tensor`` names the tensor it returns, which
writes through to the proto a model was read from. The rewrites here only
look, so they read constants with :func:`constant_array`. They make the
constants they need with :func:`constant_node` (or, where many rewrites in
one graph need the same few, from one :class:`SharedConstants`), and drop
the ones their rewrites leave unread with
:func:`lowering.irutils.dead_code.remove_unread`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence

import numpy as np
import onnx_ir as ir

from lowering.irutils.naming import fresh
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.walk import GraphLike, graph_of

_LIST_ATTRIBUTES = {"value_ints": np.int64, "value_floats": np.float32}
_SCALAR_ATTRIBUTES = {"value_int": np.int64, "value_float": np.float32}


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """The contents of an initializer or Constant output no caller can override."""
    if value is None or value.is_graph_input():
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    node = value.producer()
    if node is None or not is_onnx_op(node, "Constant"):
        return None
    for name, attr in node.attributes.items():
        if not isinstance(attr, ir.Attr) or attr.is_ref():
            return None
        if name == "value":
            # attr.value, not attr.as_tensor(): that checks a runtime Protocol,
            # ~0.1 ms a call, and passes read every Constant of a model.
            return attr.value.numpy() if attr.type == ir.AttributeType.TENSOR else None
        if name in _SCALAR_ATTRIBUTES:
            return np.array(attr.value, _SCALAR_ATTRIBUTES[name])
        if name in _LIST_ATTRIBUTES:
            return np.array(attr.value, _LIST_ATTRIBUTES[name])
    return None


def constant_node(
    value: np.ndarray, stem: str | None = None, dtype: ir.DataType | None = None
) -> ir.Node:
    """A fresh Constant node holding ``value``, its output typed.

    ``dtype``: the tensor's, where numpy's does not say it (a bfloat16 or int4
    array; STRING for an array of bytes objects); by default ``value``'s.
    """
    # ir.Node with a typed attribute: ir.node's and ir.tensor's conversions
    # check protocols, and cost ~0.5 ms a node.
    tensor: ir.TensorProtocol
    if dtype == ir.DataType.STRING:
        tensor = ir.StringTensor(value, shape=ir.Shape(value.shape))
    else:
        tensor = ir.Tensor(value, dtype=dtype)
    node = fresh(ir.Node("", "Constant", [], [ir.AttrTensor("value", tensor)]))
    output = fresh(node.outputs[0], stem)
    output.dtype = dtype if dtype is not None else ir.DataType.from_numpy(value.dtype)
    output.shape = ir.Shape(value.shape)
    return node


# (kind, element type, shape, contents): numpy spells bfloat16 and float8 types alike
_Key = tuple[str, ir.DataType, tuple[int, ...], bytes]


@dataclasses.dataclass
class _Group:
    """Nodes shared by :meth:`SharedConstants.shared`, detached until placed."""

    nodes: list[ir.Node]
    after: ir.Value
    reads: list[list[ir.Value | None]]

    def attach(self) -> list[ir.Node]:
        """Give the nodes back their inputs; returns them."""
        for node, inputs in zip(self.nodes, self.reads, strict=True):
            for index, value in enumerate(inputs):
                if node.inputs[index] is not value:
                    node.replace_input_with(index, value)
        return self.nodes


@dataclasses.dataclass
class SharedConstants:
    """One Constant (or zero-filled ``ConstantOfShape``) per value per graph,
    for rewrites that each need the same few: 10,000 vectorized maps in one
    graph share one ``[0]`` and one ``[-1]`` for their Slices and one filler
    per element shape, not 30,000 Constants.

    Rewrites are planned before anything changes, so a value handed out here
    belongs to no graph until :meth:`place` puts it at the start of its
    graph, where it precedes every reader; a value that no kept rewrite
    reads is never placed. Belongs to one pass run (a later pass may change
    or remove what it placed)::

        make:   rewrite A -> c0 (detached)      rewrite B -> c0 (the same)
        place:  graph { c0 = Constant(..); ...A...; ...B... }

    The same holds for nodes that read a value of the model (:meth:`shared`:
    the stack of a sequence that several maps vectorize), which go right
    after that value is made; until placed they read nothing, so that the
    plans made meanwhile see no new reader of it.
    """

    _values: dict[tuple[GraphLike, _Key], ir.Value] = dataclasses.field(default_factory=dict)
    _owners: dict[ir.Node, GraphLike] = dataclasses.field(default_factory=dict)
    _last: dict[GraphLike, ir.Node] = dataclasses.field(default_factory=dict)
    _groups: dict[ir.Node, _Group] = dataclasses.field(default_factory=dict)
    _shared: dict[tuple[GraphLike, Hashable], ir.Value] = dataclasses.field(default_factory=dict)

    def shared(
        self,
        owner: GraphLike,
        key: Hashable,
        build: Callable[[], list[ir.Node]],
        after: ir.Value,
    ) -> ir.Value:
        """The output of the last of ``build()``'s nodes, built once per ``key`` in
        ``owner``; :meth:`place` puts them, in order, right after ``after`` (a
        value they read) is made, or at the start where it is made elsewhere."""
        found = self._shared.get((owner, key))
        if found is None:
            nodes = build()
            group = _Group(nodes, after, [list(node.inputs) for node in nodes])
            for node in nodes:
                for index in range(len(node.inputs)):
                    node.replace_input_with(index, None)
                self._owners[node] = owner
                self._groups[node] = group
            found = self._shared[(owner, key)] = nodes[-1].outputs[0]
        return found

    def nodes_of(self, value: ir.Value) -> list[ir.Node]:
        """The nodes :meth:`shared` built with ``value``, the last one's output."""
        producer = value.producer()
        group = None if producer is None else self._groups.get(producer)
        return [] if group is None else list(group.nodes)

    def constant(self, owner: GraphLike, value: np.ndarray, stem: str | None = None) -> ir.Value:
        """A Constant of ``value`` for a node of ``owner``."""
        dtype = ir.DataType.from_numpy(value.dtype)
        key = ("Constant", dtype, tuple(value.shape), value.tobytes())
        found = self._values.get((owner, key))
        if found is None:
            node = constant_node(value, stem)
            found = self._values[(owner, key)] = node.outputs[0]
            self._owners[node] = owner
        return found

    def share(self, owner: GraphLike, node: ir.Node, value: np.ndarray) -> ir.Value:
        """The shared Constant of ``value`` in ``owner``: one handed out before, or
        ``node``'s output (a detached Constant of ``value``), which becomes the one."""
        output = node.outputs[0]
        dtype = output.dtype if output.dtype is not None else ir.DataType.from_numpy(value.dtype)
        key = ("Constant", dtype, tuple(value.shape), value.tobytes())
        found = self._values.setdefault((owner, key), output)
        if found is output:
            self._owners[node] = owner
        return found

    def zeros(self, owner: GraphLike, shape: Sequence[int], dtype: ir.DataType) -> ir.Value:
        """``ConstantOfShape(shape)`` of ``dtype`` zeros (one element of that shape)."""
        key = ("ConstantOfShape", dtype, tuple(shape), b"")
        found = self._values.get((owner, key))
        if found is None:
            dims = self.constant(owner, np.array(shape, np.int64))
            zero = ir.Tensor(np.zeros([1], dtype.numpy()), dtype=dtype)
            node = fresh(ir.Node("", "ConstantOfShape", [dims], [ir.AttrTensor("value", zero)]))
            found = self._values[(owner, key)] = node.outputs[0]
            found.dtype = dtype
            found.shape = ir.Shape(shape)
            self._owners[node] = owner
        return found

    def place(self, values: list[ir.Value]) -> None:
        """Put each of ``values`` that something reads, and what it reads, at the
        start of its graph (in the order they were made), if not there yet; a
        group of :meth:`shared` right after the value it reads is made."""
        needed: list[ir.Node] = []

        def need(node: ir.Node) -> None:
            if node.graph is not None or node in needed:
                return
            group = self._groups.get(node)
            members = [node] if group is None else group.attach()
            for member in members:
                for value in member.inputs:
                    producer = None if value is None else value.producer()
                    if producer in self._owners and producer not in members:
                        need(producer)  # type: ignore[arg-type]
            needed.extend(members)

        for value in values:
            node = value.producer()
            # Placed ones first: uses() copies every use, 10,000 of a shared one.
            if node is not None and node.graph is None and node in self._owners and value.uses():
                need(node)
        for node in needed:
            group = self._groups.get(node)
            if group is None:
                self._at_start(self._owners[node], [node])
                self._last[self._owners[node]] = node  # (the Constants stay first, together)
            elif node is group.nodes[0]:  # (the others go with it)
                self._place_group(self._owners[node], group)

    def _place_group(self, owner: GraphLike, group: _Group) -> None:
        made_by = group.after.producer()
        if made_by is not None and made_by.graph is graph_of(owner):
            owner.insert_after(made_by, group.nodes)
        else:  # a graph input, or a value of an enclosing graph
            self._at_start(owner, group.nodes)

    def _at_start(self, owner: GraphLike, nodes: list[ir.Node]) -> None:
        last = self._last.get(owner)
        if last is not None and last.graph is not None:  # (a function's: its own graph)
            owner.insert_after(last, nodes)
        elif len(owner) > 0:
            owner.insert_before(next(iter(owner)), nodes)
        else:
            owner.extend(nodes)
