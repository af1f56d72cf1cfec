"""--target-opset: relabel, adapt what changed, refuse what cannot go down."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.cli import main
from lowering.target_opset import lowest_opset
from tests.helpers import all_nodes, assert_same, lowered, parse, run

SPLIT_MAP_CONCAT = """<ir_version: 8, opset_import: ["" : 17]>
g (float[T,4] x, float[4] w) => (float[M] y) {
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = body (float[4] r) => (float[4] c) {
        zero = Constant <value = int64[1] {0}> ()
        u = Unsqueeze(r, zero)
        s = ReduceSum <keepdims = 1> (u, zero)
        q = Squeeze(s, zero)
        c = Mul(q, w)
      }> (rows)
  y = ConcatFromSequence <axis = 0> (m)
}"""


def _opset(model: onnx.ModelProto) -> int:
    return {o.domain: o.version for o in model.opset_import}[""]


def test_split_map_concat_goes_down_to_11():
    result = lowered(parse(SPLIT_MAP_CONCAT), target_opset=11)
    assert _opset(result) == 11
    adapted = {
        n.op_type: n
        for n in all_nodes(result)
        if n.op_type in ("Unsqueeze", "Squeeze", "ReduceSum")
    }
    for node in adapted.values():
        assert len(node.input) == 1
        # [0] in a Scan body, [1] vectorized (after the batch axis)
        assert [a.ints for a in node.attribute if a.name == "axes"] in ([[0]], [[1]])
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    w = np.arange(4, dtype=np.float32)
    assert_same(run(result, {"x": x, "w": w}), [(x * w).reshape(-1)])


@pytest.mark.parametrize("target", [11, 12, 13, 15, 17, 20])
def test_every_target_from_11_checks_and_runs(target):
    result = lowered(parse(SPLIT_MAP_CONCAT), target_opset=target)
    assert _opset(result) == target
    x = np.ones((2, 4), np.float32)
    assert_same(run(result, {"x": x, "w": np.ones(4, np.float32)}), [x.reshape(-1)])


def _blockers(text: str, target: int) -> str:
    with pytest.raises(lowering.LoweringError) as error:
        lowering.lower(parse(text), target_opset=target)
    return str(error.value)


def test_computed_axes_block_and_are_named():
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x, int64[1] axes) => (float[N] y) { y = ReduceSum(x, axes) }"""
    message = _blockers(text, 11)
    assert "cannot declare opset 11" in message
    assert "ReduceSum (its axes is computed, and opset 11 needs a constant)" in message


def test_a_loop_carrying_a_sequence_needs_13():
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[N]) x) => (seq(float[N]) y) {
      y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
    }"""
    message = _blockers(text, 12)
    assert "Loop (carries a sequence, which needs Loop-13: opset 13)" in message
    assert _opset(lowering.lower(parse(text), target_opset=13)) == 13


def test_types_added_later_are_checked():
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (int8[2] a, int8[2] b) => (int8[2] y) { y = Mul(a, b) }"""
    assert "Mul (opset 14; at opset 13 it takes no tensor(int8))" in _blockers(text, 13)
    float_text = text.replace("int8", "float")
    assert _opset(lowering.lower(parse(float_text), target_opset=11)) == 11


def test_ops_whose_meaning_changed_block():
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x) => (float[2,3] y) { y = Softmax <axis = 1> (x) }"""
    assert "Softmax (changed from opset 11 to 13)" in _blockers(text, 12)


def test_ops_newer_than_the_target_block():
    text = """<ir_version: 8, opset_import: ["" : 18]>
    g (float[2,3] x) => (float[2,3] y) { y = Mish(x) }"""
    assert "Mish (opset 18, not defined at opset 17)" in _blockers(text, 17)


def test_constant_value_ints_become_a_tensor():
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x) => (float[3,2] y) {
      shape = Constant <value_ints = [3, 2]> ()
      y = Reshape(x, shape)
    }"""
    result = lowering.lower(parse(text), target_opset=11)
    [constant] = [n for n in result.graph.node if n.op_type == "Constant"]
    assert [a.name for a in constant.attribute] == ["value"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_same(run(result, {"x": x}), [x.reshape(3, 2)])


def test_going_up_turns_attributes_into_inputs():
    text = """<ir_version: 8, opset_import: ["" : 11]>
    g (float[2,1] x) => (float[2] y) { y = Squeeze <axes = [1]> (x) }"""
    result = lowering.lower(parse(text), target_opset=13)
    squeeze = next(n for n in result.graph.node if n.op_type == "Squeeze")
    assert len(squeeze.input) == 2 and not squeeze.attribute
    assert squeeze.input[1] not in {"x", "y"}  # the new constant has a name of its own
    onnx.checker.check_model(result, full_check=True)


def test_lowest_opset_and_the_cli_summary(tmp_path, capsys):
    model = ir.serde.deserialize_model(parse(SPLIT_MAP_CONCAT))
    lowering.lower_in_place(model)
    assert lowest_opset(model) == 11
    onnx.save(parse(SPLIT_MAP_CONCAT), tmp_path / "in.onnx")
    assert main([str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 0
    assert "could declare default-domain opset 11 (it declares 17)" in capsys.readouterr().err
    assert main(["--target-opset", "11", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx")]) == 0
    assert _opset(onnx.load(tmp_path / "o.onnx")) == 11
    with pytest.raises(SystemExit):
        main(["--target-opset", "10", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx")])


def test_blocked_target_exits_1_and_writes_nothing(tmp_path, capsys):
    onnx.save(
        parse("""<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] y) { y = Softmax <axis = 1> (x) }"""),
        tmp_path / "in.onnx",
    )
    assert main(["--target-opset", "11", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx")]) == 1
    assert "Softmax (changed from opset 11 to 13)" in capsys.readouterr().err
    assert not (tmp_path / "o.onnx").exists()
