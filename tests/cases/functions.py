"""Maps in model-local functions, their bodies passed down call chains as graph attributes.

Built by the function tests (tests/test_functions.py) and the vectorizer's:
``apply_model`` nests ``wrap`` functions that hand a graph attribute on until
one maps with it, called once per body.
"""

from __future__ import annotations

import onnx

from tests.helpers import parse

HEADER = '<ir_version: 8, opset_import: ["" : 17, "local" : 1]>'
FUNCTION = '<domain: "local", opset_import: ["" : 17, "local" : 1]>'

# Bodies as graph attributes, untyped as torch.onnx writes them.
# ADD_C reads ``c`` from the scope of the call that passes it.
SQUARE = "body (e) => (d) { d = Mul(e, e) }"
ADD_C = "body (e) => (d) { d = Add(e, c) }"


def apply_model(graphs: list[str], depth: int, call_in_map: bool = False) -> onnx.ModelProto:
    """main calls ``wrap<depth-1>`` once per graph in ``graphs``; wrap<k> hands its
    graph attribute on to wrap<k-1>, and wrap0 maps with it as the body."""
    functions = [
        f"{FUNCTION}\n wrap0 <fn> (s) => (t) {{ t = SequenceMap <body: graph = @fn> (s) }}"
    ]
    for k in range(1, depth):
        functions.append(
            f"{FUNCTION}\n wrap{k} <g> (a) => (b) "
            f"{{ b = local.wrap{k - 1} <{'fn' if k == 1 else 'g'}: graph = @g> (a) }}"
        )
    attr = "fn" if depth == 1 else "g"
    outputs = ", ".join(f"seq(float[2]) y{i}" for i in range(len(graphs)))
    calls = []
    for i, graph in enumerate(graphs):
        call = f"local.wrap{depth - 1} <{attr} = {graph}> (x)"
        if call_in_map:  # the call site sits in a map's body in the main graph
            call = f"""SequenceMap <body = outer (float[2] e) => (float[2] r) {{
                      single = SequenceConstruct(e)
                      mapped = {call.replace("(x)", "(single)")}
                      zero = Constant <value = int64 {{0}}> ()
                      r = SequenceAt(mapped, zero)
                    }}> (x)"""
        calls.append(f"y{i} = {call}")
    text = f"""{HEADER}
    g (seq(float[2]) x, float[2] c) => ({outputs}) {{
      {chr(10).join(calls)}
    }}
    {"".join(functions)}"""
    return parse(text)
