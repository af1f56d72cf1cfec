"""Random models: which ops draw random values, which outputs they reach, and
whether two runs of A agree.

An output that differs between two runs of A on the same inputs cannot be
compared by value: it is held to its dtype, shape and sequence length only,
and the verdict is "could not compare" (exit 3) naming the random ops that
reach it, unless something structural differs. The random ops are found at
any depth: in If, Loop, Scan and SequenceMap bodies and in model-local
functions (a Dropout given a training_mode counts).
"""

from __future__ import annotations

import numpy as np
import onnx

#: The ONNX ops whose results are random (op_facts.RANDOM_OPS, spelled again:
#: onnx-verify loads no lowering module outside verify/ and runtimes/).
RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
     "Bernoulli"}
)  # fmt: skip


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    return [g for a in node.attribute for g in ([a.g] if a.HasField("g") else list(a.graphs))]


def _is_random(node: onnx.NodeProto) -> bool:
    """A random op, or a Dropout given a training_mode (random where it is true)."""
    if node.domain not in ("", "ai.onnx"):
        return False
    dropout = node.op_type == "Dropout" and len(node.input) > 2 and node.input[2] != ""
    return node.op_type in RANDOM_OPS or dropout


def _random_inside(
    nodes, functions: dict[tuple[str, str], onnx.FunctionProto], seen: tuple = ()
) -> set[str]:
    """The random ops among ``nodes``, in their subgraphs and in the model-local
    functions they call, at any depth."""
    found: set[str] = set()
    for node in nodes:
        if _is_random(node):
            found.add(node.op_type)
        for graph in _subgraphs(node):
            found |= _random_inside(graph.node, functions, seen)
        key = (node.domain, node.op_type)
        if key in functions and key not in seen:
            found |= _random_inside(functions[key].node, functions, (*seen, key))
    return found


def has_random_ops(model: onnx.ModelProto) -> bool:
    """Whether any node, at any depth or in a model-local function, draws random values."""
    functions = {(f.domain, f.name): f for f in model.functions}
    return bool(_random_inside(model.graph.node, functions))


def random_sources(model: onnx.ModelProto, output: int) -> list[str]:
    """The random nodes of the main graph that reach graph output ``output``, as
    "OpType 'name'"; a node with random ops in its subgraphs or its function as
    "RandomNormalLike in Loop 'name'"."""
    functions = {(f.domain, f.name): f for f in model.functions}
    producers = {name: node for node in model.graph.node for name in node.output}
    found: list[str] = []
    todo, seen = [model.graph.output[output].name], set()
    while todo:
        name = todo.pop()
        node = producers.get(name)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        label = f"{node.op_type} {node.name or node.output[0]!r}"
        if _is_random(node):
            found.append(label)
        elif inside := _random_inside([node], functions):
            found.append(f"{', '.join(sorted(inside))} in {label}")
        todo += list(node.input)
        for graph in _subgraphs(node):  # outer names a body reads
            todo += [n for inner in graph.node for n in inner.input]
    return sorted(set(found))


def same(first, second) -> bool:
    """Whether two runs' values of one output are identical (NaN equal to NaN)."""
    if first is None or second is None:
        return first is None and second is None
    if isinstance(first, list) or isinstance(second, list):
        return (
            isinstance(first, list)
            and isinstance(second, list)
            and len(first) == len(second)
            and all(same(x, y) for x, y in zip(first, second, strict=True))
        )
    first, second = np.asarray(first), np.asarray(second)
    if first.dtype != second.dtype or first.shape != second.shape:
        return False
    if first.dtype.kind in "fc":
        return bool(np.array_equal(first, second, equal_nan=True))
    try:
        return bool(
            np.array_equal(first.astype(np.float64), second.astype(np.float64), equal_nan=True)
        )
    except (TypeError, ValueError):
        return bool(np.array_equal(first, second))
