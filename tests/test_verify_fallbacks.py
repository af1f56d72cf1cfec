"""A run A rejects is drawn again (issue 35: "where the model rejects an input, try
the next kind of input rather than skipping the family"): for each kind of
input a run draws (values, dims, length, untied lengths, an absent optional,
an overridden initializer), a model that rejects only that kind has every
run drawing it drawn again with that kind put back to its plain form and
every other kind kept, whether B runs in onnxruntime or in another runtime."""

from __future__ import annotations

import dataclasses

import onnx
import pytest

from lowering import verify
from lowering.verify.runs import fallbacks
from tests.cases.verify_mutants import kind_models
from tests.helpers import parse

_HEAD = '<ir_version: 9, opset_import: ["" : 20]>\n'

# A fails where ``ok`` is false (a Cast of the string "no" to float; no size or
# index, which the synthesis would keep small); the rest computes y = x.
_GUARD = """
        one = Constant <value = string {"1"}> ()
        word = Constant <value = string {"no"}> ()
        text = Where (ok, one, word)
        f = Cast <to = 1> (text)
        y = Mul (x, f) }"""

#: kind -> (A, the RunSpec fields that kind is drawn by)
_REJECTS = {
    # no value of 1000 or more, nor NaN
    "values": ("""g (float[N] x) => (float[N] y) {
        big = Constant <value = float {1000.0}> ()
        a = Abs (x)
        below = Less (a, big)
        below64 = Cast <to = 7> (below)
        ok64 = ReduceMin <keepdims = 0> (below64)
        ok = Cast <to = 9> (ok64)""" + _GUARD, ("values",)),
    # no dim of 5 or more
    "dims": ("""g (float[N] x) => (float[N] y) {
        five = Constant <value = int64 {5}> ()
        n = Shape (x)
        big = GreaterOrEqual (n, five)
        big64 = Cast <to = 7> (big)
        any = ReduceMax <keepdims = 0> (big64)
        zero = Constant <value = int64 {0}> ()
        ok = Equal (any, zero)""" + _GUARD, ("dims",)),
    # no sequence longer than 9
    "length": ("""g (seq(float[N]) s, float[M] x) => (float[M] y) {
        n = SequenceLength (s)
        nine = Constant <value = int64 {9}> ()
        ok = LessOrEqual (n, nine)""" + _GUARD, ("length",)),
    # two sequences no map ties together, of one length
    "untied": ("""g (seq(float[N]) s, seq(float[N]) t, float[M] x) => (float[M] y) {
        n = SequenceLength (s)
        m = SequenceLength (t)
        ok = Equal (n, m)""" + _GUARD, ("independent", "shorter")),
    # an optional input that must be present
    "absent": ("""g (optional(float[N]) o) => (float[N] y) {
        y = OptionalGetElement (o) }""", ("absent",)),
    # an initializer that must keep its value
    "override": ("""g (float[N] x, float[1] k) => (float[N] y)
        <float[1] k = {1.0}> {
        unit = Constant <value = float[1] {1.0}> ()
        same = Equal (k, unit)
        ok = Squeeze (same)""" + _GUARD, ("override",)),
}  # fmt: skip

#: The kinds drawn for B in another runtime (tensors only, initializers not fed).
_TENSOR_KINDS = ("values", "dims")


def _redrawn(report: verify.Report, runs: list[verify.RunSpec]):
    """(label, the spec the run was meant to be, the spec it was drawn as) for every
    run A rejected and took in another form."""
    lengths: list[int] = []  # the lengths A took so far, as the comparison keeps them
    for record in report.records:
        if record.outcome in ("compared", "mismatch"):
            taken = int(record.description.split(",")[0].removeprefix("length "))
        if "; A rejected " not in record.description:
            if record.outcome in ("compared", "mismatch"):
                lengths.append(taken)
            continue
        spec = runs[record.label]
        drawn = record.description.split("; ")[0]
        found = [other for other in fallbacks(spec, lengths) if other.describe() == drawn]
        assert found, record.line()
        lengths.append(taken)
        yield record.label, spec, found[0]


@pytest.mark.parametrize("runtime", ["onnxruntime", "tract", "openvino"])
@pytest.mark.parametrize("kind", list(_REJECTS))
def test_a_run_a_rejects_is_drawn_again_keeping_every_other_kind(kind, runtime):
    if runtime != "onnxruntime":
        if kind not in _TENSOR_KINDS:
            pytest.skip(f"{runtime} takes no sequence, optional or initializer")
        pytest.importorskip(runtime)
    text, fields = _REJECTS[kind]
    a = parse(_HEAD + text)
    # B elsewhere: y = x (the guard is A's)
    b = (
        a
        if runtime == "onnxruntime"
        else parse(_HEAD + text.split("{")[0] + "{ y = Identity (x) }")
    )
    report = verify.compare(a, b, runtime=runtime)
    assert report.status == verify.MATCH, report.table()
    runs = list(verify.DEFAULT_SCHEDULE)
    redrawn = list(_redrawn(report, runs))
    assert redrawn, report.table()
    for label, spec, drawn in redrawn:
        changed = {
            f.name
            for f in dataclasses.fields(spec)
            if getattr(spec, f.name) != getattr(drawn, f.name)
        }
        assert changed and changed <= set(fields), (label, spec, drawn)
        assert report.records[label].outcome == "compared", report.records[label].line()
    # every run is compared, but a plain run, which has no other kind to keep
    for record in report.records:
        spec = runs[record.label]
        plain = spec == verify.RunSpec(spec.length)
        assert record.outcome == "compared" or plain, record.line()


def test_a_length_a_rejects_is_moved_to_the_nearest_length_it_took():
    report = verify.compare(
        parse(_HEAD + _REJECTS["length"][0]), parse(_HEAD + _REJECTS["length"][0])
    )
    lengths = {
        label: drawn.length for label, _, drawn in _redrawn(report, list(verify.DEFAULT_SCHEDULE))
    }
    # 17 (dims 8k), 13 (primes, NaN), 33 (dims 1, large), 130 (dims 1): at 9 or 8
    assert set(lengths) == {12, 13, 14, 23}, report.table()
    assert set(lengths.values()) <= {8, 9}


@pytest.mark.parametrize("runtime", ["onnxruntime", "tract"])
@pytest.mark.parametrize("caught", ["tiny", "offset"])
def test_a_wrong_rewrite_seen_only_in_a_run_a_rejects_is_caught(caught, runtime):
    """Run 18 (subnormals) and 19 (a large mean) draw dims of 5..7, which this A
    rejects: drawn again with dims 1..4, they still draw their values, and a B
    wrong only on them is caught (with --runtime, the run was skipped before
    and the verdict was a match)."""
    if runtime != "onnxruntime":
        pytest.importorskip(runtime)
    guard = parse(_HEAD + _REJECTS["dims"][0])
    a, b = kind_models(caught)
    out = a.graph.output[0].name  # then A's guard: y = out where x's dims are below 5
    for node in guard.graph.node:
        added = a.graph.node.add()
        added.CopyFrom(node)
        if node.output[0] == "y":
            added.input[0], added.output[0] = out, out + "_guarded"
    a.graph.output[0].name = out + "_guarded"
    b.graph.output[0].name = out + "_guarded"
    b.graph.node.add().CopyFrom(onnx.helper.make_node("Identity", [out], [out + "_guarded"]))
    report = verify.compare(a, b, runtime=runtime)
    assert report.status == verify.MISMATCH, report.table()
    record = report.records[{"tiny": 18, "offset": 19}[caught]]
    assert record.outcome == "mismatch" and "A rejected" in record.description, record.line()


def test_fallbacks_put_back_one_kind_at_a_time_then_all_then_move_the_length():
    spec = verify.RunSpec(13, "primes", "special", absent=True, independent=True)
    tried = fallbacks(spec, [0, 3, 9, 33])
    plain = verify.RunSpec(13)
    assert tried[:5] == [
        dataclasses.replace(spec, values="normal"),
        dataclasses.replace(spec, dims="random"),
        dataclasses.replace(spec, independent=False),
        dataclasses.replace(spec, absent=False),
        plain,
    ]
    # then at the nearest lengths A took (never 0), then all plain at the nearest
    assert tried[5:] == [
        dataclasses.replace(spec, length=9),
        dataclasses.replace(spec, length=3),
        verify.RunSpec(9),
    ]
    assert fallbacks(plain, [3, 9]) == []  # the empty run 1 stays as it is
    assert fallbacks(verify.RunSpec(130, "ones"), [0]) == [verify.RunSpec(130)]


def test_a_run_a_never_ends_on_is_tried_once_more_in_its_plain_form(monkeypatch):
    """A's Loop never ends once x holds NaN: each run that draws NaN is stopped at
    its limit, then drawn once more with plain values (each try may take the
    whole limit, so no other form is tried) and compared."""
    from lowering.verify import comparison
    from tests.cases.verify_mutants import endless

    _, endless = endless()
    stopped: list[str] = []
    run = comparison._try_run

    def counted(*args, **kwargs):
        outcome = run(*args, **kwargs)
        if outcome[1] and comparison.PAST_LIMIT in outcome[1]:
            stopped.append(outcome[1])
        return outcome

    monkeypatch.setattr(comparison, "_try_run", counted)
    report = verify.compare(endless, endless, timeout=0.3)
    assert report.status == verify.MATCH, report.table()
    redrawn = [r for r in report.records if "A rejected" in r.description]
    assert redrawn and all(r.outcome == "compared" for r in redrawn)
    assert all(PAST in r.description and "normal values" in r.description for r in redrawn)
    assert len(stopped) == len(redrawn)  # one stop per run: the plain form ends


PAST = "A ran past its time limit of 0.3 s"
