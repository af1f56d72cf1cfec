"""Does a SequenceMap body give every element's outputs the same shape?

The uniform-shape strategy (:mod:`lowering.maps.strategies.scan_outputs`) stacks the body's
outputs as a Loop's scan outputs, which needs one shape for all iterations.
That holds in two cases:

1. every body output has a fully static shape after type inference;
2. it can be proven: every sequence input's elements share one shape (the
   sequence comes from ``SplitToSequence`` without ``split``, or its element
   type is fully static), and every output's shape is a function of shapes
   that are the same in every iteration.

For (2) the analysis tracks two facts about body values:

- *invariant*: the same value in every iteration. Outer-scope values and
  constants are; so are ``Shape``/``Size`` of a uniform value, and the
  result of a deterministic op on invariant values;
- *uniform*: the same shape in every iteration. Invariant values are; so is
  the result of an op whose output shape depends only on its inputs' shapes,
  given uniform inputs, and on operands that fix the shape (``Reshape``'s
  shape, ``Slice``'s starts, ...) when those are invariant.

Anything else (data-dependent shapes such as ``NonZero``, subgraphs, ops it
does not know) is not proven uniform, and the map keeps the general form.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.irutils.constants import constant_array
from lowering.irutils.op_facts import (
    RANDOM_OPS,
    SHAPE_FROM_SHAPES_OPS,
    SHAPE_OPERANDS,
    SHAPE_READING_OPS,
    is_onnx_domain,
)
from lowering.irutils.walk import has_subgraphs
from lowering.maps.plan import MapPlan


def static_shapes(shapes: list[ir.Shape | None]) -> bool:
    """Every shape known and made of integers only."""
    return all(shape is not None and shape.is_static() for shape in shapes)


def uniform_elements(sequence: ir.Value, element_shape: ir.Shape | None) -> bool:
    """Do all elements of ``sequence`` have one shape?"""
    if element_shape is not None and element_shape.is_static():
        return True
    producer = sequence.producer()
    return (
        producer is not None
        and producer.op_type == "SplitToSequence"
        and is_onnx_domain(producer.domain)
        and (len(producer.inputs) < 2 or producer.inputs[1] is None)
    )


class UniformShapes:
    """Which values of a map body have the same shape in every iteration."""

    def __init__(
        self, body: ir.Graph, uniform_inputs: set[ir.Value], invariant_inputs: set[ir.Value]
    ) -> None:
        self._body = body
        self._uniform = set(uniform_inputs) | set(invariant_inputs)
        self._invariant = set(invariant_inputs)
        for node in body:
            self._visit(node)

    def is_uniform(self, value: ir.Value | None) -> bool:
        return value in self._uniform or self._is_invariant(value)

    def why_not(self, value: ir.Value) -> str:
        """Why ``value`` is not proven uniform: the first node on its way that
        breaks the proof, named, and what it is (for the summary)."""
        seen: set[ir.Value] = set()
        while value not in seen:
            seen.add(value)
            node = value.producer()
            if node is None or node.graph is not self._body:
                return f"{value.name!r} may differ in shape"
            culprit = _describe(node)
            if not is_onnx_domain(node.domain):
                return f"{culprit} is an op of domain {node.domain!r}, with no shape inference"
            if has_subgraphs(node):
                return f"{culprit} has a subgraph, whose shapes are not followed"
            shape_operands = (
                () if node.op_type in SHAPE_FROM_SHAPES_OPS else SHAPE_OPERANDS.get(node.op_type)
            )
            if shape_operands is None:
                return f"{culprit} computes a shape from data"
            for index in shape_operands:
                operand = node.inputs[index] if index < len(node.inputs) else None
                if operand is not None and not self._is_invariant(operand):
                    return f"{culprit} takes its shape from {operand.name!r}, which varies"
            varying = [v for v in node.inputs if v is not None and not self.is_uniform(v)]
            if not varying:
                return f"{culprit} may give each element another shape"
            value = varying[0]
        return f"{value.name!r} may differ in shape"

    def _is_invariant(self, value: ir.Value | None) -> bool:
        if value is None:
            return True
        if value in self._invariant:
            return True
        if value.graph is not self._body or value.const_value is not None:
            return True  # an outer-scope value or an initializer: the same every trip
        return constant_array(value) is not None

    def _visit(self, node: ir.Node) -> None:
        outputs = node.outputs
        if not is_onnx_domain(node.domain) or has_subgraphs(node):
            return
        op = node.op_type
        inputs = node.inputs
        if op not in RANDOM_OPS and all(self._is_invariant(v) for v in inputs):
            self._invariant.update(outputs)
            self._uniform.update(outputs)
            return
        if op in SHAPE_READING_OPS and self.is_uniform(inputs[0]):
            self._invariant.update(outputs)
            self._uniform.update(outputs)
            return
        shape_operands = SHAPE_OPERANDS.get(op)
        if op in SHAPE_FROM_SHAPES_OPS:
            shape_operands = ()
        if shape_operands is None:
            return
        for index, value in enumerate(inputs):
            if value is None:
                continue
            if index in shape_operands:
                if not self._is_invariant(value):
                    return
            elif not self.is_uniform(value):
                return
        self._uniform.update(outputs)


def _describe(node: ir.Node) -> str:
    op = node.op_type if is_onnx_domain(node.domain) else f"{node.domain}.{node.op_type}"
    return f"{op} ({node.name!r})" if node.name else op


def uniform_reason(plan: MapPlan) -> tuple[bool, str]:
    """Whether every output element has one shape, and why (not)."""
    if static_shapes([shape for _, shape in plan.result_types]):
        return True, "every output has a static shape"
    node, body = plan.node, plan.body
    k, (_, shape) = next(
        (k, t) for k, t in enumerate(plan.result_types) if not static_shapes([t[1]])
    )
    output = f"output {k} ({node.outputs[k].name!r}) " + (
        "has no known shape" if shape is None else f"has shape {_show(shape)}"
    )
    uniform_inputs, invariant_inputs = set(), set()
    for outer, inner, sequence, element in zip(
        node.inputs, body.inputs, plan.is_sequence, plan.element_types, strict=True
    ):
        assert outer is not None, "plan_map refuses omitted inputs"
        if not sequence:
            invariant_inputs.add(inner)
        elif uniform_elements(outer, element[1] if element else None):
            uniform_inputs.add(inner)
        else:
            return False, (
                f"{output}, and the elements of {outer.name!r} may differ in shape "
                "(not a SplitToSequence without split, nor of static shape)"
            )
    shapes = UniformShapes(body, uniform_inputs, invariant_inputs)
    for k, result in enumerate(body.outputs):
        if not shapes.is_uniform(result):
            return False, (
                f"output {k} ({node.outputs[k].name!r}) may differ in shape from element "
                f"to element: {shapes.why_not(result)}"
            )
    return True, (
        "every input element comes from a SplitToSequence without split, and the body "
        "keeps shapes uniform"
    )


def _show(shape: ir.Shape) -> str:
    unknown = (None, ir.SymbolicDim(None))
    return "[" + ", ".join("?" if d in unknown else str(d) for d in shape) + "]"
