"""Random models get a verdict wherever their random op is (issue 35, family 4): in
the main graph, an If branch, a Loop, Scan or SequenceMap body, a model-local
function (called from the main graph or from a body, or holding a Loop), and
each random op (a Dropout given a training_mode too). A runs twice; an output
that differs is compared by structure only, its random ops named, and the
verdict is "could not compare" (exit 3) unless something else differs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from lowering import verify
from lowering.verify.randomness import has_random_ops, random_sources
from tests.helpers import parse

_HEAD = '<ir_version: 9, opset_import: ["" : 20, "local" : 1]>\n'

#: where -> (the model, with NOISE for the random node that makes n from a; the op
#: that holds it in the main graph)
_PLACES = {
    "main graph": ("""g (float[N] x) => (float[N] y) {
        a = Identity (x)
        NOISE
        y = Add (x, n) }""", None),
    "If branch": ("""g (float[N] x) => (float[N] y) {
        c = Constant <value = bool {1}> ()
        y = If (c) <
          then_branch = t () => (float[N] u) { a = Identity (x)
            NOISE
            u = Add (x, n) },
          else_branch = e () => (float[N] v) { v = Identity (x) }> }""", "If"),
    "Loop body": ("""g (float[N] x) => (float[N] y) {
        trips = Constant <value = int64 {2}> ()
        go = Constant <value = bool {1}> ()
        y = Loop (trips, go, x) <body = b (int64 i, bool c, float[N] a) => (bool c2, float[N] o) {
          c2 = Identity (c)
          NOISE
          o = Add (a, n) }> }""", "Loop"),
    "Scan body": ("""g (float[N] x, float[T,N] xs) => (float[N] last, float[T,N] y) {
        last, y = Scan <num_scan_inputs = 1, body = b (float[N] s, float[N] a) => (float[N] s2, float[N] o) {
          s2 = Add (s, a)
          NOISE
          o = Add (a, n) }> (x, xs) }""", "Scan"),
    "SequenceMap body": ("""g (seq(float[N]) x) => (seq(float) y) {
        y = SequenceMap <body = b (float[N] a) => (float[N] o) {
          NOISE
          o = Add (a, n) }> (x) }""", "SequenceMap"),
    "function": ("""g (float[N] x) => (float[N] y) { y = local.Noisy (x) }
        <domain: "local", opset_import: ["" : 20]>
        Noisy (a) => (b) {
          NOISE
          b = Add (a, n) }""", "Noisy"),
    "function in a Loop body": ("""g (float[N] x) => (float[N] y) {
        trips = Constant <value = int64 {2}> ()
        go = Constant <value = bool {1}> ()
        y = Loop (trips, go, x) <body = b (int64 i, bool c, float[N] a) => (bool c2, float[N] o) {
          c2 = Identity (c)
          o = local.Noisy (a) }> }
        <domain: "local", opset_import: ["" : 20]>
        Noisy (a) => (b) {
          NOISE
          b = Add (a, n) }""", "Loop"),
    "Loop in a function": ("""g (float[N] x) => (float[N] y) { y = local.Looped (x) }
        <domain: "local", opset_import: ["" : 20]>
        Looped (x) => (y) {
          trips = Constant <value = int64 {2}> ()
          go = Constant <value = bool {1}> ()
          y = Loop (trips, go, x) <body = b (int64 i, bool c, float[N] a) => (bool c2, float[N] o) {
            c2 = Identity (c)
            NOISE
            o = Add (a, n) }> }""", "Looped"),
}  # fmt: skip

#: op -> the node that makes n, random, from a (of the same shape)
_OPS = {
    "RandomNormalLike": "n = RandomNormalLike <dtype = 1> (a)",
    "RandomUniformLike": "n = RandomUniformLike <dtype = 1> (a)",
    "Bernoulli": """p = Sigmoid (a)
          n = Bernoulli <dtype = 1> (p)""",
    "Dropout": """ratio = Constant <value = float {0.5}> ()
          train = Constant <value = bool {1}> ()
          n = Dropout (a, ratio, train)""",
}


def _model(place: str, op: str = "RandomNormalLike") -> onnx.ModelProto:
    return parse(_HEAD + _PLACES[place][0].replace("NOISE", _OPS[op]))


def _cases() -> list:
    return [
        pytest.param(place, op, id=f"{place}-{op}")
        for place in _PLACES
        for op in _OPS
        # onnxruntime cannot load a Bernoulli (a function it inlines) in a
        # SequenceMap body: "input '_inlfunc_Bernoulli_X_greater' ... is not output
        # of any previous nodes"
        if (place, op) != ("SequenceMap body", "Bernoulli")
    ]


@pytest.mark.parametrize(("place", "op"), _cases())
def test_a_random_op_anywhere_is_found_and_could_not_be_compared(place, op):
    model = _model(place, op)
    assert has_random_ops(model)
    holder = _PLACES[place][1]
    output = len(model.graph.output) - 1  # y
    sources = random_sources(model, output)
    if holder is None:
        assert sources == [f"{op} 'n'"]
    else:
        assert len(sources) == 1 and sources[0].startswith(f"{op} in {holder} "), sources
    # Inputs of 64 ones each: two runs of A agree by chance with a probability under
    # 1e-14 (a Bernoulli's p is sigmoid(1); Dropout keeps or drops each one), where a
    # drawn run may give only p of 0 or 1, or zeros that any mask keeps (and agree)
    ones = np.ones(64, np.float32)
    feeds = {
        "Scan body": {"x": ones, "xs": np.ones((2, 64), np.float32)},
        "SequenceMap body": {"x": [ones, ones]},
    }.get(place, {"x": ones})
    report = verify.compare(model, model, inputs=feeds)
    assert report.status == verify.COULD_NOT_COMPARE, report.table()
    assert report.exit_code == 3
    assert "differ between two runs of A" in report.reason and op in report.reason
    if holder is not None:
        assert f"in {holder} " in report.reason


@pytest.mark.parametrize("place", list(_PLACES))
def test_a_random_model_against_another_structure_is_a_mismatch(place):
    model = _model(place)
    # B adds the noise twice along the last axis: a shape differs on every run
    other = _model(place)
    for graph in _graphs(other):
        for node in graph.node:
            if node.op_type == "Add" and "n" in node.input:
                node.op_type = "Concat"
                node.attribute.append(onnx.helper.make_attribute("axis", -1))
    report = verify.compare(model, other, runs=4)
    assert report.status == verify.MISMATCH, report.table()
    assert "shape" in report.table()


def _graphs(model: onnx.ModelProto) -> list[onnx.GraphProto]:
    found = [model.graph, *[f for f in model.functions]]
    graphs: list = []
    while found:
        graph = found.pop()
        graphs.append(graph)
        for node in graph.node:
            for attribute in node.attribute:
                found += [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
    return graphs


def test_a_dropout_without_a_training_mode_is_not_random():
    model = parse(_HEAD + _PLACES["main graph"][0].replace("NOISE", "n = Dropout (a)"))
    assert not has_random_ops(model)
    assert verify.compare(model, model, runs=3).status == verify.MATCH
