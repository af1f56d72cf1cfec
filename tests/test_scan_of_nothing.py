"""A Scan over a split that may be empty: the answer of the map over no element.

onnxruntime's Scan fails on an empty scan input ("Invalid dim0_offset of 0"),
and kills the process along another axis, where a SequenceMap over an empty
sequence runs: its SequenceLength is 0, and readers in a branch not taken never
see it. The Scan form is guarded by an If on the count wherever the original
can run with no element (lowering/maps/strategies/scan.py); the empty stack
it returns has the shape tract unifies with the Scan's and OpenVINO loads.
Found by fuzz seed 2301 (``--runtime tract``, a SequenceLength of a map over an
empty split).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.runtimes import runners
from tests.helpers import assert_same, op_types, run

H = '<ir_version: 8, opset_import: ["" : 17]>'

# ScatterElements has no batching rule: the map needs a loop, for tract a Scan.
# (x, split axis, keepdims, element type, scattered rows, their values, non-T dim)
ELEMENTS = {
    "[4] from [T, 4]": ("float[T,4] x", 0, 0, "float[4]", [1, 3], [0.5, 2.0], 4),
    "[d] from [T, d]": ("float[T,d] x", 0, 0, "float[d]", [0], [0.5], 4),
    "[4, 1] from [4, T]": ("float[4,T] x", 1, 1, "float[4,1]", [1, 3], [0.5, 2.0], 4),
}

READERS = {
    # The count returned: the original runs on no element and returns 0.
    "length": (
        "int64 c",
        "c = SequenceLength(m)",
        lambda rows, flag, x, axis: [np.array(len(rows), np.int64)],
    ),
    # A concat in a branch that is not taken on no element.
    "concat in a branch": (
        "float[Z] y",
        """y = If(flag) <
      then_branch = t () => (float[Z] yt) {
        full = ConcatFromSequence <axis = 0, new_axis = 0> (m)
        flat = Constant <value = int64[1] {-1}> ()
        yt = Reshape(full, flat)
      },
      else_branch = e () => (float[Z] ye) {
        flat = Constant <value = int64[1] {-1}> ()
        ye = Reshape(x, flat)
      }
    >""",
        # (A concat of no element has no answer: onnxruntime fails on it.)
        lambda rows, flag, x, axis: (
            None
            if flag and not rows
            else [np.concatenate(rows).reshape(-1) if flag else x.reshape(-1)]
        ),
    ),
    # The first element, if any, and the count.
    "first if any": (
        "float[Z] y, int64 c",
        """c = SequenceLength(m)
  zero = Constant <value = int64 {0}> ()
  some = Greater(c, zero)
  y = If(some) <
      then_branch = t () => (float[Z] yt) {
        at = Constant <value = int64 {0}> ()
        first = SequenceAt(m, at)
        flat = Constant <value = int64[1] {-1}> ()
        yt = Reshape(first, flat)
      },
      else_branch = e () => (float[Z] ye) {
        dims = Shape <SPAN> (x)
        ye = ConstantOfShape <value = float[1] {7.0}> (dims)
      }
    >""",
        lambda rows, flag, x, axis: [
            rows[0].reshape(-1) if rows else np.full(np.delete(x.shape, axis), 7, np.float32),
            np.array(len(rows), np.int64),
        ],
    ),
}


def _model(element: str, reader: str) -> onnx.ModelProto:
    x, axis, keepdims, element_type, rows, values, _ = ELEMENTS[element]
    outputs, reads, _ = READERS[reader]
    trailing = ",1" if keepdims else ""
    at = f"int64[{len(rows)}{trailing}] {{{', '.join(map(str, rows))}}}"
    new = f"float[{len(rows)}{trailing}] {{{', '.join(map(str, values))}}}"
    return onnx.parser.parse_model(
        H
        + f"""
g ({x}, bool flag) => ({outputs}) {{
  rows = SplitToSequence <axis = {axis}, keepdims = {keepdims}> (x)
  m = SequenceMap <body = body ({element_type} r) => ({element_type} o) {{
        at = Constant <value = {at}> ()
        new = Constant <value = {new}> ()
        s = ScatterElements <axis = 0> (r, at, new)
        o = Mul(s, r)
      }}> (rows)
  {reads.replace("SPAN", "start = 1" if axis == 0 else "end = 1")}
}}"""
    )


def _oracle(element: str, reader: str, x: np.ndarray, flag: bool) -> list[np.ndarray]:
    """The map as a list comprehension over the split."""
    _, axis, keepdims, _, rows, values, _ = ELEMENTS[element]

    def body(r: np.ndarray) -> np.ndarray:
        s = r.copy()
        s[rows] = np.array(values, np.float32).reshape(-1, *s.shape[1:])
        return s * r

    elements = [np.take(x, i, axis=axis) for i in range(x.shape[axis])]
    if keepdims:
        elements = [np.expand_dims(e, axis) for e in elements]
    return READERS[reader][2]([body(e) for e in elements], flag, x, axis)


def _feeds(element: str, n: int, flag: bool) -> dict[str, np.ndarray]:
    axis, d = ELEMENTS[element][1], ELEMENTS[element][6]
    shape = (n, d) if axis == 0 else (d, n)
    x = np.random.default_rng(n).standard_normal(shape).astype(np.float32)
    return {"x": x, "flag": np.array(flag)}


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize("runtime", ["onnxruntime", "tract", "openvino"])
@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("element", list(ELEMENTS))
def test_a_scan_over_a_split_that_may_be_empty_answers_as_the_map(
    element, reader, runtime, n, tmp_path
):
    model = _model(element, reader)
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(model), runtime=runtime)
    result = lowering.lower(model, runtime=runtime)
    (rewrite,) = rewrites
    if runtime == "tract":
        assert rewrite.strategy == "scan"
    # tract loads one If per graph: where the graph has one, the Scan stays bare.
    bare = runtime == "tract" and "If" in op_types(model)
    assert ("not guarded against no element" in rewrite.reason) == bare
    if rewrite.strategy == "scan":
        ifs = op_types(result).count("If") - op_types(model).count("If")
        assert ifs == (0 if bare else 1)
    for flag in (True, False):
        feeds = _feeds(element, n, flag)
        expected = _oracle(element, reader, feeds["x"], flag)
        if expected is None:
            with pytest.raises(Exception, match="ConcatFromSequence"):
                run(model, feeds)
            continue
        assert_same(run(model, feeds), expected)  # the oracle is onnxruntime's answer too
        if not (bare and n == 0):  # (onnxruntime's empty Scan: an error, or a crash)
            assert_same(run(result, feeds), expected)
        if runtime == "onnxruntime":
            continue
        pytest.importorskip(runtime)
        path = tmp_path / f"{runtime}.onnx"
        onnx.save(result, path)
        ran = getattr(runners, f"run_{runtime}")(path, list(feeds.values()))
        assert_same([np.asarray(v) for v in ran], expected)


# The body of _model for [4] elements, for the models written out below.
SCATTERED = """body (float[4] r) => (float[4] o) {
        at = Constant <value = int64[2] {1, 3}> ()
        new = Constant <value = float[2] {0.5, 2.0}> ()
        s = ScatterElements <axis = 0> (r, at, new)
        o = Mul(s, r)
      }"""


def test_only_concats_in_the_maps_graph_keep_the_bare_scan():
    """A concat of no element has no answer (onnxruntime fails on it), so a map read
    only by concats where it runs needs no guard: the Scan stands alone."""
    model = onnx.parser.parse_model(
        H
        + """
g (float[T,4] x) => (float[T,4] y) {
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = BODY> (rows)
  y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
}""".replace("BODY", SCATTERED)
    )
    result = lowering.lower(model, runtime="tract")
    assert "Scan" in op_types(result) and "If" not in op_types(result)


@pytest.mark.parametrize(
    ("x", "rows", "guarded"),
    [
        # Past --max-unroll, a main-graph input's static dim: onnxruntime checks feeds.
        ("float[40,4] x", 40, False),
        ("float[T,4] x", 0, True),
        # A static 0 proves no slice (not unrolled: --max-unroll 0): guarded.
        ("float[0,4] x", 0, True),
    ],
)
def test_a_split_proven_to_have_slices_needs_no_guard(x, rows, guarded):
    model = _model("[4] from [T, 4]", "length")
    text = onnx.printer.to_text(model).replace("float[T,4] x", x)
    result = lowering.lower(onnx.parser.parse_model(text), runtime="tract", max_unroll=0)
    assert "Scan" in op_types(result)
    assert ("If" in op_types(result)) == guarded
    feeds = {"x": np.ones((rows, 4), np.float32), "flag": np.array(True)}
    assert_same(run(result, feeds), [np.array(rows, np.int64)])


def test_a_declared_dim_of_a_computed_value_is_not_a_proof():
    """Declared by inference, it may be wrong: the Scan over it is guarded."""
    model = onnx.parser.parse_model(
        H
        + """
g (float[T,4] x) => (int64 c) <float[40,4] y> {
  y = Identity(x)
  rows = SplitToSequence <axis = 0, keepdims = 0> (y)
  m = SequenceMap <body = BODY> (rows)
  c = SequenceLength(m)
}""".replace("BODY", SCATTERED)
    )
    result = lowering.lower(model, runtime="tract")
    assert {"Scan", "If"} <= set(op_types(result))
