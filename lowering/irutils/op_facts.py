"""The one table of facts about ONNX ops: every "which ops ..." question is answered here.

The default domain is spelled "" or "ai.onnx"; the pointwise ops (unary and
broadcasting), the Reduce ops, the ops whose axes moved from an attribute
to an input (and when), the sequence and loop ops, the ops whose output has
their first input's element type, the ops whose output shapes follow from
their inputs' shapes, the ops that read only their input's shape, the random
ops, and where ONNX's shape inference is trusted, doubted or seen wrong
(checked against onnxruntime by tests/test_trusted_shapes.py). What a module
chooses to do with an op (which forms it writes, which ops it folds) is
that module's own policy, and stays there.
"""

from __future__ import annotations

import onnx_ir as ir


def is_onnx_domain(domain: str) -> bool:
    """The default domain, which may be spelled "" or "ai.onnx"."""
    return domain in ("", "ai.onnx")


def is_onnx_op(node: ir.Node, op_type: str) -> bool:
    """True for a default-domain op, which may be spelled "" or "ai.onnx"."""
    return node.op_type == op_type and is_onnx_domain(node.domain)


#: Pointwise on their first operand, output shaped like it (Clip's bounds are
#: other operands).
UNARY_POINTWISE_OPS = frozenset(
    [
        "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Cast", "Ceil",
        "Celu", "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
        "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal",
        "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
        "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Clip",
    ]
)  # fmt: skip

#: Pointwise on all their operands, which broadcast against each other (numpy's
#: way). PRelu is not among them: ONNX broadcasts its slope into X only.
BROADCAST_POINTWISE_OPS = frozenset(
    [
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "And", "Or",
        "Xor", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "BitShift",
        "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Where",
    ]
)  # fmt: skip

#: The comparisons: pointwise, broadcasting, bool results.
COMPARISON_OPS = frozenset({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})

#: Ops whose output is computed from their input's shape, not its values.
SHAPE_READING_OPS = frozenset({"Shape", "Size"})

#: The ONNX ops whose results are random.
RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
     "Bernoulli"}
)  # fmt: skip

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
PORTABILITY_OPS = frozenset(LOOP_OPS + SEQUENCE_OPS)


def is_loop(node: ir.Node) -> bool:
    """A default-domain Loop or Scan: an op whose ``body`` runs once per trip."""
    return node.op_type in LOOP_OPS and is_onnx_domain(node.domain)


#: Ops whose (first) output has the element type of their first input: an
#: untyped value made by one of them has the type its input has.
SAME_DTYPE_OPS = (
    (UNARY_POINTWISE_OPS - {"Cast", "IsInf", "IsNaN"})
    | (BROADCAST_POINTWISE_OPS - COMPARISON_OPS - {"Where"})
    | REDUCE_OPS
    | frozenset(
        [
            "Concat", "CumSum", "Dropout", "Expand", "Flatten", "Gather", "GatherElements",
            "Gemm", "Hardmax", "LayerNormalization", "LogSoftmax", "LpNormalization", "MatMul",
            "Pad", "PRelu", "Reshape", "Slice", "Softmax", "Split", "Squeeze", "Tile", "TopK",
            "Transpose", "Trilu", "Unsqueeze",
        ]
    )
)  # fmt: skip

#: Ops whose output shapes follow from their inputs' shapes and attributes.
SHAPE_FROM_SHAPES_OPS = (
    UNARY_POINTWISE_OPS
    | BROADCAST_POINTWISE_OPS
    | SHAPE_READING_OPS
    | frozenset(
        [
            "ArgMax", "ArgMin", "AveragePool", "BatchNormalization", "CastLike", "Concat",
            "Constant", "Conv", "ConvTranspose", "CumSum", "DepthToSpace", "DequantizeLinear",
            "Det", "Dropout", "Einsum", "Flatten", "Gather", "GatherElements", "GatherND", "Gemm",
            "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "GridSample",
            "GroupNormalization", "Hardmax", "InstanceNormalization", "LayerNormalization",
            "LogSoftmax", "LpNormalization", "LpPool", "MatMul", "MatMulInteger", "MaxPool",
            "PRelu", "QuantizeLinear", "RMSNormalization", "ScatterElements", "ScatterND",
            "Softmax", "SpaceToDepth", "Transpose", "Trilu",
        ]
    )
)  # fmt: skip

# Where ONNX's shape inference (a second implementation of each op)
# agrees with onnxruntime, on the edge cases of tests/test_trusted_shapes.py at
# opsets 11 to 21, save the cases node_inference.doubted() names. Left out for
# ONNX's shapes seen to differ from onnxruntime's: MaxPool, AveragePool, LpPool
# (ceil_mode = 1: a window that starts in the end pad), ConvTranspose
# (auto_pad SAME with output_padding: one too many), Resize (scales: the
# floor of a float product, 5 x 1.4 -> 6 to ONNX, 7 to onnxruntime), Einsum
# (batch dims of size 1 do not broadcast), NonZero (of a scalar: [0, ?] to
# ONNX, [1, 1] to onnxruntime). Left out as not checked: every other op,
# Conv among them.

#: Ops whose ONNX-inferred shapes match onnxruntime's (save the doubted cases).
TRUSTED_SHAPE_OPS = (
    UNARY_POINTWISE_OPS
    | BROADCAST_POINTWISE_OPS
    | REDUCE_OPS
    | SHAPE_READING_OPS
    | frozenset(
        [
            "CastLike", "Softmax", "LogSoftmax", "Hardmax", "CumSum", "Trilu",
            "LpNormalization", "LRN", "PRelu", "ArgMax", "ArgMin",
            # shaping
            "Concat", "Gather", "GatherElements", "Slice", "Reshape",
            "Squeeze", "Unsqueeze", "Transpose", "Expand", "ConstantOfShape", "Range",
            "Constant", "Flatten", "Tile", "Split", "TopK", "OneHot", "Pad", "DepthToSpace",
            "SpaceToDepth",
            # others
            "MatMul", "Gemm", "Conv", "BatchNormalization", "InstanceNormalization",
            "LayerNormalization", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool",
            "Dropout",
        ]
    )
)  # fmt: skip

#: The windowed pools, whose output sizes follow one rule (and whose windows
#: ONNX counts otherwise than onnxruntime at ceil_mode 1).
POOL_OPS = frozenset(["MaxPool", "AveragePool", "LpPool"])

#: For the ops whose output shapes follow from their inputs' shapes and from
#: the values of some operands (a Reshape's shape, a Slice's starts), those
#: operands' indices: given the same shapes and the same such values, the
#: same output shape.
SHAPE_OPERANDS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,),
    "Expand": (1,),
    "Tile": (1,),
    "ConstantOfShape": (0,),
    "Range": (0, 1, 2),
    "Slice": (1, 2, 3, 4),
    "Pad": (1, 2, 3),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "Split": (1,),
    "Resize": (1, 2, 3),
    "TopK": (1,),
    "OneHot": (1,),
    "CenterCropPad": (1,),
    **{op: (1,) for op in REDUCE_OPS},
}

#: Ops whose ONNX-inferred shapes were seen to differ from onnxruntime's (above);
#: trusted in the cases node_inference.seen_wrong() clears (a NonZero of rank
#: 1 or more: [rank, ?]; a pool whose windows fit; an Einsum with no size-1
#: dim to broadcast).
SHAPES_SEEN_WRONG = POOL_OPS | frozenset(["ConvTranspose", "Resize", "Einsum", "NonZero"])

#: The trusted ops with cases where ONNX's shapes and onnxruntime's still differ
#: (Range of float bounds, Slice to the first element, Squeeze of empty axes,
#: PRelu whose slope broadcasts X: node_inference.doubted()).
SHAPE_DOUBTED_OPS = frozenset(["Range", "Slice", "Squeeze", "PRelu"])

#: Ops whose rank ONNX may get wrong too: Squeeze with empty axes (ONNX
#: squeezes nothing, onnxruntime every unit dim), PRelu whose slope
#: broadcasts X (ONNX keeps X's rank); the others' ranks are right.
RANK_SEEN_WRONG = frozenset({"Squeeze", "PRelu"})
