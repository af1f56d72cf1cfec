"""Models of every kind of run the summary and the report describe: each
strategy, an insert position normalized or left as written, a conversion,
nothing to lower; and many maps, more than the summary lists one by one.
Shared by tests/test_report.py, tests/test_progress.py and tests/test_provenance.py."""

from __future__ import annotations

import onnx

from tests.cases.differential import CASES
from tests.helpers import parse

HEAD = '<ir_version: 8, opset_import: ["" : 17]>\n'
MODELS = {
    "vectorize": HEAD
    + """g (float[5,3] x) => (float[5,3] y) {
  xs = SplitToSequence <axis = 0, keepdims = 0> (x)
  [vec] ys = SequenceMap <body = body (float[3] e) => (float[3] d) { d = Neg(e) }> (xs)
  y = ConcatFromSequence <axis = 0, new_axis = 1> (ys)
}""",
    "unroll": HEAD
    + """g (float[3] a, float[3] b) => (seq(float[3]) ys) {
  xs = SequenceConstruct (a, b)
  [unrolled] ys = SequenceMap <body = body (float[3] e) => (float[3] d) { d = Neg(e) }> (xs)
}""",
    "loop": HEAD
    + """g (seq(float[3]) xs) => (seq(int64[1,?]) ys) {
  [looped] ys = SequenceMap <body = body (float[3] e) => (int64[1,?] d) { d = NonZero (e) }> (xs)
}""",
    "uniform": CASES["extras_sequence_tensor_sequence_tensor"].text,
    "scan and loop, nested": CASES["nested_sequence_map"].text,
    "insert": HEAD
    + """g (seq(float[3]) xs, float[3] x) => (seq(float[3]) ys) {
  p = Constant <value = int64 {-1}> ()
  [ins] ys = SequenceInsert (xs, x, p)
}""",
    # Every form of a fed position needs SequenceLength, which MNN lacks: left as written.
    "insert left as written": HEAD
    + """g (seq(float[3]) xs, float[3] x, int64 p) => (seq(float[3]) ys) {
  [kept] ys = SequenceInsert (xs, x, p)
}""",
    "nothing to lower": HEAD + "g (float[3] x) => (float[3] y) { y = Neg(x) }",
    # ReduceSum, Unsqueeze and Squeeze take axes as inputs from 13: adapted at 11.
    "adapted": """<ir_version: 8, opset_import: ["" : 17]>
g (float[T,4] x, float[4] w) => (float[M] y) {
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = body (float[4] r) => (float[4] c) {
        zero = Constant <value = int64[1] {0}> ()
        u = Unsqueeze(r, zero)
        s = ReduceSum <keepdims = 1> (u, zero)
        q = Squeeze(s, zero)
        c = Mul(q, w)
      }> (rows)
  y = ConcatFromSequence <axis = 0> (m)
}""",
    # LayerNormalization is from 17: its function body at 13; nothing to lower.
    "expanded": """<ir_version: 8, opset_import: ["" : 18]>
g (float[2,4] x, float[4] s, float[4] b) => (float[2,4] y) {
  y = LayerNormalization <axis = -1> (x, s, b)
}""",
}


def many_maps(count: int) -> onnx.ModelProto:
    """``count`` maps, more than the summary lists one by one."""
    nodes = "\n".join(
        f"  [m{i}] y{i} = SequenceMap <body = b{i} (float[4] e) => (float[4] d) {{ d = Neg(e) }}> (xs)"
        for i in range(count)
    )
    outputs = ", ".join(f"float[5,4] z{i}" for i in range(count))
    concats = "\n".join(
        f"  z{i} = ConcatFromSequence <axis = 0, new_axis = 1> (y{i})" for i in range(count)
    )
    return parse(
        HEAD + f"g (float[5,4] x) => ({outputs}) {{\n"
        "  xs = SplitToSequence <axis = 0, keepdims = 0> (x)\n"
        f"{nodes}\n{concats}\n}}"
    )
