"""The element shapes the vectorizer works out itself are the runtime's.

The vectorizer folds ``Shape``/``Size`` of a body value to a constant from
the element shape its batching rule claims, so a wrong claim is baked into
the output (``e * Size(Slice(e, ...))`` came out as zeros). Each case here is
a body at the edge of an op's attributes (negative steps, starts and ends
out of range, empty and negative axes, keepdims, zero-sized dims,
allowzero, pads and ceil_mode), mapped over three kinds of sequence; every
map also returns ``Shape`` and ``Size`` of the body's result, and the
lowered model must compute, in onnxruntime, exactly what the original does.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto
from onnx import helper as oh

import lowering
from lowering.irutils.shapes import slice_length
from lowering.maps.strategies.vectorize.batcher import RULES as _RULES
from tests.helpers import assert_same, parse, session

I64_MAX, I64_MIN = 2**63 - 1, -(2**63)


def _quiet_session(model: onnx.ModelProto):
    """onnxruntime without its optimizer, which folds Shape from ONNX's shape
    inference (a Slice ending at INT64_MAX with a negative step: inferred
    [0, 3], computed [4, 3])."""
    return session(model, optimize=False)


BOUNDS = [I64_MIN, -(2**40), -20, -5, -4, -3, -1, 0, 1, 3, 4, 5, 20, 2**40, I64_MAX - 1, I64_MAX]
STEPS = [1, 2, 3, -1, -2, -3, I64_MAX, I64_MIN, -(2**40)]


@pytest.mark.parametrize("dim", [0, 1, 4, 5])
def test_slice_length_is_what_onnxruntime_slices(dim):
    """Every start, end and step on the edges, in one model per axis size."""
    combos = list(itertools.product(BOUNDS, BOUNDS, STEPS))
    nodes, outputs = [], []
    initializers = [oh.make_tensor("axis", TensorProto.INT64, [1], [0])]
    for k, (start, end, step) in enumerate(combos):
        for name, value in (("s", start), ("e", end), ("t", step)):
            initializers.append(oh.make_tensor(f"{name}{k}", TensorProto.INT64, [1], [value]))
        nodes.append(oh.make_node("Slice", ["x", f"s{k}", f"e{k}", "axis", f"t{k}"], [f"y{k}"]))
        outputs.append(oh.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))
    x = oh.make_tensor_value_info("x", TensorProto.FLOAT, [dim])
    graph = oh.make_graph(nodes, "slices", [x], outputs, initializers)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    results = _quiet_session(model).run(None, {"x": np.arange(dim, dtype=np.float32)})
    wrong = []
    for (start, end, step), result in zip(combos, results, strict=True):
        claimed = slice_length(dim, start, end, step)
        if claimed is not None and claimed != len(result):
            wrong.append((start, end, step, claimed, len(result)))
    assert not wrong
    # It leaves unknown only what onnxruntime reads against the spec.
    unknown = [c for c in combos if slice_length(dim, *c) is None]
    assert all(end == I64_MAX and step < 0 for _, end, step in unknown)


def _ints(values) -> str:
    values = list(values)
    return f"int64[{len(values)}] {{{', '.join(str(v) for v in values)}}}"


def _slice(starts, ends, axes=None, steps=None) -> str:
    lines = [
        f"s0 = Constant <value = {_ints(starts)}> ()",
        f"s1 = Constant <value = {_ints(ends)}> ()",
    ]
    args = ["e", "s0", "s1"]
    if axes is not None or steps is not None:
        lines.append(f"s2 = Constant <value = {_ints(axes or range(len(starts)))}> ()")
        args.append("s2")
    if steps is not None:
        lines.append(f"s3 = Constant <value = {_ints(steps)}> ()")
        args.append("s3")
    lines.append(f"y = Slice({', '.join(args)})")
    return "\n".join(lines)


def _with_axes(op: str, axes, extra: str = "") -> str:
    return f"a = Constant <value = {_ints(axes)}> ()\n y = {op}{extra}(e, a)"


# The element type of y where it is not float.
INT64_RESULTS = {"argmax_negative_axis_keepdims_0", "argmin_last_index"}

# Bodies the vectorizer declines, with what it says; the map gets another form.
DECLINED = {"reshape_allowzero_zero": "its shape has a 0 and allowzero = 1"}

# name: (element shape, body computing y from e; the body may read w: float[3])
CASES: dict[str, tuple[tuple[int, ...], str]] = {
    # Slice: negative steps, starts and ends beyond the axis, both extremes
    "slice_negative_step_start_below_minus_dim": ((4, 3), _slice([-10], [-20], [0], [-1])),
    "slice_negative_step_end_int64_max": ((4, 3), _slice([3], [I64_MAX], [0], [-1])),
    "slice_negative_step_from_beyond_the_end": ((4, 3), _slice([10], [-10], [0], [-2])),
    "slice_int64_extremes": ((4, 3), _slice([I64_MIN], [I64_MAX], [1], [1])),
    "slice_empty_range": ((4, 3), _slice([3], [1], [0], [1])),
    "slice_negative_axis_and_step": ((4, 3), _slice([-1], [-4], [-1], [-1])),
    "slice_without_axes": ((4, 3), _slice([1, -2], [I64_MAX, 3])),
    "slice_zero_sized_dim": ((0, 3), _slice([0], [5], [0], [-1])),
    "slice_of_a_zero_sized_other_dim": ((4, 0), _slice([-10], [-20], [0], [-1])),
    # Squeeze and Unsqueeze: no axes, empty axes, negative axes
    "squeeze_without_axes_no_unit_dim": ((4, 3), "y = Squeeze(e)"),
    "squeeze_without_axes_unit_dims": ((1, 3, 1), "y = Squeeze(e)"),
    "squeeze_empty_axes": ((1, 3), _with_axes("Squeeze", [])),
    "squeeze_empty_axes_no_unit_dim": ((4, 3), _with_axes("Squeeze", [])),
    "squeeze_negative_axis": ((4, 1), _with_axes("Squeeze", [-1])),
    "unsqueeze_negative_axes": ((4, 3), _with_axes("Unsqueeze", [0, -1])),
    "squeeze_zero_sized": ((0, 1), _with_axes("Squeeze", [1])),
    # reductions: keepdims, negative and empty axes, noop_with_empty_axes, zero-sized
    "reduce_negative_axis_keepdims_0": ((4, 3), _with_axes("ReduceSum", [-1], " <keepdims = 0>")),
    "reduce_empty_axes": ((4, 3), _with_axes("ReduceSum", [], " <keepdims = 0>")),
    "reduce_empty_axes_noop": ((4, 3), _with_axes("ReduceSum", [], " <noop_with_empty_axes = 1>")),
    "reduce_no_axes_keepdims": ((4, 3), "y = ReduceMean(e)"),
    "reduce_zero_sized": ((0, 3), _with_axes("ReduceSum", [0])),
    "reduce_zero_sized_other_axis": ((0, 3), _with_axes("ReduceSum", [1], " <keepdims = 0>")),
    "reduce_l2_all_axes_keepdims_0": ((4, 3), "y = ReduceL2 <keepdims = 0> (e)"),
    "argmax_negative_axis_keepdims_0": ((4, 3), "y = ArgMax <axis = -1, keepdims = 0> (e)"),
    "argmin_last_index": ((4, 3), "y = ArgMin <axis = 0, select_last_index = 1> (e)"),
    # shape ops
    "shape_negative_start": ((4, 3), "t = Shape <start = -1> (e)\n y = Cast <to = 1> (t)"),
    "shape_empty_range": ((4, 3), "t = Shape <start = 1, end = -5> (e)\n y = Cast <to = 1> (t)"),
    "shape_start_beyond_rank": ((4, 3), "t = Shape <start = 5> (e)\n y = Cast <to = 1> (t)"),
    "concat_negative_axis_zero_part": (
        (4, 3),
        (
            "z = Slice(e, s, s, a)\n y = Concat <axis = -1> (e, z)\n"
            " s = Constant <value = int64[1] {0}> ()\n a = Constant <value = int64[1] {1}> ()"
        ),
    ),
    "split_uneven_num_outputs": ((5, 3), "y, q = Split <axis = 0, num_outputs = 2> (e)"),
    "split_sizes": ((4, 3), "k = Constant <value = int64[2] {1, 3}> ()\n q, y = Split(e, k)"),
    "gather_scalar_index_negative_axis": (
        (4, 3),
        "i = Constant <value = int64 {-1}> ()\n y = Gather <axis = -2> (e, i)",
    ),
    "gather_elements_negative_axis": (
        (4, 3),
        "i = Constant <value = int64[4,1] {0, 2, -1, 1}> ()\n y = GatherElements <axis = -1> (e, i)",
    ),
    "flatten_axis_0": ((4, 3), "y = Flatten <axis = 0> (e)"),
    "flatten_axis_rank": ((4, 3), "y = Flatten <axis = 2> (e)"),
    "flatten_negative_axis": ((2, 2, 3), "y = Flatten <axis = -1> (e)"),
    "reshape_copy_zero": ((4, 3), "k = Constant <value = int64[2] {0, -1}> ()\n y = Reshape(e, k)"),
    "reshape_allowzero_no_zero": (
        (4, 3),
        "k = Constant <value = int64[3] {2, -1, 3}> ()\n y = Reshape <allowzero = 1> (e, k)",
    ),
    "reshape_zero_sized": (
        (0, 3),
        "k = Constant <value = int64[3] {3, 0, -1}> ()\n y = Reshape(e, k)",
    ),
    "reshape_allowzero_zero": (
        (0, 3),
        "k = Constant <value = int64[2] {3, 0}> ()\n y = Reshape <allowzero = 1> (e, k)",
    ),
    "expand_to_higher_rank_and_ones": (
        (4, 1),
        "k = Constant <value = int64[3] {2, 1, 3}> ()\n y = Expand(e, k)",
    ),
    "tile_zero_repeats": ((4, 3), "k = Constant <value = int64[2] {0, 2}> ()\n y = Tile(e, k)"),
    "pad_negative": ((4, 3), "k = Constant <value = int64[4] {0, -1, 1, 0}> ()\n y = Pad(e, k)"),
    "pad_with_axes": (
        (4, 3),
        (
            "k = Constant <value = int64[2] {1, 2}> ()\n a = Constant <value = int64[1] {-1}> ()\n"
            " z = Constant <value = float {0}> ()\n y = Pad(e, k, z, a)"
        ),
    ),
    "pad_reflect": (
        (4, 3),
        'k = Constant <value = int64[4] {1, 0, 2, 0}> ()\n y = Pad <mode = "reflect"> (e, k)',
    ),
    "transpose_perm": ((2, 1, 3), "y = Transpose <perm = [2, 0, 1]> (e)"),
    "topk_smallest_negative_axis": (
        (4, 3),
        "k = Constant <value = int64[1] {2}> ()\n y, i = TopK <axis = -2, largest = 0> (e, k)",
    ),
    "cumsum_reverse_exclusive": (
        (4, 3),
        "a = Constant <value = int64 {-1}> ()\n y = CumSum <exclusive = 1, reverse = 1> (e, a)",
    ),
    "softmax_negative_axis": ((4, 3), "y = Softmax <axis = -2> (e)"),
    "layer_norm_stats": ((4, 3), "y, mean, inv = LayerNormalization <axis = -1> (e, w)"),
    "matmul_vector": ((3,), "y = MatMul(e, e)"),
    "gemm_transposed": (
        (4, 3),
        (
            "b = Constant <value = float[4,2] {1, 2, 3, 4, 5, 6, 7, 8}> ()\n"
            " y = Gemm <transA = 1, alpha = 0.5> (e, b)"
        ),
    ),
    "broadcast_zero_sized_outer": (
        (1, 3),
        "z = Slice(e, s, s, s)\n y = Add(e, z)\n s = Constant <value = int64[1] {0}> ()",
    ),
    "cast_like_and_prelu": ((4, 3), "c = CastLike(e, w)\n y = PRelu(c, w)"),
    "where_broadcast": ((4, 1), "c = Greater(e, w)\n y = Where(c, e, w)"),
    "trilu_lower": ((4, 3), "k = Constant <value = int64 {-1}> ()\n y = Trilu <upper = 0> (e, k)"),
    "einsum_transpose": ((4, 3), 'y = Einsum <equation = "ij->ji"> (e)'),
    "one_hot_negative_axis": (
        (4,),
        (
            "i = Cast <to = 7> (e)\n d = Constant <value = int64 {3}> ()\n"
            " v = Constant <value = float[2] {0, 1}> ()\n y = OneHot <axis = -2> (i, d, v)"
        ),
    ),
    # pooling and convolution: ceil_mode with end pads, auto_pad, dilations
    "max_pool_ceil_mode_end_pad": (
        (1, 1, 5),
        "y = MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1> (e)",
    ),
    "average_pool_ceil_mode": (
        (1, 1, 4, 4),
        (
            "y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [0, 0, 1, 1], "
            "ceil_mode = 1, count_include_pad = 1> (e)"
        ),
    ),
    "max_pool_same_upper": (
        (1, 1, 5),
        'y = MaxPool <kernel_shape = [2], strides = [2], auto_pad = "SAME_UPPER"> (e)',
    ),
    "max_pool_dilations": (
        (1, 1, 7),
        "y = MaxPool <kernel_shape = [2], dilations = [2], ceil_mode = 1, strides = [2]> (e)",
    ),
    "global_pool": ((1, 2, 3, 3), "y = GlobalMaxPool(e)"),
    "depth_to_space": ((1, 4, 2, 2), "y = DepthToSpace <blocksize = 2> (e)"),
    "dropout": ((4, 3), "y = Dropout(e)"),
    # invariant ops next to batched ones
    "constant_of_shape_of_shape": (
        (4, 3),
        "t = Shape(e)\n z = ConstantOfShape <value = float[1] {2}> (t)\n y = Mul(e, z)",
    ),
}

SEQUENCE_KINDS = ["split", "graph_input", "construct"]


def _model(shape: tuple[int, ...], body: str, kind: str, out: str = "float") -> onnx.ModelProto:
    dims = ", ".join(str(d) for d in shape)
    element = f"float[{dims}]" if shape else "float"
    if kind == "split":
        inputs = f"float[N{', ' if shape else ''}{dims}] x"
        make = "seq_in = SplitToSequence <axis = 0, keepdims = 0> (x)"
    elif kind == "graph_input":
        inputs = f"seq({element}) seq_in"
        make = ""
    else:
        inputs = f"{element} x0"
        make = "seq_in = SequenceConstruct(x0)"
    outputs = f"seq({out}) ys, seq(int64) shapes, seq(int64) sizes"
    text = f"""<ir_version: 8, opset_import: ["" : 18]>
    g ({inputs}) => ({outputs}) <float[3] w = {{0.5, -1, 2}}> {{
      {make}
      ys, shapes, sizes = SequenceMap <body = body ({element} e) => (y, t_shape, t_size) {{
        {body}
        t_shape = Shape(y)
        t_size = Size(y)
      }}> (seq_in)
    }}"""
    model = parse(text)
    for output in model.graph.output:  # no shape: the checker would compare them
        output.type.sequence_type.elem_type.tensor_type.ClearField("shape")
    # The body's outputs get their element types, not their shapes (onnxruntime
    # without its optimizer cannot load a map whose body outputs are untyped).
    inferred = onnx.shape_inference.infer_shapes(model)
    body_graph = model.graph.node[-1].attribute[0].g
    for output, seq in zip(body_graph.output, inferred.graph.output, strict=True):
        output.type.tensor_type.elem_type = seq.type.sequence_type.elem_type.tensor_type.elem_type
    return model


def _feeds(shape, kind: str, n: int) -> dict:
    rng = np.random.default_rng(n)
    elements = [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
    if kind == "split":
        return {"x": np.stack(elements) if n else np.zeros((0, *shape), np.float32)}
    if kind == "graph_input":
        return {"seq_in": elements}
    return {"x0": rng.standard_normal(shape).astype(np.float32)}


def _reorder(body: str) -> str:
    """The cases list a Constant after its first reader for brevity; ONNX wants it first."""
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    constants = [line for line in lines if re.search(r"=\s*Constant\s*<", line)]
    return "\n".join([*constants, *(line for line in lines if line not in constants)])


@pytest.mark.parametrize("kind", SEQUENCE_KINDS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.sweep
def test_vectorized_shapes_are_the_runtimes(case, kind):
    shape, body = CASES[case]
    model = _model(shape, _reorder(body), kind, "int64" if case in INT64_RESULTS else "float")
    lowered_model = ir.serde.deserialize_model(model)
    (rewrite,) = [
        r
        for r in lowering.lower_in_place(lowered_model, max_unroll=0)
        if r.op_type == "SequenceMap"
    ]
    if case in DECLINED:
        assert rewrite.strategy != "vectorize" and DECLINED[case] in rewrite.reason
    else:
        assert rewrite.strategy == "vectorize", rewrite.reason
    result = ir.serde.serialize_model(lowered_model)
    onnx.checker.check_model(result, full_check=True)
    lowered, original = _quiet_session(result), _quiet_session(model)
    for n in (0, 1, 3) if kind != "construct" else (1,):
        feeds = _feeds(shape, kind, n)
        assert_same(lowered.run(None, feeds), original.run(None, feeds))


def test_every_batching_rule_has_a_shape_case():
    """Each batching rule (one per op family) has an edge case here."""
    used = {"Shape", "Size"}  # every map returns both
    for _, body in CASES.values():
        for line in body.splitlines():
            if "=" in line:
                used.add(line.split("=", 1)[1].strip().split("(")[0].split("<")[0].strip())
    covered = {_RULES[op] for op in used if op in _RULES}
    missing = sorted(rule.__name__ for rule in set(_RULES.values()) - covered)
    assert missing == [], f"batching rules with no shape case: {missing}"


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize(
    ("x_shape", "slope_shape"),
    [((2, 1, 3), (2, 1)), ((2, 1, 3), (3,)), ((2, 1, 3), (1,)), ((1, 3), (2, 1)), ((2, 3), (2, 3))],
)
def test_prelu_result_shape_is_onnxruntimes_broadcast(x_shape, slope_shape, n):
    """onnxruntime broadcasts PRelu both ways ([2,1,3] with a [2,1] slope is [2,2,3];
    ONNX infers [2,1,3]): the batched map's results and their Size match the original's."""
    dims = ",".join(map(str, x_shape))
    sdims = ",".join(map(str, slope_shape))
    count = int(np.prod(slope_shape))
    values = ",".join(str(0.1 * (i + 1)) for i in range(count))
    model = parse(
        f"""<ir_version: 9, opset_import: ["" : 20]>
g (seq(float[{dims}]) xs) => (seq(float[?,?,?]) ys, seq(int64) sizes) {{
  ys, sizes = SequenceMap <body = body (float[{dims}] e) => (float[?,?,?] y, int64 s) {{
    k = Constant <value = float[{sdims}] {{{values}}}> ()
    y = PRelu (e, k)
    s = Size (y)
  }}> (xs)
}}"""
    )
    rng = np.random.default_rng(0)
    feeds = {"xs": [rng.standard_normal(x_shape).astype(np.float32) for _ in range(n)]}
    slope = np.array([0.1 * (i + 1) for i in range(count)], np.float32).reshape(slope_shape)
    expected_y = [np.where(e > 0, e, e * slope).astype(np.float32) for e in feeds["xs"]]
    result = lowering.lower(model)
    assert "SequenceMap" not in {node.op_type for node in result.graph.node}
    ys, sizes = session(result).run(None, feeds)
    assert_same(ys, expected_y)
    assert [int(s) for s in sizes] == [y.size for y in expected_y]
