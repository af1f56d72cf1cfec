"""The torch.onnx recipe of the README, on the committed torch exports (issue 26).

``torch.onnx.export(..., dynamo=True)`` returns an ``ONNXProgram`` whose
``.model`` is an onnx_ir model; the step is ``lowering.lower(onnx_program.model)``
(in place), then ``onnx_program.optimize()`` and ``onnx_program.save(path)``.
Without torch, each export is read as the onnx_ir model it was, and the
two methods are what torch 2.13 runs for them: onnxscript's
``torch_2_11.optimize`` and ``ir.save``. The saved model must give torch's
stored outputs.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from tests import matrix_models
from tests.helpers import run, session

DATA = pathlib.Path(__file__).parent / "data" / "torch"
#: The 2026 group, exported by torch.onnx (dynamo) at opset 18, as a user gets them.
EXPORTS = [f"corpus_{name}_opset18" for name in matrix_models.RECENT]


def _program_model(stem: str) -> tuple[ir.Model, dict, list]:
    model = ir.load(DATA / f"{stem}.onnx")
    data = np.load(DATA / f"{stem}.npz")
    feeds = {v.name: data[f"input_{k}"] for k, v in enumerate(model.graph.inputs)}
    expected = [data[f"output_{k}"] for k in range(len(model.graph.outputs))]
    return model, feeds, expected


def _optimize_as_onnx_program_does(model: ir.Model) -> None:
    """``ONNXProgram.optimize()`` in torch 2.13: ``self.model = torch_2_11.optimize(self.model)``."""
    from onnxscript._framework_apis import torch_2_11

    assert torch_2_11.optimize(model) is model


@pytest.mark.slow
@pytest.mark.parametrize("then_optimize", [False, True], ids=["save", "optimize+save"])
@pytest.mark.parametrize("stem", EXPORTS)
def test_lower_the_program_model_in_place_then_save(tmp_path, stem, then_optimize):
    model, feeds, expected = _program_model(stem)
    assert any(n.op_type == "SequenceMap" for n in model.graph)
    assert lowering.lower(model) is model  # in place: the program now holds the lowered model
    if then_optimize:
        _optimize_as_onnx_program_does(model)
    ir.save(model, tmp_path / "model.onnx")  # ONNXProgram.save, weights under 2 GB
    saved = onnx.load(tmp_path / "model.onnx")
    onnx.checker.check_model(saved, full_check=True)
    assert not any(n.op_type == "SequenceMap" for n in saved.graph.node)
    for got, want in zip(run(saved, feeds), expected, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_the_readme_shows_the_recipe():
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    block = readme[readme.index("onnx_program = torch.onnx.export(") :].split("```", 1)[0]
    steps = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert steps == [
        "onnx_program = torch.onnx.export(model, (x,), dynamo=True)",
        "lowering.lower(onnx_program.model)",
        "onnx_program.optimize()",
        'onnx_program.save("model.onnx")',
    ]


#: Every dynamo export of the corpus at opset 18.
OPSET18 = sorted(p.stem for p in DATA.glob("corpus_*_opset18.onnx"))


def _nodes(model: onnx.ModelProto) -> int:
    return sum(1 for _ in _all_nodes(model.graph))


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else attr.graphs:
                yield from _all_nodes(sub)


@pytest.mark.slow
@pytest.mark.parametrize("stem", OPSET18)
def test_lowering_goes_before_onnxslim(stem):
    """onnxslim after lowering gives torch's results and leaves no more nodes than
    onnxslim before it (docs/python-api.md). onnxslim 0.1.98 alone breaks two exports
    (Resize scales in double): the other order is then not compared."""
    onnxslim = pytest.importorskip("onnxslim")
    original = onnx.load(DATA / f"{stem}.onnx")
    _, feeds, expected = _program_model(stem)
    lower_first = onnxslim.slim(lowering.lower(original))
    for got, want in zip(run(lower_first, feeds), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    slimmed = onnxslim.slim(original)
    try:
        session(slimmed)
    except Exception:  # noqa: BLE001 -- onnxslim's own output, which onnxruntime refuses
        return
    slim_first = lowering.lower(slimmed)
    for got, want in zip(run(slim_first, feeds), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert _nodes(lower_first) <= _nodes(slim_first)
