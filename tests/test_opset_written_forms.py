"""Every form the opset conversion writes is valid and runs where the original ran.

Generated over ops that convert by relabels into versions onnxruntime runs
only for some types (Clip-11, PRelu-9, Softsign-1), ops expanded into ONNX's
function bodies (LayerNormalization, ReduceLogSum-18, HardSwish, Mish,
Celu, Gelu), each on every element type its schema takes that numpy feeds,
at shapes static, dynamic and empty, to opsets 11, 13 and 16. For each:
either the conversion is refused ("cannot declare opset", naming why), or
the output passes ONNX's full check and runs in onnxruntime with the
original's results. These are the families the fuzzer found:

    Clip-13 double -> Clip-11          no onnxruntime kernel for double
    ReduceLogSum-18 int64 -> body      Log of an int64 (Log takes no ints)
    LayerNormalization [5, 0, 1]       the body's Reshape read the 0 as "copy"
    two LayerNormalization bodies      both claimed dim "unk__0": a buffer reused
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.checker
import onnx.shape_inference
import pytest

import lowering
from lowering.opset import schemas
from tests.helpers import parse, session

# op -> its model's body at opset SOURCE, on x of element type {T}
SOURCE = 21
OPS = {
    "Clip": "lo = Constant <value = {T} {{0}}> ()\n  y = Clip(x, lo)",
    "PRelu": "s = Constant <value = {T}[1] {{2}}> ()\n  y = PRelu(x, s)",
    "Softsign": "y = Softsign(x)",
    "HardSwish": "y = HardSwish(x)",
    "Mish": "y = Mish(x)",
    "Celu": "y = Celu <alpha = 2.0> (x)",
    "Gelu": "y = Gelu(x)",
    "ReduceLogSum": (
        "a = Constant <value = int64[0] {{}}> ()\n"
        "  y = ReduceLogSum <keepdims = 0, noop_with_empty_axes = 1> (x, a)"
    ),
    "LayerNormalization": (
        "s = Constant <value = {T}[3] {{1, 2, 3}}> ()\n"
        "  y, m, r = LayerNormalization <axis = -1> (x, s)"
    ),
}
SHAPES = {"static": ("[2,3]", (2, 3)), "dynamic": ("[N,3]", (2, 3)), "empty": ("[N,3]", (0, 3))}
TARGETS = (11, 13, 16)
# The element types numpy feeds and onnxruntime could take.
DTYPES = {
    "float16": np.float16,
    "float": np.float32,
    "double": np.float64,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint32": np.uint32,
    "uint64": np.uint64,
}


def _taken(op: str, opset: int) -> list[str]:
    schema = schemas.schema(op, opset)
    assert schema is not None
    formal = schema.inputs[0].type_str
    allowed = next(
        c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == formal
    )
    return [t for t in DTYPES if f"tensor({t})" in allowed]


PARAMS = [
    pytest.param(op, dtype, shape, target, id=f"{op}-{dtype}-{shape}-{target}")
    for op in OPS
    for dtype in _taken(op, SOURCE)
    for shape in SHAPES
    for target in TARGETS
]


def _typed(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph outputs typed by ONNX's inference, as exporters write them."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi.type for vi in inferred.graph.value_info}
    for output in model.graph.output:
        if output.name in types:
            output.type.CopyFrom(types[output.name])
    return model


def _outputs(op: str) -> str:
    return "y, m, r" if op == "LayerNormalization" else "y"


@pytest.mark.parametrize(("op", "dtype", "shape", "target"), PARAMS)
@pytest.mark.sweep
def test_a_written_form_is_valid_and_runs_where_the_original_ran(op, dtype, shape, target):
    source, body = SOURCE, OPS[op]
    dims, concrete = SHAPES[shape]
    text = (
        f'<ir_version: 10, opset_import: ["" : {source}]>\n'
        f"g ({dtype}{dims} x) => ({_outputs(op)}) {{\n  {body.format(T=dtype)}\n}}"
    )
    original = _typed(parse(text))
    x = np.random.default_rng(0).uniform(0.5, 3, concrete).astype(DTYPES[dtype])
    try:
        want = session(original).run(None, {"x": x})
    except Exception:  # noqa: BLE001 -- onnxruntime runs no form: nothing is promised
        pytest.skip(f"onnxruntime cannot run {op} on {dtype} at opset {source}")
    try:
        converted = lowering.lower(original, target_opset=target)
    except lowering.LoweringError as error:
        message = str(error)
        assert "\n" not in message and "cannot declare opset" in message, message
        assert op in message, message
        return
    onnx.checker.check_model(converted, full_check=True)
    got = session(converted).run(None, {"x": x})
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        tolerance = 1e-2 if b.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)
    for info in converted.graph.value_info:
        dim_params = [d.dim_param for d in info.type.tensor_type.shape.dim if d.dim_param]
        assert not any(p.startswith("unk__") for p in dim_params), (info.name, dim_params)


@pytest.mark.parametrize(
    ("dtype", "target", "expected"),
    [
        ("double", 11, "Clip-11: onnxruntime 1.32.0 has no Clip kernel for double"),
        ("double", 12, None),
    ],
)
def test_a_relabel_onnxruntime_has_no_kernel_for_is_refused(dtype, target, expected):
    text = f"""<ir_version: 10, opset_import: ["" : 21]>
    g ({dtype}[2,3] x) => (y) {{ lo = Constant <value = {dtype} {{0}}> ()
    y = Clip(x, lo) }}"""
    if expected is None:
        lowering.lower(parse(text), target_opset=target)
        return
    with pytest.raises(lowering.LoweringError) as error:
        lowering.lower(parse(text), target_opset=target)
    assert "cannot declare opset" in str(error.value)
    assert expected in str(error.value)
