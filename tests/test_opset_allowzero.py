"""Reshape-14 ``allowzero=1`` below opset 14, on every kind of target and data.

The adapter (:func:`lowering.opset.adapters.shape.no_allowzero`) writes, for
a target that may hold a 0, a form without Reshape-13 in the empty case
(onnxruntime type-checks every If branch at load, run or not: a constant
target with a 0 past the data's rank is invalid to Reshape-13). Each model
here declares its data with symbolic dims, so that the adapter cannot drop
allowzero from static dims, and is converted with the target a constant
and a graph input, at 11 and 13; the converted model must load in
onnxruntime (with and without its optimizer, which folds constants) and, on
data of every shape of its rank (empty, with elements), do what the
original does: the same outputs, or fail where it fails. The table holds
targets with a 0 before, at and past the data's rank, beside a -1, without
a 0, empty, and several 0s; the dtypes Reshape takes (strings and bool too).
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnx.helper
import onnx.shape_inference
import pytest

import lowering
from lowering.runtimes.sessions import open_session
from tests.cases.fuzz_regressions import FUZZ, fuzz_feeds
from tests.helpers import assert_same

TARGETS = [
    [0],
    [0, 0],
    [0, 1, 0],  # the fuzz family: a 0 past a rank-2 input's rank
    [1, 0, 1, 0],
    [3, 0],
    [0, 3],
    [-1, 0],  # invalid in Reshape-14: a 0 beside a -1
    [0, -1],
    [-1, 5],
    [-1],
    [2, 3],
    [6],
    [2, 5],
    [-1, -1],
    [0, -2],
    [],
]

# Data shapes by rank: empty ones and ones with elements.
SHAPES = {
    0: [()],
    1: [(0,), (6,), (10,)],
    2: [(0, 0), (0, 3), (2, 0), (2, 3), (5, 2)],
    3: [(0, 1, 0), (2, 0, 5), (1, 2, 3), (1, 6, 1)],
}

DTYPES = {
    "float": np.float32,
    "int64": np.int64,
    "bool": np.bool_,
    "float16": np.float16,
    "uint8": np.uint8,
    "string": np.object_,
}


def _invalid(target: list[int]) -> bool:
    """A 0 beside a -1: Reshape-14 leaves that -1 undetermined (ONNX's shape
    inference refuses it; onnxruntime returns some shape)."""
    return 0 in target and -1 in target


def _model(rank: int, target: list[int], dtype: str, computed: bool) -> onnx.ModelProto:
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(DTYPES[dtype]))
    dims = [f"d{i}" for i in range(rank)]
    inputs = [onnx.helper.make_tensor_value_info("x", elem, dims)]
    nodes = []
    if computed:
        inputs.append(onnx.helper.make_tensor_value_info("s", onnx.TensorProto.INT64, ["n"]))
    else:
        value = onnx.helper.make_tensor("s", onnx.TensorProto.INT64, [len(target)], target)
        nodes.append(onnx.helper.make_node("Constant", [], ["s"], value=value))
    nodes.append(onnx.helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1))
    output = onnx.helper.make_tensor_value_info("y", elem, [f"o{i}" for i in range(len(target))])
    graph = onnx.helper.make_graph(nodes, "g", inputs, [output])
    return onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 14)], ir_version=8
    )


def _data(shape: tuple, dtype: str) -> np.ndarray:
    count = int(np.prod(shape))
    if dtype == "string":
        return np.array([f"s{i}" for i in range(count)], np.object_).reshape(shape)
    return (np.arange(count) % 7).astype(DTYPES[dtype]).reshape(shape)


def _outcome(session, feeds: dict):
    try:
        return session.run(None, feeds)[0]
    except Exception as error:  # noqa: BLE001 -- onnxruntime raises its own kinds
        return error


def _check(rank: int, target: list[int], dtype: str, computed: bool, opset: int) -> None:
    original = _model(rank, target, dtype, computed)
    try:
        onnx.checker.check_model(original, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        assert not computed, error
        pytest.skip(f"ONNX refuses the original: {str(error).splitlines()[0][-100:]}")
    what = f"Reshape<allowzero=1>(x: rank {rank} {dtype}, {'computed' if computed else ''}{target})"
    if _invalid(target) and not computed:
        with pytest.raises(lowering.LoweringError, match="a 0 beside a -1"):
            lowering.lower(original, target_opset=opset)
        return
    converted = lowering.lower(original, target_opset=opset)
    assert {o.domain: o.version for o in converted.opset_import}[""] == opset
    onnx.checker.check_model(converted, full_check=True)
    want = open_session(original.SerializeToString(), optimize=False)
    # onnxruntime checks each If branch at load, with and without its optimizer.
    sessions = [open_session(converted.SerializeToString(), optimize=o) for o in (False, True)]
    for shape in SHAPES[rank]:
        feeds = {"x": _data(shape, dtype)}
        if computed:
            feeds["s"] = np.array(target, np.int64)
        expected = _outcome(want, feeds)
        for got in (_outcome(session, feeds) for session in sessions):
            where = f"{what} on {shape} at opset {opset}"
            if _invalid(target):
                assert isinstance(got, Exception), f"{where}: {got!r} where the target is invalid"
            elif isinstance(expected, Exception):
                assert isinstance(got, Exception), f"{where}: {got!r} where the original fails"
            else:
                assert not isinstance(got, Exception), f"{where}: {got}"
                assert got.dtype == expected.dtype and got.shape == expected.shape, where
                np.testing.assert_array_equal(got, expected, err_msg=where)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("computed", [False, True], ids=["constant", "computed"])
@pytest.mark.parametrize("target", TARGETS, ids=str)
@pytest.mark.parametrize("rank", sorted(SHAPES))
@pytest.mark.sweep
def test_every_target_on_every_data_shape(rank, target, computed, opset):
    _check(rank, target, "float", computed, opset)


@pytest.mark.parametrize(
    ("dtype", "target", "computed"),
    list(itertools.product(DTYPES, [[0, 1, 0], [3, 0], [-1, 3]], [False, True])),
    ids=str,
)
def test_every_dtype(dtype, target, computed):
    _check(2, target, dtype, computed, 11)


@pytest.mark.parametrize("opset", [11, 13])
def test_regression_a_constant_zero_past_the_rank_in_a_map_body(opset):
    """Fuzz seeds 2201/2202 (8 failures): a map body's ``Reshape<allowzero=1>(x:
    [0, 0], [0, 1, 0])`` became an If whose else branch kept Reshape-13 with
    [0, 1, 0], which onnxruntime refused at load ("Invalid position of 0").
    Lowered, the model loads and gives what it gives lowered at its own opset."""
    name = "allowzero_zero_past_rank_in_a_branch"
    model, feeds = onnx.load(FUZZ / f"{name}.onnx"), fuzz_feeds(name)
    expected = open_session(lowering.lower(model).SerializeToString()).run(None, feeds)
    converted = lowering.lower(model, target_opset=opset)
    onnx.checker.check_model(converted, full_check=True)
    for optimize in (False, True):
        got = open_session(converted.SerializeToString(), optimize=optimize).run(None, feeds)
        assert_same(got, expected, f"{name} at opset {opset}")
