"""Expand a node into ONNX's own function body for its op.

ONNX defines many newer ops as functions of older ones: HardSwish is
``x * HardSigmoid<alpha=1/6>(x)``, LayerNormalization a chain of ReduceMean,
Sub, Pow, Sqrt and Div. Where a node cannot be relabelled or adapted to the
target, its schema's function body (``OpSchema.get_function_with_opset_version``)
or context-dependent body (which depends on the node's attributes and input
types, ``get_context_dependent_function_with_opset_version``) replaces it in
the sandbox, at the opset the body is written for; the planner then converts
each body node in turn, so an expansion that itself needs converting is::

    Gelu-20 --expand--> Div, Erf, Add, Mul (at 20) --relabel--> ... at 13

Only nodes that block are expanded: everything else keeps its op.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx
import onnx.shape_inference
import onnx_ir as ir

from lowering.opset import schemas

if TYPE_CHECKING:
    from lowering.opset.plan import Plan, Sandbox


def function_body(node: ir.Node) -> onnx.FunctionProto | None:
    """The lowest-opset function body ONNX gives for ``node``, if any."""
    schema = schemas.schema(node.op_type, node.version)
    if schema is None:
        return None
    if schema.has_function and schema.function_opset_versions:
        version = min(schema.function_opset_versions)
        return onnx.FunctionProto.FromString(schema.get_function_with_opset_version(version))
    if schema.has_context_dependent_function and schema.context_dependent_function_opset_versions:
        if any(v is not None and v.type is None for v in node.inputs):
            return None
        version = min(schema.context_dependent_function_opset_versions)
        proto = onnx.helper.make_node(
            node.op_type,
            [f"in{i}" if v is not None else "" for i, v in enumerate(node.inputs)],
            [f"out{i}" for i in range(len(node.outputs))],
        )
        for attr in node.attributes.values():
            proto.attribute.append(ir.serde.serialize_attribute(attr))
        types = [
            ir.serde.serialize_type(v.type).SerializeToString()
            if v is not None
            else onnx.TypeProto().SerializeToString()
            for v in node.inputs
        ]
        try:
            data = schema.get_context_dependent_function_with_opset_version(
                version, proto.SerializeToString(), types
            )
        except Exception:  # noqa: BLE001 - onnx raises bare errors when no body can be built
            return None
        return onnx.FunctionProto.FromString(data) if data else None
    return None


def expand(sandbox: Sandbox, node: ir.Node, plan: Plan) -> list[ir.Node] | None:
    """Replace ``node`` in ``sandbox`` by its function body; the new nodes, or None."""
    body = function_body(node)
    if body is None or any(o.domain not in ("", "ai.onnx") for o in body.opset_import):
        return None
    version = next(o.version for o in body.opset_import if o.domain in ("", "ai.onnx"))
    schema = schemas.schema(node.op_type, node.version)
    env: dict[str, ir.Value | None] = {"": None}
    for formal, actual in zip(body.input, node.inputs):
        env[formal] = actual
    for formal in body.input[len(node.inputs) :]:
        env[formal] = None
    attributes = dict(node.attributes)
    for name, formal in schema.attributes.items():
        if name not in attributes and formal.default_value.name:
            attributes[name] = ir.serde.deserialize_attribute(formal.default_value)
    new_nodes = []
    for proto in body.node:
        if proto.domain not in ("", "ai.onnx"):
            return None
        inputs = [env[name] for name in proto.input]
        attrs = []
        for attribute in proto.attribute:
            if attribute.ref_attr_name:
                if attribute.ref_attr_name in attributes:
                    source = attributes[attribute.ref_attr_name]
                    attrs.append(ir.Attr(attribute.name, source.type, source.value))
            else:
                attrs.append(ir.serde.deserialize_attribute(attribute))
        new = ir.Node(
            "", proto.op_type, inputs, attrs, num_outputs=len(proto.output), version=version
        )
        for name, value in zip(proto.output, new.outputs):
            env[name] = value if name else None
        new_nodes.append(new)
    outputs = [env.get(name) for name in body.output][: len(node.outputs)]
    if any(value is None for value in outputs):
        return None
    _infer_types(body, node, env, version)
    graph = sandbox.graph
    graph.insert_before(node, new_nodes)
    for old, new in zip(node.outputs, outputs):
        if new.type is None:
            new.type = old.type
        if new.shape is None and old.shape is not None:
            new.shape = old.shape
        old.replace_all_uses_with(new, replace_graph_outputs=True)
    graph.remove(node, safe=True)
    plan.expanded.append(f"{node.op_type}-{schema.since_version}")
    return new_nodes


def _infer_types(body: onnx.FunctionProto, node: ir.Node, env: dict, version: int) -> None:
    """Types of the body's values, by ONNX shape inference on the body alone."""
    inputs = []
    for formal, actual in zip(body.input, node.inputs):
        if actual is None or actual.type is None:
            continue
        info = ir.serde.serialize_value(actual)
        info.name = formal
        inputs.append(info)
    graph = onnx.helper.make_graph(
        list(body.node),
        "body",
        inputs,
        [onnx.ValueInfoProto(name=name) for name in body.output],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", version)])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - inference is a help, not a requirement
        return
    for info in (*inferred.graph.value_info, *inferred.graph.output):
        value = env.get(info.name)
        if value is None or value.type is not None or not info.type.WhichOneof("value"):
            continue
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type == 0:
            continue
        value.type = ir.serde.deserialize_type_proto_for_type(info.type)
        shape = ir.serde.deserialize_type_proto_for_shape(info.type)
        if shape is not None:
            value.shape = shape
