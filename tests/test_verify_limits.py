"""Issue 35: the verifier's time limit, input kinds, tolerances, narrow floats,
random models and sequence ties (one section per family)."""

from __future__ import annotations

import time

import onnx
import pytest

from lowering import cli, verify
from tests.helpers import parse

# 5. A time limit. B's Loop has no trip count and goes on while i < 2 (3
# trips), or forever once the sum of x is NaN; A's Loop stops at 3 trips.
# Both compute x + 6.
_ENDLESS = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (float[N] y) {{
  t = ReduceSum <keepdims = 0> (x)
  nan = IsNaN (t)
  three = Constant <value = int64 {{3}}> ()
  two_trips = Constant <value = int64 {{2}}> ()
  go = Constant <value = bool {{1}}> ()
  y = Loop ({trips}, go, x) <body = body (int64 i, bool c, float[N] v) => (bool co, float[N] vo) {{
    below = Less (i, two_trips)
    co = {cond}
    two = Constant <value = float {{2.0}}> ()
    vo = Add (v, two)
  }}>
}}
"""


def _endless() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    a = parse(_ENDLESS.format(trips="three", cond="Identity (c)"))
    b = parse(_ENDLESS.format(trips='""', cond="Or (below, nan)"))
    return a, b


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_b_that_never_ends_is_stopped_and_is_a_mismatch(seed):
    a, b = _endless()
    start = time.perf_counter()
    report = verify.compare(a, b, timeout=0.3, seed=seed)
    assert time.perf_counter() - start < 10
    assert report.status == verify.MISMATCH
    assert "B ran past its time limit of 0.3 s; A took" in report.rows[0].problem
    stopped = [r for r in report.records if r.outcome == "mismatch"]
    assert stopped and all("NaN" in r.description for r in stopped)


def test_the_same_model_within_its_limit_matches():
    a, _ = _endless()
    assert verify.compare(a, a, timeout=0.3).status == verify.MATCH


def test_a_that_never_ends_is_a_run_a_fails():
    a, b = _endless()
    report = verify.compare(b, a, timeout=0.3)
    assert report.status == verify.MATCH  # the NaN runs are A's failures, not B's
    notes = [r.note for r in report.records if r.outcome == "skipped"]
    assert notes and all("A ran past its time limit of 0.3 s" in note for note in notes)


@pytest.mark.parametrize("command", ["onnx-verify", "onnx-lower --verify"])
def test_timeout_option(command, tmp_path, capsys):
    a, b = _endless()
    path_a, path_b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(a, path_a)
    onnx.save(b, path_b)
    if command == "onnx-verify":
        code = verify.main([str(path_a), str(path_b), "--timeout", "0.3"])
        assert code == 1
        assert "ran past its time limit of 0.3 s" in capsys.readouterr().err
    else:  # the lowering of a model without maps is itself: the option reaches compare
        code = cli.main([str(path_a), str(tmp_path / "out.onnx"), "--verify", "--timeout", "0.3"])
        assert code == 0
    with pytest.raises(SystemExit):
        verify.main([str(path_a), str(path_b), "--timeout", "0"])


def test_timeout_keyword_is_checked():
    a, _ = _endless()
    with pytest.raises(ValueError, match="timeout"):
        verify.compare(a, a, timeout=0)
