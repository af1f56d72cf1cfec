"""What makes the CLI cheap keeps every result the same (issue 25).

Timings are measured by ``scripts/bench.py`` (docs/performance.md), never
here: these are the correctness sides of each saving.

- The vectorizer's constants are shared, one per value per graph
  (:class:`lowering.irutils.constants.SharedConstants`), also by a map that
  was judged but not vectorized, and in subgraphs: every output is unchanged.
- A failed lowering restores its model from the source it was read from
  (:func:`lowering.model_io.reread`), not a snapshot: byte for byte,
  external data included.
- ``--help`` and ``--version`` import neither onnx nor onnx_ir.
"""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering import model_io
from lowering.irutils.ir_versions import MIN_IR_VERSION
from tests.helpers import assert_same, lowered, parse, run, weighted_model

SHARED = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[3]) xs, float[3] a, float[3] b, bool c) =>
  (seq(float[3]) y0, seq(float[3]) y1, seq(float[3]) y2, seq(float[3]) y3, float[N] z) {
  y0 = SequenceMap <body = body (float[3] e) => (float[3] r) { r = Neg(e) }> (xs)
  y1 = SequenceMap <body = body (float[3] e) => (float[3] r) { r = Relu(e) }> (xs)
  parts = SequenceConstruct(a, b, a)
  y2 = SequenceMap <body = body (float[3] e) => (float[3] r) { r = Abs(e) }> (parts)
  y3 = If (c) <
    then_branch = then () => (seq(float[3]) t) {
      t = SequenceMap <body = body (float[3] e) => (float[3] r) { r = Neg(e) }> (xs)
    },
    else_branch = other () => (seq(float[3]) f) {
      f = SequenceMap <body = body (float[3] e) => (float[3] r) { r = Sigmoid(e) }> (xs)
    }>
  m = SequenceMap <body = body (float[3] e) => (float[3] r) { r = Exp(e) }> (xs)
  z = ConcatFromSequence <axis = 0> (m)
}"""


def _fillers_and_slice_bounds(graph: onnx.GraphProto) -> tuple[int, set[str]]:
    """How many fillers (ConstantOfShape) the graph holds, and the values its Slices
    take their starts and ends from."""
    fillers = sum(node.op_type == "ConstantOfShape" for node in graph.node)
    return fillers, {
        name for node in graph.node if node.op_type == "Slice" for name in node.input[1:3]
    }


@pytest.mark.parametrize("n", [1, 3])  # the original concat refuses 0 elements
@pytest.mark.parametrize("c", [True, False])
def test_shared_constants_keep_every_output(n, c):
    model = parse(SHARED)
    rng = np.random.default_rng(n)
    feeds = {
        "xs": [rng.standard_normal(3).astype(np.float32) for _ in range(n)],
        "a": rng.standard_normal(3).astype(np.float32),
        "b": rng.standard_normal(3).astype(np.float32),
        "c": np.array(c),
    }
    result = lowered(model)
    assert_same(run(result, feeds), run(model, feeds))
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(model))
    # y2 is judged vectorizable and unrolled: its judged constants stay unplaced.
    assert sorted(r.strategy for r in rewrites) == ["unroll", *["vectorize"] * 5]
    # One filler and one [0] and [-1] for the Slices per graph, however many maps.
    assert _fillers_and_slice_bounds(result.graph) == (1, {*_slice_names(result.graph)})
    assert len(_slice_names(result.graph)) == 2
    branches = [a.g for n in result.graph.node for a in n.attribute if a.type == a.GRAPH]
    assert len(branches) == 2
    for branch in branches:
        assert _fillers_and_slice_bounds(branch)[0] == 1


def _slice_names(graph: onnx.GraphProto) -> set[str]:
    return _fillers_and_slice_bounds(graph)[1]


def _serialized(model: ir.Model) -> bytes:
    return ir.serde.serialize_model(model).SerializeToString()


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_a_refused_model_is_restored_from_its_source_byte_for_byte(tmp_path, monkeypatch, stream):
    path = weighted_model(tmp_path, 3, 4, real=True)
    if stream:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
        monkeypatch.chdir(tmp_path)
    model, source = model_io.read("-" if stream else str(path))
    before = _serialized(model)
    weights = {n: v.const_value.numpy().copy() for n, v in model.graph.initializers.items()}
    calls = []

    def reread() -> ir.Model:
        calls.append(1)
        return model_io.reread(source)

    # Refused by the last pass, after the map was lowered: the restore is needed.
    with pytest.raises(lowering.LoweringError, match="IR version"):
        lowering.lower_in_place(model, ir_version=MIN_IR_VERSION, restore_from=reread)
    assert calls == [1]
    assert _serialized(model) == before
    for name, value in model.graph.initializers.items():
        assert isinstance(value.const_value, ir.ExternalTensor)
        np.testing.assert_array_equal(value.const_value.numpy(), weights[name])
    lowering.lower_in_place(model)  # and it lowers as the model read would
    assert "SequenceMap" not in {
        n.op_type for n in ir.traversal.RecursiveGraphIterator(model.graph)
    }


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_neither_onnx_nor_onnx_ir(flag):
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['onnx-lower', {flag!r}]\n"
        "try:\n"
        "    runpy.run_module('lowering', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'onnx_ir', 'onnxruntime')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]", done.stdout[-400:]
    assert "onnx-lower" in done.stdout


def test_import_lowering_is_cheap_and_the_api_still_there():
    code = (
        "import sys, lowering\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'onnx_ir')))\n"
        "print(lowering.lower.__module__, lowering.Options.__module__, lowering.__version__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second = done.stdout.splitlines()[-2:]
    assert first == "[]"
    assert second.startswith("lowering.api lowering.options ")


def test_each_vectorized_map_is_built_once(monkeypatch):
    """Judged and applied from one build: the batcher runs once per map."""
    from lowering.maps.strategies.vectorize import batcher

    runs = []
    original = batcher.Batcher.run

    def counted(self):
        runs.append(self.plan.node)
        return original(self)

    monkeypatch.setattr(batcher.Batcher, "run", counted)
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(parse(SHARED)))
    assert len(runs) == len(rewrites) == len(set(runs))
