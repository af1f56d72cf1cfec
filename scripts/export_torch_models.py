"""Export the torch corpus with torch.onnx (dynamo); commit models and torch's outputs.

Two groups, all under tests/data/torch/ with an .npz of torch's eager inputs
(``input_i``) and outputs (``output_i``), so that the tests never need torch:

- ``atleast_{1,2,3}d``: torch.atleast_*d over a tuple of tensors, which
  torch.onnx writes as SequenceConstruct -> SequenceMap with an untyped body
  (the case ONNX's own function expansion turns into an invalid model);
- the ``--target-opset`` corpus (``corpus_<name>_opset<N>``, N in 18 and 20):
  small random-init models covering what real exports bring (a residual CNN,
  a MobileNetV3 block, a TransformerEncoder, an LSTM with argmax, GroupNorm
  with interpolation and padding, chunk/softmax/reductions/Mish, a
  scatter-add, and Hugging Face BERT- and GPT-2-style models built from a
  config in code). Each also calls torch.atleast_2d, hstack or vstack on a
  tuple, so a SequenceMap is lowered in the same run.

    python3 -m venv /work/venv-torch
    /work/venv-torch/bin/pip install torch==2.13.0 onnx onnxscript onnx-ir transformers
    /work/venv-torch/bin/python scripts/export_torch_models.py [--only NAME]
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch"
OPSETS = (18, 20)


class AtLeast(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a, b, c, d):
        return self.fn((a, b, c, d))


def export_atleast() -> None:
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
        _save_io(OUT / f"{name}.npz", inputs, fn(inputs))
        print(f"wrote {name}.onnx")


# --- the --target-opset corpus ----------------------------------------------


class Residual(nn.Module):
    """Conv, BatchNorm, ReLU, a residual add, adaptive pooling, Linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = F.relu(self.bn1(self.stem(x)))
        y = F.relu(y + self.bn2(self.conv(y)))
        features = torch.flatten(self.pool(y), 1)
        logits = self.fc(features)
        return (logits, *torch.atleast_2d((logits.sum(), features[0])))


class MobileBlock(nn.Module):
    """MobileNetV3: depthwise conv, Hardswish, squeeze-excite with Hardsigmoid."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Conv2d(4, 16, 1)
        self.bn = nn.BatchNorm2d(16)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.se_reduce = nn.Conv2d(16, 4, 1)
        self.se_expand = nn.Conv2d(4, 16, 1)
        self.project = nn.Conv2d(16, 4, 1)

    def forward(self, x):
        y = F.hardswish(self.bn(self.expand(x)))
        y = F.hardswish(self.depthwise(y))
        scale = F.adaptive_avg_pool2d(y, 1)
        scale = F.hardsigmoid(self.se_expand(F.relu(self.se_reduce(scale))))
        out = x + self.project(y * scale)
        return out, torch.hstack((out.mean((2, 3)), scale.flatten(1)))


class Encoder(nn.Module):
    """A 4-layer TransformerEncoder: LayerNorm, GELU, attention softmax."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model=16, nhead=2, dim_feedforward=32, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)

    def forward(self, x):
        y = self.encoder(x)
        return y, torch.vstack((y[:, 0], y[:, -1]))


class Recurrent(nn.Module):
    """An LSTM over a batch-first sequence, then argmax."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        logits = self.head(y)
        best = logits.argmax(-1)
        return (logits, best, *torch.atleast_2d((h[0], c[0])))


class NormResize(nn.Module):
    """GroupNorm, bilinear and nearest interpolation, reflect and constant pad."""

    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(2, 4)
        self.conv = nn.Conv2d(4, 4, 3)

    def forward(self, x):
        y = self.norm(x)
        up = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        near = F.interpolate(y, size=(10, 12), mode="nearest")
        padded = F.pad(up, (1, 1, 1, 1), mode="reflect")
        padded = F.pad(self.conv(padded), (0, 2, 1, 0), mode="constant", value=0.5)
        return (padded, near, *torch.atleast_2d((y.mean(), near.amax(dim=(2, 3)))))


class ChunkReduce(nn.Module):
    """chunk/split, softmax on a non-last axis, mean/var/max over dims, Mish."""

    def forward(self, x):
        a, b = torch.chunk(x, 2, dim=1)
        c, d, e = torch.split(x, [1, 2, 1], dim=2)
        s = torch.softmax(a, dim=1) + torch.log_softmax(b, dim=1)
        m = x.mean(dim=(1, 2), keepdim=True)
        v = x.var(dim=2)
        mx = x.amax(dim=(0, 3))
        return (
            s,
            F.mish(c + d.sum(2, keepdim=True) + e),
            m,
            v,
            mx,
            *torch.atleast_2d((m.sum(), mx[0])),
        )


class ScatterAdd(nn.Module):
    """scatter_add and index_add: ScatterElements/ScatterND with reduction="add"."""

    def forward(self, x, index):
        y = torch.zeros(3, x.shape[1]).scatter_add(0, index, x)
        z = torch.zeros(4, x.shape[1]).index_add(0, index[:, 0] % 4, x)
        return y, z, torch.vstack((y.sum(0), z.sum(0)))


def _bert():
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        attn_implementation="eager",
    )
    return BertModel(config)


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=50,
        n_embd=16,
        n_layer=2,
        n_head=2,
        n_positions=16,
        use_cache=False,
        attn_implementation="eager",
    )
    return GPT2LMHeadModel(config)


class HuggingFace(nn.Module):
    def __init__(self, build):
        super().__init__()
        self.model = build()

    def forward(self, ids, mask):
        out = self.model(input_ids=ids, attention_mask=mask, use_cache=False, return_dict=True)
        hidden = out[0]
        return (hidden, *torch.atleast_2d((hidden[0, 0], hidden.mean())))


def _corpus():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 50, (2, 7), generator=g)
    mask = torch.ones(2, 7, dtype=torch.int64)
    mask[1, 5:] = 0
    return {
        "resnet": (Residual, (torch.randn(2, 3, 8, 8, generator=g),)),
        "mobilenet_block": (MobileBlock, (torch.randn(2, 4, 8, 8, generator=g),)),
        "transformer": (Encoder, (torch.randn(2, 5, 16, generator=g),)),
        "lstm": (Recurrent, (torch.randn(2, 5, 6, generator=g),)),
        "groupnorm_resize": (NormResize, (torch.randn(1, 4, 5, 6, generator=g),)),
        "chunk_reduce": (ChunkReduce, (torch.randn(2, 4, 4, 3, generator=g),)),
        "scatter_add": (
            ScatterAdd,
            (torch.randn(5, 3, generator=g), torch.randint(0, 3, (5, 3), generator=g)),
        ),
        "bert": (lambda: HuggingFace(_bert), (ids, mask)),
        "gpt2": (lambda: HuggingFace(_gpt2), (ids, mask)),
    }


CORPUS_NAMES = list(_corpus())


def export_corpus(only: str | None = None) -> None:
    for name, (build, inputs) in _corpus().items():
        if only and name != only:
            continue
        torch.manual_seed(0)
        module = build().eval()
        with torch.no_grad():
            expected = module(*inputs)
        for opset in OPSETS:
            stem = f"corpus_{name}_opset{opset}"
            program = torch.onnx.export(
                module, inputs, dynamo=True, opset_version=opset, optimize=False
            )
            program.save(str(OUT / f"{stem}.onnx"))
            _strip_debug_info(OUT / f"{stem}.onnx")
            _save_io(OUT / f"{stem}.npz", inputs, expected)
            print(f"wrote {stem}.onnx")


def _strip_debug_info(path: pathlib.Path) -> None:
    """Drop the stack traces torch writes into every node; they are most of the bytes."""
    import onnx

    model = onnx.load(path)

    def strip(graph) -> None:
        for node in graph.node:
            node.doc_string = ""
            del node.metadata_props[:]
            for attr in node.attribute:
                if attr.HasField("g"):
                    strip(attr.g)
                for sub in attr.graphs:
                    strip(sub)

    strip(model.graph)
    for function in model.functions:
        for node in function.node:
            node.doc_string = ""
            del node.metadata_props[:]
    onnx.save(model, path)


def _save_io(path: pathlib.Path, inputs, outputs) -> None:
    np.savez(
        path,
        **{f"input_{i}": t.numpy() for i, t in enumerate(inputs)},
        **{f"output_{i}": t.detach().numpy() for i, t in enumerate(outputs)},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="export only this corpus model")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.only:
        export_atleast()
    export_corpus(args.only)


if __name__ == "__main__":
    main()
