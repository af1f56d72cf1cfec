"""What a comparison found: a row per output, a record per run, a status and its exit code.

The statuses say who is to blame (the package doc lists them): a mismatch
(1) wins over inputs that cannot be used (2, :class:`InputsError`), which
wins over A itself failing (3, :class:`CannotCompare`). :meth:`Report.table`
and :func:`summary` are what both command lines print.
"""

from __future__ import annotations

import dataclasses

MATCH, MISMATCH, BAD_INPUTS, COULD_NOT_COMPARE = (
    "match",
    "mismatch",
    "bad inputs",
    "could not compare",
)
EXIT_CODES = {MATCH: 0, MISMATCH: 1, BAD_INPUTS: 2, COULD_NOT_COMPARE: 3}


class CannotCompare(Exception):
    """A model that cannot be read, loaded or given inputs."""


class InputsError(ValueError):
    """Inputs the user gave (a file, a range, a feed dict) that cannot be used."""


def one_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return " ".join(text.split())


@dataclasses.dataclass
class Row:
    """One output's comparison over all runs."""

    name: str
    kind: str
    elements: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    problem: str | None = None
    failures: int = 0
    tolerance: str = ""  # the float tolerance its values were held to ("" if none)
    #: the random ops that reach it, when it differed between two runs of A
    #: (then compared by dtype, shape and length only)
    random: list[str] | None = None

    @property
    def verdict(self) -> str:
        if self.problem is not None:
            return f"MISMATCH: {self.problem}"
        if self.random is not None:
            return f"not by value: random in A ({', '.join(self.random) or 'no random op found'})"
        return "ok"

    def fail(self, problem: str) -> None:
        self.failures += 1
        if self.problem is None:
            self.problem = problem


@dataclasses.dataclass
class RunRecord:
    """What happened to one run: compared, mismatch, skipped (A fails) or not compared."""

    label: int
    description: str
    outcome: str = "compared"
    note: str | None = None

    def line(self) -> str:
        text = f"run {self.label} ({self.description}): {self.outcome}"
        return text + (f": {self.note}" if self.note else "")


@dataclasses.dataclass
class Report:
    """The outcome: a row per output, a record per run, and notes.

    ``reason`` says why no run could be compared (exit 3); ``input_error``
    why the inputs could not be used (exit 2). A failed row (exit 1) wins
    over both.
    """

    rows: list[Row]
    runs: int
    reason: str | None = None
    records: list[RunRecord] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    input_error: str | None = None
    failing_run: int | None = None
    saved_to: str | None = None  # where inputs were saved for --inputs
    saved_runs: int = 0  # how many runs (--save-inputs); 0: the failing run alone
    input_difference: str | None = None  # why B cannot take A's inputs: said first
    show_schedule: bool = False

    @property
    def status(self) -> str:
        if any(row.problem for row in self.rows):
            return MISMATCH
        if self.input_error is not None:
            return BAD_INPUTS
        if self.reason is not None:
            return COULD_NOT_COMPARE
        return MATCH

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def mismatched(self) -> list[str]:
        return [row.name for row in self.rows if row.problem]

    def table(self) -> str:
        if self.status == BAD_INPUTS:
            return f"cannot use the inputs: {self.input_error}"
        lines = []
        if self.input_difference is not None:
            lines.append(f"B cannot take A's inputs: {self.input_difference}")
        if self.show_schedule:
            lines += [record.line() for record in self.records]
        if self.rows and (self.runs or self.status == MISMATCH):
            lines += self._row_lines()
        lines.append(self._runs_line())
        if not self.show_schedule:
            lines += _grouped(self.records)
        lines += [f"note: {note}" for note in self.notes]
        if self.reason is not None and self.status == COULD_NOT_COMPARE:
            lines.append(f"could not compare: {self.reason}")
        if self.saved_to is not None:
            lines.append(self._saved_line())
        return "\n".join(lines)

    def _row_lines(self) -> list[str]:
        """The table of outputs, columns aligned (grouped past :data:`DETAIL_LIMIT`)."""
        header = ("output", "kind", "elements", "max abs", "max rel", "tolerance", "verdict")
        rows = self.rows if self.show_schedule else _grouped_rows(self.rows)
        cells = [header] + [
            (
                r.name,
                r.kind,
                str(r.elements),
                f"{r.max_abs:.3g}",
                f"{r.max_rel:.3g}",
                r.tolerance or "exact",
                r.verdict,
            )
            for r in rows
        ]
        widths = [max(len(c[i]) for c in cells) for i in range(len(header) - 1)]
        lines = [
            "  ".join(cell.ljust(width) for cell, width in zip(c, widths, strict=False))
            + "  "
            + c[-1]
            for c in cells
        ]
        if len(rows) < len(self.rows):
            lines.append("(-v lists every output)")
        return lines

    def _runs_line(self) -> str:
        total = len(self.records)
        if total and self.runs != total:
            return f"({self.runs} of {total} runs compared)"
        return f"({self.runs} run{'s' if self.runs != 1 else ''})"

    def _saved_line(self) -> str:
        """Where the inputs were saved, and how to replay them."""
        if self.saved_runs:
            s = "s" if self.saved_runs != 1 else ""
            what = f"inputs of {self.saved_runs} run{s} saved to {self.saved_to}"
            if self.failing_run is not None:
                what += f" (run {self.failing_run} fails)"
        else:
            what = f"inputs of failing run {self.failing_run} saved to {self.saved_to}"
        return f"{what}; replay with --inputs {self.saved_to}"


#: Up to this many outputs, the table lists each; beyond, it groups them (as the
#: lowering's summary does its rewrites).
DETAIL_LIMIT = 20


def _grouped_rows(rows: list[Row]) -> list[Row]:
    """Past :data:`DETAIL_LIMIT` outputs: the mismatches first, each (up to the
    limit), then one row per kind and verdict for the rest, named by its count,
    with their elements summed and their largest errors."""
    if len(rows) <= DETAIL_LIMIT:
        return rows
    failing = [row for row in rows if row.problem is not None]
    shown = failing[:DETAIL_LIMIT]
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        if row not in shown:
            verdict = "MISMATCH" if row.problem is not None else row.verdict
            groups.setdefault((row.kind, verdict), []).append(row)
    for (kind, verdict), members in groups.items():
        shown.append(_group_row(members, kind, verdict, more=bool(shown)))
    return shown


def _group_row(members: list[Row], kind: str, verdict: str, more: bool) -> Row:
    """One row for outputs of one kind and verdict: elements summed, largest errors."""
    tolerances = sorted({m.tolerance for m in members if m.tolerance})
    group = Row(
        f"{len(members)} {'more ' if more else ''}outputs",
        kind,
        elements=sum(m.elements for m in members),
        max_abs=max(m.max_abs for m in members),
        max_rel=max(m.max_rel for m in members),
        tolerance=", ".join(tolerances),
        failures=sum(m.failures for m in members),
    )
    if verdict == "MISMATCH":
        group.problem = f"{members[0].name!r}: {members[0].problem}, and more"
    elif members[0].random is not None:
        group.random = sorted({op for m in members for op in m.random or []})
    return group


def _grouped(records: list[RunRecord]) -> list[str]:
    """The runs that were not plain matches, runs with the same fate on one line."""
    groups: dict[tuple[str, str | None], list[RunRecord]] = {}
    for record in records:
        if record.outcome != "compared":
            groups.setdefault((record.outcome, record.note), []).append(record)
    lines = []
    for (outcome, note), members in groups.items():
        if len(members) == 1 and outcome != "mismatch":
            lines.append(members[0].line())
            continue
        labels = ", ".join(str(r.label) for r in members)
        lines.append(f"run{'s' if len(members) > 1 else ''} {labels}: {outcome}")
        lines[-1] += f": {note}" if note else ""
    return lines


def summary(report: Report, a: str, b: str) -> str:
    """One line saying what the comparison found."""
    if report.status == MATCH:
        return f"{b} matches {a} on every output"
    if report.status == MISMATCH and report.input_difference is not None:
        return f"{b} does not match {a}: {report.input_difference}"
    if report.status == MISMATCH:
        return f"{b} does not match {a}: {', '.join(map(repr, report.mismatched()))}"
    if report.status == BAD_INPUTS:
        return f"cannot use the inputs: {report.input_error}"
    return f"could not compare {a} and {b}: {report.reason}"
