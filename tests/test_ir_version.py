"""The IR version the output declares: the lowest its content allows, or --ir-version's.

Every feature of ``lowering/irutils/ir_versions.py``'s table, carried by a
small model, is converted to every target opset from 11 to the latest: the
declared IR version must be the higher of what onnx's own tables say the
opset needs (``onnx.helper.find_min_ir_version_for``) and what the installed
``onnx/onnx.proto`` says the feature needs (the table's quotations are
checked against that file here), the model must pass the full checker,
and one version lower must be refused, naming the feature or the opset.
ONNX's checker itself accepts any IR version from 3 for any content
(measured; see the module), so "lowest" is proved against ONNX's
statements, not its checker.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import onnx
import onnx.helper as oh
import onnx_ir as ir
import pytest
from onnx import TensorProto

import lowering
from lowering.cli import main
from lowering.irutils import ir_versions
from lowering.irutils.ir_versions import FEATURES
from lowering.passes.ir_version import IrVersionPass
from tests.helpers import parse
from tests.matrix_models import lowest_reachable

LATEST = onnx.defs.onnx_opset_version()
TARGETS = list(range(11, LATEST + 1))
DTYPES = [key for key in FEATURES if key in ir.DataType.__members__]


def _version_comments() -> dict[int, str]:
    """IR version -> the comment above it in the installed onnx.proto's ``enum Version``."""
    proto = pathlib.Path(onnx.__file__).with_name("onnx.proto").read_text()
    enum = re.search(r"enum Version \{(.*?)\n\}", proto, re.DOTALL)
    assert enum is not None, "onnx.proto has an enum Version"
    comments: dict[int, str] = {}
    pending: list[str] = []
    for line in enum.group(1).splitlines():
        line = line.strip()
        if line.startswith("//"):
            pending.append(line[2:].strip())
        elif (found := re.match(r"IR_VERSION\w* = (0x[0-9A-Fa-f]+|\d+);", line)) is not None:
            comments[int(found.group(1), 0)] = " ".join(pending)
            pending = []
    return comments


COMMENTS = _version_comments()


@pytest.mark.parametrize("key", list(FEATURES))
def test_each_fact_is_what_onnx_proto_says(key):
    feature = FEATURES[key]
    first = min(v for v, text in COMMENTS.items() if feature.evidence in text)
    assert first == feature.ir_version, (key, COMMENTS[first])


def test_every_element_type_onnx_proto_adds_is_in_the_table():
    for version, text in COMMENTS.items():
        for word in re.findall(r"\b[A-Z][A-Z0-9]+\b", text):
            if word in ir.DataType.__members__ and version > 3:
                assert word in FEATURES and FEATURES[word].ir_version == version, word


def _model(nodes, inputs, outputs, *, initializers=(), functions=(), opsets=None, ir=10):
    graph = oh.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    imports = [oh.make_opsetid(d, v) for d, v in (opsets or {"": 18}).items()]
    model = oh.make_model(graph, opset_imports=imports, functions=list(functions))
    model.ir_version = ir
    return model


X = oh.make_tensor_value_info("x", TensorProto.FLOAT, [2])
Y = oh.make_tensor_value_info("y", TensorProto.FLOAT, [2])
RELU = oh.make_node("Relu", ["x"], ["y"])


def _with_input(type_proto: onnx.TypeProto) -> onnx.ModelProto:
    """A Relu model with one more (unread) graph input of ``type_proto``."""
    return _model([RELU], [X, oh.make_value_info("extra", type_proto)], [Y], ir=14)


def _function(**extra) -> onnx.FunctionProto:
    body = [oh.make_node("Relu", ["a"], ["b"])]
    return oh.make_function("local", "F", ["a"], ["b"], body, [oh.make_opsetid("", 18)], **extra)


def _calling(function: onnx.FunctionProto, **node_extra) -> onnx.ModelProto:
    call = oh.make_node("F", ["x"], ["y"], domain="local", **node_extra)
    return _model([call], [X], [Y], functions=[function], opsets={"": 18, "local": 1}, ir=14)


def _attribute_default() -> onnx.ModelProto:
    leaky = oh.make_node("LeakyRelu", ["a"], ["b"])
    leaky.attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name="alpha", type=1))
    function = oh.make_function(
        "local",
        "F",
        ["a"],
        ["b"],
        [leaky],
        [oh.make_opsetid("", 18)],
        attribute_protos=[oh.make_attribute("alpha", 0.5)],
    )
    return _calling(function)


def _overload() -> onnx.ModelProto:
    model = _calling(_function(overload="v2"))
    model.graph.node[0].overload = "v2"
    return model


def _optional_output() -> onnx.ModelProto:
    wrap = oh.make_node("Wrap", ["x"], ["o"], domain="ext")
    optional = oh.make_optional_type_proto(oh.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    return _model(
        [RELU, wrap], [X], [Y, oh.make_value_info("o", optional)], opsets={"": 18, "ext": 1}
    )


def _not_an_input() -> onnx.ModelProto:
    add = oh.make_node("Add", ["x", "w"], ["y"])
    w = oh.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    return _model([add], [X], [Y], initializers=[w])


def _device_configuration() -> ir.Model:
    model = ir.serde.deserialize_model(_model([RELU], [X], [Y], ir=14))
    model.add_device_configuration("two", num_devices=2)
    return model


CARRIERS = {
    "initializers that are not graph inputs": _not_an_input,
    "model-local functions": lambda: _calling(_function()),
    "optional types": _optional_output,
    "sparse tensor types": lambda: _with_input(
        oh.make_sparse_tensor_type_proto(TensorProto.FLOAT, [2])
    ),
    "function attribute defaults": _attribute_default,
    "function overloads": _overload,
    "multi-device configurations": _device_configuration,
    **{
        key: (lambda key=key: _with_input(oh.make_tensor_type_proto(ir.DataType[key].value, [2])))
        for key in DTYPES
    },
}


def test_every_feature_has_a_carrier():
    assert set(CARRIERS) == set(FEATURES)


def _opset_needs(target: int) -> int:
    return oh.find_min_ir_version_for([oh.make_opsetid("", target)])


def _checked(model: ir.Model) -> onnx.ModelProto:
    proto = ir.serde.serialize_model(model)
    onnx.checker.check_model(proto, full_check=True)
    return proto


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("key", list(FEATURES))
@pytest.mark.sweep
def test_the_declared_ir_version_is_the_lowest_onnx_allows(key, target):
    made = CARRIERS[key]()
    model = made if isinstance(made, ir.Model) else ir.serde.deserialize_model(made)
    assert key in {_key(n.what) for n in ir_versions.needs(model)}, "the carrier carries it"
    lowering.lower(model, target_opset=target)
    expected = max(FEATURES[key].ir_version, _opset_needs(target))
    assert model.ir_version == expected
    _checked(model)
    with pytest.raises(lowering.LoweringError) as error:
        IrVersionPass(expected - 1)(model)
    binding = FEATURES[key].name if FEATURES[key].ir_version == expected else "opset ai.onnx"
    message = str(error.value)
    assert f"cannot declare IR version {expected - 1}" in message and "\n" not in message
    assert binding in message, message
    assert model.ir_version == expected, "a refusal changes nothing"


def _key(what: str) -> str:
    return what.removesuffix(" elements")


@pytest.mark.parametrize(
    ("carrier", "dtype"),
    [
        ("initializer", "FLOAT8E5M2"),
        ("Cast to", "FLOAT8E4M3FN"),
        ("Constant", "INT4"),
        ("Loop body value", "FLOAT4E2M1"),
        ("function body value", "UINT4"),
        ("sequence element", "FLOAT8E8M0"),
    ],
)
def test_element_types_are_found_wherever_they_are(carrier, dtype):
    """Each place a type can sit: the lowest IR is the type's, found through the walk."""
    kind = ir.DataType[dtype].value
    if carrier == "initializer":
        value = oh.make_tensor("t", kind, [1], [0])
        model = _model([RELU], [X], [Y], initializers=[value])
    elif carrier == "Cast to":
        cast = oh.make_node("Cast", ["x"], ["c"], to=kind)
        back = oh.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT)
        model = _model([cast, back], [X], [Y], opsets={"": 25})
    elif carrier == "Constant":
        constant = oh.make_node("Constant", [], ["k"], value=oh.make_tensor("v", kind, [1], [1]))
        model = _model([RELU, constant], [X], [Y], opsets={"": 25})
    elif carrier == "Loop body value":
        body = oh.make_graph(
            [oh.make_node("Identity", ["c"], ["c_out"])],
            "body",
            [
                oh.make_tensor_value_info("i", TensorProto.INT64, []),
                oh.make_tensor_value_info("c", TensorProto.BOOL, []),
            ],
            [oh.make_tensor_value_info("c_out", TensorProto.BOOL, [])],
            value_info=[oh.make_tensor_value_info("unused", kind, [1])],
        )
        body.node.append(
            oh.make_node("Constant", [], ["unused"], value=oh.make_tensor("v", kind, [1], [1]))
        )
        loop = oh.make_node("Loop", ["", "cond"], [], body=body)
        cond = oh.make_tensor("cond", TensorProto.BOOL, [], [False])
        model = _model([RELU, loop], [X], [Y], initializers=[cond], opsets={"": 25})
    elif carrier == "function body value":
        function = _function()
        function.value_info.append(oh.make_tensor_value_info("b", kind, [2]))
        model = _calling(function)
    else:
        seq = oh.make_sequence_type_proto(oh.make_tensor_type_proto(kind, [1]))
        model = _with_input(seq)
    ir_model = ir.serde.deserialize_model(model)
    assert ir_versions.lowest_ir_version(ir_model) == max(
        FEATURES[dtype].ir_version, _opset_needs(ir_model.opset_imports[""])
    )


def test_without_target_or_ir_version_the_input_s_ir_version_is_kept():
    text = """<ir_version: 10, opset_import: ["" : 17]>
    g (seq(float[N]) x) => (seq(float[N]) y) {
      y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
    }"""
    assert lowering.lower(parse(text)).ir_version == 10
    assert lowering.lower(_model([RELU], [X], [Y], ir=10)).ir_version == 10


def test_ir_version_declares_exactly_what_is_asked():
    model = _model([RELU], [X], [Y], opsets={"": 11}, ir=10)
    assert lowering.lower(model, ir_version=6).ir_version == 6
    assert lowering.lower(model, ir_version=9).ir_version == 9
    assert lowering.lower(model, target_opset=11, ir_version=8).ir_version == 8
    assert lowering.lower(model, target_opset=11).ir_version == 6


def test_ir_version_too_low_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "in.onnx"
    onnx.save(_calling(_function()), path)
    assert main([str(path), str(tmp_path / "out.onnx"), "--target-opset", "11", "-q"]) == 0
    assert onnx.load(tmp_path / "out.onnx").ir_version == 8
    capsys.readouterr()
    code = main(
        [str(path), str(tmp_path / "out.onnx"), "--target-opset", "11", "--ir-version", "7"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err, err
    assert err == (
        f"onnx-lower: error: {path}: the model cannot declare IR version 7: model-local "
        "functions needs IR 8 (function 'local:F')"
    )


def test_ir_version_out_of_range_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["in.onnx", "out.onnx", "--ir-version", "2"])
    assert exit_.value.code == 2
    assert "--ir-version must be from 3 to" in capsys.readouterr().err
    with pytest.raises(ValueError, match="ir_version must be from 3 to"):
        lowering.lower(_model([RELU], [X], [Y]), ir_version=onnx.IR_VERSION + 1)


TORCH = [
    path
    for path in sorted(
        pathlib.Path(__file__).parent.joinpath("data", "torch").glob("corpus_*.onnx")
    )
    if lowest_reachable(path.stem) == 11
]


@pytest.mark.parametrize("path", TORCH[:4], ids=lambda p: p.stem)
def test_torch_exports_at_opset_11_declare_ir_6(path):
    """The issue's finding: the same files at IR 6 run in every onnxruntime from 1.12."""
    source = onnx.load(path)
    assert source.ir_version >= 8
    result = lowering.lower(source, target_opset=11)
    assert result.ir_version == 6
    onnx.checker.check_model(result, full_check=True)


def test_the_output_still_runs_where_the_ir_version_came_down():
    from tests.helpers import run

    result = lowering.lower(_calling(_function()), target_opset=11)
    assert result.ir_version == 8
    x = np.array([-1.0, 2.0], np.float32)
    np.testing.assert_array_equal(run(result, {"x": x})[0], np.maximum(x, 0))
