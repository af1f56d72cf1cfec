"""Bad input: exit 1, one line naming the file (and node) and what to do, no traceback,
and OUT never created or changed."""

from __future__ import annotations

import os
import pathlib

import onnx
import pytest

from lowering.cli import main
from tests.helpers import parse

GOOD = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y) {
  [the_map] y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
}"""


def _fails(tmp_path, capsys, source: pathlib.Path, *expected: str, target=None) -> str:
    target = target or tmp_path / "out.onnx"
    existed = target.exists()
    before = target.read_bytes() if existed else None
    assert main([str(source), str(target)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert str(source) in err or str(target) in err
    for text in expected:
        assert text in err, err
    assert (target.read_bytes() if target.exists() else None) == before
    return err


def test_missing_file(tmp_path, capsys):
    _fails(tmp_path, capsys, tmp_path / "nope.onnx", "no such file")


def test_directory(tmp_path, capsys):
    (tmp_path / "dir.onnx").mkdir()
    _fails(tmp_path, capsys, tmp_path / "dir.onnx", "is a directory")


def test_empty_file(tmp_path, capsys):
    (tmp_path / "empty.onnx").write_bytes(b"")
    _fails(tmp_path, capsys, tmp_path / "empty.onnx", "the file is empty")


def test_random_bytes(tmp_path, capsys):
    (tmp_path / "random.onnx").write_bytes(os.urandom(4096))
    _fails(tmp_path, capsys, tmp_path / "random.onnx", "not a valid ONNX model")


def test_truncated_protobuf(tmp_path, capsys):
    whole = parse(GOOD).SerializeToString()
    (tmp_path / "cut.onnx").write_bytes(whole[: len(whole) // 2])
    _fails(tmp_path, capsys, tmp_path / "cut.onnx", "may be truncated")


@pytest.mark.parametrize("kind", ["graph", "node", "opset"])
def test_a_protobuf_that_is_not_a_model(kind, tmp_path, capsys):
    message = {
        "graph": parse(GOOD).graph,
        "node": onnx.helper.make_node("Add", ["a", "b"], ["c"]),
        "opset": onnx.OperatorSetIdProto(domain="x", version=1),
    }[kind]
    (tmp_path / "not_a_model.onnx").write_bytes(message.SerializeToString())
    _fails(tmp_path, capsys, tmp_path / "not_a_model.onnx", "a protobuf but not an ONNX model")


def test_unwritable_output(tmp_path, capsys):
    onnx.save(parse(GOOD), tmp_path / "in.onnx")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere; see the /proc case")
        _fails(tmp_path, capsys, tmp_path / "in.onnx", "cannot write", target=locked / "out.onnx")
    finally:
        locked.chmod(0o700)


def test_output_in_a_read_only_file_system(tmp_path, capsys):
    onnx.save(parse(GOOD), tmp_path / "in.onnx")
    _fails(
        tmp_path,
        capsys,
        tmp_path / "in.onnx",
        "cannot write",
        target=pathlib.Path("/proc/out.onnx"),
    )


BROKEN_MAPS = {
    "no_body": (
        "y = SequenceMap (x)",
        "has no 'body' attribute",
    ),
    "body_takes_too_many_inputs": (
        "y = SequenceMap <body = body (float[N] a, float[N] b) => (float[N] c) { c = Add(a, b) }> (x)",
        "its body has 2 input(s) but the node has 1",
    ),
    "body_returns_too_few_outputs": (
        "y, z = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)",
        "its body has 1 output(s) but the node has 2",
    ),
    "first_input_is_a_tensor": (
        "y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (t)",
        "its first input ('t') is a tensor, not a sequence",
    ),
    "body_output_is_a_sequence": (
        "y = SequenceMap <body = body (float[N] a) => (seq(float[N]) c) { c = SequenceConstruct(a) }> (x)",
        "a SequenceMap body must return tensors",
    ),
    "inconsistent_types": (
        "y = SequenceMap <body = body (float[N] a) => (int64[1] c) { c = Shape(a) }> (x)",
        (
            "inconsistent types: output 0 ('y') is declared as a sequence of FLOAT but its "
            "body output ('c') is INT64"
        ),
    ),
}


@pytest.mark.parametrize("name", list(BROKEN_MAPS))
def test_broken_maps_name_the_node(name, tmp_path, capsys):
    node, reason = BROKEN_MAPS[name]
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[N]) x, float[3] t) => (seq(float[N]) y) {{ [broken] {node} }}""")
    onnx.save(model, tmp_path / "in.onnx")
    _fails(
        tmp_path, capsys, tmp_path / "in.onnx", "'broken' (SequenceMap) in main graph 'g'", reason
    )


def test_a_model_failing_the_checker_elsewhere_is_lowered_with_a_warning(tmp_path, capsys):
    model = parse(GOOD)
    # An unrelated problem: a node of an op ONNX does not know, that nothing reads.
    model.graph.node.append(onnx.helper.make_node("NotAnOp", ["x"], ["unused"]))
    onnx.save(model, tmp_path / "in.onnx")
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    assert main([str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 0
    err = capsys.readouterr().err
    assert "does not pass the ONNX checker" in err and "it was lowered anyway" in err
    assert "Loop" in [n.op_type for n in onnx.load(tmp_path / "out.onnx").graph.node]


def test_failure_with_in_equal_out_leaves_in_untouched(tmp_path, capsys):
    model = parse("""<ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[N]) x) => (seq(float[N]) y) { [broken] y = SequenceMap (x) }""")
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    _fails(tmp_path, capsys, path, "has no 'body' attribute", target=path)
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]
