"""The torch export corpus reaches --target-opset 13 and 11 with torch's results.

The models are real torch.onnx exports made by scripts/export_torch_models.py
and committed with torch's eager inputs and outputs, so these tests need no
torch: dynamo exports at opsets 18 and 20 (each also holds a SequenceMap,
from atleast_2d, hstack or vstack on a tuple, lowered in the same run) and,
for the models where its forms differ, the TorchScript exporter's at 17.
The 2026 group has the patterns of LLaMA/Mistral/Qwen2 decoder layers with
a KV cache (Qwen2's inputs have an empty cache), Whisper's encoder and
decoder step, ConvNeXt, Swin, GRU loops with torch.chunk, einsum, circular
pads, interpolation and grid_sample, with dynamic batch (sequence, past)
dims, and a detection head (box decode, TopK, NonMaxSuppression with a
data-dependent count, RoiAlign of the kept boxes; torchvision's aligned=False
and aligned=True). Exports that cannot go down for want of an older form of an op
(tests/matrix_models.GENUINE_LIMITS) are asserted refused, by name.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.passes.target_opset import lowest_opset
from tests.cases.torch_corpus import DATA, EXPORTS, LIMITED, STEMS, load
from tests.helpers import run
from tests.matrix_models import GENUINE_LIMITS

# Real models at every target: a long run (docs/testing.md).
pytestmark = pytest.mark.slow


def _declared(model: onnx.ModelProto) -> int:
    return {o.domain: o.version for o in model.opset_import}[""]


@pytest.mark.parametrize("target", [None, 13, 11])
@pytest.mark.parametrize(("name", "opset"), EXPORTS, ids=[f"{n}-{o}" for n, o in EXPORTS])
def test_export_reaches_the_target_with_torchs_results(name, opset, target):
    """None: the default target (the export's own opset)."""
    model, feeds, expected = load(name, opset)
    assert _declared(model) == opset
    if not name.endswith("_legacy"):  # the TorchScript exporter writes no SequenceMap
        assert any(n.op_type == "SequenceMap" for n in model.graph.node)
    result = lowering.lower(model, target_opset=target)
    assert _declared(result) == (target or opset)
    assert [o.name for o in result.graph.output] == [o.name for o in model.graph.output]
    names = [n.name for n in result.graph.node]
    assert len(set(names)) == len(names), "node names must stay unique"
    onnx.checker.check_model(result, full_check=True)
    assert not any(n.op_type == "SequenceMap" for n in result.graph.node)
    actual = run(result, feeds)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["resnet", "transformer", "bert"])
def test_with_optimize_too(name):
    model, feeds, expected = load(name, 20)
    result = lowering.lower(model, target_opset=11, optimize=True)
    assert _declared(result) == 11
    onnx.checker.check_model(result, full_check=True)
    for got, want in zip(run(result, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("name", "opset"), LIMITED, ids=[f"{n}-{o}" for n, o in LIMITED])
def test_a_genuine_limit_is_reached_and_named_below_it(name, opset):
    """GridSample has no form below 16, Resize's antialias none below 18, a
    scatter reduction none below 16, RoiAlign's half_pixel (torchvision's
    aligned=True) none below 16: down to the limit torch's results, then one
    line naming each blocked node, its op and the opset it needs."""
    limit, _ = GENUINE_LIMITS[name]
    model, feeds, expected = load(name, opset)
    for target in (None, limit):
        result = lowering.lower(model, target_opset=target)
        assert _declared(result) == (target or opset)
        onnx.checker.check_model(result, full_check=True)
        for got, want in zip(run(result, feeds), expected, strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    blocked_op = {
        "scatter_add": "ScatterElements",
        "grid_sample": "GridSample",
        "detection_head_aligned": "RoiAlign",
    }.get(name, "Resize")
    for target in (limit - 1, 13, 11):
        with pytest.raises(lowering.LoweringError) as error:
            lowering.lower(model, target_opset=target)
        message = str(error.value)
        assert "\n" not in message
        assert f"{blocked_op} (node '" in message and f"needs opset {limit}" in message
        if name == "antialias":
            assert "antialias=1 is new in Resize-18" in message
        if name == "detection_head_aligned":
            assert (
                "coordinate_transformation_mode='half_pixel' has no equivalent in RoiAlign-10"
                in message
            )


@pytest.mark.parametrize("opset", [18, 20])
def test_scatter_add_reaches_16_and_names_its_blockers_below(opset):
    model, feeds, expected = load("scatter_add", opset)
    result = lowering.lower(model, target_opset=16)
    assert _declared(result) == 16
    for got, want in zip(run(result, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for target in (15, 13, 11):
        with pytest.raises(lowering.LoweringError) as error:
            lowering.lower(model, target_opset=target)
        message = str(error.value)
        assert "\n" not in message
        assert (
            "ScatterElements (node 'node_scatter_add' in main graph 'main_graph') needs opset 16"
            in message
        )
        assert "ScatterND (node" in message and "reduction='add'" in message


def test_the_cli_prints_one_line_when_blocked(tmp_path):
    out = tmp_path / "out.onnx"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lowering",
            "--target-opset",
            "13",
            str(DATA / "corpus_scatter_add_opset20.onnx"),
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "needs opset 16" in done.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("name", "lowest"),
    [
        ("resnet", 11),
        ("lstm", 11),
        ("scatter_add", 16),
        ("detection_head", 11),
        ("detection_head_aligned", 16),
    ],
)
def test_lowest_opset_of_the_exports(name, lowest):
    model = ir.serde.deserialize_model(load(name, 20)[0])
    lowering.lower_in_place(model)
    assert lowest_opset(model) == lowest


@pytest.mark.parametrize("name", ["resnet", "lstm", "groupnorm_resize", "bert"])
def test_exports_go_up_to_21_too(name):
    model, feeds, expected = load(name, 18)
    result = lowering.lower(model, target_opset=21)
    assert _declared(result) == 21
    onnx.checker.check_model(result, full_check=True)
    for got, want in zip(run(result, feeds), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _readme_table() -> dict[tuple[str, int], str]:
    """docs/opset.md's export x target table, cell by cell."""
    readme = (pathlib.Path(__file__).parent.parent / "docs" / "opset.md").read_text()
    lines = [line.strip() for line in readme.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("| torch export |"))
    end = next(  # the table ends at its first line that is not a row
        (i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines)
    )
    header, rows = lines[start], lines[start + 2 : end]
    targets = [int(c.split()[-1]) for c in header.strip("|").split("|")[1:]]
    cells = {}
    for row in rows:
        parts = [p.strip() for p in row.strip("|").split("|")]
        if " @ opset " in parts[0]:
            for target, cell in zip(targets, parts[1:], strict=True):
                cells[(parts[0], target)] = cell
    return cells


@pytest.mark.parametrize("target", [15, 17])
def test_the_docs_table_is_true_at_15_and_17(target):
    """13 and 11 are checked above; scripts/opset_table.py writes the table."""
    cells = _readme_table()
    assert sorted(f"{stem}.onnx" for stem in STEMS.values()) == sorted(
        p.name for p in DATA.glob("corpus_*.onnx")
    ), "every committed export is tested"
    for (name, opset), stem in STEMS.items():
        cell = cells[(f"{name} @ opset {opset}", target)]
        model = onnx.load(DATA / f"{stem}.onnx")
        if cell == "✓":
            assert _declared(lowering.lower(model, target_opset=target)) == target
        else:
            with pytest.raises(lowering.LoweringError) as error:
                lowering.lower(model, target_opset=target)
            for blocker in cell.split(", "):
                op, needs = blocker.split(" (needs ")
                assert f"{op} (node" in str(error.value)
                assert f"needs opset {needs.rstrip(')')}" in str(error.value)
