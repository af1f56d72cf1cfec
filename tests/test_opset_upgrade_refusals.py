"""Going up from below 11: what onnx.version_converter cannot take is refused by node.

Every limit of the library step (lowering/opset/library_limits.py: one
check per feature its upward adapters assert on or get wrong) is swept:
the CLI exits 1 with one line naming the node (name, op, graph) and the
reason in plain words, never the library's assertion text, which ``-v``
shows. With the limits switched off, what the library itself fails on is
still traced to its node. Beside each limit, the form just inside it is
converted and computes what the original does.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as h

import lowering
from lowering.cli import main
from lowering.errors import LoweringError
from lowering.opset import library, library_limits
from lowering.opset.library import LIBRARY_UP
from lowering.opset.library_limits import LIMITS
from tests.cases.upgrade_models import init, model, vi
from tests.helpers import assert_same, run

X4 = [1, 2, 3, 3]
_STATS = [
    init("s", np.float32([1, 2])),
    init("b", np.float32([0.5, -1])),
    init("m", np.float32([0.1, 0.2])),
    init("v", np.float32([1, 4])),
]


def _bn(opset: int, **attrs) -> onnx.ModelProto:
    node = h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn", **attrs)
    return model(opset, [node], [vi("x", X4)], [vi("y", X4)], _STATS)


def _binary(op: str, a, b, opset: int = 6, **attrs) -> onnx.ModelProto:
    node = h.make_node(op, ["x", "c"], ["y"], name="bin", **attrs)
    return model(opset, [node], [vi("x", a)], [vi("y", None)], [init("c", np.ones(b, np.float32))])


def _dropout(read: str) -> onnx.ModelProto:
    nodes = [h.make_node("Dropout", ["x"], ["y", "mask"], name="drop")]
    outputs = [vi("y", X4)]
    if read == "by a node":
        nodes.append(h.make_node("Add", ["y", "mask"], ["z"]))
        outputs = [vi("z", X4)]
    else:
        outputs.append(vi("mask", X4))
    return model(7, nodes, [vi("x", X4)], outputs)


def _gemm(a_shape) -> onnx.ModelProto:
    node = h.make_node("Gemm", ["a", "bb", "c"], ["y"], name="gm")
    inputs = [vi("a", a_shape), vi("bb", [3, 4]), vi("c", [4])]
    made = model(6, [node], inputs, [vi("y", None)])
    if a_shape is None:
        made.graph.input[0].type.tensor_type.ClearField("shape")
    return made


#: id -> (model, op, node, reason, limit, whether the node is still traced without the
#: limit: the library fails on it alone, or writes what the checker refuses).
CASES = {
    "bn7-spatial0": (
        _bn(7, spatial=0),
        "BatchNormalization",
        "bn",
        "spatial=0 (statistics per element, not per channel)",
        "_per_element_statistics",
        True,
    ),
    "bn6-spatial0": (
        _bn(6, spatial=0, is_test=1),
        "BatchNormalization",
        "bn",
        "spatial=0 (statistics per element, not per channel)",
        "_per_element_statistics",
        True,
    ),
    "bn6-is_test0": (
        _bn(6, is_test=0),
        "BatchNormalization",
        "bn",
        "is_test=0 (training, its default)",
        "_training",
        True,
    ),
    "bn6-is_test-default": (
        _bn(6),
        "BatchNormalization",
        "bn",
        "is_test=0 (training, its default)",
        "_training",
        False,  # the library takes it, as inference, which it is not
    ),
    "dropout7-mask-read-by-a-node": (
        _dropout("by a node"),
        "Dropout",
        "drop",
        "its mask is read",
        "_mask_read",
        False,  # ONNX infers no mask type: only the reading Add fails the checker
    ),
    "dropout7-mask-a-graph-output": (
        _dropout("as an output"),
        "Dropout",
        "drop",
        "its mask is read",
        "_mask_read",
        True,
    ),
    **{
        f"{op.lower()}{opset}-broadcast-axis1": (
            _binary(op, X4, [2], broadcast=1, axis=1),
            op,
            "bin",
            "legacy broadcast along axis 1 (broadcast=1)",
            "_legacy_axis",
            True,
        )
        for op, opset in (("Add", 6), ("Sub", 6), ("Mul", 6), ("Div", 6), ("Pow", 1))
    },
    "add6-broadcast-axis2": (
        _binary("Add", [2, 3, 4, 5], [4], broadcast=1, axis=2),
        "Add",
        "bin",
        "legacy broadcast along axis 2 (broadcast=1)",
        "_legacy_axis",
        True,
    ),
    "add6-symbolic": (
        _binary("Add", ["N", 2, 3, 3], X4),
        "Add",
        "bin",
        "gives input 0 dims ['N', 2, 3, 3]",
        "_static_shapes",
        True,
    ),
    "gemm6-no-shape": (
        _gemm(None),
        "Gemm",
        "gm",
        "gives input 0 no shape",
        "_static_shapes",
        True,
    ),
}
PLAIN = "onnx.version_converter takes it up only where ONNX's inference gives every input"


def _cli(tmp_path, proto: onnx.ModelProto, capsys, *extra: str) -> tuple[int, str]:
    path = tmp_path / "in.onnx"
    onnx.save(proto, path)
    code = main([str(path), str(tmp_path / "out.onnx"), "--target-opset", "11", *extra])
    return code, capsys.readouterr().err


def _no_library_words(text: str) -> None:
    for words in ("Assertion", "failed:", ".h:", ".cc:", "ShapeInferenceError"):
        assert words not in text, text


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_limit_is_refused_in_one_line_naming_the_node(case, tmp_path, capsys):
    proto, op, node, reason, _, _ = CASES[case]
    code, err = _cli(tmp_path, proto, capsys)
    assert code == 1
    (line,) = [x for x in err.strip().splitlines() if "warning" not in x]
    assert f"{op} (node '{node}' in main graph 'g') cannot go up to opset 11: " in line, line
    assert reason in line, line
    _no_library_words(line)
    assert not (tmp_path / "out.onnx").exists()


def test_every_limit_is_swept_and_belongs_to_a_library_step():
    assert set(LIMITS) <= set(LIBRARY_UP)
    swept = {limit for _, _, _, _, limit, _ in CASES.values()}
    assert swept == {f.__name__ for limits in LIMITS.values() for f in limits}
    assert {(CASES[c][1], _version(CASES[c][0], CASES[c][1])) for c in CASES} >= set(LIMITS)


def _version(proto: onnx.ModelProto, op: str) -> int:
    change = library._changes(op, proto.opset_import[0].version)
    assert change is not None
    return change[0]


TRACED = sorted(c for c in CASES if CASES[c][5])


@pytest.mark.parametrize("case", TRACED)
def test_without_the_limits_what_the_library_fails_on_is_traced_to_its_node(case, monkeypatch):
    proto, op, node, _, _, _ = CASES[case]
    monkeypatch.setattr(library_limits, "LIMITS", {})
    with pytest.raises(LoweringError) as raised:
        lowering.lower(proto, target_opset=13)
    message = str(raised.value)
    assert "\n" not in message
    assert f"{op} (node '{node}' in main graph 'g') cannot go up to opset 13: " in message
    assert "onnx.version_converter" in message
    _no_library_words(message)
    assert any(line.startswith("  onnx.") for line in raised.value.details)


def test_a_failure_no_node_explains_is_one_plain_sentence(monkeypatch):
    monkeypatch.setattr(library_limits, "LIMITS", {})
    monkeypatch.setattr(library, "culprit", lambda *args: None)
    with pytest.raises(LoweringError) as raised:
        lowering.lower(CASES["bn7-spatial0"][0], target_opset=11)
    message = str(raised.value)
    assert message == (
        "the model cannot declare opset 11: going up from opset 7 to 11, "
        "onnx.version_converter failed on the model"
    )
    assert any("spatial must have value 1" in line for line in raised.value.details)


def test_v_shows_the_library_words_only_where_it_ran(tmp_path, capsys, monkeypatch):
    code, err = _cli(tmp_path, CASES["bn7-spatial0"][0], capsys, "-v")
    assert code == 1 and "  blocks: BatchNormalization (node 'bn'" in err
    assert "Assertion" not in err  # refused before the library ran
    monkeypatch.setattr(library_limits, "LIMITS", {})
    code, err = _cli(tmp_path, CASES["bn7-spatial0"][0], capsys, "-v")
    assert code == 1 and "  onnx.version_converter: " in err and "spatial" in err


@pytest.mark.parametrize(
    ("proto", "op", "node", "reason"),
    [
        (
            model(
                9,
                [h.make_node("Resize", ["x", "sc"], ["y"], name="r")],
                [vi("x", X4)],
                [vi("y", None)],
                [init("sc", np.float32([1, 1, 2, 2]))],
            ),
            "Resize",
            "r",
            "Resize is not an op of opset 9",
        ),
        (  # no broadcast attribute: the shapes must match, and the library asserts they do
            _binary("Add", [2, 3], [2]),
            "Add",
            "bin",
            "onnx.version_converter cannot convert it",
        ),
    ],
    ids=["op-not-at-the-source-opset", "add6-shapes-that-do-not-match"],
)
def test_invalid_nodes_are_refused_by_name(proto, op, node, reason):
    with pytest.raises(LoweringError) as raised:
        lowering.lower(proto, target_opset=11)
    message = str(raised.value)
    assert f"{op} (node '{node}' in main graph 'g') cannot go up to opset 11: {reason}" in message
    _no_library_words(message)


_LEGACY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power}


@pytest.mark.parametrize(
    ("a", "b", "axis"),
    [([2, 3, 4], [2], 0), ([2, 3, 4], [3, 4], 1), ([2, 3, 4], [2, 3], 0), ([2, 3, 4], [4], None)],
)
@pytest.mark.parametrize("op", sorted(_LEGACY))
def test_legacy_broadcast_inside_the_limit_goes_up_right(op, a, b, axis):
    """onnxruntime runs none of these at opset 6: numpy is the oracle."""
    rng = np.random.default_rng(0)
    c = rng.uniform(0.5, 2, b).astype(np.float32)
    attrs = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    node = h.make_node(op, ["x", "c"], ["y"], name="bin", **attrs)
    proto = model(6, [node], [vi("x", a)], [vi("y", None)], [init("c", c)])
    out = lowering.lower(proto, target_opset=13)
    onnx.checker.check_model(out, full_check=True)
    x = rng.uniform(0.5, 2, a).astype(np.float32)
    start = len(a) - len(b) if axis is None else axis
    aligned = c.reshape(c.shape + (1,) * (len(a) - start - len(b)))
    assert_same(run(out, {"x": x})[0], _LEGACY[op](x, aligned))


@pytest.mark.parametrize("declared", [False, True])
def test_an_unread_dropout_7_mask_goes_up_declared_or_not(declared):
    nodes = [h.make_node("Dropout", ["x"], ["y", "mask"], name="drop", ratio=0.3)]
    proto = model(7, nodes, [vi("x", X4)], [vi("y", X4)])
    if declared:
        proto.graph.value_info.append(vi("mask", X4))
    out = lowering.lower(proto, target_opset=13)
    onnx.checker.check_model(out, full_check=True)
    x = np.random.default_rng(1).standard_normal(X4).astype(np.float32)
    assert_same(run(out, {"x": x})[0], run(proto, {"x": x})[0])


@pytest.mark.parametrize("attrs", [{}, {"spatial": 1}])
def test_batch_normalization_7_per_channel_goes_up(attrs):
    proto = _bn(7, **attrs)
    out = lowering.lower(proto, target_opset=13)
    x = np.random.default_rng(2).standard_normal(X4).astype(np.float32)
    assert_same(run(out, {"x": x})[0], run(proto, {"x": x})[0])
