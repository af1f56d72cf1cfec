"""``--runtime NAME``: forms each runtime runs, refusals, and what the summary says.

Each model below is lowered for every runtime in :data:`lowering.runtimes.profiles.RUNTIMES`.
For each pair the table says what must happen: a strategy, or a refusal. Every
output is checked against numpy in onnxruntime, must hold none of the ops the
runtime lacks, and runs in OpenVINO and tract (the ``runtimes`` extra) where
the output is for them.
"""

from __future__ import annotations

import subprocess
import typing

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.options import RuntimeName
from lowering.rewrites import spelled
from lowering.runtimes.child import compile_openvino
from lowering.runtimes.profiles import RUNTIMES, rejections
from tests.helpers import all_nodes, assert_same, cli, run

H = '<ir_version: 8, opset_import: ["" : 17]>'

# ScatterElements has no batching rule: the body needs a loop, or unrolling.
BODY = """body (float[4] r) => (float[4] c) {
        at = Constant <value = int64[2] {1, 3}> ()
        new = Constant <value = float[2] {0.5, 2.0}> ()
        s = ScatterElements <axis = 0> (r, at, new)
        c = Mul(s, r)
      }"""

MODELS = {
    # Split -> map -> read as a stack: SequenceAt, SequenceLength and a concat.
    "split, read back": H
    + f"""
g (float[T,4] x) => (float[4] y, float[T,4] z) {{
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = {BODY}> (rows)
  last = Constant <value = int64 {{-1}}> ()
  at = SequenceAt(m, last)
  n = SequenceLength(m)
  nf = Cast <to = 1> (n)
  y = Mul(at, nf)
  z = ConcatFromSequence <axis = 0, new_axis = 1> (m)
}}""",
    # Split -> map -> concat.
    "split, concat": H
    + f"""
g (float[T,4] x) => (float[N] z) {{
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = {BODY}> (rows)
  z = ConcatFromSequence <axis = 0> (m)
}}""",
    # 20 static elements, more than --max-unroll.
    "static 20": H
    + f"""
g (float[20,4] x) => (float[20,4] z) {{
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = {BODY}> (rows)
  z = ConcatFromSequence <axis = 0, new_axis = 1> (m)
}}""",
    # A SequenceConstruct read by a map: a loop would read it with SequenceAt.
    "construct 3": H
    + f"""
g (float[4] x) => (float[3,4] z) {{
  x2 = Neg(x)
  x3 = Abs(x)
  rows = SequenceConstruct(x, x2, x3)
  m = SequenceMap <body = {BODY}> (rows)
  z = ConcatFromSequence <axis = 0, new_axis = 1> (m)
}}""",
    # A batchable body whose result is also read as a sequence (by SequenceInsert).
    "split, inserted": H
    + """
g (float[T,4] x, float[4] t) => (float[M,4] z) {
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = body (float[4] r) => (float[4] c) { c = Relu(r) }> (rows)
  longer = SequenceInsert(m, t)
  z = ConcatFromSequence <axis = 0, new_axis = 1> (longer)
}""",
    # Elements of different shapes: only the general Loop over sequences.
    "ragged": H
    + """
g (float[T,4] x, int64[T] k) => (float[M] z) {
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  ks = SplitToSequence <axis = 0, keepdims = 0> (k)
  m = SequenceMap <body = body (float[4] r, int64 kk) => (float[L] c) {
        zero = Constant <value = int64[1] {0}> ()
        one = Constant <value = int64[1] {1}> ()
        end = Unsqueeze(kk, zero)
        c = Slice(r, zero, end)
      }> (rows, ks)
  z = ConcatFromSequence <axis = 0> (m)
}""",
}

# The ragged map's elements returned as a sequence: its loop builds one.
RAGGED_RETURNED = (
    MODELS["ragged"]
    .replace("=> (float[M] z)", "=> (seq(float[L]) m)")
    .replace("  z = ConcatFromSequence <axis = 0> (m)\n", "")
)

# Models that use sequence ops outside the map, whatever it becomes.
MODEL_READS_SEQUENCES = {"split, inserted"}

NO_LOOP = "refused: runs neither Loop nor Scan"
NO_SEQUENCES = "refused: the map needs a Loop over sequences"

# What lowering each model for each runtime does.
EXPECTED: dict[str, dict[str, str]] = {
    "split, read back": {
        "onnxruntime": "uniform",
        "openvino": "uniform",
        "tract": "scan",
        "mnn": "uniform",
        "tvm": NO_LOOP,
        "tinygrad": NO_LOOP,
        "iree": NO_LOOP,
        "generic": NO_LOOP,
    },
    "split, concat": {
        "onnxruntime": "scan",
        "openvino": "scan",
        "tract": "scan",
        "mnn": "uniform",
        "tvm": NO_LOOP,
        "tinygrad": NO_LOOP,
        "iree": NO_LOOP,
        "generic": NO_LOOP,
    },
    "static 20": {
        "onnxruntime": "scan",
        "openvino": "scan",
        "tract": "scan",
        "mnn": "uniform",
        "tvm": "unroll",
        "tinygrad": "unroll",
        "iree": "unroll",
        "generic": "unroll",
    },
    "construct 3": {name: "unroll" for name in RUNTIMES},
    # The model reads a sequence itself: those without sequence ops cannot run it anyway.
    "split, inserted": {
        "onnxruntime": "vectorize",
        "openvino": "vectorize",
        "tract": "vectorize",
        "mnn": "vectorize",
        "tvm": "vectorize",
        "tinygrad": "vectorize",
        "iree": "vectorize",
        "generic": "vectorize",
    },
    # Read only by a concat, the output is built by the Loop without sequences.
    "ragged": {
        "onnxruntime": "loop",
        "openvino": "loop",
        "tract": NO_SEQUENCES,
        "mnn": "loop",
        "tvm": NO_LOOP,
        "tinygrad": NO_LOOP,
        "iree": NO_LOOP,
        "generic": NO_LOOP,
    },
}


def _feeds(name: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(len(name))
    if name == "construct 3":
        return {"x": rng.standard_normal(4).astype(np.float32)}
    if name == "split, inserted":
        return {
            "x": rng.standard_normal((5, 4)).astype(np.float32),
            "t": rng.standard_normal(4).astype(np.float32),
        }
    if name == "ragged":
        return {
            "x": rng.standard_normal((5, 4)).astype(np.float32),
            "k": np.array([0, 4, 2, 1, 3], np.int64),
        }
    rows = 20 if name == "static 20" else 5
    return {"x": rng.standard_normal((rows, 4)).astype(np.float32)}


def _oracle(name: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The map as a list comprehension."""
    if name == "ragged":
        return [np.concatenate([r[:k] for r, k in zip(feeds["x"], feeds["k"])])]
    if name == "split, inserted":
        return [np.stack([*np.maximum(feeds["x"], 0), feeds["t"]])]
    x = feeds["x"]
    rows = [x, -x, np.abs(x)] if name == "construct 3" else list(x)
    mapped = [_scattered(r) * r for r in rows]
    if name == "split, read back":
        return [mapped[-1] * np.float32(len(mapped)), np.stack(mapped)]
    if name == "split, concat":
        return [np.concatenate(mapped)]
    return [np.stack(mapped)]


def _scattered(row: np.ndarray) -> np.ndarray:
    row = row.copy()
    row[[1, 3]] = [0.5, 2.0]
    return row


def _ops(model: onnx.ModelProto) -> set[str]:
    return {node.op_type for node in all_nodes(model)}


@pytest.mark.parametrize("runtime", list(RUNTIMES))
@pytest.mark.parametrize("name", list(MODELS))
def test_each_runtime_gets_a_form_it_runs_or_a_refusal(name, runtime, tmp_path):
    model = onnx.parser.parse_model(MODELS[name])
    onnx.checker.check_model(model, full_check=True)
    expected = EXPECTED[name][runtime]
    if expected.startswith("refused: "):
        with pytest.raises(lowering.LoweringError) as refusal:
            lowering.lower(model, runtime=runtime)
        assert f"--runtime {runtime}: " in str(refusal.value)
        assert expected.removeprefix("refused: ") in str(refusal.value)
        return
    result = lowering.lower(model, runtime=runtime)
    ir_model = ir.serde.deserialize_model(model)
    rewrites = lowering.lower_in_place(ir_model, runtime=runtime)
    assert [r.strategy for r in rewrites if r.op_type == "SequenceMap"] == [expected]
    onnx.checker.check_model(result, full_check=True)
    lacks = RUNTIMES[runtime].lacks
    if name in MODEL_READS_SEQUENCES:
        assert _ops(result) & lacks <= _ops(model) & lacks
    else:
        assert not _ops(result) & lacks
    feeds = _feeds(name)
    assert_same(run(result, feeds), _oracle(name, feeds))
    path = tmp_path / "out.onnx"
    onnx.save(result, path)
    if runtime in ("openvino", "generic") and not _ops(result) & RUNTIMES["openvino"].lacks:
        pytest.importorskip("openvino")
        compiled = compile_openvino(path)
        outputs = compiled(list(feeds.values()))
        assert_same([np.asarray(v) for v in outputs.values()], _oracle(name, feeds))
    if runtime in ("tract", "generic") and not _ops(result) & RUNTIMES["tract"].lacks:
        tract = pytest.importorskip("tract")
        runnable = tract.onnx().load(str(path)).into_model().into_runnable()
        outputs = runnable.run(list(feeds.values()))
        assert_same([t.to_numpy() for t in outputs], _oracle(name, feeds))


@pytest.mark.parametrize("name", list(MODELS))
def test_the_default_is_onnxruntime(name):
    model = onnx.parser.parse_model(MODELS[name])
    default = lowering.lower(model)
    assert default == lowering.lower(model, runtime="onnxruntime")


def test_each_map_says_which_runtimes_reject_its_form():
    """A map that keeps a loop names who cannot run it; a loop-free one names nobody."""
    looped = ir.serde.deserialize_model(onnx.parser.parse_model(RAGGED_RETURNED))
    (rewrite,) = lowering.lower_in_place(looped)
    assert rewrite.rejected_by == spelled(rejections({"Loop", "SequenceInsert", "SequenceEmpty"}))
    assert rewrite.rejected_by == [
        "openvino (SequenceEmpty)",
        "tract (Loop)",
        "tvm (Loop)",
        "tinygrad (Loop)",
        "iree (Loop)",
    ]
    assert "so rejected by openvino (SequenceEmpty), tract (Loop), tvm" in rewrite.explained()
    unrolled = ir.serde.deserialize_model(onnx.parser.parse_model(MODELS["construct 3"]))
    (rewrite,) = lowering.lower_in_place(unrolled)
    assert rewrite.strategy == "unroll" and rewrite.rejected_by == []
    assert rewrite.explained() == rewrite.reason


def test_the_api_type_names_every_runtime():
    assert set(typing.get_args(RuntimeName)) == set(RUNTIMES)


def test_an_unknown_runtime_is_the_callers_mistake():
    model = onnx.parser.parse_model(MODELS["ragged"])
    with pytest.raises(ValueError, match="runtime must be one of onnxruntime, openvino"):
        lowering.lower(model, runtime="tensorrt")  # type: ignore[arg-type]


def _cli(*args) -> subprocess.CompletedProcess[str]:
    return cli(list(args), text=True)


def test_cli_refuses_in_one_line_and_rejects_unknown_names(tmp_path):
    source = tmp_path / "in.onnx"
    onnx.save(onnx.parser.parse_model(MODELS["ragged"]), source)
    out = tmp_path / "out.onnx"
    refused = _cli(source, out, "--runtime", "tvm")
    assert refused.returncode == 1 and not out.exists()
    (line,) = refused.stderr.splitlines()
    assert line.startswith(f"onnx-lower: error: {source}: node ")
    assert "(SequenceMap) in main graph 'g': --runtime tvm: tvm runs neither" in line
    unknown = _cli(source, out, "--runtime", "tensorrt")
    assert unknown.returncode == 2 and "--runtime must be one of" in unknown.stderr
    assert "not 'tensorrt'" in unknown.stderr
    onnx.save(onnx.parser.parse_model(RAGGED_RETURNED), source)
    summary = _cli(source, out)
    assert summary.returncode == 0
    assert "not loop-free or sequence-free, so rejected by openvino (SequenceEmpty), tract" in (
        summary.stderr + summary.stdout
    )


TRACT_MIXED_READERS = {
    # Concats along different axes: one stack along 0, a Transpose for the other.
    "stack along 0 and 1": (
        "g (float[T,4] x) => (float[T,4] a, float[4,T] b)",
        """a = ConcatFromSequence <axis = 0, new_axis = 1> (m)
  b = ConcatFromSequence <axis = 1, new_axis = 1> (m)""",
        lambda rows: [np.stack(rows), np.stack(rows, axis=1)],
    ),
    "merge and stack along 1": (
        "g (float[T,4] x) => (float[M] a, float[4,T] b)",
        """a = ConcatFromSequence <axis = 0> (m)
  b = ConcatFromSequence <axis = 1, new_axis = 1> (m)""",
        lambda rows: [np.concatenate(rows), np.stack(rows, axis=1)],
    ),
    "at and stack along 1": (
        "g (float[T,4] x, int64 i) => (float[4] a, float[4,T] b)",
        """a = SequenceAt(m, i)
  b = ConcatFromSequence <axis = 1, new_axis = 1> (m)""",
        lambda rows: [rows[-2], np.stack(rows, axis=1)],
    ),
}


@pytest.mark.parametrize("name", list(TRACT_MIXED_READERS))
def test_a_scan_for_tract_serves_readers_of_every_kind_and_axis(name, tmp_path):
    signature, readers, oracle = TRACT_MIXED_READERS[name]
    model = onnx.parser.parse_model(
        H
        + f"""
{signature} {{
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = {BODY}> (rows)
  {readers}
}}"""
    )
    (rewrite,) = lowering.lower_in_place(ir.serde.deserialize_model(model), runtime="tract")
    assert rewrite.strategy == "scan"
    result = lowering.lower(model, runtime="tract")
    assert not _ops(result) & RUNTIMES["tract"].lacks
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    feeds = {"x": x, "i": np.array(-2, np.int64)} if "int64 i" in signature else {"x": x}
    expected = oracle([_scattered(r) * r for r in x])
    assert_same(run(result, feeds), expected)
    tract = pytest.importorskip("tract")
    path = tmp_path / "out.onnx"
    onnx.save(result, path)
    runnable = tract.onnx().load(str(path)).into_model().into_runnable()
    assert_same([t.to_numpy() for t in runnable.run(list(feeds.values()))], expected)


@pytest.mark.parametrize("runtime", ["openvino", "tract", "mnn"])
def test_a_static_map_that_would_need_a_loop_the_runtime_lacks_is_unrolled(runtime):
    """20 ragged elements (past --max-unroll): no loop form runs in tract, unrolling does;
    OpenVINO and MNN run the Loop that concatenates without sequences."""
    model = onnx.parser.parse_model(
        MODELS["ragged"].replace("float[T,4] x, int64[T] k", "float[20,4] x, int64[20] k")
    )
    (rewrite,) = lowering.lower_in_place(ir.serde.deserialize_model(model), runtime=runtime)
    expected = "unroll" if runtime == "tract" else "loop"
    assert rewrite.strategy == expected
    result = lowering.lower(model, runtime=runtime)
    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.standard_normal((20, 4)).astype(np.float32),
        "k": rng.integers(0, 5, 20).astype(np.int64),
    }
    assert_same(run(result, feeds), _oracle("ragged", feeds))
    if runtime != "mnn":
        assert not _ops(result) & RUNTIMES[runtime].lacks
