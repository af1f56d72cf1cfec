"""The dtypes numpy lacks (from ml_dtypes), one table each.

bfloat16 and float8 arrays are floats, compared within ulps, but
onnxruntime takes them only as OrtValues of their ONNX type
(:data:`ML_FLOATS` maps one to the other); int4, uint4, int2 and uint2 are
ints with ml_dtypes' own ``iinfo`` (:data:`SMALL_INTS`). Synthesis,
conversion, comparison and feeding all read these two.
"""

from __future__ import annotations

import ml_dtypes
import onnx

ML_FLOATS = {
    ml_dtypes.bfloat16: onnx.TensorProto.BFLOAT16,
    ml_dtypes.float8_e4m3fn: onnx.TensorProto.FLOAT8E4M3FN,
    ml_dtypes.float8_e4m3fnuz: onnx.TensorProto.FLOAT8E4M3FNUZ,
    ml_dtypes.float8_e5m2: onnx.TensorProto.FLOAT8E5M2,
    ml_dtypes.float8_e5m2fnuz: onnx.TensorProto.FLOAT8E5M2FNUZ,
}


SMALL_INTS = {
    getattr(ml_dtypes, name)
    for name in ("int4", "uint4", "int2", "uint2")
    if hasattr(ml_dtypes, name)
}


def read_as_floats(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[int, type]] | None:
    """A copy of ``model`` whose bfloat16 and float8 tensor outputs are cast to
    float32, and those outputs' positions with their ml_dtypes type; None when
    it has none. onnxruntime's Python API returns no bfloat16 array and float8
    only as raw bytes; the float32 values are exact, and read back as the
    narrow type they are compared in (its ulps, -0.0 equal to +0.0, NaN)."""
    narrow = {onnx_type: ml for ml, onnx_type in ML_FLOATS.items()}
    positions: dict[int, type] = {}
    for index, info in enumerate(model.graph.output):
        if info.type.WhichOneof("value") != "tensor_type":
            continue
        if info.type.tensor_type.elem_type in narrow:
            positions[index] = narrow[info.type.tensor_type.elem_type]
    if not positions:
        return None
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    taken = {name for node in copy.graph.node for name in [*node.input, *node.output]}
    taken |= {info.name for info in [*copy.graph.input, *copy.graph.output]}
    for index in positions:
        info = copy.graph.output[index]
        wide = info.name + "_as_float32"
        while wide in taken:
            wide += "_"
        taken.add(wide)
        copy.graph.node.append(
            onnx.helper.make_node("Cast", [info.name], [wide], to=onnx.TensorProto.FLOAT)
        )
        shape = info.type.tensor_type.shape if info.type.tensor_type.HasField("shape") else None
        replacement = onnx.ValueInfoProto(name=wide)
        replacement.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        if shape is not None:
            replacement.type.tensor_type.shape.CopyFrom(shape)
        info.CopyFrom(replacement)
    return copy, positions
