"""Keep a model to put back if a rewrite fails half way.

Each pass checks a model before it changes it, but some checks can only be
made after a change: a later pass in :func:`lowering.lower`'s pipeline, or
maps that only specializing a function reveals
(:class:`lowering.passes.lower_sequence_maps.LowerSequenceMapPass`). Those run as a
transaction, with a snapshot to restore the model from, or (:func:`restorer`)
a source to read it again from that the caller already holds.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
import onnx_ir as ir

from lowering.irutils.walk import graphs_within


def snapshot(model: ir.Model) -> Callable[[], None]:
    """Keep ``model``'s contents; the returned function puts them back into ``model``.

    The model is kept serialized, which is several times cheaper than an
    onnx_ir clone (the pipeline's cost matters at 10,000 maps) and works for
    graphs whose nodes are out of order, which onnx_ir cannot clone. The
    weights are not copied: while serializing, each initializer holds an
    empty placeholder, and a restore hands back the very tensor objects::

        model --(initializers -> placeholders)--> proto + {graph i: {name: tensor}}
        restore: deserialize(proto), re-attach the tensors, adopt into ``model``
    """
    proto, kept = serialize_without_weights(model)

    def restore() -> None:
        adopt(model, with_weights(proto, kept))

    return restore


#: The weights :func:`serialize_without_weights` kept out, per graph (in
#: :func:`graphs_within` order), by initializer name.
Kept = list[dict[str, ir.TensorProtocol]]

#: Where a placeholder says its data is (it is never read: the tensor is kept).
PLACEHOLDER_LOCATION = "__lowering_kept_weights__"


def serialize_without_weights(
    model: ir.Model, *, inline_up_to: int = -1
) -> tuple[onnx.ModelProto, Kept]:
    """``model`` as a proto whose initializers are empty external-data placeholders.

    Tensors of at most ``inline_up_to`` elements stay in the proto (for a
    reader that needs small constants: ``onnx.version_converter``). The
    model itself is left as it was.
    """
    graphs = list(graphs_within(model.graph))
    kept: Kept = []
    try:
        for graph in graphs:
            tensors: dict[str, ir.TensorProtocol] = {}
            kept.append(tensors)
            for name, value in graph.initializers.items():
                tensor = value.const_value
                if tensor is not None and tensor.size > inline_up_to:
                    tensors[name] = tensor
                    value.const_value = ir.ExternalTensor(
                        PLACEHOLDER_LOCATION,
                        0,
                        0,
                        tensor.dtype,
                        shape=ir.Shape(tensor.shape.numpy()),
                        name=name,
                    )
        proto = ir.serde.serialize_model(model)
    finally:
        for graph, tensors in zip(graphs, kept):
            for name, tensor in tensors.items():
                graph.initializers[name].const_value = tensor
    return proto, kept


def restorer(model: ir.Model, load: Callable[[], ir.Model]) -> Callable[[], None]:
    """:func:`snapshot`'s restore, from a source the caller already holds.

    ``load`` reads ``model`` again as it is now (the CLI's: the bytes or
    file it was just read from, :func:`lowering.model_io.reread`), so
    nothing is serialized up front: a lowering that succeeds, the usual
    case, pays nothing for being able to fail::

        restore: load() -> a model like the one read, adopted into ``model``
    """

    def restore() -> None:
        adopt(model, load())

    return restore


def with_weights(proto: onnx.ModelProto, kept: Kept) -> ir.Model:
    """``proto`` read back, each placeholder holding the very tensor it stood for.

    Raises ValueError when ``proto``'s graphs or initializers are not the
    ones the weights were kept from.
    """
    restored = ir.serde.deserialize_model(proto)
    for graph, tensors in zip(graphs_within(restored.graph), kept, strict=True):
        for name, tensor in tensors.items():
            value = graph.initializers.get(name)
            if value is None:
                raise ValueError(f"initializer {name!r} of graph {graph.name!r} is gone")
            value.const_value = tensor
    return restored


def adopt(model: ir.Model, kept: ir.Model) -> None:
    """Put ``kept``'s contents back into ``model`` (the same object the caller holds)."""
    model.graph = kept.graph
    model.functions.clear()
    model.functions.update(kept.functions)
    model.ir_version = kept.ir_version
    model.producer_name = kept.producer_name
    model.producer_version = kept.producer_version
    model.domain = kept.domain
    model.model_version = kept.model_version
    model.doc_string = kept.doc_string
    model.metadata_props.clear()
    model.metadata_props.update(kept.metadata_props)
