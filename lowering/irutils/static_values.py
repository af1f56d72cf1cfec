"""The one constant evaluator: what an op computes from constants, one rule per op.

Exporters rarely write a SequenceInsert position, a Loop trip count or an
axes input as a bare constant: paddle2onnx writes ``Squeeze(Constant
int64[1])``, torch ``Reshape(Constant[1], Constant[-1])`` or ``Concat`` of
constants, and unrolled bodies test ``Equal(Size(Shape(e)), 0)``. This
module computes such values with numpy, by one rule per op, for every
caller. Positions, trip counts and an adapter's axes are read through every
op that has a rule, the caller saying only whether declared shapes count as
facts (``Shape``/``Size``, :data:`~lowering.irutils.op_facts.SHAPE_READING_OPS`);
unrolled copies fold the tests a body makes of its element
(:mod:`lowering.irutils.static_fold`)::

    Constant / initializer (not a graph input)   -> its tensor (small ones, unless asked)
    Identity(s)                                  -> s
    Cast<to>(s), CastLike(s, like)               -> s cast exactly, or nothing (below)
    Squeeze(s[, axes]), Unsqueeze(s, axes)       -> s without / with those size-1 axes
    Reshape(s, shape)                            -> s reshaped (0 copies unless allowzero)
    Concat, Gather                               -> of constants
    Shape(x), Size(x)                            -> x of static shape
    Add, Sub, Mul, Range, Min, Max               -> of integers of one type (wrapping;
                                                    a Range of step 0 or of more than
                                                    2**20 elements is not computed)
    Div                                          -> of integers: truncated, as onnxruntime
                                                    (not by 0, not the type's minimum by -1)
    Neg                                          -> of signed integers (not the minimum)
    Add, Sub, Mul, Div, Sqrt, Neg                -> of floats of one type (IEEE, below)
    Equal, Less(OrEqual), Greater(OrEqual)       -> of numbers of one type
    Not, And, Or, Xor                            -> of bools

Float arithmetic is folded only for the operations IEEE 754 rounds
correctly (+, -, *, /, sqrt), which numpy and onnxruntime both compute so,
bit for bit, infinities and NaNs included (float16 by way of float32, which
rounds twice to the same result for these five); not Pow, Exp, Erf or the
like, whose results are the library's. Integer Div truncates toward 0,
as onnxruntime computes it (C++ division; numpy floors, so the rule
corrects it); a division by 0, or of the type's minimum by -1, traps in
C++ and is left to the runtime, as is Neg of the minimum. Min and Max
of floats are not folded (runtimes differ on NaN).

One Cast rule: a cast is folded only where numpy computes what ONNX
defines, and never where it would wrap: integer or bool to any number
(an integer target must hold every value), float to float. Float to
integer (ONNX leaves out-of-range values and NaN undefined), strings,
bfloat16 and float8 stay casts, as does a narrowing cast that wraps:
runtimes need not agree. Anything else, or a malformed use (an axis out of
range, a squeezed axis of size other than 1), is not static: the value is
left to the runtime, whose error then stays in place. An initializer that
is also a graph input is never static: a caller may feed another value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array
from lowering.irutils.op_facts import SHAPE_READING_OPS, is_onnx_domain, is_onnx_op
from lowering.irutils.shapes import THROUGH_FIRST

#: Larger values stay computed at run time: a fold must not make the model grow,
#: and weights (maybe external data) are never read.
MAX_ELEMENTS = 1024
_MAX_DEPTH = 8
_MAX_RANGE = 1 << 20  # elements: a Range is counted before it is made

INTEGER_TYPES = frozenset(
    [
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
    ]
)
FLOAT_TYPES = frozenset([ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE])
NUMBER_TYPES = INTEGER_TYPES | FLOAT_TYPES | {ir.DataType.BOOL}
_BOOL = frozenset([ir.DataType.BOOL])
_SIGNED = frozenset([ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64])

Rule = Callable[[ir.Node, list[np.ndarray | None]], np.ndarray | None]


def small_constant(value: ir.Value | None, limit: int | None = MAX_ELEMENTS) -> np.ndarray | None:
    """The value of a constant of at most ``limit`` elements (None: any), else None."""
    tensor = value.const_value if value is not None else None
    if limit is not None and tensor is not None and tensor.size > limit:
        return None
    array = constant_array(value)
    return array if array is None or limit is None or array.size <= limit else None


def evaluate_node(
    node: ir.Node, values: list[np.ndarray | None], limit: int | None = MAX_ELEMENTS
) -> np.ndarray | None:
    """What ``node`` computes from its inputs' ``values`` (None: not known), by its rule;
    None too for a result of more than ``limit`` elements."""
    rule = RULES.get(node.op_type)
    if rule is None or not is_onnx_domain(node.domain) or len(node.outputs) != 1:
        return None
    if any(isinstance(a, ir.Attr) and a.is_ref() for a in node.attributes.values()):
        return None
    try:
        result = rule(node, values)
    except (ValueError, IndexError, TypeError):
        return None  # a malformed use, an unknown type: left to the runtime
    if result is None:
        return None
    result = np.asarray(result)
    return result if limit is None or result.size <= limit else None


def evaluate(
    value: ir.Value | None,
    limit: int | None = MAX_ELEMENTS,
    *,
    shapes: bool = False,
    depth: int = 0,
) -> np.ndarray | None:
    """The value of ``value``: a constant, or computed from constants by the rules.

    ``limit``: the most elements a constant read or a value computed may have.
    ``shapes``: whether ``Shape``/``Size`` read declared shapes (the caller
    takes them as facts); without, they are not read.
    """
    constant = small_constant(value, limit)
    if constant is not None or value is None:
        return constant
    node = value.producer()
    if node is None or node.op_type not in RULES or depth > _MAX_DEPTH:
        return None
    if node.op_type in SHAPE_READING_OPS:
        if not shapes:
            return None
        values: list[np.ndarray | None] = [None] * len(node.inputs)
    else:
        values = [evaluate(v, limit, shapes=shapes, depth=depth + 1) for v in node.inputs]
    return evaluate_node(node, values, limit)


def static_array(value: ir.Value | None) -> np.ndarray | None:
    """A position's, trip count's or split's value, when known before the model runs.

    Any size: a split of 10,000 lengths is read whole.
    """
    return evaluate(value, limit=None)


def _identity(node: ir.Node, values) -> np.ndarray | None:
    return values[0]


def _castable(source: ir.DataType, target: ir.DataType) -> bool:
    exact = INTEGER_TYPES | _BOOL
    return (source in exact and target in NUMBER_TYPES) or (
        source in FLOAT_TYPES and target in FLOAT_TYPES
    )


def _cast_to(value: np.ndarray | None, target: ir.DataType) -> np.ndarray | None:
    if value is None or value.dtype == object:
        return None
    source = ir.DataType.from_numpy(value.dtype)
    if not _castable(source, target):
        return None
    dtype = target.numpy()
    if target in INTEGER_TYPES and source in INTEGER_TYPES and value.size:
        info = np.iinfo(dtype)  # compared as Python ints: uint64 against int64 limits
        if int(value.min()) < int(info.min) or int(value.max()) > int(info.max):
            return None  # would wrap: runtimes need not agree
    with np.errstate(over="ignore"):  # a float too large for float16 is inf, as in ONNX
        return value.astype(dtype)


def _cast(node: ir.Node, values) -> np.ndarray | None:
    to = node.attributes.get_int("to")
    return None if to is None else _cast_to(values[0], ir.DataType(to))


def _cast_like(node: ir.Node, values) -> np.ndarray | None:
    like = node.inputs[1] if len(node.inputs) > 1 else None
    if like is None or not isinstance(like.type, ir.TensorType):
        return None
    if like.type.dtype == ir.DataType.UNDEFINED:
        return None
    return _cast_to(values[0], like.type.dtype)


def _axes(node: ir.Node, values) -> list[int] | None:
    """The axes of a Squeeze or Unsqueeze, or None if it has none.

    Raises ValueError where they are given but not static.
    """
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = values[1]
        if axes is None or axes.ndim > 1:
            raise ValueError("axes not static")
        return [int(a) for a in axes.reshape(-1)]
    attr = node.attributes.get("axes")
    return None if attr is None else list(attr.as_ints())


def _normalized(axes: list[int], rank: int) -> list[int]:
    result = [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in result) or len(set(result)) != len(result):
        raise ValueError("bad axes")
    return result


def disputed_reading(node: ir.Node) -> str | None:
    """Why runtimes compute ``node`` two ways, or None when they agree.

    Two readings are known, each checked against onnxruntime and
    onnx.reference (which onnxscript's folder evaluates by):

    - ``Squeeze`` with axes that may be empty: ONNX (its shape inference and
      onnx.reference) squeezes no dim, onnxruntime's kernel every unit dim;
    - ``ReduceMean`` over a set that may be empty: onnxruntime gives 0,
      onnx.reference NaN (for integers, NaN cast: the type's minimum);
    - ``Slice`` with a negative step that may start and end before a dim
      of at least 1, or end at INT64_MAX or INT32_MAX: onnxruntime takes
      element 0 (for those ends, everything down to it), onnx.reference
      (numpy's slicing) nothing (:func:`_slice_proven_undisputed`).

    Such a node is never evaluated, here or by ``--optimize``: it is left as
    written (docs/decisions.md).
    """
    if is_onnx_op(node, "Squeeze"):
        return None if _axes_proven_given(node) else _DISPUTED["Squeeze"]
    if is_onnx_op(node, "ReduceMean"):
        return None if _reduces_a_proven_nonempty_set(node) else _DISPUTED["ReduceMean"]
    if is_onnx_op(node, "Slice"):
        return None if _slice_proven_undisputed(node) else _DISPUTED["Slice"]
    return None


_DISPUTED = {
    "Squeeze": "Squeeze with axes that may be empty: ONNX squeezes no dim, onnxruntime every unit dim",
    "ReduceMean": "ReduceMean over a set that may be empty: onnxruntime gives 0, ONNX's reference NaN",
    "Slice": (
        "Slice with a negative step from and to before the start, or to INT64_MAX/INT32_MAX:"
        " onnxruntime takes elements, ONNX's reference none"
    ),
}


def _slice_proven_undisputed(node: ir.Node) -> bool:
    """Whether no axis of a Slice (opset 10+: bounds as inputs) steps back
    from and to before its dim, or to :data:`~lowering.irutils.shapes.THROUGH_FIRST`.

    Slicing ``x[n]`` by a negative step, ONNX clamps the start to
    ``[0, n-1]`` and the end to ``[-1, n-1]``, as onnxruntime does; numpy,
    so onnx.reference, puts a start still below 0 at -1 (nothing), and
    onnxruntime reads an end of INT64_MAX or INT32_MAX as "down to element
    0", where ONNX and numpy clamp it to ``n-1``. Elsewhere they agree
    (checked over dims 0..3 and int64 and int32 bounds and steps from the
    type's minimum to its maximum, in ``tests/test_disputed_readings.py``)::

        Slice(x[1], start -2**40, end -4, step -1)   onnxruntime [x0], numpy []
        Slice(x[3], start 0, end INT64_MAX, step -1) onnxruntime [x0], numpy []

    Without steps (all 1) there is nothing to dispute; with steps, each
    negative one needs its start and end known, and, when both are below
    -1, the dim it slices known (a dim of 0 is not disputed: nothing to take).
    """
    if len(node.inputs) < 5 or node.inputs[4] is None:
        return True  # every step 1 (Slice-1 has none either)
    starts, ends, axes, steps = (static_array(v) for v in node.inputs[1:5])
    if steps is None:
        return False
    steps = steps.reshape(-1)
    backward = [i for i, step in enumerate(steps) if step < 0]
    if not backward:
        return True
    if starts is None or ends is None or not starts.size == ends.size == steps.size:
        return False
    if node.inputs[3] is None:
        axes = np.arange(steps.size)
    shape = _declared_or_constant_shape(node.inputs[0])
    for i in backward:
        start, end = int(starts.reshape(-1)[i]), int(ends.reshape(-1)[i])
        before = max(start, end) < -1  # both before a dim of 1, maybe of more
        if end not in THROUGH_FIRST and not before:
            continue
        dim = _sliced_dim(shape, axes, i)
        if dim is None or (dim >= 1 and (end in THROUGH_FIRST or max(start, end) < -dim)):
            return False
    return True


def _sliced_dim(shape: ir.Shape | None, axes: np.ndarray | None, i: int) -> int | None:
    """The static dim a Slice's ``i``-th axis slices, None if not known."""
    if shape is None or axes is None or axes.size <= i:
        return None
    axis = int(axes.reshape(-1)[i])
    if not -shape.rank() <= axis < shape.rank():
        return None
    dim = shape[axis]
    return dim if isinstance(dim, int) else None


def _axes_proven_given(node: ir.Node) -> bool:
    """A Squeeze's axes: absent (every unit dim, as all agree), or proven non-empty."""
    axes = node.inputs[1] if len(node.inputs) > 1 else None
    if axes is None:
        attribute = node.attributes.get("axes")
        return attribute is None or len(attribute.as_ints()) > 0
    known = static_array(axes)
    if known is not None:
        return known.size > 0
    shape = axes.shape
    return shape is not None and shape.rank() == 1 and isinstance(shape[0], int) and shape[0] > 0


def _declared_or_constant_shape(value: ir.Value | None) -> ir.Shape | None:
    """``value``'s shape as declared, or a constant's (its data is not read)."""
    if value is None:
        return None
    if value.shape is not None:
        return value.shape
    tensor = value.const_value
    producer = value.producer()
    if tensor is None and producer is not None and is_onnx_op(producer, "Constant"):
        attribute = producer.attributes.get("value")
        if attribute is not None and attribute.type == ir.AttributeType.TENSOR:
            tensor = attribute.value
    return None if tensor is None else ir.Shape(tensor.shape.numpy())


def _reduces_a_proven_nonempty_set(node: ir.Node) -> bool:
    """Whether every reduced dim of a Reduce node's data is a static dim of at least 1
    (or it reduces nothing: empty axes with noop_with_empty_axes)."""
    shape = _declared_or_constant_shape(node.inputs[0] if node.inputs else None)
    if shape is None:
        return False
    attribute = node.attributes.get("axes")
    if attribute is not None:
        axes: list[int] | None = list(attribute.as_ints())
    elif len(node.inputs) > 1 and node.inputs[1] is not None:
        known = static_array(node.inputs[1])
        if known is None:
            return False
        axes = [int(a) for a in known.reshape(-1)]
    else:
        axes = []
    noop = node.attributes.get("noop_with_empty_axes")
    if not axes and noop is not None and noop.as_int() == 1:
        return True
    if shape.rank() == 0:
        return True  # a scalar's one element
    reduced = range(shape.rank()) if not axes else [a % shape.rank() for a in axes]
    dims = [shape[a] for a in reduced]
    return all(isinstance(d, int) and d > 0 for d in dims)


def _squeeze(node: ir.Node, values) -> np.ndarray | None:
    source = values[0]
    if source is None:
        return None
    axes = _axes(node, values)
    if axes == []:
        return None  # disputed: see disputed_reading
    if axes is None:
        return source.reshape([d for d in source.shape if d != 1])
    axes = _normalized(axes, source.ndim)
    if any(source.shape[a] != 1 for a in axes):
        return None
    return source.reshape([d for i, d in enumerate(source.shape) if i not in axes])


def _unsqueeze(node: ir.Node, values) -> np.ndarray | None:
    source = values[0]
    axes = _axes(node, values)
    if source is None or not axes:
        return None
    rank = source.ndim + len(axes)
    new = _normalized(axes, rank)
    dims = iter(source.shape)
    return source.reshape([1 if i in new else next(dims) for i in range(rank)])


def _reshape(node: ir.Node, values) -> np.ndarray | None:
    source, shape = values[0], values[1] if len(values) > 1 else None
    if source is None or shape is None or shape.ndim != 1 or shape.dtype != np.int64:
        return None
    allow_zero = node.attributes.get_int("allowzero", 0)
    dims = []
    for i, d in enumerate(int(d) for d in shape):
        if d == 0 and not allow_zero:
            d = source.shape[i]  # IndexError past the input's rank: not static
        dims.append(d)
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        return None
    return source.reshape(dims)


def _concat(node: ir.Node, values) -> np.ndarray | None:
    if not values or any(v is None for v in values):
        return None
    axis = node.attributes.get_int("axis")
    return None if axis is None else np.concatenate(values, axis=axis)


def _gather(node: ir.Node, values) -> np.ndarray | None:
    data, indices = values[0], values[1] if len(values) > 1 else None
    if data is None or indices is None or indices.dtype.kind not in "iu":
        return None
    return np.take(data, indices, axis=node.attributes.get_int("axis", 0))


def _static_shape(value: ir.Value | None) -> list[int] | None:
    if value is None or value.shape is None or not value.shape.is_static():
        return None
    return [d for d in value.shape if isinstance(d, int)]  # is_static(): all of them


def _shape(node: ir.Node, values) -> np.ndarray | None:
    dims = _static_shape(node.inputs[0])
    if dims is None:
        return None
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", len(dims))
    return np.array(dims[start:end], np.int64)  # Shape clamps start and end like a slice


def _size(node: ir.Node, values) -> np.ndarray | None:
    dims = _static_shape(node.inputs[0])
    return None if dims is None else np.array(int(np.prod(dims, dtype=np.int64)), np.int64)


def _of_types(types: frozenset, function: Callable[..., np.ndarray]) -> Rule:
    """A rule applying ``function`` to constant inputs of one dtype among ``types``."""

    def rule(node: ir.Node, values) -> np.ndarray | None:
        if not values or any(v is None or v.dtype == object for v in values):
            return None
        dtypes = {ir.DataType.from_numpy(v.dtype) for v in values}
        if len(dtypes) != 1 or not dtypes <= types:
            return None
        # Integer arithmetic wraps in ONNX runtimes too; floats follow IEEE.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            return np.asarray(function(*values))

    return rule


def _integer_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b truncated toward 0 (C++'s, onnxruntime's), where it does not trap."""
    if a.dtype.kind not in "iu":
        return np.divide(a, b)
    a, b = np.broadcast_arrays(a, b)
    if (b == 0).any():
        raise ValueError("division by zero: left to the runtime")
    if a.dtype.kind == "i" and ((a == np.iinfo(a.dtype).min) & (b == -1)).any():
        raise ValueError("overflows: left to the runtime")
    quotient = a // b
    inexact = (quotient * b != a) & ((a < 0) != (b < 0))
    return np.where(inexact, quotient + 1, quotient).astype(a.dtype)


def _negative(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "i" and (a == np.iinfo(a.dtype).min).any():
        raise ValueError("overflows: left to the runtime")
    return np.negative(a)


def _range(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    if delta.item() == 0:
        raise ValueError("a delta of 0: left to the runtime, which refuses it")
    if (limit.item() - start.item()) / delta.item() > _MAX_RANGE:
        raise ValueError("too long to compute before the model runs")
    return np.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)


RULES: dict[str, Rule] = {
    "Identity": _identity,
    "Cast": _cast,
    "CastLike": _cast_like,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Reshape": _reshape,
    "Concat": _concat,
    "Gather": _gather,
    "Shape": _shape,
    "Size": _size,
    "Add": _of_types(INTEGER_TYPES | FLOAT_TYPES, np.add),
    "Sub": _of_types(INTEGER_TYPES | FLOAT_TYPES, np.subtract),
    "Mul": _of_types(INTEGER_TYPES | FLOAT_TYPES, np.multiply),
    "Div": _of_types(INTEGER_TYPES | FLOAT_TYPES, _integer_div),
    "Neg": _of_types(_SIGNED | FLOAT_TYPES, _negative),
    "Min": _of_types(INTEGER_TYPES, lambda *a: functools.reduce(np.minimum, a)),
    "Max": _of_types(INTEGER_TYPES, lambda *a: functools.reduce(np.maximum, a)),
    "Sqrt": _of_types(FLOAT_TYPES, np.sqrt),
    "Range": _of_types(INTEGER_TYPES, _range),
    "Equal": _of_types(NUMBER_TYPES, np.equal),
    "Less": _of_types(NUMBER_TYPES, np.less),
    "LessOrEqual": _of_types(NUMBER_TYPES, np.less_equal),
    "Greater": _of_types(NUMBER_TYPES, np.greater),
    "GreaterOrEqual": _of_types(NUMBER_TYPES, np.greater_equal),
    "Not": _of_types(_BOOL, np.logical_not),
    "And": _of_types(_BOOL, np.logical_and),
    "Or": _of_types(_BOOL, np.logical_or),
    "Xor": _of_types(_BOOL, np.logical_xor),
}

#: What a fold reads through, and the Constants it starts from: the chains a
#: caller removes once a fold leaves them unread.
FOLDABLE_OPS = frozenset({"Constant", *RULES})
