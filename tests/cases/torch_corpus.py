"""The torch export corpus: every committed export, by name and opset, with torch's I/O.

Made by scripts/export_torch_models.py: dynamo exports at opsets 18 and 20
and, where its forms differ, the TorchScript exporter's at 17 (``NAME_legacy``).
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx

from tests import matrix_models
from tests.matrix_models import GENUINE_LIMITS

DATA = pathlib.Path(__file__).parent.parent / "data" / "torch"
NAMES = [
    "resnet",
    "mobilenet_block",
    "transformer",
    "lstm",
    "groupnorm_resize",
    "chunk_reduce",
    "bert",
    "gpt2",
]
#: The 2026 group (issue 24) but its genuine limits, and those also exported by
#: the TorchScript exporter.
RECENT = [name for name in matrix_models.RECENT if name not in GENUINE_LIMITS]
LEGACY = ["llama_kv", "qwen2_kv", "whisper_decoder", "swin", "gru_chunk", "circular_pad"]
#: (name, opset) -> file stem, for every committed corpus export
STEMS = {
    **{
        (n, o): f"corpus_{n}_opset{o}" for n in [*NAMES, *RECENT, *GENUINE_LIMITS] for o in (18, 20)
    },
    **{(f"{n}_legacy", 17): f"corpus_{n}_legacy_opset17" for n in LEGACY},
}
LIMITED = [(n, o) for n in GENUINE_LIMITS for o in (18, 20)]
EXPORTS = [key for key in STEMS if key not in LIMITED]


def load(name: str, opset: int) -> tuple[onnx.ModelProto, dict, list]:
    """The export, its feeds and torch's outputs."""
    stem = STEMS[(name, opset)]
    model = onnx.load(DATA / f"{stem}.onnx")
    data = np.load(DATA / f"{stem}.npz")
    feeds = {i.name: data[f"input_{k}"] for k, i in enumerate(model.graph.input)}
    expected = [data[f"output_{k}"] for k in range(len(model.graph.output))]
    return model, feeds, expected
