"""The models of the runtime matrix, each with its inputs and a numpy oracle.

Every model takes tensors and returns tensors, so that every runtime can
feed it and be checked; the sequences live inside. The expectations are
computed in plain numpy and Python (a list comprehension is a SequenceMap,
``list.insert`` a SequenceInsert), never by a runtime; the torch exports
carry torch's own eager outputs, stored beside them when they were exported.

Used by ``scripts/runtime_matrix.py`` (the README's table) and
``tests/test_portability.py`` (the same models, default options, asserted).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

import numpy as np
import onnx

DATA = pathlib.Path(__file__).parent / "data" / "torch"
H = '<ir_version: 8, opset_import: ["" : 17]>'


@dataclass(frozen=True)
class Case:
    model: onnx.ModelProto
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    #: Why the default form is allowed to keep a loop (a body that cannot be batched), or "".
    loop_expected: str = field(default="")


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _parse(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(H + text)


def synthetic_cases() -> dict[str, Case]:
    """Hand-written models, one idea each, with their numpy oracles."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    weights = rng.standard_normal((4, 3)).astype(np.float32)
    a, b, c = (rng.standard_normal(2).astype(np.float32) for _ in range(3))
    matrix = rng.standard_normal((2, 3)).astype(np.float32)
    cases = {}
    cases["split -> map -> concat, elementwise body"] = Case(
        _parse("""g (float[T,4] x, float[4] w) => (float[M] y) {
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          m = SequenceMap <body = body (float[4] r) => (float[4] c) {
                t = Mul (r, w)
                c = Relu (t)
              }> (rows)
          y = ConcatFromSequence <axis = 0> (m)
        }"""),
        [x, w],
        [np.concatenate([_relu(r * w) for r in x])],
    )
    cases["split -> map -> concat, MatMul + reduction body"] = Case(
        _parse("""g (float[T,4] x, float[4,3] k) => (float[T,3] y) {
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          m = SequenceMap <body = body (float[4] r) => (float[3] c) {
                p = MatMul (r, k)
                top = ReduceMax <keepdims = 1> (p)
                c = Sub (p, top)
              }> (rows)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }"""),
        [x, weights],
        [np.stack([(r @ weights) - (r @ weights).max() for r in x])],
    )
    cases["split -> map -> concat, body with an If (cannot be batched)"] = Case(
        _parse("""g (float[T,4] x) => (float[T,4] y) {
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          m = SequenceMap <body = body (float[4] r) => (float[4] c) {
                s = ReduceSum <keepdims = 0> (r)
                zero = Constant <value = float {0}> ()
                positive = Greater (s, zero)
                c = If (positive) <then_branch = t () => (float[4] p) { p = Relu (r) },
                                   else_branch = e () => (float[4] q) { q = Neg (r) }>
              }> (rows)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }"""),
        [x],
        [np.stack([_relu(r) if r.sum() > 0 else -r for r in x])],
        loop_expected="its body has an If, which has no batching rule",
    )
    cases["map read by SequenceAt and SequenceLength"] = Case(
        _parse("""g (float[N,4] x) => (float[4] last, int64 n) {
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          m = SequenceMap <body = body (float[4] r) => (float[4] c) { c = Mul (r, r) }> (rows)
          minus_one = Constant <value = int64 {-1}> ()
          last = SequenceAt (m, minus_one)
          n = SequenceLength (m)
        }"""),
        [x],
        [[r * r for r in x][-1], np.array(len(x), np.int64)],
    )
    cases["static SequenceConstruct map, elements of different shapes"] = Case(
        _parse("""g (float[2] a, float[2,3] b, float[2] c) => (float[2] y0, float[2,3] y1, float[3] sums) {
          s = SequenceConstruct (a, b, c)
          twice, total = SequenceMap <body = body (float e) => (float d, float t) {
                d = Add (e, e)
                t = ReduceSum <keepdims = 0> (e)
              }> (s)
          zero = Constant <value = int64 {0}> ()
          one = Constant <value = int64 {1}> ()
          y0 = SequenceAt (twice, zero)
          y1 = SequenceAt (twice, one)
          sums = ConcatFromSequence <axis = 0, new_axis = 1> (total)
        }"""),
        [a, matrix, c],
        [a + a, matrix + matrix, np.array([e.sum() for e in (a, matrix, c)], np.float32)],
    )
    inserted = [-a, -b]
    inserted.insert(1, c)
    inserted.insert(-1, a)
    inserted.append(b)
    cases["insert positions around a map"] = Case(
        _parse("""g (float[2] a, float[2] b, float[2] c) => (float[5,2] y) {
          s = SequenceConstruct (a, b)
          m = SequenceMap <body = body (float[2] e) => (float[2] n) { n = Neg (e) }> (s)
          one = Constant <value = int64 {1}> ()
          minus_one = Constant <value = int64 {-1}> ()
          p = SequenceInsert (m, c, one)
          q = SequenceInsert (p, a, minus_one)
          r = SequenceInsert (q, b)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (r)
        }"""),
        [a, b, c],
        [np.stack(inserted)],
    )
    chain: list[np.ndarray] = []
    chain.insert(0, -b)
    chain.insert(0, -a)
    cases["SequenceEmpty insert chain around a map (paddle2onnx)"] = Case(
        _parse("""g (float[2] a, float[2] b) => (float[2,2] y) {
          s = SequenceConstruct (a, b)
          m = SequenceMap <body = body (float[2] e) => (float[2] n) { n = Neg (e) }> (s)
          i0 = Constant <value = int64 {0}> ()
          i1 = Constant <value = int64 {1}> ()
          m0 = SequenceAt (m, i0)
          m1 = SequenceAt (m, i1)
          empty = SequenceEmpty <dtype = 1> ()
          first = SequenceInsert (empty, m1)
          front = Constant <value = int64 {0}> ()
          both = SequenceInsert (first, m0, front)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (both)
        }"""),
        [a, b],
        [np.stack(chain)],
    )
    return cases


#: Corpus exports that cannot go below an opset, and why: the op has no older
#: form at all. Read by every test that takes the corpus down.
GENUINE_LIMITS: dict[str, tuple[int, str]] = {
    "scatter_add": (16, "ScatterElements/ScatterND reduction='add' is new in 16"),
    "grid_sample": (16, "GridSample does not exist below 16"),
    "antialias": (18, "Resize's antialias is new in 18"),
    "detection_head_aligned": (16, "RoiAlign's half_pixel (torch's aligned=True) is new in 16"),
}


def lowest_reachable(stem: str) -> int:
    """11, or the genuine limit of a corpus export named ``corpus_<name>_...``."""
    name = stem.removeprefix("corpus_").split("_opset")[0].removesuffix("_legacy")
    return GENUINE_LIMITS.get(name, (11, ""))[0]


#: The 2026 group of the corpus (issue 24). Not in the other runtimes' matrix
#: (``torch_cases(recent=False)``): with default options their lowered forms
#: are torch's, which tract does not analyse (symbolic batch dims, Slice on
#: them, Pad "wrap") and OpenVINO does not run as onnxruntime does (Pad
#: "wrap", antialias); measured on 2026-12-01: 24 tract, 4 OpenVINO cases.
RECENT = (
    "llama_kv",
    "qwen2_kv",
    "whisper_encoder",
    "whisper_decoder",
    "convnext",
    "swin",
    "gru_chunk",
    "einsum",
    "circular_pad",
    "resize",
    "antialias",
    "grid_sample",
    "detection_head",
    "detection_head_aligned",
)


def torch_cases(recent: bool = True) -> dict[str, Case]:
    """The committed torch.onnx exports: atleast_* against numpy, the corpus against torch."""
    cases = {}
    for name, function in (
        ("atleast_1d", np.atleast_1d),
        ("atleast_2d", np.atleast_2d),
        ("atleast_3d", np.atleast_3d),
    ):
        with np.load(DATA / f"{name}.npz") as data:
            inputs = [data[f"input_{k}"] for k in range(4)]
        cases[f"torch {name}"] = Case(
            onnx.load(DATA / f"{name}.onnx"), inputs, [function(x) for x in inputs]
        )
    for path in sorted(DATA.glob("corpus_*.onnx")):
        with np.load(path.with_suffix(".npz")) as data:
            inputs = [
                data[f"input_{k}"] for k in range(sum(f.startswith("input_") for f in data.files))
            ]
            outputs = [data[f"output_{k}"] for k in range(len(data.files) - len(inputs))]
        name = path.stem.removeprefix("corpus_").replace("_opset", " @ opset ")
        if not recent and name.split(" @ ")[0].removesuffix("_legacy") in RECENT:
            continue
        cases[f"torch {name}"] = Case(onnx.load(path), inputs, outputs)
    return cases


def matches(outputs: list[np.ndarray], expected: list[np.ndarray]) -> bool:
    """Same count, same shapes, same kind of number, and close values.

    The kind, not the width: MNN computes integers as int32.
    """
    return len(outputs) == len(expected) and all(
        np.shape(got) == np.shape(want)
        and np.asarray(got).dtype.kind == np.asarray(want).dtype.kind
        and np.allclose(got, want, rtol=1e-3, atol=1e-4)
        for got, want in zip(outputs, expected)
    )
