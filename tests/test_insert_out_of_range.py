"""SequenceInsert positions outside [-n, n] fail after lowering as they fail before.

onnxruntime refuses an insert at p = -3 into a sequence of 2 ("Invalid
sequence index (-3)"). A lowering that counts every negative p from the end
(p + n) would make it -1, which is valid again: the lowered model would
insert where the original fails. Every form the normalization writes keeps
the failure (lowering.irutils.positions.wrap_negative); a constant out of
range for a length known statically is refused instead.

The sweep: n = 0..3, every p in [-n - 2, n + 2], the position constant or
fed, int32 or int64, in each form (the guard from opset 13, the wrap alone
below it, and the guard unguarded by --target-opset 12), the sequence fed
(its length known only at run time) or built in the graph (known
statically). The oracle is onnxruntime on the original, and list.insert
where the spec says the position is valid. Each model gets one session,
fed every (n, p) it serves.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, RuntimeException

import lowering
from lowering.runtimes.sessions import open_session
from tests.helpers import assert_same, lowered, parse

F2 = "float[2]"
X = np.full(2, 99, np.float32)
LENGTHS = range(4)
#: (n, p) for every n and every p in [-n - 2, n + 2]: 32 cases.
CASES = [(n, p) for n in LENGTHS for p in range(-n - 2, n + 3)]
#: How the model is lowered: the guard (opset 17), the wrap alone (opset 12),
#: and the guard of opset 17 unguarded by --target-opset 12 (lowering.opset.insert_guard).
FORMS = ("guard", "wrap", "unguarded")
_ORT_ERRORS = (Fail, InvalidArgument, RuntimeException)


def _element(k: int) -> np.ndarray:
    return np.full(2, k, np.float32)


def _model(opset: int, dtype: str, p: int | None, n: int | None) -> onnx.ModelProto:
    """``y = SequenceInsert(s, x, p)``: p an initializer (None: an input), s a
    SequenceConstruct of n inputs (None: s is an input)."""
    inputs = [f"{F2} x"]
    if n is None:
        inputs.append(f"seq({F2}) s")
        build = ""
    else:
        inputs += [f"{F2} a{k}" for k in range(n)]
        elements = ", ".join(f"a{k}" for k in range(n))
        build = f"s = SequenceConstruct({elements})" if n else "s = SequenceEmpty <dtype = 1> ()"
    initializer = ""
    if p is None:
        inputs.append(f"{dtype} p")
    else:
        initializer = f"<{dtype} p = {{{p}}}>"
    return parse(f"""<ir_version: 8, opset_import: ["" : {opset}]>
    g ({", ".join(inputs)}) => (seq({F2}) y) {initializer} {{
      {build}
      y = SequenceInsert(s, x, p)
    }}""")


def _lower(model: onnx.ModelProto, form: str) -> onnx.ModelProto:
    if form == "unguarded":
        return lowered(lowered(model), target_opset=12)
    return lowered(model)


@functools.cache
def _sessions(form: str, dtype: str, p: int | None, n: int | None):
    """The original's session and the lowered model's, once per model (None: refused)."""
    model = _model(12 if form == "wrap" else 17, dtype, p, n)
    original = open_session(model.SerializeToString(), log_severity=4)
    try:
        result = _lower(model, form)
    except lowering.LoweringError as error:
        return original, error
    if form == "unguarded":
        assert "If" not in {node.op_type for node in result.graph.node}
    return original, open_session(result.SerializeToString(), log_severity=4)


def _feeds(dtype: str, n: int, p: int, fed_position: bool, fed_sequence: bool) -> dict:
    feeds: dict = {"x": X}
    if fed_sequence:
        feeds["s"] = [_element(k) for k in range(n)]
    else:
        feeds.update({f"a{k}": _element(k) for k in range(n)})
    if fed_position:
        feeds["p"] = np.array(p, dtype)
    return feeds


def _outcome(session, feeds: dict) -> list[np.ndarray] | None:
    """The sequence onnxruntime computes, or None where it refuses the insert."""
    try:
        return session.run(None, feeds)[0]
    except _ORT_ERRORS:
        return None


def _check(form: str, dtype: str, constant: bool, n: int, p: int, known_length: bool) -> None:
    original, result = _sessions(form, dtype, p if constant else None, n if known_length else None)
    feeds = _feeds(dtype, n, p, not constant, not known_length)
    expected = _outcome(original, feeds)
    valid = -n <= p <= n
    assert (expected is not None) == valid, "onnxruntime takes positions in [-n, n]"
    if isinstance(result, lowering.LoweringError):
        # Only a constant out of range for a length known statically is refused.
        assert constant and known_length and not valid, result
        assert f"position {p} is out of range for a sequence of length {n}" in str(result)
        return
    actual = _outcome(result, feeds)
    if not valid:
        assert actual is None, (
            f"n = {n}, p = {p}: the original fails, the lowered model gives {actual}"
        )
        return
    assert actual is not None, f"n = {n}, p = {p}: the original runs, the lowered model fails"
    elements = [_element(k) for k in range(n)]
    elements.insert(p, X)  # Python's list.insert is SequenceInsert, where p is valid
    assert_same(actual, expected)
    assert_same(actual, elements)


def _slow_if(slow: bool) -> tuple:
    return (pytest.mark.slow,) if slow else ()


# The fast run keeps int32 (one Cast more) beside the guard only: 320 cases.
FED = [
    pytest.param(form, position, dtype, marks=_slow_if(dtype == "int32" and form != "guard"))
    for form in FORMS
    for position in ("constant", "dynamic")
    for dtype in ("int32", "int64")
]
STATIC = [
    pytest.param(position, dtype, marks=_slow_if(dtype == "int32"))
    for position in ("constant", "dynamic")
    for dtype in ("int32", "int64")
]


@pytest.mark.parametrize("n,p", CASES)
@pytest.mark.parametrize("form,position,dtype", FED)
@pytest.mark.sweep
def test_a_fed_sequence_fails_where_the_original_fails(form, position, dtype, n, p):
    _check(form, dtype, position == "constant", n, p, known_length=False)


@pytest.mark.parametrize("n,p", CASES)
@pytest.mark.parametrize("position,dtype", STATIC)
def test_a_static_length_keeps_the_failure_or_refuses(position, dtype, n, p):
    """A constant is folded only where it is in range; a fed position is guarded."""
    _check("guard", dtype, position == "constant", n, p, known_length=True)


def _chain(n: int, p: int) -> onnx.ModelProto:
    """n appends to an empty sequence, then an insert at the constant p, read by a
    map: the chain is folded (lowering.passes.fold_insert_chains) where p is in range."""
    inputs = "".join(f", {F2} a{k}" for k in range(n))
    appends = "\n".join(f"s{k + 1} = SequenceInsert(s{k}, a{k})" for k in range(n))
    return parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g ({F2} x{inputs}) => (seq({F2}) y) <int64 p = {{{p}}}> {{
      s0 = SequenceEmpty <dtype = 1> ()
      {appends}
      t = SequenceInsert(s{n}, x, p)
      y = SequenceMap <body = body ({F2} e) => ({F2} d) {{ d = Neg(e) }}> (t)
    }}""")


@pytest.mark.parametrize("n,p", CASES)
def test_a_folded_insert_chain_keeps_the_failure_or_refuses(n, p):
    model = _chain(n, p)
    feeds = _feeds("int64", n, p, fed_position=False, fed_sequence=False)
    expected = _outcome(open_session(model.SerializeToString(), log_severity=4), feeds)
    assert (expected is not None) == (-n <= p <= n)
    try:
        result = lowered(model)
    except lowering.LoweringError as error:
        assert expected is None, error
        assert f"position {p} is out of range for a sequence of length {n}" in str(error)
        return
    actual = _outcome(open_session(result.SerializeToString(), log_severity=4), feeds)
    if expected is None:
        assert actual is None, (
            f"n = {n}, p = {p}: the original fails, the lowered model gives {actual}"
        )
        return
    elements = [_element(k) for k in range(n)]
    elements.insert(p, X)
    assert actual is not None
    assert_same(actual, expected)
    assert_same(actual, [-e for e in elements])
