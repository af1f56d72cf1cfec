"""Which IR version a model's content needs: the one table, and the walk that reads it.

An old runtime refuses a model by its ``ir_version`` alone (onnxruntime
1.14 reads at most 8, 1.16 at most 9), whatever the model holds, so a
model converted to an old opset should declare the lowest IR version its
content allows. Neither ONNX's checker nor onnxruntime checks the
declared version against the content (measured with onnx 1.23: IR 3 with
opset 24, local functions or float8 passes ``check_model(full_check=True)``),
so the facts come from ONNX itself:

- the opsets: ``onnx.helper.find_min_ir_version_for``
  (``onnx.helper.VERSION_TABLE``: opset 11 -> IR 6, 13 -> 7, 15 -> 8,
  19 -> 9, 21 -> 10, 23 -> 11, ...);
- everything else: :data:`FEATURES`, each row quoting the comment of the
  installed ``onnx/onnx.proto``'s ``enum Version`` that introduced it
  (``tests/test_ir_version.py`` checks every quotation against that file).

What an older reader merely ignores needs nothing: protobuf keeps fields
it does not know, so ``metadata_props`` on nodes, graphs and values (IR 10)
and a function's ``value_info`` (IR 10; onnx_ir writes it into the main
graph's ``value_info`` below 10) do not raise the version. A torch export
carries node metadata, and must still reach IR 6.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import onnx
import onnx.helper
import onnx_ir as ir

from lowering.irutils.op_facts import is_onnx_domain
from lowering.irutils.scopes import describe_function, iter_scopes


@dataclasses.dataclass(frozen=True)
class Feature:
    """Content that needs an IR version: the version, and onnx.proto's words for it."""

    name: str
    ir_version: int
    evidence: str


#: The lowest IR version the package writes: opset_import came with IR 3.
MIN_IR_VERSION = 3

#: Feature key -> what it needs. One row per fact; element types are keyed by
#: their ir.DataType name.
FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature("initializers that are not graph inputs", 4, "Relax constraint that initializers"),
        Feature("BFLOAT16", 4, "Add type BFLOAT16"),
        Feature("model-local functions", 8, "Added a list of FunctionProtos local to the model"),
        Feature("optional types", 8, "Introduce TypeProto.Optional"),
        Feature("sparse tensor types", 8, "Introduce TypeProto.SparseTensor"),
        Feature("function attribute defaults", 9, "default attribute values can be set"),
        Feature("FLOAT8E4M3FN", 9, "FLOAT8E4M3FN"),
        Feature("FLOAT8E4M3FNUZ", 9, "FLOAT8E4M3FNUZ"),
        Feature("FLOAT8E5M2", 9, "FLOAT8E5M2,"),
        Feature("FLOAT8E5M2FNUZ", 9, "FLOAT8E5M2FNUZ"),
        Feature("INT4", 10, "INT4"),
        Feature("UINT4", 10, "UINT4"),
        Feature("function overloads", 10, "overload field for functions"),
        Feature("FLOAT4E2M1", 11, "FLOAT4E2M1"),
        Feature("multi-device configurations", 11, "multi-device protobuf classes"),
        Feature("FLOAT8E8M0", 12, "FLOAT8E8M0"),
        Feature("INT2", 13, "INT2"),
        Feature("UINT2", 13, "UINT2"),
        Feature("FLOAT6E2M3", 14, "FLOAT6E2M3"),
        Feature("FLOAT6E3M2", 14, "FLOAT6E3M2"),
    )
}

#: Integer attributes of ONNX ops that name an element type (Cast's ``to``, ...).
DTYPE_ATTRIBUTES = frozenset(["to", "dtype", "output_dtype", "stash_type"])


@dataclasses.dataclass(frozen=True)
class Need:
    """One place that needs an IR version, and why."""

    ir_version: int
    what: str
    where: str


def lowest_ir_version(model: ir.Model) -> int:
    """The lowest IR version ``model``'s content allows."""
    return max([MIN_IR_VERSION, *(need.ir_version for need in needs(model))])


def needs(model: ir.Model) -> list[Need]:
    """Every reason ``model`` needs more than :data:`MIN_IR_VERSION`, one per place."""
    found = [*_opset_needs(model), *_function_needs(model)]
    if model.device_configurations:
        found.append(_feature("multi-device configurations", "the model"))
    inputs = set(model.graph.inputs)
    if any(v not in inputs for v in model.graph.initializers.values()):
        found.append(_feature("initializers that are not graph inputs", "the main graph"))
    for scope in iter_scopes(model):
        found += _scope_needs(scope.owner, scope.description)
    return [need for need in found if need.ir_version > MIN_IR_VERSION]


def _opset_needs(model: ir.Model) -> Iterator[Need]:
    for imports, where in _opset_tables(model):
        for domain, version in sorted(imports.items()):
            opset = onnx.helper.make_opsetid(domain, version)
            need = onnx.helper.find_min_ir_version_for([opset], ignore_unknown=True)
            yield Need(need, f"opset {domain or 'ai.onnx'} {version}", where)


def _function_needs(model: ir.Model) -> Iterator[Need]:
    for function in model.functions.values():
        where = _function_name(function)
        yield _feature("model-local functions", where)
        if any(attr.value is not None for attr in function.attributes.values()):
            yield _feature("function attribute defaults", where)
        if function.overload:
            yield _feature("function overloads", where)


def _scope_needs(owner: ir.Graph | ir.Function, description: str) -> list[Need]:
    """What one graph or function's values (its interface, initializers) and nodes need."""
    found: list[Need] = []
    values = [*owner.inputs, *owner.outputs]
    if isinstance(owner, ir.Graph):
        values += list(owner.initializers.values())
    for value in values:
        found += _value_needs(value, f"value {value.name!r} in {description}")
    for node in owner:
        found += _node_needs(node, description)
    return found


def _node_needs(node: ir.Node, description: str) -> list[Need]:
    where = f"node {node.name or '<unnamed>'!r} ({node.op_type}) in {description}"
    found: list[Need] = []
    if node.overload:
        found.append(_feature("function overloads", where))
    if node.device_configurations:
        found.append(_feature("multi-device configurations", where))
    for value in node.outputs:
        found += _value_needs(value, f"value {value.name!r} in {description}")
    for attr in node.attributes.values():
        found += [_feature(t.name, where) for t in _attribute_dtypes(node, attr)]
    return found


def refusal(model: ir.Model, ir_version: int) -> str | None:
    """Why ``model`` cannot declare ``ir_version``, in one line; None if it can."""
    over = [need for need in needs(model) if need.ir_version > ir_version]
    if not over:
        return None
    first: dict[str, Need] = {}
    counts: dict[str, int] = {}
    for need in over:
        first.setdefault(need.what, need)
        counts[need.what] = counts.get(need.what, 0) + 1
    parts = []
    for what, need in sorted(first.items(), key=lambda kv: (-kv[1].ir_version, kv[0])):
        more = f", and {counts[what] - 1} more" if counts[what] > 1 else ""
        parts.append(f"{what} needs IR {need.ir_version} ({need.where}{more})")
    return f"the model cannot declare IR version {ir_version}: " + "; ".join(parts)


def _feature(key: str, where: str) -> Need:
    feature = FEATURES[key]
    what = feature.name if key not in ir.DataType.__members__ else f"{key} elements"
    return Need(feature.ir_version, what, where)


def _value_needs(value: ir.Value, where: str) -> list[Need]:
    found = [_feature(key, where) for key in _type_features(value.type)]
    tensor = value.const_value
    if tensor is not None and tensor.dtype.name in FEATURES:
        found.append(_feature(tensor.dtype.name, where))
    return found


def _type_features(type_: ir.TypeProtocol | None) -> Iterator[str]:
    """The FEATURES keys a type needs, through sequences and optionals."""
    while type_ is not None:
        if isinstance(type_, ir.OptionalType):
            yield "optional types"
        elif isinstance(type_, ir.SparseTensorType):
            yield "sparse tensor types"
        if isinstance(type_, (ir.SequenceType, ir.OptionalType)):
            type_ = type_.elem_type
            continue
        dtype = getattr(type_, "dtype", None)
        if dtype is not None and dtype.name in FEATURES:
            yield dtype.name
        return


def _attribute_dtypes(node: ir.Node, attr: ir.Attr) -> Iterator[ir.DataType]:
    """The element types an attribute holds or names."""
    kind = attr.type
    if kind == ir.AttributeType.TENSOR:
        yield from _known([attr.value.dtype])
    elif kind == ir.AttributeType.TENSORS:
        yield from _known([t.dtype for t in attr.value])
    elif kind in (ir.AttributeType.TYPE_PROTO, ir.AttributeType.TYPE_PROTOS):
        types = attr.value if kind == ir.AttributeType.TYPE_PROTOS else [attr.value]
        for type_ in types:
            yield from (
                ir.DataType[k] for k in _type_features(type_) if k in ir.DataType.__members__
            )
    elif (
        kind == ir.AttributeType.INT
        and attr.name in DTYPE_ATTRIBUTES
        and is_onnx_domain(node.domain)
        and attr.value in ir.DataType._value2member_map_
    ):
        yield from _known([ir.DataType(attr.value)])


def _known(dtypes: list[ir.DataType]) -> list[ir.DataType]:
    return [d for d in dtypes if d.name in FEATURES]


def _opset_tables(model: ir.Model) -> Iterator[tuple[dict[str, int], str]]:
    yield model.opset_imports, "the model's opset_import"
    for function in model.functions.values():
        yield function.opset_imports, f"{_function_name(function)}'s opset_import"


def _function_name(function: ir.Function) -> str:
    overload = f" (overload {function.overload!r})" if function.overload else ""
    return describe_function(function) + overload
