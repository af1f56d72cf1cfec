"""Going up from opsets 6-10: onnx.version_converter to 11, then the package, in onnxruntime.

Every case (tests/cases/upgrade_models.py, and the models of onnx's backend test
data at opsets below 11, with their expected outputs) is taken to 11, 12, 13
and the latest opset; the result must declare it, pass the full checker and
compute what onnxruntime computes on the original (or the backend test's
expected outputs). Every entry of LIBRARY_UP must be exercised here.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.errors import LoweringError
from lowering.opset.library import LIBRARY_UP, _changes
from tests.cases.upgrade_models import cases, init, model, resize_cases, vi
from tests.helpers import assert_same, run, try_run

TARGETS = (11, 12, 13, onnx.defs.onnx_opset_version())
CASES = dict([*cases(), *resize_cases()])
_BACKEND = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def _backend_models() -> dict[str, str]:
    found = {}
    for path in sorted(glob.glob(os.path.join(_BACKEND, "*", "*", "model.onnx"))):
        proto = onnx.load(path, load_external_data=False)
        opset = {o.domain: o.version for o in proto.opset_import}.get("")
        folder = os.path.dirname(path)
        if (
            opset is not None
            and opset < 11
            and os.path.isdir(os.path.join(folder, "test_data_set_0"))
        ):
            found[f"{os.path.basename(os.path.dirname(folder))}/{os.path.basename(folder)}"] = path
    return found


BACKEND = _backend_models()
#: Backend models that stay refused, and why (the library is wrong on them).
BACKEND_REFUSED = {
    **{
        f"pytorch-converted/test_PReLU_{d}{kind}": "PRelu-6 -> opset 11 by onnx.version_converter"
        for d in ("1d", "2d", "3d")
        for kind in ("", "_multiparam")
    },
}


def _feeds(proto: onnx.ModelProto, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    known = {i.name for i in proto.graph.initializer}
    feeds = {}
    for value in proto.graph.input:
        if value.name in known:
            continue
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        feeds[value.name] = (rng.standard_normal(shape) * 3).astype(dtype)
    return feeds


def _converted(proto: onnx.ModelProto, target: int) -> onnx.ModelProto:
    out = lowering.lower(proto, target_opset=target)
    assert {o.domain: o.version for o in out.opset_import}[""] == target
    onnx.checker.check_model(out, full_check=True)
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.sweep
def test_each_case_goes_up_with_the_same_results(case, target):
    proto = CASES[case]
    feeds = _feeds(proto)
    expected = run(proto, feeds)
    out = _converted(proto, target)
    for got, want in zip(run(out, feeds), expected, strict=True):
        assert_same(got, want)


def _backend_data(folder: str) -> tuple[dict, list]:
    data = os.path.join(folder, "test_data_set_0")
    proto = onnx.load(os.path.join(folder, "model.onnx"))
    known = {i.name for i in proto.graph.initializer}
    names = [i.name for i in proto.graph.input if i.name not in known]
    inputs = sorted(glob.glob(os.path.join(data, "input_*.pb")))
    outputs = sorted(glob.glob(os.path.join(data, "output_*.pb")))
    read = [onnx.numpy_helper.to_array(onnx.load_tensor(p)) for p in inputs]
    return dict(zip(names, read)), [
        onnx.numpy_helper.to_array(onnx.load_tensor(p)) for p in outputs
    ]


@pytest.mark.parametrize("target", (11, 13, onnx.defs.onnx_opset_version()))
@pytest.mark.parametrize("name", sorted(BACKEND))
@pytest.mark.sweep
def test_onnx_backend_models_below_11_go_up_with_their_expected_outputs(name, target):
    path = BACKEND[name]
    feeds, expected = _backend_data(os.path.dirname(path))
    if name in BACKEND_REFUSED:
        with pytest.raises(LoweringError, match=BACKEND_REFUSED[name]):
            lowering.lower(onnx.load(path), target_opset=target)
        return
    ops = {node.op_type for node in onnx.load(path).graph.node}
    if "StringNormalizer" in ops and try_run(onnx.load(path), feeds) is None:
        pytest.skip("onnxruntime does not run the original here (StringNormalizer's locale)")
    out = _converted(onnx.load(path), target)
    for got, want in zip(run(out, feeds), expected, strict=True):
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)


def _keys(proto: onnx.ModelProto) -> set[tuple[str, int]]:
    source = {o.domain: o.version for o in proto.opset_import}[""]
    keys = set()
    for node in proto.graph.node:
        change = _changes(node.op_type, source)
        if change is not None and not change[1]:
            keys.add((node.op_type, change[0]))
    return keys


def test_every_library_entry_is_exercised():
    seen = set().union(*(_keys(p) for p in CASES.values()))
    seen |= set().union(*(_keys(onnx.load(p, load_external_data=False)) for p in BACKEND.values()))
    assert not set(LIBRARY_UP) - seen, sorted(set(LIBRARY_UP) - seen)
    assert seen - set(LIBRARY_UP) == {("PRelu", 6)}  # the one left out: see LIBRARY_UP


def _nearest_down() -> onnx.ModelProto:
    x = vi("x", [1, 2, 4, 5])
    node = onnx.helper.make_node("Resize", ["x", "sc"], ["y"], mode="nearest", name="shrink")
    return model(10, [node], [x], [vi("y", None)], [init("sc", np.float32([1, 1, 0.5, 0.6]))])


def _compress() -> onnx.ModelProto:
    node = onnx.helper.make_node("Compress", ["x", "c"], ["y"], axis=1, name="pick")
    return model(
        9,
        [node],
        [vi("x", [2, 3])],
        [vi("y", None)],
        [init("c", np.array([True, False, True]))],
    )


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (
            _nearest_down,
            (
                "Resize (node 'shrink' in main graph 'g') cannot go up to opset 13: nearest with "
                "scales that are not constants of at least 1"
            ),
        ),
        (
            _compress,
            (
                "Compress (node 'pick' in main graph 'g') cannot go up to opset 13: Compress-9 -> "
                "opset 11 by onnx.version_converter is not among its upward conversions checked"
            ),
        ),
    ],
)
def test_what_is_not_known_right_stays_refused_and_the_model_unchanged(make, reason):
    proto = make()
    model_ir = ir.serde.deserialize_model(proto)
    before = ir.serde.serialize_model(model_ir).SerializeToString()
    with pytest.raises(LoweringError) as raised:
        lowering.lower(model_ir, target_opset=13)
    assert reason in str(raised.value)
    assert "\n" not in str(raised.value)
    assert ir.serde.serialize_model(model_ir).SerializeToString() == before


def test_external_weights_stay_external_and_are_not_copied(tmp_path):
    weights = np.arange(4096, dtype=np.float32).reshape(64, 64) / 100
    node = onnx.helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1, name="g")
    inits = [init("w", weights), init("c", np.float32([0.5]))]
    proto = model(9, [node], [vi("x", [2, 64])], [vi("y", None)], inits)
    feeds = {"x": np.ones((2, 64), np.float32)}
    expected = run(proto, feeds)[0]
    onnx.save(proto, tmp_path / "in.onnx", save_as_external_data=True, location="in.bin")
    loaded = ir.load(tmp_path / "in.onnx")
    tensor = loaded.graph.initializers["w"].const_value
    assert isinstance(tensor, ir.ExternalTensor)
    lowering.lower(loaded, target_opset=13)
    assert loaded.graph.initializers["w"].const_value is tensor
    assert loaded.opset_imports[""] == 13
    ir.save(loaded, tmp_path / "out.onnx", external_data="out.bin")
    assert os.path.getsize(tmp_path / "out.bin") == weights.nbytes
    out = onnx.load(tmp_path / "out.onnx")
    assert_same(run(out, feeds)[0], expected)
