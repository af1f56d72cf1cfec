"""Schema look-ups and the type check every relabel makes.

Going from one schema version to another is a chain of steps between
consecutive versions of the op (``ReduceMean-18 -> 13 -> 11``). A step is a
relabel when :data:`lowering.opset.allowlist.RELABEL` lists it and the node's
actual types are taken by the other version; otherwise it needs an adapter.
"""

from __future__ import annotations

import functools

import onnx
import onnx.defs
import onnx_ir as ir

from lowering.opset.allowlist import RELABEL


@functools.cache
def schema(op: str, version: int) -> onnx.defs.OpSchema | None:
    """The default-domain schema of ``op`` in force at opset ``version``."""
    if version < 1:
        return None
    try:
        return onnx.defs.get_schema(op, version, "")
    except onnx.defs.SchemaError:
        return None


@functools.cache
def next_step(op: str, since: int, target: int) -> tuple[int, int] | None:
    """The next (old, new) schema pair from ``since`` towards opset ``target``.

    None when the schema in force at ``target`` is the one at ``since``, or the
    op does not exist on the way (then the caller blocks or expands).
    """
    if target < since:
        previous = schema(op, since - 1)
        return (previous.since_version if previous else 0, since)
    later = schema(op, target)
    if later is None or later.since_version == since:
        return None
    for version in range(since + 1, target + 1):
        found = schema(op, version)
        if found is not None and found.since_version > since:
            return (since, found.since_version)
    return None


def formal_types(s) -> list[tuple[str, object, frozenset[str]]]:
    """Each formal parameter with the types it takes, whatever its type parameter is called."""
    allowed = {c.type_param_str: frozenset(c.allowed_type_strs) for c in s.type_constraints}
    return [
        (f.name, f.option, allowed.get(f.type_str, frozenset([f.type_str])))
        for f in (*s.inputs, *s.outputs)
    ]


def relabel_reason(op: str, old: int, new: int) -> str | None:
    return RELABEL.get((op, old, new))


def types_not_taken(node: ir.Node, target_schema: onnx.defs.OpSchema) -> str | None:
    """Why ``node``'s actual types do not fit ``target_schema``, or None if they do.

    Values bound to one type parameter of a homogeneous formal must have one
    type (Pow-7's base and exponent), and each must be one the parameter takes.
    A value whose type is unknown is not held against the node.
    """
    inputs = tuple(type_string(v) if v is not None else None for v in node.inputs)
    outputs = tuple(type_string(v) if v is not None else None for v in node.outputs)
    return _types_not_taken(target_schema.name, target_schema.since_version, inputs, outputs)


@functools.cache
def _types_not_taken(
    op: str, since: int, inputs: tuple[str | None, ...], outputs: tuple[str | None, ...]
) -> str | None:
    target_schema = schema(op, since)
    # op and since come from a schema that exists (see types_not_taken).
    assert target_schema is not None, (op, since)
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in target_schema.type_constraints}
    bound: dict[str, str] = {}
    sides = ((inputs, target_schema.inputs), (outputs, target_schema.outputs))
    for names, formals in sides:
        for index, name in enumerate(names):
            if name is None or not formals:
                continue
            formal = formals[min(index, len(formals) - 1)]
            takes = allowed.get(formal.type_str, {formal.type_str})
            if name not in takes:
                return f"takes no {name}"
            heterogeneous = (
                formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
                and not formal.is_homogeneous
            )
            if (
                formal.type_str in allowed
                and not heterogeneous
                and bound.setdefault(formal.type_str, name) != name
            ):
                return (
                    f"needs one type for {formal.type_str}, not {bound[formal.type_str]} and {name}"
                )
    return None


def type_string(value: ir.Value) -> str | None:
    """The ONNX type string of a fully known type ("tensor(float)"), else None."""
    if isinstance(value.type, ir.TensorType):
        dtype = value.type.dtype
        return None if dtype == ir.DataType.UNDEFINED else _tensor_name(int(dtype))
    try:
        proto = ir.serde.serialize_type(value.type) if value.type is not None else None
    except (TypeError, ValueError):
        return None
    if proto is None or not _complete(proto):
        return None
    return _onnx_type_name(proto)


@functools.cache
def _tensor_name(elem_type: int) -> str:
    name = onnx.helper.tensor_dtype_to_string(elem_type).split(".")[-1].lower()
    return f"tensor({name})"


def _complete(proto: onnx.TypeProto) -> bool:
    kind = proto.WhichOneof("value")
    if kind == "tensor_type":
        return proto.tensor_type.elem_type != 0
    if kind == "sequence_type":
        return _complete(proto.sequence_type.elem_type)
    if kind == "optional_type":
        return _complete(proto.optional_type.elem_type)
    return False


def _onnx_type_name(proto: onnx.TypeProto) -> str:
    kind = proto.WhichOneof("value")
    if kind == "sequence_type":
        return f"seq({_onnx_type_name(proto.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({_onnx_type_name(proto.optional_type.elem_type)})"
    return _tensor_name(proto.tensor_type.elem_type)
