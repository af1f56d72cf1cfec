"""Sequence positions outside their range fail after lowering as they fail before.

onnxruntime refuses SequenceAt at p = -4 in a sequence of 3 ("Invalid
sequence index"). A lowering that counts every negative p from the end
(p + n) makes it -1, a valid index again, and the lowered model reads the
last element where the original fails. Every form that reads a position
counts it from the end only where it is in [-n, 0)
(:func:`lowering.irutils.positions.wrap_negative`), or hands it to a Gather,
which refuses what SequenceAt refuses.

The sweep: n = 0..3 elements, every p in [-n - 2, n + 2], the position a
constant or fed, int32 or int64, each form (the default, max_unroll = 0, no
vectorizing (a Loop's stack), strategy "loop", --runtime openvino and
tract; in the slow run also optimize, --target-opset 12, --runtime mnn and
tvm), and each reader:

    map        SequenceAt(SequenceMap(SplitToSequence(X)), p)       n at run time
    strings    the same over strings (read by Slice + Squeeze)
    fed        SequenceAt(SequenceMap(s), p), s a graph input
    unrolled   SequenceAt(SequenceMap(SequenceConstruct(a..)), p)  n static
    split      SequenceAt(SplitToSequence(X), p)                   no map, n static
    lengths    SequenceAt(SplitToSequence(X, lengths), p)          no map, lengths fed
    construct  SequenceAt(SequenceConstruct(a..), p), beside a map over it
    erase      SequenceErase(SequenceMap(SplitToSequence(X)), p)

The oracle is onnxruntime on the original, and Python's list where the spec
says the position is valid ([-n, n - 1] for both ops). Each model gets one
session, fed every (n, p) it serves; a form that refuses a model skips
its cases (none does today). The fast run takes two cases of every reader
x form x position x type, one of them below -n (at most 384 of 10,240);
the rest are marked slow.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, RuntimeException

import lowering
from lowering.passes import lower_sequence_maps
from lowering.runtimes.sessions import open_session
from tests.conftest import without_vectorize
from tests.helpers import assert_same, lowered, parse

H = '<ir_version: 8, opset_import: ["" : 17]>'
LENGTHS = range(4)
#: (n, p) for every n and every p in [-n - 2, n + 2]: 32 cases.
CASES = [(n, p) for n in LENGTHS for p in range(-n - 2, n + 3)]
#: Each form's options; "uniform" is the default with no map vectorized.
FORMS = {
    "default": {},
    "max_unroll=0": {"max_unroll": 0},
    "uniform": {},
    "loop": {"strategy": "loop"},
    "openvino": {"runtime": "openvino"},
    "tract": {"runtime": "tract"},
}
#: Forms only the slow run sweeps: no position form of their own, but their
#: passes (folding, a lower opset, other runtimes' choices) meet the reads.
SLOW_FORMS = {
    "optimize": {"optimize": True},
    "target_opset=12": {"target_opset": 12},
    "mnn": {"runtime": "mnn"},
    "tvm": {"runtime": "tvm"},
}
_ORT_ERRORS = (Fail, InvalidArgument, RuntimeException)
NEG = "<body = body (float[2] e) => (float[2] d) { d = Neg(e) }>"


def _element(k: int) -> np.ndarray:
    return np.full(2, k + 1, np.float32)


def _string(k: int) -> np.ndarray:
    return np.array([f"s{k}", f"t{k}"], dtype=object)


def _rows(n: int, element: Callable[[int], np.ndarray] = _element) -> np.ndarray:
    rows = [element(k) for k in range(n)]
    return np.stack(rows) if rows else np.zeros((0, 2), element(0).dtype)


@dataclasses.dataclass(frozen=True)
class Reader:
    """A model reading position p of a sequence of n elements."""

    head: Callable[[int | None], list[str]]  # the tensor inputs before the elements and p
    graph: str  # {build} makes s of the inputs a0.. where static
    outputs: str
    static: bool  # the model is built for one n (a SequenceConstruct, a static dim)
    feeds: Callable[[int], dict]
    expected: Callable[[int, int], list]  # the outputs, for a valid p

    def model(self, dtype: str, p: int | None, n: int | None) -> onnx.ModelProto:
        inputs, init = [], ""
        if "{build}" in self.graph:
            assert n is not None, "a SequenceConstruct is built for one n"
            inputs = [f"float[2] a{k}" for k in range(n)]
        if p is None:
            inputs.append(f"{dtype} p")
        else:
            init = f"<{dtype} p = {{{p}}}>"
        elements = ", ".join(f"a{k}" for k in range(n or 0))
        build = f"s = SequenceConstruct({elements})" if n else "s = SequenceEmpty <dtype = 1> ()"
        body = self.graph.replace("{build}", build)
        head = ", ".join([*self.head(n), *inputs])
        return parse(f"{H}\ng ({head}) => ({self.outputs}) {init} {{\n{body}\n}}")


def _static(n: int) -> dict:
    return {f"a{k}": _element(k) for k in range(n)}


READERS = {
    "map": Reader(
        lambda n: ["float[N,2] x"],
        f"xs = SplitToSequence <axis = 0, keepdims = 0> (x)\n"
        f"m = SequenceMap {NEG} (xs)\ny = SequenceAt(m, p)",
        "float[2] y",
        False,
        lambda n: {"x": _rows(n)},
        lambda n, p: [-_element(range(n)[p])],
    ),
    "strings": Reader(
        lambda n: ["string[N,2] x"],
        "xs = SplitToSequence <axis = 0, keepdims = 0> (x)\n"
        "m = SequenceMap <body = body (string[2] e) => (string[2] d) { d = Identity(e) }> (xs)\n"
        "y = SequenceAt(m, p)",
        "string[2] y",
        False,
        lambda n: {"x": _rows(n, _string)},
        lambda n, p: [_string(range(n)[p])],
    ),
    "fed": Reader(
        lambda n: ["seq(float[2]) xs"],
        f"m = SequenceMap {NEG} (xs)\ny = SequenceAt(m, p)",
        "float[2] y",
        False,
        lambda n: {"xs": [_element(k) for k in range(n)]},
        lambda n, p: [-_element(range(n)[p])],
    ),
    "unrolled": Reader(
        lambda n: [],
        f"{{build}}\nm = SequenceMap {NEG} (s)\ny = SequenceAt(m, p)",
        "float[2] y",
        True,
        _static,
        lambda n, p: [-_element(range(n)[p])],
    ),
    "split": Reader(
        lambda n: [f"float[{n},2] x"],
        "xs = SplitToSequence <axis = 0, keepdims = 0> (x)\ny = SequenceAt(xs, p)",
        "float[2] y",
        True,
        lambda n: {"x": _rows(n)},
        lambda n, p: [_element(range(n)[p])],
    ),
    "lengths": Reader(
        lambda n: ["float[N,2] x", "int64[K] lengths"],
        "xs = SplitToSequence <axis = 0> (x, lengths)\ny = SequenceAt(xs, p)",
        "float[1,2] y",
        False,
        lambda n: {"x": _rows(n), "lengths": np.ones(n, np.int64)},
        lambda n, p: [_element(range(n)[p])[None]],
    ),
    "construct": Reader(
        lambda n: [],
        f"{{build}}\ny = SequenceAt(s, p)\nz = SequenceMap {NEG} (s)",
        "float[2] y, seq(float[2]) z",
        True,
        _static,
        lambda n, p: [_element(range(n)[p]), [-_element(k) for k in range(n)]],
    ),
    "erase": Reader(
        lambda n: ["float[N,2] x"],
        f"xs = SplitToSequence <axis = 0, keepdims = 0> (x)\n"
        f"m = SequenceMap {NEG} (xs)\ny = SequenceErase(m, p)",
        "seq(float[2]) y",
        False,
        lambda n: {"x": _rows(n)},
        lambda n, p: [[-_element(k) for k in range(n) if k != range(n)[p]]],
    ),
}


def _lowered(model: onnx.ModelProto, form: str) -> onnx.ModelProto:
    with pytest.MonkeyPatch.context() as patch:
        if form == "uniform":
            patch.setattr(lower_sequence_maps, "AUTO", without_vectorize())
        return lowered(model, **{**FORMS, **SLOW_FORMS}[form])


@functools.cache
def _sessions(reader: str, form: str, dtype: str, p: int | None, n: int | None):
    """The original's session and the lowered model's, once per model (the
    lowering's refusal where it refuses)."""
    model = READERS[reader].model(dtype, p, n)
    original = open_session(model.SerializeToString(), log_severity=4)
    try:
        result = _lowered(model, form)
    except lowering.LoweringError as error:
        return original, error
    return original, open_session(result.SerializeToString(), log_severity=4)


def _outcome(session, feeds: dict) -> list | None:
    """What onnxruntime computes, or None where it refuses."""
    try:
        return session.run(None, feeds)
    except _ORT_ERRORS:
        return None


def check(reader: str, form: str, dtype: str, constant: bool, n: int, p: int) -> None:
    spec = READERS[reader]
    original, result = _sessions(
        reader, form, dtype, p if constant else None, n if spec.static else None
    )
    feeds = spec.feeds(n)
    if not constant:
        feeds["p"] = np.array(p, dtype)
    expected = _outcome(original, feeds)
    valid = -n <= p < n
    assert (expected is not None) == valid, "onnxruntime takes positions in [-n, n - 1]"
    if isinstance(result, lowering.LoweringError):
        pytest.skip(f"{form} does not lower it: {result}")
    actual = _outcome(result, feeds)
    if not valid:
        assert actual is None, (
            f"n = {n}, p = {p}: the original fails, the lowered model gives {actual}"
        )
        return
    assert actual is not None, f"n = {n}, p = {p}: the original runs, the lowered model fails"
    assert expected is not None
    assert_same(actual, expected)
    assert_same(actual, spec.expected(n, p))


def _sweep() -> list:
    """Every case; the fast run keeps two of each reader x form x position x
    type (one below -n), picked with a fixed seed."""
    rng = random.Random(33)
    below = [case for case in CASES if case[1] < -case[0]]
    params = []
    for reader in READERS:
        for form in [*FORMS, *SLOW_FORMS]:
            for position in ("constant", "fed"):
                for dtype in ("int32", "int64"):
                    fast = {rng.choice(below), rng.choice(CASES)} if form in FORMS else set()
                    params += [
                        pytest.param(
                            reader,
                            form,
                            position,
                            dtype,
                            n,
                            p,
                            id=f"{reader}-{form}-{position}-{dtype}-n{n}-p{p}",
                            marks=() if (n, p) in fast else (pytest.mark.slow,),
                        )
                        for n, p in CASES
                    ]
    return params


@pytest.mark.parametrize("reader,form,position,dtype,n,p", _sweep())
@pytest.mark.sweep
def test_a_position_fails_where_the_original_fails(reader, form, position, dtype, n, p):
    check(reader, form, dtype, position == "constant", n, p)


# (A string map is built as a sequence where it is not vectorized: onnxruntime's
# Loop can lose strings in its scan outputs.)
@pytest.mark.parametrize(
    "reader,form",
    [
        (reader, form)
        for reader in ("map", "strings", "fed")
        for form in ("default", "max_unroll=0", "uniform", "openvino", "tract")
        if (reader, form) != ("strings", "uniform")
    ],
)
@pytest.mark.parametrize("position", ["constant", "fed"])
def test_these_forms_read_the_position_themselves(reader, form, position):
    """The sweep meets the rewrite's own reading of p, not a SequenceAt left
    to the runtime: a map read from its stack (lowering.maps.stack_reads)
    by Gather, which counts p from the end as it is, constant or fed; by Slice
    (strings) at p counted from the end by wrap_negative."""
    result = _lowered(
        READERS[reader].model("int64", -4 if position == "constant" else None, None), form
    )
    ops = [node.op_type for node in result.graph.node]
    assert "SequenceAt" not in ops
    wraps = reader == "strings"
    assert ops.count("Where") == (1 if position == "constant" else 2) * wraps, ops
