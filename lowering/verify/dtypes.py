"""The dtypes numpy lacks (from ml_dtypes), one table each.

bfloat16 and float8 arrays are floats, compared within ulps, but
onnxruntime takes them only as OrtValues of their ONNX type
(:data:`ML_FLOATS` maps one to the other) and returns them as bytes or not
at all (:mod:`lowering.verify.narrow` reads them); int4, uint4, int2 and
uint2 are ints with ml_dtypes' own ``iinfo`` (:data:`SMALL_INTS`).
Synthesis, conversion, comparison and feeding all read these two.
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
