"""A body's symbolic dims stay in the body (issue 34, item 4).

onnxscript declares a SequenceMap body over chunks ``[R, 4]``: R is said of
one element, in the body's own names. The lowering used to copy it onto
the stack a vectorized map computes (``float[?, R, 3]`` for ``[N, 1, 3]``),
and tract, which unifies dims by name, refused the model ("Impossible to
unify Val(1) with Sym(R)"). The types a rewrite copies out of a body come
from its plan, which drops their symbolic dims
(:func:`lowering.maps.plan.plan_map`). Each model is lowered in every
form, for onnxruntime and for tract, and checked against the original in
onnxruntime, and in tract where the output is for it.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from lowering.runtimes.runners import run_tract
from tests.helpers import lowered, parse, run

H = '<ir_version: 8, opset_import: ["" : 17]>'

BODIES = {
    "relu of matmul": "p = MatMul(e, w)\n r = Relu(p)",
    "add": "b = Constant <value = float[4] {1, -2, 3, -4}> ()\n r = Add(e, b)",
    "transpose twice": "t = Transpose <perm = [1, 0]> (e)\n"
    " v = Transpose <perm = [1, 0]> (w)\n u = MatMul(v, t)\n r = Transpose <perm = [1, 0]> (u)",
}
SPLITS = {
    "rows kept": "s = SplitToSequence <axis = 0, keepdims = 1> (x)",
    "chunks of 2": "two = Constant <value = int64 {2}> ()\n s = SplitToSequence <axis = 0> (x, two)",
}


def _model(body: str, split: str) -> onnx.ModelProto:
    out = "float[R,3] r" if "MatMul" in body else "float[R,4] r"
    return parse(f"""{H}
    g (float[N,4] x, float[4,3] w) => (float[?,?] z) {{
      {split}
      m = SequenceMap <body = body (float[R,4] e) => ({out}) {{
            {body}
          }}> (s)
      z = ConcatFromSequence <axis = 0> (m)
    }}""")


def _main_graph_dims(model: onnx.ModelProto) -> set[str]:
    """The symbolic dims declared outside every body."""
    infos = [*model.graph.value_info, *model.graph.output]
    return {
        d.dim_param
        for info in infos
        if info.type.HasField("tensor_type")
        for d in info.type.tensor_type.shape.dim
        if d.dim_param
    }


FEEDS = [
    {
        "x": np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) - 3,
        "w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3),
    }
    for rows in (1, 4, 5)
]


@pytest.mark.parametrize("strategy", ["auto", "loop"])
@pytest.mark.parametrize("split", list(SPLITS))
@pytest.mark.parametrize("body", list(BODIES))
def test_no_body_dim_leaves_the_body(body, split, strategy):
    model = _model(BODIES[body], SPLITS[split])
    result = lowered(model, strategy=strategy)
    assert "R" not in _main_graph_dims(result)
    for feeds in FEEDS:
        np.testing.assert_allclose(run(result, feeds)[0], run(model, feeds)[0], rtol=1e-6)


@pytest.mark.parametrize("body", list(BODIES))
def test_tract_runs_the_lowered_map(tmp_path, body):
    """(Chunks of 2 split the rows unevenly: tract, with no Loop, runs none of their forms.)"""
    pytest.importorskip("tract")
    model = _model(BODIES[body], SPLITS["rows kept"])
    result = lowered(model, runtime="tract")
    assert "R" not in _main_graph_dims(result)
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    for feeds in FEEDS:
        got = run_tract(path, [feeds["x"], feeds["w"]])[0]
        np.testing.assert_allclose(got, run(model, feeds)[0], rtol=1e-6)


def test_each_graph_has_its_interface_dims_read_once(monkeypatch):
    """The maps of one run share what each graph's inputs declare: a graph of
    k inputs and k maps is read once, not k times (planning was quadratic).
    N, declared by the graph's inputs, is the interface's and stays."""
    from lowering.maps import plan

    owners: list[object] = []
    read = plan._interface_dims

    def counted(owner):
        owners.append(owner)
        return read(owner)

    monkeypatch.setattr(plan, "_interface_dims", counted)
    maps = "\n".join(
        f"y{i} = SequenceMap <body = b{i} (float[N] e) => (float[N] r) {{ r = Neg(e) }}> (x{i % 2})"
        for i in range(3)
    )
    model = parse(f"""{H}
    g (seq(float[N]) x0, seq(float[N]) x1, float[N] t) =>
      (seq(float[N]) y0, seq(float[N]) y1, seq(float[N]) y2) {{
      {maps}
    }}""")
    result = lowered(model)
    assert len(owners) == 1
    for output in result.graph.output:
        dims = output.type.sequence_type.elem_type.tensor_type.shape.dim
        assert [d.dim_param for d in dims] == ["N"]
