"""``python -m lowering IN OUT`` / ``onnx-lower IN OUT``.

Exit codes: 0 success, 1 a model that cannot be read, lowered or written
(one line on stderr naming the file, the node and the reason) or, with
``--verify``, a lowered model whose results differ, 2 usage, 3 (``--verify``)
the two models could not be compared.
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
import traceback

from lowering import model_io
from lowering.api import lower_in_place
from lowering.errors import LoweringError
from lowering.map_unroll import DEFAULT_MAX_UNROLL
from lowering.rewrites import Rewrite
from lowering.sequence_map import STRATEGIES
from lowering.target_opset import MIN_OPSET, lowest_opset

PROG = "onnx-lower"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Rewrite every ONNX SequenceMap into an equivalent Loop.",
    )
    parser.add_argument("input", metavar="IN.onnx", help="the model to lower (never modified)")
    parser.add_argument("output", metavar="OUT.onnx", help="where to write the lowered model")
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="auto",
        help="auto (default): a Loop with scan outputs where every output element has one "
        "shape, the general Loop + SequenceInsert form elsewhere; loop: the general form "
        "everywhere",
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
        "--no-normalize-inserts",
        dest="normalize_inserts",
        action="store_false",
        help="leave SequenceInsert positions as they are",
    )
    parser.add_argument(
        "--external-data",
        metavar="NAME",
        help="write all weights to the file NAME beside OUT (default: keep the input's "
        "external data layout, copying the data files when OUT is in another folder)",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="after writing OUT, run IN and OUT in onnxruntime on the same inputs and "
        "compare every output (exit 1 on a mismatch, 3 if they cannot be compared)",
    )
    from lowering import verify  # the comparison's options; onnxruntime loads only to run

    verify.add_options(parser)
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print each rewritten node before and after, and tracebacks on errors",
    )
    noise.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.max_unroll < 0:
        parser.error("--max-unroll must be at least 0")
    if args.target_opset is not None and args.target_opset < MIN_OPSET:
        parser.error(f"--target-opset must be at least {MIN_OPSET}")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR if args.quiet else logging.WARNING,
        format=f"{PROG}: %(levelname)s: %(message)s",
    )
    stage = "read"
    try:
        model = model_io.load(args.input)
        model_io.check_external_data(model)
        problem = model_io.checker_problem(args.input)
        stage = "lower"
        rewrites = lower_in_place(
            model,
            normalize_inserts=args.normalize_inserts,
            strategy=args.strategy,
            max_unroll=args.max_unroll,
            optimize=args.optimize,
            target_opset=args.target_opset,
            keep_originals=args.verbose,
        )
        stage = "write"
        with model_io.kept_original(args.input, args.output, keep=args.verify) as original:
            changed = rewrites or args.target_opset is not None
            relayout = args.external_data is not None
            if changed or relayout or not model_io.copy_unchanged(args.input, args.output, model):
                model_io.save(model, args.output, external_data=args.external_data)
            report = None
            if args.verify:
                from lowering import verify  # imports onnxruntime: only when asked for

                report = verify.compare(original, args.output, **verify.compare_kwargs(args))
    except (model_io.ModelFileError, LoweringError) as error:
        file = args.output if stage == "write" else args.input
        return _fail(f"{file}: {error}", args.verbose)
    except Exception as error:  # noqa: BLE001 -- an unexpected failure still gets one clear line
        file = args.output if stage == "write" else args.input
        return _fail(
            f"{file}: internal error while trying to {stage} the model: "
            f"{type(error).__name__}: {error} (rerun with -v for the traceback)",
            args.verbose,
        )
    if not args.quiet:
        if problem is not None:
            print(
                f"{PROG}: warning: {args.input} does not pass the ONNX checker ({problem}); "
                "it was lowered anyway",
                file=sys.stderr,
            )
        print(_summary(args.input, args.output, rewrites), file=sys.stderr)
        if rewrites:
            lowest = _lowest_opset(model)
            if lowest is not None:
                print(
                    f"  the output could declare default-domain opset {lowest} "
                    f"(it declares {model.opset_imports.get('', lowest)})",
                    file=sys.stderr,
                )
        if args.verbose:
            for rewrite in rewrites:
                print(_details(rewrite), file=sys.stderr)
    if report is None:
        return 0
    from lowering import verify

    if not args.quiet or report.status != verify.MATCH:
        print(report.table(), file=sys.stderr)
    if report.status == verify.MISMATCH:
        names = ", ".join(map(repr, report.mismatched()))
        print(
            f"{PROG}: error: {args.output} was written, but it does not match "
            f"{args.input} on {names}",
            file=sys.stderr,
        )
    elif report.status == verify.COULD_NOT_COMPARE:
        print(
            f"{PROG}: {args.output} was written, but it could not be compared with "
            f"{args.input}: {report.reason}",
            file=sys.stderr,
        )
    return report.exit_code


def _lowest_opset(model) -> int | None:
    """For the summary only: a failure here must not turn a success into a crash."""
    try:
        return lowest_opset(model)
    except Exception:  # OUT is written; the summary line is optional
        logging.getLogger(PROG).debug("could not work out the lowest opset", exc_info=True)
        return None


def _fail(message: str, verbose: bool) -> int:
    if verbose:
        traceback.print_exc()
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 1


_DONE = {
    "SequenceMap": "lowered {count} SequenceMap node{s}",
    "SequenceInsert": "normalized {count} SequenceInsert position{s}",
}


def _summary(source: str, target: str, rewrites: list[Rewrite]) -> str:
    if not rewrites:
        return f"{PROG}: {source}: nothing to lower; wrote {target} unchanged"
    lines = []
    for op_type, done in _DONE.items():
        of_op = [r for r in rewrites if r.op_type == op_type]
        if not of_op:
            continue
        plural = "s" if len(of_op) != 1 else ""
        lines.append(f"{PROG}: {done.format(count=len(of_op), s=plural)} in {source} -> {target}")
        by_scope = collections.defaultdict(list)
        for rewrite in of_op:
            by_scope[rewrite.scope].append(rewrite)
        for scope, in_scope in by_scope.items():
            names = ", ".join(repr(r.node_name or "<unnamed>") for r in in_scope)
            lines.append(f"  {len(in_scope)} in {scope}: {names}")
            lines += [
                f"    {r.node_name or '<unnamed>'!r}: {r.strategy}, {r.reason}"
                for r in in_scope
                if r.strategy
            ]
    return "\n".join(lines)


def _details(rewrite: Rewrite) -> str:
    return (
        f"\n--- {rewrite.op_type} {rewrite.node_name!r} in {rewrite.scope}, before:\n"
        f"{rewrite.before()}"
        f"+++ after:\n{rewrite.after()}"
    )
