"""The vectorize strategy's families: batchable bodies over an element ``e``,
each with its meaning in numpy (a list comprehension is SequenceMap), and
the three shapes of model they are written into (split -> map -> concat, a
split on axis 1 with keepdims, a graph-input sequence). Read by
tests/test_vectorize.py and tests/test_releases.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx

from tests.helpers import parse

rng_ = np.random.default_rng


@dataclasses.dataclass
class Family:
    """A body over an element ``e`` (and extras), and its meaning in numpy."""

    element: tuple[int, ...]
    body: str
    oracle: Callable[..., np.ndarray]
    extras: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    dtype: str = "float"
    opset: int = 17
    out: str = "float"


def _f(*shape, seed=1):
    return rng_(seed).standard_normal(shape).astype(np.float32)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


W45, W23, W54, W245, W253 = _f(4, 5), _f(2, 3), _f(5, 4), _f(2, 4, 5), _f(2, 5, 3)
W4, W234, W5 = _f(4), _f(2, 3, 4), _f(5)
CONV_W, CONV_B = _f(2, 3, 3, 3), _f(2)

FAMILIES: dict[str, Family] = {
    # elementwise, outer operands of lower, equal and higher rank
    "unary_and_binary": Family(
        (3, 4), "m = Mul(e, w)\n c = Relu(m)", lambda e, w: np.maximum(e * w, 0), {"w": W4}
    ),
    "outer_of_higher_rank": Family((3, 4), "c = Sub(w, e)", lambda e, w: w - e, {"w": W234}),
    "scalar_elements": Family((), "c = Add(e, w)", lambda e, w: e + w, {"w": W4}),
    "where_and_compare": Family(
        (3, 4),
        "m = Greater(e, w)\n z = Neg(e)\n c = Where(m, e, z)",
        lambda e, w: np.where(e > w, e, -e),
        {"w": W4},
    ),
    "variadic_max": Family((3, 4), "c = Max(e, w, e)", lambda e, w: np.maximum(e, w), {"w": W4}),
    "clip_and_prelu": Family(
        (3, 4),
        "lo = Constant <value = float {-0.5}> ()\n hi = Constant <value = float {0.5}> ()\n"
        " k = Clip(e, lo, hi)\n c = PRelu(e, w)",
        lambda e, w: np.where(e < 0, e * w, e),
        {"w": W4},
    ),
    # MatMul: the weight on either side, vectors, stacks of matrices
    "matmul_weight_right": Family((3, 4), "c = MatMul(e, w)", lambda e, w: e @ w, {"w": W45}),
    "matmul_weight_left": Family((3, 4), "c = MatMul(w, e)", lambda e, w: w @ e, {"w": W23}),
    "matmul_vector_element": Family((4,), "c = MatMul(e, w)", lambda e, w: e @ w, {"w": W45}),
    "matmul_vector_element_right": Family((4,), "c = MatMul(w, e)", lambda e, w: w @ e, {"w": W54}),
    "matmul_dot": Family(
        (4,), "c = MatMul(w, e)", lambda e, w: np.array(w @ e, np.float32), {"w": W4}
    ),
    "matmul_vector_by_stack": Family((4,), "c = MatMul(e, w)", lambda e, w: e @ w, {"w": W245}),
    "matmul_stack_on_left_of_element": Family(
        (3, 4), "c = MatMul(w, e)", lambda e, w: w @ e, {"w": W253}
    ),
    "matmul_both_batched": Family((3, 4), "t = Transpose(e)\n c = MatMul(e, t)", lambda e: e @ e.T),
    "matmul_both_vectors": Family((4,), "c = MatMul(e, e)", lambda e: np.array(e @ e, np.float32)),
    "gemm": Family(
        (3, 4),
        "c = Gemm <alpha = 0.5, beta = 2.0> (e, w, b)",
        lambda e, w, b: 0.5 * (e @ w) + 2.0 * b,
        {"w": W45, "b": W5},
    ),
    "gemm_transposed_weight_left": Family(
        (3, 4),
        "c = Gemm <transA = 1, transB = 1> (w, e)",
        lambda e, w: w.T @ e.T,
        {"w": _f(4, 5)},
    ),
    # reductions and axis ops, axes shifted by one
    "reduce_sum_axes_input": Family(
        (3, 4),
        "a = Constant <value = int64[1] {-1}> ()\n c = ReduceSum <keepdims = 0> (e, a)",
        lambda e: e.sum(axis=-1),
    ),
    "reduce_mean_attribute_opset_17": Family(
        (3, 4), "c = ReduceMean <axes = [0]> (e)", lambda e: e.mean(axis=0, keepdims=True)
    ),
    "reduce_mean_input_opset_18": Family(
        (3, 4),
        "a = Constant <value = int64[1] {0}> ()\n c = ReduceMean(e, a)",
        lambda e: e.mean(axis=0, keepdims=True),
        opset=18,
    ),
    "reduce_max_all_axes": Family(
        (3, 4), "c = ReduceMax <keepdims = 0> (e)", lambda e: np.array(e.max())
    ),
    "argmax": Family(
        (3, 4), "c = ArgMax <axis = 1> (e)", lambda e: e.argmax(1)[:, None], out="int64"
    ),
    "softmax": Family((3, 4), "c = Softmax <axis = 0> (e)", lambda e: _softmax(e, 0)),
    "log_softmax_default_axis": Family(
        (3, 4), "c = LogSoftmax(e)", lambda e: np.log(_softmax(e, -1))
    ),
    "layer_normalization": Family(
        (3, 4),
        "c = LayerNormalization <axis = -1> (e, w)",
        lambda e, w: (e - e.mean(-1, keepdims=True)) / np.sqrt(e.var(-1, keepdims=True) + 1e-5) * w,
        {"w": W4},
    ),
    "cumsum": Family(
        (3, 4),
        "a = Constant <value = int64 {1}> ()\n c = CumSum(e, a)",
        lambda e: np.cumsum(e, axis=1),
    ),
    "concat_with_outer": Family(
        (3, 4),
        "c = Concat <axis = 0> (e, w)",
        lambda e, w: np.concatenate([e, w]),
        {"w": W23[:, :2].repeat(2, 1)},
    ),
    "concat_last_axis": Family(
        (3, 4), "c = Concat <axis = -1> (e, e)", lambda e: np.concatenate([e, e], -1)
    ),
    "split": Family(
        (3, 4),
        "p, q = Split <axis = 1, num_outputs = 2> (e)\n c = Sub(p, q)",
        lambda e: e[:, :2] - e[:, 2:],
        opset=18,
    ),
    "slice_with_axes": Family(
        (3, 4),
        "s = Constant <value = int64[1] {1}> ()\n t = Constant <value = int64[1] {4}> ()\n"
        " a = Constant <value = int64[1] {-1}> ()\n p = Constant <value = int64[1] {2}> ()\n"
        " c = Slice(e, s, t, a, p)",
        lambda e: e[:, 1:4:2],
    ),
    "slice_without_axes": Family(
        (3, 4),
        "s = Constant <value = int64[2] {2, 0}> ()\n t = Constant <value = int64[2] {0, 3}> ()\n"
        " p = Constant <value = int64[2] {-1, 1}> ()\n a = Constant <value = int64[2] {0, 1}> ()\n"
        " c = Slice(e, s, t, a, p)",
        lambda e: e[2:0:-1, 0:3],
    ),
    "gather_data": Family(
        (3, 4),
        "i = Constant <value = int64[2] {3, -4}> ()\n c = Gather <axis = 1> (e, i)",
        lambda e: e[:, [3, -4]],
    ),
    "gather_indices": Family(
        (3,),
        "c = Gather(w, e)",
        lambda e, w: w[e],
        {"w": W45},
        dtype="int64",
    ),
    "gather_elements": Family(
        (3, 4),
        "i = Constant <value = int64[1,4] {2, 0, 1, 2}> ()\n c = GatherElements <axis = 0> (e, i)",
        lambda e: np.take_along_axis(e, np.array([[2, 0, 1, 2]]), 0),
    ),
    "transpose_default_and_perm": Family(
        (2, 3, 4),
        "t = Transpose(e)\n c = Transpose <perm = [1, 0, 2]> (t)",
        lambda e: e.transpose(2, 1, 0).transpose(1, 0, 2),
    ),
    "flatten": Family((2, 3, 4), "c = Flatten <axis = 2> (e)", lambda e: e.reshape(6, 4)),
    "reshape_copy_and_infer": Family(
        (2, 3, 4),
        "s = Constant <value = int64[2] {0, -1}> ()\n c = Reshape(e, s)",
        lambda e: e.reshape(2, 12),
    ),
    "reshape_static": Family(
        (2, 3, 4),
        "s = Constant <value = int64[3] {4, 0, 2}> ()\n c = Reshape(e, s)",
        lambda e: e.reshape(4, 3, 2),
    ),
    "squeeze_unsqueeze_expand_tile": Family(
        (3, 4),
        "a = Constant <value = int64[1] {0}> ()\n u = Unsqueeze(e, a)\n"
        " s = Constant <value = int64[3] {2, 1, 1}> ()\n big = Expand(u, s)\n"
        " r = Constant <value = int64[3] {1, 1, 2}> ()\n t = Tile(big, r)\n"
        " b = Constant <value = int64[1] {1}> ()\n k = Slice(t, a, b, a)\n c = Squeeze(k, a)",
        lambda e: np.tile(e, (1, 2)),
    ),
    "expand_to_a_computed_shape": Family(
        (1, 4),
        "k = Shape(w)\n c = Expand(e, k)",
        lambda e, w: np.broadcast_to(e, w.shape),
        {"w": W234},
    ),
    "pad_and_topk": Family(
        (3, 4),
        "p = Constant <value = int64[4] {0, 1, 1, 0}> ()\n q = Pad(e, p)\n"
        " k = Constant <value = int64[1] {2}> ()\n c, i = TopK <axis = 0> (q, k)",
        lambda e: -np.sort(-np.pad(e, ((0, 1), (1, 0))), axis=0)[:2],
    ),
    "einsum": Family(
        (3, 4),
        'c = Einsum <equation = "ij,jk->ki"> (e, w)',
        lambda e, w: np.einsum("ij,jk->ki", e, w),
        {"w": W45},
    ),
    "einsum_both_batched": Family(
        (3, 4), 'c = Einsum <equation = "ij,ij->j"> (e, e)', lambda e: np.einsum("ij,ij->j", e, e)
    ),
    "one_hot": Family(
        (3,),
        "d = Constant <value = int64 {4}> ()\n vals = Constant <value = float[2] {0.0, 2.0}> ()\n"
        " c = OneHot <axis = 0> (e, d, vals)",
        lambda e: (np.eye(4, dtype=np.float32)[e] * 2).T,
        dtype="int64",
    ),
    "dropout_for_inference": Family((3, 4), "c = Dropout(e)", lambda e: e),
    "conv_and_pooling_on_images": Family(
        (3, 5, 5),
        "a = Constant <value = int64[1] {0}> ()\n u = Unsqueeze(e, a)\n"
        " y = Conv <pads = [1, 1, 1, 1]> (u, w, b)\n r = Relu(y)\n"
        " p = GlobalAveragePool(r)\n c = Squeeze(p, a)",
        lambda e, w, b: np.maximum(_conv(e, w, b), 0).mean(axis=(1, 2), keepdims=True),
        {"w": CONV_W, "b": CONV_B},
    ),
    "cast_shape_and_constants": Family(
        (3, 4),
        "s = Shape(e)\n z = ConstantOfShape <value = float[1] {2.0}> (s)\n m = Mul(e, z)\n"
        " n = Size(e)\n f = Cast <to = 1> (n)\n k = Add(m, f)\n c = Cast <to = 7> (k)",
        lambda e: (e * 2 + 12).astype(np.int64),
        out="int64",
    ),
}


def _conv(e, w, b):
    padded = np.pad(e, ((0, 0), (1, 1), (1, 1)))
    out = np.zeros((w.shape[0], e.shape[1], e.shape[2]), np.float32)
    for m in range(w.shape[0]):
        for i in range(e.shape[1]):
            for j in range(e.shape[2]):
                out[m, i, j] = (padded[:, i : i + 3, j : j + 3] * w[m]).sum() + b[m]
    return out


ONNX_TYPES = {"float": np.float32, "int64": np.int64}


def _dims(shape) -> str:
    return ",".join(str(d) for d in shape)


def _type(dtype: str, shape) -> str:
    return f"{dtype}[{_dims(shape)}]" if shape else dtype


def family_elements(family: Family, n: int) -> list[np.ndarray]:
    rng = rng_(n)
    if family.dtype == "int64":
        return [rng.integers(-3, 3, family.element).astype(np.int64) for _ in range(n)]
    return [rng.standard_normal(family.element).astype(np.float32) for _ in range(n)]


def family_expected(
    family: Family, elements: list[np.ndarray]
) -> tuple[list[np.ndarray], np.ndarray]:
    """The list comprehension, and its results stacked (from a dummy element at n = 0)."""
    results = [np.asarray(family.oracle(e, *family.extras.values())) for e in elements]
    results = [r.astype(ONNX_TYPES[family.out]) for r in results]
    if results:
        return results, np.stack(results)
    dummy = np.zeros(family.element, ONNX_TYPES[family.dtype])
    one = np.asarray(family.oracle(dummy, *family.extras.values())).astype(ONNX_TYPES[family.out])
    return results, np.zeros((0, *one.shape), one.dtype)


def _header(family: Family) -> str:
    return f'<ir_version: 8, opset_import: ["" : {family.opset}]>'


def _extras_decl(family: Family) -> tuple[str, str]:
    names = list(family.extras)
    decl = "".join(f", float[{_dims(v.shape)}] {k}" for k, v in family.extras.items())
    return decl, "".join(f", {k}" for k in names)


def _body(family: Family) -> str:
    extras = "".join(f", float[{_dims(v.shape)}] {k}_in" for k, v in family.extras.items())
    body = family.body
    for k in family.extras:
        body = body.replace(f", {k})", f", {k}_in)").replace(f"({k},", f"({k}_in,")
        body = body.replace(f"({k})", f"({k}_in)").replace(f", {k},", f", {k}_in,")
    return (
        f"SequenceMap <body = body ({_type(family.dtype, family.element)} e{extras}) => (c) {{\n"
        f" {body}\n }}>"
    )


def _out_type(family: Family) -> str:
    _, one = family_expected(family, [])
    return _type(family.out, one.shape[1:])


def split_model(family: Family) -> str:
    """split -> map -> concat: the stack is x; also the sequence read as an output."""
    decl, args = _extras_decl(family)
    return f"""{_header(family)}
    g ({family.dtype}[N{"," if family.element else ""}{_dims(family.element)}] x{decl}) => (y, seq({_out_type(family)}) ys) {{
      parts = SplitToSequence <axis = 0, keepdims = 0> (x)
      ys = {_body(family)} (parts{args})
      y = ConcatFromSequence <axis = 0, new_axis = 1> (ys)
    }}"""


def split_axis_1_model(family: Family) -> str:
    """A split on axis 1 with keepdims: elements [1, 1, *element] of x [1, N, *element],
    squeezed in the body; the results stacked on the last axis."""
    decl, args = _extras_decl(family)
    element = (1, 1, *family.element)
    body = family.body.replace("(e", "(e0").replace(" e,", " e0,").replace(", e)", ", e0)")
    body = body.replace(", e,", ", e0,")
    squeezed = dataclasses.replace(
        family,
        element=element,
        body=f"a01 = Constant <value = int64[2] {{0, 1}}> ()\n e0 = Squeeze(e, a01)\n {body}",
    )
    return f"""{_header(family)}
    g ({family.dtype}[1,N{"," if family.element else ""}{_dims(family.element)}] x{decl}) => (y) {{
      parts = SplitToSequence <axis = 1, keepdims = 1> (x)
      ys = {_body(squeezed)} (parts{args})
      y = ConcatFromSequence <axis = -1, new_axis = 1> (ys)
    }}"""


def input_model(family: Family) -> str:
    decl, args = _extras_decl(family)
    return f"""{_header(family)}
    g (seq({_type(family.dtype, family.element)}) elements{decl}) => (seq({_out_type(family)}) ys) {{
      ys = {_body(family)} (elements{args})
    }}"""


def parse_family(text: str, family: Family, stacked_axes: int = 1) -> onnx.ModelProto:
    """Parse, then type the graph output ``y``: ONNX text has no "any dim"."""
    model = parse(text)
    _, one = family_expected(family, [])
    for output in model.graph.output:
        if output.name == "y" and not output.HasField("type"):
            tensor = output.type.tensor_type
            tensor.elem_type = onnx.helper.np_dtype_to_tensor_dtype(one.dtype)
            for k in range(one.ndim - 1 + stacked_axes):
                tensor.shape.dim.add(dim_param=f"d{k}")
    return model
