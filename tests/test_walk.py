"""The one walker (``lowering.irutils.walk``) and every CLI path on models that hold
graph-reference attributes (``body = @fn`` in a model-local function).

onnx_ir's own iterators stop with an error at such an attribute; before the
package had one walker, the CLI's external-data scan crashed on these models
("internal error while trying to read the model: TypeError") while
``lowering.lower()`` worked.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from lowering.cli import main
from lowering.irutils import walk
from tests.helpers import all_nodes, assert_same, cli, op_types, parse, run

HEADER = '<ir_version: 8, opset_import: ["" : 18, "local" : 1]>'
FUNCTION = '<domain: "local", opset_import: ["" : 18, "local" : 1]>'
BODY = "body (float[3] e) => (float[3] d) { d = Mul(e, w) }"

# Where the reference sits inside the function: at its top level, in an If
# branch, in a Loop body, and in a function called by the function.
FUNCTIONS = {
    "top level": f"""{FUNCTION}
        wrap <fn> (s, c) => (t) {{ t = SequenceMap <body: graph = @fn> (s) }}""",
    "if branch": f"""{FUNCTION}
        wrap <fn> (s, c) => (t) {{
          t = If (c) <
            then_branch = then_g () => (a) {{ a = SequenceMap <body: graph = @fn> (s) }},
            else_branch = else_g () => (b) {{ b = Identity (s) }}>
        }}""",
    "loop body": f"""{FUNCTION}
        wrap <fn> (s, c) => (t) {{
          one = Constant <value = int64 {{1}}> ()
          t = Loop (one, c, s) <body = step (int64 i, bool k, seq_in) => (bool k2, seq_out) {{
            k2 = Identity (k)
            seq_out = SequenceMap <body: graph = @fn> (seq_in)
          }}>
        }}""",
    "nested call": f"""{FUNCTION}
        inner <fn> (s) => (t) {{ t = SequenceMap <body: graph = @fn> (s) }}
        {FUNCTION}
        wrap <g> (s, c) => (t) {{ t = local.inner <fn: graph = @g> (s) }}""",
}


def model_with_reference(where: str) -> onnx.ModelProto:
    attribute = "g" if where == "nested call" else "fn"
    return parse(f"""{HEADER}
    main (seq(float[3]) x, bool c) => (seq(float[3]) y) <float[3] w = {{1.5, -2, 3}}> {{
      y = local.wrap <{attribute} = {BODY}> (x, c)
    }}
    {FUNCTIONS[where]}""")


W = np.array([1.5, -2, 3], np.float32)


def _feeds(n: int) -> dict:
    rng = np.random.default_rng(n)
    return {
        "x": [rng.standard_normal(3).astype(np.float32) for _ in range(n)],
        "c": np.array(True),
    }


@pytest.mark.parametrize("where", list(FUNCTIONS))
def test_the_walker_reaches_every_node_past_a_reference(where):
    model = ir.serde.deserialize_model(model_with_reference(where))
    nodes = list(walk.model_nodes(model))
    expected = sum(1 for _ in all_nodes(model_with_reference(where)))
    assert len(nodes) == expected
    assert "SequenceMap" in {node.op_type for node in nodes}
    # Every graph nested in a function is reached, and none is reached twice.
    graphs = list(walk.model_graphs(model))
    assert len(graphs) == len(set(map(id, graphs)))


# Every path through the command line: read, summary, write, verbose summary,
# external data, streams, verify, target opset, optimize.
CLI_PATHS = {
    "plain": [],
    "verbose": ["-v"],
    "quiet": ["-q"],
    "external data": ["--external-data", "out.onnx.data"],
    "verify": ["--verify"],
    "target opset": ["--target-opset", "14"],
    "loop strategy": ["--strategy", "loop"],
    "optimize": ["--optimize"],
    "runtime": ["--runtime", "openvino", "--allow-unsupported"],  # it returns a sequence
}


@pytest.mark.parametrize("where", list(FUNCTIONS))
@pytest.mark.parametrize("path", list(CLI_PATHS))
def test_every_cli_path_reads_and_writes_a_model_with_a_reference(tmp_path, where, path):
    source = tmp_path / "in.onnx"
    onnx.save(
        model_with_reference(where),
        source,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="in.onnx.data",
        size_threshold=0,
    )
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    target = tmp_path / "out.onnx"
    assert main([str(source), str(target), *CLI_PATHS[path]]) == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before} == before
    result = onnx.load(target)
    onnx.checker.check_model(target, full_check=True)
    assert "SequenceMap" not in op_types(result)
    for n in (0, 3):
        feeds = _feeds(n)
        assert_same(run(onnx.load(target), feeds), [[e * W for e in feeds["x"]]])


@pytest.mark.parametrize("where", list(FUNCTIONS))
def test_streams_read_and_write_a_model_with_a_reference(where):
    data = model_with_reference(where).SerializeToString()
    done = cli(["-", "-"], stdin=data)
    assert done.returncode == 0, done.stderr.decode()
    result = onnx.load_model_from_string(done.stdout)
    assert "SequenceMap" not in op_types(result)
    feeds = _feeds(2)
    assert_same(run(result, feeds), [[e * W for e in feeds["x"]]])


def test_external_data_in_a_function_subgraph_is_found(tmp_path):
    """A Loop body inside a function may hold initializers: their external data
    is read from the model's folder too."""
    model = ir.serde.deserialize_model(model_with_reference("loop body"))
    wrap = model.functions[("local", "wrap", "")]
    loop = next(node for node in wrap if node.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    bias = ir.Value(name="bias", const_value=ir.Tensor(np.zeros(3, np.float32), name="bias"))
    body.initializers["bias"] = bias
    folder = tmp_path / "m"
    folder.mkdir()
    ir.save(model, folder / "m.onnx", external_data="m.data", size_threshold_bytes=0)
    loaded = onnx.load(folder / "m.onnx", load_external_data=False)
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in _all_initializers(loaded))
    assert main([str(folder / "m.onnx"), str(tmp_path / "out.onnx")]) == 0
    result = onnx.load(tmp_path / "out.onnx")
    feeds = _feeds(3)
    assert_same(run(result, feeds), [[e * W for e in feeds["x"]]])


def _all_initializers(model: onnx.ModelProto):
    yield from model.graph.initializer
    for function in model.functions:
        for node in function.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from attr.g.initializer


def test_walk_skips_reference_attributes_of_every_graph_type():
    node = ir.Node(
        "",
        "If",
        [],
        attributes=[
            ir.RefAttr("then_branch", "a", ir.AttributeType.GRAPH),
            ir.RefAttr("branches", "b", ir.AttributeType.GRAPHS),
        ],
    )
    assert walk.subgraphs(node) == []
    assert walk.has_subgraphs(node)
