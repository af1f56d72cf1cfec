"""The options of a lowering, typed and checked in one place.

:class:`Options` names, types and documents every option once.
``lowering.lower(model, options, **overrides)``, ``lowering.pipeline(...)``,
the CLI's flags and each pass's constructor take the same options, and every
value is checked here, by :class:`Options` or the check of that one option.
A bad value is an :class:`OptionError` (a ``ValueError``), which each surface
spells its own way: ``max_unroll must be ...`` from Python,
``--max-unroll must be ...`` from the command line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypedDict, get_args

import onnx

from lowering.defaults import DEFAULT_MAX_UNROLL, MIN_OPSET, RUNTIME_NAMES, STRATEGIES
from lowering.extras import EXTRAS, missing
from lowering.irutils.ir_versions import MIN_IR_VERSION
from lowering.runtimes.profiles import RUNTIMES, profile

#: How each map is lowered: "auto" picks the fastest correct form, "loop" the general one.
Strategy = Literal["auto", "loop"]
#: The runtime the output is for (:mod:`lowering.runtimes.profiles`).
RuntimeName = Literal[
    "onnxruntime", "openvino", "tract", "mnn", "tvm", "tinygrad", "iree", "generic"
]

assert get_args(Strategy) == STRATEGIES, "Strategy lists lowering.defaults.STRATEGIES"
assert set(get_args(RuntimeName)) == set(RUNTIMES), "RuntimeName lists every runtime"
assert tuple(RUNTIMES) == RUNTIME_NAMES, "lowering.defaults names every runtime, in order"


class OptionError(ValueError):
    """An option given a value it cannot take.

    Attributes:
        option: The option's Python name ("max_unroll").
        requirement: What it must be ("be an int of at least 0").
        value: What it was given.
    """

    def __init__(self, option: str, requirement: str, value: object) -> None:
        self.option, self.requirement, self.value = option, requirement, value
        super().__init__(self.spelled(option))

    def spelled(self, name: str) -> str:
        """The message with the option named ``name`` (a flag, for the CLI)."""
        return f"{name} must {self.requirement}, not {self.value!r}"

    @property
    def flag(self) -> str:
        """The message as the command line says it."""
        return self.spelled("--" + self.option.replace("_", "-"))


class MissingExtraError(OptionError, ImportError):
    """An option whose extra is not installed (``optimize`` without onnxscript):
    a usage error, exit 2, naming what to install (:mod:`lowering.extras`).
    Also an ``ImportError``, which is what it is to a caller that catches one."""

    def __init__(self, extra: str, who: str | None = None) -> None:
        self.extra = extra
        super().__init__(extra, f"have {EXTRAS[extra][0]} installed", True)
        self.args = (self.spelled(who or f"{extra}=True"),)

    def spelled(self, name: str) -> str:
        module, others = EXTRAS[self.extra]
        # The extra is not on any index: the package itself, or the extra from a checkout.
        builds = f" (or any build of it: {others})" if others else ""
        return (
            f"{name} needs {module}: pip install {module}{builds}; "
            f"from a checkout, pip install -e '.[{self.extra}]'"
        )


class InputShapeError(OptionError):
    """A fixed input shape the model contradicts, or an input it does not have
    (:mod:`lowering.passes.fix_input_shapes`): a usage error, exit 2, found
    once the model is read."""

    def __init__(self, name: str, dims: tuple[int, ...], problem: str) -> None:
        self.name, self.dims, self.problem = name, dims, problem
        super().__init__("input_shapes", problem, {name: dims})

    def spelled(self, name: str) -> str:
        flag = name.startswith("--")
        given = f"{self.name}:{','.join(map(str, self.dims))}" if flag else f"{self.name!r}"
        return f"{'--input-shape' if flag else name} {given}: {self.problem}"


def spelled_shape(dims: Iterable[object]) -> str:
    """``[T,4]``: a shape as ONNX text writes it (``?`` for an unknown dim)."""
    named = [getattr(d, "value", d) for d in dims]  # an onnx_ir SymbolicDim: its name, if any
    return "[" + ",".join("?" if d is None else str(d) for d in named) + "]"


def check_input_shapes(input_shapes: object) -> dict[str, tuple[int, ...]] | None:
    """``{"x": (5, 4)}``: input names to dims, each a whole number of at least 0."""
    if input_shapes is None:
        return None
    if not isinstance(input_shapes, Mapping) or not all(
        _names_dims(name, dims) for name, dims in input_shapes.items()
    ):
        raise OptionError("input_shapes", "map input names to dims", input_shapes)
    checked = {name: tuple(dims) for name, dims in input_shapes.items()}
    for dims in checked.values():
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
            raise OptionError(
                "input_shapes", "give whole numbers of at least 0 as dims", input_shapes
            )
    return checked or None


def _names_dims(name: object, dims: object) -> bool:
    """A non-empty name, and dims that are a collection (not a string) to read."""
    if not isinstance(name, str) or not name:
        return False
    return not isinstance(dims, (str, bytes)) and isinstance(dims, Iterable)


def check_extra(extra: str, who: str | None = None) -> None:
    """Raise :class:`MissingExtraError` unless ``extra``'s module can be imported;
    ``who`` is what needs it (default ``extra=True``)."""
    if missing(extra):
        raise MissingExtraError(extra, who)


def check_strategy(strategy: object) -> Strategy:
    if strategy not in STRATEGIES:
        raise OptionError("strategy", f"be one of {', '.join(STRATEGIES)}", strategy)
    return strategy  # type: ignore[return-value]


def check_max_unroll(max_unroll: object) -> int:
    if isinstance(max_unroll, bool) or not isinstance(max_unroll, int) or max_unroll < 0:
        raise OptionError("max_unroll", "be an int of at least 0", max_unroll)
    return max_unroll


def check_runtime(runtime: object) -> RuntimeName:
    """A profile's name, or a runtime's with a release (``openvino:2024.6``)."""
    if not isinstance(runtime, str):
        raise OptionError("runtime", f"be one of {', '.join(RUNTIMES)}", runtime)
    try:
        profile(runtime)
    except ValueError as error:
        raise OptionError("runtime", str(error), runtime) from None
    return runtime  # type: ignore[return-value]


def check_target_opset(target_opset: object) -> int | None:
    if target_opset is None:
        return None
    highest = onnx.defs.onnx_opset_version()
    if (
        isinstance(target_opset, bool)
        or not isinstance(target_opset, int)
        or not MIN_OPSET <= target_opset <= highest
    ):
        raise OptionError(
            "target_opset",
            f"be from {MIN_OPSET} to {highest} (the newest opset the installed onnx "
            f"{onnx.__version__} knows)",
            target_opset,
        )
    return target_opset


def check_ir_version(ir_version: object) -> int | None:
    if ir_version is None:
        return None
    if (
        isinstance(ir_version, bool)
        or not isinstance(ir_version, int)
        or not MIN_IR_VERSION <= ir_version <= onnx.IR_VERSION
    ):
        raise OptionError(
            "ir_version",
            f"be from {MIN_IR_VERSION} to {onnx.IR_VERSION} (the newest IR version the "
            f"installed onnx {onnx.__version__} knows)",
            ir_version,
        )
    return ir_version


def check_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise OptionError(name, "be True or False", value)
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """Every option of a lowering, named, typed and documented here only.

    :func:`lowering.lower`, ``lower_in_place``, ``lower_with_report`` and
    :func:`lowering.pipeline` take one (``options=``) and each field as a
    keyword that overrides it (:func:`resolved`); the command line's flags
    are the same options. Checked when made: a bad value raises
    :class:`OptionError`, a misspelt option ``TypeError``, before any work.

    Attributes:
        normalize_inserts: Put every SequenceInsert position into canonical
            form after the maps (:mod:`lowering.passes.normalize_inserts`).
        strategy: "auto" picks, for each map, the first form that fits:
            vectorize (the body once on the stacked elements, no loop),
            unroll (a static length of at most ``max_unroll``), scan
            (split -> map -> concat), uniform (a Loop with scan outputs where
            every output element has one shape: O(n)), and the general
            Loop + SequenceInsert form elsewhere (docs/strategies.md); "loop"
            forces the general form.
        max_unroll: The longest static map "auto" unrolls.
        runtime: The runtime the output is for: where a loop is unavoidable
            it picks a form that runtime runs (a Scan for "tract", a Loop
            with scan outputs for "mnn"), unrolls static maps of any length
            for runtimes with no loop ("tvm", "tinygrad", "iree", "generic"),
            and refuses (LoweringError) a map it can run in no form. A
            release may follow a colon (``openvino:2024.6``).
        optimize: Fold constants afterwards with onnxscript's optimizer (the
            ``optimize`` extra).
        target_opset: Declare this default-domain opset (older or newer),
            then the lowest IR version the content allows.
        ir_version: Declare this IR version instead (LoweringError if the
            content needs a higher one). Without it or ``target_opset``, the
            output keeps the input's IR version.
        keep_originals: Keep a copy of each rewritten node, for
            :meth:`lowering.Rewrite.before` (the command line's ``-v``).
        input_shapes: ``{"x": (5, 4)}``: fix the dims of those graph inputs
            first (the elements' of a sequence input), so the proof and the
            form choice use them and the output's inputs declare them
            (:mod:`lowering.passes.fix_input_shapes`); a name that is no
            input, or dims that contradict a declared rank or static dim,
            raise :class:`InputShapeError`.
    """

    normalize_inserts: bool = True
    strategy: Strategy = "auto"
    max_unroll: int = DEFAULT_MAX_UNROLL
    runtime: RuntimeName = "onnxruntime"
    optimize: bool = False
    target_opset: int | None = None
    ir_version: int | None = None
    keep_originals: bool = False
    input_shapes: Mapping[str, tuple[int, ...]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_shapes", check_input_shapes(self.input_shapes))
        check_runtime(self.runtime)
        check_strategy(self.strategy)
        check_max_unroll(self.max_unroll)
        check_target_opset(self.target_opset)
        check_ir_version(self.ir_version)
        for name in ("normalize_inserts", "optimize", "keep_originals"):
            check_flag(name, getattr(self, name))
        if self.optimize:
            check_extra("optimize")


class OptionValues(TypedDict, total=False):
    """:class:`Options`' fields as keywords (``lower(model, runtime="tract")``),
    for the type of ``**overrides``: the same names and types, so mypy and IDEs
    check them (tests/test_api.py holds the two equal; ``input_shapes`` takes
    any sequence of dims, which Options keeps as tuples); the docs are Options'."""

    normalize_inserts: bool
    strategy: Strategy
    max_unroll: int
    runtime: RuntimeName
    optimize: bool
    target_opset: int | None
    ir_version: int | None
    keep_originals: bool
    input_shapes: Mapping[str, Sequence[int]] | None


def resolved(options: Options | None, overrides: Mapping[str, Any], caller: str) -> Options:
    """``options`` (by default :class:`Options`'s defaults) with ``overrides``
    in place of its fields: what each entry point lowers with.

    Raises ``TypeError`` naming ``caller`` for an override that is no option
    or an ``options`` that is no :class:`Options`, and :class:`OptionError`
    for a bad value.
    """
    if options is not None and not isinstance(options, Options):
        raise TypeError(
            f"{caller}() expected options=lowering.Options(...), got {type(options).__name__}"
        )
    unknown = [name for name in overrides if name not in _FIELDS]
    if unknown:
        raise TypeError(
            f"{caller}() got an unexpected keyword argument {unknown[0]!r} "
            f"(the options are lowering.Options' fields: {', '.join(_FIELDS)})"
        )
    if options is None:
        return Options(**overrides)
    return dataclasses.replace(options, **overrides) if overrides else options


_FIELDS = tuple(field.name for field in dataclasses.fields(Options))
