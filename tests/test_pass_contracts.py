"""Every exported pass is valid on its own, and the pipeline is lower_in_place.

Run alone on any model, a pass leaves one that passes
``onnx.checker.check_model(full_check=True)`` (it names what it creates),
or raises LoweringError with the model byte for byte as it was; its
``ensures`` holds; and it returns its rewrites in a LoweringResult. The
models are the structural fuzzer's (every structure it draws: maps in
functions, in If/Loop/Scan bodies, inserts, names that collide) and the
differential and insert corpora. The pipeline gives the same bytes as
``lower_in_place`` for the same options, raises a refusal as itself, and
inside onnx_ir's PassManager a refusal is found with ``lowering.refusal``.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings

import lowering
from lowering.passes.constant_form import ConstantValueFormPass
from lowering.passes.provenance import ProvenancePass
from lowering.runtimes.sessions import open_session
from tests.cases.differential import CASES
from tests.cases.sequence_insert import GOLDEN as INSERTS
from tests.cases.sequence_insert import H as INSERT_HEADER
from tests.fuzz_models import structured_models
from tests.helpers import parse

PASSES = {
    "SpecializeFunctionsPass": lambda: lowering.SpecializeFunctionsPass(),
    "FoldInsertChainsPass": lambda: lowering.FoldInsertChainsPass(),
    "LowerAccumulatorLoopsPass": lambda: lowering.LowerAccumulatorLoopsPass(),
    "LowerAccumulatorLoopsPass(openvino)": lambda: lowering.LowerAccumulatorLoopsPass("openvino"),
    "LowerSequenceMapPass": lambda: lowering.LowerSequenceMapPass(),
    "LowerSequenceMapPass(loop)": lambda: lowering.LowerSequenceMapPass("loop"),
    "LowerSequenceMapPass(tract)": lambda: lowering.LowerSequenceMapPass(runtime="tract"),
    "EliminateSequencesPass": lambda: lowering.EliminateSequencesPass(),
    "ReadSequencesPass": lambda: lowering.ReadSequencesPass(),
    "NormalizeSequenceInsertPass": lambda: lowering.NormalizeSequenceInsertPass(),
    "ConstantValueFormPass": lambda: ConstantValueFormPass(),
    "CopyPassedThroughPass(openvino)": lambda: lowering.CopyPassedThroughPass("openvino"),
    "FillEmptyStartsPass(openvino)": lambda: lowering.FillEmptyStartsPass("openvino"),
    "FreshNamesPass": lambda: lowering.FreshNamesPass(),
    "TargetOpsetPass(11)": lambda: lowering.TargetOpsetPass(11),
    "TargetOpsetPass(18)": lambda: lowering.TargetOpsetPass(18),
    "ProvenancePass": lambda: ProvenancePass(lowering.__version__, lowering.Options(max_unroll=0)),
}


def _bytes(model: ir.Model) -> bytes:
    return ir.serde.serialize_model(model).SerializeToString(deterministic=True)


def check_alone(proto: onnx.ModelProto, name: str) -> None:
    """The contract of one pass, run alone on ``proto``."""
    model = ir.serde.deserialize_model(proto)
    before = _bytes(model)
    pass_ = PASSES[name]()
    try:
        result = pass_(model)  # PassBase.__call__ runs requires and ensures
    except lowering.LoweringError:
        assert _bytes(model) == before, f"{name} refused and changed the model"
        return
    assert result.model is model
    rewriting = (
        lowering.LowerSequenceMapPass,
        lowering.NormalizeSequenceInsertPass,
        lowering.LowerAccumulatorLoopsPass,
        lowering.CopyPassedThroughPass,
        lowering.FillEmptyStartsPass,
        lowering.ReadSequencesPass,
    )
    if isinstance(pass_, rewriting):
        assert isinstance(result, lowering.LoweringResult)
        assert bool(result.rewrites) == result.modified
    if not result.modified:
        assert _bytes(model) == before, f"{name} said it changed nothing, and changed the model"
    onnx.checker.check_model(ir.serde.serialize_model(model), full_check=True)


def _maps_in_every_structure():
    return structured_models(
        features=frozenset(
            {"function", "if", "loop", "scan", "nested", "names", "insert", "post_insert",
             "static", "dynamic", "extras", "outer_sequences", "seq_extras", "untyped",
             "twin_maps"}
        )
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PASSES))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(example=_maps_in_every_structure())
def test_each_pass_alone_on_fuzzed_models(name, example):
    check_alone(example.model, name)


CORPUS = {
    **{f"map:{key}": case.text for key, case in sorted(CASES.items())},
    **{
        f"insert:{key}": text if text.startswith("<") else INSERT_HEADER + text
        for key, (text, _) in sorted(INSERTS.items())
    },
}


@pytest.mark.parametrize("name", sorted(PASSES))
@pytest.mark.parametrize("key", sorted(CORPUS))
@pytest.mark.sweep
def test_each_pass_alone_on_the_corpora(key, name):
    check_alone(parse(CORPUS[key]), name)


OPTION_SETS = [
    {},
    {"strategy": "loop"},
    {"max_unroll": 0},
    {"runtime": "tract"},
    {"target_opset": 11},
    {"optimize": True},
    {"normalize_inserts": False},
]


@pytest.mark.slow
@pytest.mark.parametrize("options", OPTION_SETS, ids=str)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(example=_maps_in_every_structure())
def test_the_pipeline_is_lower_in_place(options, example):
    """Same bytes out, or the same refusal with the model unchanged."""
    a = ir.serde.deserialize_model(example.model)
    b = ir.serde.deserialize_model(example.model)
    before = _bytes(a)
    outcomes = []
    for model, run in (
        (a, lambda m: lowering.lower_in_place(m, **options)),
        (b, lambda m: lowering.pipeline(**options)(m).rewrites),
    ):
        try:
            rewrites = run(model)
            outcomes.append(("ok", _bytes(model), [(r.op_type, r.strategy) for r in rewrites]))
        except lowering.LoweringError as error:
            assert _bytes(model) == before
            outcomes.append(("refused", str(error), None))
    assert outcomes[0] == outcomes[1]


REFUSED = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[3]) xs) => (seq(int64[1,?]) ys) {
  ys = SequenceMap <body = body (float[3] e) => (int64[1,?] d) { d = NonZero (e) }> (xs)
}"""


def test_a_refusal_inside_onnx_irs_pass_manager_is_found_with_refusal():
    model = ir.serde.deserialize_model(parse(REFUSED))
    before = _bytes(model)
    manager = ir.passes.PassManager([lowering.LowerSequenceMapPass(runtime="tinygrad")])
    with pytest.raises(ir.passes.PassError) as caught:
        manager(model)
    refused = lowering.refusal(caught.value)
    assert isinstance(refused, lowering.LoweringError)
    assert refused.reason.startswith("--runtime tinygrad: ")
    assert _bytes(model) == before
    assert lowering.refusal(ValueError("not ours")) is None


def test_the_pipeline_raises_a_refusal_as_itself():
    model = ir.serde.deserialize_model(parse(REFUSED))
    with pytest.raises(lowering.LoweringError, match="--runtime tinygrad: "):
        lowering.pipeline(runtime="tinygrad")(model)


def test_the_passes_listed_are_those_the_options_can_run():
    names = [type(p).__name__ for p in lowering.pipeline(normalize_inserts=False).passes]
    assert "TargetOpsetPass" not in names and "OptimizePass" not in names
    assert "NormalizeSequenceInsertPass" not in names and "LowerSequenceMapPass" in names


@pytest.mark.parametrize("runtime", ["tvm", "onnxruntime", "openvino"])
def test_the_pipelines_passes_are_listed_in_order(runtime):
    options = {"target_opset": 11, "optimize": True, "input_shapes": {"x": ()}}
    names = [type(p).__name__ for p in lowering.pipeline(runtime=runtime, **options).passes]
    constant_form = ["ConstantValueFormPass"] if runtime == "tvm" else []  # TVM reads no other
    # OpenVINO 2026's loop faults, after the optimizer (which would undo them)
    faults = ["CopyPassedThroughPass", "FillEmptyStartsPass"] if runtime == "openvino" else []
    assert names == [
        "FixInputShapesPass",
        "DoubtedShapesPass",
        "SpecializeFunctionsPass",
        "FoldInsertChainsPass",
        "LowerAccumulatorLoopsPass",
        "LowerSequenceMapPass",
        "EliminateSequencesPass",
        "ReadSequencesPass",
        "NormalizeSequenceInsertPass",
        "OptimizePass",
        *faults,
        *constant_form,
        "TargetOpsetPass",
        "IrVersionPass",
        "ProvenancePass",
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strategy": "fast"}, "strategy must be one of auto, loop, not 'fast'"),
        ({"max_unroll": -1}, "max_unroll must be an int of at least 0, not -1"),
        ({"runtime": "trt"}, "runtime must be one of onnxruntime, "),
        ({"target_opset": 10}, "target_opset must be from 11 to "),
        ({"ir_version": 2}, "ir_version must be from 3 to "),
        ({"optimize": "yes"}, "optimize must be True or False, not 'yes'"),
    ],
)
def test_options_are_checked_in_one_place_with_one_message(options, message):
    """Options, pipeline(), lower() and each pass say the same; the CLI spells it as a flag."""
    attempts = [
        lambda: lowering.Options(**options),
        lambda: lowering.pipeline(**options),
        lambda: lowering.lower(parse(REFUSED), **options),
    ]
    (option, value), *_ = options.items()
    if option in ("strategy", "max_unroll", "runtime"):
        attempts.append(lambda: lowering.LowerSequenceMapPass(**{option: value}))
    if option == "target_opset":
        attempts.append(lambda: lowering.TargetOpsetPass(value))
        attempts.append(lambda: lowering.NormalizeSequenceInsertPass(target_opset=value))
    if option == "ir_version":
        attempts.append(lambda: lowering.IrVersionPass(value))
    for attempt in attempts:
        with pytest.raises(lowering.OptionError) as caught:
            attempt()
        assert str(caught.value).startswith(message)
        assert caught.value.flag.startswith("--" + message.replace("_", "-", 1))


@pytest.mark.parametrize("target", [11, 12])
@pytest.mark.parametrize("position", ["int64 p", "int32[1] p", "int64[1] p"])
def test_normalized_positions_then_an_old_target_opset(position, target):
    """NormalizeSequenceInsertPass() then TargetOpsetPass(11): the guard that opset 13
    allows becomes its else branch, which inserts as list.insert does at every p."""
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[2]) s, float[2] x, {position}) => (seq(float[2]) y) {{ y = SequenceInsert(s, x, p) }}"""
    model = ir.serde.deserialize_model(parse(text))
    lowering.NormalizeSequenceInsertPass()(model)
    assert "If" in {n.op_type for n in model.graph}
    result = lowering.TargetOpsetPass(target)(model)
    assert any(label.startswith("If-13 -> ") for label in result.adapted)
    proto = ir.serde.serialize_model(model)
    onnx.checker.check_model(proto, full_check=True)
    assert "If" not in {n.op_type for n in proto.graph.node}
    session = open_session(proto.SerializeToString())
    s = [np.full(2, i, np.float32) for i in range(3)]
    x = np.full(2, 9, np.float32)
    dtype, shape = (np.int32, (1,)) if "int32" in position else (np.int64, ())
    if "[1]" in position:
        shape = (1,)
    for k in range(-3, 4):
        (got,) = session.run(None, {"s": s, "x": x, "p": np.full(shape, k, dtype)})
        want = list(s)
        want.insert(k, x)
        assert [a.tolist() for a in got] == [a.tolist() for a in want], k
