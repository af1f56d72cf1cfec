"""Export Python lists built in loops with torch's TorchScript exporter; commit models and outputs.

TorchScript writes ``list.append`` in a loop as a Loop carrying a sequence
from SequenceEmpty (an accumulator loop, docs/strategies.md), and reads it
by ConcatFromSequence (``torch.stack``/``torch.cat``), SequenceAt (``xs[i]``)
and SequenceLength (``len(xs)``). Each model is small, scripted
(``torch.onnx.export(torch.jit.script(m), dynamo=False)``), and saved as
``tests/data/torch/lists_<name>.onnx`` with an .npz of torch's eager inputs
(``input_i``) and outputs (``output_i``), so that tests/test_torch_lists.py
needs no torch::

    /work/venv/bin/pip install torch==2.13.0
    /work/venv/bin/python scripts/export_torch_lists.py
"""

from __future__ import annotations

import pathlib

import numpy as np
import torch
from torch import Tensor, nn

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch"
OPSET = 17


class Stack(nn.Module):
    """``list.append`` of one shape, then ``torch.stack``."""

    def forward(self, x: Tensor) -> Tensor:
        out: list[Tensor] = []
        for i in range(x.shape[0]):
            out.append(x[i] * 2.0)
        return torch.stack(out)


class CatRagged(nn.Module):
    """Rows of growing length, then ``torch.cat``."""

    def forward(self, x: Tensor) -> Tensor:
        out: list[Tensor] = []
        for i in range(x.shape[0]):
            out.append(x[i, : i + 1])
        return torch.cat(out)


class Nms(nn.Module):
    """NMS-style: ``if keep: out.append(box)``."""

    def forward(self, boxes: Tensor, scores: Tensor) -> Tensor:
        kept: list[Tensor] = []
        for i in range(boxes.shape[0]):
            if bool(scores[i] > 0.5):
                kept.append(boxes[i])
        return torch.stack(kept)


class Decoder(nn.Module):
    """A greedy decoder that stops at the end token (0)."""

    def forward(self, h: Tensor, w: Tensor) -> Tensor:
        tokens: list[Tensor] = []
        for _ in range(20):
            h = torch.tanh(torch.mv(w, h))
            token = torch.argmax(h)
            tokens.append(token)
            if int(token) == 0:
                break
        return torch.stack(tokens)


class Prepend(nn.Module):
    """``list.insert(0, ..)``: the rows reversed."""

    def forward(self, x: Tensor) -> Tensor:
        out: list[Tensor] = []
        for i in range(x.shape[0]):
            out.insert(0, torch.relu(x[i]))
        return torch.stack(out)


class SecondLoop(nn.Module):
    """A list read by index in a second loop: ``xs[i]``, ``xs[n - 1 - i]``, ``xs[-1]``."""

    def forward(self, x: Tensor) -> Tensor:
        xs: list[Tensor] = []
        for i in range(x.shape[0]):
            xs.append(torch.sin(x[i]))
        y = torch.zeros_like(x[0])
        n = len(xs)
        for i in range(n):
            y = y + xs[i] * xs[n - 1 - i]
        return y + xs[-1]


class Length(nn.Module):
    """``len(list)`` of a list built under a condition."""

    def forward(self, x: Tensor) -> Tensor:
        xs: list[Tensor] = []
        for i in range(x.shape[0]):
            if bool(x[i].sum() > 0):
                xs.append(x[i])
        return torch.cat(xs) * float(len(xs))


class Several(nn.Module):
    """Two lists in one loop: one stacked, one ragged and concatenated."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        rows: list[Tensor] = []
        prefixes: list[Tensor] = []
        for i in range(x.shape[0]):
            rows.append(torch.exp(x[i]))
            prefixes.append(x[i, : i + 1] + 1.0)
        return torch.stack(rows), torch.cat(prefixes)


def _inputs() -> dict[str, tuple[nn.Module, tuple[Tensor, ...]]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 4, generator=g)
    return {
        "stack": (Stack(), (x,)),
        "cat_ragged": (CatRagged(), (torch.randn(4, 4, generator=g),)),
        "nms": (Nms(), (torch.randn(6, 4, generator=g), torch.rand(6, generator=g))),
        "decoder": (Decoder(), (torch.randn(4, generator=g), torch.randn(4, 4, generator=g))),
        "prepend": (Prepend(), (x,)),
        "second_loop": (SecondLoop(), (x,)),
        "length": (Length(), (x,)),
        "several": (Several(), (torch.randn(4, 4, generator=g),)),
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (module, inputs) in _inputs().items():
        scripted = torch.jit.script(module)
        path = OUT / f"lists_{name}.onnx"
        names = [f"x{k}" for k in range(len(inputs))]
        dynamic = {n: {d: f"{n}_d{d}" for d in range(t.dim())} for n, t in zip(names, inputs)}
        torch.onnx.export(
            scripted,
            inputs,
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=names,
            dynamic_axes=dynamic,
        )
        outputs = module(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        np.savez(
            OUT / f"lists_{name}.npz",
            **{f"input_{i}": t.numpy() for i, t in enumerate(inputs)},
            **{f"output_{i}": t.detach().numpy() for i, t in enumerate(outputs)},
        )
        print(f"wrote {path.name}")


if __name__ == "__main__":
    main()
