"""Which ONNX constructs each runtime runs: one tiny model per construct.

    python scripts/runtime_probe.py > runtime-capabilities.md

Each model uses one construct (Loop, Scan, If, a sequence op, ...) and
takes and returns tensors only; a sequence op is fed by SplitToSequence or
SequenceConstruct, and read by SequenceAt or ConcatFromSequence. Each runs
in every runtime of ``lowering/runtimes/runners.py``, in a child process, set up
as those runners set it up (float32, one thread, whatever the CPU), against an
expectation computed in plain numpy. A cell says "runs" when the outputs
match, "wrong result" when it runs and they don't, and otherwise the
runtime's own error, shortened. This is what ``--runtime NAME`` is based
on: which forms a runtime takes.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from lowering.runtimes.runners import RUNNERS, RuntimeFailure, run_many
from scripts.runtime_cells import short_error, versions


@dataclass(frozen=True)
class Probe:
    text: str
    inputs: list[np.ndarray]
    expect: Callable[..., list[np.ndarray]]
    opset: int = 17

    def model(self) -> onnx.ModelProto:
        """The probe's model, checked."""
        header = f'<ir_version: 8, opset_import: ["" : {self.opset}]>'
        model = onnx.parser.parse_model(header + self.text)
        onnx.checker.check_model(model, full_check=True)
        return model


RNG = np.random.default_rng(0)
X34 = RNG.standard_normal((3, 4)).astype(np.float32)
W4 = RNG.standard_normal(4).astype(np.float32)
X4 = RNG.standard_normal(4).astype(np.float32)


def _conv2d(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Valid 2-D convolution (ONNX's Conv is cross-correlation), one channel."""
    h, w = x.shape[0] - k.shape[0] + 1, x.shape[1] - k.shape[1] + 1
    return np.array(
        [
            [np.sum(x[i : i + k.shape[0], j : j + k.shape[1]] * k) for j in range(w)]
            for i in range(h)
        ],
        np.float32,
    )


PROBES: dict[str, Probe] = {
    "Loop, loop-carried state only": Probe(
        """g (float[4] x) => (float[4] y) {
          n = Constant <value = int64 {3}> ()
          c = Constant <value = bool {1}> ()
          y = Loop (n, c, x) <body = b (int64 i, bool cond, float[4] s) => (bool co, float[4] s2) {
                co = Identity (cond)
                s2 = Add (s, s)
              }>
        }""",
        [X4],
        lambda x: [x * 8],
    ),
    "Loop, scan outputs (body reads outer x)": Probe(
        """g (float[3,4] x) => (float[3,4] y) {
          n = Constant <value = int64 {3}> ()
          c = Constant <value = bool {1}> ()
          y = Loop (n, c) <body = b (int64 i, bool cond) => (bool co, float[4] r) {
                co = Identity (cond)
                row = Gather <axis = 0> (x, i)
                r = Relu (row)
              }>
        }""",
        [X34],
        lambda x: [np.maximum(x, 0)],
    ),
    "Loop, dynamic trip count (Shape of input)": Probe(
        """g (float[N,4] x) => (float[N,4] y) {
          shape = Shape (x)
          zero = Constant <value = int64 {0}> ()
          n = Gather <axis = 0> (shape, zero)
          c = Constant <value = bool {1}> ()
          y = Loop (n, c) <body = b (int64 i, bool cond) => (bool co, float[4] r) {
                co = Identity (cond)
                row = Gather <axis = 0> (x, i)
                r = Add (row, row)
              }>
        }""",
        [X34],
        lambda x: [x * 2],
    ),
    "Scan (state + scan output)": Probe(
        """g (float[3,4] x, float[4] w) => (float[4] total, float[3,4] y) {
          total, y = Scan <num_scan_inputs = 1, body = b (float[4] s, float[4] r) => (float[4] s2, float[4] o) {
                s2 = Add (s, r)
                o = Mul (r, r)
              }> (w, x)
        }""",
        [X34, W4],
        lambda x, w: [w + x.sum(0), x * x],
    ),
    "Scan over a dynamic length": Probe(
        """g (float[N,4] x) => (float[N,4] y) {
          y = Scan <num_scan_inputs = 1, body = b (float[4] r) => (float[4] o) {
                o = Relu (r)
              }> (x)
        }""",
        [X34],
        lambda x: [np.maximum(x, 0)],
    ),
    **{
        f"ScatterElements, reduction {r}": Probe(
            f"""g (float[N,4] x) => (float[2,4] y) {{
              z = Constant <value = float[2,4] {{0, 0, 0, 0, 0, 0, 0, 0}}> ()
              i = Constant <value = int64[3,4] {{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0}}> ()
              y = ScatterElements <axis = 0, reduction = "{r}"> (z, i, x)
            }}""",
            [X34],
            lambda x, f=f: [np.stack([f(f(0, x[0]), x[2]), f(0, x[1])])],
            opset=18,
        )
        for r, f in (("add", np.add), ("max", np.maximum), ("min", np.minimum))
    },
    "If": Probe(
        """g (float[3,4] x) => (float[3,4] y) {
          s = ReduceSum <keepdims = 0> (x)
          zero = Constant <value = float {0}> ()
          c = Greater (s, zero)
          y = If (c) <then_branch = t () => (float[3,4] a) { a = Relu (x) },
                      else_branch = e () => (float[3,4] b) { b = Neg (x) }>
        }""",
        [X34],
        lambda x: [np.maximum(x, 0) if x.sum() > 0 else -x],
    ),
    "SplitToSequence + SequenceAt": Probe(
        """g (float[3,4] x) => (float[4] y) {
          s = SplitToSequence <axis = 0, keepdims = 0> (x)
          one = Constant <value = int64 {1}> ()
          y = SequenceAt (s, one)
        }""",
        [X34],
        lambda x: [x[1]],
    ),
    "SplitToSequence (dynamic length N) + SequenceAt": Probe(
        """g (float[N,4] x) => (float[4] y) {
          s = SplitToSequence <axis = 0, keepdims = 0> (x)
          one = Constant <value = int64 {1}> ()
          y = SequenceAt (s, one)
        }""",
        [X34],
        lambda x: [x[1]],
    ),
    "SequenceLength (of SplitToSequence)": Probe(
        """g (float[3,4] x) => (int64 n) {
          s = SplitToSequence <axis = 0, keepdims = 0> (x)
          n = SequenceLength (s)
        }""",
        [X34],
        lambda x: [np.array(3, np.int64)],
    ),
    "ConcatFromSequence new_axis 0 (of SplitToSequence)": Probe(
        """g (float[3,4] x) => (float[1,12] y) {
          s = SplitToSequence <axis = 0, keepdims = 1> (x)
          y = ConcatFromSequence <axis = 1> (s)
        }""",
        [X34],
        lambda x: [x.reshape(1, 12)],
    ),
    "ConcatFromSequence new_axis 1 (of SplitToSequence)": Probe(
        """g (float[3,4] x) => (float[4,3] y) {
          s = SplitToSequence <axis = 0, keepdims = 0> (x)
          y = ConcatFromSequence <axis = 1, new_axis = 1> (s)
        }""",
        [X34],
        lambda x: [x.T],
    ),
    "SequenceConstruct (read by SequenceAt)": Probe(
        """g (float[4] a, float[4] b) => (float[4] y) {
          s = SequenceConstruct (a, b)
          one = Constant <value = int64 {1}> ()
          y = SequenceAt (s, one)
        }""",
        [X4, W4],
        lambda a, b: [b],
    ),
    "SequenceInsert at position 1 (SplitToSequence, ConcatFromSequence)": Probe(
        """g (float[3,4] x, float[4] w) => (float[4,4] y) {
          s = SplitToSequence <axis = 0, keepdims = 0> (x)
          one = Constant <value = int64 {1}> ()
          s2 = SequenceInsert (s, w, one)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (s2)
        }""",
        [X34, W4],
        lambda x, w: [np.stack([x[0], w, x[1], x[2]])],
    ),
    "SequenceEmpty + SequenceInsert (ConcatFromSequence)": Probe(
        """g (float[4] a, float[4] b) => (float[2,4] y) {
          e = SequenceEmpty <dtype = 1> ()
          s1 = SequenceInsert (e, a)
          s2 = SequenceInsert (s1, b)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (s2)
        }""",
        [X4, W4],
        lambda a, b: [np.stack([a, b])],
    ),
    "Loop carrying a sequence (SequenceEmpty, SequenceInsert in the body)": Probe(
        """g (float[N,4] x) => (float[N,4] y) {
          shape = Shape (x)
          zero = Constant <value = int64 {0}> ()
          n = Gather <axis = 0> (shape, zero)
          c = Constant <value = bool {1}> ()
          e = SequenceEmpty <dtype = 1> ()
          acc = Loop (n, c, e) <body = b (int64 i, bool cond, seq(float) s) => (bool co, seq(float) s2) {
                co = Identity (cond)
                row = Gather <axis = 0> (x, i)
                r = Neg (row)
                s2 = SequenceInsert (s, r)
              }>
          y = ConcatFromSequence <axis = 0, new_axis = 1> (acc)
        }""",
        [X34],
        lambda x: [-x],
    ),
    "Gather at a negative constant index": Probe(
        """g (float[N,4] x) => (float[4] y) {
          minus_one = Constant <value = int64 {-1}> ()
          y = Gather <axis = 0> (x, minus_one)
        }""",
        [X34],
        lambda x: [x[-1]],
    ),
    "Gather at i + n, n = Gather(Shape(x), 0)": Probe(
        """g (float[N,4] x) => (float[4] y, int64 n) {
          shape = Shape (x)
          zero = Constant <value = int64 {0}> ()
          n = Gather (shape, zero)
          minus_one = Constant <value = int64 {-1}> ()
          i = Add (minus_one, n)
          y = Gather <axis = 0> (x, i)
        }""",
        [X34],
        lambda x: [x[-1], np.array(3, np.int64)],
    ),
    "Slice at a negative constant index + Squeeze": Probe(
        """g (float[N,4] x) => (float[4] y) {
          start = Constant <value = int64[1] {-1}> ()
          end = Constant <value = int64[1] {9223372036854775807}> ()
          axes = Constant <value = int64[1] {0}> ()
          row = Slice (x, start, end, axes)
          y = Squeeze (row, axes)
        }""",
        [X34],
        lambda x: [x[-1]],
    ),
    "Constant with value_ints (not value)": Probe(
        """g (float[3,4] x) => (float[4,3] y) {
          shape = Constant <value_ints = [4, 3]> ()
          y = Reshape (x, shape)
        }""",
        [X34],
        lambda x: [x.reshape(4, 3)],
    ),
    "control: Conv, Shape, Gather, Concat, MatMul": Probe(
        """g (float[1,1,4,4] x, float[1,1,3,3] k, float[4,2] m) => (float[1,4] y, int64[4] shape) {
          c = Conv (x, k)
          shape = Shape (c)
          flat_shape = Constant <value = int64[2] {1, 4}> ()
          flat = Reshape (c, flat_shape)
          mm = MatMul (flat, m)
          idx = Constant <value = int64[2] {0, 3}> ()
          picked = Gather <axis = 1> (flat, idx)
          y = Concat <axis = 1> (mm, picked)
        }""",
        [
            RNG.standard_normal((1, 1, 4, 4)).astype(np.float32),
            RNG.standard_normal((1, 1, 3, 3)).astype(np.float32),
            RNG.standard_normal((4, 2)).astype(np.float32),
        ],
        lambda x, k, m: [
            np.concatenate(
                [
                    _conv2d(x[0, 0], k[0, 0]).reshape(1, 4) @ m,
                    _conv2d(x[0, 0], k[0, 0]).reshape(1, 4)[:, [0, 3]],
                ],
                axis=1,
            ),
            np.array([1, 1, 2, 2], np.int64),
        ],
    ),
}


def matches(outputs: list[np.ndarray], expected: list[np.ndarray]) -> bool:
    return len(outputs) == len(expected) and all(
        np.asarray(a).shape == np.asarray(b).shape
        and np.allclose(np.asarray(a).astype(np.float64), b, atol=1e-5)
        for a, b in zip(outputs, expected)
    )


def cell(result: list[np.ndarray] | RuntimeFailure, probe: Probe) -> str:
    if isinstance(result, RuntimeFailure):
        return "refused: " + short_error(str(result))
    expected = probe.expect(*probe.inputs)
    if matches(result, expected):
        return "runs"
    got = "; ".join(f"{np.asarray(o).dtype}{list(np.shape(o))} {_brief(o)}" for o in result)
    want = "; ".join(f"{np.asarray(o).dtype}{list(np.shape(o))}" for o in expected)
    return f"wrong result: {got}, expected {want}"


def _brief(array) -> str:
    flat = np.asarray(array).flatten()
    return str(flat[:4].tolist()) + ("…" if flat.size > 4 else "")


def main() -> None:
    runtimes = sys.argv[1:] or list(RUNNERS)
    cells: dict[str, list[str]] = {name: [] for name in PROBES}
    with tempfile.TemporaryDirectory() as folder:
        for runtime in runtimes:
            jobs = []
            for number, probe in enumerate(PROBES.values()):
                model = probe.model()
                path = pathlib.Path(folder) / runtime / f"probe{number}.onnx"
                path.parent.mkdir(exist_ok=True)
                onnx.save(model, path)
                jobs.append((path, probe.inputs))
            results = run_many(runtime, jobs)
            for (name, probe), result in zip(PROBES.items(), results):
                cells[name].append(cell(result, probe))
                print(f"{name} / {runtime}: {cells[name][-1]}", file=sys.stderr)
    print("| construct | " + " | ".join(runtimes) + " |")
    print("|---" * (len(runtimes) + 1) + "|")
    for name, row in cells.items():
        print(f"| {name} | " + " | ".join(row) + " |")
    print()
    for runtime, version in versions().items():
        if runtime in runtimes:
            print(f"- {runtime}: {version}")


if __name__ == "__main__":
    main()
