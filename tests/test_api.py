"""The Python API: all or nothing, typed, and strict about its options (issue 11).

Every kind of LoweringError is raised through ``lowering.lower(ir_model)`` on
a model where something else *was* lowered before the failure was found, and
the model's serialization must come out exactly as it went in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib.resources
import inspect
import re
import typing
from collections.abc import Iterator

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
import lowering.options
from lowering import LowerSequenceMapPass, NormalizeSequenceInsertPass, TargetOpsetPass
from tests.helpers import cli, parse

H = """<ir_version: 8, opset_import: ["" : 17, "custom" : 1]>"""
SIGNATURE = "g (seq(float[N]) x, float[3] t, float[2] a, float[2] b) => (seq(float[N]) y0, z)"
GOOD = "[good] y0 = SequenceMap <body = body (float[N] e) => (float[N] r) { r = Neg(e) }> (x)"

# Each: the offending node(s), the text the error must contain, and lower()'s options.
BROKEN = {
    "no_body": ("[bad] z = SequenceMap (x)", "has no 'body' attribute", {}),
    "body_attribute_not_a_graph": (
        "[bad] z = SequenceMap <body = 1> (x)",
        "not a graph",
        {},
    ),
    "body_input_count": (
        (
            "[bad] z = SequenceMap <body = b2 (float[N] p, float[N] q) => (float[N] c) "
            "{ c = Add(p, q) }> (x)"
        ),
        "its body has 2 input(s) but the node has 1",
        {},
    ),
    "body_output_count": (
        "[bad] z, w = SequenceMap <body = b2 (float[N] p) => (float[N] c) { c = Neg(p) }> (x)",
        "its body has 1 output(s) but the node has 2",
        {},
    ),
    "first_input_is_a_tensor": (
        "[bad] z = SequenceMap <body = b2 (float[3] p) => (float[3] c) { c = Neg(p) }> (t)",
        "is a tensor, not a sequence",
        {},
    ),
    "extra_input_of_unknown_type": (
        (
            "u = custom.Foo(t)\n"
            "[bad] z = SequenceMap <body = b2 (float[N] p, q) => (float[N] c) { c = Neg(p) }> (x, u)"
        ),
        "the type of input 1 ('u') is unknown",
        {},
    ),
    "body_output_is_a_sequence": (
        (
            "[bad] z = SequenceMap <body = b2 (float[N] p) => (seq(float[N]) c) "
            "{ c = SequenceConstruct(p) }> (x)"
        ),
        "a SequenceMap body must return tensors",
        {},
    ),
    "element_type_unknowable": (
        "[bad] z = SequenceMap <body = b2 (float[N] p) => (c) { c = custom.Foo(p) }> (x)",
        "element type of output 0",
        {},
    ),
    "insert_position_out_of_range": (
        (
            "s = SequenceConstruct(a, b)\n"
            "pos = Constant <value = int64 {5}> ()\n"
            "[bad] z = SequenceInsert(s, a, pos)"
        ),
        "position 5 is out of range for a sequence of length 2",
        {},
    ),
    "insert_position_with_two_elements": (
        (
            "s = SequenceConstruct(a, b)\n"
            "pos = Constant <value = int64[2] {0, 1}> ()\n"
            "[bad] z = SequenceInsert(s, a, pos)"
        ),
        "constant of shape [2]",
        {},
    ),
    "insert_position_not_an_integer": (
        (
            "s = SequenceConstruct(a, b)\n"
            "pos = Constant <value = float {0}> ()\n"
            "[bad] z = SequenceInsert(s, a, pos)"
        ),
        "SequenceInsert takes int32 or int64",
        {},
    ),
    "no_input": (
        (
            "[bad] z = SequenceMap <body = b2 () => (float[1] c) "
            "{ c = Constant <value = float[1] {1.0}> () }> ()"
        ),
        "it has no input sequence",
        {},
    ),
    "omitted_input": (
        (
            "[bad] z = SequenceMap <body = b2 (float[N] p, float[N] q) => (float[N] c) "
            '{ c = Add(p, q) }> (x, "")'
        ),
        "input 1 is empty",
        {},
    ),
    "input_neither_sequence_nor_tensor": (
        (
            "[bad] z = SequenceMap <body = b2 (float[N] p, float[N] q) => (float[N] c) "
            "{ c = Add(p, q) }> (x, o)"
        ),
        "but SequenceMap takes sequences of tensors and tensors",
        {},
    ),
    "output_declared_as_a_tensor": (
        "[bad] z = SequenceMap <body = b2 (float[N] p) => (float[N] c) { c = Neg(p) }> (x)",
        "but SequenceMap outputs are sequences",
        {},
    ),
    "inconsistent_types": (
        "[bad] z = SequenceMap <body = b2 (float[N] p) => (float[N] c) { c = Neg(p) }> (x)",
        "inconsistent types: output 0 ('z')",
        {},
    ),
    "target_opset_blocked": (
        "ax = custom.Axes()\n[bad] z = ReduceSum(a, ax)",
        "cannot declare opset 11",
        {"target_opset": 11},
    ),
}


# Cases that need other declarations than SIGNATURE's.
SIGNATURES = {
    "input_neither_sequence_nor_tensor": SIGNATURE.replace(
        "float[2] b)", "float[2] b, optional(seq(float[N])) o)"
    ),
    "output_declared_as_a_tensor": SIGNATURE.replace(", z)", ", float[N] z)"),
    "inconsistent_types": SIGNATURE.replace(", z)", ", seq(int64[1]) z)"),
}


def _model(kind: str) -> onnx.ModelProto:
    nodes, _, _ = BROKEN[kind]
    return parse(f"{H}\n{SIGNATURES.get(kind, SIGNATURE)} {{\n{GOOD}\n{nodes}\n}}")


@pytest.mark.parametrize("kind", list(BROKEN))
def test_every_error_leaves_an_onnx_ir_model_as_it_was(kind):
    _, expected, options = BROKEN[kind]
    model = ir.serde.deserialize_model(_model(kind))
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(lowering.LoweringError) as error:
        lowering.lower(model, **options)
    assert expected in str(error.value)
    assert ir.serde.serialize_model(model).SerializeToString() == before


@pytest.mark.parametrize("kind", list(BROKEN))
def test_every_error_leaves_a_proto_as_it_was(kind):
    _, expected, options = BROKEN[kind]
    model = _model(kind)
    before = model.SerializeToString()
    with pytest.raises(lowering.LoweringError, match=None) as error:
        lowering.lower(model, **options)
    assert expected in str(error.value)
    assert model.SerializeToString() == before


# Each pass on its own, too: it checks every node before it changes any.
PASS_CASES = {
    "LowerSequenceMapPass": (LowerSequenceMapPass, "first_input_is_a_tensor"),
    "NormalizeSequenceInsertPass": (
        NormalizeSequenceInsertPass,
        "insert_position_out_of_range",
    ),
    "TargetOpsetPass": (lambda: TargetOpsetPass(11), "target_opset_blocked"),
}

# A second, good node of the pass's own kind, before the bad one.
GOOD_OF_KIND = {
    "LowerSequenceMapPass": "",
    "NormalizeSequenceInsertPass": (
        "s0 = SequenceConstruct(a)\nneg = Constant <value = int64 {-1}> ()\n"
        "ok = SequenceInsert(s0, b, neg)"
    ),
    "TargetOpsetPass": "sq = Unsqueeze(a, one)\none = Constant <value = int64[1] {0}> ()",
}


@pytest.mark.parametrize("name", list(PASS_CASES))
def test_each_pass_checks_before_it_changes(name):
    make, kind = PASS_CASES[name]
    nodes, expected, _ = BROKEN[kind]
    text = f"{H}\n{SIGNATURE} {{\n{GOOD}\n{GOOD_OF_KIND[name]}\n{nodes}\n}}"
    model = ir.serde.deserialize_model(parse(text))
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(lowering.LoweringError, match=re.escape(expected)):
        make()(model)
    assert ir.serde.serialize_model(model).SerializeToString() == before


ENTRY_POINTS = {
    "lower": lambda model, *a, **k: lowering.lower(model, *a, **k),
    "lower_in_place": lambda model, *a, **k: lowering.lower_in_place(model, *a, **k),
    "lower_with_report": lambda model, *a, **k: lowering.lower_with_report(model, *a, **k),
    "pipeline": lambda model, *a, **k: lowering.pipeline(*a, **k)(model),
}


def _strategies(model, name, *options, **overrides):
    """The strategy each map got, through entry point ``name`` (through ``lower``,
    which does not say: the ops of the lowered graph)."""
    result = ENTRY_POINTS[name](model, *options, **overrides)
    if name == "lower":
        return [node.op_type for node in result.graph]
    if name == "lower_with_report":
        return [node.strategy for node in result[1].nodes]
    rewrites = result if name == "lower_in_place" else result.rewrites
    return [r.strategy for r in rewrites if r.op_type == "SequenceMap"]


@pytest.mark.parametrize("name", [n for n in ENTRY_POINTS if n != "lower"])
def test_a_misspelt_option_is_a_type_error_naming_the_entry_point(name):
    model = ir.serde.deserialize_model(parse(f"{H}\n{SIGNATURE} {{\n{GOOD}\nz = Identity(a)\n}}"))
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(
        TypeError, match=rf"{name}\(\) got an unexpected keyword argument 'max_unrol'"
    ):
        ENTRY_POINTS[name](model, max_unrol=0)
    assert ir.serde.serialize_model(model).SerializeToString() == before


def test_a_misspelt_option_is_a_type_error_naming_lower():
    model = parse(f"{H}\n{SIGNATURE} {{\n{GOOD}\nz = Identity(a)\n}}")
    with pytest.raises(TypeError, match=r"lower\(\) got an unexpected keyword argument 'stratgy'"):
        lowering.lower(model, stratgy="loop")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"lower_in_place\(\) got an unexpected keyword"):
        lowering.lower_in_place(ir.serde.deserialize_model(model), max_unrol=0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"the options are lowering.Options' fields: normalize_"):
        lowering.lower(model, stratgy="loop")  # type: ignore[call-overload]
    with pytest.raises(
        TypeError, match=r"lower\(\) expected options=lowering.Options\(...\), got dict"
    ):
        lowering.lower(model, {"strategy": "loop"})  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"strategy": "fast"}, "strategy must be one of auto, loop"),
        ({"max_unroll": -1}, "max_unroll must be an int of at least 0"),
        ({"target_opset": 10}, "target_opset must be from 11"),
        ({"target_opset": 1000}, "target_opset must be from 11"),
    ],
)
def test_bad_option_values_are_value_errors_before_any_work(options, message):
    model = ir.serde.deserialize_model(parse(f"{H}\n{SIGNATURE} {{\n{GOOD}\nz = Identity(a)\n}}"))
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(ValueError, match=message):
        lowering.lower(model, **options)
    with pytest.raises(ValueError, match=message):  # as an override of an Options too
        lowering.lower(model, lowering.Options(), **options)
    assert ir.serde.serialize_model(model).SerializeToString() == before


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_an_options_and_its_fields_as_keywords_lower_alike(name):
    """``Options(...)``, its fields as keywords, and keywords over an Options are one
    thing; a keyword wins over the Options' own value."""
    text = f"""{H}
    g (float[4, 3] x) => (float[12] z) {{
      s = SplitToSequence <axis = 0, keepdims = 0> (x)
      y = SequenceMap <body = body (float[3] e) => (float[3] r) {{ r = Neg(e) }}> (s)
      z = ConcatFromSequence <axis = 0> (y)
    }}"""
    fresh = lambda: ir.serde.deserialize_model(parse(text))
    auto = _strategies(fresh(), name)
    loop = _strategies(fresh(), name, strategy="loop")
    assert auto != loop  # the map's own form, so forcing "loop" shows
    assert "Loop" in loop if name == "lower" else loop == ["loop"]
    assert _strategies(fresh(), name, lowering.Options(strategy="loop")) == loop
    assert _strategies(fresh(), name, options=lowering.Options(strategy="loop")) == loop
    assert _strategies(fresh(), name, lowering.Options(strategy="loop"), strategy="auto") == auto
    assert _strategies(fresh(), name, lowering.Options(max_unroll=0), strategy="loop") == loop


@pytest.mark.parametrize(
    "function",
    [lowering.lower, lowering.lower_in_place, lowering.lower_with_report, lowering.pipeline],
)
def test_the_options_are_spelled_once(function):
    """Each entry point takes one ``options`` and its fields as typed ``**overrides``
    (lowering.options.OptionValues, which mypy and IDEs read: the same names and
    types as Options'); each field is documented on Options, and only there."""
    parameters = inspect.signature(function).parameters
    fields = [f.name for f in dataclasses.fields(lowering.Options)]
    assert parameters["options"].default is None
    assert parameters["overrides"].kind is inspect.Parameter.VAR_KEYWORD
    assert not set(parameters) & set(fields)
    assert "Unpack[OptionValues]" in str(parameters["overrides"].annotation)
    typed = typing.get_type_hints(lowering.options.OptionValues)
    assert list(typed) == fields
    hints = typing.get_type_hints(lowering.Options)
    differ = [name for name in fields if typed[name] != hints[name]]
    assert differ == ["input_shapes"]  # any sequence of dims in, tuples kept
    doc = inspect.getdoc(lowering.Options)
    assert [name for name in fields if f"\n    {name}: " in doc] == fields
    assert function.__doc__ is not None
    assert not [name for name in fields if f"{name}:" in function.__doc__]


def test_the_package_ships_py_typed():
    assert importlib.resources.files("lowering").joinpath("py.typed").is_file()


def test_a_model_with_nodes_out_of_order_is_restored_too():
    """onnx_ir cannot clone such a graph; the transaction keeps it serialized instead."""
    text = f"{H}\n{SIGNATURE} {{\n{GOOD}\n[bad] z = ReduceSum(a, ax)\nax = custom.Axes()\n}}"
    model = ir.serde.deserialize_model(parse(text))
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(lowering.LoweringError, match="cannot declare opset 11"):
        lowering.lower(model, target_opset=11)
    assert ir.serde.serialize_model(model).SerializeToString() == before


def test_initializers_at_any_depth_come_back_as_the_same_tensors(tmp_path):
    """The transaction keeps weights by reference: restored, not copied."""
    text = f"""{H}
    g (seq(float[2]) x, float[2] a, bool flag) => (seq(float[2]) y0, z, u) <float[2] w = {{1.0, 2.0}}> {{
      [good] y0 = SequenceMap <body = body (float[2] e) => (float[2] r) {{ r = Mul(e, w) }}> (x)
      u = If (flag) <
        then_branch = t () => (float[2] tu) <float[2] v = {{3.0, 4.0}}> {{ tu = Add(a, v) }},
        else_branch = f () => (float[2] fu) {{ fu = Identity(a) }}>
      s = SequenceConstruct(a)
      pos = Constant <value = int64 {{7}}> ()
      [bad] z = SequenceInsert(s, a, pos)
    }}"""
    ir.save(
        ir.serde.deserialize_model(parse(text)),
        tmp_path / "m.onnx",
        external_data="m.data",
        size_threshold_bytes=0,
    )
    model = ir.load(tmp_path / "m.onnx")
    before = ir.serde.serialize_model(model).SerializeToString()
    w = model.graph.initializers["w"].const_value
    branch = next(n for n in model.graph if n.op_type == "If").attributes["then_branch"]
    v = branch.as_graph().initializers["v"].const_value
    assert isinstance(w, ir.ExternalTensor) and isinstance(v, ir.ExternalTensor)
    with pytest.raises(lowering.LoweringError, match="position 7 is out of range"):
        lowering.lower(model)
    assert ir.serde.serialize_model(model).SerializeToString() == before
    assert model.graph.initializers["w"].const_value is w
    branch = next(n for n in model.graph if n.op_type == "If").attributes["then_branch"]
    assert branch.as_graph().initializers["v"].const_value is v
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])


@contextlib.contextmanager
def _collector_watched(enabled: bool, cls: type, method: str) -> Iterator[list[bool]]:
    """Set the collector on or off, and record whether it is on each time
    ``cls.method`` runs; afterwards it must be as it was set (then restored)."""
    seen: list[bool] = []
    original = getattr(cls, method)

    def watched(self, ir_model):
        seen.append(gc.isenabled())
        return original(self, ir_model)

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cls, method, watched)
            yield seen
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("kind", [None, "first_input_is_a_tensor", "target_opset_blocked"])
def test_the_passes_leave_the_garbage_collector_alone(enabled, kind):
    """The collector is process-wide state: a lowering or a refusal through the
    API never switches it."""
    model = _model(kind) if kind else parse(f"{H}\n{SIGNATURE} {{\n{GOOD}\n}}")
    options = BROKEN[kind][2] if kind else {"target_opset": 13}
    with _collector_watched(enabled, LowerSequenceMapPass, "call") as seen:
        if kind:
            with pytest.raises(lowering.LoweringError):
                lowering.lower(model, **options)
        else:
            lowering.lower(model, **options)
    assert seen == [enabled]


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("refused", [False, True])
def test_the_opset_pass_alone_leaves_the_garbage_collector_alone(enabled, refused):
    body = (
        f"{SIGNATURE} {{\n{GOOD}\n}}"
        if refused
        else "g (float[2] a) => (float[2] y) { y = Neg(a) }"
    )
    model = ir.serde.deserialize_model(parse(f"{H}\n{body}"))
    with _collector_watched(enabled, TargetOpsetPass, "call") as seen:
        if refused:
            with pytest.raises(lowering.LoweringError, match="cannot declare opset 13"):
                TargetOpsetPass(13)(model)
        else:
            TargetOpsetPass(13)(model)
    assert seen == [enabled]


@pytest.mark.parametrize("enabled", [True, False])
def test_the_command_line_leaves_the_garbage_collector_alone(enabled, tmp_path):
    """Nor does the command line switch it: it meets its time target with the
    collector on (docs/performance.md)."""
    onnx.save(parse(f"{H}\n{SIGNATURE} {{\n{GOOD}\n}}"), tmp_path / "in.onnx")
    with _collector_watched(enabled, LowerSequenceMapPass, "call") as seen:
        assert cli(["-q", tmp_path / "in.onnx", tmp_path / "out.onnx"]).returncode == 0
    assert seen == [enabled]
