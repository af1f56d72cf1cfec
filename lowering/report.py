"""What a lowering did, as one typed object: the CLI's summary and ``--report FILE.json``.

CI jobs want to assert what happened, not parse the summary. A
:class:`Report` holds everything the summary says, and the summary is
rendered from it (``lowering/summary.py``), so the JSON and the text cannot
disagree::

    Pipeline(options)(model) --LoweringResult--> Report.of(before, model, ...)
                                                   |                 |
                                           summary (text, stderr)   to_json() (--report FILE.json)

:meth:`Report.as_dict` is the JSON's schema, version :data:`SCHEMA`
(docs/cli.md lists every key): a key is never renamed or given another
meaning without the version going up; new keys may appear. From Python,
:func:`lowering.lower_with_report` returns the lowered model and its
Report; the command line adds the files, the time, ``--verify``'s outcome
and, when the run fails, the error and the exit code.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lowering import __version__
from lowering.options import Options
from lowering.rewrites import Conversion, Kept, LoweringResult, Rewrite, explained

if TYPE_CHECKING:
    import onnx_ir as ir

    from lowering.verify.report import Report as VerifyReport

#: The version of :meth:`Report.as_dict`'s layout.
SCHEMA = 1
TOOL = "lowering"
_LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Measure:
    """A model's declarations and its node count by op type, at every depth.

    ``op_counts`` keys are op types, ``domain.op`` outside the ONNX domain
    (as onnxslim counts them), counted in every graph, subgraph and function.
    """

    ir_version: int
    opset_import: Mapping[str, int]
    op_counts: Mapping[str, int]

    @classmethod
    def of(cls, model: ir.Model) -> Measure:
        from lowering.irutils.op_facts import is_onnx_domain
        from lowering.irutils.walk import model_nodes

        counts: collections.Counter[str] = collections.Counter()
        for node in model_nodes(model):
            domain = "" if is_onnx_domain(node.domain) else f"{node.domain}."
            counts[domain + node.op_type] += 1
        return cls(model.ir_version, dict(model.opset_imports), dict(counts))

    def as_dict(self) -> dict[str, Any]:
        return {
            "ir_version": self.ir_version,
            "opset_import": dict(self.opset_import),
            "op_counts": dict(sorted(self.op_counts.items())),
        }


@dataclasses.dataclass(frozen=True)
class Node:
    """One rewritten SequenceMap, SequenceInsert, or other sequence op read as tensors.

    Attributes:
        op: The rewritten node's op (:attr:`lowering.rewrites.Rewrite.op_type`; "Loop":
            an accumulator loop, its strategy "stack", "concat" or "concat+stack";
            a "Loop" or "Scan" of strategy "copied": its body returns copies of
            the inputs it returned as they were, for ``--runtime``; of strategy
            "ConstantOfShape": the empty constants it carries in are made by one).
        name: The node's name ("" if it had none).
        scope: The graph or function it sat in, as the summary says it.
        strategy: The form it got ("vectorize", "unroll", "scan", "uniform",
            "loop"; "stack", "concat" for a Loop's lists; for the other sequence
            ops, what they became: "Gather", "SequenceConstruct", ...); "" for an
            insert position.
        reason: Why that form.
        rejected_by: Each runtime (its name in :mod:`lowering.runtimes.profiles`)
            that cannot run the loop or sequence ops the rewrite left, with the
            first such op: ``(("tract", "Loop"),)``; and each release whose
            profile refuses an op the rewrite wrote
            (``("openvino:2023.3", "ScatterElements")``).
    """

    op: str
    name: str
    scope: str
    strategy: str
    reason: str
    rejected_by: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, rewrite: Rewrite) -> Node:
        return cls(
            rewrite.op_type,
            rewrite.node_name,
            rewrite.scope,
            rewrite.strategy,
            rewrite.reason,
            tuple(rewrite.rejections),
        )

    def explained(self) -> str:
        """The reason, and the runtimes that reject the form (as the summary says it)."""
        return explained(self.reason, list(self.rejected_by))

    def as_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "name": self.name,
            "scope": self.scope,
            "strategy": self.strategy,
            "reason": self.reason,
            "rejected_by": [{"runtime": r, "op": op} for r, op in self.rejected_by],
        }


@dataclasses.dataclass(frozen=True)
class Files:
    """What the CLI wrote for OUT (:class:`lowering.model_io.Written`)."""

    #: OUT holds exactly IN's bytes: nothing was lowered.
    unchanged: bool
    #: The data files written for OUT, as OUT names them.
    data_files: tuple[str, ...] = ()
    #: The weights were embedded in a stream.
    embedded: bool = False
    #: IN's data files that OUT reads its weights from (OUT written beside IN), as OUT
    #: names them: OUT needs them wherever it goes.
    shared: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Report:
    """What a lowering did; the summary is rendered from it.

    Attributes:
        options: The options it ran with.
        version: This package's version.
        before, after: The model as read and as lowered (None where the run
            failed before: a failed read, lowering or write leaves ``after``
            None, since the model is then as it was).
        nodes: Every rewritten SequenceMap and SequenceInsert, in the order done.
        kept: Every SequenceInsert whose position was left as written, since
            the runtime lacks an op every form of it needs, and every Loop
            accumulator no form serves where the target has no sequences, and
            why (:class:`lowering.rewrites.Kept`), in the order found.
        conversions: What ``target_opset`` expanded or adapted.
        not_optimized: Why ``optimize`` was asked for but its result was
            dropped (it failed the ONNX checker) or it did not run (nothing
            was lowered, so the model goes out as it came in); else None.
        lowest_opset: The lowest default-domain opset the output could
            declare, when a node was rewritten (None otherwise, or when it
            could not be worked out).
        input, output: The command line's IN and OUT as the summary names
            them (``<stdin>``, ``<stdout>``); None from Python.
        files: What was written for OUT; None from Python or when the run failed.
        seconds: From the start of the run to OUT written (the summary's time).
        verify: ``--verify``'s outcome (:class:`lowering.verify.Report`), or None.
        error: The one line the CLI printed when reading, lowering or writing
            failed (or an unexpected failure after OUT was written), or None;
            ``--verify``'s mismatch or failure to compare is in ``verify``.
        exit_code: The CLI's exit code; None from Python.
    """

    options: Options
    version: str = __version__
    before: Measure | None = None
    after: Measure | None = None
    nodes: tuple[Node, ...] = ()
    kept: tuple[Kept, ...] = ()
    conversions: tuple[Conversion, ...] = ()
    not_optimized: str | None = None
    lowest_opset: int | None = None
    input: str | None = None
    output: str | None = None
    files: Files | None = None
    seconds: float | None = None
    verify: VerifyReport | None = None
    error: str | None = None
    exit_code: int | None = None

    @classmethod
    def of(
        cls,
        before: Measure,
        model: ir.Model,
        result: LoweringResult,
        options: Options,
        *,
        lowest: bool = True,
        **context: Any,
    ) -> Report:
        """The report of a lowering: ``before`` measured on the model as read,
        ``model`` as lowered, ``rewrites`` and ``kept`` what the pipeline's
        :class:`lowering.LoweringResult` holds (``rewrites`` is what
        :func:`lowering.lower_in_place` returns); ``context`` sets the CLI's
        fields (``input``, ``files``, ...).

        ``lowest=False`` leaves :attr:`lowest_opset` None: working it out plans
        every node at each opset from 11 up, seconds for thousands of maps, for
        a line that ``-q`` does not print."""
        nodes = tuple(Node.of(r) for r in result.rewrites)
        return cls(
            options=options,
            before=before,
            after=Measure.of(model),
            nodes=nodes,
            kept=tuple(result.kept),
            conversions=tuple(result.conversions),
            not_optimized=result.not_optimized or _not_run(options, nodes),
            lowest_opset=_lowest_opset(model) if nodes and lowest else None,
            **context,
        )

    def replace(self, **changes: Any) -> Report:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The JSON's content, schema :data:`SCHEMA` (docs/cli.md)."""
        target = self.options.target_opset
        return {
            "schema": SCHEMA,
            "tool": TOOL,
            "version": self.version,
            "options": dataclasses.asdict(self.options),
            "input": self.input,
            "output": self.output,
            "exit_code": self.exit_code,
            "error": self.error,
            "seconds": self.seconds,
            "before": None if self.before is None else self.before.as_dict(),
            "after": None if self.after is None else self.after.as_dict(),
            "lowest_opset": self.lowest_opset,
            "nodes": [node.as_dict() for node in self.nodes],
            "kept": [
                {"op": k.op_type, "name": k.node_name, "scope": k.scope, "reason": k.reason}
                for k in self.kept
            ],
            "target_opset": None
            if target is None
            else {
                "opset": target,
                **{
                    how: [
                        {"what": c.what, "count": c.count} for c in self.conversions if c.how == how
                    ]
                    for how in ("expanded", "adapted")
                },
            },
            "not_optimized": self.not_optimized,
            "files": None if self.files is None else dataclasses.asdict(self.files),
            "verify": None if self.verify is None else _verify_dict(self.verify),
        }

    def to_json(self) -> str:
        """:meth:`as_dict` as JSON text (strict: no NaN; a non-finite float is a string)."""
        return json.dumps(self.as_dict(), indent=2, allow_nan=False) + "\n"


def _not_run(options: Options, nodes: tuple[Node, ...]) -> str | None:
    """The optimizer folds what lowering made static: with nothing lowered,
    the pipeline does not run it (lowering.steps)."""
    return "not run, as nothing was lowered" if options.optimize and not nodes else None


def _lowest_opset(model: ir.Model) -> int | None:
    """For the report only: a failure here must not turn a success into a crash."""
    from lowering.passes.target_opset import lowest_opset

    try:
        return lowest_opset(model)
    except Exception:  # noqa: BLE001 -- OUT is written; the summary line is optional
        _LOG.debug("could not work out the lowest opset", exc_info=True)
        return None


def _number(value: float) -> float | str:
    """JSON has no NaN or infinity: those are the strings "nan", "inf", "-inf"."""
    return value if math.isfinite(value) else str(value)


def _verify_dict(report: VerifyReport) -> dict[str, Any]:
    """``--verify``'s outcome: its status and exit code, the table's rows and the runs."""
    return {
        "status": report.status,
        "exit_code": report.exit_code,
        "runs": report.runs,
        "rows": [
            {
                "output": row.name,
                "kind": row.kind,
                "elements": row.elements,
                "max_abs": _number(row.max_abs),
                "max_rel": _number(row.max_rel),
                "tolerance": row.tolerance or "exact",
                "verdict": row.verdict,
                "failures": row.failures,
            }
            for row in report.rows
        ],
        "records": [
            {"run": r.label, "description": r.description, "outcome": r.outcome, "note": r.note}
            for r in report.records
        ],
        "notes": list(report.notes),
        "reason": report.reason,
        "input_error": report.input_error,
        "failing_run": report.failing_run,
        "saved_to": report.saved_to,
    }
