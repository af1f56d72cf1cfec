"""A --target-opset refusal names every blocker: all in one line, each node with -v."""

from __future__ import annotations

import re

import onnx
import pytest

import lowering
from lowering.cli import main
from lowering.passes.target_opset import NAMED_PER_GROUP

# GridSample-20 with mode "linear" needs 16 (GridSample is new there); Resize-19
# with antialias=1 needs 18; ScatterElements with reduction "add" needs 16.
NODES = {
    "GridSample": 'GridSample <mode = "linear"> (x, grid)',
    "Resize": 'Resize <antialias = 1, mode = "linear"> (x, roi, scales)',
    "ScatterElements": 'ScatterElements <reduction = "add"> (x, idx, upd)',
}
NEEDS = {"GridSample": 16, "Resize": 18, "ScatterElements": 16}
OUTPUT_TYPES = {
    "GridSample": "float[1,1,4,4]",
    "Resize": "float[1,1,8,8]",
    "ScatterElements": "float[1,1,4,4]",
}


def _model(counts: dict[str, int]) -> onnx.ModelProto:
    lines, outputs = [], []
    for op, count in counts.items():
        for k in range(count):
            name = f"{op.lower()}{k}"
            lines.append(f"{name} = {NODES[op]}")
            outputs.append(f"{OUTPUT_TYPES[op]} {name}")
    text = f"""<ir_version: 10, opset_import: ["" : 20]>
    g (float[1,1,4,4] x, float[1,4,4,2] grid, float[4] roi, float[4] scales,
       int64[1,1,4,4] idx, float[1,1,4,4] upd) => ({", ".join(outputs)}) {{
      {chr(10).join(lines)}
    }}"""
    model = onnx.parser.parse_model(text)
    for node in model.graph.node:
        node.name = node.output[0]
    return model


def _refusal(model: onnx.ModelProto, target: int) -> lowering.LoweringError:
    with pytest.raises(lowering.LoweringError) as error:
        lowering.lower(model, target_opset=target)
    return error.value


COUNTS = [
    {"GridSample": 1, "Resize": 1},
    {"GridSample": 2, "Resize": 3, "ScatterElements": 1},
    {"Resize": NAMED_PER_GROUP + 3, "GridSample": 1},
]


@pytest.mark.parametrize("counts", COUNTS, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize("target", [11, 13, 15])
def test_every_blocking_op_is_counted_and_its_first_node_named(counts, target):
    error = _refusal(_model(counts), target)
    message = str(error)
    assert "\n" not in message and f"cannot declare opset {target}" in message
    summary = re.search(r"cannot declare opset \d+ \((.*?)\): ", message)
    assert summary is not None, message
    expected = {f"{op} x{n} needs {NEEDS[op]}" for op, n in counts.items()}
    assert set(summary.group(1).split("; ")) == expected
    for op, count in counts.items():
        first = f"{op} (node '{op.lower()}0' in main graph 'g') needs opset {NEEDS[op]}: "
        assert first in message, message
        named = [f"'{op.lower()}{k}'" for k in range(1, min(count, NAMED_PER_GROUP + 1))]
        assert all(name in message for name in named), message
    # -v's lines: every blocker, each with its node and graph, in the model's order.
    assert len(error.details) == sum(counts.values())
    for op, count in counts.items():
        for k in range(count):
            line = f"  blocks: {op} (node '{op.lower()}{k}' in main graph 'g') needs opset"
            assert any(d.startswith(line) for d in error.details), (line, error.details)


def test_beyond_the_limit_the_line_counts_and_v_names_every_node(tmp_path, capsys):
    count = NAMED_PER_GROUP + 3
    path = tmp_path / "in.onnx"
    onnx.save(_model({"Resize": count}), path)
    out = str(tmp_path / "out.onnx")
    assert main([str(path), out, "--target-opset", "13"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"Resize x{count} needs 18" in line
    assert f"'resize{NAMED_PER_GROUP}'" in line and f"'resize{count - 1}'" not in line
    assert "2 others (-v names every node)" in line
    assert main([str(path), out, "--target-opset", "13", "-v"]) == 1
    err = capsys.readouterr().err
    for k in range(count):
        assert f"  blocks: Resize (node 'resize{k}' in main graph 'g') needs opset 18" in err


def test_blockers_in_other_graphs_name_their_graph():
    text = """<ir_version: 10, opset_import: ["" : 20]>
    g (float[1,1,4,4] x, float[1,4,4,2] grid, bool c) => (float[1,1,4,4] y, float[1,1,4,4] z) {
      y = GridSample <mode = "linear"> (x, grid)
      z = If (c) <
        then_branch = t () => (float[1,1,4,4] a) { a = GridSample <mode = "linear"> (x, grid) },
        else_branch = e () => (float[1,1,4,4] b) { b = Identity (x) }
      >
    }"""
    model = onnx.parser.parse_model(text)
    model.graph.node[0].name = "outer"
    model.graph.node[1].attribute[0].g.node[0].name = "inner"
    message = str(_refusal(model, 13))
    assert "GridSample x2 needs 16" in message
    assert "GridSample (node 'outer' in main graph 'g') needs opset 16" in message
    assert "'inner' in then_branch of If" in message, message
