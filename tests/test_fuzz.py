"""Property-based differential fuzzing: random SequenceMap models, every strategy.

For each generated model, lowered with each strategy: the output passes the
checker with no SequenceMap left (checked by ``lowered``), and onnxruntime's
results equal the numpy oracle, and onnxruntime on the original where it
runs. ``scripts/fuzz.py --examples N`` runs the same property for longer.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from tests.fuzz_models import FuzzModel, fuzz_models
from tests.helpers import assert_same, lowered, parse, run, try_run

OPTIONS = [{}, {"strategy": "loop"}, {"max_unroll": 0}]


def check(model: FuzzModel, seed: int = 0) -> None:
    source = parse(model.text)
    feeds = model.feeds(seed)
    expected = model.oracle(feeds)
    for options in OPTIONS:
        result = lowered(source, **options)
        assert_same(run(result, feeds), expected, f"output with {options}")
    original = try_run(source, feeds)
    if original is not None:
        assert_same(original, expected, "onnxruntime on the original")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzz_models())
def test_random_models_lower_correctly(model):
    check(model)


def test_an_empty_map_passing_a_tensor_straight_through():
    """An edge the generator reaches rarely: no elements, output = an extra."""
    from tests.fuzz_models import _assemble

    check(_assemble(1, 1, "construct", 0, [], [], ["u0"]))


# Shrunk failures the fuzzer found, kept as regression tests.


def test_regression_map_nested_in_an_unrolled_map():
    """Found by the fuzzer: the inner map, already a Scan, was cloned twice
    when the outer map was unrolled (its old node still held the body)."""
    from tests.fuzz_models import _assemble, _terminal

    model = _assemble(1, 0, "construct", 2, [1, 3], [_terminal("nested", "a0", "v0", None)], ["v0"])
    check(model)


def test_regression_names_inside_graphs_nested_in_unrolled_copies():
    """Found by the fuzzer: values inside a Scan nested in an unrolled body
    kept the same names in every copy (not SSA for ONNX's checker)."""
    from tests.fuzz_models import UNARY, _assemble, _terminal

    steps = [UNARY[0]("a0", "v0"), _terminal("nested", "a0", "v2", "u0")]
    check(_assemble(2, 1, "construct", 2, [1, 2], steps, ["v0", "v2"]))
