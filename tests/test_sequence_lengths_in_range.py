"""A length through an erase or insert at a position out of range stays a failure.

onnxruntime refuses SequenceErase at p = -3 in a sequence of 2 and
SequenceInsert at p = -3 into one of 2. The static length analysis
(lowering.analysis.sequence_length) once counted len(s) - 1 and len(s) + 1
whatever the position, so ``SequenceLength`` of the result was folded to a
constant, a map over it unrolled, and the erase or insert, read by nothing
any more, removed: the lowered model answered where the original fails. A
length is known through an erase or insert only where its position is
absent or a constant proven in range.

The sweep: SequenceErase and SequenceInsert of a SequenceConstruct of n = 0..3
elements (SequenceEmpty for 0), every p in [-n - 2, n + 2], the position a
constant or fed, int32 or int64, each reader (SequenceLength of the result
beside a map, a map over it, ConcatFromSequence of it beside a map,
nothing beside a map: onnxruntime runs it all the same) in each
form (the default, max_unroll = 0, strategy "loop", --runtime openvino). The
oracle is onnxruntime on the original, and Python's list where the spec says
the position is valid ([-n, n - 1] for an erase, [-n, n] for an insert). A
constant out of range for a length known statically may be refused with a
LoweringError naming the position (the original always fails). Each model
gets one session. The fast run takes three cases of every op x reader x form
x position x type (one out of range), picked with a fixed seed.
"""

from __future__ import annotations

import functools
import random

import numpy as np
import onnx
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, RuntimeException

import lowering
from lowering.runtimes.sessions import open_session
from tests.helpers import assert_same, lowered, parse

H = '<ir_version: 8, opset_import: ["" : 17]>'
LENGTHS = range(4)
#: (n, p) for every n and every p in [-n - 2, n + 2]: 32 cases.
CASES = [(n, p) for n in LENGTHS for p in range(-n - 2, n + 3)]
FORMS = {
    "default": {},
    "max_unroll=0": {"max_unroll": 0},
    "loop": {"strategy": "loop"},
    "openvino": {"runtime": "openvino"},
}
OPS = ("erase", "insert")
NEG = "<body = body (float[2] e) => (float[2] d) { d = Neg(e) }>"
#: Each reader's nodes (t is the erase's or insert's result, s its input) and outputs.
READERS = {
    "length": (
        "y = SequenceLength(t)\nz = SequenceMap " + NEG + " (s)",
        "int64 y, seq(float[2]) z",
    ),
    "map": ("y = SequenceMap " + NEG + " (t)", "seq(float[2]) y"),
    "unread": ("z = SequenceMap " + NEG + " (s)", "seq(float[2]) z"),
    "concat": (
        "y = ConcatFromSequence <axis = 0> (t)\nz = SequenceMap " + NEG + " (s)",
        "float[M] y, seq(float[2]) z",
    ),
}
X = np.full(2, 99, np.float32)
_ORT_ERRORS = (Fail, InvalidArgument, RuntimeException)


def _element(k: int) -> np.ndarray:
    return np.full(2, k + 1, np.float32)


def _model(op: str, reader: str, dtype: str, n: int, p: int | None) -> onnx.ModelProto:
    """The reader of ``t = op(s, .., p)``, s a SequenceConstruct of n inputs;
    p an initializer (None: an input)."""
    inputs = [f"float[2] a{k}" for k in range(n)]
    if op == "insert":
        inputs.append("float[2] x")
    init = ""
    if p is None:
        inputs.append(f"{dtype} p")
    else:
        init = f"<{dtype} p = {{{p}}}>"
    elements = ", ".join(f"a{k}" for k in range(n))
    build = f"s = SequenceConstruct({elements})" if n else "s = SequenceEmpty <dtype = 1> ()"
    t = "t = SequenceErase(s, p)" if op == "erase" else "t = SequenceInsert(s, x, p)"
    nodes, outputs = READERS[reader]
    return parse(
        f"{H}\ng ({', '.join(inputs)}) => ({outputs}) {init} {{\n{build}\n{t}\n{nodes}\n}}"
    )


@functools.cache
def _sessions(op: str, reader: str, form: str, dtype: str, n: int, p: int | None):
    """The original's session and the lowered model's (the lowering's refusal
    where it refuses), once per model."""
    model = _model(op, reader, dtype, n, p)
    original = open_session(model.SerializeToString(), log_severity=4)
    try:
        result = lowered(model, **FORMS[form])
    except lowering.LoweringError as error:
        return original, error
    return original, open_session(result.SerializeToString(), log_severity=4)


def _outcome(session, feeds: dict) -> list | None:
    """What onnxruntime computes, or None where it refuses."""
    try:
        return session.run(None, feeds)
    except _ORT_ERRORS:
        return None


def _expected(op: str, reader: str, n: int, p: int) -> list | None:
    """The outputs by Python's list, where the position is valid (None: a failure)."""
    elements = [_element(k) for k in range(n)]
    if op == "erase":
        if not -n <= p < n:
            return None
        del elements[p]
    else:
        if not -n <= p <= n:
            return None
        elements.insert(p, X)
    beside = [-_element(k) for k in range(n)]
    if reader == "length":
        return [np.array(len(elements), np.int64), beside]
    if reader == "map":
        return [[-e for e in elements]]
    if reader == "unread":  # onnxruntime runs a node nothing reads
        return [beside]
    if not elements:
        return None  # ConcatFromSequence of an empty sequence fails
    return [np.concatenate(elements), beside]


def check(op: str, reader: str, form: str, dtype: str, constant: bool, n: int, p: int) -> None:
    original, result = _sessions(op, reader, form, dtype, n, p if constant else None)
    feeds: dict = {f"a{k}": _element(k) for k in range(n)}
    if op == "insert":
        feeds["x"] = X
    if not constant:
        feeds["p"] = np.array(p, dtype)
    expected = _outcome(original, feeds)
    oracle = _expected(op, reader, n, p)
    assert (expected is None) == (oracle is None), "onnxruntime runs where the spec says"
    if isinstance(result, lowering.LoweringError):
        # Only a model proven to fail may be refused: a constant out of range.
        assert constant and expected is None, result
        assert f"position {p} is out of range" in str(result), result
        assert "\n" not in str(result)
        return
    actual = _outcome(result, feeds)
    if expected is None:
        assert actual is None, (
            f"n = {n}, p = {p}: the original fails, the lowered model gives {actual}"
        )
        return
    assert actual is not None, f"n = {n}, p = {p}: the original runs, the lowered model fails"
    assert_same(actual, expected)
    assert_same(actual, oracle)


def _sweep() -> list:
    """Every case; the fast run keeps three of each op x reader x form x
    position x type (one out of range for both ops), picked with a fixed seed."""
    rng = random.Random(11)
    outside = [case for case in CASES if not -case[0] <= case[1] <= case[0]]
    params = []
    for op in OPS:
        for reader in READERS:
            for form in FORMS:
                for position in ("constant", "fed"):
                    for dtype in ("int32", "int64"):
                        fast = {rng.choice(outside), *rng.sample(CASES, 2)}
                        params += [
                            pytest.param(
                                op,
                                reader,
                                form,
                                position,
                                dtype,
                                n,
                                p,
                                id=f"{op}-{reader}-{form}-{position}-{dtype}-n{n}-p{p}",
                                marks=() if (n, p) in fast else (pytest.mark.slow,),
                            )
                            for n, p in CASES
                        ]
    return params


@pytest.mark.parametrize("op,reader,form,position,dtype,n,p", _sweep())
@pytest.mark.sweep
def test_a_length_fails_where_the_original_fails(op, reader, form, position, dtype, n, p):
    check(op, reader, form, dtype, position == "constant", n, p)


#: Constant 1-D splits of an axis whose size is known only at run time.
SPLITS = ([1, 1], [2], [0, 2], [3, -1])
#: Each reader of ``s = SplitToSequence(x, k)``: nodes, outputs.
SPLIT_READERS = {
    "length": (
        f"y = SequenceLength(s)\nc = SequenceConstruct(a)\nz = SequenceMap {NEG} (c)",
        "int64 y, seq(float[2]) z",
    ),
    "map": (f"y = SequenceMap {NEG} (s)", "seq(float[1,2]) y"),
}


@functools.cache
def _split_sessions(split: tuple[int, ...], reader: str, form: str):
    nodes, outputs = SPLIT_READERS[reader]
    if reader == "map":
        nodes = nodes.replace("float[2] e) => (float[2] d)", "float[1,2] e) => (float[1,2] d)")
    values = ", ".join(map(str, split))
    model = parse(
        f"{H}\ng (float[N,2] x, float[2] a) => ({outputs}) <int64[{len(split)}] k = {{{values}}}> "
        f"{{\ns = SplitToSequence <axis = 0> (x, k)\n{nodes}\n}}"
    )
    result = lowered(model, **FORMS[form])
    return (
        open_session(model.SerializeToString(), log_severity=4),
        open_session(result.SerializeToString(), log_severity=4),
    )


@pytest.mark.parametrize("rows", range(4))
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("reader", SPLIT_READERS)
@pytest.mark.parametrize("split", SPLITS, ids=str)
def test_a_split_whose_sizes_may_not_add_up_fails_where_the_original_fails(
    split, reader, form, rows
):
    """len(split) is the length only where the sizes split the axis: with the
    axis known only at run time, the split stays and fails as it fails."""
    original, result = _split_sessions(tuple(split), reader, form)
    feeds = {"x": np.arange(rows * 2, dtype=np.float32).reshape(rows, 2), "a": X}
    expected = _outcome(original, feeds)
    valid = min(split) >= 0 and sum(split) == rows
    assert (expected is not None) == valid, "onnxruntime splits where the sizes add up"
    actual = _outcome(result, feeds)
    if expected is None:
        assert actual is None, f"{rows} rows: the original fails, the lowered model gives {actual}"
        return
    assert actual is not None, f"{rows} rows: the original runs, the lowered model fails"
    assert_same(actual, expected)
