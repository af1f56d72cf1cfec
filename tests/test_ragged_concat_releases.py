"""A Loop that grows a carried tensor by Concat of pieces that differ in size:
OpenVINO before 2026 keeps only the last piece (lowering.runtimes.profiles.RAGGED_CONCAT).

Two forms write such a Loop: an accumulator loop's ragged concat form
(lowering.loops) and a map's loop form built by Concat (lowering.maps.strategies.loop).
For ``--runtime openvino:2024.6`` (and 2023.3, 2025.4) neither is written:
the map or the list is refused in one line saying why; ``--runtime openvino``
(2024.0 and later) writes it and names the releases that reject it. Pieces of
one size (the stack form, a concat of fixed pieces) are not affected. The slow
tests check the fault is still there in each release (and gone in 2026).
"""

from __future__ import annotations

import itertools
import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.errors import LoweringError
from lowering.runtimes import releases, runners
from lowering.runtimes.profiles import RAGGED_CONCAT
from tests.helpers import cli, parse, release_python

DATA = pathlib.Path(__file__).parent / "data" / "tf"
OLD = ["openvino:2023.3", "openvino:2024.6", "openvino:2025.4"]
REJECTED_BY = [("openvino:2023.3", RAGGED_CONCAT), ("openvino:2024.0-2025.4", RAGGED_CONCAT)]
SAID = "keeps only the last piece of a Loop's carried Concat whose pieces differ in size"

#: A map whose loop form builds its output by Concat of ragged pieces (NonZero of
#: rows split by lengths has no batching rule, and its elements differ in size).
NONZERO_MAP = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N,4] x, int64[K] l) => (int64[2,M] y) {
  parts = SplitToSequence <axis = 0> (x, l)
  ys = SequenceMap <body = body (float[?,4] e) => (int64[2,?] o) { o = NonZero(e) }> (parts)
  y = ConcatFromSequence <axis = 1> (ys)
}"""
X = np.array([[1, 0, 2, 0], [0, 0, 0, 3], [4, 5, 0, 0], [0, 6, 0, 0], [7, 0, 0, 8]], np.float32)
L = np.array([2, 1, 2], np.int64)


def _nonzero_expected() -> np.ndarray:
    bounds = np.concatenate([[0], np.cumsum(L)])
    parts = [np.array(np.nonzero(X[s:e])) for s, e in itertools.pairwise(bounds)]
    return np.concatenate(parts, axis=1)


def _tf(name: str) -> tuple[onnx.ModelProto, list[np.ndarray], list[np.ndarray]]:
    model = onnx.load(DATA / f"lists_{name}.onnx")
    data = np.load(DATA / f"lists_{name}.npz")
    feeds = [data[f"input_{k}"] for k in range(len(model.graph.input))]
    return model, feeds, [data[f"output_{k}"] for k in range(len(model.graph.output))]


@pytest.mark.parametrize("runtime", OLD)
def test_a_ragged_list_is_refused_for_a_release_that_loses_its_pieces(runtime, tmp_path):
    """The list stays a sequence, which OpenVINO cannot run: the command refuses
    in one line, saying why it stays; nothing is written."""
    out = tmp_path / "out.onnx"
    done = cli([str(DATA / "lists_ragged_map.onnx"), str(out), "--runtime", runtime])
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and not out.exists()
    assert f"'map/while_loop:1' stays a sequence: {runtime} {SAID}" in lines[0]


@pytest.mark.parametrize("runtime", OLD)
def test_a_ragged_map_is_refused_for_a_release_that_loses_its_pieces(runtime):
    with pytest.raises(LoweringError) as caught:
        lowering.lower(parse(NONZERO_MAP), runtime=runtime)
    assert f"not a Loop: {runtime} {SAID}" in str(caught.value)


@pytest.mark.parametrize("runtime", OLD)
@pytest.mark.parametrize("name", ["ragged_map_dense", "map_uniform", "array_stack"])
def test_pieces_of_one_size_are_lowered_for_every_release(name, runtime):
    model, _, _ = _tf(name)
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(model), runtime=runtime)
    assert all(RAGGED_CONCAT not in dict(r.rejections).values() for r in rewrites)


def test_openvino_writes_the_ragged_forms_and_names_the_releases_that_reject_them():
    model, _, _ = _tf("ragged_map")
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(model), runtime="openvino")
    (loop,) = [r for r in rewrites if r.strategy == "concat"]
    assert [pair for pair in loop.rejections if pair[1] == RAGGED_CONCAT] == REJECTED_BY
    (mapped,) = lowering.lower_in_place(ir.serde.deserialize_model(parse(NONZERO_MAP)))
    assert mapped.strategy == "loop"
    assert [pair for pair in mapped.rejections if pair[1] == RAGGED_CONCAT] == REJECTED_BY


def _run(column: str, path: pathlib.Path, feeds: list[np.ndarray]) -> list[np.ndarray]:
    if column == "openvino":
        return runners.run_openvino(path, feeds)
    release_python(releases.RELEASES[column])
    (result,) = runners.run_many(column, [(path, feeds)], timeout=120)
    if isinstance(result, Exception):
        raise result
    return result


RELEASES = ["openvino 2023.3", "openvino 2024.6", "openvino 2025.4"]


@pytest.mark.slow
@pytest.mark.parametrize("column", [*RELEASES, "openvino"])
def test_the_fault_is_in_each_release_the_profiles_name_and_not_in_2026(column, tmp_path):
    """The forms ``--runtime openvino`` writes: right in 2026, wrong (or refused)
    in the releases the profiles name; a profile whose release runs them right is
    one to narrow."""
    pytest.importorskip("openvino")
    cases = []
    model, feeds, expected = _tf("ragged_map")
    cases.append((lowering.lower(model, runtime="openvino"), feeds, expected))
    nonzero = lowering.lower(parse(NONZERO_MAP), runtime="openvino")
    cases.append((nonzero, [X, L], [_nonzero_expected()]))
    for k, (lowered, feeds, expected) in enumerate(cases):
        path = tmp_path / f"{k}.onnx"
        onnx.save(lowered, path)
        try:
            actual = _run(column, path, feeds)
            right = all(
                np.asarray(a).shape == w.shape and np.allclose(a, w, rtol=1e-5, atol=1e-6)
                for a, w in zip(actual, expected, strict=True)
            )
        except RuntimeError:
            right = False
        assert right == (column == "openvino"), (column, k)


@pytest.mark.slow
@pytest.mark.parametrize("column", RELEASES)
@pytest.mark.parametrize("name", ["ragged_map_dense", "map_uniform", "array_stack"])
def test_what_each_release_gets_runs_right_there(name, column, tmp_path):
    model, feeds, expected = _tf(name)
    runtime = "openvino:" + column.split()[1]
    path = tmp_path / "lowered.onnx"
    onnx.save(lowering.lower(model, runtime=runtime), path)
    for actual, wanted in zip(_run(column, path, feeds), expected, strict=True):
        np.testing.assert_allclose(np.asarray(actual), wanted, rtol=1e-5, atol=1e-6)
