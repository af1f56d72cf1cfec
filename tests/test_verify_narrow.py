"""Narrow floats read as floats wherever an output holds them (issue 35, family 3):
every narrow float type (bfloat16, the four float8 types, float16) as a tensor,
an optional and a sequence output, from a model in memory, a file, and a file
with external data (which is neither changed nor copied)."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

from lowering import verify
from lowering.verify.tolerance import NARROW_FLOATS

TYPES = {
    "bfloat16": TensorProto.BFLOAT16,
    "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
    "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
    "float8_e5m2": TensorProto.FLOAT8E5M2,
    "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
    "float16": TensorProto.FLOAT16,
}


def _tensor_model(to: int, scale: float = 1.0, add: float | None = None) -> onnx.ModelProto:
    """y = Cast(x * w * scale (+ add)) to ``to``, w an initializer of ones (64 values:
    stored as external data when saved so)."""
    w = onnx.numpy_helper.from_array(np.ones(64, np.float32), "w")
    k = onnx.numpy_helper.from_array(np.array([scale], np.float32), "k")
    nodes = [h.make_node("Mul", ["x", "w"], ["xw"]), h.make_node("Mul", ["xw", "k"], ["v"])]
    initializers = [w, k]
    if add is not None:
        initializers.append(onnx.numpy_helper.from_array(np.array([add], np.float32), "z"))
        nodes[-1].output[0] = "xk"
        nodes.append(h.make_node("Add", ["xk", "z"], ["v"]))
    nodes.append(h.make_node("Cast", ["v"], ["y"], to=to))
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
        [h.make_tensor_value_info("y", to, [64])],
        initializers,
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)


def _passed_on(to: int, kind: str, other: bool = False, after: bool = False) -> onnx.ModelProto:
    """A Loop of 2 trips that hands on an input of ``kind`` (optional or sequence
    of ``to``) as it is: no ONNX op takes such a value apart or builds one, so a
    model can only pass it on. ``other``: the input p instead of o (B, wrong).
    ``after``: the Loop carries a float sequence s first (onnxruntime's Loop has
    a kernel for an optional float8 only after a sequence)."""
    element = h.make_tensor_type_proto(to, ["N"])
    kinds = {"optional": h.make_optional_type_proto, "sequence": h.make_sequence_type_proto}
    value = kinds[kind](element)
    floats = h.make_sequence_type_proto(h.make_tensor_type_proto(TensorProto.FLOAT, ["M"]))
    carried = [h.make_value_info("carried", value)]
    inputs = [h.make_value_info("o", value), h.make_value_info("p", value)]
    if after:
        carried.insert(0, h.make_value_info("s_in", floats))
        inputs.insert(0, h.make_value_info("s", floats))
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [
            h.make_tensor_value_info("i", TensorProto.INT64, []),
            h.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            *carried,
        ],
        [h.make_tensor_value_info("cond_out", TensorProto.BOOL, []), *carried],
    )
    two, true = np.array(2), np.array(True)
    graph = h.make_graph(
        [
            h.make_node("Constant", [], ["n"], value=onnx.numpy_helper.from_array(two)),
            h.make_node("Constant", [], ["go"], value=onnx.numpy_helper.from_array(true)),
            h.make_node(
                "Loop",
                ["n", "go", *(["s"] if after else []), "p" if other else "o"],
                [*(["t"] if after else []), "y"],
                body=body,
            ),
        ],
        "g",
        inputs,
        [h.make_value_info("y", value)],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("name", list(TYPES))
def test_a_tensor_output_of_every_narrow_float_is_read_as_floats(name):
    a = _tensor_model(TYPES[name])
    report = verify.compare(a, a, runs=6)
    assert report.status == verify.MATCH, report.table()
    assert f"8 ulp ({name})" in report.table()
    # -0.0 + 0.0 is +0.0: equal to -0.0 (the zeros run has -0.0)
    assert verify.compare(a, _tensor_model(TYPES[name], add=0.0), runs=6).status == verify.MATCH
    scaled = verify.compare(a, _tensor_model(TYPES[name], scale=1.5), runs=6)
    assert scaled.status == verify.MISMATCH, scaled.table()


def _save(model: onnx.ModelProto, folder: pathlib.Path, external: bool) -> pathlib.Path:
    folder.mkdir()
    path = folder / "model.onnx"
    if external:
        onnx.save(model, path, save_as_external_data=True, location="model.data", size_threshold=0)
    else:
        onnx.save(model, path)
    return path


def _contents(folder: pathlib.Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("external", [True, False], ids=["external data", "one file"])
@pytest.mark.parametrize("name", list(TYPES))
def test_a_model_file_with_external_data_is_read_as_floats_and_left_as_it_is(
    name, external, tmp_path, monkeypatch
):
    scratch = tmp_path / "scratch"  # the temporary folder: nothing may be left in it
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    to = TYPES[name]
    a = _save(_tensor_model(to), tmp_path / "a", external)
    right = _save(_tensor_model(to, add=0.0), tmp_path / "right", external)
    wrong = _save(_tensor_model(to, scale=1.5), tmp_path / "wrong", external)
    if external:
        assert onnx.load(a, load_external_data=False).graph.initializer[0].data_location == 1
    before = {path.parent: _contents(path.parent) for path in (a, right, wrong)}
    report = verify.compare(a, right, runs=4)
    assert report.status == verify.MATCH, report.table()
    assert f"8 ulp ({name})" in report.table()
    assert verify.compare(a, wrong, runs=4, save_failing=False).status == verify.MISMATCH
    assert verify.main([str(a), str(right), "-q", "--runs", "2"]) == 0
    assert {folder: _contents(folder) for folder in before} == before
    assert list(scratch.iterdir()) == []


#: The optionals onnxruntime's Python API reads from a run with a sequence
#: input: raw bytes (float8e4m3fn) or arrays (float16); the others only from
#: OrtValues, which take no sequence.
_READ_WITH_SEQUENCES = {"float8_e4m3fn", "float16"}
#: onnxruntime's Loop has no kernel for an optional float8 it carries alone.
_LOOPS_ALONE = {"bfloat16", "float16"}


def _optional_cases() -> list:
    return [
        pytest.param(name, after, id=f"{name}-{'after a sequence' if after else 'alone'}")
        for name in TYPES
        for after in (False, True)
        if after or name in _LOOPS_ALONE
    ]


@pytest.mark.parametrize(("name", "after"), _optional_cases())
def test_an_optional_output_of_every_narrow_float_is_read_as_floats(name, after):
    to = TYPES[name]
    a, b = _passed_on(to, "optional", after=after), _passed_on(to, "optional", True, after)
    report = verify.compare(a, a)
    assert report.status == verify.MATCH, report.table()
    absent = [r for r in report.records if "optional inputs absent" in r.description]
    assert absent and all(r.outcome == "compared" for r in absent)
    if after and name not in _READ_WITH_SEQUENCES:
        # a present optional is not read where a sequence is fed: a run A fails
        present = [r for r in report.records if r not in absent]
        assert all(r.outcome == "not compared" for r in present), report.table()
        assert all("No corresponding Numpy type" in (r.note or "") for r in present)
        return
    assert report.runs == len(verify.DEFAULT_SCHEDULE)  # present and absent
    assert f"8 ulp ({name})" in report.table()
    assert verify.compare(a, b).status == verify.MISMATCH
    # read as floats, not bytes: -0.0 is +0.0, NaN is NaN, one ulp is within 8
    dtype = np.float16 if name == "float16" else _ml(name)
    one_up = 1 + 2.0 ** -NARROW_FLOATS[name]
    first = np.array([-0.0, 1.0, np.nan, 1.0], np.float32).astype(dtype)
    second = np.array([0.0, 1.0, np.nan, one_up], np.float32).astype(dtype)
    assert first.tobytes() != second.tobytes()
    runs = [{"o": first, "p": second}, {"o": second, "p": first}]
    if after:
        runs = [{**feeds, "s": [np.ones(2, np.float32)]} for feeds in runs]
    crossed = verify.compare(a, b, inputs=runs)
    assert crossed.status == verify.MATCH, crossed.table()


@pytest.mark.parametrize("name", list(TYPES))
def test_a_sequence_output_of_every_narrow_float(name):
    to = TYPES[name]
    a, b = _passed_on(to, "sequence"), _passed_on(to, "sequence", other=True)
    report = verify.compare(a, a)
    if name == "float16":  # onnxruntime feeds and returns float16 sequences
        assert report.status == verify.MATCH, report.table()
        assert "8 ulp (float16)" in report.table()
        assert verify.compare(a, b).status == verify.MISMATCH
        return
    # onnxruntime's Python API feeds no sequence of a narrow float longer than
    # 0, and no op builds one: only the empty runs run, which show nothing
    assert report.status == verify.COULD_NOT_COMPARE, report.table()
    assert "only runs with empty inputs" in report.reason
    assert report.exit_code == 3


def test_reading_says_how_each_output_is_read():
    from lowering.verify.narrow import reading

    tensor = _tensor_model(TensorProto.BFLOAT16)
    cast = reading(tensor, tensor)
    assert isinstance(cast.model, onnx.ModelProto) and cast.folder is None
    assert [n.op_type for n in cast.model.graph.node][-1] == "Cast"
    assert [o.name for o in tensor.graph.output] == ["y"]  # the model is not changed
    optional = _passed_on(TensorProto.FLOAT8E4M3FNUZ, "optional", after=True)
    assert reading(optional, optional).ort_values
    viewed = _passed_on(TensorProto.FLOAT8E4M3FN, "optional", after=True)
    assert reading(viewed, viewed).model is viewed  # raw bytes, viewed
    plain = _tensor_model(TensorProto.FLOAT)
    assert reading(plain, plain).model is plain and not reading(plain, plain).types


def test_a_file_with_external_data_is_opened_from_its_folder(tmp_path):
    from lowering.verify.narrow import reading

    path = _save(_tensor_model(TensorProto.BFLOAT16), tmp_path / "m", external=True)
    proto = onnx.load(path, load_external_data=False)
    found = reading(str(path), proto)
    assert found.folder == os.fspath(tmp_path / "m")
    assert found.model is not proto and found.types == {0: _ml("bfloat16")}


def _ml(name: str):
    import ml_dtypes

    return getattr(ml_dtypes, name)


def test_lower_verify_of_a_bfloat16_model_with_external_data(tmp_path, capsys):
    """onnx-lower IN OUT --verify, IN a map with its weights in a data file and a
    bfloat16 output: compared in bfloat16 (it was "A fails on every input set")."""
    from lowering import cli

    w = onnx.numpy_helper.from_array(np.ones(64, np.float32), "w")
    body = h.make_graph(
        [h.make_node("Mul", ["a", "w"], ["c"])],
        "body",
        [h.make_tensor_value_info("a", TensorProto.FLOAT, [64])],
        [h.make_tensor_value_info("c", TensorProto.FLOAT, [64])],
    )
    floats = h.make_sequence_type_proto(h.make_tensor_type_proto(TensorProto.FLOAT, [64]))
    graph = h.make_graph(
        [
            h.make_node("SequenceMap", ["x"], ["s"], body=body),
            h.make_node("ConcatFromSequence", ["s"], ["wide"], axis=0, new_axis=1),
            h.make_node("Cast", ["wide"], ["y"], to=TensorProto.BFLOAT16),
        ],
        "g",
        [h.make_value_info("x", floats)],
        [h.make_tensor_value_info("y", TensorProto.BFLOAT16, ["n", 64])],
        [w],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    source = _save(model, tmp_path / "in", external=True)
    before = _contents(source.parent)
    assert cli.main([str(source), str(tmp_path / "out.onnx"), "--verify"]) == 0
    err = capsys.readouterr().err
    assert "8 ulp (bfloat16)  ok" in err and "of 25 runs compared" in err
    assert _contents(source.parent) == before
