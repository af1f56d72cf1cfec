"""``python -m lowering IN OUT`` / ``onnx-lower IN OUT``.

Exit codes: 0 success, 1 a model that cannot be read, lowered or written
(one line on stderr naming the file, the node and the reason) or, with
``--verify``, a lowered model whose results differ, 2 usage, 3 (``--verify``)
the two models could not be compared.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import stat
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lowering import console, summary
from lowering.defaults import DEFAULT_MAX_UNROLL, DEFAULT_RUNTIME, RUNTIME_NAMES, STRATEGIES

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

    from lowering import verify
    from lowering.options import Options
    from lowering.progress import Callback, ProgressLine
    from lowering.report import Files, Measure, Report
    from lowering.rewrites import Kept, LoweringResult

# ``--help`` and ``--version`` import neither onnx nor onnx_ir (tests/test_cli_cost.py):
# the parser reads only lowering.defaults, and the rest is imported when a model is read.

PROG = console.PROG
STREAM = "-"  # model_io.STREAM, which the parser's checks need before model_io loads


def run_pipeline(
    model: ir.Model,
    *,
    options: Options,
    restore_from: Callable[[], ir.Model] | None = None,
    progress: Callback | None = None,
) -> LoweringResult:
    """:func:`lowering.api.lower_in_place`, with all the pipeline says: what it
    rewrote and what it left as written. Imported when a model is lowered (and
    the seam tests replace to sabotage a lowering)."""
    from lowering.progress import silent
    from lowering.steps import Pipeline

    lower = Pipeline(options, restore_from=restore_from, progress=progress or silent)
    return lower(model)


#: The end of ``--help``: the exit codes and an example (docs/cli.md says more).
EPILOG = """\
exit codes:
  0    OUT was written (with --verify: and it matches IN)
  1    IN cannot be read, lowered or written: one line names the file, the node
       and why; with --verify: OUT was written but does not match IN
  2    usage: an unknown option, a value out of range, - on a terminal, a
       comparison option without --verify, an --input-shape IN contradicts
  3    with --verify: OUT was written, but the two could not be compared
  130  interrupted (Ctrl-C): nothing written, no report

examples:
  onnx-lower examples/torch_atleast_2d.onnx out.onnx --verify --report report.json
  onnx-lower examples/torch_atleast_2d.onnx --dry-run --runtime tvm
"""


def _input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:D,D,...`` (NAME may hold ``:``; ``NAME:`` is a scalar)."""
    name, sep, dims = text.rpartition(":")
    sizes = dims.split(",") if dims else []
    if not sep or not name or not all(size.strip().isdigit() for size in sizes):
        raise argparse.ArgumentTypeError(
            f"expected NAME:D,D,... with whole numbers of at least 0, got {text!r}"
        )
    return name, tuple(int(size) for size in sizes)


def _parser() -> argparse.ArgumentParser:
    from lowering import __version__

    options: dict[str, Any] = {}
    if sys.version_info >= (3, 14):
        options["color"] = False  # plain text, whatever the terminal: scripts parse it
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Rewrite every ONNX SequenceMap into an equivalent form without it\n"
        "(vectorized, unrolled, a Scan or a Loop), normalize SequenceInsert positions,\n"
        "and declare another opset on request.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **options,
    )
    parser.add_argument(
        "input",
        metavar="IN.onnx",
        help="the model to lower, never modified unless it is also OUT (then replaced "
        "atomically, only once the lowering succeeded); - reads stdin (not a terminal)",
    )
    parser.add_argument(
        "output",
        metavar="OUT.onnx",
        nargs="?",
        help="where to write the lowered model, replaced atomically (a symlink's target); "
        "- (stdout, not a terminal), a FIFO or a character device is streamed to, weights "
        "embedded",
    )
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="auto",
        help="auto (default): for each map the first form that fits: vectorize (the body once "
        "on the stacked elements, no loop), unroll (a static length of at most --max-unroll), "
        "scan (split -> map -> concat), uniform (a Loop with scan outputs, where every output "
        "element has one shape), loop (the general Loop + SequenceInsert form); "
        "loop: the general form everywhere",
    )
    parser.add_argument(
        "--max-unroll",
        type=int,
        default=DEFAULT_MAX_UNROLL,
        metavar="K",
        help=f"unroll maps whose input has a static length of at most K elements "
        f"(default {DEFAULT_MAX_UNROLL}; 0 never unrolls)",
    )
    parser.add_argument(
        "--runtime",
        default=DEFAULT_RUNTIME,
        metavar="{" + ",".join(RUNTIME_NAMES) + "}[:RELEASE]",
        help="the runtime the output is for (default onnxruntime), each covering its releases "
        "from the oldest in docs/runtimes.md on; NAME:RELEASE names one (openvino:2023.3 has "
        "a profile of its own, older than openvino's): where a loop is "
        "unavoidable, emit a form it runs (a Scan for tract, a Loop with scan outputs for "
        "mnn); a map of static length that would need a loop or sequence op it lacks is "
        "unrolled, whatever --max-unroll says; exit 1 on a map it can run in no form, "
        "and, writing nothing, where the output would still hold an op it lacks (written "
        "by the tool or left from IN)",
    )
    parser.add_argument(
        "--allow-unsupported",
        action="store_true",
        help="write OUT even where it holds ops --runtime lacks, with a warning naming them",
    )
    parser.add_argument(
        "--optimize",
        action="store_true",
        help="afterwards, fold constants with onnxscript's optimizer (removes Ifs whose "
        "conditions unrolling made static; rewrites the whole model)",
    )
    parser.add_argument(
        "--target-opset",
        type=int,
        metavar="N",
        help="declare default-domain opset N (at least 11) when every node is valid at N, "
        "adapting what changed where it can; exit 1 listing what blocks",
    )
    parser.add_argument(
        "--ir-version",
        type=int,
        metavar="N",
        help="declare IR version N (exit 1 naming what needs more); by default the output "
        "keeps IN's IR version, or with --target-opset declares the lowest its content allows "
        "(old runtimes refuse a model by its IR version alone)",
    )
    parser.add_argument(
        "--input-shape",
        type=_input_shape,
        action="append",
        default=[],
        metavar="NAME:D,D,...",
        help="fix the dims of graph input NAME before lowering (of its elements, for a "
        "sequence input; NAME: for a scalar), so a length they make static can be unrolled; "
        "OUT's input declares them and --verify feeds only them (repeatable); exit 2 when "
        "they contradict IN's declared rank or dims or NAME is no input",
    )
    parser.add_argument(
        "--no-normalize-inserts",
        dest="normalize_inserts",
        action="store_false",
        help="leave SequenceInsert positions as they are",
    )
    parser.add_argument(
        "--external-data",
        metavar="NAME",
        help="write all weights to the file NAME beside OUT (default: OUT in IN's folder "
        "refers to IN's data files; elsewhere its weights go to OUT.onnx.data, named after "
        "OUT); a NAME that is IN's data or another existing file is refused",
    )
    parser.add_argument(
        "--report",
        metavar="FILE.json",
        help="also write what happened to FILE.json (the summary's content, --verify's "
        "outcome, the version and options; schema in docs/cli.md), on failure too",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="after writing OUT, run IN in onnxruntime and OUT in --runtime's runtime "
        "(onnxruntime for none or generic) on the same inputs and compare every output "
        "(exit 1 on a mismatch, 3 if they cannot be compared)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="lower IN in memory and say what would be lowered, in which form and why, and "
        "what OUT would declare (IR version, opsets, inputs, outputs); write nothing (OUT "
        "may be left out; not with --verify, --report or --external-data)",
    )
    from lowering.verify.cli import add_options  # onnxruntime loads only to run

    add_options(parser)
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print each rewritten node before and after, and tracebacks on errors",
    )
    noise.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    from lowering.verify.cli import joined_values

    parser = _parser()
    args = parser.parse_args(joined_values(sys.argv[1:] if argv is None else argv))

    _check_usage(parser, args)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR if args.quiet else logging.WARNING,
        format=f"{PROG}: %(levelname)s: %(message)s",
    )
    run = _Run(_progress_line(args), started)
    handlers = logging.getLogger().handlers
    for handler in handlers:  # a log record (a warning, -v's info) takes the line away first
        handler.addFilter(run.clear_line)
    try:
        try:
            code = _lower(args, run)
        finally:
            run.line.clear()
            for handler in handlers:
                handler.removeFilter(run.clear_line)
        if args.report is not None and not run.report_refused:
            code = _write_report(args, run, code)
    except KeyboardInterrupt:  # Ctrl-C: one line, no report; the staging folders are gone
        return console.interrupted(PROG, run.written)
    return code


@dataclasses.dataclass
class _Run:
    """What one run found, for ``--report`` (whatever the outcome), and its progress line."""

    line: ProgressLine | _NoLine
    started: float = 0.0  # time.perf_counter() when main began
    before: Measure | None = None  # the model as read
    report: Report | None = None  # once OUT is written
    verify: verify.Report | None = None  # once compared
    error: str | None = None
    written: str | None = None  # OUT, once it is in place
    report_refused: bool = False  # --report names a file IN reads: never written
    stage: str = "read"  # what the run is doing, and the file it is at: for the error line
    file: str = ""

    def failed(self, message: str) -> str:
        """Record the error line (and take the progress line away before it is printed)."""
        self.line.clear()
        self.error = message
        return message

    def clear_line(self, record: logging.LogRecord) -> bool:
        """A logging filter that lets every record through, once the line is gone."""
        self.line.clear()
        return True


def _lower(args: argparse.Namespace, run: _Run) -> int:
    """Read, lower, write, summarize and (``--verify``) compare; the exit code."""
    from lowering import model_io
    from lowering.errors import LoweringError
    from lowering.options import InputShapeError

    run.stage, run.file = "read", _label(args.input)
    try:
        return _read_lower_write(args, run)
    except model_io.ModelFileError as error:
        return _fail(run.failed(f"{error.file or run.file}: {error}"), args.verbose)
    except InputShapeError as error:  # a usage error IN's declarations reveal
        _fail(run.failed(f"{run.file}: {error.flag}"), args.verbose)
        return 2
    except LoweringError as error:
        return _fail(run.failed(f"{run.file}: {error}"), args.verbose, error.details)
    except Exception as error:  # noqa: BLE001 -- an unexpected failure still gets one clear line
        return _fail(
            run.failed(
                f"{run.file}: internal error while trying to {run.stage} the model: "
                f"{type(error).__name__}: {error} (rerun with -v for the traceback)"
            ),
            args.verbose,
        )


def _read_lower_write(args: argparse.Namespace, run: _Run) -> int:
    """The run's stages, each said in ``run.stage``."""
    from lowering import model_io
    from lowering.report import Files, Measure

    out = None if args.dry_run else model_io.target(args.output)
    run.line("reading the model", 0, 0)
    model, source = model_io.read(args.input)
    if args.report is not None:
        run.report_refused = _report_is_ins_data(args.report, model)
        if run.report_refused:
            raise model_io.ModelFileError(
                "refused: IN reads its weights from it; give the report its own file",
                file=args.report,
            )
    problem = model_io.checker_problem(source)
    declared = _declared(model)
    run.before = Measure.of(model)
    run.stage = "lower"
    result = run_pipeline(
        model,
        options=args.options,
        restore_from=lambda: model_io.reread(source),  # no snapshot: IN is at hand
        progress=run.line,
    )
    unsupported = _unsupported(args, model, result.kept)  # a dry run fails as the run would
    changed = bool(result.rewrites) or _declared(model) != declared
    if out is None:  # --dry-run: say what OUT would be, write nothing
        run.stage = "summarize"
        run.report = _summarized(run, model, result, args, source.label, Files(not changed))
        run.report = run.report.replace(output=args.output or "OUT")
        run.line.clear()
        _say(summary.dry_run(run.report, model, problem, args.verbose))
        return 0
    run.stage, run.file = "write", _label(args.output)
    run.line("writing the model", 0, 0)
    with model_io.kept_original(source, out, keep=args.verify) as original:
        written = model_io.write(
            model, source, out, changed=changed, external_data=args.external_data
        )
        run.written = _label(args.output)
        run.line("summarizing", 0, 0)
        files = Files(written.identical, written.data_files, written.embedded, written.shared)
        run.report = _summarized(run, model, result, args, source.label, files)
        run.line.clear()
        if not args.quiet:
            _say_summary(args, run.report, result.rewrites, source.label, problem, written)
        if unsupported is not None:  # --allow-unsupported: said even with -q
            _say(f"{PROG}: warning: {run.written}: {unsupported}")
        if not args.verify:
            return 0
        run.stage = "verify"
        lowered = written.streamed if written.streamed is not None else out.label
        run.verify = _verify(args, original, lowered)
        return run.verify.exit_code


def _declared(model: ir.Model) -> tuple:
    """What the model declares beside its nodes: a change there is a change to write."""
    return _opsets(model), model.ir_version, _input_shapes(model)


def _say_summary(
    args: argparse.Namespace, report: Report, rewrites: list, label: str, problem, written
) -> None:
    """The checker's warning about IN (said of what was done), the summary, and ``-v``'s
    rewrites."""
    if problem is not None:  # said of what was done: nothing may have been lowered
        done = (
            "it was lowered anyway"
            if report.nodes
            else "it was copied as it is"
            if written.identical
            else "it was written anyway"
        )
        _say(f"{PROG}: warning: {label} does not pass the ONNX checker ({problem}); {done}")
    _say(summary.summary(report, args.verbose))
    if args.verbose:
        for rewrite in rewrites:
            _say(summary.details(rewrite))


def _summarized(
    run: _Run,
    model: ir.Model,
    result: LoweringResult,
    args: argparse.Namespace,
    source: str,
    files: Files,
) -> Report:
    """The report of what was done (or, ``--dry-run``, would be), timed to the end of
    summarizing: the whole run's time, which the summary and the report say."""
    from lowering.report import Report

    assert run.before is not None, "measured when IN was read"
    report = Report.of(
        run.before,
        model,
        result,
        args.options,
        input=source,
        output="<stdout>" if args.output == STREAM else args.output,
        files=files,
        # -q alone prints no summary: the lowest opset is worked out only to be said
        lowest=args.dry_run or not args.quiet or args.report is not None,
    )
    return report.replace(seconds=time.perf_counter() - run.started)


def _unsupported(args: argparse.Namespace, model: ir.Model, kept: Sequence[Kept]) -> str | None:
    """What ``--runtime`` will refuse in the lowered model, as the warning says it
    (``--allow-unsupported``), with why each Loop accumulator in ``kept`` stays a
    sequence; without that flag, raises the refusal: nothing is written."""
    from lowering.errors import LoweringError
    from lowering.rewrites import stays
    from lowering.runtimes.profiles import left_unsupported

    left = left_unsupported(model, args.runtime)
    if left is None:
        return None
    said = "; ".join(
        filter(None, [f"{args.runtime} lacks ops the output holds: {left}", stays(kept)])
    )
    if not args.allow_unsupported:
        raise LoweringError(f"{said}; nothing written (--allow-unsupported writes it anyway)")
    return said


def _progress_line(args: argparse.Namespace) -> ProgressLine | _NoLine:
    """A progress line on stderr when it is a terminal and not ``-q``; else one that
    draws nothing (:mod:`lowering.progress`)."""
    from lowering import progress

    if args.quiet or not progress.on_terminal(sys.stderr):
        return _NoLine()
    return progress.ProgressLine(sys.stderr, prefix=f"{PROG}: ", delay=PROGRESS_DELAY, clock=_clock)


class _NoLine:
    """The progress line where none is drawn: a pipe, a file, ``-q``."""

    def __call__(self, phase: str, done: int, total: int) -> None:
        pass

    def clear(self) -> None:
        pass


#: Seconds before the progress line first shows; the clock it reads (tests replace both).
PROGRESS_DELAY = 2.0
_clock = time.monotonic


def _write_report(args: argparse.Namespace, run: _Run, code: int) -> int:
    """Write ``--report``: what happened, with the error when the run failed; the exit code
    (1 if the report itself cannot be written)."""
    from lowering import model_io
    from lowering.report import Report

    report = run.report or Report(
        args.options,
        before=run.before,
        input=_label(args.input),
        output="<stdout>" if args.output == STREAM else args.output,
    )
    report = report.replace(verify=run.verify, error=run.error, exit_code=code)
    try:
        model_io.write_file(args.report, report.to_json().encode())
    except model_io.ModelFileError as error:
        _say(f"{PROG}: error: {args.report}: cannot write the report: {error}")
        return code or 1
    return code


def _check_usage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Everything that is wrong with the command line itself: exit 2 with the usage line."""
    from lowering.options import OptionError, Options

    for check in (_output_problem, _dry_run_problem, _terminal_problem):
        problem = check(args)
        if problem is not None:
            parser.error(problem)
    try:  # every option is checked where the API checks it, and said as a flag
        args.options = Options(
            normalize_inserts=args.normalize_inserts,
            strategy=args.strategy,
            max_unroll=args.max_unroll,
            runtime=args.runtime,
            optimize=args.optimize,
            target_opset=args.target_opset,
            ir_version=args.ir_version,
            keep_originals=args.verbose,
            input_shapes=_shapes(parser, args.input_shape),
        )
    except OptionError as error:
        parser.error(error.flag)
    for check in (_comparing_problem, _external_data_problem, _report_flag_problem):
        problem = check(args)
        if problem is not None:
            parser.error(problem)


def _output_problem(args: argparse.Namespace) -> str | None:
    if args.output is None and not args.dry_run:
        return "the following arguments are required: OUT.onnx (or give --dry-run)"
    return None


def _dry_run_problem(args: argparse.Namespace) -> str | None:
    """A flag that needs OUT written, with --dry-run."""
    if not args.dry_run:
        return None
    for flag, given in (
        ("--verify", args.verify),
        ("--report", args.report is not None),
        ("--external-data", args.external_data is not None),
    ):
        if given:
            return f"--dry-run writes and runs nothing; {flag} needs OUT written"
    return None


def _terminal_problem(args: argparse.Namespace) -> str | None:
    """As gzip: a binary model is neither read from nor written to a terminal."""
    if args.output == STREAM and _is_terminal(sys.stdout):
        return "refusing to write a binary model to a terminal; redirect stdout or name OUT"
    if args.input == STREAM and _is_terminal(sys.stdin):
        return "refusing to read a binary model from a terminal; redirect stdin or name IN"
    return None


def _comparing_problem(args: argparse.Namespace) -> str | None:
    """Comparison flags without --verify; with it, a runtime or replay folder it cannot use."""
    if not args.verify:
        from lowering.verify.cli import given_options

        given = given_options(args)
        if not given:
            return None
        s = "s" if len(given) == 1 else ""
        return f"{', '.join(given)} compare{s} IN and OUT: give --verify too"
    from lowering import verify
    from lowering.verify.cli import replay_dir_problem

    problem = verify.missing_runtime(verify.verify_runtime(args.runtime))
    return problem if problem is not None else replay_dir_problem(args)


def _external_data_problem(args: argparse.Namespace) -> str | None:
    from lowering import model_io

    name = args.external_data
    if name is None:
        return None
    if not model_io.valid_data_name(name):
        return f"--external-data takes a plain file name for OUT's folder, not {name!r}"
    if args.output == STREAM or _is_stream(args.output):
        return "--external-data needs an OUT file; a stream gets the weights embedded"
    if name in {os.path.basename(args.output), os.path.basename(os.path.realpath(args.output))}:
        return f"--external-data {name} would be OUT itself; try {name}.data"
    return None


def _report_flag_problem(args: argparse.Namespace) -> str | None:
    if args.report is None:
        return None
    problem = _report_problem(args)
    return None if problem is None else f"--report {args.report}: {problem}"


def _shapes(
    parser: argparse.ArgumentParser, given: list[tuple[str, tuple[int, ...]]]
) -> dict[str, tuple[int, ...]] | None:
    """``--input-shape``'s, by name; a name given twice is a usage error."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name, dims in given:
        if name in shapes:
            parser.error(f"--input-shape {name}: given twice")
        shapes[name] = dims
    return shapes or None


def _report_problem(args: argparse.Namespace) -> str | None:
    """Why ``--report FILE`` cannot be written, before any work: it is IN, OUT or
    another file the run writes, or no file can be made there."""
    path = args.report
    if path == STREAM:
        return "give a file name; the report is not streamed"
    others = {"IN": args.input, "OUT": args.output, "--save-inputs": args.save_inputs}
    if args.output != STREAM:  # OUT's data: --external-data's, or the file named after OUT
        data = args.external_data or f"{os.path.basename(args.output)}.data"
        others["OUT's data file"] = os.path.join(os.path.dirname(args.output), data)
    for what, other in others.items():
        if other is not None and other != STREAM and _same_path(path, other):
            return f"would be {what} itself; give the report its own file"
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as error:
        return f"cannot use the path: {error.strerror}"
    if info is not None and not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    folder = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(folder):
        return f"the folder {os.path.dirname(os.path.abspath(path))!r} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"cannot write to the folder {folder!r}"
    return None


def _report_is_ins_data(path: str, model: ir.Model) -> bool:
    """Whether ``--report``'s file is one of the data files IN reads its weights from."""
    from lowering import model_io

    return any(_same_path(path, data) for data in model_io.external_files(model))


def _same_path(a: str, b: str) -> bool:
    """The same file, or (neither existing yet) the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed, or replaced by something without one
        return False


def _is_stream(path: str) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _verify(
    args: argparse.Namespace, original: str | onnx.ModelProto, lowered: str | onnx.ModelProto
) -> verify.Report:
    """Run IN and OUT in onnxruntime and compare (``--verify``); what it found."""
    from lowering import verify  # imports onnxruntime: only when asked for

    if args.quiet:  # not even onnxruntime's own (coloured) warnings
        import onnxruntime

        onnxruntime.set_default_logger_severity(3)
    report = verify.compare(original, lowered, **verify.compare_kwargs(args))
    if not args.quiet or report.status != verify.MATCH:
        _say(report.table())
    if report.status == verify.MISMATCH:
        names = ", ".join(map(repr, report.mismatched()))
        _say(
            f"{PROG}: error: {_label(args.output)} was written, but it does not match "
            f"{_label(args.input)} on {names}"
        )
    elif report.status == verify.COULD_NOT_COMPARE:
        _say(
            f"{PROG}: {_label(args.output)} was written, but it could not be compared with "
            f"{_label(args.input)}: {report.reason}"
        )
    return report


def _label(path: str) -> str:
    return "<stdin>" if path == STREAM else path


def _say(text: str) -> None:
    console.say(text)  # a closed stderr stops the printing, not the run


def _fail(message: str, verbose: bool, details: Sequence[str] = ()) -> int:
    if verbose:
        _say(traceback.format_exc().rstrip("\n"))
    _say(f"{PROG}: error: {message}")
    if verbose:
        for line in details:
            _say(line)
    return 1


def _input_shapes(model: ir.Model) -> list[object]:
    return [None if v.shape is None else tuple(v.shape) for v in model.graph.inputs]


def _opsets(model: ir.Model) -> list[dict[str, int]]:
    return [dict(model.opset_imports), *(dict(f.opset_imports) for f in model.functions.values())]
