"""Models with dims ``--input-shape`` fixes: a map over a split of a dynamic
dim, a sequence input with open element dims (tests/test_cli_input_shapes.py,
tests/test_cli_dry_run.py)."""

from __future__ import annotations

H = '<ir_version: 8, opset_import: ["" : 17]>'

# ScatterElements has no batching rule: the map needs a loop, or a static length to unroll.
SPLIT_MAP = (
    H
    + """
g (float[T,4] x) => (float[N] z) {
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = body (float[4] r) => (float[4] c) {
        at = Constant <value = int64[2] {1, 3}> ()
        new = Constant <value = float[2] {0.5, 2.0}> ()
        s = ScatterElements <axis = 0> (r, at, new)
        c = Mul(s, r)
      }> (rows)
  z = ConcatFromSequence <axis = 0> (m)
}"""
)

# A sequence input whose elements' dims are open.
SEQUENCE_IN = (
    H
    + """
g (seq(float[?,4]) s) => (seq(float[?,4]) y) {
  y = SequenceMap <body = body (float[?,4] a) => (float[?,4] c) { c = Neg(a) }> (s)
}"""
)
