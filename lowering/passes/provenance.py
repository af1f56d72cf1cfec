"""Say in the model what rewrote it: the tool, its version and the options that mattered.

A lowered model otherwise records nothing about what produced it; a bug
report with one in hand cannot say which version and options wrote it.
onnxsim records its options in ``metadata_props`` under its own prefix,
and torch.onnx names itself in ``producer_name``/``producer_version``
(the exporter's, which this pass leaves alone). Two entries join the
model's ``metadata_props`` (onnx_ir writes them sorted by key)::

    metadata_props  {"author": "someone"}
                    ---------------------------------------------------------->
                    {"author": "someone",
                     "lowering.version": "0.1.0",
                     "lowering.options": '{"runtime":"tract","target_opset":11}'}

``lowering.options`` is compact JSON of the options that differ from their
defaults and change the output (``keep_originals`` changes only the
report, so it is never written); ``{}`` for the defaults. A model lowered
again keeps one entry per key, updated in place. The pipeline runs this
pass last, and only when it rewrote or redeclared something: a model with
nothing to lower comes out byte for byte.
"""

from __future__ import annotations

import dataclasses
import json

import onnx_ir as ir

from lowering.options import Options
from lowering.rewrites import LoweringResult

VERSION_KEY = "lowering.version"
OPTIONS_KEY = "lowering.options"
#: Options that change only what is reported, never the model.
REPORT_ONLY = frozenset({"keep_originals"})


def changed_options(options: Options) -> dict[str, object]:
    """The options that differ from their defaults and can change the output, in order."""
    defaults = Options()
    return {
        field.name: getattr(options, field.name)
        for field in dataclasses.fields(Options)
        if field.name not in REPORT_ONLY
        and getattr(options, field.name) != getattr(defaults, field.name)
    }


def provenance(version: str, options: Options) -> dict[str, str]:
    """The ``metadata_props`` entries :class:`ProvenancePass` writes."""
    return {
        VERSION_KEY: version,
        OPTIONS_KEY: json.dumps(changed_options(options), separators=(",", ":")),
    }


class ProvenancePass(ir.passes.InPlacePass):
    """Record ``version`` and ``options`` in the model's ``metadata_props``.

    Entries already there stay; these two keys are set (added, or updated where
    an earlier lowering put them: one entry per key). Returns a
    :class:`LoweringResult` with no rewrites, ``modified`` when an entry changed.
    """

    def __init__(self, version: str, options: Options | None = None) -> None:
        super().__init__()
        self.entries = provenance(version, options or Options())

    def call(self, model: ir.Model) -> LoweringResult:
        modified = False
        for key, value in self.entries.items():
            if model.metadata_props.get(key) != value:
                model.metadata_props[key] = value
                modified = True
        return LoweringResult(model, modified=modified)
