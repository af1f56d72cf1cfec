"""The schedule: the runs synthesized when no inputs are given, each aimed at an edge.

A :class:`RunSpec` is one run: its sequence length, how its dims
(:data:`DIM_MODES`, drawn by :func:`dim_size`) and values
(:data:`VALUE_MODES`) are drawn, and which variations of what is fed it
makes. :data:`DEFAULT_SCHEDULE` is what ``-v`` prints; docs/verify.md says
which rewrite bug each entry is there to catch.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the schedule is read by --help, which imports no numpy
    from collections.abc import Sequence

    import numpy as np

DIM_MODES = {
    "random": "dims 1..4",
    "ones": "dims 1",
    "large": "dims 5..7",
    "zero": "dims 0",
    "primes": "prime dims",  # 2, 3, 5, 7, 11, 13
    "eights": "dims 8k",  # 8, 16, 24, 32: heads, tiles, vector widths
    # an element of unknown rank has rank 3 (4), every dim 2..4
    "rank3": "rank 3 where unknown, dims 2..4",
    "rank4": "rank 4 where unknown, dims 2..4",
    # one dim of each shape 65..130 (past 64 and int8), the rest 1..2
    "wide": "one dim 65..130",
    # the elements of a sequence all have one shape, dims 2..4
    "same": "elements of one shape, dims 2..4",
}
PRIMES = (2, 3, 5, 7, 11, 13)
EIGHTS = (8, 16, 24, 32)
VALUE_MODES = {
    "normal": "normal values",  # standard normal times 2; ints -9..9
    "zeros": "mostly zeros",  # 0.0 and -0.0, some +-1 and 0.5; ints 0, +-1
    # float32 1e3..1e6 (float16 1e3..2e4), one sign; ints that are data: beyond
    # int16 and near the type's limits (counts and sizes: 100..999)
    "large": "large values",
    "special": "NaN and +-inf",  # among normal values; ints min, max, 0, +-1
    # floats past 1e6 up to a tenth of the type's max (float16: its top binade)
    "huge": "huge values",
    # subnormals: most near the smallest normal (1/x finite), some a few ulps
    "tiny": "subnormal values",
    # a large mean and a spread of 1 (float32 2**14..; a one-pass variance cancels)
    "offset": "large mean, small spread",
    # floats at exact ties +-0.5, +-1.5, ...; strings that differ in case or spaces
    "ties": "ties at k + 0.5, strings in other case",
    # a whole element (a whole tensor) of -inf, NaN in every third element
    "masked": "whole elements of -inf or NaN",
}


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One synthesized run: the sequence length, how dims and values are drawn,
    and the variations of what is fed:

    - ``override``: graph inputs that are also initializers get other values
      (a rewrite must never fold them into constants);
    - ``absent``: optional inputs are fed as absent (present otherwise);
    - ``independent``: sequence inputs that no map ties together get lengths
      of their own (the first keeps ``length``, the others are longer);
    - ``shorter``: the same, shorter than the first.
    """

    length: int
    dims: str = "random"
    values: str = "normal"
    override: bool = False
    absent: bool = False
    independent: bool = False
    shorter: bool = False

    def describe(self) -> str:
        text = f"length {self.length}, {DIM_MODES[self.dims]}, {VALUE_MODES[self.values]}"
        extras = [
            what
            for flag, what in (
                (self.override, "initializers overridden"),
                (self.absent, "optional inputs absent"),
                (self.independent, "untied sequences of their own lengths"),
                (self.shorter, "untied sequences shorter"),
            )
            if flag
        ]
        return ", ".join([text, *extras])


# Each entry is there for an edge a rewrite can get wrong: the empty and the
# single-element sequence, lengths past 4 and past 8, 6 and 7, a prime above
# 10, and lengths past every limit of the tool (--max-unroll's default 16:
# 17, 33) for a rewrite that unrolls, caps or special-cases lengths; dims of
# 0 (empty elements), 1 (broadcasting, squeezes), 5 and more, primes, and
# multiples of 8 and 16 (a body defined only there, such as attention
# heads); zeros and signed zeros, large values (clipping, overflow in a
# narrower type, an int64 body computed in int32) and NaN/inf; initializers
# fed other values, optional inputs absent, and independent sequences of
# different lengths.
DEFAULT_SCHEDULE: tuple[RunSpec, ...] = (
    RunSpec(3),
    RunSpec(0),
    RunSpec(1, "ones"),
    RunSpec(2, "random", "zeros", override=True),
    RunSpec(5, "large", absent=True),
    RunSpec(4, "ones", "large", independent=True),
    RunSpec(8, "random", "special"),
    RunSpec(2, "large", "large", override=True, absent=True),
    RunSpec(9, "ones", "zeros"),
    RunSpec(1, "large", "special", independent=True),
    RunSpec(6, "zero"),
    RunSpec(7, "primes", "large", override=True),
    RunSpec(17, "eights"),
    RunSpec(13, "primes", "special", absent=True, independent=True),
    RunSpec(33, "ones", "large"),
    RunSpec(3, "eights", "large", independent=True),
    RunSpec(2, "zero", "special", override=True),
    # issue 35: the values and shapes the runs above never drew
    RunSpec(2, "random", "huge"),
    RunSpec(3, "large", "tiny"),
    RunSpec(2, "large", "offset"),
    RunSpec(3, "rank3", "ties"),
    RunSpec(3, "rank4", "masked"),
    RunSpec(2, "wide"),
    RunSpec(130, "ones"),
    RunSpec(9, "same", shorter=True),
)


def schedule(runs: int | None = None) -> list[RunSpec]:
    """The first ``runs`` runs (all of the default schedule when None).

    Past its end the schedule starts over; each run draws from its own seed,
    so the repeats bring new values and sizes.
    """
    count = len(DEFAULT_SCHEDULE) if runs is None else runs
    return [DEFAULT_SCHEDULE[i % len(DEFAULT_SCHEDULE)] for i in range(count)]


#: The plain form of each kind of input a run draws: when A rejects a run's
#: inputs, the run is drawn again with one kind put back to its plain form at
#: a time (so that one kind the model rejects does not hide the others the run
#: draws), then with all of them.
PLAIN: tuple[dict[str, object], ...] = (
    {"values": "normal"},
    {"dims": "random"},
    {"independent": False, "shorter": False},
    {"absent": False},
    {"override": False},
)
#: How many other lengths a run A rejects is tried at (the nearest A took).
OTHER_LENGTHS = 2


def fallbacks(spec: RunSpec, lengths: Sequence[int] = ()) -> list[RunSpec]:
    """The runs to try, in order, when A rejects ``spec``'s inputs.

    First each kind the run draws put back to its plain form (:data:`PLAIN`),
    one at a time and then all, keeping its length; then, when the run draws
    any kind beyond its length, the run as it is at the lengths A took
    (``lengths``, the nearest :data:`OTHER_LENGTHS` first; never 0, which
    holds no value or dim), then all plain at the nearest. A plain run (the
    empty sequence of run 1) is not drawn at another length: it would only
    repeat another run.
    """
    tried = [spec]

    def add(other: RunSpec) -> None:
        if other not in tried:
            tried.append(other)

    plain = spec
    for change in PLAIN:
        add(dataclasses.replace(spec, **change))  # type: ignore[arg-type]
        plain = dataclasses.replace(plain, **change)  # type: ignore[arg-type]
    add(plain)
    if plain != spec:
        nearest = sorted(set(lengths) - {spec.length, 0}, key=lambda n: (abs(n - spec.length), n))
        for length in nearest[:OTHER_LENGTHS]:
            add(dataclasses.replace(spec, length=length))
        if nearest:
            add(dataclasses.replace(plain, length=nearest[0]))
    return tried[1:]


def dim_size(mode: str, rng: np.random.Generator, wide: bool = False) -> int:
    """One dim; in mode "wide", ``wide`` says whether this dim is one of the wide ones."""
    if mode == "wide":
        return int(rng.integers(65, 131)) if wide else int(rng.integers(1, 3))
    if mode in ("rank3", "rank4", "same"):
        return int(rng.integers(2, 5))
    if mode == "ones":
        return 1
    if mode == "zero":
        return 0
    if mode == "large":
        return int(rng.integers(5, 8))
    if mode == "primes":
        return int(rng.choice(PRIMES))
    if mode == "eights":
        return int(rng.choice(EIGHTS))
    return int(rng.integers(1, 5))
