"""What lowered a model is in its ``metadata_props``: ``lowering.version`` and
``lowering.options``, present exactly when something was rewritten or declared
anew, the same from every entry point, and one entry per key however often
the model is lowered. A model with nothing to lower still comes out byte for byte.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering import cli
from lowering.passes.provenance import OPTIONS_KEY, VERSION_KEY, changed_options
from tests.cases.report_models import MODELS
from tests.helpers import parse

KEYS = {VERSION_KEY, OPTIONS_KEY}


def _entries(model: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def _source(name: str) -> onnx.ModelProto:
    model = parse(MODELS[name])
    onnx.helper.set_model_props(model, {"author": "someone", "zz.last": "kept"})
    return model


# (model, options, whether anything is rewritten or declared anew)
RUNS = [
    ("vectorize", {}, True),
    ("unroll", {"max_unroll": 4}, True),
    ("loop", {"strategy": "loop"}, True),
    ("insert", {}, True),
    ("insert", {"normalize_inserts": False}, False),
    ("nothing to lower", {}, False),
    ("nothing to lower", {"target_opset": 17}, False),  # declared as it was
    ("nothing to lower", {"ir_version": 9}, True),
    ("nothing to lower", {"target_opset": 13}, True),
    ("expanded", {"target_opset": 13}, True),
    ("adapted", {"target_opset": 11, "keep_originals": True}, True),
]


def _ids(run) -> str:
    return f"{run[0]}-{run[1]}"


@pytest.mark.parametrize(("name", "options", "changed"), RUNS, ids=[_ids(r) for r in RUNS])
def test_provenance_is_recorded_exactly_when_something_changed(name, options, changed):
    source = _source(name)
    result = lowering.lower(source, **options)
    entries = _entries(result)
    assert {k: v for k, v in entries.items() if k not in KEYS} == _entries(source)
    if not changed:
        assert not KEYS & set(entries)
        return
    assert entries[VERSION_KEY] == lowering.__version__
    recorded = json.loads(entries[OPTIONS_KEY])
    assert recorded == {k: v for k, v in options.items() if k != "keep_originals"}
    assert entries[OPTIONS_KEY] == json.dumps(recorded, separators=(",", ":"))  # compact


@pytest.mark.parametrize(("name", "options", "changed"), RUNS, ids=[_ids(r) for r in RUNS])
def test_the_command_line_records_the_same(tmp_path, capsys, name, options, changed):
    source = tmp_path / "in.onnx"
    onnx.save(_source(name), source)
    argv = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if key == "normalize_inserts":
            argv.append("--no-normalize-inserts")
        elif key == "keep_originals":
            argv.append("-v")
        else:
            argv += [flag, str(value)]
    assert cli.main([*argv, str(source), str(tmp_path / "out.onnx")]) == 0
    written = (tmp_path / "out.onnx").read_bytes()
    if not changed:
        assert written == source.read_bytes()
        assert "unchanged, byte for byte" in capsys.readouterr().err
    else:
        assert _entries(onnx.load_from_string(written)) == _entries(
            lowering.lower(_source(name), **options)
        )


def test_a_model_with_nothing_to_lower_comes_out_byte_for_byte():
    source = _source("nothing to lower")
    assert lowering.lower(source).SerializeToString() == source.SerializeToString()
    model, untouched = ir.serde.deserialize_model(source), ir.serde.deserialize_model(source)
    assert lowering.lower_in_place(model) == []
    assert ir.serde.serialize_model(model) == ir.serde.serialize_model(untouched)


def test_every_entry_point_records_the_same_bytes():
    """lower (both kinds of model), lower_in_place, pipeline(): one pipeline, one stamp."""
    options = {"runtime": "tract", "max_unroll": 0}
    source = _source("vectorize")
    by_lower = lowering.lower(source, **options)
    models = [ir.serde.deserialize_model(source) for _ in range(4)]
    lowering.lower(models[0], **options)
    lowering.lower_in_place(models[1], **options)
    lowering.pipeline(**options)(models[2])
    lowering.lower_with_report(models[3], **options)
    expected = by_lower.SerializeToString(deterministic=True)
    for model in models:
        assert ir.serde.serialize_model(model).SerializeToString(deterministic=True) == expected
    assert json.loads(_entries(by_lower)[OPTIONS_KEY]) == {"runtime": "tract", "max_unroll": 0}


def test_a_model_lowered_twice_keeps_one_entry_per_key():
    once = lowering.lower(_source("vectorize"), max_unroll=0)
    again = lowering.lower(once, max_unroll=0)  # nothing left to lower
    assert again.SerializeToString() == once.SerializeToString()
    converted = lowering.lower(once, target_opset=13)
    keys = [p.key for p in converted.metadata_props]
    assert sorted(keys) == sorted(set(keys)) and KEYS <= set(keys)
    assert json.loads(_entries(converted)[OPTIONS_KEY]) == {"target_opset": 13}
    assert _entries(converted)["author"] == "someone"


def test_only_options_that_change_the_output_are_recorded():
    assert changed_options(lowering.Options()) == {}
    assert changed_options(lowering.Options(keep_originals=True)) == {}
    every = lowering.Options(
        normalize_inserts=False, strategy="loop", max_unroll=0, runtime="mnn",
        target_opset=12, ir_version=7,
    )  # fmt: skip
    assert list(changed_options(every)) == [
        "normalize_inserts", "strategy", "max_unroll", "runtime", "target_opset", "ir_version",
    ]  # fmt: skip


def test_verify_compares_a_recorded_model_as_any_other():
    import lowering.verify

    source = _source("unroll")
    lowered = lowering.lower(source)
    assert KEYS <= set(_entries(lowered))
    report = lowering.verify.compare(source, lowered, runs=3)
    assert report.exit_code == 0, report.table()
    stripped = onnx.ModelProto.FromString(lowered.SerializeToString())
    del stripped.metadata_props[:]
    a = lowering.verify.compare(lowered, stripped, runs=3)
    assert a.exit_code == 0 and all(np.isclose(row.max_abs, 0) for row in a.rows)
