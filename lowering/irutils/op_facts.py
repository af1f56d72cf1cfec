"""Facts about ONNX ops that more than one part of the package needs, in one place.

The default domain is spelled "" or "ai.onnx"; Reduce ops, the ops whose
axes moved from an attribute to an input (and when), the sequence and loop
ops, the ops whose output has their first input's element type, and the
ops whose output shapes follow from their inputs' shapes.
"""

from __future__ import annotations

import onnx_ir as ir


def is_onnx_domain(domain: str) -> bool:
    """The default domain, which may be spelled "" or "ai.onnx"."""
    return domain in ("", "ai.onnx")


def is_onnx_op(node: ir.Node, op_type: str) -> bool:
    """True for a default-domain op, which may be spelled "" or "ai.onnx"."""
    return node.op_type == op_type and is_onnx_domain(node.domain)


#: The Reduce ops: their axes moved from an attribute to an optional input
#: (ReduceSum at 13, the others at 18).
REDUCE_OPS = frozenset(
    [
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
        "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    ]
)  # fmt: skip

#: The opset from which each op takes its axes (Split: its sizes) as an input.
AXES_INPUT_SINCE = {
    "Squeeze": 13,
    "Unsqueeze": 13,
    "Split": 13,
    **{op: 13 if op == "ReduceSum" else 18 for op in REDUCE_OPS},
}

#: The loop ops, and the sequence ops: what a lowered map may use that some runtime lacks.
LOOP_OPS = ("Loop", "Scan")
SEQUENCE_OPS = (
    "SequenceEmpty",
    "SequenceConstruct",
    "SequenceInsert",
    "SequenceErase",
    "SequenceAt",
    "SequenceLength",
    "SplitToSequence",
    "ConcatFromSequence",
)

#: Ops whose (first) output has the element type of their first input: an
#: untyped value made by one of them has the type its input has.
SAME_DTYPE_OPS = (
    frozenset(
        [
            "Abs", "Acos", "Acosh", "Add", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Clip",
            "Concat", "Cos", "Cosh", "CumSum", "Div", "Dropout", "Elu", "Erf", "Exp", "Expand",
            "Flatten", "Floor", "Gather", "GatherElements", "Gemm", "HardSigmoid", "HardSwish",
            "Hardmax", "Identity", "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax",
            "LpNormalization", "MatMul", "Max", "Mean", "Min", "Mish", "Mod", "Mul", "Neg",
            "Pad", "Pow", "PRelu", "Reciprocal", "Relu", "Reshape", "Round", "Selu", "Sigmoid",
            "Sign", "Sin", "Sinh", "Slice", "Softmax", "Softplus", "Softsign", "Split", "Sqrt",
            "Squeeze", "Sub", "Sum", "Tan", "Tanh", "Tile", "TopK", "Transpose", "Trilu",
            "Unsqueeze",
        ]
    )
    | REDUCE_OPS
)  # fmt: skip

#: Ops whose output shapes follow from their inputs' shapes and attributes.
SHAPE_FROM_SHAPES_OPS = frozenset(
    [
        "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan",
        "Atanh", "AveragePool", "BatchNormalization", "BitShift", "BitwiseAnd", "BitwiseNot",
        "BitwiseOr", "BitwiseXor", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Concat",
        "Constant", "Conv", "ConvTranspose", "Cos", "Cosh", "CumSum", "DepthToSpace", "Det",
        "Div", "Dropout", "Einsum", "Elu", "Equal", "Erf", "Exp", "Flatten", "Floor", "Gather",
        "GatherElements", "GatherND", "Gelu", "Gemm", "GlobalAveragePool", "GlobalLpPool",
        "GlobalMaxPool", "Greater", "GreaterOrEqual", "GridSample", "GroupNormalization",
        "HardSigmoid", "HardSwish", "Hardmax", "Identity", "InstanceNormalization", "IsInf",
        "IsNaN", "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax",
        "LpNormalization", "LpPool", "MatMul", "MatMulInteger", "Max", "MaxPool", "Mean",
        "Min", "Mish", "Mod", "Mul", "Neg", "Not", "Or", "PRelu", "Pow", "QuantizeLinear",
        "DequantizeLinear", "Reciprocal", "Relu", "Round", "RMSNormalization",
        "ScatterElements", "ScatterND", "Selu", "Shape", "Shrink", "Sigmoid", "Sign", "Sin",
        "Sinh", "Size", "Softmax", "Softplus", "Softsign", "SpaceToDepth", "Sqrt", "Sub",
        "Sum", "Tan", "Tanh", "ThresholdedRelu", "Transpose", "Trilu", "Where", "Xor",
    ]
)  # fmt: skip
