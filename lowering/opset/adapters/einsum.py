"""Einsum below 12, where ONNX gives it no function body: MatMul, ReduceSum, Mul.

The operands are contracted two at a time, left to right. Before each step,
a letter that no other operand and not the output has is summed away
(ReduceSum, keepdims=0); a letter whose dim is a static 1 is squeezed away
(Einsum broadcasts it, as numpy does: its one value stands for every index).
Then, for operands A and B, each letter is a *batch* letter (in A, B and what
is still needed: the output or a later operand), *contracted* (in A and B
only), *left* (A only) or *right* (B only)::

    A --Transpose--> [batch.., left.., contracted..] --Reshape--> [batch.., L, K] --.
                                                                                MatMul
    B --Transpose--> [batch.., contracted.., right..] --Reshape--> [batch.., K, R] --'
                                                                                  |
    [batch.., left.., right..] <--Reshape-- [batch.., L, R] <-----------------------'

A group of one letter needs no Reshape, an empty one an Unsqueeze (and a
Squeeze after): 'bhqd,bhkd->bhqk' is a Transpose and a MatMul. With no batch
letter the Reshape to [L, K] is a Flatten. With no
contracted letter the step is an outer product, a broadcasting Mul::

    A --Transpose, Unsqueeze--> [batch.., left.., 1..]  --.
                                                         Mul --> [batch.., left.., right..]
    B --Transpose, Unsqueeze--> [batch.., 1.., right..] --'

One operand is a ReduceSum and a Transpose; the last result is transposed to
the output's order. Why it is the same tensor:

* MatMul and Mul broadcast batch dims as Einsum does (a 1 against n); a
  contracted letter whose dims are not known to be equal is broadcast first
  (``Expand`` of each operand by the other's dims there), since MatMul does
  not broadcast its inner dims and Einsum does.
* A merged dim is a product of dims and may be 0 at run time, where
  Reshape-13 would copy the input's dim: the Reshapes are written as
  Reshape-14 with ``allowzero = 1`` and converted by the one adapter that
  knows when that matters (:func:`lowering.opset.adapters.shape.no_allowzero`).
* An empty contracted dim is a MatMul (or ReduceSum) over nothing: 0, as
  Einsum's sum is.
* '...' stands for the same number of dims in every operand (ONNX says so);
  its dims are letters of their own, broadcast like batch letters. Without
  '->' the output is '...' then the letters that appear once, in
  alphabetical order (of one case: mixed cases have no agreed order).

Refused by name: a letter repeated in one operand (a diagonal or a trace),
'...' in an operand and not in an explicit output, element types MatMul-9 or
ReduceSum-11 do not take (Einsum-12 takes 8- and 16-bit integers).
"""

from __future__ import annotations

import dataclasses
import math
import string
from collections.abc import Callable
from typing import NoReturn

import numpy as np
import onnx_ir as ir

from lowering.irutils.axes import axes_as_input
from lowering.opset.registry import Decline, expansion

# The element types MatMul-9, ReduceSum-11 and Mul-7 all take.
_TYPES = frozenset(
    [
        *(ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE),
        *(ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT32, ir.DataType.UINT64),
    ]
)
_INT64 = ir.DataType.INT64
_LETTERS = frozenset(string.ascii_letters)
# An ellipsis dim's label: not a letter, so never one of the equation's.
_ELLIPSIS = "."

Dim = int | ir.SymbolicDim | None


@dataclasses.dataclass
class _Term:
    """One value of the contraction and the letter of each of its dims."""

    value: ir.Value
    labels: list[str]
    dims: list[Dim]

    def dim(self, label: str) -> Dim:
        return self.dims[self.labels.index(label)]


def _parse_term(text: str) -> tuple[list[str], bool] | None:
    """The letters of one term, with None where '...' stands, and whether it has one."""
    if text.count("...") > 1:
        return None
    before, dots, after = text.partition("...")
    if not set(before + after) <= _LETTERS:
        return None
    return [*before, *([_ELLIPSIS] if dots else []), *after], bool(dots)


class _Equation:
    """An Einsum equation with its '...' spelt out as labels '.0', '.1', ..."""

    def __init__(self, equation: str, ranks: list[int], refuse: Callable[[str], NoReturn]) -> None:
        text = "".join(equation.split())
        left, arrow, right = text.partition("->")
        terms = left.split(",")
        if len(terms) != len(ranks):
            refuse(f"names {len(terms)} operands and the node has {len(ranks)}")
        parsed = [p for p in map(_parse_term, terms) if p is not None]
        result = _parse_term(right) if arrow else ([], False)
        if len(parsed) != len(terms) or result is None:
            refuse("is not an equation of letters, ',', '->' and '...'")
        dots = [f"{_ELLIPSIS}{i}" for i in range(_ellipsis_width(parsed, ranks, refuse))]
        self.inputs = [_spelt(labels, dots) for labels, _ in parsed]
        _refuse_repeats(self.inputs, right, refuse)
        seen = [label for labels in self.inputs for label in labels]
        if arrow:
            self.output = _explicit_output(result, dots, seen, refuse)
        else:
            self.output = dots + _implicit_letters(seen, refuse)


def _ellipsis_width(
    parsed: list[tuple[list[str], bool]], ranks: list[int], refuse: Callable[[str], NoReturn]
) -> int:
    """How many dims '...' stands for: the same in every operand that has it."""
    widths = set()
    for index, ((labels, dotted), rank) in enumerate(zip(parsed, ranks)):
        named = len(labels) - dotted
        if (rank < named) if dotted else (rank != named):
            refuse(f"names {named} dims of operand {index}, which has rank {rank}")
        if dotted:
            widths.add(rank - named)
    if len(widths) > 1:
        refuse("has '...' stand for different numbers of dims (ONNX asks for one)")
    return widths.pop() if widths else 0


def _spelt(labels: list[str], dots: list[str]) -> list[str]:
    """``labels`` with the '...' label replaced by the dims it stands for."""
    return [d for label in labels for d in (dots if label == _ELLIPSIS else [label])]


def _refuse_repeats(
    inputs: list[list[str]], output: str, refuse: Callable[[str], NoReturn]
) -> None:
    """A letter repeated in one operand is a diagonal (kept) or a trace (summed)."""
    for index, labels in enumerate(inputs):
        repeated = sorted({x for x in labels if labels.count(x) > 1})
        if repeated:
            kind = "a diagonal" if repeated[0] in output else "a trace"
            refuse(f"({kind}: {repeated[0]!r} repeats in operand {index})")


def _explicit_output(
    result: tuple[list[str], bool],
    dots: list[str],
    seen: list[str],
    refuse: Callable[[str], NoReturn],
) -> list[str]:
    """The labels after '->': each once, each in an operand, '...' kept if there is one."""
    output, dotted = result
    if dots and not dotted:
        refuse("sums over the dims '...' stands for (its output has no '...')")
    spelt = _spelt(output, dots)
    if len(set(spelt)) != len(spelt):
        refuse("repeats a letter in its output")
    missing = [x for x in spelt if x not in seen]
    if missing:
        refuse(f"has {missing[0]!r} in its output and in no operand")
    return spelt


def _implicit_letters(seen: list[str], refuse: Callable[[str], NoReturn]) -> list[str]:
    """Without '->': the letters that appear once, in alphabetical order."""
    once = sorted(x for x in set(seen) if seen.count(x) == 1 and x in _LETTERS)
    if any(x.isupper() for x in once) and any(x.islower() for x in once):
        refuse("has an implicit output of upper- and lower-case letters (no agreed order)")
    return once


def _same(a: Dim, b: Dim) -> bool:
    """Whether two dims are known equal: the same int, or the same named symbol."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is not None and b is not None and a.value is not None and a.value == b.value


def _broadcast(a: Dim, b: Dim) -> Dim:
    """The dim of a broadcast of ``a`` and ``b``, where it is known."""
    if a == 1:
        return b
    if b == 1 or _same(a, b):
        return a
    return None


@expansion("Einsum")
def matmul_and_reduce_sum(rw, node: ir.Node) -> None:
    """Einsum -> Transpose, ReduceSum, Reshape and MatMul (Mul for outer products)."""
    equation = node.attributes.get_string("equation", "")

    def refuse(why: str) -> NoReturn:
        raise Decline(f"Einsum {equation!r} {why}; it has no opset-{rw.target} form")

    operands, dtype, shapes = _operands(node, refuse)
    eq = _Equation(equation, [len(shape) for shape in shapes], refuse)
    build = _Builder(rw, dtype)
    terms = [_Term(x, labels, [*shape]) for x, labels, shape in zip(operands, eq.inputs, shapes)]
    result = _contract(build, [build.squeeze_ones(t) for t in terms], eq.output)
    rw.reroute(node.outputs[0], result.value)
    rw.remove(node)


def _operands(
    node: ir.Node, refuse: Callable[[str], NoReturn]
) -> tuple[list[ir.Value], ir.DataType, list[ir.Shape]]:
    """The operands, their one element type and their shapes: all must be known."""
    operands = [x for x in node.inputs if x is not None]
    if not operands or len(operands) != len(node.inputs):
        refuse("has a missing operand")
    dtypes = {x.dtype for x in operands}
    dtype = next(iter(dtypes))
    if len(dtypes) != 1 or dtype is None or dtype == ir.DataType.UNDEFINED:
        refuse("has operands of unknown or different element types")
    if dtype not in _TYPES:
        refuse(f"is on {dtype.name.lower()}, which MatMul-9 and ReduceSum-11 do not take")
    shapes = [x.shape for x in operands if x.shape is not None]
    if len(shapes) != len(operands):
        refuse("has an operand of unknown rank")
    return operands, dtype, shapes


def _contract(build: _Builder, terms: list[_Term], output: list[str]) -> _Term:
    """Sum away each term's own letters and contract the first two, until one term is left;
    then give it the output's letters, in the output's order."""
    while True:
        terms = _reduce_own(build, terms, output)
        if len(terms) == 1:
            break
        later = set(output).union(*(t.labels for t in terms[2:]))
        terms = [build.pair(terms[0], terms[1], later), *terms[2:]]
    result = terms[0]
    absent = [x for x in output if x not in result.labels]  # their dims were all 1
    if absent:
        result = build.unsqueeze(result, list(range(len(result.labels), len(output))), absent)
    return build.transpose(result, output)


def _reduce_own(build: _Builder, terms: list[_Term], output: list[str]) -> list[_Term]:
    """Each term with the letters no other term and not the output has summed away."""
    wanted = [set(output)] + [set(t.labels) for t in terms]
    reduced = []
    for index, term in enumerate(terms):
        elsewhere = set().union(*(w for j, w in enumerate(wanted) if j != index + 1))
        reduced.append(build.reduce(term, [x for x in term.labels if x not in elsewhere]))
    return reduced


class _Builder:
    """The nodes of one expansion, each output typed and shaped."""

    def __init__(self, rw, dtype: ir.DataType) -> None:
        self.rw = rw
        self.dtype = dtype
        self.shapes: dict[ir.Value, ir.Value] = {}

    def op(self, op_type, inputs, attributes=None, dims=None, dtype=None, version=None):
        made = self.rw.op(op_type, inputs, attributes, version=version)
        output = made.outputs[0]
        output.dtype = dtype or self.dtype
        if dims is not None:
            output.shape = ir.Shape(dims)
        return output

    def term(self, op_type, inputs, labels, dims, attributes=None, version=None) -> _Term:
        return _Term(self.op(op_type, inputs, attributes, dims, version=version), labels, dims)

    def with_axes(self, op_type, t: _Term, axes, labels, dims, attributes=None) -> _Term:
        if axes_as_input(op_type, self.rw.version):
            return self.term(op_type, [t.value, self.int64(axes)], labels, dims, attributes)
        return self.term(op_type, [t.value], labels, dims, {**(attributes or {}), "axes": axes})

    def int64(self, values) -> ir.Value:
        return self.rw.const(np.array(values, np.int64))

    def squeeze_ones(self, t: _Term) -> _Term:
        """Drop dims that are a static 1: Einsum broadcasts them."""
        axes = [i for i, d in enumerate(t.dims) if d == 1]
        if not axes:
            return t
        keep = [i for i in range(len(t.dims)) if i not in axes]
        labels, dims = [t.labels[i] for i in keep], [t.dims[i] for i in keep]
        return self.with_axes("Squeeze", t, axes, labels, dims)

    def reduce(self, t: _Term, labels: list[str]) -> _Term:
        if not labels:
            return t
        axes = [t.labels.index(x) for x in labels]
        keep = [i for i in range(len(t.labels)) if i not in axes]
        kept, dims = [t.labels[i] for i in keep], [t.dims[i] for i in keep]
        return self.with_axes("ReduceSum", t, axes, kept, dims, {"keepdims": 0})

    def transpose(self, t: _Term, order: list[str]) -> _Term:
        perm = [t.labels.index(x) for x in order]
        if perm == list(range(len(perm))):
            return t
        dims = [t.dims[i] for i in perm]
        return self.term("Transpose", [t.value], list(order), dims, {"perm": perm})

    def unsqueeze(self, t: _Term, axes: list[int], labels: list[str]) -> _Term:
        """Insert dims of 1 at ``axes`` (of the result), labelled ``labels``."""
        if not axes:
            return t
        new_labels, dims = list(t.labels), list(t.dims)
        for axis, label in zip(axes, labels):
            new_labels.insert(axis, label)
            dims.insert(axis, 1)
        return self.with_axes("Unsqueeze", t, axes, new_labels, dims)

    def shape_of(self, value: ir.Value) -> ir.Value:
        if value not in self.shapes:
            rank = len(value.shape) if value.shape is not None else None
            dims = [rank] if rank is not None else None
            self.shapes[value] = self.op("Shape", [value], dims=dims, dtype=_INT64)
        return self.shapes[value]

    def dims_vector(self, groups: list[list[tuple[ir.Value, int, Dim]]]) -> ir.Value:
        """A 1-D int64 value: per group, the product of the dims (value, axis, static dim)."""
        pieces: list[ir.Value] = []
        static: list[int] = []
        for group in groups:
            known = [d for _, _, d in group if isinstance(d, int)]
            unknown = [(v, a) for v, a, d in group if not isinstance(d, int)]
            if not unknown:
                static.append(math.prod(known))
                continue
            if static:
                pieces.append(self.int64(static))
                static = []
            factors = [
                self.op("Gather", [self.shape_of(v), self.int64([a])], dims=[1], dtype=_INT64)
                for v, a in unknown
            ]
            if math.prod(known) != 1:
                factors.append(self.int64([math.prod(known)]))
            product = factors[0]
            for factor in factors[1:]:
                product = self.op("Mul", [product, factor], dims=[1], dtype=_INT64)
            pieces.append(product)
        if static:
            pieces.append(self.int64(static))
        if len(pieces) == 1:
            return pieces[0]
        return self.op("Concat", pieces, {"axis": 0}, dims=[len(groups)], dtype=_INT64)

    def reshape(self, t: _Term, groups, labels: list[str], dims: list[Dim]) -> _Term:
        """Reshape to the products of ``groups``; Reshape-14 with allowzero, as a
        product may be 0 (the Reshape adapter drops it where no 0 can be)."""
        target = self.dims_vector(groups)
        return self.term("Reshape", [t.value, target], labels, dims, {"allowzero": 1}, version=14)

    def expand_to(self, t: _Term, other: _Term, labels: list[str]) -> _Term:
        """``t`` broadcast along ``labels`` to the dims ``other`` has there."""
        groups = [
            [(other.value, other.labels.index(x), other.dims[other.labels.index(x)])]
            if x in labels
            else []
            for x in t.labels
        ]
        dims = [
            _broadcast(d, other.dims[other.labels.index(x)]) if x in labels else d
            for x, d in zip(t.labels, t.dims)
        ]
        shape = self.dims_vector(groups)
        return self.term("Expand", [t.value, shape], list(t.labels), dims)

    def pair(self, a: _Term, b: _Term, later: set[str]) -> _Term:
        """Contract two terms, keeping the letters in ``later``."""
        split = _Split.of(a, b, later)
        a = self.transpose(a, split.batch + split.left + split.summed)
        b = self.transpose(b, split.batch + split.summed + split.right)
        unsure = [x for x in split.summed if not _same(a.dim(x), b.dim(x))]
        if unsure:
            a, b = self.expand_to(a, b, unsure), self.expand_to(b, a, unsure)
        if not split.summed:
            return self._outer(a, b, split)
        return self._matmul(a, b, split)

    def _outer(self, a: _Term, b: _Term, split: _Split) -> _Term:
        """No contracted letter: a broadcasting Mul of [batch, left, 1..] and [batch, 1.., right]."""
        nb, nl, _, nr = split.sizes
        dims = split.dims(a, b)
        a = self.unsqueeze(a, list(range(nb + nl, nb + nl + nr)), split.right)
        b = self.unsqueeze(b, list(range(nb, nb + nl)), split.left)
        return self.term("Mul", [a.value, b.value], split.labels, dims)

    def _matmul(self, a: _Term, b: _Term, split: _Split) -> _Term:
        """[batch, L, K] @ [batch, K, R], reshaped to [batch, left.., right..]."""
        nb, nl, nk, nr = split.sizes
        left_matrix = self._matrix(a, nb, (nb, nb + nl), (nb + nl, nb + nl + nk))
        right_matrix = self._matrix(b, nb, (nb, nb + nk), (nb + nk, nb + nk + nr))
        dims = split.dims(a, b)
        product_dims = dims[:nb] + [_product(dims[nb : nb + nl]), _product(dims[nb + nl :])]
        p = self.term("MatMul", [left_matrix, right_matrix], ["?"] * (nb + 2), product_dims)
        if nl <= 1 and nr <= 1:
            axes = ([nb] if not nl else []) + ([nb + 1] if not nr else [])
            if not axes:
                return _Term(p.value, split.labels, dims)
            return self.with_axes("Squeeze", p, axes, split.labels, dims)
        groups = [[(p.value, i, product_dims[i])] for i in range(nb)]
        groups += [[item] for item in _axes(a, nb, nb + nl)]
        groups += [[item] for item in _axes(b, nb + nk, nb + nk + nr)]
        return self.reshape(p, groups, split.labels, dims)

    def _matrix(
        self, t: _Term, nb: int, first: tuple[int, int], second: tuple[int, int]
    ) -> ir.Value:
        """``t`` as [batch.., first group, second group] (each a range of axes)."""
        sizes = [first[1] - first[0], second[1] - second[0]]
        if sizes == [1, 1]:
            return t.value
        if sizes[1] == 1 and sizes[0] == 0:
            return self.unsqueeze(t, [nb], ["L"]).value
        if sizes[0] == 1 and sizes[1] == 0:
            return self.unsqueeze(t, [nb + 1], ["R"]).value
        dims = t.dims[:nb] + [_product(t.dims[first[0] : first[1]])]
        dims += [_product(t.dims[second[0] : second[1]])]
        if nb == 0:  # Flatten: the same, and no Reshape's 0 to mind
            return self.op("Flatten", [t.value], {"axis": first[1]}, dims)
        groups = [[(t.value, i, t.dims[i])] for i in range(nb)]
        groups += [_axes(t, *first), _axes(t, *second)]
        return self.reshape(t, groups, ["?"] * (nb + 2), dims).value


@dataclasses.dataclass
class _Split:
    """A pair's letters: in both and kept (batch), in both and summed, in A only, in B only."""

    batch: list[str]
    summed: list[str]
    left: list[str]
    right: list[str]

    @classmethod
    def of(cls, a: _Term, b: _Term, later: set[str]) -> _Split:
        return cls(
            batch=[x for x in a.labels if x in b.labels and x in later],
            summed=[x for x in a.labels if x in b.labels and x not in later],
            left=[x for x in a.labels if x not in b.labels],
            right=[x for x in b.labels if x not in a.labels],
        )

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        return len(self.batch), len(self.left), len(self.summed), len(self.right)

    @property
    def labels(self) -> list[str]:
        """The result's letters: [batch.., left.., right..]."""
        return self.batch + self.left + self.right

    def dims(self, a: _Term, b: _Term) -> list[Dim]:
        """The result's dims, from A as [batch, left, summed] and B as [batch, summed, right]."""
        nb, nl, nk, _ = self.sizes
        batch = [_broadcast(x, y) for x, y in zip(a.dims[:nb], b.dims[:nb])]
        return batch + a.dims[nb : nb + nl] + b.dims[nb + nk :]


def _axes(t: _Term, start: int, stop: int) -> list[tuple[ir.Value, int, Dim]]:
    """(value, axis, static dim) of ``t``'s axes start..stop: a group to merge."""
    return [(t.value, i, t.dims[i]) for i in range(start, stop)]


def _product(dims: list[Dim]) -> Dim:
    """The product of ``dims`` where all are static."""
    ints = [d for d in dims if isinstance(d, int)]
    return math.prod(ints) if len(ints) == len(dims) else None
