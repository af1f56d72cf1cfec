"""Loops over a ragged split read their elements with Slice, and build concats without sequences.

A map over ``SplitToSequence(X, split)`` whose body has no batching rule for
ragged elements keeps a loop (uniform or loop form). Its elements are read
with ``Slice`` at bounds computed before the loop, and an output read only
by ConcatFromSequence is built by the loop itself, so that runtimes with
Loop and no sequence ops (OpenVINO, MNN) run it. Generated over the split
(lengths as an input, int32 lengths computed, constant lengths, a chunk
size), the axis (0, 1, -1), the body (a uniform one, a NonZero, a
Transpose over float, int32, bool and string elements) and the reader (a
concat, the sequence returned, SequenceAt at a computed position), each
compared with numpy (a list comprehension is SequenceMap) and with
onnxruntime on the original; invalid splits must fail where the original
fails. Then the same forms in OpenVINO, with no sequence op left.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import pathlib
from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.runtimes.profiles import RAGGED_CONCAT, RUNTIMES
from tests.helpers import assert_same, lowered, op_types, parse, run, try_run

SEQUENCE_OPS = RUNTIMES["openvino"].lacks


@dataclasses.dataclass(frozen=True)
class Body:
    """A body over ``e`` (ragged along ``a``) and its meaning."""

    text: str  # {a}: the ragged axis as written
    oracle: Callable[[np.ndarray, int], np.ndarray]
    result: Callable[[int], str]  # the element's declared dims, for axis a (0 or 1)
    concat_axis: Callable[[int], int]
    strategy: str
    dtypes: tuple[str, ...] = ("float",)


def _l2(e: np.ndarray, a: int) -> np.ndarray:
    return np.sqrt((e.astype(np.float64) ** 2).sum(axis=a, keepdims=True)).astype(e.dtype)


BODIES = {
    # No segment form for ReduceL2: a Loop with scan outputs, stacked.
    "uniform": Body(
        "ax = Constant <value = int64[1] {{{a}}}> ()\n        c = ReduceL2 <keepdims = 1> (e, ax)",
        _l2,
        lambda a: "1,3" if a == 0 else "3,1",
        lambda a: a,
        "uniform",
    ),
    "nonzero": Body(
        "c = NonZero (e)",
        lambda e, a: np.array(np.nonzero(e), np.int64).reshape(2, -1),
        lambda a: "2,J",
        lambda a: 1,
        "loop",
        ("float", "int32", "bool"),
    ),
    "transpose": Body(
        "c = Transpose <perm = [1, 0]> (e)",
        lambda e, a: e.T,
        lambda a: "K,3" if a == 1 else "3,K",
        lambda a: 1 - a,
        "loop",
        ("float", "int32", "bool", "string"),
    ),
}

SPLITS = ("lengths", "computed_int32", "constant", "chunk")
ONNX_TYPES = {"float": "float", "int32": "int32", "bool": "bool", "string": "string"}
CONSTANT = (2, 0, 3, 1)
RUNS = {
    "lengths": ((), (0,), (4,), (3, 0, 1, 0, 2)),
    "computed_int32": ((), (0, 0), (1, 2, 0, 3)),
    "constant": (CONSTANT,),
    "chunk": ((7, 2), (6, 3), (0, 2), (1, 5)),  # (dim, chunk): the last chunk shorter
}


def _model(split: str, axis: int, body: Body, reader: str, dtype: str, keepdims=None):
    a = axis % 2
    t = ONNX_TYPES[dtype]
    x_dims = "T,3" if a == 0 else "3,T"
    element = "K,3" if a == 0 else "3,K"
    inputs, make = "", ""
    if split == "lengths":
        inputs = ", int64[N] sizes"
    elif split == "computed_int32":
        inputs, make = ", int64[N] raw", "sizes = Cast <to = 6> (raw)"
    elif split == "constant":
        make = f"sizes = Constant <value = int64[4] {{{', '.join(map(str, CONSTANT))}}}> ()"
    else:
        inputs = ", int64 sizes"
    kd = "" if keepdims is None else f", keepdims = {keepdims}"
    out_type = "int64" if "NonZero" in body.text else t
    result = body.result(a)
    code = body.text.format(a=axis)
    if reader == "concat":
        output = f"{out_type}[?,?] y"
        read = f"y = ConcatFromSequence <axis = {body.concat_axis(a)}> (m)"
    elif reader == "stack":
        output = f"{out_type}[?,?,?] y"
        read = "y = ConcatFromSequence <axis = 1, new_axis = 1> (m)"
    elif reader == "at":
        inputs += ", int64 i"
        output = f"{out_type}[{result}] y"
        read = "y = SequenceAt (m, i)"
    else:
        output, read = f"seq({out_type}[{result}]) m", ""
    text = f"""<ir_version: 9, opset_import: ["" : 18]>
    g ({t}[{x_dims}] x{inputs}) => ({output}) {{
      {make}
      parts = SplitToSequence <axis = {axis}{kd}> (x, sizes)
      m = SequenceMap <body = body ({t}[{element}] e) => ({out_type}[{result}] c) {{
        {code}
      }}> (parts)
      {read}
    }}"""
    return parse(text)


def _x(dtype: str, shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "string":
        return rng.choice(np.array(["a", "bb", "", "ccc"], dtype=object), shape)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    values = rng.integers(-2, 3, shape)
    return values.astype(np.float32 if dtype == "float" else np.int32)


def _feeds(split: str, axis: int, run_: tuple, dtype: str, reader: str) -> tuple[dict, list]:
    """The feeds and the element lengths."""
    if split == "chunk":
        dim, chunk = run_
        lengths = [min(chunk, dim - at) for at in range(0, dim, chunk)]
    else:
        dim, lengths = sum(run_), list(run_)
    shape = (dim, 3) if axis % 2 == 0 else (3, dim)
    feeds: dict = {"x": _x(dtype, shape)}
    if split == "lengths":
        feeds["sizes"] = np.array(run_, np.int64)
    elif split == "computed_int32":
        feeds["raw"] = np.array(run_, np.int64)
    elif split == "chunk":
        feeds["sizes"] = np.array(run_[1], np.int64)
    if reader == "at":
        feeds["i"] = np.array(-1, np.int64)
    return feeds, lengths


def _expected(body: Body, axis: int, x: np.ndarray, lengths: list, reader: str):
    a = axis % 2
    cuts = np.cumsum(lengths)[:-1]
    parts = np.split(x, cuts, axis=a) if lengths else []
    mapped = [np.asarray(body.oracle(e, a)) for e in parts]
    if reader == "sequence":
        return mapped
    if reader == "at":
        return mapped[-1]
    if reader == "stack":
        return np.stack(mapped, axis=1)
    return np.concatenate(mapped, axis=body.concat_axis(a))


def _strategies(model, **options) -> list[str]:
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(model), **options)
    return [r.strategy for r in rewrites if r.op_type == "SequenceMap"]


CASES = [
    pytest.param(split, axis, name, reader, dtype, id=f"{split}-axis{axis}-{name}-{dtype}-{reader}")
    for split, axis, (name, body), reader in itertools.product(
        SPLITS, (0, 1, -1), BODIES.items(), ("concat", "sequence", "at")
    )
    for dtype in body.dtypes
    if not (axis != 0 and dtype in ("int32", "bool"))  # the dtypes once, on axis 0
]


@pytest.mark.parametrize(("split", "axis", "name", "reader", "dtype"), CASES)
@pytest.mark.sweep
def test_a_loop_over_a_ragged_split_reads_slices_and_means_the_same(
    split, axis, name, reader, dtype
):
    body = BODIES[name]
    model = _model(split, axis, body, reader, dtype)
    strategies = _strategies(model, max_unroll=0)  # constant lengths would be unrolled
    expected_strategy = "loop" if dtype == "string" and body.strategy == "uniform" else None
    assert strategies[0] == (expected_strategy or body.strategy), strategies
    result = lowered(model, max_unroll=0)
    ops = set(op_types(result))
    assert not ops & {"SplitToSequence", "SequenceAt"} or reader in ("sequence", "at"), ops
    if reader == "concat" and dtype != "string":
        assert not ops & SEQUENCE_OPS, ops
    for run_ in RUNS[split]:
        feeds, lengths = _feeds(split, axis, run_, dtype, reader)
        if name == "uniform" and dtype != "float":
            continue
        if reader == "at" and not lengths:
            assert try_run(result, feeds) is None  # SequenceAt of nothing fails
            continue
        if reader == "concat" and not lengths:
            # The original fails on a concat of nothing; a concat built by the loop is empty.
            outputs = try_run(result, feeds)
            assert (outputs is None) == (dtype == "string")
            assert outputs is None or np.asarray(outputs[0]).size == 0
            continue
        actual = run(result, feeds)[0]
        assert_same(actual, _expected(body, axis, feeds["x"], lengths, reader))
        original = try_run(model, feeds)
        assert original is not None
        assert_same(actual, original[0])


INVALID = {
    "lengths": ((2, 1), (3, 3), (5, -1), (-1, 2, 3)),  # against a dim of 4
    "chunk": ((0,), (-2,)),
}


@pytest.mark.parametrize("split", list(INVALID))
@pytest.mark.parametrize("name", ["uniform", "nonzero"])
def test_an_invalid_split_fails_as_the_original_does(split, name):
    """Lengths that do not add up to the axis, a negative length, a chunk below 1."""
    model = _model(split, 0, BODIES[name], "concat", "float")
    result = lowered(model)
    for values in INVALID[split]:
        feeds = {
            "x": _x("float", (4, 3)),
            "sizes": np.array(values if split == "lengths" else values[0], np.int64),
        }
        assert try_run(model, feeds) is None
        assert try_run(result, feeds) is None, values


@pytest.mark.parametrize("strategy", ["auto", "loop"])
def test_concats_along_two_axes_each_get_their_concat(strategy):
    """A concat built in the loop serves one axis: readers that disagree on it
    read the sequence the loop builds, each its own way."""
    model = parse(
        """<ir_version: 9, opset_import: ["" : 18]>
    g (float[T,3] x, int64[N] sizes) => (float[?,?] y, float[?,?] z) {
      parts = SplitToSequence <axis = 0> (x, sizes)
      m = SequenceMap <body = body (float[K,3] e) => (float[3,K] c) {
            c = Transpose <perm = [1, 0]> (e)
          }> (parts)
      y = ConcatFromSequence <axis = 0> (m)
      z = ConcatFromSequence <axis = 1> (m)
    }"""
    )
    result = lowered(model, strategy=strategy, max_unroll=0)
    for sizes in ((2, 2, 2), (4,)):
        x = _x("float", (sum(sizes), 3))
        feeds = {"x": x, "sizes": np.array(sizes, np.int64)}
        parts = [p.T for p in np.split(x, np.cumsum(sizes)[:-1])]
        expected = [np.concatenate(parts, axis=0), np.concatenate(parts, axis=1)]
        assert_same(run(result, feeds), expected)
        assert_same(run(model, feeds), expected)


@pytest.mark.parametrize("keepdims", [0, 1])
def test_keepdims_is_ignored_for_lengths(keepdims):
    model = _model("lengths", 0, BODIES["nonzero"], "concat", "float", keepdims=keepdims)
    result = lowered(model)
    assert "SequenceAt" not in op_types(result)
    feeds, _ = _feeds("lengths", 0, (1, 0, 3), "float", "concat")
    assert_same(run(result, feeds)[0], run(model, feeds)[0])


def test_a_chunk_with_keepdims_0_is_left_to_the_sequence_form():
    """onnxruntime drops the axis of a chunk of 1 there (and fails on longer ones);
    the spec keeps it: the reading is disputed, so the elements are read with SequenceAt."""
    model = _model("chunk", 0, BODIES["nonzero"], "concat", "float", keepdims=0)
    ops = op_types(lowered(model))
    assert "SequenceAt" in ops


@pytest.mark.parametrize("target", [11, 13])
@pytest.mark.parametrize("name", ["uniform", "nonzero"])
@pytest.mark.parametrize("split", ["lengths", "chunk"])
def test_older_targets(target, name, split):
    model = _model(split, 0, BODIES[name], "concat", "float")
    result = lowered(model, target_opset=target)
    assert result.opset_import[0].version == target
    assert not set(op_types(result)) & SEQUENCE_OPS
    for run_ in RUNS[split][1:]:
        feeds, lengths = _feeds(split, 0, run_, "float", "concat")
        if not lengths:
            continue
        assert_same(
            run(result, feeds)[0], _expected(BODIES[name], 0, feeds["x"], lengths, "concat")
        )


# -- OpenVINO ------------------------------------------------------------------


@pytest.mark.parametrize("split", ["lengths", "chunk"])
@pytest.mark.parametrize(
    ("name", "reader"),  # (a stack of ragged elements is an error)
    [("uniform", "concat"), ("uniform", "stack"), ("nonzero", "concat"), ("transpose", "concat")],
)
def test_openvino_runs_the_ragged_loops_with_no_sequence_op(split, name, reader, tmp_path):
    pytest.importorskip("openvino")
    from lowering.runtimes.runners import run_openvino

    body = BODIES[name]
    model = _model(split, 0, body, reader, "float")
    (rewrite,) = [
        r
        for r in lowering.lower_in_place(ir.serde.deserialize_model(model), runtime="openvino")
        if r.op_type == "SequenceMap"
    ]
    assert rewrite.strategy == body.strategy
    # (the installed OpenVINO runs it; the releases before 2026 lose a ragged concat's pieces)
    named = [pair for pair in rewrite.rejections if pair[0].startswith("openvino")]
    ragged = [("openvino:2023.3", RAGGED_CONCAT), ("openvino:2024.0-2025.4", RAGGED_CONCAT)]
    assert named == ([] if name == "uniform" else ragged)
    result = lowering.lower(model, runtime="openvino")
    assert not set(op_types(result)) & SEQUENCE_OPS
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    for run_ in RUNS[split][1:]:
        feeds, lengths = _feeds(split, 0, run_, "float", reader)
        if not lengths:
            continue
        (actual,) = run_openvino(pathlib.Path(path), list(feeds.values()))
        assert_same(actual, _expected(body, 0, feeds["x"], lengths, reader))


# -- MNN -----------------------------------------------------------------------

# MNN 3.6.1 ignores the axes input of ReduceL2 (also L1, SumSquare, LogSum,
# LogSumExp) at opset 18 and reduces everything: the uniform body as
# Sqrt(ReduceSum(e * e)), which it computes right. It computes ScatterND's
# reduction as none, so that body's segment sum is a Loop for --runtime mnn. A
# Loop with scan outputs that runs 0 trips crashes MNN: the runs here have
# elements (docs/runtimes.md).
MNN_BODIES = {
    "uniform": dataclasses.replace(
        BODIES["uniform"],
        text="ax = Constant <value = int64[1] {{{a}}}> ()\n"
        "        s = Mul (e, e)\n        r = ReduceSum <keepdims = 1> (s, ax)\n        c = Sqrt (r)",
        strategy="vectorize",
    ),
    "nonzero": BODIES["nonzero"],
    "transpose": BODIES["transpose"],
}


def test_mnn_runs_the_ragged_forms_and_split_reads_with_no_sequence_op(tmp_path):
    """MNN has Loop but no Scan or SequenceLength; its converter refuses sequence ops."""
    pytest.importorskip("MNN")
    from lowering.runtimes.runners import run_many

    jobs, expected, names = [], [], []
    for split, name, reader in itertools.product(
        ["lengths", "chunk"], list(MNN_BODIES), ["concat", "stack"]
    ):
        body = MNN_BODIES[name]
        if reader == "stack" and name != "uniform":
            continue  # (a stack of ragged elements is an error)
        model = _model(split, 0, body, reader, "float")
        rewrites = lowering.lower_in_place(ir.serde.deserialize_model(model), runtime="mnn")
        if name == "uniform" and split == "lengths":  # (a chunk size has no segment form)
            (rewrite,) = [r for r in rewrites if r.op_type == "SequenceMap"]
            assert "not vectorized: mnn ignores Scatter" in rewrite.reason
        result = lowering.lower(model, runtime="mnn")
        assert not set(op_types(result)) & SEQUENCE_OPS
        path = tmp_path / f"{split}_{name}_{reader}.onnx"
        onnx.save(result, path)
        for run_ in RUNS[split][1:]:
            feeds, lengths = _feeds(split, 0, run_, "float", reader)
            if not lengths:
                continue
            jobs.append((path, list(feeds.values())))
            expected.append(_expected(body, 0, feeds["x"], lengths, reader))
            names.append((split, name, reader, lengths))
    for maker, (extra, make) in SPLIT_MAKERS.items():
        model = parse(GPT2_SPLIT.format(extra=extra, make=make, axis=2, last=-1))
        result = lowered(model, runtime="mnn")
        assert not set(op_types(result)) & SEQUENCE_OPS
        path = tmp_path / f"gpt2_{maker}.onnx"
        onnx.save(result, path)
        runs = [(2, 3, 12), (1, 2, 7)] if maker == "chunk_from_shape" else [(2, 3, 9), (1, 2, 4)]
        for shape, lengths in zip(runs, [(2, 3, 1, 3), (1, 1, 1, 1)], strict=True):
            feeds = _split_feeds(maker, shape, None if maker == "chunk_from_shape" else lengths)
            jobs.append((path, list(feeds.values())))
            expected.append(run(model, feeds))
            names.append(("gpt2", maker, shape, lengths))
    for name, want, got in zip(names, expected, run_many("MNN", jobs), strict=True):
        assert not isinstance(got, Exception), (name, got)
        want = want if isinstance(want, list) else [want]
        # MNN computes integers as int32.
        assert_same(
            [np.asarray(g, np.asarray(w).dtype) for g, w in zip(got, want)], want, str(name)
        )


# -- golden --------------------------------------------------------------------

H = '<ir_version: 9, opset_import: ["" : 18]>'

GOLDEN = {
    # A loop over lengths from data: Slice at the bounds, guarded; the concat is
    # built by the Loop from an empty [2, 0].
    "ragged_loop_concat": (
        H
        + """
        g (float[T,3] x, int64[N] sizes) => (int64[2,M] y) {
          parts = SplitToSequence <axis = 0> (x, sizes)
          m = SequenceMap <body = body (float[K,3] e) => (int64[2,J] c) { c = NonZero (e) }> (parts)
          y = ConcatFromSequence <axis = 1> (m)
        }""",
        H
        + """
        g (float[T,3] x, int64[N] sizes) => (int64[2,M] y) {
          zero = Constant <value = int64 {0}> ()
          ends = CumSum (sizes, zero)
          shape = Shape (x)
          axis = Constant <value = int64 {0}> ()
          dim = Gather (shape, axis)
          no_length = Constant <value = int64[1] {0}> ()
          padded = Concat <axis = 0> (no_length, sizes)
          total = ReduceSum <keepdims = 0> (padded)
          magnitude = Abs (sizes)
          no_magnitude = Constant <value = int64[1] {0}> ()
          padded_magnitude = Concat <axis = 0> (no_magnitude, magnitude)
          magnitudes = ReduceSum <keepdims = 0> (padded_magnitude)
          adds_up = Equal (total, dim)
          none_negative = Equal (magnitudes, dim)
          valid = And (adds_up, none_negative)
          invalid = Not (valid)
          index = Cast <to = 7> (invalid)
          only = Constant <value = int64[1] {0}> ()
          guard = Gather (only, index)
          guarded_ends = Add (ends, guard)
          starts = Sub (guarded_ends, sizes)
          n = Size (sizes)
          true = Constant <value = bool {1}> ()
          empty_shape = Constant <value = int64[2] {2, 0}> ()
          empty = ConstantOfShape <value = int64[1] {0}> (empty_shape)
          y = Loop (n, true, empty) <body = body (int64 i, bool cond, int64[2,?] acc) => (bool cond_out, int64[2,?] acc_next) {
                one = Constant <value = int64[1] {1}> ()
                at = Reshape (i, one)
                start = Gather (starts, at)
                end = Gather (guarded_ends, at)
                axes = Constant <value = int64[1] {0}> ()
                e = Slice (x, start, end, axes)
                c = NonZero (e)
                acc_next = Concat <axis = 1> (acc, c)
                cond_out = Identity (cond)
              }>
        }""",
    ),
    # torch.split with a computed chunk size, read at constant positions next to a
    # map: Slices at the bounds (Range), the chunk size guarded; the count goes.
    "chunk_read_at_constants": (
        H
        + """
        g (float[B,D] x, int64 c) => (float[B,?] first, float[B,?] last, float[?,D] y) {
          parts = SplitToSequence <axis = 1> (x, c)
          zero = Constant <value = int64 {0}> ()
          minus_one = Constant <value = int64 {-1}> ()
          first = SequenceAt(parts, zero)
          last = SequenceAt(parts, minus_one)
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          m = SequenceMap <body = body (float[D] r) => (float[D] o) { o = Neg(r) }> (rows)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }""",
        H
        + """
        g (float[B,D] x, int64 c) => (float[B,?] first, float[B,?] last, float[?,D] y) {
          zero = Constant <value = int64 {0}> ()
          positive = Greater (c, zero)
          invalid = Not (positive)
          index = Cast <to = 7> (invalid)
          only = Constant <value = int64[1] {0}> ()
          guard = Gather (only, index)
          chunk = Add (c, guard)
          start_at = Constant <value = int64 {0}> ()
          shape = Shape (x)
          axis = Constant <value = int64 {1}> ()
          dim = Gather (shape, axis)
          starts = Range (start_at, dim, chunk)
          ends = Add (starts, chunk)
          i0 = Constant <value = int64[1] {0}> ()
          s0 = Gather (starts, i0)
          e0 = Gather (ends, i0)
          a0 = Constant <value = int64[1] {1}> ()
          first = Slice (x, s0, e0, a0)
          i1 = Constant <value = int64[1] {-1}> ()
          s1 = Gather (starts, i1)
          e1 = Gather (ends, i1)
          a1 = Constant <value = int64[1] {1}> ()
          last = Slice (x, s1, e1, a1)
          y = Neg (x)
        }""",
    ),
}


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden(name):
    from tests.golden import canonical_text

    source, expected = GOLDEN[name]
    assert canonical_text(lowering.lower(parse(source))) == canonical_text(parse(expected))


# -- SequenceAt at constant positions of a computed split ----------------------

GPT2_SPLIT = (
    H
    + """
g (float[B,T,D] x{extra}) => (float[B,T,?] q, float[B,T,?] k, float[B,T,?] v, float[B,T,?] last,
                         float[B,T,?] y) {{
  {make}
  parts = SplitToSequence <axis = {axis}> (x, c)
  i0 = Constant <value = int64 {{0}}> ()
  i1 = Constant <value = int64 {{1}}> ()
  i2 = Constant <value = int64 {{2}}> ()
  im = Constant <value = int64 {{{last}}}> ()
  q = SequenceAt(parts, i0)
  k = SequenceAt(parts, i1)
  v = SequenceAt(parts, i2)
  last = SequenceAt(parts, im)
  rows = SplitToSequence <axis = 0, keepdims = 0> (q)
  mm = SequenceMap <body = b (float[T,?] e) => (float[T,?] o) {{ o = Neg(e) }}> (rows)
  y = ConcatFromSequence <axis = 0, new_axis = 1> (mm)
}}"""
)

#: How the split is computed: a chunk of D / 3 (GPT-2's qkv), or lengths from data.
SPLIT_MAKERS = {
    "chunk_from_shape": (
        "",
        """sh = Shape(x)
  two = Constant <value = int64 {2}> ()
  d = Gather(sh, two)
  three = Constant <value = int64 {3}> ()
  c = Div(d, three)""",
    ),
    "lengths_from_data": (", int64[4] c", ""),
}


def _split_feeds(maker: str, shape, lengths=None) -> dict:
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    feeds = {"x": x}
    if maker == "lengths_from_data":
        feeds["c"] = np.array(lengths, np.int64)
    return feeds


@pytest.mark.sweep
@pytest.mark.parametrize("maker", list(SPLIT_MAKERS))
@pytest.mark.parametrize("axis", [2, -1])
@pytest.mark.parametrize("last", [-1, 3])
@pytest.mark.parametrize("target", [None, 11, 13])
def test_constant_reads_of_a_computed_split_are_slices(maker, axis, last, target, tmp_path):
    extra, make = SPLIT_MAKERS[maker]
    model = parse(GPT2_SPLIT.format(extra=extra, make=make, axis=axis, last=last))
    result = lowered(model, **({"target_opset": target} if target else {}))
    assert not set(op_types(result)) & SEQUENCE_OPS
    runs = (
        [((2, 3, 12), None), ((1, 2, 7), None), ((1, 0, 10), None)]
        if maker == "chunk_from_shape"
        else [((2, 3, 9), (2, 3, 0, 4)), ((1, 2, 4), (1, 1, 1, 1)), ((1, 1, 9), (2, 3, 4, 1))]
    )
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    openvino = importlib.util.find_spec("openvino") is not None  # onnxruntime runs without it
    for shape, lengths in runs:
        feeds = _split_feeds(maker, shape, lengths)
        original = try_run(model, feeds)
        actual = try_run(result, feeds)
        assert (original is None) == (actual is None), (shape, lengths)  # sums, ranges
        if original is None:
            continue
        assert_same(actual, original)
        if openvino and lengths != (2, 3, 4, 1):
            from lowering.runtimes.runners import run_openvino

            assert_same(run_openvino(path, list(feeds.values())), original)


def _unknown_rank(model: onnx.ModelProto, names: set[str]) -> onnx.ModelProto:
    """``model`` with no shape declared for ``names`` (ONNX text makes ``float`` a scalar)."""
    graphs = [model.graph, *(a.g for n in model.graph.node for a in n.attribute if a.g.name)]
    for graph in graphs:
        for info in (*graph.input, *graph.output):
            if info.name in names:
                tensor = info.type.sequence_type.elem_type.tensor_type
                (
                    tensor if info.type.HasField("sequence_type") else info.type.tensor_type
                ).ClearField("shape")
    return model


def test_a_constant_chunk_with_keepdims_0_is_left_as_written():
    """A chunk of 1 with keepdims = 0: onnxruntime drops the axis, the spec keeps it."""
    model = parse(
        H
        + """
        g (float[4,3] x) => (float first, float[4,3] y) {
          one = Constant <value = int64 {1}> ()
          parts = SplitToSequence <axis = 0, keepdims = 0> (x, one)
          zero = Constant <value = int64 {0}> ()
          first = SequenceAt(parts, zero)
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          m = SequenceMap <body = b (float[3] e) => (float[3] o) { o = Neg(e) }> (rows)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }"""
    )
    result = lowering.lower(_unknown_rank(model, {"first"}))
    assert "SequenceAt" in op_types(result)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3)}
    assert_same(run(result, feeds), run(model, feeds))


def test_a_vectorized_map_over_a_chunk_with_keepdims_0_keeps_onnxruntimes_reading():
    model = parse(
        H
        + """
        g (float[T,3] x, int64 c) => (seq(float) m) {
          parts = SplitToSequence <axis = 0, keepdims = 0> (x, c)
          m = SequenceMap <body = body (float e) => (float y) { y = Neg(e) }> (parts)
        }"""
    )
    model = _unknown_rank(model, {"m", "e", "y"})
    feeds = {"x": np.ones((2, 3), np.float32), "c": np.array(1, np.int64)}
    assert_same(run(lowering.lower(model), feeds), run(model, feeds))


# -- tract: a count the graph returns ------------------------------------------


@pytest.mark.parametrize("runtime", ["onnxruntime", "tract"])
def test_tract_returns_a_sequence_length_the_graph_outputs(runtime, tmp_path):
    pytest.importorskip("tract")
    from lowering.runtimes.runners import run_tract

    model = parse(
        H
        + """
        g (float[N,4] x) => (int64 n, float[N,4] y) {
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          m = SequenceMap <body = b (float[4] e) => (float[4] o) { o = Relu(e) }> (rows)
          n = SequenceLength(m)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }"""
    )
    result = lowered(model, runtime=runtime)
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    for rows in (5, 0):
        x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        n, y = run_tract(path, [x])
        assert n.dtype == np.int64 and int(n) == rows
        assert_same(y, np.maximum(x, 0))
