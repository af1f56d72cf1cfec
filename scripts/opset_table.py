"""Which torch exports reach which --target-opset: a Markdown table for the README.

    python scripts/opset_table.py

Rows are the committed torch.onnx (dynamo) exports of tests/data/torch/
(scripts/export_torch_models.py), columns the targets 11, 13, 15 and 17. A
cell is a check mark when ``lowering.lower(model, target_opset=N)`` declares
N, passes the full checker and gives torch's outputs in onnxruntime;
otherwise it names each op that blocks and the lowest opset it needs.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import onnx
import onnxruntime as ort

import lowering
from lowering.runtimes.sessions import open_session

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "torch"
TARGETS = (11, 13, 15, 17)
_BLOCKER = re.compile(r"(\w+) \(node '[^']*' in [^)]*\) needs opset (\d+)")


def exports() -> list[pathlib.Path]:
    return sorted(DATA.glob("corpus_*.onnx"))


def cell(path: pathlib.Path, target: int, check_results: bool = True) -> str:
    model = onnx.load(path)
    try:
        result = lowering.lower(model, target_opset=target)
    except lowering.LoweringError as error:
        blockers = sorted(set(_BLOCKER.findall(str(error))))
        return ", ".join(f"{op} (needs {needs})" for op, needs in blockers) or str(error)
    declared = {o.domain: o.version for o in result.opset_import}[""]
    if declared != target:
        return f"declares {declared}"
    onnx.checker.check_model(result, full_check=True)
    if check_results:
        data = np.load(path.with_suffix(".npz"))
        feeds = {i.name: data[f"input_{k}"] for k, i in enumerate(result.graph.input)}
        session = open_session(result.SerializeToString())
        for k, got in enumerate(session.run(None, feeds)):
            if not np.allclose(got, data[f"output_{k}"], rtol=1e-4, atol=1e-5):
                return f"output {k} differs from torch"
    return "✓"


def table(check_results: bool = True) -> str:
    lines = [
        "| torch export | " + " | ".join(f"opset {t}" for t in TARGETS) + " |",
        "|---|" + "---|" * len(TARGETS),
    ]
    for path in exports():
        name = path.stem.removeprefix("corpus_").replace("_opset", " @ opset ")
        cells = [cell(path, target, check_results) for target in TARGETS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}\n")
    print(table())


if __name__ == "__main__":
    main()
