"""Export torch.atleast_{1,2,3}d over tuples of tensors with torch.onnx (dynamo).

torch.onnx writes these as SequenceConstruct -> SequenceMap with an untyped
body, the case that ONNX's own function expansion turns into an invalid model.
The models and torch's eager outputs are committed under tests/data/torch/ so
that the tests never need torch:

    pip install torch==2.13.0 && python scripts/export_torch_models.py
"""

from __future__ import annotations

import pathlib

import numpy as np
import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch"


class AtLeast(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a, b, c, d):
        return self.fn((a, b, c, d))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    # One tensor of each rank 0..3, so every branch of the body's If runs.
    inputs = (
        torch.randn((), generator=generator),
        torch.randn(3, generator=generator),
        torch.randn(2, 3, generator=generator),
        torch.randn(2, 3, 4, generator=generator),
    )
    for fn in (torch.atleast_1d, torch.atleast_2d, torch.atleast_3d):
        name = fn.__name__
        program = torch.onnx.export(AtLeast(fn), inputs, dynamo=True, optimize=False)
        program.save(str(OUT / f"{name}.onnx"))
        expected = [t.numpy() for t in fn(inputs)]
        np.savez(
            OUT / f"{name}.npz",
            **{f"input_{i}": t.numpy() for i, t in enumerate(inputs)},
            **{f"output_{i}": e for i, e in enumerate(expected)},
        )
        print(f"wrote {name}.onnx with {len(expected)} outputs")


if __name__ == "__main__":
    main()
