"""One constant evaluator, one rule per op, whoever asks (issue 23, item 3).

Positions and trip counts (``static_array``), an adapter's axes and shapes
(``evaluate(.., shapes=True)``) and the fold of unrolled copies
(``static_fold.fold_node``) read constants through one module, every one
through every rule. For every op they agree; and what any of them folds is what onnxruntime computes. The
Cast rule: a cast is folded only where it is exact and does not wrap.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx_ir as ir
import pytest

from lowering.irutils import static_values
from lowering.irutils.op_facts import SHAPE_READING_OPS
from lowering.irutils.static_fold import ELEMENT_TESTS, fold_node
from lowering.runtimes.sessions import open_session

DTYPES = {
    "int8": ir.DataType.INT8,
    "uint8": ir.DataType.UINT8,
    "int32": ir.DataType.INT32,
    "int64": ir.DataType.INT64,
    "uint64": ir.DataType.UINT64,
    "bool": ir.DataType.BOOL,
    "float16": ir.DataType.FLOAT16,
    "float": ir.DataType.FLOAT,
    "double": ir.DataType.DOUBLE,
}
VALUES = {
    "int8": [-128, -1, 0, 127],
    "uint8": [0, 200, 255],
    "int32": [-(2**31), -300, -1, 0, 255, 300, 2**31 - 1],
    "int64": [-(2**40), -1, 0, 200, 300, 2**40],
    "uint64": [0, 255, 2**63],
    "bool": [False, True],
    "float16": [-2.5, 0.0, 1.5],
    "float": [-2.5, 0.0, 1.5, 1e30],
    "double": [-2.5, 0.0, 1.5, 1e300],
}


def _cast_of(source: str, value, target: str) -> tuple[ir.Node, ir.Value]:
    array = np.array(value, dtype=DTYPES[source].numpy())
    constant = ir.Value(name="c", const_value=ir.tensor(array, name="c"))
    graph = ir.Graph([], [], nodes=[], name="g", opset_imports={"": 19})
    graph.register_initializer(constant)
    node = ir.node("Cast", [constant], {"to": DTYPES[target]})
    graph.append(node)
    graph.outputs.append(node.outputs[0])
    return node, node.outputs[0]


def _in_onnxruntime(source: str, value, target: str) -> np.ndarray:
    node, output = _cast_of(source, value, target)
    output.dtype = DTYPES[target]
    output.shape = ir.Shape([])
    graph = node.graph
    assert graph is not None
    model = ir.Model(graph, ir_version=9)
    proto = ir.serde.serialize_model(model)
    return open_session(proto.SerializeToString()).run(None, {})[0]


def _wraps(source: str, value, target: str) -> bool:
    t = DTYPES[target]
    if t not in static_values.INTEGER_TYPES or DTYPES[source] not in static_values.INTEGER_TYPES:
        return False
    info = np.iinfo(t.numpy())
    return not info.min <= int(value) <= info.max


CASTS = [
    (source, value, target)
    for source, target in itertools.product(DTYPES, DTYPES)
    for value in VALUES[source]
]


@pytest.mark.parametrize(("source", "value", "target"), CASTS)
@pytest.mark.sweep
def test_one_cast_rule_for_every_caller(source, value, target):
    """The three readers agree; a folded cast is onnxruntime's; none wraps or
    folds a float to an integer."""
    results = []
    node, output = _cast_of(source, value, target)
    results.append(static_values.static_array(output))
    node, output = _cast_of(source, value, target)
    results.append(fold(output))
    node, output = _cast_of(source, value, target)
    results.append(node.attributes["value"].as_tensor().numpy() if fold_node(node) else None)
    exact = DTYPES[source] in static_values.INTEGER_TYPES | {ir.DataType.BOOL} or (
        DTYPES[target] in static_values.FLOAT_TYPES
    )
    folds = exact and not _wraps(source, value, target)
    # static_array reads positions: integer to integer only matters there, but
    # the rule is the same one: it folds exactly where the others do.
    for result in results:
        assert (result is not None) == folds, (results, folds)
    if folds:
        expected = _in_onnxruntime(source, value, target)
        for result in results:
            assert result.dtype == expected.dtype
            np.testing.assert_array_equal(result, expected)


def _op(op_type: str, inputs: list[np.ndarray], **attributes) -> ir.Value:
    graph = ir.Graph([], [], nodes=[], name="g", opset_imports={"": 19})
    values = []
    for i, array in enumerate(inputs):
        value = ir.Value(name=f"c{i}", const_value=ir.tensor(array, name=f"c{i}"))
        value.dtype = value.const_value.dtype  # (CastLike reads its target's type)
        graph.register_initializer(value)
        values.append(value)
    node = ir.node(op_type, values, attributes)
    graph.append(node)
    return node.outputs[0]


def fold(value: ir.Value) -> np.ndarray | None:
    """How an adapter reads an axes or shape input (declared shapes included)."""
    return static_values.evaluate(value, shapes=True)


_I = np.array([1, 2], np.int64)
_B = np.array([True, False])
OPERANDS = {
    "Identity": ([_I], {}),
    "Cast": ([_I], {"to": ir.DataType.INT32}),
    "CastLike": ([_I, np.array([0.5], np.float32)], {}),
    "Squeeze": ([np.array([[3]], np.int64), np.array([0], np.int64)], {}),
    "Unsqueeze": ([_I, np.array([0], np.int64)], {}),
    "Reshape": ([np.array([[1, 2], [3, 4]], np.int64), np.array([-1], np.int64)], {}),
    "Concat": ([_I, np.array([3], np.int64)], {"axis": 0}),
    "Gather": ([np.array([5, 6, 7], np.int64), np.array([2, 0], np.int64)], {}),
    "Add": ([_I, np.array([3, 4], np.int64)], {}),
    "Sub": ([_I, np.array([3, 4], np.int64)], {}),
    "Mul": ([np.array([2**62], np.int64), np.array([4], np.int64)], {}),  # wraps, as runtimes
    "Div": ([np.array([1.0, -3.0], np.float32), np.array([4.0, 2.0], np.float32)], {}),
    "Sqrt": ([np.array([4.0, 2.0], np.float32)], {}),
    "Neg": ([np.array([3, -4], np.int64)], {}),
    "Min": ([_I, np.array([3, 0], np.int64)], {}),
    "Max": ([_I, np.array([3, 0], np.int64)], {}),
    "Range": ([np.array(1, np.int64), np.array(7, np.int64), np.array(2, np.int64)], {}),
    "Equal": ([_I, np.array([1, 3], np.int64)], {}),
    "Less": ([_I, np.array([1, 3], np.int64)], {}),
    "LessOrEqual": ([_I, np.array([1, 3], np.int64)], {}),
    "Greater": ([_I, np.array([1, 3], np.int64)], {}),
    "GreaterOrEqual": ([_I, np.array([1, 3], np.int64)], {}),
    "Not": ([_B], {}),
    "And": ([_B, np.array([True, True])], {}),
    "Or": ([_B, np.array([False, False])], {}),
    "Xor": ([_B, np.array([True, True])], {}),
}
SHARED = sorted(OPERANDS)


@pytest.mark.parametrize("op", SHARED)
def test_callers_agree_on_every_op_they_share(op):
    arrays, attributes = OPERANDS[op]
    by_fold = fold(_op(op, arrays, **attributes))
    by_position = static_values.static_array(_op(op, arrays, **attributes))
    value = _op(op, arrays, **attributes)
    node = value.producer()
    assert node is not None and fold_node(node)
    np.testing.assert_array_equal(by_fold, node.attributes["value"].as_tensor().numpy())
    np.testing.assert_array_equal(by_position, by_fold)


def test_every_callers_ops_have_a_rule():
    """Every rule but those that read shapes is checked above, for every caller;
    the copies fold some of them only."""
    assert set(OPERANDS) == set(static_values.RULES) - SHAPE_READING_OPS
    assert ELEMENT_TESTS <= set(static_values.RULES), ELEMENT_TESTS - set(static_values.RULES)


def test_weights_are_never_read():
    """A constant of more than MAX_ELEMENTS elements is not read by the folds."""
    big = np.zeros(static_values.MAX_ELEMENTS + 1, np.int64)
    assert fold(_op("Identity", [big])) is None
    value = _op("Identity", [big])
    assert static_values.evaluate(value) is None
    # Positions and split sizes are read whole (a split of 10,000 lengths).
    assert static_values.static_array(_op("Identity", [big])) is not None


# Float arithmetic: the five operations IEEE 754 rounds correctly, on edge values.
_FLOAT_EDGES = [0.0, -0.0, 1.0, -2.5, 3.0, 1e-3, 7.0e-39, 65504.0, 1e30, np.inf, -np.inf, np.nan]
FLOAT_RULES = [
    (op, dtype)
    for op in ("Add", "Sub", "Mul", "Div", "Sqrt")
    for dtype in ("float16", "float", "double")
]


@pytest.mark.parametrize(("op", "dtype"), FLOAT_RULES)
def test_a_folded_float_operation_is_onnxruntime_s_bit_for_bit(op, dtype):
    numpy_type = DTYPES[dtype].numpy()
    with np.errstate(over="ignore"):
        left = np.array(_FLOAT_EDGES, numpy_type)
    pairs = [left] if op == "Sqrt" else [np.repeat(left, left.size), np.tile(left, left.size)]
    value = _op(op, pairs)
    node = value.producer()
    assert node is not None
    folded = static_values.evaluate_node(node, pairs, limit=None)
    assert folded is not None and folded.dtype == numpy_type
    value.dtype = DTYPES[dtype]
    value.shape = ir.Shape(list(folded.shape))
    graph = node.graph
    assert graph is not None
    graph.outputs.append(value)
    proto = ir.serde.serialize_model(ir.Model(graph, ir_version=9))
    expected = open_session(proto.SerializeToString(), optimize=False).run(None, {})[0]
    same = (folded == expected) | (np.isnan(folded) & np.isnan(expected))
    assert same.all(), (pairs, folded[~same], expected[~same])
    np.testing.assert_array_equal(
        np.signbit(folded[~np.isnan(folded)]), np.signbit(expected[~np.isnan(expected)])
    )


def test_other_float_functions_are_not_folded():
    """Exp, Pow, Erf are the library's; Min and Max of floats differ on NaN."""
    assert "Exp" not in static_values.RULES
    floats = [np.array([np.nan], np.float32), np.array([1.0], np.float32)]
    for op in ("Min", "Max"):
        value = _op(op, floats)
        node = value.producer()
        assert node is not None and static_values.evaluate_node(node, floats) is None


# Integer arithmetic (issue 34, item 3): paddle2onnx's positions are
# Cast(Add(Mul(Cast(0), 1), k)); each rule is onnxruntime's on edge values,
# and what would trap in C++ (a division by 0, the minimum by -1, its
# negation) is left to the runtime.
_INT_TYPES = ("int8", "uint8", "int32", "int64", "uint64")
INTEGER_RULES = [
    (op, dtype)
    for op in ("Add", "Sub", "Mul", "Div", "Neg", "Min", "Max")
    for dtype in _INT_TYPES
    if not (op == "Neg" and dtype.startswith("u"))
]


def _traps(op: str, a: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Where C++ (so onnxruntime) traps or overflows undefined: never folded."""
    low = np.iinfo(a.dtype).min
    if op == "Div":
        assert b is not None
        return (b == 0) | ((a == low) & (b == -1) & (low < 0))
    if op == "Neg":
        return a == low
    return np.zeros(a.shape, bool)


@pytest.mark.parametrize(("op", "dtype"), INTEGER_RULES)
def test_a_folded_integer_operation_is_onnxruntime_s(op, dtype):
    numpy_type = DTYPES[dtype].numpy()
    info = np.iinfo(numpy_type)
    edges = sorted({int(info.min), int(info.min) + 1, -7, -2, -1, 0, 1, 2, 3, 7, int(info.max)})
    left = np.array([e for e in edges if info.min <= e <= info.max], numpy_type)
    pairs = [left] if op == "Neg" else [np.repeat(left, left.size), np.tile(left, left.size)]
    traps = _traps(op, pairs[0], pairs[1] if len(pairs) > 1 else None)
    for index in range(pairs[0].size):  # one element at a time: a trap declines the whole fold
        operands = [p[index : index + 1] for p in pairs]
        value = _op(op, operands)
        node = value.producer()
        assert node is not None
        folded = static_values.evaluate_node(node, operands)
        if traps[index]:
            assert folded is None, (operands, folded)
            continue
        assert folded is not None and folded.dtype == numpy_type, operands
        value.dtype = DTYPES[dtype]
        value.shape = ir.Shape([1])
        graph = node.graph
        assert graph is not None
        graph.outputs.append(value)
        proto = ir.serde.serialize_model(ir.Model(graph, ir_version=9))
        expected = open_session(proto.SerializeToString(), optimize=False).run(None, {})[0]
        np.testing.assert_array_equal(folded, expected, err_msg=str(operands))


def test_paddle_positions_are_static():
    """Cast(Add(Mul(Cast(0), 1), k)) is k; an initializer that is a graph input is not."""
    zero = ir.Value(name="zero", const_value=ir.tensor(np.array(0, np.int64), name="zero"))
    one = ir.Value(name="one", const_value=ir.tensor(np.array(1, np.int64), name="one"))
    k = ir.Value(name="k", const_value=ir.tensor(np.array(2, np.int64), name="k"))
    graph = ir.Graph([], [], nodes=[], name="g", opset_imports={"": 19})
    for value in (zero, one, k):
        graph.register_initializer(value)
    cast = ir.node("Cast", [zero], {"to": ir.DataType.INT64})
    mul = ir.node("Mul", [cast.outputs[0], one])
    add = ir.node("Add", [mul.outputs[0], k])
    position = ir.node("Cast", [add.outputs[0]], {"to": ir.DataType.INT64})
    graph.extend([cast, mul, add, position])
    assert static_values.static_array(position.outputs[0]) == 2
    graph.inputs.append(k)  # fed by the caller: no longer static
    assert static_values.static_array(position.outputs[0]) is None


@pytest.mark.parametrize(
    ("start", "limit", "delta"),
    [(0, 5, 0), (0, 2**40, 1), (2**40, 0, -1)],
)
def test_a_range_of_no_step_or_too_many_elements_is_left_to_the_runtime(start, limit, delta):
    """A delta of 0 (onnxruntime refuses it) or a range too long to make is not static,
    for every caller: counted before it is made, never raised out of the evaluator."""
    arrays = [np.array(v, np.int64) for v in (start, limit, delta)]
    assert static_values.static_array(_op("Range", arrays)) is None
    assert fold(_op("Range", arrays)) is None
    node = _op("Range", arrays).producer()
    assert node is not None and not fold_node(node)


# Shape ops on the edges of their inputs: negative axes and indices, allowzero,
# malformed uses. What is folded is onnxruntime's value; where onnxruntime
# fails, nothing is folded (the runtime's error stays in place).
_ROW = np.array([[3, 4]], np.int64)
EDGES = {
    "unsqueeze-negative-axis": ("Unsqueeze", [_I, np.array([-1], np.int64)], {}),
    "unsqueeze-axis-out-of-range": ("Unsqueeze", [_I, np.array([-3], np.int64)], {}),
    "squeeze-negative-axis": ("Squeeze", [_ROW, np.array([-2], np.int64)], {}),
    "squeeze-axis-not-of-size-1": ("Squeeze", [_ROW, np.array([-1], np.int64)], {}),
    "reshape-copies-a-0": ("Reshape", [_ROW, np.array([0, 2], np.int64)], {}),
    "reshape-allowzero-of-nothing": (
        "Reshape",
        [np.zeros((3, 0), np.int64), np.array([0, 4], np.int64)],
        {"allowzero": 1},
    ),
    "reshape-allowzero-0-of-something": (
        "Reshape",
        [_ROW, np.array([0, 2], np.int64)],
        {"allowzero": 1},
    ),
    "gather-negative-index": ("Gather", [np.array([5, 6, 7], np.int64), np.array([-1, 0])], {}),
    "gather-index-out-of-range": ("Gather", [np.array([5, 6, 7], np.int64), np.array([3])], {}),
    "concat-negative-axis": ("Concat", [_ROW, np.array([[5]], np.int64)], {"axis": -1}),
}


def _onnxruntime_s(value: ir.Value) -> np.ndarray | None:
    """What onnxruntime computes for ``value`` (a node's output), None where it fails."""
    value.dtype = ir.DataType.INT64
    node = value.producer()
    assert node is not None and node.graph is not None
    node.graph.outputs.append(value)
    proto = ir.serde.serialize_model(ir.Model(node.graph, ir_version=9))
    try:
        return open_session(proto.SerializeToString(), optimize=False).run(None, {})[0]
    except Exception:  # noqa: BLE001 -- its refusal is the answer
        return None


@pytest.mark.parametrize("name", list(EDGES))
def test_shape_ops_on_their_edges_fold_to_onnxruntime_s_value_or_not_at_all(name):
    op, arrays, attributes = EDGES[name]
    expected = _onnxruntime_s(_op(op, arrays, **attributes))
    for read in (static_values.static_array, fold):
        folded = read(_op(op, arrays, **attributes))
        if expected is None:
            assert folded is None, folded
        else:
            assert folded is not None and folded.dtype == expected.dtype
            assert folded.shape == expected.shape
            np.testing.assert_array_equal(folded, expected)


def test_a_declared_shape_is_read_only_where_the_caller_takes_it_as_a_fact():
    """Shape and Size read declared dims for the adapters (``shapes=True``), never for
    positions and trip counts: a declaration may be inference's, and wrong. Here
    ONNX infers Resize's [1, 6] where onnxruntime computes [1, 7]; a position
    read through it is left to the run."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1, 5]))
    scales = ir.Value(
        name="scales", const_value=ir.tensor(np.array([1.0, 1.4], np.float32), name="scales")
    )
    graph = ir.Graph([x], [], nodes=[], name="g", opset_imports={"": 19})
    graph.register_initializer(scales)
    resize = ir.node("Resize", [x, None, scales])
    resized = resize.outputs[0]
    resized.dtype, resized.shape = ir.DataType.FLOAT, ir.Shape([1, 6])  # as infer_shapes writes
    shape = ir.node("Shape", [resized])
    size = ir.node("Size", [resized])
    graph.extend([resize, shape, size])
    for node in (shape, size):
        assert static_values.static_array(node.outputs[0]) is None
        assert static_values.evaluate(node.outputs[0]) is None
    assert fold(shape.outputs[0]).tolist() == [1, 6]  # the declaration, taken at its word
    graph.outputs.append(shape.outputs[0])
    shape.outputs[0].dtype = ir.DataType.INT64
    proto = ir.serde.serialize_model(ir.Model(graph, ir_version=9))
    feeds = {"x": np.zeros((1, 5), np.float32)}
    (computed,) = open_session(proto.SerializeToString(), optimize=False).run(None, feeds)
    assert computed.tolist() == [1, 7]
