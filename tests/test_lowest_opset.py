"""The lowest opset, planned on one node of each kind (lowering/opset/lowest.py),
is what planning every node says: on the differential corpus, the torch
exports, and many copies of a node where one copy differs."""

from __future__ import annotations

import onnx_ir as ir
import pytest

import lowering
from lowering.opset.lowest import _representatives
from lowering.passes.target_opset import _lowest_opset, lowest_opset
from tests.cases.differential import CASES
from tests.cases.torch_corpus import STEMS, load
from tests.helpers import parse


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_differential_corpus_lowered(name):
    model = ir.serde.deserialize_model(parse(CASES[name].text))
    lowering.lower_in_place(model)
    assert lowest_opset(model) == _lowest_opset(model)


@pytest.mark.sweep
@pytest.mark.parametrize("key", sorted(STEMS))
def test_the_torch_exports(key):
    model = ir.serde.deserialize_model(load(*key)[0])
    assert lowest_opset(model) == _lowest_opset(model)


def _copies(chain: str, odd: int | None) -> ir.Model:
    """40 copies of a chain on float; copy ``odd`` casts to bfloat16 instead."""
    lines = [chain.format(i=i, to=16 if i == odd else 1) for i in range(40)]
    outputs = ", ".join(f"{'bfloat16' if i == odd else 'float'}[3] r{i}" for i in range(40))
    return ir.serde.deserialize_model(
        parse(
            '<ir_version: 8, opset_import: ["" : 18]>\n'
            f"g (float[3] x) => ({outputs}) {{\n  " + "\n  ".join(lines) + "\n}"
        )
    )


@pytest.mark.parametrize("odd", [None, 0, 17, 39])
@pytest.mark.parametrize(
    "chain",
    [
        "c{i} = Cast <to = {to}> (x)\n  r{i} = Relu(c{i})",  # Relu takes bfloat16 from 14
        "c{i} = Cast <to = {to}> (x)\n  r{i} = Clip(c{i})",  # Clip from 13
    ],
)
def test_many_copies_and_one_that_differs(chain, odd):
    """The odd copy is planned (its own kind), and raises the answer as planning all does."""
    model = _copies(chain, odd)
    assert len(_representatives(list(model.graph))) == (2 if odd is None else 4)
    expected = _lowest_opset(model)
    assert lowest_opset(model) == expected
    assert (expected > _lowest_opset(_copies(chain, None))) == (odd is not None)
