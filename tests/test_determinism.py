"""The same model and options give the same bytes, whatever order sets iterate in.

onnx_ir hashes nodes and values by address, so a rewrite that takes its
order from a set of them (or from ``id()``) writes different names or
forms from one run to the next, in one process. Each model here is lowered
under several salted hashes (``tests.helpers.salted_hashes``), which
reorder every such set, and the outputs must be byte for byte the same.
A set of names iterates in an order that ``PYTHONHASHSEED`` sets, once per
process: the corpus is lowered in six processes of other seeds too.

Found: two Identities in a chain, both made by one rewrite, bypassed in a
set's order; which one stayed (the user's unnamed node, or a fresh
``identity_1``) changed between runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings

import lowering
from tests.cases.differential import CASES
from tests.cases.sequence_insert import GOLDEN as INSERTS
from tests.cases.sequence_insert import H as INSERT_HEADER
from tests.fuzz_check import option_sets
from tests.fuzz_models import structured_models
from tests.helpers import parse, salted_hashes

SALTS = (1, 2, 3)

OPTION_SETS = [
    {},
    {"strategy": "loop"},
    {"max_unroll": 0},
    {"target_opset": 11},
    {"optimize": True},
    {"runtime": "openvino"},
    {"runtime": "tract"},
]

# A split read back whole through a map of Identity: the map's Identity and the
# read (ConcatFromSequence, made an Identity) form a chain of two made Identities.
CHAIN = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] acc, float[K,3] unread) => (float[?,?] y) {
  sizes = Constant <value = int64[2] {3, 3}> ()
  s = SplitToSequence <axis = 0> (acc, sizes)
  m = SequenceMap <body = body (float[R,3] e) => (float[C,3] v) { v = Identity (e) }> (s)
  y = ConcatFromSequence <axis = 0, new_axis = 0> (m)
}"""


def _outcome(proto: onnx.ModelProto, options: dict, salt: int) -> bytes | str:
    with salted_hashes(salt):
        model = ir.serde.deserialize_model(proto)
        try:
            lowering.pipeline(**options)(model)
        except lowering.LoweringError as error:
            return f"refused: {error}"
        return ir.serde.serialize_model(model).SerializeToString(deterministic=True)


def _assert_one_outcome(proto: onnx.ModelProto, options: dict) -> None:
    outcomes = {_outcome(proto, options, salt) for salt in SALTS}
    assert len(outcomes) == 1, f"{len(outcomes)} different outputs for {options}"


def _corpus() -> dict[str, onnx.ModelProto]:
    models = {"identity_chain": parse(CHAIN)}
    models.update({f"differential/{name}": parse(case.text) for name, case in CASES.items()})
    models.update(
        {
            f"insert/{name}": parse(text if text.startswith("<") else INSERT_HEADER + text)
            for name, (text, _) in INSERTS.items()
        }
    )
    return models


CORPUS = _corpus()


@pytest.mark.parametrize("options", OPTION_SETS, ids=str)
@pytest.mark.parametrize("name", CORPUS)
def test_a_corpus_model_lowers_to_one_output(name, options):
    _assert_one_outcome(CORPUS[name], options)


def test_a_chain_of_made_identities_keeps_the_first():
    """The read's own node stays, copying the graph input; the map's Identity goes."""
    proto = parse(CHAIN)
    for salt in SALTS:
        with salted_hashes(salt):
            model = ir.serde.deserialize_model(proto)
            lowering.pipeline(max_unroll=0)(model)
            assert [(n.op_type, n.name) for n in model.graph] == [("Identity", "")]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(example=structured_models())
def test_a_fuzz_model_lowers_to_one_output(example):
    for options in option_sets(example):
        _assert_one_outcome(example.model, options)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(example=structured_models())
def test_many_fuzz_models_lower_to_one_output(example):
    for options in option_sets(example):
        _assert_one_outcome(example.model, options)


# Lowers each model file given, with each option set, and prints a digest of each outcome.
_CHILD = """
import hashlib, json, sys
import onnx_ir as ir
import lowering
digests = []
for path in sys.argv[2:]:
    for options in json.loads(sys.argv[1]):
        model = ir.load(path)
        try:
            lowering.pipeline(**options)(model)
            out = ir.serde.serialize_model(model).SerializeToString(deterministic=True)
        except lowering.LoweringError as error:
            out = str(error).encode()
        digests.append(hashlib.sha256(out).hexdigest())
print(json.dumps(digests))
"""


@pytest.mark.slow
def test_the_corpus_lowers_to_one_output_under_every_hash_seed(tmp_path):
    """Six seeds: an output that takes one of two forms by a set's order takes
    the same one under all six once in 32."""
    paths = []
    for index, proto in enumerate(CORPUS.values()):
        paths.append(str(tmp_path / f"{index}.onnx"))
        onnx.save(proto, paths[-1])
    options = json.dumps([{}, {"max_unroll": 0}, {"target_opset": 11}, {"runtime": "openvino"}])
    digests = []
    for seed in ("0", "1", "2", "3", "4", "5"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        child = [sys.executable, "-c", _CHILD, options, *paths]
        done = subprocess.run(child, env=env, capture_output=True, text=True, check=True)
        digests.append(json.loads(done.stdout))
    assert all(d == digests[0] for d in digests[1:])
