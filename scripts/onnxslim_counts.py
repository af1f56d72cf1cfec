"""Node counts of onnxslim before and after lowering, on the committed torch exports.

docs/python-api.md's table ("lower, then onnxslim" against "onnxslim, then
lower") is this script's output; the figures depend on onnxslim's version,
which the table names. onnxslim is no dependency of the package or its
tests: install it to run this (``pip install onnxslim``, which pulls in
sympy, colorama and ml-dtypes)::

    python scripts/onnxslim_counts.py            # every opset-18 export, as Markdown

A row where onnxslim's own output is refused by onnxruntime says so
instead of a count (its other order is then not compared). Nodes are
counted at every depth, as the summary counts them.
"""

from __future__ import annotations

import pathlib
import sys

import onnx

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lowering
from lowering.runtimes.sessions import open_session

DATA = ROOT / "tests" / "data" / "torch"


def nodes(model: onnx.ModelProto) -> int:
    """Every node, in every subgraph (function bodies aside)."""

    def within(graph: onnx.GraphProto) -> int:
        count = 0
        for node in graph.node:
            count += 1
            for attr in node.attribute:
                for sub in [attr.g] if attr.HasField("g") else attr.graphs:
                    count += within(sub)
        return count

    return within(model.graph)


def counts(stem: str, onnxslim) -> tuple[int, int | None]:
    """(lower then onnxslim, onnxslim then lower; None where onnxslim's own output
    does not load in onnxruntime)."""
    original = onnx.load(DATA / f"{stem}.onnx")
    lower_first = onnxslim.slim(lowering.lower(original))
    slimmed = onnxslim.slim(original)
    try:
        open_session(slimmed.SerializeToString())
    except Exception:  # noqa: BLE001 -- onnxslim's output, refused by onnxruntime
        return nodes(lower_first), None
    return nodes(lower_first), nodes(lowering.lower(slimmed))


def main() -> None:
    try:
        import onnxslim
    except ImportError:
        sys.exit("needs onnxslim: pip install onnxslim")
    stems = sorted(p.stem for p in DATA.glob("corpus_*_opset18.onnx"))
    print(f"onnxslim {onnxslim.__version__}, onnx {onnx.__version__}\n")
    print("| export | lower, then onnxslim | onnxslim, then lower |")
    print("| --- | ---: | ---: |")
    fewer = compared = 0
    for stem in stems:
        first, second = counts(stem, onnxslim)
        name = stem.removeprefix("corpus_").removesuffix("_opset18")
        said = "onnxslim's output is refused by onnxruntime" if second is None else str(second)
        print(f"| {name} | {first} | {said} |")
        if second is not None:
            compared += 1
            fewer += first < second
    print(f"\nlower, then onnxslim leaves fewer nodes on {fewer} of the {compared} compared")


if __name__ == "__main__":
    main()
