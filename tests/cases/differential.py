"""The differential cases: each a model, its feeds at a sequence length, and its oracle.

One table, read by the differential tests (tests/test_differential.py), the
pass contracts, the README checks and the verifier's tests: each names the
capability it covers, and its oracle is a list comprehension over numpy arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

F32 = np.float32


def floats(rng, *shape):
    return rng.standard_normal(shape).astype(F32)


def aligned(n, rng, names, make, smallest=0) -> dict:
    """Sequences of length n whose i-th elements share one random size."""
    sizes = [int(rng.integers(smallest, 5)) for _ in range(n)]
    return {name: [make(rng, size) for size in sizes] for name in names}


@dataclasses.dataclass
class Case:
    text: str
    feeds: Callable[[int, np.random.Generator], dict]
    oracle: Callable[[dict], list]


CASES: dict[str, Case] = {}


def case(name: str, text: str, feeds, oracle) -> None:
    CASES[name] = Case(text, feeds, oracle)


HEADER = '<ir_version: 8, opset_import: ["" : 17]>'

case(
    "one_sequence_with_constant",
    HEADER
    + """
    g (seq(float[N]) x) => (seq(float[N]) y) {
      y = SequenceMap <body = body (float[N] a) => (float[N] c) {
            two = Constant <value = float {2.0}> ()
            c = Mul(a, two)
          }> (x)
    }""",
    lambda n, rng: {"x": [floats(rng, int(rng.integers(0, 5))) for _ in range(n)]},
    lambda f: [[a * 2 for a in f["x"]]],
)

case(
    "several_sequences",
    HEADER
    + """
    g (seq(float[N]) x0, seq(float[N]) x1, seq(float[N]) x2) => (seq(float[N]) y) {
      y = SequenceMap <body = body (float[N] a, float[N] b, float[N] c) => (float[N] d) {
            ab = Mul(a, b)
            d = Sub(ab, c)
          }> (x0, x1, x2)
    }""",
    lambda n, rng: aligned(n, rng, ["x0", "x1", "x2"], floats, smallest=1),
    lambda f: [[a * b - c for a, b, c in zip(f["x0"], f["x1"], f["x2"])]],
)

case(
    "extras_sequence_tensor_sequence_tensor",
    HEADER
    + """
    g (seq(float[3]) s0, float[3] t, seq(float[3]) s1, float[3] u) => (seq(float[3]) y) {
      y = SequenceMap <body = body (float[3] a, float[3] tt, float[3] b, float[3] uu) => (float[3] c) {
            at = Mul(a, tt)
            bu = Sub(b, uu)
            c = Add(at, bu)
          }> (s0, t, s1, u)
    }""",
    lambda n, rng: {
        "s0": [floats(rng, 3) for _ in range(n)],
        "t": floats(rng, 3),
        "s1": [floats(rng, 3) for _ in range(n)],
        "u": floats(rng, 3),
    },
    lambda f: [[a * f["t"] + (b - f["u"]) for a, b in zip(f["s0"], f["s1"])]],
)

case(
    "extras_tensor_first_then_sequence",
    HEADER
    + """
    g (seq(int64[N]) s, int64 k, seq(int64[N]) r) => (seq(int64[N]) y) {
      y = SequenceMap <body = body (int64[N] a, int64 kk, int64[N] b) => (int64[N] c) {
            ak = Mul(a, kk)
            c = Add(ak, b)
          }> (s, k, r)
    }""",
    lambda n, rng: {
        **aligned(n, rng, ["s", "r"], lambda r, size: r.integers(-9, 9, size)),
        "k": np.array(3, np.int64),
    },
    lambda f: [[a * f["k"] + b for a, b in zip(f["s"], f["r"])]],
)

case(
    "several_outputs_changing_dtype_and_shape",
    HEADER
    + """
    g (seq(float[H,W]) x) => (seq(int64[2]) shapes, seq(float[W]) sums, seq(int32[H,W]) ints,
                              seq(bool[H,W]) signs) {
      shapes, sums, ints, signs = SequenceMap <body = body (float[H,W] a)
          => (int64[2] sh, float[W] su, int32[H,W] i, bool[H,W] p) {
            sh = Shape(a)
            zero = Constant <value = int64[1] {0}> ()
            su = ReduceSum <keepdims = 0> (a, zero)
            i = Cast <to = 6> (a)
            z = Constant <value = float {0.0}> ()
            p = Greater(a, z)
          }> (x)
    }""",
    lambda n, rng: {
        "x": [floats(rng, int(rng.integers(1, 4)), int(rng.integers(1, 4))) * 4 for _ in range(n)]
    },
    lambda f: [
        [np.array(a.shape, np.int64) for a in f["x"]],
        [a.sum(0) for a in f["x"]],
        [a.astype(np.int32) for a in f["x"]],
        [a > 0 for a in f["x"]],
    ],
)

case(
    "untyped_body",
    HEADER
    + """
    g (seq(float[N]) x, float[N] t) => (seq(float[N]) y, seq(int64[N]) z) {
      y, z = SequenceMap <body = body (a, b) => (c, d) {
            c = Add(a, b)
            d = Cast <to = 7> (c)
          }> (x, t)
    }""",
    lambda n, rng: {"x": [floats(rng, 4) * 5 for _ in range(n)], "t": floats(rng, 4)},
    lambda f: [
        [a + f["t"] for a in f["x"]],
        [(a + f["t"]).astype(np.int64) for a in f["x"]],
    ],
)

case(
    "outer_scope_values_initializers_and_body_initializer",
    HEADER
    + """
    g (seq(float[N]) x, float z) => (seq(float[N]) y) <float[1] w = {3.0}> {
      k = Constant <value = float {0.5}> ()
      y = SequenceMap <body = body (float[N] a) => (float[N] c) <float[1] bias = {1.0}> {
            t1 = Mul(a, k)
            t2 = Add(t1, w)
            t3 = Sub(t2, z)
            c = Add(t3, bias)
          }> (x)
    }""",
    lambda n, rng: {
        "x": [floats(rng, int(rng.integers(0, 4))) for _ in range(n)],
        "z": np.array(0.25, F32),
    },
    lambda f: [[a * F32(0.5) + F32(3.0) - f["z"] + F32(1.0) for a in f["x"]]],
)

case(
    "outputs_passed_straight_through",
    HEADER
    + """
    g (seq(float[N]) x, float[2] t) => (seq(float[N]) same, seq(float[2]) ts, seq(float[N]) neg) {
      same, ts, neg = SequenceMap <body = body (float[N] a, float[2] b) => (float[N] a, float[2] b, float[N] c) {
            c = Neg(a)
          }> (x, t)
    }""",
    lambda n, rng: {
        "x": [floats(rng, int(rng.integers(0, 4))) for _ in range(n)],
        "t": floats(rng, 2),
    },
    lambda f: [list(f["x"]), [f["t"] for _ in f["x"]], [-a for a in f["x"]]],
)

case(
    "nested_sequence_map",
    HEADER
    + """
    g (seq(float[N]) x, float k) => (seq(float[N]) y) {
      y = SequenceMap <body = outer (float[N] a) => (float[N] c) {
            zero = Constant <value = int64[1] {0}> ()
            m = ReduceSum <keepdims = 0> (a, zero)
            parts = SplitToSequence <keepdims = 0> (a)
            inner = SequenceMap <body = inner_body (float e, float[N] whole) => (float r) {
                  em = Mul(e, m)
                  r = Add(em, k)
                }> (parts, a)
            c = ConcatFromSequence <axis = 0, new_axis = 1> (inner)
          }> (x)
    }""",
    lambda n, rng: {
        "x": [floats(rng, int(rng.integers(1, 4))) for _ in range(n)],
        "k": np.array(1.5, F32),
    },
    lambda f: [[(a * a.sum() + f["k"]).astype(F32) for a in f["x"]]],
)

case(
    "inside_if",
    HEADER
    + """
    g (seq(float[N]) x, bool flag) => (seq(float[N]) y) {
      y = If (flag) <
        then_branch = then_g () => (seq(float[N]) yt) {
          yt = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Abs(a) }> (x)
        },
        else_branch = else_g () => (seq(float[N]) ye) { ye = Identity(x) }>
    }""",
    lambda n, rng: {
        "x": [floats(rng, int(rng.integers(0, 4))) for _ in range(n)],
        "flag": np.array(True),
    },
    lambda f: [[np.abs(a) for a in f["x"]]],
)

case(
    "inside_loop_and_if_at_depth",
    HEADER
    + """
    g (seq(float[N]) x, int64 trips) => (seq(float[N]) y) {
      yes = Constant <value = bool {1}> ()
      y = Loop (trips, yes, x) <body = loop_body (int64 i, bool c_in, seq(float[N]) s) => (bool c_out, seq(float[N]) s_out) {
            c_out = Identity(c_in)
            s_out = If (c_in) <
              then_branch = deep () => (seq(float[N]) d) {
                d = SequenceMap <body = body (float[N] a) => (float[N] b) {
                      one = Constant <value = float {1.0}> ()
                      b = Add(a, one)
                    }> (s)
              },
              else_branch = shallow () => (seq(float[N]) e) { e = Identity(s) }>
          }>
    }""",
    lambda n, rng: {
        "x": [floats(rng, int(rng.integers(0, 4))) for _ in range(n)],
        "trips": np.array(3, np.int64),
    },
    lambda f: [[a + F32(3.0) for a in f["x"]]],
)

case(
    "inside_scan",
    HEADER
    + """
    g (float[T,D] x) => (float[T,D] y) {
      y = Scan <num_scan_inputs = 1, body = scan_body (float[D] row) => (float[D] out) {
            parts = SplitToSequence <keepdims = 0> (row)
            squares = SequenceMap <body = body (float e) => (float sq) { sq = Mul(e, e) }> (parts)
            out = ConcatFromSequence <axis = 0, new_axis = 1> (squares)
          }> (x)
    }""",
    lambda n, rng: {"x": floats(rng, max(n, 1), 3)},
    lambda f: [f["x"] * f["x"]],
)

case(
    "inside_function_typed_body",
    """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g (seq(float[N]) x) => (seq(float[N]) y) {
      y = local.scale_all(x)
    }
    <domain: "local", opset_import: ["" : 17]>
    scale_all (s) => (r) {
      r = SequenceMap <body = body (float[N] a) => (float[N] c) {
            three = Constant <value = float {3.0}> ()
            c = Mul(a, three)
          }> (s)
    }""",
    lambda n, rng: {"x": [floats(rng, int(rng.integers(0, 4))) for _ in range(n)]},
    lambda f: [[a * 3 for a in f["x"]]],
)

case(
    "inside_function_untyped_body",
    """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g (seq(int32[N]) x, int32 k) => (seq(int64[N]) y) {
      y = local.shift_all(x, k)
    }
    <domain: "local", opset_import: ["" : 17]>
    shift_all (s, kk) => (r) {
      r = SequenceMap <body = body (a, b) => (c) {
            ab = Add(a, b)
            c = Cast <to = 7> (ab)
          }> (s, kk)
    }""",
    lambda n, rng: {
        "x": [rng.integers(-5, 5, int(rng.integers(0, 4))).astype(np.int32) for _ in range(n)],
        "k": np.array(7, np.int32),
    },
    lambda f: [[(a + f["k"]).astype(np.int64) for a in f["x"]]],
)

case(
    "domain_spelled_ai_onnx",
    """<ir_version: 8, opset_import: ["ai.onnx" : 17]>
    g (seq(float[N]) x) => (seq(float[N]) y) {
      y = ai.onnx.SequenceMap <body = body (float[N] a) => (float[N] c) { c = ai.onnx.Neg(a) }> (x)
    }""",
    lambda n, rng: {"x": [floats(rng, int(rng.integers(0, 4))) for _ in range(n)]},
    lambda f: [[-a for a in f["x"]]],
)
