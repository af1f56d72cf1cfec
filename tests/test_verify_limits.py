"""Issue 35: the verifier's time limit, input kinds, tolerances, narrow floats,
random models and sequence ties (one section per family)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest

import lowering
from lowering import cli, verify
from tests.cases.verify_mutants import HEAD, KINDS, endless, kind_models
from tests.helpers import parse

# 5. A time limit (a B that never ends: tests/cases/verify_mutants.py, endless).


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_b_that_never_ends_is_stopped_and_is_a_mismatch(seed):
    a, b = endless()
    report = verify.compare(a, b, timeout=0.3, seed=seed)  # returns: B was stopped
    assert report.status == verify.MISMATCH
    assert "B ran past its time limit of 0.3 s; A took" in report.rows[0].problem
    stopped = [r for r in report.records if r.outcome == "mismatch"]
    assert stopped and all("NaN" in r.description for r in stopped)


def test_the_same_model_within_its_limit_matches():
    a, _ = endless()
    assert verify.compare(a, a, timeout=0.3).status == verify.MATCH


def test_a_that_never_ends_is_a_run_a_fails():
    a, b = endless()
    report = verify.compare(b, a, timeout=0.3, inputs={"x": np.array([1, np.nan], np.float32)})
    assert report.status == verify.COULD_NOT_COMPARE  # A's failure, not B's
    assert "A ran past its time limit of 0.3 s" in report.records[0].note


@pytest.mark.parametrize("command", ["onnx-verify", "onnx-lower --verify"])
def test_timeout_option(command, tmp_path, capsys):
    a, b = endless()
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
    a, _ = endless()
    with pytest.raises(ValueError, match="timeout"):
        verify.compare(a, a, timeout=0)


# the run of the default schedule that draws each kind
_RUN = {"huge": 17, "tiny": 18, "offset": 19, "ties": 20, "case": 20, "rank3": 20,
        "masked": 21, "wide": 22, "long": 23, "shorter": 24}  # fmt: skip


@pytest.mark.parametrize("seed", [0, 7, 1234])
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_input_kind_catches_its_wrong_rewrite_on_every_seed(kind, seed):
    a, b = kind_models(kind)
    assert verify.compare(a, a, seed=seed).status == verify.MATCH
    report = verify.compare(a, b, seed=seed, show_schedule=True)
    assert report.status == verify.MISMATCH, report.table()
    # the run drawn for this kind is itself a mismatch, not B failing to run
    record = report.records[_RUN[kind]]
    assert record.outcome == "mismatch" and record.note is None, report.table()


@pytest.mark.parametrize("kind", [k for k, (_, _, new) in KINDS.items() if new])
def test_the_runs_before_issue_35_missed_them(kind):
    report = verify.compare(*kind_models(kind), runs=17)
    assert report.status == verify.MATCH, report.table()


def test_a_run_a_rejects_is_tried_again_with_plain_values():
    # A takes no value of 1000 or more (nor NaN): the huge, offset, large and
    # special runs are drawn again with normal values, keeping their length and dims
    a = parse(
        HEAD
        + """g (float[N] x) => (float[N] y) {
        big = Constant <value = float {1000.0}> ()
        a = Abs (x)
        below = Less (a, big)
        below64 = Cast <to = 7> (below)
        ok64 = ReduceMin <keepdims = 0> (below64)
        ok = Cast <to = 9> (ok64)
        bad = Constant <value = int64[1] {-5}> ()
        shape = Shape (x)
        to = Where (ok, shape, bad)
        y = Reshape (x, to) }"""
    )
    report = verify.compare(a, a, show_schedule=True)
    retried = [r for r in report.records if "A rejected" in r.description]
    assert retried and all(r.outcome == "compared" for r in retried)


# 2. Tolerances by type, and bias. Each float type is held to its own ulps; a
# systematic error within them is a bias; rounding noise in either direction
# is not, on any seed.
_TYPES = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32", "float64"]


def _values(name: str, seed: int, size: int = 64) -> np.ndarray:
    dtype = np.dtype(getattr(ml_dtypes, name, None) or name)
    rng = np.random.default_rng(seed)
    return (rng.uniform(1, 8, size) * rng.choice([-1, 1], size)).astype(dtype)


def _held(a: np.ndarray, b: np.ndarray, tolerance=None) -> str | None:
    row = verify.Row("y", "tensor")
    verify.compare_value(row, a, b, tolerance or verify.Tolerance(), "y")
    return row.problem


def _steps(b: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """``b`` moved by ``steps`` representable values, each (ml_dtypes' nextafter)."""
    out = b.copy()
    for i, k in enumerate(steps):
        for _ in range(abs(int(k))):
            out[i] = _next(out[i], int(np.sign(k)))
    return out


def _next(value, direction: int):
    dtype = np.asarray(value).dtype
    target = np.asarray(np.inf if direction > 0 else -np.inf).astype(dtype)
    if dtype.name in ("float32", "float64", "float16"):
        return np.nextafter(value, target)
    bits = np.asarray(value).view(np.uint8 if dtype.itemsize == 1 else np.uint16)
    magnitude_up = (float(value) >= 0) == (direction > 0)
    raw = bits + 1 if magnitude_up else bits - 1
    return raw.astype(bits.dtype).view(dtype)[()]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", _TYPES)
def test_rounding_noise_of_1_or_2_ulp_passes(name, seed):
    b = _values(name, seed)
    rng = np.random.default_rng(100 + seed)
    a = _steps(b, rng.choice([-2, -1, 0, 1, 2], b.size))
    assert _held(a, b) is None


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", _TYPES)
def test_a_systematic_error_within_each_ulp_is_a_bias(name, seed):
    b = _values(name, seed)
    a = _steps(b, np.full(b.size, 3))  # every value 3 ulps up: within 8, a bias
    problem = _held(a, b)
    if name in ("float32", "float64"):  # 3 ulps pass: their tolerance is far wider
        assert problem is None
        # a fifth of the tolerance, in every element, is a bias
        share = 2e-5 if name == "float32" else 2.0**-29
        a = (b.astype(np.float64) * (1 + share)).astype(b.dtype)
        problem = _held(a, b)
    assert problem is not None and "a bias" in problem, problem


def test_bfloat16_off_by_2_5_percent_is_a_bias():
    b = _values("bfloat16", 0)
    a = (b.astype(np.float64) * 1.025).astype(ml_dtypes.bfloat16)
    assert "a bias" in _held(a, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float64_computed_in_float32_is_a_mismatch(seed):
    b = np.random.default_rng(seed).uniform(1e9, 2e9, 16)
    a = b.astype(np.float32).astype(np.float64)
    assert "values differ by more than 2**24 ulp (float64)" in _held(a, b)
    # with rtol given, float64 is held to it
    assert _held(a, b, verify.Tolerance(1e-4, 1e-5, float64_ulps=None)) is None


# A float16 sum reordered: summed in float16 from the last element on, where A
# sums in float32 and rounds once. Within 1-2 ulp; no mismatch on any run, seed.
_SUM_A = """g (float16[N] x) => (float16 y) {
    w = Cast <to = 1> (x)
    s = ReduceSum <keepdims = 0> (w)
    y = Cast <to = 10> (s) }"""
_SUM_B = """g (float16[N] x) => (float16 y) {
    zero32 = Constant <value = float {0.0}> ()
    zero = Cast <to = 10> (zero32)
    n = Size (x)
    y = Loop (n, "", zero) <body = body (int64 i, bool c, float16 t) => (bool co, float16 u) {
      co = Identity (c)
      one = Constant <value = int64 {1}> ()
      last = Sub (n, one)
      j = Sub (last, i)
      v = Gather (x, j)
      u = Add (t, v) }> }"""


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_reordered_float16_sum_passes(seed):
    a, b = parse(HEAD + _SUM_A), parse(HEAD + _SUM_B)
    report = verify.compare(a, b, seed=seed)
    assert report.status == verify.MATCH, report.table()
    assert report.rows[0].max_abs > 0  # the reordering shows (the test can fail)


# 3. bfloat16 and float8 outputs are read as floats (through a Cast to float32
# in copies of both models), in their type's ulps, -0.0 equal to +0.0.
_NARROW = {"bfloat16": 16, "float8_e4m3fn": 17, "float8_e4m3fnuz": 18, "float8_e5m2": 19,
           "float8_e5m2fnuz": 20}  # fmt: skip


def _narrow_model(to: int, body: str) -> onnx.ModelProto:
    text = onnx.helper.tensor_dtype_to_string(to).split(".")[-1].lower()
    return parse(f"""<ir_version: 9, opset_import: ["" : 21]>
    g (float[N] x) => ({text}[N] y) {{
      {body}
      y = Cast <to = {to}> (v) }}""")


@pytest.mark.parametrize("name", list(_NARROW))
def test_narrow_float_outputs_are_read_as_floats(name):
    to = _NARROW[name]
    a = _narrow_model(to, "v = Identity (x)")
    zero_added = _narrow_model(to, "z = Constant <value = float {0.0}> ()\n v = Add (x, z)")
    report = verify.compare(a, a)
    assert report.status == verify.MATCH, report.table()
    assert f"8 ulp ({name})" in report.table()
    # -0.0 + 0.0 is +0.0: equal to -0.0
    assert verify.compare(a, zero_added).status == verify.MATCH
    scaled = _narrow_model(to, "k = Constant <value = float {1.5}> ()\n v = Mul (x, k)")
    assert verify.compare(a, scaled).status == verify.MISMATCH  # float8: 1.5x is a bias
    no_nan = _narrow_model(
        to, "z = Constant <value = float {0.0}> ()\n n = IsNaN (x)\n v = Where (n, z, x)"
    )
    assert "NaN in" in verify.compare(a, no_nan).rows[0].problem


# 4. Random models: A runs twice; outputs that differ are compared by structure
# only, and the verdict is "could not compare", naming the random ops.
_NOISY = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x, float[M] t) => (seq(float) y, float[M] z) {
  y = SequenceMap <body = body (float[N] a) => (float[N] c) {
    noise = RandomNormalLike <scale = 0.1> (a)
    c = Add (a, noise)
  }> (x)
  two = Constant <value = float {2.0}> ()
  z = Mul (t, two)
}"""


@pytest.mark.parametrize("strategy", ["loop", None])
def test_a_random_model_and_its_lowering_could_not_be_compared(strategy):
    original = parse(_NOISY)
    lowered = lowering.lower(original, **({} if strategy is None else {"strategy": strategy}))
    report = verify.compare(original, lowered, runs=6)
    assert report.status == verify.COULD_NOT_COMPARE, report.table()
    assert report.exit_code == 3
    assert "'y' differ between two runs of A" in report.reason
    assert "SequenceMap" in report.reason and "not by value" in report.table()
    assert report.rows[1].random is None  # z is compared by value


def test_a_random_output_of_another_structure_or_a_wrong_plain_one_is_a_mismatch():
    original = parse(_NOISY)
    longer = parse(
        _NOISY.replace("c = Add (a, noise)", "d = Add (a, noise)\n c = Concat <axis = 0> (d, d)")
    )
    assert "shape" in verify.compare(original, longer, runs=4).rows[0].problem
    wrong_z = parse(_NOISY.replace("float {2.0}", "float {3.0}"))
    report = verify.compare(original, wrong_z, runs=4)
    assert report.status == verify.MISMATCH and report.rows[1].problem


@pytest.mark.parametrize("command", ["onnx-verify", "onnx-lower --verify"])
def test_a_random_model_exits_3_through_both_clis(command, tmp_path, capsys):
    source, out = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(parse(_NOISY), source)
    if command == "onnx-verify":
        onnx.save(lowering.lower(parse(_NOISY)), out)
        code = verify.main([str(source), str(out), "--runs", "3"])
    else:
        code = cli.main([str(source), str(out), "--verify", "--runs", "3"])
    assert code == 3
    assert "differ between two runs of A" in capsys.readouterr().err


def test_a_model_without_random_ops_runs_once():
    from lowering.verify.randomness import has_random_ops

    assert has_random_ops(parse(_NOISY))
    assert not has_random_ops(parse(_ABS_MODEL))


_ABS_MODEL = HEAD + "g (float[N] x) => (float[N] y) { y = Abs (x) }"


# 6. Sequences tied through OptionalGetElement, If, Loop and SequenceInsert:
# a map over (x, w), w derived from the input o, needs len(x) == len(w).
_DERIVED = {
    # how w is made from o: (o's type, the nodes, len(w) - len(o))
    "identity": ("seq(float[N])", "w = Identity (o)", 0),
    "optional": ("optional(seq(float[N]))", "w = OptionalGetElement (o)", 0),
    "if": ("seq(float[N])", """cond = Constant <value = bool {1}> ()
        w = If (cond) <then_branch = t () => (seq(float[N]) u) { u = Identity (o) },
                    else_branch = e () => (seq(float[N]) v) { v = Identity (o) }>""", 0),
    "loop": ("seq(float[N])", """k = Constant <value = int64 {2}> ()
        w = Loop (k, "", o) <body = b (int64 i, bool c, seq(float[N]) s)
          => (bool co, seq(float[N]) so) { co = Identity (c)
                                           so = Identity (s) }>""", 0),
    "insert": ("seq(float[N])", "w = SequenceInsert (o, t)", 1),
    "optional insert": ("optional(seq(float[N]))",
                        "g2 = OptionalGetElement (o)\n w = SequenceInsert (g2, t)", 1),
}  # fmt: skip


def _tied_model(kind: str) -> onnx.ModelProto:
    o_type, nodes, _ = _DERIVED[kind]
    return parse(f"""<ir_version: 9, opset_import: ["" : 18]>
    g (seq(float[N]) x, {o_type} o, float[N] t) => (seq(float[N]) y) {{
      {nodes}
      y = SequenceMap <body = body (float[N] a, float[N] b) => (float[N] c) {{
        c = Add (a, b) }}> (x, w)
    }}""")


@pytest.mark.parametrize("kind", list(_DERIVED))
def test_sequences_tied_through_derived_values_fit(kind):
    model = _tied_model(kind)
    groups, offsets = verify.sequence_groups(model), verify.sequence_offsets(model)
    assert groups["x"] == groups["o"]
    assert offsets["x"] - offsets["o"] == _DERIVED[kind][2]
    for _, _, feeds in verify.feed_sets(
        verify.model_ports(model, "input"), None, None, 0, None, None, [], groups, offsets
    ):
        if feeds["o"] is not None:  # absent in some runs
            assert len(feeds["x"]) == len(feeds["o"]) + _DERIVED[kind][2]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("kind", ["optional", "insert", "if"])
def test_a_right_lowering_of_a_tied_map_matches(kind, seed):
    model = _tied_model(kind)
    report = verify.compare(model, lowering.lower(model, strategy="loop"), seed=seed)
    assert report.status == verify.MATCH, report.table()
    # every run is compared (untied, o got a length of its own and A failed on
    # some); one where o is absent (OptionalGetElement fails) is drawn again with o
    for record in report.records:
        assert record.outcome == "compared", record.line()
        drawn, _, rejected = record.description.partition("; A rejected ")
        if kind == "optional" and "optional inputs absent" in rejected:
            assert "optional inputs absent" not in drawn
        else:
            assert not rejected, record.line()


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_input_kind_is_caught_on_twenty_seeds(kind):
    a, b = kind_models(kind)
    for seed in range(100, 120):
        report = verify.compare(a, b, seed=seed)
        assert report.records[_RUN[kind]].outcome == "mismatch", (seed, report.table())


def test_onnx_verify_imports_no_onnx_ir(tmp_path):
    """onnx-verify imports what a run needs: onnx (which imports ml_dtypes itself,
    most of the start-up), numpy and onnxruntime; not onnx_ir (seconds on a loaded
    machine), onnxscript, onnx.reference nor the rest of lowering."""
    import subprocess
    import sys

    path = tmp_path / "a.onnx"
    onnx.save(kind_models("huge")[0], path)
    code = (
        "import sys; from lowering.verify import main; "
        f"code = main([{str(path)!r}, {str(path)!r}, '-q', '--runs', '2']); "
        "print(code, 'onnx_ir' in sys.modules); "
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules if not m.startswith('_')}"
        " - set(sys.stdlib_module_names)))); "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('lowering.', 'onnx.')))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    verdict, packages, modules = result.stdout.splitlines()
    assert verdict.split() == ["0", "False"]
    assert set(packages.split()) <= {
        "cython_runtime", "google", "lowering", "ml_dtypes", "numpy", "onnx", "onnxruntime",
        "typing_extensions",
    }  # fmt: skip
    lowering_modules = {m for m in modules.split() if m.startswith("lowering.")}
    assert {m for m in lowering_modules if not m.startswith("lowering.verify")} <= {
        "lowering.console", "lowering.extras", "lowering.runtimes", "lowering.runtimes.sessions",
    }  # fmt: skip
    assert "onnx.reference" not in modules.split()
