"""Each unit of lowering/verify/ through its own public API.

tests/test_verify*.py check the comparison end to end (its verdicts on
mutants, its options, its families of models); these pin down what each
module promises on its own, so that a change to one is caught where it is.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from lowering.verify.inputs import feed_sets, synthesize
from lowering.verify.npz import RUNS_KEY, read_inputs, write_inputs
from lowering.verify.ports import Port, model_ports, sequence_groups, size_inputs
from lowering.verify.report import (
    BAD_INPUTS,
    COULD_NOT_COMPARE,
    MATCH,
    MISMATCH,
    InputsError,
    Report,
    Row,
    RunRecord,
    summary,
)
from lowering.verify.runs import (
    DEFAULT_SCHEDULE,
    DIM_MODES,
    EIGHTS,
    PRIMES,
    VALUE_MODES,
    RunSpec,
    dim_size,
    schedule,
)
from lowering.verify.tolerance import Tolerance, compare_value
from lowering.verify.values import ValueRange, make_array
from tests.helpers import parse

F32, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64


# runs: the schedule.


def test_the_schedule_reaches_every_length_edge():
    lengths = [spec.length for spec in DEFAULT_SCHEDULE]
    assert {0, 1, 2, 3, 4} <= set(lengths)
    assert any(4 < n < 8 for n in lengths) and any(8 <= n <= 16 for n in lengths)
    # past --max-unroll's 16, twice, and past int8's 127 (a trip counted in int8)
    assert [n for n in lengths if n > 16] == [17, 33, 130]


def test_the_schedule_uses_every_mode_and_variation():
    assert {spec.dims for spec in DEFAULT_SCHEDULE} == set(DIM_MODES)
    assert {spec.values for spec in DEFAULT_SCHEDULE} == set(VALUE_MODES)
    for flag in ("override", "absent", "independent", "shorter"):
        assert any(getattr(spec, flag) for spec in DEFAULT_SCHEDULE), flag


def test_the_schedule_cycles_past_its_end():
    total = len(DEFAULT_SCHEDULE)
    assert schedule() == list(DEFAULT_SCHEDULE)
    assert schedule(1) == [DEFAULT_SCHEDULE[0]]
    assert schedule(2 * total + 1)[total:] == [*DEFAULT_SCHEDULE, DEFAULT_SCHEDULE[0]]


@pytest.mark.parametrize(
    ("mode", "allowed"),
    [
        ("random", {1, 2, 3, 4}),
        ("ones", {1}),
        ("large", {5, 6, 7}),
        ("zero", {0}),
        ("primes", set(PRIMES)),
        ("eights", set(EIGHTS)),
    ],
)
def test_each_dim_mode_draws_its_sizes(mode, allowed):
    rng = np.random.default_rng(0)
    drawn = {dim_size(mode, rng) for _ in range(300)}
    assert drawn == allowed


def test_a_run_describes_itself_as_the_schedule_prints_it():
    spec = RunSpec(2, "large", "zeros", override=True, independent=True)
    assert spec.describe() == (
        "length 2, dims 5..7, mostly zeros, initializers overridden, "
        "untied sequences of their own lengths"
    )


# ports: what the comparison reads of a model's inputs.

# n reaches a Loop's trip count only inside a model-local function, under
# another name; k is data.
TRIPS_IN_A_FUNCTION = """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (int64 n, int64 k, float x) => (float y, int64 z) {
  y = local.repeat(n, x)
  z = Add(k, k)
}
<domain: "local", opset_import: ["" : 17]>
repeat (trips, v) => (out) {
  t = Identity(trips)
  go = Constant <value = bool {1}> ()
  out = Loop(t, go, v) <body = step (int64 i, bool c, float acc) => (bool c2, float acc2) {
    c2 = Identity(c)
    acc2 = Add(acc, acc)
  }>
}"""


def test_an_int_that_reaches_a_loop_trip_count_through_a_function_is_a_size():
    model = parse(TRIPS_IN_A_FUNCTION)
    assert size_inputs(model) == {"n"}
    counts = {port.name: port.count for port in model_ports(model, "input")}
    assert counts == {"n": True, "k": False, "x": False}


def test_a_size_input_is_fed_small_values_and_data_is_not():
    ports = model_ports(parse(TRIPS_IN_A_FUNCTION), "input")
    seen: dict[str, list[int]] = {"n": [], "k": []}
    for _, _, feeds in feed_sets(ports, None, None, 0, None, None, []):
        for name, found in seen.items():
            found.append(abs(int(feeds[name])))
    assert max(seen["n"]) <= 1000 < max(seen["k"])


# k reaches a size only through an op that reads no value of it: k is data.
_BLIND = {
    "Shape": "s = Shape (k)\n y = Reshape (k, s)",
    "Size": "s = Size (k)\n y = Range (zero, s, one)",
    "EyeLike": "e = EyeLike (k2)\n s = Shape (e)\n y = Reshape (k, s)",
    "SequenceLength": "q = SequenceConstruct (k)\n s = SequenceLength (q)\n y = Range (zero, s, one)",
    "OptionalHasElement": "o = Optional (k)\n h = OptionalHasElement (o)\n"
    " s = Cast <to = 7> (h)\n y = Range (zero, s, one)",
}


@pytest.mark.parametrize("op", list(_BLIND))
def test_an_int_whose_shape_alone_reaches_a_size_is_data(op):
    template = """<ir_version: 9, opset_import: ["" : 18]>
    g (int64[N] k) => (int64 y) {
      zero = Constant <value = int64 {0}> ()
      one = Constant <value = int64 {1}> ()
      k2 = Unsqueeze (k, zero)
      BODY }"""
    model = parse(template.replace("BODY", _BLIND[op]))
    assert size_inputs(model) == set()
    assert size_inputs(parse(template.replace("BODY", "y = Reshape (one, k)"))) == {"k"}
    # data: the large run draws ints beyond int16
    ports = model_ports(model, "input")
    largest = max(
        int(np.abs(feeds["k"]).max(initial=0))
        for _, _, feeds in feed_sets(ports, None, None, 0, None, None, [])
    )
    assert largest > 2**15


OPTIONAL_AND_DEFAULT = """<ir_version: 9, opset_import: ["" : 18]>
g (seq(float[N]) s, optional(float[3]) bias, float[2] w) => (float[2] y) <float[2] w = {1, 2}> {
  y = Identity(w)
}"""


def test_ports_read_sequences_optionals_and_overridable_initializers():
    by_name = {p.name: p for p in model_ports(parse(OPTIONAL_AND_DEFAULT), "input")}
    assert by_name["s"].sequence and by_name["s"].dims == ("N",)
    assert (
        by_name["s"].kind() == "seq(tensor(float))" and by_name["s"].declared() == "seq(float[N])"
    )
    assert by_name["bias"].optional and by_name["bias"].kind() == "optional(tensor(float))"
    assert by_name["w"].default is not None and by_name["w"].default.tolist() == [1.0, 2.0]
    assert sequence_groups(parse(OPTIONAL_AND_DEFAULT)) == {"s": 0, "bias": 1}


# inputs and values: one run's feeds.


def test_a_tensor_dim_is_one_size_across_inputs_and_sequences_keep_the_run_length():
    ports = [
        Port("t", False, F32, ("N", 2)),
        Port("u", False, F32, ("N",)),
        Port("s", True, F32, ("N", "H")),
    ]
    feeds, bound = synthesize(ports, RunSpec(4, "large"), np.random.default_rng(1), fixed={})
    n = bound["N"]
    assert feeds["t"].shape == (n, 2) and feeds["u"].shape == (n,)
    assert len(feeds["s"]) == 4 and all(element.shape[0] == n for element in feeds["s"])


def test_given_inputs_are_converted_only_when_no_value_changes():
    ports = [Port("x", False, F32, (2,)), Port("i", False, onnx.TensorProto.INT32, (1,))]
    notes: list[str] = []
    given = {"x": np.array([0.5, 1.0]), "i": np.array([3.0])}
    ((_, _, feeds),) = feed_sets(ports, given, None, 0, None, None, notes)
    assert feeds["x"].dtype == np.float32 and feeds["i"].dtype == np.int32
    assert len(notes) == 2
    with pytest.raises(InputsError, match="converting would change values"):
        feed_sets(ports, {"x": given["x"], "i": np.array([0.5])}, None, 0, None, None, [])


def test_a_value_range_bounds_every_mode():
    port = Port("x", False, F32, (50,))
    rng = np.random.default_rng(0)
    for mode in VALUE_MODES:
        array = make_array(port, (50,), mode, ValueRange(-1.0, 2.0), rng)
        assert array.dtype == np.float32 and np.all((array >= -1) & (array <= 2)), mode


def test_a_value_range_that_holds_no_int_is_refused():
    port = Port("k", False, onnx.TensorProto.UINT8, ())
    with pytest.raises(InputsError, match="holds no uint8"):
        make_array(port, (), "normal", ValueRange(-3.0, -1.0), np.random.default_rng(0))


# tolerance: how close two values must be.

ULP_AT_MAX = 32.0  # float16 has 10 mantissa bits: 32768..65504 are 2**5 apart


def _matches(a, b, tolerance: Tolerance | None = None) -> bool:
    row = Row("y", "tensor(float16)")
    a, b = np.asarray(a, np.float16), np.asarray(b, np.float16)
    compare_value(row, a, b, tolerance or Tolerance(), "y")
    return row.problem is None


@pytest.mark.parametrize(("b", "ulp"), [(1.0, 2.0**-10), (1000.0, 0.5), (-1000.0, 0.5)])
def test_float16_passes_8_ulps_and_fails_9(b, ulp):
    assert _matches([b + 8 * ulp], [b])
    assert not _matches([b + 9 * ulp], [b])


def test_float16_below_1_is_held_to_the_ulps_of_1():
    assert _matches([8 * 2.0**-10], [0.0])
    assert not _matches([9 * 2.0**-10], [0.0])


def test_float16_at_its_largest_finite_value():
    largest = float(np.finfo(np.float16).max)
    assert _matches([largest - 8 * ULP_AT_MAX], [largest])
    assert not _matches([largest - 9 * ULP_AT_MAX], [largest])


def test_nan_matches_only_nan_and_infinities_only_themselves():
    assert _matches([np.nan, 1.0], [np.nan, 1.0])
    assert not _matches([np.nan], [1.0]) and not _matches([1.0], [np.nan])
    assert _matches([np.inf, -np.inf], [np.inf, -np.inf])
    assert not _matches([np.inf], [-np.inf])
    assert not _matches([np.inf], [np.finfo(np.float16).max])


def test_more_ulps_widen_the_tolerance_and_each_type_says_its_own():
    assert _matches([1.0 + 9 * 2.0**-10], [1.0], Tolerance(ulps=9))
    assert Tolerance().describe(np.dtype(np.float16)) == "8 ulp (float16)"
    assert Tolerance().describe(np.dtype(np.float32)) == "rtol 0.0001, atol 1e-05"


def test_sequences_are_compared_element_by_element():
    row = Row("s", "seq(tensor(float))")
    a = [np.zeros(2, np.float32), np.ones(2, np.float32)]
    compare_value(row, a, [a[0], a[1] + 1], Tolerance(), "s")
    assert row.problem is not None and row.problem.startswith("s[1]: values differ")
    short = Row("s", "seq(tensor(float))")
    compare_value(short, a, a[:1], Tolerance(), "s")
    assert short.problem == "s: 2 elements in A, 1 in B"


# npz: inputs files.

PORTS = [
    Port("x", False, F32, (2,)),
    Port("s", True, F32, ("N",)),
    Port("e", True, F32, ("N",)),
    Port("o", False, F32, (3,), optional=True),
    Port("w", False, onnx.TensorProto.STRING, (1,)),
]


def test_one_run_round_trips_with_an_absent_optional_and_an_empty_sequence(tmp_path):
    path = tmp_path / "run.npz"
    feeds = {
        "x": np.array([1.0, 2.0], np.float32),
        "s": [np.array([3.0], np.float32), np.array([4.0, 5.0], np.float32)],
        "e": [],
        "o": None,
        "w": np.array(["ünï"], dtype=object),
    }
    with open(path, "wb") as stream:
        write_inputs(stream, [(4, feeds)])
    with np.load(path) as stored:
        assert sorted(stored.files) == ["e[]", "o()", "s[0]", "s[1]", "w", "x"]
    ((label, back),) = read_inputs(str(path), PORTS)
    assert label == 0 and back["o"] is None and back["e"] == []
    assert [a.tolist() for a in back["s"]] == [[3.0], [4.0, 5.0]]
    assert back["x"].tolist() == [1.0, 2.0] and back["w"].tolist() == ["ünï"]


def test_several_runs_keep_their_labels(tmp_path):
    path = tmp_path / "runs.npz"
    runs = [(3, {"x": np.zeros(2, np.float32)}), (7, {"x": np.ones(2, np.float32)})]
    with open(path, "wb") as stream:
        write_inputs(stream, runs)
    with np.load(path) as stored:
        assert stored[RUNS_KEY].tolist() == [3, 7] and "7/x" in stored.files
    back = read_inputs(str(path), [PORTS[0]])
    assert [(label, feeds["x"].tolist()) for label, feeds in back] == [
        (3, [0.0, 0.0]),
        (7, [1.0, 1.0]),
    ]


def test_an_absent_key_for_an_input_that_is_not_optional_is_refused(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, **{"x()": np.zeros(0)})
    with pytest.raises(InputsError, match="'x\\(\\)' is not an input of the model"):
        read_inputs(str(path), [PORTS[0]])


# report: statuses, exit codes, the table.


def _report(*, failed: bool = False, input_error=None, reason=None) -> Report:
    row = Row("y", "tensor(float)")
    if failed:
        row.fail("run 0: y: 1 of 2 values differ")
    return Report([row], 1, reason=reason, input_error=input_error)


def test_a_mismatch_wins_over_bad_inputs_which_win_over_could_not_compare():
    assert (_report().status, _report().exit_code) == (MATCH, 0)
    assert _report(failed=True, input_error="x", reason="y").exit_code == 1
    assert _report(failed=True).status == MISMATCH
    assert (_report(input_error="x", reason="y").status, _report(input_error="x").exit_code) == (
        BAD_INPUTS,
        2,
    )
    assert (_report(reason="A fails").status, _report(reason="A fails").exit_code) == (
        COULD_NOT_COMPARE,
        3,
    )


def test_runs_with_the_same_fate_share_a_line_and_mismatches_are_listed():
    report = _report(failed=True)
    report.records = [
        RunRecord(0, "length 3", "mismatch"),
        RunRecord(1, "length 0", "skipped", "A fails"),
        RunRecord(2, "length 1", "skipped", "A fails"),
        RunRecord(3, "length 2"),
    ]
    lines = report.table().splitlines()
    assert lines[1].endswith("MISMATCH: run 0: y: 1 of 2 values differ")
    assert lines[2:] == ["(1 of 4 runs compared)", "run 0: mismatch", "runs 1, 2: skipped: A fails"]
    assert report.mismatched() == ["y"]
    assert summary(report, "a.onnx", "b.onnx") == "b.onnx does not match a.onnx: 'y'"


def test_bad_inputs_print_only_why():
    report = _report(input_error="in.npz has no value for input(s) x")
    assert report.table() == "cannot use the inputs: in.npz has no value for input(s) x"
    assert summary(_report(), "a", "b") == "b matches a on every output"
