"""Lowered models run on real runtimes that have no SequenceMap.

OpenVINO and tract are the ``runtimes`` test extra. Where one cannot be
installed on the platform, its tests are skipped and say so. The runtime
matrix's models in more runtimes: ``tests/test_runtime_matrix.py``.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest

import lowering
from lowering.runtimes.runners import run_openvino, run_tract
from tests.helpers import all_nodes, assert_same, op_types, run
from tests.matrix_models import synthetic_cases

openvino = pytest.importorskip("openvino", reason="OpenVINO is not installable here")
tract = pytest.importorskip("tract", reason="tract is not installable here")

DATA = pathlib.Path(__file__).parent / "data" / "torch"
NAMES = ["atleast_1d", "atleast_2d", "atleast_3d"]


def _torch_case(name: str, tmp_path: pathlib.Path, **options):
    result = lowering.lower(onnx.load(DATA / f"{name}.onnx"), **options)
    path = tmp_path / f"{name}.onnx"
    onnx.save(result, path)
    data = np.load(DATA / f"{name}.npz")
    inputs = [data[f"input_{k}"] for k in range(4)]
    return result, path, inputs, dict(zip([i.name for i in result.graph.input], inputs))


@pytest.mark.parametrize("name", NAMES)
def test_torch_atleast_has_no_sequence_op_and_runs_in_openvino(name, tmp_path):
    result, path, inputs, feeds = _torch_case(name, tmp_path, optimize=True)
    assert not [op for op in op_types(result) if "Sequence" in op]
    expected = run(result, feeds)
    assert_same(run_openvino(path, inputs), expected)


@pytest.mark.parametrize("name", NAMES)
def test_torch_atleast_with_default_options_runs_in_openvino_and_tract(name, tmp_path):
    """No --optimize: unrolling itself folds torch's rank test (lowering.irutils.static_fold)."""
    result, path, inputs, feeds = _torch_case(name, tmp_path)
    ops = op_types(result)
    assert not [op for op in ops if "Sequence" in op]
    assert not {"If", "Shape", "Size", "CastLike", "Equal", "LessOrEqual"} & set(ops)
    read = {name for node in all_nodes(result) for name in node.input}
    assert [i.name for i in result.graph.initializer if i.name not in read] == []
    expected = [np.load(DATA / f"{name}.npz")[f"output_{k}"] for k in range(4)]
    assert_same(run(result, feeds), expected)
    assert_same(run_openvino(path, inputs), expected)
    assert_same(run_tract(path, inputs), expected)


# Split -> map -> concat, lowered with --target-opset 11: one Scan at opset 11.
SPLIT_MAP_CONCAT = {
    "keepdims_0_merge": (
        """rows = SplitToSequence <axis = 0, keepdims = 0> (x)
           m = SequenceMap <body = body (float[4] r) => (float[4] c) {
                 t = Mul(r, w)
                 c = Relu(t)
               }> (rows)
           y = ConcatFromSequence <axis = 0> (m)""",
        "float[M] y",
    ),
    "keepdims_1_stack": (
        """rows = SplitToSequence <axis = 0> (x)
           m = SequenceMap <body = body (float[1,4] r) => (float[1,4] c) { c = Add(r, w) }> (rows)
           y = ConcatFromSequence <axis = 0, new_axis = 1> (m)""",
        "float[T,1,4] y",
    ),
    "columns_stacked_on_axis_1": (
        """cols = SplitToSequence <axis = 1, keepdims = 0> (x)
           m = SequenceMap <body = body (float[T] col) => (float[T] c) { c = Neg(col) }> (cols)
           y = ConcatFromSequence <axis = 1, new_axis = 1> (m)""",
        "float[T,4] y",
    ),
    "two_mapped_inputs_and_an_extra": (
        """a = SplitToSequence <axis = 0, keepdims = 0> (x)
           b = SplitToSequence <axis = 0, keepdims = 0> (z)
           m = SequenceMap <body = body (float[4] r, float[4] s, float[4] u) => (float[4] c) {
                 rs = Mul(r, s)
                 c = Sub(rs, u)
               }> (a, b, w)
           y = ConcatFromSequence <axis = 0, new_axis = 1> (m)""",
        "float[T,4] y",
    ),
}


@pytest.mark.parametrize("name", list(SPLIT_MAP_CONCAT))
def test_split_map_concat_at_opset_11_runs_in_openvino_and_tract(name, tmp_path):
    body, output = SPLIT_MAP_CONCAT[name]
    source = onnx.parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[T,4] x, float[T,4] z, float[4] w) => ({output}) {{
      {body}
    }}""")
    result = lowering.lower(source, target_opset=11)
    assert {o.domain: o.version for o in result.opset_import}[""] == 11
    assert not [op for op in op_types(result) if "Sequence" in op]
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (3, 4), (4,))]
    feeds = dict(zip(["x", "z", "w"], inputs))
    expected = run(source, feeds)  # onnxruntime on the original
    assert_same(run(result, feeds), expected)
    assert_same(run_openvino(path, inputs), expected)
    assert_same(run_tract(path, inputs), expected)


def test_insert_chain_around_an_unrolled_map_runs_in_openvino_and_tract(tmp_path):
    """paddle2onnx's array_to_tensor after unrolling: inserts fold into one Concat."""
    case = synthetic_cases()["SequenceEmpty insert chain around a map (paddle2onnx)"]
    result = lowering.lower(case.model)
    assert not [op for op in op_types(result) if "Sequence" in op]
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    names = [i.name for i in result.graph.input]
    assert_same(run(result, dict(zip(names, case.inputs))), case.expected)
    assert_same(run_openvino(path, case.inputs), case.expected)
    assert_same(run_tract(path, case.inputs), case.expected)


# Maps over two elements of different shapes whose pool ONNX infers as two
# shapes and every runtime computes as one: unrolled, the copies are pinned
# to it by a Reshape, not hidden in a sequence, so the runtimes without
# sequence ops load and run them. A MaxPool with ceil_mode and an end pad
# ([1,1,4] -> ONNX [1,1,3], computed [1,1,2]) for tract and tinygrad, which
# have no LpPool; an LpPool with ceil_mode and SAME_LOWER ([1,2,3] -> ONNX
# [1,2,2], computed [1,2,1]) for OpenVINO, whose MaxPool keeps the window
# that starts in the end pad (2026.4: [1, 3, -3.4e38]; the pin refuses to load).
_MAX_POOL = "MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1>"
_LP_POOL = 'LpPool <kernel_shape = [2], strides = [3], auto_pad = "SAME_LOWER", ceil_mode = 1>'
PINNED_POOLS = {
    "MaxPool": (((1, 1, 4), (1, 1, 3)), _MAX_POOL),
    "LpPool": (((1, 2, 3), (1, 2, 2)), _LP_POOL),
}


@pytest.mark.parametrize(
    ("runtime", "pool"), [("openvino", "LpPool"), ("tract", "MaxPool"), ("tinygrad", "MaxPool")]
)
def test_copies_onnx_infers_wrong_are_pinned_and_run_without_sequence_ops(runtime, pool, tmp_path):
    pytest.importorskip(runtime)
    from lowering.runtimes.runners import run_tinygrad

    shapes, op = PINNED_POOLS[pool]
    (n, c, _), _ = shapes
    source = onnx.parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 18]>
    g (float{list(shapes[0])} a, float{list(shapes[1])} b) => (float[2,{n},{c},?] y) {{
      s = SequenceConstruct(a, b)
      m = SequenceMap <body = body (float[{n},{c},?] e) => (float[?,?,?] p) {{ p = {op} (e) }}> (s)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }}""")
    result = lowering.lower(source, runtime=runtime)
    assert not [op for op in op_types(result) if "Sequence" in op]
    assert op_types(result).count("Reshape") == 2
    onnx.checker.check_model(result, full_check=True)
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    expected = run(source, dict(zip("ab", inputs)))  # onnxruntime on the original
    assert_same(run(result, dict(zip("ab", inputs))), expected)
    runner = {"openvino": run_openvino, "tract": run_tract, "tinygrad": run_tinygrad}[runtime]
    assert_same(runner(path, inputs), expected)
