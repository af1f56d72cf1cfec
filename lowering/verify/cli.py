"""``onnx-verify`` (``python -m lowering.verify``), and the options ``onnx-lower --verify`` shares.

lowering/cli.py adds the same options (:func:`add_options`), turns them
into :func:`compare`'s arguments (:func:`compare_kwargs`) and reads
``--val-range -1,1`` the same way (:func:`joined_values`), so the two
command lines cannot drift apart.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lowering.verify.report import BAD_INPUTS, MATCH, summary
from lowering.verify.runs import DEFAULT_SCHEDULE
from lowering.verify.settings import ATOL, RTOL, TIME_SCALE, TIMEOUT, ULPS, VERIFY_RUNTIMES

if TYPE_CHECKING:
    from lowering.verify.values import ValueRange

# What builds the parsers imports neither onnx nor onnx_ir (``onnx-lower --help``):
# the comparison, the runtimes and the value ranges are imported where used.


def parse_val_range(text: str) -> tuple[str | None, ValueRange]:
    """``[NAME:]LO,HI``. NAME may itself contain ``:``; the bounds never do."""
    from lowering.verify.values import ValueRange

    name, sep, bounds = text.rpartition(":")
    low, comma, high = bounds.partition(",")
    try:
        lo, hi = float(low), float(high)
    except ValueError:
        lo = hi = math.nan
    if not comma or not (math.isfinite(lo) and math.isfinite(hi)):
        raise argparse.ArgumentTypeError(f"expected [NAME:]LO,HI with finite LO, HI, got {text!r}")
    if lo > hi:
        raise argparse.ArgumentTypeError(f"LO must not exceed HI in {text!r}")
    if sep and not name:
        raise argparse.ArgumentTypeError(f"empty input name in {text!r}")
    return (name if sep else None), ValueRange(lo, hi)


def _dim(text: str) -> tuple[str, int]:
    name, sep, size = text.partition("=")
    if not sep or not name or not size.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE, got {text!r}")
    return name, int(size)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of at least 0, got {text!r}")
    return value


def add_options(parser: argparse.ArgumentParser) -> None:
    """The comparison's options, shared by ``lowering.verify`` and ``onnx-lower --verify``."""
    group = parser.add_argument_group("comparison options (onnx-lower: with --verify)")
    source = group.add_mutually_exclusive_group()
    source.add_argument(
        "--inputs",
        metavar="FILE.npz",
        help="run on these inputs instead of synthesized ones (one or several runs)",
    )
    source.add_argument(
        "--runs",
        type=_positive,
        metavar="K",
        help=f"the first K runs of the schedule, cycling past its end "
        f"(default: all {len(DEFAULT_SCHEDULE)}; -v prints it)",
    )
    group.add_argument("--seed", type=int, help="seed of the first run (default 0)")
    group.add_argument(
        "--rtol",
        type=_tolerance,
        help=f"float32 (default {RTOL}); given, float64 too (default: 2**24 ulp)",
    )
    group.add_argument(
        "--atol",
        type=_tolerance,
        help=f"float32 (default {ATOL}); given, float64 too (default: 2**24 ulp)",
    )
    group.add_argument(
        "--ulps",
        type=_positive,
        metavar="K",
        help=f"float16, bfloat16, float8: K units in the last place (default {ULPS})",
    )
    group.add_argument(
        "--dim",
        type=_dim,
        action="append",
        metavar="NAME=SIZE",
        help="fix a symbolic dim everywhere (repeatable)",
    )
    group.add_argument(
        "--val-range",
        type=parse_val_range,
        action="append",
        metavar="[NAME:]LO,HI",
        help="synthesize the values of input NAME (of every numeric input without NAME) "
        "in [LO, HI] (repeatable)",
    )
    group.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help=f"the least time one run of a model is given (default {TIMEOUT:g}); a run of B "
        f"gets {TIME_SCALE} times A's time on the same inputs when that is more, and "
        "past its limit it is stopped and a mismatch",
    )
    group.add_argument(
        "--save-inputs",
        metavar="FILE.npz",
        help="write every run's inputs to FILE.npz, for --inputs",
    )
    group.add_argument(
        "--replay-dir",
        metavar="DIR",
        help="on a mismatch some inputs cause, write the first failing run's inputs to a new "
        "verify-runK-*.npz in DIR (default: the temporary folder, $TMPDIR or /tmp), for "
        "--inputs; none when B cannot take A's inputs or fails on every input alike",
    )


def compare_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`compare`'s keyword arguments from options that :func:`add_options` added."""
    from lowering.verify.runtime import verify_runtime

    return {
        "inputs": args.inputs,
        "runs": args.runs,
        "seed": 0 if args.seed is None else args.seed,
        "rtol": args.rtol,
        "atol": args.atol,
        "ulps": ULPS if args.ulps is None else args.ulps,
        "dims": dict(args.dim or []),
        "val_ranges": dict(args.val_range or []),
        "save_inputs": args.save_inputs,
        "save_failing": True if args.replay_dir is None else args.replay_dir,
        "show_schedule": bool(getattr(args, "verbose", False)),
        "runtime": verify_runtime(getattr(args, "runtime", None)),
        "timeout": TIMEOUT if args.timeout is None else args.timeout,
    }


#: The comparison options :func:`add_options` adds, by flag (every one defaults to None).
COMPARISON_FLAGS = {
    "--inputs": "inputs",
    "--runs": "runs",
    "--seed": "seed",
    "--rtol": "rtol",
    "--atol": "atol",
    "--ulps": "ulps",
    "--dim": "dim",
    "--val-range": "val_range",
    "--timeout": "timeout",
    "--save-inputs": "save_inputs",
    "--replay-dir": "replay_dir",
}


def given_options(args: argparse.Namespace) -> list[str]:
    """The comparison options given on the command line (``onnx-lower`` refuses them
    without ``--verify``: they would change nothing, silently)."""
    return [flag for flag, dest in COMPARISON_FLAGS.items() if getattr(args, dest) is not None]


def replay_dir_problem(args: argparse.Namespace) -> str | None:
    """Why ``--replay-dir`` cannot be used: no such folder, or not writable."""
    import os

    folder = args.replay_dir
    if folder is None:
        return None
    if not os.path.isdir(folder):
        return f"--replay-dir {folder}: no such folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--replay-dir {folder}: cannot write to the folder"
    return None


def joined_values(argv: Sequence[str]) -> list[str]:
    """``--val-range -1,1`` as ``--val-range=-1,1``: argparse takes a value that
    starts with '-' (and is no plain negative number) for an option."""
    joined: list[str] = []
    pending = False
    for token in argv:
        if pending and token.startswith("-"):
            joined[-1] += f"={token}"
        else:
            joined.append(token)
        pending = token == "--val-range"
    return joined


#: The end of ``onnx-verify --help``: the exit codes and an example (docs/verify.md).
EPILOG = """\
exit codes:
  0    every output matches (runs where A itself fails are listed, not counted)
  1    a mismatch on some run, or B cannot be read, loaded or run where A runs
  2    usage, or inputs that cannot be used (--inputs unreadable, an input
       missing, a dtype that would change values)
  3    could not compare: A itself cannot be loaded or run (or only on empty
       inputs)
  130  interrupted (Ctrl-C)

examples:
  onnx-lower examples/torch_atleast_2d.onnx out.onnx
  onnx-verify examples/torch_atleast_2d.onnx out.onnx --runs 8
  onnx-verify examples/torch_atleast_2d.onnx out.onnx --inputs FILE.npz
  (the last replays the inputs a mismatch saved: the table names FILE.npz)
"""


def main(argv: list[str] | None = None) -> int:
    """``onnx-verify``: prints as ``onnx-lower --verify`` does, everything on
    stderr: the table (not with -q on a match), then the verdict."""
    from lowering import console

    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback
        return console.interrupted_verify()


def _main(argv: list[str] | None) -> int:
    from lowering import __version__
    from lowering.console import say

    parser = argparse.ArgumentParser(
        prog="onnx-verify",
        description="Run two models on the same inputs and compare every output\n"
        "(also: python -m lowering.verify).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("a", metavar="A.onnx", help="the reference, run in onnxruntime")
    parser.add_argument("b", metavar="B.onnx", help="the model to check, e.g. a lowering")
    parser.add_argument(
        "--runtime",
        default="onnxruntime",
        metavar="{" + ",".join(VERIFY_RUNTIMES) + "}[:RELEASE]",
        help="run B in this runtime (default onnxruntime), or in one release of it "
        "(openvino:2024.6; iree: its newest), in a venv that scripts/runtime_releases.py "
        "builds; A runs in onnxruntime",
    )
    add_options(parser)
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument(
        "-v", "--verbose", action="store_true", help="print the schedule: every run and its fate"
    )
    noise.add_argument("-q", "--quiet", action="store_true", help="print nothing on a match")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(joined_values(sys.argv[1:] if argv is None else argv))
    # Only now: --help and --version import neither onnx nor numpy (issue 37).
    from lowering.verify.comparison import compare
    from lowering.verify.runtime import known_runtime, missing_runtime

    problem = missing_runtime(args.runtime, who=parser.prog) or replay_dir_problem(args)
    if problem is None and not known_runtime(args.runtime):
        problem = f"--runtime must be one of {', '.join(VERIFY_RUNTIMES)}, not {args.runtime!r}"
    if problem is not None:
        parser.error(problem)
    report = compare(args.a, args.b, **compare_kwargs(args))
    if report.status == BAD_INPUTS:
        say(f"{parser.prog}: error: {report.input_error}")
        return report.exit_code
    if not args.quiet or report.status != MATCH:
        say(report.table())
        say(summary(report, args.a, args.b))
    return report.exit_code
