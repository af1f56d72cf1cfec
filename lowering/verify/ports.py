"""A model's ports: its graph inputs and outputs as the comparison sees them.

:func:`model_ports` reads each as a :class:`Port` (tensor, sequence or
optional; dtype and dims; the default of an input that is also an
initializer). Two facts about the inputs decide how they are fed:
:func:`size_inputs` (ints that reach a trip count or a size stay small: a
Loop of 2**63 trips never ends) and :func:`sequence_groups` (sequences one
map ties together share a length).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx

from lowering.verify.report import CannotCompare

#: A model to compare: its path, or the model itself (run without being written).
ModelLike = str | os.PathLike | onnx.ModelProto
#: One run's inputs by name: an array, a list of arrays (a sequence) or None
#: (an absent optional); an input left out keeps its initializer's value.
Feeds = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Port:
    """A graph input or output: name, whether a sequence, element dtype, dims.

    ``optional``: of an ``optional(...)`` type (fed present or absent).
    ``default``: an input that is also an initializer holds this value
    unless fed. ``count``: an integer input whose value reaches a trip
    count, a size or a shape (Loop, Range, Tile, Reshape, ...): its values
    stay small.
    """

    name: str
    sequence: bool
    dtype: int
    dims: tuple[int | str | None, ...] | None
    optional: bool = False
    default: np.ndarray | None = dataclasses.field(default=None, compare=False)
    count: bool = False

    def kind(self) -> str:
        dtype = onnx.helper.tensor_dtype_to_string(self.dtype).split(".")[-1].lower()
        kind = f"seq(tensor({dtype}))" if self.sequence else f"tensor({dtype})"
        return f"optional({kind})" if self.optional else kind

    def declared(self) -> str:
        """In ONNX text syntax: ``float[N,3]``, ``seq(int64[?])``, ``float`` for unknown shape."""
        dtype = onnx.helper.tensor_dtype_to_string(self.dtype).split(".")[-1].lower()
        if self.dims is not None:
            dtype += "[" + ",".join("?" if d is None else str(d) for d in self.dims) + "]"
        declared = f"seq({dtype})" if self.sequence else dtype
        return f"optional({declared})" if self.optional else declared


def model_ports(model: onnx.ModelProto, which: str) -> list[Port]:
    """The graph's inputs or outputs. An input that is also an initializer is a
    port with its default (fed other values in some runs); one whose data is
    external, or not a tensor, keeps its default."""
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    counts = size_inputs(model) if which == "input" else set()
    ports = []
    for info in getattr(graph, which):
        port = _port(info)
        if which == "input":
            port = dataclasses.replace(port, count=port.name in counts)
        if which == "input" and info.name in initializers:
            initializer = initializers[info.name]
            if initializer.data_location == onnx.TensorProto.EXTERNAL or port.sequence:
                continue
            try:
                default = onnx.numpy_helper.to_array(initializer)
            except Exception:  # noqa: BLE001, S112 -- a dtype numpy cannot hold: its default holds
                continue
            port = dataclasses.replace(port, dims=tuple(default.shape), default=default)
        ports.append(port)
    return ports


def fed_as_b_declares(a: list[Port], b: list[Port]) -> tuple[list[Port], dict[str, int]]:
    """A's input ports with the static dims B's declare where A's are open, and the
    symbols of A's that this binds (``x: float[T,4]`` in A, ``float[5,4]`` in B:
    T = 5 in every input of A's that names it).

    A lowering with fixed input shapes (``--input-shape``) declares them on its
    inputs: B refuses any other size, so the runs feed only those. A dim that
    both declare static and differently is left: :func:`input_difference` says so.
    """
    declared = {port.name: port.dims for port in b}
    bound: dict[str, int] = {}
    for port in a:
        other = declared.get(port.name)
        if port.dims is None or other is None or len(other) != len(port.dims):
            continue
        for mine, theirs in zip(port.dims, other, strict=True):
            if isinstance(mine, str) and isinstance(theirs, int):
                bound.setdefault(mine, theirs)
    narrowed = []
    for port in a:
        dims = _narrowed(port.dims, declared.get(port.name), bound)
        narrowed.append(port if dims == port.dims else dataclasses.replace(port, dims=dims))
    return narrowed, bound


Dims = tuple[int | str | None, ...] | None


def _narrowed(dims: Dims, other: Dims, bound: dict[str, int]) -> Dims:
    """A's ``dims`` with the bound symbols' sizes, and B's static dims where A's are open."""
    if dims is None:
        if other is not None and all(isinstance(d, int) for d in other):
            return other
        return dims
    dims = tuple(bound.get(d, d) if isinstance(d, str) else d for d in dims)
    if other is None or len(other) != len(dims):
        return dims
    return tuple(
        theirs if mine is None and isinstance(theirs, int) else mine
        for mine, theirs in zip(dims, other, strict=True)
    )


def input_difference(a: list[Port], b: list[Port]) -> str | None:
    """Why B cannot take A's inputs, if it cannot: different names, kinds, or a
    rank or static dim each declares otherwise."""
    names_a, names_b = [p.name for p in a], [p.name for p in b]
    if sorted(names_a) != sorted(names_b):
        return f"the models take different inputs: {_names_only_in_one(names_a, names_b)}"
    ports_b = {p.name: p for p in b}
    for port in a:
        difference = _port_difference(port, ports_b[port.name])
        if difference is not None:
            return difference
    return None


def _names_only_in_one(names_a: list[str], names_b: list[str]) -> str:
    only_a = [n for n in names_a if n not in names_b]
    only_b = [n for n in names_b if n not in names_a]
    return "; ".join(
        f"{', '.join(map(repr, names))} only in {which}"
        for names, which in ((only_a, "A"), (only_b, "B"))
        if names
    )


def _port_difference(port: Port, other: Port) -> str | None:
    """Why B's ``other`` cannot take what A's ``port`` is fed: its kind, or a rank or
    static dim (not of an input with a default, which may be fed another shape)."""
    if other.kind() != port.kind():
        return f"input {port.name!r} is {port.kind()} in A but {other.kind()} in B"
    if port.dims is None or other.dims is None or port.default is not None:
        return None
    if len(port.dims) != len(other.dims) or any(
        isinstance(x, int) and isinstance(y, int) and x != y
        for x, y in zip(port.dims, other.dims, strict=True)
    ):
        return f"input {port.name!r} is {port.declared()} in A but {other.declared()} in B"
    return None


def _port(info: onnx.ValueInfoProto) -> Port:
    type_proto = info.type
    optional = type_proto.WhichOneof("value") == "optional_type"
    if optional:
        type_proto = type_proto.optional_type.elem_type
    sequence = type_proto.WhichOneof("value") == "sequence_type"
    if sequence:
        type_proto = type_proto.sequence_type.elem_type
    if type_proto.WhichOneof("value") != "tensor_type":
        raise CannotCompare(
            f"{info.name!r} is not a tensor, a sequence of tensors or an optional one"
        )
    tensor = type_proto.tensor_type
    dims = None
    if tensor.HasField("shape"):
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        )
    return Port(info.name, sequence, tensor.elem_type, dims, optional)


# The inputs of these ops (by position) are trip counts, sizes, shapes, axes
# or indices: an input whose value reaches one is fed small values, which
# every op takes; one that reaches none is data, fed values near its type's
# limits too.
SIZE_POSITIONS: dict[str, tuple[int, ...]] = {
    "Loop": (0,),
    "Range": (0, 1, 2),
    "Tile": (1,),
    "Reshape": (1,),
    "ConstantOfShape": (0,),
    "Expand": (1,),
    "Resize": (1, 2, 3),
    "Upsample": (1,),
    "OneHot": (1,),
    "TopK": (1,),
    "Pad": (1, 3),
    "Slice": (3,),
    "Split": (1,),
    "SplitToSequence": (1,),
    "SequenceAt": (1,),
    "SequenceInsert": (2,),
    "SequenceErase": (1,),
    "Gather": (1,),
    "GatherElements": (1,),
    "GatherND": (1,),
    "ScatterElements": (1,),
    "ScatterND": (1,),
    "Scatter": (1,),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "CumSum": (1,),
    "CenterCropPad": (1, 2),
    "Col2Im": (1, 2),
    "MaxUnpool": (1, 2),
    "NonMaxSuppression": (2,),
    "RoiAlign": (2,),
    "DFT": (1, 2),
    "STFT": (1, 2, 3),
    "ReverseSequence": (1,),
    **{op: (1,) for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                           "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                           "ReduceSumSquare")},
}  # fmt: skip


# The outputs of these ops do not depend on their inputs' values (a shape, a
# count, whether an optional is present, noise of a shape): a value reaches no
# size through them. Reshape(x, Shape(x)) leaves x data.
VALUE_BLIND = frozenset(
    {"Shape", "Size", "SequenceLength", "OptionalHasElement", "EyeLike", "RandomNormalLike",
     "RandomUniformLike"}
)  # fmt: skip


def size_inputs(model: onnx.ModelProto) -> set[str]:
    """The graph inputs whose values reach a :data:`SIZE_POSITIONS` input of
    some node, through any ops (but :data:`VALUE_BLIND` ones), subgraphs and
    model-local functions.

    Names are followed as written, ignoring shadowing: a name that might
    reach one counts, which only keeps more values small.
    """
    readers = _readers(model)
    formals: dict[tuple[str, str], onnx.FunctionProto] = {
        (f.domain, f.name): f for f in model.functions
    }
    return {info.name for info in model.graph.input if _reaches_size(info.name, readers, formals)}


def _readers(model: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    """The nodes that read each name, in every graph and function; a subgraph's
    inputs count as read by a stand-in from each of its node's inputs."""
    readers: dict[str, list[onnx.NodeProto]] = {}

    def index(nodes) -> None:
        for node in nodes:
            for name in node.input:
                readers.setdefault(name, []).append(node)
            for attr in node.attribute:
                for graph in [attr.g] if attr.HasField("g") else list(attr.graphs):
                    index(graph.node)
                    # a subgraph's inputs are fed from its node's inputs
                    for formal in graph.input:
                        for name in node.input:
                            readers.setdefault(name, []).append(_pass_on(formal.name))

    index(model.graph.node)
    for function in model.functions:
        index(function.node)
    return readers


def _reaches_size(
    start: str,
    readers: dict[str, list[onnx.NodeProto]],
    formals: dict[tuple[str, str], onnx.FunctionProto],
) -> bool:
    """Whether ``start``'s value reaches a size position, through any reader."""
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen or not name:
            continue
        seen.add(name)
        for node in readers.get(name, []):
            if node.op_type in VALUE_BLIND and node.domain in ("", "ai.onnx"):
                continue
            if _read_as_size(node, name):
                return True
            todo += node.output
            callee = formals.get((node.domain, node.op_type))
            if callee is not None:
                todo += [f for f, actual in zip(callee.input, node.input) if actual == name]
    return False


def _read_as_size(node: onnx.NodeProto, name: str) -> bool:
    positions = SIZE_POSITIONS.get(node.op_type, ())
    return any(node.input[i] == name for i in positions if i < len(node.input))


def _pass_on(name: str) -> onnx.NodeProto:
    """A stand-in reader that hands a value on to ``name`` (a subgraph input)."""
    return onnx.NodeProto(op_type="", output=[name])


def sequence_groups(model: onnx.ModelProto) -> dict[str, int]:
    """The sequence inputs, numbered by group: sequences read by one map, at any
    depth (or derived from such), share a group and must have lengths that fit
    together (:func:`sequence_offsets`); the others may differ."""
    return _ties(model)[0]


def sequence_offsets(model: onnx.ModelProto) -> dict[str, int]:
    """How much longer than its group's shortest each sequence input must be: 0,
    but 1 for a z whose SequenceInsert(z, t) one map reads beside an x."""
    return _ties(model)[1]


def _ties(model: onnx.ModelProto) -> tuple[dict[str, int], dict[str, int]]:
    """Which sequence inputs one map ties, and their lengths' offsets (:class:`_Ties`)."""
    inputs = [
        info.name
        for info in model.graph.input
        if info.type.WhichOneof("value") in ("sequence_type", "optional_type")
    ]
    ties = _Ties(inputs)
    ties.visit(model.graph.node)
    for function in model.functions:
        ties.visit(function.node)
    numbers: dict[str, int] = {}
    groups = {name: numbers.setdefault(ties.find(name)[0], len(numbers)) for name in inputs}
    offsets = {name: ties.find(name)[1] for name in inputs}
    lowest: dict[int, int] = {}
    for name in inputs:
        lowest[groups[name]] = min(lowest.get(groups[name], 0), offsets[name])
    return groups, {name: offsets[name] - lowest[groups[name]] for name in inputs}


class _Ties:
    """Groups of sequence inputs whose lengths one map ties, with their offsets.

    A value follows an input (with a length offset) through Identity, Optional
    and OptionalGetElement, SequenceInsert (+1) and SequenceErase (-1), a map's
    outputs (its first input's length), an If whose branches agree, and a
    Loop's carried value that its body hands on as it is (:data:`_FOLLOW`).
    """

    def __init__(self, inputs: list[str]) -> None:
        # len(name) = len(parent) + delta
        self.parent: dict[str, tuple[str, int]] = {name: (name, 0) for name in inputs}
        # value -> (the input it follows, len(value) - len(input))
        self.source: dict[str, tuple[str, int]] = {name: (name, 0) for name in inputs}

    def find(self, name: str) -> tuple[str, int]:
        """The root of ``name``'s group, and len(name) - len(root)."""
        total = 0
        while self.parent[name][0] != name:
            up, delta = self.parent[name]
            total += delta
            name = up
        return name, total

    def tie(self, first: tuple[str, int], other: tuple[str, int]) -> None:
        (root_a, to_a), (root_b, to_b) = self.find(first[0]), self.find(other[0])
        if root_a != root_b:  # len(a) + first[1] == len(b) + other[1]
            self.parent[root_b] = (root_a, to_a + first[1] - to_b - other[1])

    def follow(self, value: str, new: str, delta: int = 0) -> None:
        if value in self.source and new:
            origin, offset = self.source[value]
            self.source[new] = (origin, offset + delta)

    def visit(self, nodes) -> None:
        for node in nodes:
            graphs = {a.name: a.g for a in node.attribute if a.HasField("g")}
            if node.op_type == "Loop" and "body" in graphs:
                body = graphs["body"]
                for outer, inner in zip(node.input[2:], body.input[2:], strict=False):
                    self.follow(outer, inner.name)
            for attr in node.attribute:
                for graph in [attr.g] if attr.HasField("g") else list(attr.graphs):
                    self.visit(graph.node)
            rule = _FOLLOW.get(node.op_type)
            if rule is not None:
                rule(self, node, graphs)

    def map(self, node: onnx.NodeProto, graphs: dict) -> None:
        """A map ties its sequences; its outputs have its first input's length."""
        tied = [self.source[n] for n in node.input if n in self.source]
        for other in tied[1:]:
            self.tie(tied[0], other)
        for output in node.output:
            self.follow(_first(node), output)

    def same(self, node: onnx.NodeProto, graphs: dict) -> None:
        self.follow(_first(node), node.output[0])

    def insert(self, node: onnx.NodeProto, graphs: dict) -> None:
        self.follow(_first(node), node.output[0], 1)

    def erase(self, node: onnx.NodeProto, graphs: dict) -> None:
        self.follow(_first(node), node.output[0], -1)

    def branches(self, node: onnx.NodeProto, graphs: dict) -> None:
        """An If's output follows where both branches' outputs follow one value."""
        if not {"then_branch", "else_branch"} <= set(graphs):
            return
        then, other = graphs["then_branch"], graphs["else_branch"]
        for output, a, b in zip(node.output, then.output, other.output, strict=False):
            followed = self.source.get(a.name)
            if followed is not None and self.source.get(b.name, followed) == followed:
                self.follow(a.name, output)

    def carried(self, node: onnx.NodeProto, graphs: dict) -> None:
        """A Loop's output follows its initial value where the body hands it on as it is."""
        if "body" not in graphs:
            return
        body = graphs["body"]
        carried = zip(node.output, node.input[2:], body.output[1:], strict=False)
        for output, initial, handed in carried:
            if initial in self.source and self.source.get(handed.name) == self.source[initial]:
                self.follow(initial, output)


def _first(node: onnx.NodeProto) -> str:
    return node.input[0] if node.input else ""


# How each op's outputs follow its inputs' lengths.
_FOLLOW: dict[str, Callable[[_Ties, onnx.NodeProto, dict], None]] = {
    "SequenceMap": _Ties.map,
    "Identity": _Ties.same,
    "Optional": _Ties.same,
    "OptionalGetElement": _Ties.same,
    "SequenceInsert": _Ties.insert,
    "SequenceErase": _Ties.erase,
    "If": _Ties.branches,
    "Loop": _Ties.carried,
}
