"""Which runtimes run which models: a Markdown table for the README.

    python scripts/portability_table.py

Rows are models, columns are runtimes x form: the original, lowered, and
lowered with ``--target-opset 11`` (after ``--optimize``, which folds what
unrolling made static). A cell is a check mark when the runtime loads and
runs the model with the same results as onnxruntime on the original, and
otherwise the runtime's own error, shortened.
"""

from __future__ import annotations

import pathlib
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import openvino
import tract

import lowering

ROOT = pathlib.Path(__file__).resolve().parent.parent
H = '<ir_version: 8, opset_import: ["" : 17]>'

SPLIT_MAP_CONCAT = (
    H
    + """
g (float[T,4] x, float[4] w) => (float[M] y) {
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = body (float[4] r) => (float[4] c) {
        t = Mul(r, w)
        c = Relu(t)
      }> (rows)
  y = ConcatFromSequence <axis = 0> (m)
}"""
)


def models() -> dict[str, tuple[onnx.ModelProto, list[np.ndarray]]]:
    found = {}
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        data = np.load(ROOT / "tests" / "data" / "torch" / f"{name}.npz")
        found[f"torch {name}"] = (
            onnx.load(ROOT / "tests" / "data" / "torch" / f"{name}.onnx"),
            [data[f"input_{k}"] for k in range(4)],
        )
    rng = np.random.default_rng(0)
    found["split -> map -> concat"] = (
        onnx.parser.parse_model(SPLIT_MAP_CONCAT),
        [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)],
    )
    return found


def run_ort(path, inputs):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, dict(zip([i.name for i in session.get_inputs()], inputs)))


def run_openvino(path, inputs):
    return [np.asarray(v) for v in openvino.Core().compile_model(str(path), "CPU")(inputs).values()]


def run_tract(path, inputs):
    return [
        t.to_numpy() for t in tract.onnx().load(str(path)).into_model().into_runnable().run(inputs)
    ]


RUNTIMES = {"onnxruntime": run_ort, "OpenVINO": run_openvino, "tract": run_tract}


def cell(runner, path, inputs, expected) -> str:
    try:
        outputs = runner(path, inputs)
    except Exception as error:  # noqa: BLE001 -- any failure is what the table reports
        text = " ".join(str(error).split())
        for marker in ("Unimplemented(", "No conversion rule", "INVALID_GRAPH", "Condition failed"):
            if marker in text:
                text = text[text.index(marker) :]
                break
        return text[:90].replace("|", "/")
    same = len(outputs) == len(expected) and all(
        np.asarray(a).shape == np.asarray(b).shape and np.allclose(a, b, atol=1e-5)
        for a, b in zip(outputs, expected)
    )
    return "✓" if same else "runs, different results"


def main() -> None:
    forms = {
        "original": lambda m: m,
        "lowered": lambda m: lowering.lower(m, optimize=True),
        "lowered, opset 11": lambda m: lowering.lower(m, optimize=True, target_opset=11),
    }
    header = ["model", *(f"{r}: {f}" for r in RUNTIMES for f in forms)]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    with tempfile.TemporaryDirectory() as folder:
        for name, (model, inputs) in models().items():
            original_path = pathlib.Path(folder) / "original.onnx"
            onnx.save(model, original_path)
            expected = run_ort(original_path, inputs)
            paths = {}
            for form, make in forms.items():
                path = pathlib.Path(folder) / f"{form.replace(' ', '_').replace(',', '')}.onnx"
                try:
                    onnx.save(make(model), path)
                    paths[form] = path
                except lowering.LoweringError as error:
                    paths[form] = str(error)
            cells = []
            for runner in RUNTIMES.values():
                for form in forms:
                    target = paths[form]
                    cells.append(
                        target[:90]
                        if isinstance(target, str)
                        else cell(runner, target, inputs, expected)
                    )
            rows.append("| " + " | ".join([name, *cells]) + " |")
    print(f"openvino {openvino.__version__}, tract (PyPI), onnxruntime {ort.__version__}\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
