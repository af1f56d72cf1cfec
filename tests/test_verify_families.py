"""The verifier with default options catches every family of wrong rewrite of
issue 22, and blesses the right ones.

Each family has a mutant: a right lowering made wrong where the old schedule
never looked. Each mutant is first shown to differ from the original in
onnxruntime on a witness input (so it is really wrong), then
``verify.compare`` with default options must say "mismatch" (exit 1), while
the right lowering of the same original gets exit 0.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest

import lowering
from lowering import cli, verify
from tests.helpers import parse, session

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _loop(text: str) -> onnx.ModelProto:
    """The right lowering, in the general Loop form that the mutants edit."""
    return lowering.lower(parse(text), strategy="loop")


def _loops(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [node for node in model.graph.node if node.op_type == "Loop"]


def _body(loop: onnx.NodeProto) -> onnx.GraphProto:
    return next(a.g for a in loop.attribute if a.name == "body")


def _nodes(text: str) -> list[onnx.NodeProto]:
    return list(onnx.parser.parse_graph(f"g () => () {{ {text} }}").node)


def _replace_output(graph: onnx.GraphProto, op_type: str, new: str, nodes: str) -> None:
    """The first ``op_type`` node of ``graph`` writes ``new``; ``nodes`` (ONNX text)
    then compute its old output, right after it."""
    node = next(n for n in graph.node if n.op_type == op_type)
    old, node.output[0] = node.output[0], new
    position = list(graph.node).index(node) + 1
    for offset, made in enumerate(_nodes(nodes.replace("OUT", old))):
        graph.node.insert(position + offset, made)


def _run(model: onnx.ModelProto, feeds: dict):
    """onnxruntime's outputs, or the error it raised."""
    try:
        return session(model).run(None, feeds)
    except Exception as error:  # noqa: BLE001 -- onnxruntime raises many kinds
        return error


def _same(a, b) -> bool:
    if isinstance(a, Exception) or isinstance(b, Exception):
        return False
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.allclose(a, b, equal_nan=True)


def _assert_differs(original, mutant, feeds) -> None:
    got, expected = _run(mutant, feeds), _run(original, feeds)
    assert not isinstance(expected, Exception), expected
    assert not _same(got, expected), "the mutant is not wrong on its witness"


MAP = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x, float[N] t) => (seq(float[N]) y) {
  y = SequenceMap <body = body (float[N] a, float[N] b) => (float[N] c) { c = Mul(a, b) }> (x, t)
}"""


def _elements(n: int, size: int, dtype=np.float32, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(size).astype(dtype) for _ in range(n)]


# 1. Lengths past every limit of the tool: a trip count capped at 16.


def _capped_at_16() -> onnx.ModelProto:
    model = _loop(MAP)
    loop = _loops(model)[0]
    capped = _nodes("cap = Constant <value = int64 {16}> () capped = Min(TRIPS, cap)")
    capped[1].input[0] = loop.input[0]
    loop.input[0] = "capped"
    position = list(model.graph.node).index(loop)
    for offset, node in enumerate(capped):
        model.graph.node.insert(position + offset, node)
    return model


# 2. Dims of 0: a rewrite that raises only on empty elements.


def _raises_on_empty_elements() -> onnx.ModelProto:
    model = _loop(MAP)
    _replace_output(
        _body(_loops(model)[0]),
        "Mul",
        "product",
        # ArgMax of an empty element raises; its index times 0 is 0 otherwise
        "where = ArgMax <keepdims = 1> (a) zero = Constant <value = int64 {0}> () "
        "nothing = Mul(where, zero) as_float = Cast <to = 1> (nothing) "
        "OUT = Add(product, as_float)",
    )
    return model


# 2. Dims of 8k: a body defined only where a dim is a multiple of 8 (heads).
HEADS = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y) {
  y = SequenceMap <body = body (float[N] a) => (float[N] c) {
    heads = Constant <value = int64[2] {-1, 8}> ()
    per_head = Reshape(a, heads)
    scores = Softmax <axis = -1> (per_head)
    back = Shape(a)
    c = Reshape(scores, back)
  }> (x)
}"""


def _heads_off_by_one() -> onnx.ModelProto:
    model = _loop(HEADS)
    _replace_output(
        _body(_loops(model)[0]),
        "Softmax",
        "softmax",
        "one = Constant <value = float {1}> () OUT = Add(softmax, one)",
    )
    return model


# 3. Integers beyond int16: an int64 body computed in int32.
INT_MAP = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(int64[N]) x, int64[N] t) => (seq(int64[N]) y) {
  y = SequenceMap <body = body (int64[N] a, int64[N] b) => (int64[N] c) { c = Add(a, b) }> (x, t)
}"""


def _in_int32() -> onnx.ModelProto:
    model = _loop(INT_MAP)
    body = _body(_loops(model)[0])
    add = next(n for n in body.node if n.op_type == "Add")
    narrow = _nodes("a32 = Cast <to = 6> (A) b32 = Cast <to = 6> (B)")
    narrow[0].input[0], narrow[1].input[0] = add.input[0], add.input[1]
    add.input[0], add.input[1] = "a32", "b32"
    old, add.output[0] = add.output[0], "sum32"
    position = list(body.node).index(add)
    for offset, node in enumerate(narrow):
        body.node.insert(position + offset, node)
    widen = _nodes("OUT = Cast <to = 7> (sum32)".replace("OUT", old))
    body.node.insert(position + len(narrow) + 1, widen[0])
    return model


# 4. Overridable initializers: one folded into a constant.
OVERRIDABLE = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[3]) x, float[3] w) => (seq(float[3]) y) <float[3] w = {1, 2, 3}> {
  y = SequenceMap <body = body (float[3] a) => (float[3] c) { c = Mul(a, w) }> (x)
}"""


def _folded_initializer() -> onnx.ModelProto:
    model = _loop(OVERRIDABLE)
    body = _body(_loops(model)[0])
    mul = next(n for n in body.node if n.op_type == "Mul")
    body.node.insert(0, _nodes("w_folded = Constant <value = float[3] {1, 2, 3}> ()")[0])
    mul.input[1] = "w_folded"
    return model


# 5. Independent sequences of different lengths: the trip count taken from the other.
TWO_MAPS = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[3]) x1, seq(float[3]) x2) => (seq(float[3]) y1, seq(float[3]) y2) {
  y1 = SequenceMap <body = first (float[3] a) => (float[3] c) { c = Neg(a) }> (x1)
  y2 = SequenceMap <body = second (float[3] a2) => (float[3] c2) { c2 = Abs(a2) }> (x2)
}"""


def _trips_from_the_other() -> onnx.ModelProto:
    model = _loop(TWO_MAPS)
    first, second = _loops(model)
    second.input[0] = first.input[0]
    return model


# 6. Optional inputs: absent read as ones instead of zeros.
OPTIONAL = """<ir_version: 9, opset_import: ["" : 18]>
g (seq(float[3]) x, optional(float[3]) bias) => (seq(float[3]) y) {
  has = OptionalHasElement(bias)
  b = If (has) <
    then_branch = present () => (float[3] p) { p = OptionalGetElement(bias) },
    else_branch = absent () => (float[3] q) { q = Constant <value = float[3] {0, 0, 0}> () }>
  y = SequenceMap <body = body (float[3] a, float[3] d) => (float[3] c) { c = Add(a, d) }> (x, b)
}"""


def _absent_as_ones() -> onnx.ModelProto:
    model = _loop(OPTIONAL)
    branch = next(n for n in model.graph.node if n.op_type == "If")
    other = next(a.g for a in branch.attribute if a.name == "else_branch")
    other.node[0].attribute[0].t.CopyFrom(
        onnx.numpy_helper.from_array(np.ones(3, np.float32), other.node[0].attribute[0].t.name)
    )
    return model


# 7. float16: a partial sum rounded to float16 is right; an error of 1% is not.
HALF_SUM = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float16[N]) x) => (seq(float16) y) {
  y = SequenceMap <body = body (float16[N] a) => (float16 c) {
    wide = Cast <to = 1> (a)
    total = ReduceSum <keepdims = 0> (wide)
    c = Cast <to = 10> (total)
  }> (x)
}"""


def _half_rounded_partial_sum(scale: float = 1.0) -> onnx.ModelProto:
    """The sum of the first two terms rounded to float16 before the rest is added
    (as a rewrite that splits the sum would); ``scale`` != 1 makes it wrong."""
    model = _loop(HALF_SUM)
    _replace_output(
        _body(_loops(model)[0]),
        "ReduceSum",
        "unused_total",
        "zero = Constant <value = int64[1] {0}> () two = Constant <value = int64[1] {2}> () "
        "big = Constant <value = int64[1] {9223372036854775807}> () "
        "head = Slice(wide, zero, two) tail = Slice(wide, two, big) "
        "head_sum = ReduceSum <keepdims = 0> (head) tail_sum = ReduceSum <keepdims = 0> (tail) "
        "head_half = Cast <to = 10> (head_sum) head_back = Cast <to = 1> (head_half) "
        f"scale = Constant <value = float {{{scale}}}> () both = Add(head_back, tail_sum) "
        "OUT = Mul(both, scale)",
    )
    return model


def _half_witness() -> dict:
    """Elements on which rounding the partial sum changes the float16 result."""
    right, rounded = parse(HALF_SUM), _half_rounded_partial_sum()
    for seed in range(200):
        feeds = {"x": _elements(2, 4, np.float16, seed)}
        if not _same(_run(rounded, feeds), _run(right, feeds)):
            return feeds
    raise AssertionError("no witness: the rounding never shows")


# name: (original, mutant, witness feeds)
FAMILIES = {
    "trip count capped at 16": (
        MAP,
        _capped_at_16,
        lambda: {"x": _elements(17, 3), "t": np.ones(3, np.float32)},
    ),
    "raises on empty elements": (
        MAP,
        _raises_on_empty_elements,
        lambda: {"x": _elements(2, 0), "t": np.zeros(0, np.float32)},
    ),
    "wrong where a body is defined only on 8k dims": (
        HEADS,
        _heads_off_by_one,
        lambda: {"x": _elements(2, 16)},
    ),
    "int64 body computed in int32": (
        INT_MAP,
        _in_int32,
        lambda: {"x": [np.array([2**40, 7], np.int64)], "t": np.array([1, 1], np.int64)},
    ),
    "overridable initializer folded": (
        OVERRIDABLE,
        _folded_initializer,
        lambda: {"x": _elements(2, 3), "w": np.full(3, 5.0, np.float32)},
    ),
    "trip count from another sequence": (
        TWO_MAPS,
        _trips_from_the_other,
        lambda: {"x1": _elements(2, 3), "x2": _elements(3, 3, seed=1)},
    ),
    "absent optional read as ones": (
        OPTIONAL,
        _absent_as_ones,
        lambda: {"x": _elements(2, 3), "bias": None},
    ),
    "float16 result off by 1%": (
        HALF_SUM,
        lambda: _half_rounded_partial_sum(1.01),
        lambda: {"x": _elements(2, 4, np.float16)},
    ),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_mutant_differs_on_its_witness_and_is_caught(family):
    text, mutant, witness = FAMILIES[family]
    original, wrong = parse(text), mutant()
    onnx.checker.check_model(wrong, full_check=True)
    _assert_differs(original, wrong, witness())
    report = verify.compare(original, wrong)
    assert report.exit_code == 1, report.table()


@pytest.mark.parametrize("text", sorted({text for text, _, _ in FAMILIES.values()}))
def test_the_right_lowerings_match(text):
    original = parse(text)
    for options in ({}, {"strategy": "loop"}):
        report = verify.compare(original, lowering.lower(original, **options))
        assert report.exit_code == 0, report.table()


def test_old_schedule_would_not_catch_them():
    """What was seen: with the old schedule's edges only (lengths 0-5, 8, 9;
    dims 1..7; ints within +-1000; defaults and one length for every
    sequence; no optional), each mutant passed."""
    old = [verify.RunSpec(n, d, v) for n, d, v in [
        (3, "random", "normal"), (0, "random", "normal"), (1, "ones", "normal"),
        (2, "random", "zeros"), (5, "large", "normal"), (4, "ones", "large"),
        (8, "random", "special"), (9, "ones", "zeros"), (1, "large", "special"),
    ]]  # fmt: skip
    for family in ("trip count capped at 16", "raises on empty elements",
                   "overridable initializer folded", "trip count from another sequence"):  # fmt: skip
        text, mutant, _ = FAMILIES[family]
        ports = verify.model_ports(parse(text), "input")
        feeds = [verify.synthesize(ports, spec, np.random.default_rng(k), {})[0]
                 for k, spec in enumerate(old)]  # fmt: skip
        assert verify.compare(parse(text), mutant(), inputs=feeds).exit_code == 0, family


# The float16 tolerance: a right rewrite rounding a partial sum passes.


def test_a_partial_sum_rounded_to_float16_passes_and_says_its_tolerance():
    original, rounded = parse(HALF_SUM), _half_rounded_partial_sum()
    witness = _half_witness()
    got, expected = _run(rounded, witness), _run(original, witness)
    difference = max(
        float(abs(np.float64(g) - np.float64(e))) for g, e in zip(got[0], expected[0], strict=True)
    )
    assert difference > 1e-4  # the old rtol 1e-4 / atol 1e-5 would flag it
    report = verify.compare(original, rounded)
    assert report.exit_code == 0, report.table()
    assert "8 ulp (float16)" in report.table()
    assert verify.compare(original, rounded, inputs=witness).exit_code == 0


# Runs that compare nothing are not "matches".


def test_only_empty_inputs_compared_is_could_not_compare():
    """The body is defined only for 8k dims; with --dim N=3 every non-empty run
    fails in A, and an empty sequence alone proves nothing."""
    original = parse(HEADS)
    report = verify.compare(original, _heads_off_by_one(), dims={"N": 3})
    assert report.exit_code == 3, report.table()
    assert "only runs with empty inputs" in report.table()


# Optional inputs, through every command line.


@pytest.mark.parametrize("command", ["onnx-verify", "module", "onnx-lower --verify"])
@pytest.mark.parametrize("right", [True, False])
def test_optional_inputs_through_every_cli(command, right, tmp_path, capsys):
    original = parse(OPTIONAL)
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(original, a)
    onnx.save(lowering.lower(original) if right else _absent_as_ones(), b)
    expected = 0 if right else 1
    if command == "onnx-verify":
        assert verify.main([str(a), str(b)]) == expected
        assert ("matches" if right else "does not match") in capsys.readouterr().err
    elif command == "module":
        done = subprocess.run(
            [sys.executable, "-m", "lowering.verify", str(a), str(b)],
            capture_output=True, text=True, check=False, cwd=ROOT,
        )  # fmt: skip
        assert done.returncode == expected, done.stderr
    elif right:  # onnx-lower writes its own (right) lowering and verifies it
        assert cli.main([str(a), str(tmp_path / "out.onnx"), "--verify"]) == 0
        assert "MISMATCH" not in capsys.readouterr().err


def test_absent_optionals_replay_from_a_saved_file(tmp_path):
    original = parse(OPTIONAL)
    saved = tmp_path / "runs.npz"
    report = verify.compare(original, lowering.lower(original), save_inputs=saved)
    assert report.exit_code == 0
    runs = verify.read_inputs(str(saved), verify.model_ports(original, "input"))
    assert any(feeds["bias"] is None for _, feeds in runs)
    assert any(feeds["bias"] is not None for _, feeds in runs)
    assert verify.compare(original, _absent_as_ones(), inputs=saved).exit_code == 1


# Data and counts: which integer inputs go to their type's limits.

COUNTS = """<ir_version: 8, opset_import: ["" : 17]>
g (int64 n, int64[2] shape, int64[3] data, int64 k) => (float[M] r, int64[P,Q] s, int64[3] d) {
  zero = Constant <value = float {0}> ()
  one = Constant <value = float {1}> ()
  limit = Cast <to = 1> (n)
  r = Range(zero, limit, one)
  base = ConstantOfShape <value = int64[1] {1}> (shape)
  s = Mul(base, k)
  d = Add(data, data)
}"""


def test_counts_stay_small_and_data_reaches_its_limits():
    model = parse(COUNTS)
    assert verify.size_inputs(model) == {"n", "shape"}
    ports = verify.model_ports(model, "input")
    values: dict[str, list] = {p.name: [] for p in ports}
    for _, _, feeds in verify.feed_sets(ports, None, None, 0, None, None, []):
        for name, value in feeds.items():
            values[name].append(np.asarray(value).astype(object))
    for name in ("n", "shape"):
        assert max(abs(int(x)) for v in values[name] for x in v.ravel()) <= 1000
    for name in ("data", "k"):
        assert max(abs(int(x)) for v in values[name] for x in v.ravel()) > 2**31


def test_sequences_one_map_reads_keep_one_length():
    tied = parse(MAP.replace("(float[N] a, float[N] b)", "(float[N] a, float[N] b)"))
    assert len(set(verify.sequence_groups(tied).values())) == 1
    assert len(set(verify.sequence_groups(parse(TWO_MAPS)).values())) == 2


# --runtime: B runs in the runtime it was lowered for.

RUNTIME_MAP = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x) => (float[N,3] y) {
  parts = SplitToSequence <axis = 0, keepdims = 0> (x)
  mapped = SequenceMap <body = body (float[3] a) => (float[3] c) { c = Mul(a, a) }> (parts)
  y = ConcatFromSequence <axis = 0, new_axis = 1> (mapped)
}"""


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_verify_in_the_target_runtime(runtime, tmp_path, capsys):
    pytest.importorskip(runtime)
    original = parse(RUNTIME_MAP)
    source, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(original, source)
    assert cli.main([str(source), str(out), "--runtime", runtime, "--verify", "-v"]) == 0
    err = capsys.readouterr().err
    # the runs with an empty x (dims 0) fail in A (ConcatFromSequence takes no
    # empty sequence): drawn again with dims 1..4 and compared in the runtime too
    total = len(verify.DEFAULT_SCHEDULE)
    assert "MISMATCH" not in err and f"({total} runs)" in err
    for run in (10, 16):
        assert f"run {run} (length" in err
        line = next(x for x in err.splitlines() if x.startswith(f"run {run} ("))
        assert "dims 1..4" in line and "A rejected" in line and line.endswith(": compared")
    wrong = lowering.lower(original, runtime=runtime)
    square = next(n for n in wrong.graph.node if n.op_type == "Mul")
    square.op_type = "Add"
    onnx.save(wrong, tmp_path / "wrong.onnx")
    assert verify.main([str(source), str(tmp_path / "wrong.onnx"), "--runtime", runtime]) == 1
    assert "does not match" in capsys.readouterr().err


def test_a_runtime_that_is_not_installed_is_a_usage_error(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "MNN" else real(name, *a)
    )
    source = tmp_path / "in.onnx"
    onnx.save(parse(RUNTIME_MAP), source)
    for run in (
        lambda: verify.main([str(source), str(source), "--runtime", "mnn"]),
        lambda: cli.main([str(source), str(tmp_path / "out.onnx"), "--runtime", "mnn", "--verify"]),
    ):
        with pytest.raises(SystemExit) as stopped:
            run()
        assert stopped.value.code == 2
        assert "--runtime mnn needs MNN: pip install MNN" in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


# The two command lines print alike and take the same options.


def test_onnx_verify_quiet_version_and_negative_val_range(tmp_path, capsys):
    original = parse(MAP)
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(original, a)
    onnx.save(lowering.lower(original), b)
    assert verify.main([str(a), str(b), "-q"]) == 0
    assert capsys.readouterr() == ("", "")
    with pytest.raises(SystemExit) as stopped:
        verify.main(["--version"])
    assert stopped.value.code == 0 and lowering.__version__ in capsys.readouterr().out
    assert verify.main([str(a), str(b), "--val-range", "-1,1"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "matches" in err
    assert cli.main([str(a), str(tmp_path / "o.onnx"), "--verify", "--val-range", "-1,1"]) == 0
    assert verify.main([str(a), str(_capped(tmp_path)), "-q"]) == 1
    assert "does not match" in capsys.readouterr().err  # -q still says what is wrong


def _capped(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "capped.onnx"
    onnx.save(_capped_at_16(), path)
    return path
