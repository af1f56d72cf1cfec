"""A split read at constant positions next to a map becomes slices of the tensor.

torch writes ``torch.split``/``torch.chunk`` as ``SplitToSequence`` read by
``SequenceAt`` at constants (the gpt2 and chunk_reduce exports do it next to
their maps). Sequence elimination reads those elements straight from the
tensor (``lowering/passes/eliminate_sequences.py``), so runtimes without sequence
ops (tract, tinygrad) run the output. Each case is checked against plain
numpy; where the bounds are not static the sequence ops stay.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import lowering
from tests.golden import canonical_text
from tests.helpers import assert_same, lowered, op_types, parse, run

H = '<ir_version: 8, opset_import: ["" : 17]>'

# A map of its own, so that the lowering (and sequence elimination) runs.
MAP = """t = SequenceConstruct (w)
          m = SequenceMap <body = body (float[2] e) => (float[2] n) { n = Neg (e) }> (t)
          zero = Constant <value = int64 {0}> ()
          z = SequenceAt (m, zero)"""

X = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
W = np.array([1, -2], np.float32)


def _model(
    split: str,
    attributes: str,
    index: int,
    y_shape,
    x_type: str = "float[2,5,3]",
    with_map: bool = True,
) -> str:
    inputs = "(x)" if not split else "(x, split)"
    split_node = f"split = Constant <value = {split}> ()" if split else ""
    # Without the map, z is w's negation written plainly: the split is all there is.
    beside = MAP if with_map else "z = Neg (w)"
    return f"""{H}
        g ({x_type} x, float[2] w) => (float[{",".join(map(str, y_shape))}] y, float[2] z) {{
          {split_node}
          parts = SplitToSequence <{attributes}> {inputs}
          i = Constant <value = int64 {{{index}}}> ()
          y = SequenceAt (parts, i)
          {beside}
        }}"""


def _pieces(sizes: list[int]) -> list[np.ndarray]:
    return np.split(X, np.cumsum(sizes)[:-1], axis=1)


# name -> (split constant, attributes, index, the element in numpy)
CASES = {
    "no_split_keepdims_0": ("", "axis = 1, keepdims = 0", 3, X[:, 3]),
    "no_split_keepdims_1": ("", "axis = 1", 1, X[:, 1:2]),
    "no_split_negative_index": ("", "axis = 1, keepdims = 0", -1, X[:, -1]),
    "no_split_negative_axis": ("", "axis = -1, keepdims = 0", 2, X[:, :, 2]),
    "chunks_of_2": ("int64 {2}", "axis = 1", 1, _pieces([2, 2, 1])[1]),
    "chunks_of_2_last_shorter": ("int64 {2}", "axis = 1", -1, _pieces([2, 2, 1])[2]),
    "sizes": ("int64[3] {1, 3, 1}", "axis = 1", 1, _pieces([1, 3, 1])[1]),
    "sizes_keepdims_ignored": ("int64[2] {4, 1}", "axis = 1, keepdims = 0", 0, X[:, :4]),
}


@pytest.mark.parametrize("with_map", [True, False], ids=["beside_a_map", "alone"])
@pytest.mark.parametrize("name", list(CASES))
def test_split_read_becomes_a_slice_and_matches_numpy(name, with_map):
    split, attributes, index, element = CASES[name]
    model = parse(_model(split, attributes, index, element.shape, with_map=with_map))
    result = lowered(model)
    assert not [op for op in op_types(result) if "Sequence" in op]
    y, z = run(result, {"x": X, "w": W})
    assert y.shape == element.shape
    np.testing.assert_array_equal(y, element)
    np.testing.assert_array_equal(z, -W)
    if not with_map:  # the read is the rewrite, reported as one
        (read,) = lowering.lower_in_place(ir.serde.deserialize_model(model))
        assert (read.op_type, read.strategy) == ("SequenceAt", "Slice")
        assert lowering.lower_in_place(ir.serde.deserialize_model(result)) == []


def test_torch_split_alone_runs_in_openvino(tmp_path):
    """torch.split with a computed size and no map: no sequence op is left, so OpenVINO
    runs it (it converts SplitToSequence only over a static axis)."""
    model = parse(_model("int64 {2}", "axis = 1", 1, (2, "M", 3), "float[2,N,3]", with_map=False))
    result = lowering.lower(model)
    assert not {op for op in op_types(result) if "Sequence" in op}
    expected = [_pieces([2, 2, 1])[1], -W]
    assert_same(run(result, {"x": X, "w": W}), expected)
    pytest.importorskip("openvino")
    from lowering.runtimes.runners import run_openvino

    path = tmp_path / "split.onnx"
    onnx.save(result, path)
    assert_same(run_openvino(path, [X, W]), expected)


def test_the_cli_says_it_read_a_split_and_copies_a_model_it_cannot(tmp_path):
    from lowering.cli import main

    source, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(parse(_model("int64 {2}", "axis = 1", 1, (2, 2, 3), with_map=False)), source)
    assert main([str(source), str(out)]) == 0
    assert "SplitToSequence" not in op_types(onnx.load(out))
    # At a position from the data, the read stays, and OUT is IN byte for byte.
    kept = parse(_model("int64 {2}", "axis = 1", 1, (2, 2, 3), with_map=False))
    kept.graph.input.append(onnx.helper.make_tensor_value_info("j", onnx.TensorProto.INT64, []))
    (read,) = [n for n in kept.graph.node if n.op_type == "SequenceAt"]
    read.input[1] = "j"
    onnx.save(kept, source)
    assert main([str(source), str(out)]) == 0
    assert out.read_bytes() == source.read_bytes()


def test_the_summary_names_the_split_reads(tmp_path, capsys):
    from lowering.cli import main

    source, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(parse(_model("int64 {2}", "axis = 1", 1, (2, 2, 3), with_map=False)), source)
    assert main([str(source), str(out)]) == 0
    err = capsys.readouterr().err
    assert f"read 1 SequenceAt node as a Slice in {source} -> {out}" in err
    assert "Slice, an element of a split at static bounds" in err


# name -> (split constant, attributes, index, x type): bounds unknown or index out of range
KEPT = {
    "index_out_of_range": ("int64 {2}", "axis = 1", 3, "float[2,5,3]"),
    "sizes_not_adding_up": ("int64[2] {1, 1}", "axis = 1", 0, "float[2,5,3]"),
}


@pytest.mark.parametrize("name", list(KEPT))
def test_split_read_is_kept_where_its_bounds_are_not_static(name):
    split, attributes, index, x_type = KEPT[name]
    result = lowering.lower(parse(_model(split, attributes, index, (2, 2, 3), x_type)))
    assert {"SplitToSequence", "SequenceAt"} <= set(op_types(result))


def test_a_split_of_a_dynamic_axis_is_read_at_computed_bounds():
    """(tests/test_sequence_free_loops.py tests these reads of computed splits.)"""
    result = lowering.lower(parse(_model("int64 {2}", "axis = 1", 0, (2, 2, 3), "float[2,N,3]")))
    assert not {"SplitToSequence", "SequenceAt"} & set(op_types(result))
    y, _ = run(result, {"x": X, "w": W})
    assert_same(y, X[:, :2])


def test_golden_chunk_read():
    source = _model("int64 {2}", "axis = 1", 0, (2, 2, 3))
    expected = f"""{H}
        g (float[2,5,3] x, float[2] w) => (float[2,2,3] y, float[2] z) {{
          start = Constant <value = int64[1] {{0}}> ()
          axis = Constant <value = int64[1] {{1}}> ()
          end = Constant <value = int64[1] {{2}}> ()
          y = Slice (x, start, end, axis)
          z = Neg (w)
        }}"""
    assert canonical_text(lowering.lower(parse(source))) == canonical_text(parse(expected))


def test_golden_chunk_of_one_read():
    """A chunk of one entry (the last, shorter one) is one Gather."""
    source = _model("int64 {2}", "axis = 1", -1, (2, 1, 3))
    expected = f"""{H}
        g (float[2,5,3] x, float[2] w) => (float[2,1,3] y, float[2] z) {{
          at = Constant <value = int64[1] {{4}}> ()
          y = Gather <axis = 1> (x, at)
          z = Neg (w)
        }}"""
    assert canonical_text(lowering.lower(parse(source))) == canonical_text(parse(expected))


def _alone(opset: int, elem: str, split: str, attributes: str, index: int, y_shape) -> str:
    """A split read and nothing else, at ``opset``: the pass on its own, no map around it."""
    inputs = "(x)" if not split else "(x, split)"
    split_node = f"split = Constant <value = {split}> ()" if split else ""
    return f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g ({elem}[2,5,3] x) => ({elem}[{",".join(map(str, y_shape))}] y) {{
          {split_node}
          parts = SplitToSequence <{attributes}> {inputs}
          i = Constant <value = int64 {{{index}}}> ()
          y = SequenceAt (parts, i)
        }}"""


@pytest.mark.parametrize("opset", [11, 12, 13, 17])
@pytest.mark.parametrize("elem", ["float", "string"])
@pytest.mark.parametrize("name", list(CASES))
def test_the_pass_alone_reads_splits_at_every_opset(name, elem, opset):
    """Strings are sliced, not gathered, and Squeeze spells its axes as its opset wants them."""
    split, attributes, index, element = CASES[name]
    x = X if elem == "float" else X.astype(np.int64).astype(str).astype(object)
    expected = element if elem == "float" else element.astype(np.int64).astype(str).astype(object)
    model = ir.from_proto(
        onnx.parser.parse_model(_alone(opset, elem, split, attributes, index, element.shape))
    )
    lowering.EliminateSequencesPass()(model)
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    assert not [node.op_type for node in proto.graph.node if "Sequence" in node.op_type]
    (y,) = run(proto, {"x": x})
    assert y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)


def test_a_function_reads_splits_at_the_opset_it_imports():
    """A function importing opset 12 gets Squeeze-12's attribute axes.

    Function inputs carry no types in ONNX; typing it (as specializing a
    function for its caller does) lets the read be static.
    """
    source = """<ir_version: 8, opset_import: ["" : 12, "local" : 1]>
        g (string[2,5,3] x) => (string[2,3] y) { y = local.pick (x) }
        <domain: "local", opset_import: ["" : 12]>
        pick (x) => (y) {
          parts = SplitToSequence <axis = 1, keepdims = 0> (x)
          i = Constant <value = int64 {3}> ()
          y = SequenceAt (parts, i)
        }"""
    model = ir.from_proto(onnx.parser.parse_model(source))
    (function,) = model.functions.values()
    function.inputs[0].type = ir.TensorType(ir.DataType.STRING)
    function.inputs[0].shape = ir.Shape([2, 5, 3])
    lowering.EliminateSequencesPass()(model)
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    squeezes = [n for n in proto.functions[0].node if n.op_type == "Squeeze"]
    assert len(squeezes) == 1 and len(squeezes[0].input) == 1
    x = X.astype(np.int64).astype(str).astype(object)
    (y,) = run(proto, {"x": x})
    np.testing.assert_array_equal(y, x[:, 3])
