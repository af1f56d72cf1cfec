"""Golden tests of the general (``loop``) strategy: each input model beside
the model the lowering must write.

Compared by structure with :func:`tests.golden.canonical_text`, so fresh
names never matter; node order, wiring, attributes and signatures do.
"""

from __future__ import annotations

import pytest

import lowering
from tests.golden import canonical_text
from tests.helpers import parse

H = '<ir_version: 8, opset_import: ["" : 17]>'

GOLDEN = {
    # One sequence input and one tensor input read from the outer scope.
    "sequence_and_tensor": (
        H
        + """
        g (seq(float[N]) x, float[3] t) => (seq(float[3]) y) {
          y = SequenceMap <body = body (float[N] a, float[3] b) => (float[3] c) {
                c = Add(a, b)
              }> (x, t)
        }""",
        H
        + """
        g (seq(float[N]) x, float[3] t) => (seq(float[3]) y) {
          n = SequenceLength(x)
          true = Constant <value = bool {1}> ()
          empty = SequenceEmpty <dtype = 1> ()
          y = Loop (n, true, empty) <body = body (int64 i, bool cond, seq(float[3]) acc)
                                         => (bool cond_out, seq(float[3]) acc_out) {
                a = SequenceAt(x, i)
                c = Add(a, t)
                acc_out = SequenceInsert(acc, c)
                cond_out = Identity(cond)
              }>
        }""",
    ),
    # Several outputs of different element types; one passes an input through.
    "several_outputs_and_pass_through": (
        H
        + """
        g (seq(float[N]) x, seq(int32[M]) z) => (seq(int64[1]) shapes, seq(int32[M]) same) {
          shapes, same = SequenceMap <body = body (float[N] a, int32[M] b) => (int64[1] s, int32[M] b) {
                s = Shape(a)
              }> (x, z)
        }""",
        H
        + """
        g (seq(float[N]) x, seq(int32[M]) z) => (seq(int64[1]) shapes, seq(int32[M]) same) {
          n = SequenceLength(x)
          true = Constant <value = bool {1}> ()
          e1 = SequenceEmpty <dtype = 7> ()
          e2 = SequenceEmpty <dtype = 6> ()
          shapes, same = Loop (n, true, e1, e2) <body = body (int64 i, bool cond,
                seq(int64[1]) acc1, seq(int32[M]) acc2)
                => (bool cond_out, seq(int64[1]) acc1_out, seq(int32[M]) acc2_out) {
                a = SequenceAt(x, i)
                b = SequenceAt(z, i)
                s = Shape(a)
                acc1_out = SequenceInsert(acc1, s)
                acc2_out = SequenceInsert(acc2, b)
                cond_out = Identity(cond)
              }>
        }""",
    ),
    # torch.onnx style: nothing in the body is typed; inference supplies it.
    "untyped_body": (
        H
        + """
        g (seq(float[N]) x) => (seq(int64[1]) y) {
          y = SequenceMap <body = body (a) => (s) { s = Shape(a) }> (x)
        }""",
        H
        + """
        g (seq(float[N]) x) => (seq(int64[1]) y) {
          n = SequenceLength(x)
          true = Constant <value = bool {1}> ()
          empty = SequenceEmpty <dtype = 7> ()
          y = Loop (n, true, empty) <body = body (int64 i, bool cond, seq(int64[1]) acc)
                                         => (bool cond_out, seq(int64[1]) acc_out) {
                a = SequenceAt(x, i)
                s = Shape(a)
                acc_out = SequenceInsert(acc, s)
                cond_out = Identity(cond)
              }>
        }""",
    ),
    # A map inside a map: both become Loops, the inner one inside the outer body.
    # The inner map's output, read only by a concat, is concatenated by its Loop.
    "nested": (
        H
        + """
        g (seq(float[N]) x, seq(float[N]) w) => (seq(float[N]) y) {
          y = SequenceMap <body = outer (float[N] a) => (float[N] c) {
                inner = SequenceMap <body = inner_body (float[N] b) => (float[N] d) {
                      d = Mul(a, b)
                    }> (w)
                c = ConcatFromSequence <axis = 0> (inner)
              }> (x)
        }""",
        H
        + """
        g (seq(float[N]) x, seq(float[N]) w) => (seq(float[N]) y) {
          n = SequenceLength(x)
          true = Constant <value = bool {1}> ()
          empty = SequenceEmpty <dtype = 1> ()
          y = Loop (n, true, empty) <body = outer (int64 i, bool cond, seq(float[N]) acc)
                                          => (bool cond_out, seq(float[N]) acc_out) {
                a = SequenceAt(x, i)
                m = SequenceLength(w)
                true2 = Constant <value = bool {1}> ()
                empty_shape = Constant <value = int64[1] {0}> ()
                empty2 = ConstantOfShape <value = float[1] {0}> (empty_shape)
                c = Loop (m, true2, empty2) <body = inner_body (int64 j, bool cond2, float[?] acc2)
                                               => (bool cond2_out, float[?] acc2_out) {
                      b = SequenceAt(w, j)
                      d = Mul(a, b)
                      acc2_out = Concat <axis = 0> (acc2, d)
                      cond2_out = Identity(cond2)
                    }>
                acc_out = SequenceInsert(acc, c)
                cond_out = Identity(cond)
              }>
        }""",
    ),
    # Body initializers stay in the body; outer-scope references stay as they are.
    "body_initializer_and_outer_reference": (
        H
        + """
        g (seq(float[N]) x, float k) => (seq(float[N]) y) {
          y = SequenceMap <body = body (float[N] a) => (float[N] c) <float[1] bias = {1.0}> {
                ak = Mul(a, k)
                c = Add(ak, bias)
              }> (x)
        }""",
        H
        + """
        g (seq(float[N]) x, float k) => (seq(float[N]) y) {
          n = SequenceLength(x)
          true = Constant <value = bool {1}> ()
          empty = SequenceEmpty <dtype = 1> ()
          y = Loop (n, true, empty) <body = body (int64 i, bool cond, seq(float[N]) acc)
                                         => (bool cond_out, seq(float[N]) acc_out)
                                         <float[1] bias = {1.0}> {
                a = SequenceAt(x, i)
                ak = Mul(a, k)
                c = Add(ak, bias)
                acc_out = SequenceInsert(acc, c)
                cond_out = Identity(cond)
              }>
        }""",
    ),
    # A map in a model-local function is lowered inside the function.
    "in_function": (
        """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
        g (seq(float[N]) x) => (seq(float[N]) y) { y = local.f(x) }
        <domain: "local", opset_import: ["" : 17]>
        f (s) => (r) {
          r = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (s)
        }""",
        """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
        g (seq(float[N]) x) => (seq(float[N]) y) { y = local.f(x) }
        <domain: "local", opset_import: ["" : 17]>
        f (s) => (r) {
          n = SequenceLength(s)
          true = Constant <value = bool {1}> ()
          empty = SequenceEmpty <dtype = 1> ()
          r = Loop (n, true, empty) <body = body (int64 i, bool cond, seq(float[?]) acc)
                                         => (bool cond_out, seq(float[?]) acc_out) {
                a = SequenceAt(s, i)
                c = Neg(a)
                acc_out = SequenceInsert(acc, c)
                cond_out = Identity(cond)
              }>
        }""",
    ),
}


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden(name):
    source, expected = GOLDEN[name]
    actual = lowering.lower(parse(source), strategy="loop")
    assert canonical_text(actual) == canonical_text(parse(expected))


def test_canonical_text_sees_a_changed_op():
    source, expected = GOLDEN["sequence_and_tensor"]
    wrong = parse(expected.replace("Add(a, t)", "Sub(a, t)"))
    assert canonical_text(lowering.lower(parse(source), strategy="loop")) != canonical_text(wrong)


def test_canonical_text_sees_changed_wiring():
    source, expected = GOLDEN["sequence_and_tensor"]
    wrong = parse(expected.replace("SequenceAt(x, i)", "SequenceAt(x, n)"))
    assert canonical_text(lowering.lower(parse(source), strategy="loop")) != canonical_text(wrong)
