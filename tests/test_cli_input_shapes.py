"""``--input-shape NAME:D,D,...`` (``input_shapes=`` from Python): fixed input dims
reach the proof and the form choice, OUT declares them, ``--verify`` feeds only
them; contradictions are usage errors; comparison options need ``--verify``."""

from __future__ import annotations

import pathlib
import subprocess

import numpy as np
import onnx
import pytest

import lowering
from lowering.options import InputShapeError
from lowering.verify.cli import COMPARISON_FLAGS
from tests.cases.input_shapes import SEQUENCE_IN, SPLIT_MAP, H
from tests.helpers import cli, op_types, parse, run


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return cli(list(args), text=True)


def _verify(*args: object) -> subprocess.CompletedProcess[str]:
    return cli(list(args), module="lowering.verify", text=True)


def _saved(folder: pathlib.Path, text: str, name: str = "in.onnx") -> pathlib.Path:
    path = folder / name
    onnx.save(parse(text), path)
    return path


def _oracle(x: np.ndarray) -> np.ndarray:
    rows = []
    for row in x:
        scattered = row.copy()
        scattered[[1, 3]] = [0.5, 2.0]
        rows.append(scattered * row)
    return np.concatenate(rows)


@pytest.mark.parametrize("runtime", ["tvm", "tinygrad"])
def test_a_map_refused_for_unknown_shapes_is_lowered_once_they_are_fixed(runtime, tmp_path):
    source = _saved(tmp_path, SPLIT_MAP)
    out = tmp_path / "out.onnx"
    refused = _cli(source, out, "--runtime", runtime)
    assert refused.returncode == 1 and not out.exists()
    assert "its length is known only at run time" in refused.stderr
    done = _cli(source, out, "--runtime", runtime, "--input-shape", "x:5,4")
    assert done.returncode == 0, done.stderr
    assert "unroll, its input has 5 elements" in done.stderr
    assert f"{out} declares its input 'x' [5,4]" in done.stderr
    lowered = onnx.load(out)
    assert not {"Loop", "Scan", "SequenceMap", "SplitToSequence"} & set(op_types(lowered))
    dims = [d.dim_value for d in lowered.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [5, 4]
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_array_equal(run(lowered, {"x": x})[0], _oracle(x))
    # against the original, in onnxruntime and in OpenVINO: the runs feed x as [5,4] only
    for verifier in ("onnxruntime", "openvino"):
        compared = _verify(source, out, "--runtime", verifier, "--runs", "4")
        assert compared.returncode == 0, compared.stderr


def test_verify_feeds_only_the_fixed_dims(tmp_path):
    source = _saved(tmp_path, SPLIT_MAP)
    out = tmp_path / "out.onnx"
    done = _cli(source, out, "--input-shape", "x:3,4", "--verify", "--runs", "6")
    assert done.returncode == 0, done.stderr
    assert "(6 runs)" in done.stderr


def test_python_api_fixes_the_same_dims():
    model = parse(SPLIT_MAP)
    with pytest.raises(lowering.LoweringError):
        lowering.lower(model, runtime="tvm")
    lowered = lowering.lower(model, runtime="tvm", input_shapes={"x": [2, 4]})
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(run(lowered, {"x": x})[0], _oracle(x))
    with pytest.raises(InputShapeError, match=r"input_shapes 'x': 'x' is declared \[T,4\]"):
        lowering.lower(model, input_shapes={"x": (2, 5)})
    with pytest.raises(ValueError, match="input_shapes must give whole numbers"):
        lowering.lower(model, input_shapes={"x": (-1, 4)})


def test_a_sequence_inputs_element_dims_are_fixed(tmp_path):
    source = _saved(tmp_path, SEQUENCE_IN)
    out = tmp_path / "out.onnx"
    done = _cli(source, out, "--input-shape", "s:2,4", "--verify", "--runs", "4")
    assert done.returncode == 0, done.stderr
    element = onnx.load(out).graph.input[0].type.sequence_type.elem_type.tensor_type
    assert [d.dim_value for d in element.shape.dim] == [2, 4]


@pytest.mark.parametrize(
    ("model", "given", "said"),
    [
        (SPLIT_MAP, "x:5,4,1", "'x' is declared [T,4], of rank 2, not 3"),
        (SPLIT_MAP, "x:5,3", "'x' is declared [T,4]: dim 1 is 4, not 3"),
        (SPLIT_MAP, "y:5,4", "the model has no input 'y' (its inputs: 'x')"),
        (SEQUENCE_IN, "s:2,5", "'s' is declared [?,4]: dim 1 is 4, not 5"),
        (
            H + "\ng (float[3] w) => (float[3] z) <float[3] w = {1.0, 2.0, 3.0}> { z = Neg(w) }",
            "w:3",
            None,
        ),
        (
            H + "\ng (float[?] w) => (float[?] z) <float[3] w = {1.0, 2.0, 3.0}> { z = Neg(w) }",
            "w:4",
            "'w' defaults to an initializer [3]: dim 0 is 3, not 4",
        ),
        (
            H + "\ng (optional(float[3]) o) => (bool z) { z = OptionalHasElement(o) }",
            "o:3",
            "'o' is of type Optional(Tensor(FLOAT)): only tensors and sequences of tensors",
        ),
    ],
)
def test_a_contradicting_shape_is_a_usage_error_in_one_line(model, given, said, tmp_path):
    source = _saved(tmp_path, model)
    out = tmp_path / "out.onnx"
    done = _cli(source, out, "--input-shape", given)
    if said is None:  # what the model declares already
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 2 and not out.exists()
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"onnx-lower: error: {source}: --input-shape {given}: {said}")


@pytest.mark.parametrize("given", ["x", "x:-1,4", ":3", "x:a,4", "x:4,"])
def test_a_malformed_shape_is_a_usage_error(given, tmp_path):
    done = _cli(_saved(tmp_path, SPLIT_MAP), tmp_path / "out.onnx", "--input-shape", given)
    assert done.returncode == 2
    assert "expected NAME:D,D,... with whole numbers of at least 0" in done.stderr


def test_a_name_given_twice_is_a_usage_error(tmp_path):
    source = _saved(tmp_path, SPLIT_MAP)
    done = _cli(source, tmp_path / "o.onnx", "--input-shape", "x:1,4", "--input-shape", "x:2,4")
    assert done.returncode == 2 and "--input-shape x: given twice" in done.stderr


def test_a_scalar_is_fixed_by_name_and_colon(tmp_path):
    source = _saved(tmp_path, H + "\ng (float x) => (float z) { z = Neg(x) }")
    done = _cli(source, tmp_path / "out.onnx", "--input-shape", "x:")
    assert done.returncode == 0, done.stderr


VALUES = {
    "--inputs": "runs.npz",
    "--runs": "3",
    "--seed": "1",
    "--rtol": "0.1",
    "--atol": "0.1",
    "--ulps": "2",
    "--dim": "T=3",
    "--val-range": "-1,1",
    "--timeout": "5",
    "--save-inputs": "inputs.npz",
    "--replay-dir": ".",
}


@pytest.mark.parametrize("flag", list(COMPARISON_FLAGS))
def test_a_comparison_option_without_verify_is_refused(flag, tmp_path):
    source = _saved(tmp_path, SPLIT_MAP)
    out = tmp_path / "out.onnx"
    done = _cli(source, out, flag, VALUES[flag])
    assert done.returncode == 2 and not out.exists()
    assert f"{flag} compares IN and OUT: give --verify too" in done.stderr


def test_every_comparison_option_has_a_case():
    assert set(VALUES) == set(COMPARISON_FLAGS)


def test_a_dim_that_contradicts_the_fixed_shape_is_refused(tmp_path):
    source = _saved(tmp_path, SPLIT_MAP)
    out = tmp_path / "out.onnx"
    done = _cli(source, out, "--input-shape", "x:5,4", "--verify", "--dim", "T=3")
    assert done.returncode == 2 and out.exists()  # OUT was written; the comparison refused
    assert "cannot use the inputs: --dim T=3: B declares T=5 on its inputs" in done.stderr
    agreeing = _cli(source, out, "--input-shape", "x:5,4", "--verify", "--dim", "T=5")
    assert agreeing.returncode == 0, agreeing.stderr
