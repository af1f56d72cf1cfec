"""Golden tests of --target-opset: each input beside the model the pass must write.

Compared by structure with :func:`tests.golden.canonical_text`: fresh names
never matter, but the graph's own input and output names must be kept.
"""

from __future__ import annotations

import onnx
import pytest

import lowering
from tests.golden import canonical_text
from tests.helpers import parse


def _m(opset: int, text: str) -> str:
    """A model at ``opset``, declaring the IR version the output of one declares."""
    ir_version = onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)])
    return f'<ir_version: {ir_version}, opset_import: ["" : {opset}]>\n{text}'


GOLDEN = {
    # Softmax-13 on a middle axis: moved last for Softmax-11, and back.
    "softmax_middle_axis": (
        _m(13, "g (float[2,3,4] x) => (float[2,3,4] y) { y = Softmax <axis = 1> (x) }"),
        11,
        _m(
            11,
            """g (float[2,3,4] x) => (float[2,3,4] y) {
              t = Transpose <perm = [0, 2, 1]> (x)
              s = Softmax <axis = 2> (t)
              y = Transpose <perm = [0, 2, 1]> (s)
            }""",
        ),
    ),
    # Softmax-13 on the last axis is Softmax-11 on it.
    "softmax_last_axis": (
        _m(13, "g (float[2,3,4] x) => (float[2,3,4] y) { y = Softmax(x) }"),
        11,
        _m(11, "g (float[2,3,4] x) => (float[2,3,4] y) { y = Softmax <axis = 2> (x) }"),
    ),
    # Max on int64 below 12: Greater + Where.
    "max_on_integers": (
        _m(13, "g (int64[2,3] a, int64[3] b) => (int64[2,3] y) { y = Max(a, b) }"),
        11,
        _m(
            11,
            """g (int64[2,3] a, int64[3] b) => (int64[2,3] y) {
              t = Greater(b, a)
              y = Where(t, b, a)
            }""",
        ),
    ),
    # Shape-15's start/end: Shape + Slice.
    "shape_start_end": (
        _m(15, "g (float[2,3,4,5] x) => (int64[2] y) { y = Shape <start = 1, end = -1> (x) }"),
        11,
        _m(
            11,
            """g (float[2,3,4,5] x) => (int64[2] y) {
              s = Constant <value = int64[1] {1}> ()
              e = Constant <value = int64[1] {-1}> ()
              a = Constant <value = int64[1] {0}> ()
              d = Shape(x)
              y = Slice(d, s, e, a)
            }""",
        ),
    ),
    # A constant axes input becomes the attribute; its Constant goes away.
    "reduce_axes_input": (
        _m(
            18,
            """g (float[2,3,4] x) => (float[2,1,4] y) {
              a = Constant <value = int64[1] {1}> ()
              y = ReduceMean <keepdims = 1, noop_with_empty_axes = 0> (x, a)
            }""",
        ),
        11,
        _m(
            11,
            """g (float[2,3,4] x) => (float[2,1,4] y) {
              y = ReduceMean <axes = [1], keepdims = 1> (x)
            }""",
        ),
    ),
    # torch writes axes as a small computation: it is read, and removed once unread.
    "axes_computed_from_constants": (
        _m(
            18,
            """g (float[2,3,4] x) => (float[2,4] y) {
              one = Constant <value_int = 1> ()
              two = Constant <value_int = 2> ()
              last = Sub(two, one)
              r = Range(one, two, one)
              flat = Constant <value_ints = [-1]> ()
              a = Reshape(r, flat)
              y = ReduceSum <keepdims = 0> (x, a)
            }""",
        ),
        11,
        _m(
            11,
            """g (float[2,3,4] x) => (float[2,4] y) {
              one = Constant <value = int64 {1}> ()
              two = Constant <value = int64 {2}> ()
              last = Sub(two, one)
              y = ReduceSum <axes = [1], keepdims = 0> (x)
            }""",
        ),
    ),
    # Split-18's num_outputs on a static dimension: the sizes, last one smaller.
    "split_num_outputs": (
        _m(
            18,
            """g (float[7,2] x) => (float[3,2] a, float[3,2] b, float[1,2] c) {
              a, b, c = Split <axis = 0, num_outputs = 3> (x)
            }""",
        ),
        13,
        _m(
            13,
            """g (float[7,2] x) => (float[3,2] a, float[3,2] b, float[1,2] c) {
              s = Constant <value = int64[3] {3, 3, 1}> ()
              a, b, c = Split <axis = 0> (x, s)
            }""",
        ),
    ),
    # Going up: RoiAlign-10's behaviour is said explicitly at 16.
    "roi_align_up": (
        _m(
            11,
            """g (float[1,1,4,4] x, float[1,4] r, int64[1] i) => (float[1,1,2,2] y) {
              y = RoiAlign <output_height = 2, output_width = 2> (x, r, i)
            }""",
        ),
        16,
        _m(
            16,
            """g (float[1,1,4,4] x, float[1,4] r, int64[1] i) => (float[1,1,2,2] y) {
              y = RoiAlign <output_height = 2, output_width = 2,
                            coordinate_transformation_mode = "output_half_pixel"> (x, r, i)
            }""",
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(name):
    source, target, expected = GOLDEN[name]
    result = lowering.lower(parse(source), target_opset=target)
    assert canonical_text(result) == canonical_text(parse(expected))
