"""Check with onnxruntime that two models compute the same results.

``python -m lowering.verify A.onnx B.onnx`` (or ``onnx-verify A B``) runs
both models on the same inputs and compares every output, position by
position: the same name, the same kind, and for sequences the same length
and, element by element, the same dtype, shape and values (floats within
rtol/atol, NaN only where the other has NaN, infinities exactly, everything
else exactly). Each output is also checked against what its own model
declares: dtype, rank, static dims, and symbolic dims that agree with each
other and with the inputs. ``python -m lowering IN OUT --verify`` does the
same for a model and its lowering, with the same options (:func:`add_options`).
Python: :func:`compare` returns a :class:`Report`.

A is the reference. The exit codes say who is to blame:

- 1: a mismatch on some run, or B (the rewrite) cannot be read, loaded or
  run where A runs. A mismatch always wins over everything below.
- 2: usage, or inputs that cannot be used (``--inputs`` unreadable, missing
  an input, or of a dtype that cannot be converted without changing values).
- 3: no run could be compared, because A itself cannot be loaded or run,
  or runs only on empty inputs (which show nothing), or an output of A is
  random (differs between two runs of A) and nothing else differs.
- 0: otherwise. Runs where A fails are listed with onnxruntime's reason and
  not counted: a rewrite that handles an input the original rejects (an
  empty sequence into ConcatFromSequence) is not wrong.

Inputs come from ``--inputs FILE.npz`` or are synthesized from A's declared
input types by a schedule (:data:`DEFAULT_SCHEDULE`, printed with ``-v``)
built to hit the edges where rewrites break (docs/verify.md lists them):
sequence lengths 0 to 9, 13, 17, 33 and 130, untied sequences longer and
shorter; dims 0, 1, 5..7, primes, multiples of 8, one of 65..130, rank 3
and 4 where unknown; values normal, zero-heavy (with -0.0), large, huge,
subnormal, a large mean with a small spread, ties at k + 0.5, NaN and
+-inf, whole elements of -inf or NaN. A run whose inputs A rejects is drawn
again with one kind at a time put back to its plain form, then at another
length A took (:func:`~lowering.verify.runs.fallbacks`), before B runs
on it. ``--runs K`` takes the first K runs of the schedule,
cycling with new random values past its end. ``--val-range [NAME:]LO,HI``
keeps an input's values (every numeric input's, without NAME) inside
[LO, HI], for models that are only defined there.

Files: ``--save-inputs FILE.npz`` writes every run's inputs to FILE (the one
name the user gave). On a mismatch that inputs cause, the failing run's
inputs are written to a new file in ``--replay-dir DIR``, else the system's
temporary folder (``tempfile.mkstemp``, never an existing file), and the
path is printed, so ``--inputs PATH`` replays it; none where B cannot take
A's inputs (said first) or fails on every input alike.

In an npz file a tensor input ``X`` is the array ``X``; a sequence input
``S`` is the arrays ``S[0]``, ``S[1]``, ... in order, and an empty sequence
is the single key ``S[]`` (its array is ignored). A file of several runs
(what ``--save-inputs`` writes for more than one run) has the key
``__runs__`` listing the run numbers and the keys ``K/X``, ``K/S[0]``, ...
for run K. Arrays whose dtype differs from the declared one are converted
when no value changes (float64 to float32 rounds, with a note), and
refused otherwise.

The package, one module per idea (each named after it):

- :mod:`~lowering.verify.runs`: the schedule of synthesized runs;
- :mod:`~lowering.verify.ports`: a model's inputs and outputs, which ints
  are sizes, which sequences share a length;
- :mod:`~lowering.verify.values`: the contents of one synthesized array;
- :mod:`~lowering.verify.inputs`: every run's feeds, synthesized or given;
- :mod:`~lowering.verify.npz`: inputs files, read and written;
- :mod:`~lowering.verify.dtypes`: the ml_dtypes tables;
- :mod:`~lowering.verify.narrow`: how narrow-float outputs are read;
- :mod:`~lowering.verify.tolerance`: how close two values must be;
- :mod:`~lowering.verify.randomness`: random ops, and outputs random in A;
- :mod:`~lowering.verify.declared`: outputs against their declarations;
- :mod:`~lowering.verify.runtime`: where B runs;
- :mod:`~lowering.verify.comparison`: :func:`compare`, running A and B;
- :mod:`~lowering.verify.report`: the report, statuses and exit codes;
- :mod:`~lowering.verify.cli`: ``onnx-verify`` and the shared options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering import _lazy_names

# Imported lazily (PEP 562), as ``lowering`` is: ``onnx-lower --help`` reads
# this package's option parser (:mod:`.cli`), not the comparison.
if TYPE_CHECKING:
    from lowering.verify.cli import (
        add_options,
        compare_kwargs,
        joined_values,
        main,
        parse_val_range,
    )
    from lowering.verify.comparison import compare
    from lowering.verify.declared import blame_declarations, declaration_problems
    from lowering.verify.inputs import feed_sets, synthesize
    from lowering.verify.npz import RUNS_KEY, read_inputs, write_inputs
    from lowering.verify.ports import (
        SIZE_POSITIONS,
        Feeds,
        ModelLike,
        Port,
        model_ports,
        sequence_groups,
        sequence_offsets,
        size_inputs,
    )
    from lowering.verify.report import (
        BAD_INPUTS,
        COULD_NOT_COMPARE,
        EXIT_CODES,
        MATCH,
        MISMATCH,
        CannotCompare,
        InputsError,
        Report,
        Row,
        RunRecord,
        summary,
    )
    from lowering.verify.runs import DEFAULT_SCHEDULE, DIM_MODES, VALUE_MODES, RunSpec, schedule
    from lowering.verify.runtime import missing_runtime, verify_runtime
    from lowering.verify.settings import VERIFY_RUNTIMES
    from lowering.verify.tolerance import ATOL, NARROW_FLOATS, RTOL, ULPS, Tolerance, compare_value
    from lowering.verify.values import ValueRange

#: Where each public name lives.
_HOMES = {
    "add_options": "lowering.verify.cli",
    "compare_kwargs": "lowering.verify.cli",
    "joined_values": "lowering.verify.cli",
    "main": "lowering.verify.cli",
    "parse_val_range": "lowering.verify.cli",
    "compare": "lowering.verify.comparison",
    "blame_declarations": "lowering.verify.declared",
    "declaration_problems": "lowering.verify.declared",
    "feed_sets": "lowering.verify.inputs",
    "synthesize": "lowering.verify.inputs",
    "RUNS_KEY": "lowering.verify.npz",
    "read_inputs": "lowering.verify.npz",
    "write_inputs": "lowering.verify.npz",
    "SIZE_POSITIONS": "lowering.verify.ports",
    "Feeds": "lowering.verify.ports",
    "ModelLike": "lowering.verify.ports",
    "Port": "lowering.verify.ports",
    "model_ports": "lowering.verify.ports",
    "sequence_groups": "lowering.verify.ports",
    "sequence_offsets": "lowering.verify.ports",
    "size_inputs": "lowering.verify.ports",
    "BAD_INPUTS": "lowering.verify.report",
    "COULD_NOT_COMPARE": "lowering.verify.report",
    "EXIT_CODES": "lowering.verify.report",
    "MATCH": "lowering.verify.report",
    "MISMATCH": "lowering.verify.report",
    "CannotCompare": "lowering.verify.report",
    "InputsError": "lowering.verify.report",
    "Report": "lowering.verify.report",
    "Row": "lowering.verify.report",
    "RunRecord": "lowering.verify.report",
    "summary": "lowering.verify.report",
    "DEFAULT_SCHEDULE": "lowering.verify.runs",
    "DIM_MODES": "lowering.verify.runs",
    "VALUE_MODES": "lowering.verify.runs",
    "RunSpec": "lowering.verify.runs",
    "schedule": "lowering.verify.runs",
    "VERIFY_RUNTIMES": "lowering.verify.settings",
    "missing_runtime": "lowering.verify.runtime",
    "verify_runtime": "lowering.verify.runtime",
    "ATOL": "lowering.verify.tolerance",
    "NARROW_FLOATS": "lowering.verify.tolerance",
    "RTOL": "lowering.verify.tolerance",
    "ULPS": "lowering.verify.tolerance",
    "Tolerance": "lowering.verify.tolerance",
    "compare_value": "lowering.verify.tolerance",
    "ValueRange": "lowering.verify.values",
}

__all__ = [
    "ATOL",
    "BAD_INPUTS",
    "COULD_NOT_COMPARE",
    "DEFAULT_SCHEDULE",
    "DIM_MODES",
    "EXIT_CODES",
    "MATCH",
    "MISMATCH",
    "NARROW_FLOATS",
    "RTOL",
    "RUNS_KEY",
    "SIZE_POSITIONS",
    "ULPS",
    "VALUE_MODES",
    "VERIFY_RUNTIMES",
    "CannotCompare",
    "Feeds",
    "InputsError",
    "ModelLike",
    "Port",
    "Report",
    "Row",
    "RunRecord",
    "RunSpec",
    "Tolerance",
    "ValueRange",
    "add_options",
    "blame_declarations",
    "compare",
    "compare_kwargs",
    "compare_value",
    "declaration_problems",
    "feed_sets",
    "joined_values",
    "main",
    "missing_runtime",
    "model_ports",
    "parse_val_range",
    "read_inputs",
    "schedule",
    "sequence_groups",
    "sequence_offsets",
    "size_inputs",
    "summary",
    "synthesize",
    "verify_runtime",
    "write_inputs",
]


__getattr__, __dir__ = _lazy_names(__name__, _HOMES)
