"""The summary ``onnx-lower`` prints, rendered from the report ``--report`` writes.

One renderer, so that the two cannot disagree: :mod:`lowering.cli` parses
arguments, runs and maps exit codes; this module says what was done::

    onnx-lower: lowered 2 SequenceMap nodes in in.onnx -> out.onnx (in 0.40 s)
      2 in main graph 'g': 'm0', 'm1'
        'm0': vectorize, every op in its body has a batching rule, ...
      op type   before   after      (every op type whose count changed)

Past :data:`DETAIL_LIMIT` rewrites of one kind it groups them by form and
by graph. No module of the package but the report's types is imported.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from lowering.console import PROG

#: The strategy of a loop whose body got copies (lowering.passes.copy_passed_through).
_COPIED = "copied"
#: The strategy of a loop whose empty starts became ConstantOfShape (lowering.passes.fill_empty_starts).
_FILLED = "ConstantOfShape"

if TYPE_CHECKING:
    import onnx_ir as ir

    from lowering.report import Node, Report
    from lowering.rewrites import Kept, Rewrite


_DONE: tuple[tuple[str, Callable[[Node], bool]], ...] = (
    ("lowered {count} SequenceMap node{s}", lambda n: n.op == "SequenceMap"),
    (
        "normalized {count} SequenceInsert position{s}",
        lambda n: n.op == "SequenceInsert" and not n.strategy,
    ),
    (
        "read {count} SequenceAt node{s} as {a}Slice{s}",
        lambda n: n.op == "SequenceAt" and n.strategy == "Slice",
    ),
    (
        "rewrote the sequences {count} Loop{s} accumulate{a2}",
        lambda n: n.op == "Loop" and n.strategy not in (_COPIED, _FILLED),
    ),
    (
        "read {count} sequence op{s} as tensors",
        lambda n: (
            n.op not in ("SequenceMap", "SequenceInsert", "Loop", "Scan")
            and not (n.op == "SequenceAt" and n.strategy == "Slice")
            or (n.op == "SequenceInsert" and bool(n.strategy))
        ),
    ),
    (
        "copied the inputs {count} loop bod{ies} return{a2} as they are",
        lambda n: n.op in ("Loop", "Scan") and n.strategy == _COPIED,
    ),
    (
        "wrote the empty starts of {count} loop{s} as ConstantOfShape",
        lambda n: n.op in ("Loop", "Scan") and n.strategy == _FILLED,
    ),
)

_PRESENT = {
    "lowered": "lower",
    "normalized": "normalize",
    "read": "read",
    "rewrote": "rewrite",
    "copied": "copy",
    "wrote": "write",
}

#: Up to this many rewrites of one kind, the summary lists each; beyond, it groups them.
DETAIL_LIMIT = 20


def summary(report: Report, verbose: bool, dry: bool = False) -> str:
    """The summary, rendered from the report (what ``--report`` writes): they cannot
    disagree. ``dry``: in the conditional, for ``--dry-run``, which writes nothing."""
    assert report.files is not None and report.after is not None and report.before is not None
    if report.files.unchanged:
        return "\n".join(_unchanged(report, dry) + _shared(report) + _kept(report, verbose))
    lines = [] if report.nodes else _nothing_lowered(report, dry)
    lines += _done(report, verbose, dry)
    lines += _kept(report, verbose)
    lines += [] if dry else _fixed(report)  # a dry run lists every input it would declare
    lines += _written(report)
    lines += _declared(report)
    lines += _op_table(report.before.op_counts, report.after.op_counts)
    return "\n".join(lines)


def _timing(report: Report) -> str:
    return f"in {report.seconds:.2f} s"


def _unchanged(report: Report, dry: bool) -> list[str]:
    """OUT is IN, byte for byte."""
    lines = [
        f"{PROG}: {report.input}: nothing to lower; "
        + (f"{report.output} would be IN" if dry else f"wrote {report.output} unchanged")
        + f", byte for byte ({_timing(report)})"
    ]
    if report.not_optimized is not None:
        lines.append(f"  --optimize: {report.not_optimized}")
    return lines


def _nothing_lowered(report: Report, dry: bool) -> list[str]:
    """No node rewritten, but OUT differs: what was declared anew."""
    assert report.after is not None
    options, why = report.options, []
    if options.input_shapes is not None:
        why.append("fixed input shapes")
    if options.target_opset is not None:
        why.append(f"declared default-domain opset {options.target_opset}")
    if options.target_opset is not None or options.ir_version is not None:
        why.append(f"IR version {report.after.ir_version}")
    wrote = "would write" if dry else "wrote"
    said = ", ".join(why) or "re-serialized"
    return [
        f"{PROG}: {report.input}: nothing to lower; {wrote} {report.output} ({said}, {_timing(report)})"
    ]


def _done(report: Report, verbose: bool, dry: bool) -> list[str]:
    """A line per kind of rewrite, then each rewrite (or, past DETAIL_LIMIT, groups)."""
    lines = []
    for done, selects in _DONE:
        of_op = [node for node in report.nodes if selects(node)]
        if not of_op:
            continue
        plural = "s" if len(of_op) != 1 else ""
        said = done.format(
            count=len(of_op),
            s=plural,
            a="" if plural else "a ",
            a2="" if plural else "s",
            ies="ies" if plural else "y",
        )
        if dry:  # "lowered 2 ..." -> "would lower 2 ..."
            verb, rest = said.split(" ", 1)
            said = f"would {_PRESENT[verb]} {rest}"
        lines.append(f"{PROG}: {said} in {report.input} -> {report.output} ({_timing(report)})")
        lines += _grouped(of_op) if len(of_op) > DETAIL_LIMIT and not verbose else _listed(of_op)
    return lines


def _written(report: Report) -> list[str]:
    """Where OUT's weights are."""
    assert report.files is not None
    lines = []
    if report.files.data_files:
        files = ", ".join(report.files.data_files)
        lines.append(f"  weights written to {files} beside {report.output}")
    if report.files.embedded:
        lines.append(f"  weights embedded in {report.output}")
    return lines + _shared(report)


def _declared(report: Report) -> list[str]:
    """What OUT declares, or could: its opset and IR version, and the conversions."""
    assert report.after is not None
    lines, options = [], report.options
    lowest = report.lowest_opset
    declared = report.after.opset_import.get("", lowest)
    if lowest is not None and declared is not None and lowest < declared:
        lines.append(
            f"  the output could declare default-domain opset {lowest} with --target-opset "
            f"{lowest} (it declares {declared})"
        )
    if report.nodes and (options.target_opset is not None or options.ir_version is not None):
        lines.append(f"  declared IR version {report.after.ir_version}")
    if report.not_optimized is not None:
        lines.append(f"  --optimize: {report.not_optimized}")
    for how in ("expanded", "adapted"):
        conversions = [str(c) for c in report.conversions if c.how == how]
        if conversions:
            into = " into ONNX function bodies" if how == "expanded" else ""
            listed = ", ".join(conversions)
            lines.append(f"  --target-opset {options.target_opset} {how}{into}: {listed}")
    return lines


def dry_run(report: Report, model: ir.Model, problem: str | None, verbose: bool) -> str:
    """What ``--dry-run`` says: the summary as it would be, in the conditional, and
    what OUT would declare (its version, opsets, inputs and outputs)."""
    from lowering.options import spelled_shape

    lines = [f"{PROG}: dry run: nothing written"]
    if problem is not None:
        lines.append(f"{PROG}: warning: {report.input} does not pass the ONNX checker ({problem})")
    lines.append(summary(report, verbose, dry=True))
    assert report.after is not None
    opsets = ", ".join(
        f"{domain or 'ai.onnx'} {version}" for domain, version in report.after.opset_import.items()
    )
    lines.append(
        f"  {report.output} would declare IR version {report.after.ir_version}, opsets {opsets}"
    )

    def typed(value: ir.Value) -> str:
        kind = value.type
        if kind is None:
            return f"{value.name!r} (no type)"
        element = kind.elem_type if isinstance(kind, ir_types.SequenceType) else kind
        dtype = getattr(element, "dtype", None)
        said = dtype.name.lower() if dtype is not None else str(element)
        if value.shape is not None:
            said += spelled_shape(value.shape)
        return f"{value.name!r} {'seq(' + said + ')' if element is not kind else said}"

    import onnx_ir as ir_types

    for what, values in (("inputs", model.graph.inputs), ("outputs", model.graph.outputs)):
        shown = [typed(v) for v in values[:DETAIL_LIMIT]]
        more = len(values) - len(shown)
        rest = f", and {more} more" if more else ""
        lines.append(f"  {what}: {', '.join(shown) or 'none'}{rest}")
    return "\n".join(lines)


def _fixed(report: Report) -> list[str]:
    """The inputs ``--input-shape`` fixed, as OUT declares them."""
    from lowering.options import spelled_shape

    shapes = report.options.input_shapes
    if not shapes:
        return []
    said = ", ".join(f"{name!r} {spelled_shape(dims)}" for name, dims in shapes.items())
    return [f"  {report.output} declares its input{'s' if len(shapes) != 1 else ''} {said}"]


def _shared(report: Report) -> list[str]:
    """The data files of IN's that OUT reads: shipping OUT alone breaks it."""
    assert report.files is not None
    shared = report.files.shared
    if not shared:
        return []
    s = "s" if len(shared) != 1 else ""
    line = (
        f"  {report.output} reads its weights from {', '.join(shared)} beside it "
        f"({report.input}'s data file{s}, not copied): ship {'them' if s else 'it'} "
        f"with {report.output}, or give --external-data NAME for a file of its own"
    )
    return [line]


T = TypeVar("T")


def _in_scopes(items: list[T], names: list[str], scopes: list[str]) -> list[tuple[str, list[T]]]:
    """``items`` grouped by graph, each group with its line: how many, where, and
    their ``names``."""
    by_scope: dict[str, list[tuple[T, str]]] = collections.defaultdict(list)
    for item, name, scope in zip(items, names, scopes, strict=True):
        by_scope[scope].append((item, name))
    return [
        (
            f"  {len(in_scope)} in {scope}: {', '.join(repr(n or '<unnamed>') for _, n in in_scope)}",
            [item for item, _ in in_scope],
        )
        for scope, in_scope in by_scope.items()
    ]


def _listed(rewrites: list[Node]) -> list[str]:
    lines = []
    names, scopes = [r.name for r in rewrites], [r.scope for r in rewrites]
    for line, in_scope in _in_scopes(rewrites, names, scopes):
        lines.append(line)
        for r in in_scope:
            # A map's strategy and why; an insert position's reason (a guard
            # passed over), if any; and the runtimes that reject either form.
            said = ", ".join(filter(None, [r.strategy, r.explained()]))
            if said:
                lines.append(f"    {r.name or '<unnamed>'!r}: {said}")
    return lines


#: What the summary calls a node left as written, by its op (:class:`lowering.rewrites.Kept`).
_KEPT = {"SequenceInsert": "SequenceInsert position", "Loop": "Loop accumulator"}


def _kept(report: Report, verbose: bool) -> list[str]:
    """The SequenceInsert positions and Loop accumulators left as written, by
    reason, then by graph."""
    lines = []
    by_reason: dict[tuple[str, str], list[Kept]] = collections.defaultdict(list)
    for kept in report.kept:
        by_reason[kept.op_type, kept.reason].append(kept)
    for (op, reason), of_reason in by_reason.items():
        count, plural = len(of_reason), "s" if len(of_reason) != 1 else ""
        lines.append(
            f"{PROG}: left {count} {_KEPT.get(op, op)}{plural} as written "
            f"in {report.input}: {reason}"
        )
        if count > DETAIL_LIMIT and not verbose:
            lines += _by_scope([kept.scope for kept in of_reason])
            lines.append("  (-v names every one)")
            continue
        names, scopes = [k.node_name for k in of_reason], [k.scope for k in of_reason]
        lines += [line for line, _ in _in_scopes(of_reason, names, scopes)]
    return lines


def _grouped(rewrites: list[Node]) -> list[str]:
    """A few lines however many maps: counts by strategy and by graph, with examples
    (insert positions, which have no strategy: by what the summary would say of each)."""
    lines = []
    by_strategy: dict[tuple[str, str], list[Node]] = collections.defaultdict(list)
    for rewrite in rewrites:
        if rewrite.strategy:
            by_strategy[rewrite.strategy, ""].append(rewrite)
        elif rewrite.explained():
            by_strategy["", rewrite.explained()].append(rewrite)
    for (strategy, _), of_strategy in sorted(by_strategy.items(), key=lambda kv: -len(kv[1])):
        first = of_strategy[0]
        how = f" {strategy}," if strategy else ""
        lines.append(
            f"  {len(of_strategy)}{how} such as {first.name or '<unnamed>'!r}: {first.explained()}"
        )
    lines += _by_scope([r.scope for r in rewrites])
    lines.append("  (-v lists every node, with the reason for its strategy)")
    return lines


def _by_scope(scopes: list[str]) -> list[str]:
    """How many sit in each graph: the three biggest, then the rest together."""
    lines = []
    by_scope: collections.Counter[str] = collections.Counter(scopes)
    shown = by_scope.most_common(3)
    for scope, count in shown:
        lines.append(f"  {count} in {scope}")
    if len(by_scope) > len(shown):
        rest = sum(by_scope.values()) - sum(count for _, count in shown)
        lines.append(f"  {rest} in {len(by_scope) - len(shown)} other graphs")
    return lines


def _op_table(before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """Node counts by op type, before and after, at every depth (as onnxslim prints them)."""
    before, after = collections.Counter(before), collections.Counter(after)
    changed = sorted(op for op in before.keys() | after.keys() if before[op] != after[op])
    same = [op for op in before if op not in changed]
    rows = [(op, str(before[op]), str(after[op])) for op in changed]
    if same:
        unchanged = sum(before[op] for op in same)
        rows.append((f"{len(same)} other op types", str(unchanged), str(unchanged)))
    rows.append(("total", str(sum(before.values())), str(sum(after.values()))))
    width = max(len("op type"), *(len(op) for op, _, _ in rows))
    lines = [f"  {'op type':<{width}}  {'before':>6}  {'after':>6}"]
    lines += [f"  {op:<{width}}  {b:>6}  {a:>6}" for op, b, a in rows]
    return lines


def details(rewrite: Rewrite) -> str:
    """A rewrite's node before and after (``-v``)."""
    return (
        f"\n--- {rewrite.op_type} {rewrite.node_name!r} in {rewrite.scope}, before:\n"
        f"{rewrite.before()}"
        f"+++ after:\n{rewrite.after()}"
    )
