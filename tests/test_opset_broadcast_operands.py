"""Operands that broadcast, in the ops expanded into ONNX's function bodies.

LayerNormalization's spec lets Scale and B broadcast (unidirectionally) to
X's dims from ``axis`` on (the normalized shape); ONNX's body flattens them as if they had those dims, which
the checker and onnxruntime refused for ``X[2,3,4,5], axis=1, Scale[4,5],
B[5]``. The sweep: every axis (positive and negative), Scale and B of each
rank from 1 to the normalized rank (the suffix of X's dims, or with size-1
dims that broadcast), B absent, 1, 2 or 3 outputs, every target the
expansion serves; each result passes the full checker and computes what
onnxruntime computes on the original, and what numpy computes.

The other bodies of ops whose spec lets an operand broadcast use it as it
is (RMSNormalization's scale, Attention's mask): swept the same way where
they are expanded.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import lowering
from lowering.opset.expand import BROADCAST_OPERANDS
from tests.helpers import assert_close, op_types, parse, run

X = (2, 3, 4, 5)
TARGETS = (16, 13, 11)
EPSILON = 1e-5


def _shapes(normalized: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Each rank from 1 to the normalized one: the suffix, all ones, and a 1 in front."""
    found = []
    for rank in range(1, len(normalized) + 1):
        suffix = normalized[-rank:]
        for shape in (suffix, (1,) * rank, (1, *suffix[1:])):
            if shape not in found:
                found.append(shape)
    return found


def _cases():
    for axis in (0, 1, 2, 3, -1, -2, -3, -4):
        normalized = X[axis:]
        shapes = _shapes(normalized)
        # B sweeps absent and every shape Scale takes, each beside another Scale.
        for index, scale in enumerate(shapes):
            b = None if index % 3 == 0 else shapes[(index + 1) % len(shapes)]
            yield axis, scale, b
        yield axis, normalized, None
        yield axis, normalized, (normalized[-1],)


CASES = list(dict.fromkeys(_cases()))


def _text(shape) -> str:
    return f"float[{','.join(str(d) for d in shape)}]"


def _model(axis: int, scale, b, outputs: int, symbolic: bool = False) -> onnx.ModelProto:
    names = ["y", "mean", "inv"][:outputs]
    inputs = [f"{_text(X)} x", f"{_text(scale)} s"] + ([f"{_text(b)} b"] if b else [])
    if symbolic:  # symbolic dims: nothing proves Scale's, or B's, dims are X's
        inputs = ["float[N,3,4,5] x", _symbolic(scale, "s")] + ([_symbolic(b, "b")] if b else [])
    reduced = [*X[:axis], *([1] * len(X[axis:]))] if axis >= 0 else [*X[:axis], *[1] * -axis]
    declared = [_text(X)] + [_text(reduced)] * 2
    text = f"""<ir_version: 10, opset_import: ["" : 17]>
    g ({", ".join(inputs)}) => ({", ".join(f"{t} {n}" for t, n in zip(declared, names))}) {{
      {", ".join(names)} = LayerNormalization <axis = {axis}> (x, s{", b" if b else ""})
    }}"""
    return parse(text)


def _symbolic(shape, name: str) -> str:
    return f"float[{','.join(f'{name}{k}' for k in range(len(shape)))}] {name}"


def _numpy(feeds: dict, axis: int) -> list[np.ndarray]:
    x = feeds["x"].astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    inverse = 1 / np.sqrt(variance + EPSILON)
    y = (x - mean) * inverse * feeds["s"] + feeds.get("b", 0)
    return [a.astype(np.float32) for a in (y, mean, inverse)]


def _feeds(scale, b, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {
        "x": rng.standard_normal(X).astype(np.float32),
        "s": rng.uniform(0.5, 2, scale).astype(np.float32),
    }
    if b:
        feeds["b"] = rng.standard_normal(b).astype(np.float32)
    return feeds


def _check(proto: onnx.ModelProto, target: int, axis: int, feeds: dict) -> onnx.ModelProto:
    out = lowering.lower(proto, target_opset=target)
    assert "LayerNormalization" not in op_types(out)
    onnx.checker.check_model(out, full_check=True)
    got = run(out, feeds)
    want = run(proto, feeds)
    for index, (actual, expected, exact) in enumerate(zip(got, want, _numpy(feeds, axis))):
        assert actual.shape == expected.shape, index
        assert_close(actual, expected, f"output {index} against onnxruntime")
        np.testing.assert_allclose(actual, exact, rtol=1e-4, atol=1e-5, err_msg=f"{index}")
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("outputs", [1, 2, 3])
@pytest.mark.parametrize(("axis", "scale", "b"), CASES, ids=str)
@pytest.mark.sweep
def test_broadcasting_scale_and_b_expand_right(axis, scale, b, outputs, target):
    _check(_model(axis, scale, b, outputs), target, axis, _feeds(scale, b))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("axis", "scale", "b"), [(1, (4, 5), (5,)), (-2, (1, 5), None)])
def test_symbolic_shapes_are_expanded_to_the_normalized_dims(axis, scale, b, target):
    _check(_model(axis, scale, b, 3, symbolic=True), target, axis, _feeds(scale, b, 1))


@pytest.mark.parametrize("target", TARGETS)
def test_operands_of_the_normalized_shape_are_not_expanded(target):
    """The usual case keeps the body as it is: no Expand for a full Scale and B."""
    out = _check(_model(2, (4, 5), (4, 5), 3), target, 2, _feeds((4, 5), (4, 5)))
    assert "Expand" not in op_types(out)


def test_the_sweep_covers_the_family():
    """LayerNormalization is the one op whose body flattens operands its spec
    lets broadcast (RMSNormalization's and Attention's broadcast them as they
    are, below); the sweep has every rank, size-1 dims, B absent, both signs of axis."""
    assert set(BROADCAST_OPERANDS) == {"LayerNormalization"}
    assert len(CASES) == len(set(CASES)) and all(len(s) <= len(X[a:]) for a, s, _ in CASES), (
        "Scale is never of a higher rank than the normalized shape"
    )
    assert {len(s) for a, s, _ in CASES if a in (0, -4)} == {1, 2, 3, 4}
    assert any(b is None for _, _, b in CASES) and any(1 in s for _, s, _ in CASES)
    assert {a for a, _, _ in CASES} >= {-4, -1, 0, 3}


def _rms_numpy(feeds: dict, axis: int) -> np.ndarray:
    x = feeds["x"].astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    rms = np.sqrt((x * x).mean(axis=axes, keepdims=True) + EPSILON)
    return (x / rms * feeds["s"]).astype(np.float32)


@pytest.mark.parametrize("target", [22, 18])  # below 18 its computed axes block
@pytest.mark.parametrize(("axis", "scale", "b"), CASES[::3], ids=str)
def test_rms_normalization_scale_broadcasts_as_it_is(axis, scale, b, target):
    text = f"""<ir_version: 10, opset_import: ["" : 23]>
    g ({_text(X)} x, {_text(scale)} s) => ({_text(X)} y) {{
      y = RMSNormalization <axis = {axis}> (x, s)
    }}"""
    proto = parse(text)
    out = lowering.lower(proto, target_opset=target)
    assert "RMSNormalization" not in op_types(out)
    onnx.checker.check_model(out, full_check=True)
    feeds = _feeds(scale, None, 2)
    (got,) = run(out, feeds)
    assert_close(got, run(proto, feeds)[0], "against onnxruntime")
    np.testing.assert_allclose(got, _rms_numpy(feeds, axis), rtol=1e-4, atol=1e-5)


#: Masks broadcasting to [batch, heads, q_seq, kv_seq] = [2, 3, 4, 5]; onnxruntime
#: runs the original only where the mask has 2 to 4 dims and its q_seq dim is 4.
MASKS = [(4, 5), (1, 5), (2, 1, 4, 5), (3, 1, 5), (1, 1, 1, 1), (5,)]


@pytest.mark.parametrize("target", [22, 18, 13])
@pytest.mark.parametrize("mask", MASKS, ids=str)
def test_attention_mask_broadcasts_as_it_is(mask, target):
    text = f"""<ir_version: 10, opset_import: ["" : 23]>
    g (float[2,3,4,8] q, float[2,3,5,8] k, float[2,3,5,8] v, {_text(mask)} m)
      => (float[2,3,4,8] y) {{
      y = Attention (q, k, v, m)
    }}"""
    proto = parse(text)
    out = lowering.lower(proto, target_opset=target)
    assert "Attention" not in op_types(out)
    onnx.checker.check_model(out, full_check=True)
    rng = np.random.default_rng(3)
    feeds = {
        n: rng.standard_normal(s).astype(np.float32)
        for n, s in (("q", (2, 3, 4, 8)), ("k", (2, 3, 5, 8)), ("v", (2, 3, 5, 8)), ("m", mask))
    }
    q, k, v, m = (feeds[n].astype(np.float64) for n in "qkvm")
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(8) + m
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    exact = (weights / weights.sum(-1, keepdims=True)) @ v
    (got,) = run(out, feeds)
    np.testing.assert_allclose(got, exact.astype(np.float32), rtol=1e-4, atol=1e-5)
    if len(mask) >= 2 and mask[-2] == 4:
        assert_close(got, run(proto, feeds)[0], "against onnxruntime")
