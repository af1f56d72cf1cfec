"""--target-opset: relabel, adapt what changed, refuse what cannot go down."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.cli import main
from lowering.passes.target_opset import lowest_opset
from tests.cases.report_models import MODELS
from tests.helpers import all_nodes, assert_same, lowered, parse, run

#: A split mapped by Unsqueeze, ReduceSum and Squeeze (axes inputs from 13:
#: adapted at 11), concatenated.
SPLIT_MAP_CONCAT = MODELS["adapted"]


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
    assert "ReduceSum (node '<unnamed>' in main graph 'g') needs opset 13" in message
    assert "its axes is computed, and the older version needs a constant" in message


def test_a_loop_carrying_a_sequence_needs_13():
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[N]) x) => (seq(float[N]) y) {
      y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
    }"""
    message = _blockers(text, 12)
    assert "needs opset 13: Loop-11 takes no seq(tensor(float))" in message
    assert _opset(lowering.lower(parse(text), target_opset=13)) == 13


def test_types_added_later_are_checked():
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (int8[2] a, int8[2] b) => (int8[2] y) { y = Mul(a, b) }"""
    assert (
        "Mul (node '<unnamed>' in main graph 'g') needs opset 14: Mul-13 takes no tensor(int8)"
        in (_blockers(text, 13))
    )
    float_text = text.replace("int8", "float")
    assert _opset(lowering.lower(parse(float_text), target_opset=11)) == 11


def test_ops_without_a_way_down_block_with_the_opset_they_need():
    text = """<ir_version: 8, opset_import: ["" : 18]>
    g (int32[2,3] x) => (int32[2,3] y) { y = BitwiseAnd(x, x) }"""
    message = _blockers(text, 13)
    assert "BitwiseAnd (node '<unnamed>' in main graph 'g') needs opset 18" in message
    assert "BitwiseAnd does not exist at opset 13" in message


def test_roi_align_16_is_not_roi_align_10():
    """RoiAlign-16 defaults to half_pixel; RoiAlign-10 is output_half_pixel (5.0 vs 7.5)."""
    text = """<ir_version: 8, opset_import: ["" : 16]>
    g (float[1,1,4,4] x) => (float[1,1,2,2] y) {
      r = Constant <value = float[1,4] {0, 0, 2, 2}> ()
      i = Constant <value = int64[1] {0}> ()
      y = RoiAlign <output_height = 2, output_width = 2> (x, r, i)
    }"""
    message = _blockers(text, 11)
    assert "RoiAlign (node '<unnamed>' in main graph 'g') needs opset 16" in message
    assert "coordinate_transformation_mode='half_pixel' has no equivalent in RoiAlign-10" in message


def test_roi_align_10_going_up_keeps_its_meaning():
    text = """<ir_version: 8, opset_import: ["" : 11]>
    g (float[1,1,4,4] x) => (float[1,1,2,2] y) {
      r = Constant <value = float[1,4] {0, 0, 2, 2}> ()
      i = Constant <value = int64[1] {0}> ()
      y = RoiAlign <output_height = 2, output_width = 2> (x, r, i)
    }"""
    original = parse(text)
    result = lowering.lower(original, target_opset=16)
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    assert_same(run(result, {"x": x}), run(original, {"x": x}))


def test_grid_sample_20_linear_becomes_bilinear_and_5d_blocks():
    text = """<ir_version: 8, opset_import: ["" : 20]>
    g (float[1,1,3,3] x, float[1,2,2,2] grid) => (float[1,1,2,2] y) {
      y = GridSample <mode = "linear"> (x, grid)
    }"""
    result = lowering.lower(parse(text), target_opset=16)
    [node] = [n for n in result.graph.node if n.op_type == "GridSample"]
    assert [a.s for a in node.attribute if a.name == "mode"] == [b"bilinear"]
    volume = """<ir_version: 8, opset_import: ["" : 20]>
    g (float[1,1,3,3,3] x, float[1,2,2,2,3] grid) => (float[1,1,2,2,2] y) {
      y = GridSample <mode = "linear"> (x, grid)
    }"""
    assert "GridSample (node '<unnamed>' in main graph 'g') needs opset 20" in _blockers(volume, 16)


def test_split_without_sizes_going_up_to_18_gets_num_outputs():
    text = """<ir_version: 8, opset_import: ["" : 13]>
    g (float[4,2] x) => (float[2,2] a, float[2,2] b) { a, b = Split <axis = 0> (x) }"""
    result = lowering.lower(parse(text), target_opset=18)
    onnx.checker.check_model(result, full_check=True)
    [node] = [n for n in result.graph.node if n.op_type == "Split"]
    assert [a.i for a in node.attribute if a.name == "num_outputs"] == [2]
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    assert_same(run(result, {"x": x}), [x[:2], x[2:]])


def test_scatter_add_blocks_below_16_naming_16():
    text = """<ir_version: 8, opset_import: ["" : 18]>
    g (float[2,3] x, int64[1,1] i, float[1,3] u) => (float[2,3] y) {
      y = ScatterND <reduction = "add"> (x, i, u)
    }"""
    message = _blockers(text, 13)
    assert "ScatterND (node '<unnamed>' in main graph 'g') needs opset 16" in message
    assert "reduction='add' has no equivalent in the older version" in message
    assert _opset(lowering.lower(parse(text), target_opset=16)) == 16


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
    assert "could declare default-domain opset 11 with --target-opset 11 (it declares 17)" in (
        capsys.readouterr().err
    )
    assert main(["--target-opset", "11", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx")]) == 0
    assert _opset(onnx.load(tmp_path / "o.onnx")) == 11
    assert "could declare" not in capsys.readouterr().err  # it declares 11: nothing to say
    with pytest.raises(SystemExit):
        main(["--target-opset", "10", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx")])


def test_blocked_target_exits_1_and_writes_nothing(tmp_path, capsys):
    onnx.save(
        parse("""<ir_version: 8, opset_import: ["" : 18]>
        g (int32[2,3] x) => (int32[2,3] y) { y = BitwiseAnd(x, x) }"""),
        tmp_path / "in.onnx",
    )
    assert main(["--target-opset", "11", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx")]) == 1
    assert (
        "BitwiseAnd (node '<unnamed>' in main graph 'g') needs opset 18" in capsys.readouterr().err
    )
    assert not (tmp_path / "o.onnx").exists()


def test_nodes_in_functions_and_subgraphs_are_converted():
    """Adapters and expansions in a model-local function and in a Loop body."""
    text = """<ir_version: 10, opset_import: ["" : 20, "local" : 1]>
    g (float[2,3,4] x, int64 n) => (float[2,3,4] y, float[N,2,3,4] s) {
      a = local.act(x)
      cond = Constant <value = bool {1}> ()
      axes = Constant <value = int64[1] {1}> ()
      t, s = Loop(n, cond, a) <body = body (int64 i, bool c, float[2,3,4] v)
          => (bool c2, float[2,3,4] w, float[2,3,4] u) {
        c2 = Identity(c)
        m = ReduceMean <keepdims = 1> (v, axes)
        d = Sub(v, m)
        w = Softmax <axis = 1> (d)
        u = HardSwish(w)
      }>
      y = Identity(t)
    }
    <domain: "local", opset_import: ["" : 20]>
    act (z) => (r) {
      h = Mish(z)
      r = LogSoftmax <axis = 0> (h)
    }"""
    original = parse(text)
    result = lowering.lower(original, target_opset=11)
    onnx.checker.check_model(result, full_check=True)
    assert _opset(result) == 11
    assert {o.domain: o.version for o in result.functions[0].opset_import}[""] == 11
    ops = {n.op_type for n in all_nodes(result)} | {n.op_type for n in result.functions[0].node}
    assert not ops & {"Mish", "HardSwish"}
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    feeds = {"x": x, "n": np.array(3, np.int64)}
    for got, want in zip(run(result, feeds), run(original, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_adapted_node_must_take_its_types_at_the_older_version():
    """BatchNormalization-15 lets scale differ from X's type; 14 does not."""
    text = """<ir_version: 10, opset_import: ["" : 15]>
    g (float16[2,3,4] x, float[3] s, float[3] b, float[3] m, float[3] v) => (float16[2,3,4] y) {
      y = BatchNormalization(x, s, b, m, v)
    }"""
    message = _blockers(text, 14)
    assert "BatchNormalization (node '<unnamed>' in main graph 'g') needs opset 15" in message
    assert "needs one type for T" in message


def test_going_up_without_an_adapter_says_so():
    """DepthToSpace-13 -> 28 has no adapter going up: blocked, and the line says which way."""
    text = """<ir_version: 8, opset_import: ["" : 13]>
    g (float[1,4,2,2] x) => (float[1,1,4,4] y) {
      y = DepthToSpace <blocksize = 2> (x)
    }"""
    message = _blockers(text, 28)
    assert "DepthToSpace (node '<unnamed>' in main graph 'g') cannot go up to opset 28" in message
    assert "no adapter from DepthToSpace-13 to DepthToSpace-28" in message


def test_going_up_where_the_adapter_declines_says_why():
    """Resize-11's tf_half_pixel_for_nn is not in Resize-13: its adapter declines."""
    text = """<ir_version: 8, opset_import: ["" : 11]>
    g (float[1,1,2,2] x, float[0] roi, float[4] s) => (float[1,1,4,4] y) {
      y = Resize <mode = "nearest", coordinate_transformation_mode = "tf_half_pixel_for_nn"> (x, roi, s)
    }"""
    message = _blockers(text, 13)
    assert "Resize (node '<unnamed>' in main graph 'g') cannot go up to opset 13" in message
    assert "tf_half_pixel_for_nn is not in Resize-13" in message
