"""Specialize model-local functions whose SequenceMap body is a graph attribute.

A function may take its map's body from the caller, as a graph attribute::

    main:   y = local.apply <fn = body (e) => (d) { d = Add(e, c) }> (x)
    apply <fn> (s) => (t) { t = SequenceMap <body: graph = @fn> (s) }

The map cannot be lowered in ``apply`` itself: its body is not known there,
and differs from call to call. So each function is copied once for each
distinct graph it is called with, the graph put in place of the reference,
and the call sites pointed at the copy::

    main:   y = local.apply_1 (x, c)
    apply_1 (s, c) => (t) { t = SequenceMap <body = body (e) => (d) { d = Add(e, c) }> (s) }

A graph attribute reads its caller's values (``c`` above) by lexical scope,
as onnxruntime and ONNX's inliner read it; a function cannot, so each value
the graph reads from outside becomes an extra input of the copy, and the call
site passes it. Where the graph reads the caller's own attributes
(``@alpha``, in a calling function), the copy declares them too and the call
hands them on. Calls that pass the same graph (the same serialized bytes)
share one copy. A call that passes no graph uses the function's default. A function that hands its own graph attribute on to another
(``local.apply <fn = @g> (s)``) is specialized too, and the copy's call then
carries a concrete graph, which specializes the callee in turn, to any depth.
The originals are removed afterwards: every call to them has been pointed at
a copy. Functions whose graph attributes do not end up as a map's body are
left alone.

Everything that could stop the rewrite (a call that supplies no graph where
a map needs one and the function has no default, a passed graph that reads
an attribute its caller does not declare, or scopes that import one domain
at different versions) is checked first, so a model that fails is left
unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

import onnx_ir as ir

from lowering.errors import LoweringError
from lowering.irutils.naming import fresh, name_fresh
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.scopes import describe_function, iter_scopes
from lowering.irutils.walk import GraphLike, graphs_within, nodes_within, subgraphs
from lowering.rewrites import LoweringResult, Rewrite

logger = logging.getLogger(__name__)

_Key = tuple[ir.OperatorIdentifier, tuple[tuple[str, bytes], ...]]
#: The caller's attributes a copy reads: its own name for each, and the type.
_Forwarded = dict[str, tuple[str, ir.AttributeType]]


@dataclasses.dataclass
class SpecializeResult(LoweringResult):
    """What :class:`SpecializeFunctionsPass` did.

    Attributes:
        rewrites: The maps removed with a function no call reaches.
        specialized: The names of the copies made, by original function.
        origins: The function each copy copies, by the copy's name.
    """

    specialized: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    origins: dict[str, str] = dataclasses.field(default_factory=dict)

    def unspecialized(self, error: LoweringError) -> LoweringError:
        """``error``, found in a copy this pass made, told of the function it copies.

        For a caller that undoes the specialization (the copy is gone, the
        original is what the user wrote).
        """
        scope = error.scope
        details = list(error.details)
        for copy, original in self.origins.items():
            named = f"{original} (as specialized for one of its calls)"
            if scope is not None and copy in scope:
                scope = scope.replace(copy, named)
            details = [line.replace(copy, named) for line in details]
        return LoweringError(error.reason, node=error.node, scope=scope, details=details)


class SpecializeFunctionsPass(ir.passes.InPlacePass):
    """Copy each function whose map body is a graph attribute, once per graph it is called with.

    A function that no call reaches is removed with the others: nothing can
    run it, and its maps have no body to lower. Returns a
    :class:`SpecializeResult`.
    """

    def call(self, model: ir.Model) -> SpecializeResult:
        needs = _needed_attributes(model)
        if not needs:
            return SpecializeResult(model, modified=False)
        _check(model, needs)
        specialized: dict[str, list[str]] = {}
        origins: dict[str, str] = {}
        specializer = _Specializer(model, needs, specialized, origins)
        maps = [
            (function, node)
            for function in needs
            for node in nodes_within(function)
            if is_onnx_op(node, "SequenceMap")
        ]
        specializer.run()
        rewrites = [
            Rewrite(
                scope=describe_function(function),
                node_name=node.name or "",
                op_type="SequenceMap",
                original=None,
                written=[],
                strategy="removed",
                reason="its body is an attribute of a function that no call reaches",
            )
            for function, node in maps
            if function not in specializer.copied
        ]
        name_fresh(model)
        return SpecializeResult(
            model, modified=True, rewrites=rewrites, specialized=specialized, origins=origins
        )

    def ensures(self, model: ir.Model) -> None:
        if _needed_attributes(model):
            raise ir.passes.PostconditionError("a map still takes its body from an attribute")


def _needed_attributes(model: ir.Model) -> dict[ir.Function, list[str]]:
    """For each function, the graph attributes that end up as a map's body.

    Directly (``SequenceMap <body = @fn>``), or by being handed on to a
    function that needs them, to any depth (a fixpoint over the calls).
    """
    needs: dict[ir.Function, set[str]] = {}
    changed = True
    while changed:
        changed = False
        for function in model.functions.values():
            found = needs.setdefault(function, set())
            for node in nodes_within(function):
                for attr in _handed_on(node, model, needs):
                    name = attr.ref_attr_name
                    if name is not None and name not in found:
                        found.add(name)
                        changed = True
    return {f: sorted(names) for f, names in needs.items() if names}


def _handed_on(node: ir.Node, model: ir.Model, needs) -> Iterator[ir.Attr]:
    """The reference attributes of ``node`` that end up as a map's body."""
    if is_onnx_op(node, "SequenceMap"):
        wanted: set[str] = {"body"}
    else:
        callee = model.functions.get(node.op_identifier())
        wanted = needs.get(callee, set()) if callee is not None else set()
    for name in wanted:
        attr = node.attributes.get(name)
        if isinstance(attr, ir.Attr) and attr.is_ref():
            yield attr


def _check(model: ir.Model, needs: dict[ir.Function, list[str]]) -> None:
    """Raise a LoweringError for anything that would stop the rewrite part way."""
    involved: list[GraphLike] = list(needs)
    root: GraphLike = model.graph
    for scope in iter_scopes(model):
        if scope.owner is model.graph or isinstance(scope.owner, ir.Function):
            root = scope.owner
        for node in scope.owner:
            callee = model.functions.get(node.op_identifier())
            if callee not in needs:
                continue
            involved.append(root)
            for name in needs[callee]:
                _check_argument(node, name, callee, root, needs, scope.description)
    versions: dict[str, set[int]] = {}
    for owner in dict.fromkeys(involved):
        for domain, version in owner.opset_imports.items():
            versions.setdefault(domain or "ai.onnx", set()).add(version)
    for domain, found in versions.items():
        if len(found) > 1:
            raise LoweringError(
                f"functions whose map body is a graph attribute, and their callers, import "
                f"domain {domain!r} at different versions {sorted(found)}; a graph passed "
                "from one to the other would change meaning"
            )


def _check_argument(node, name, callee, root, needs, description) -> None:
    def fail(reason: str) -> LoweringError:
        return LoweringError(reason, node=node, scope=description)

    attr = node.attributes.get(name)
    if attr is None:
        default = callee.attributes.get(name)
        if default is None or default.value is None:
            raise fail(
                f"it calls {callee.name!r} without the graph attribute {name!r}, which a "
                "SequenceMap in that function takes as its body"
            )
        return
    if attr.is_ref():
        if not isinstance(root, ir.Function) or attr.ref_attr_name not in needs.get(root, []):
            raise fail(
                f"its attribute {name!r} refers to {attr.ref_attr_name!r}, which the caller "
                "does not declare"
            )
        return
    if attr.type != ir.AttributeType.GRAPH:
        raise fail(
            f"its attribute {name!r} is a {attr.type.name}, but {callee.name!r} uses it as a "
            "SequenceMap body, which is a graph"
        )
    declared = set(root.attributes) if isinstance(root, ir.Function) else set()
    for inner in nodes_within(attr.as_graph()):
        for inner_attr in inner.attributes.values():
            if inner_attr.is_ref() and inner_attr.ref_attr_name not in declared:
                raise fail(
                    f"the graph it passes as {name!r} refers to the attribute "
                    f"{inner_attr.ref_attr_name!r}, which the caller does not declare"
                )


class _Specializer:
    """Points every call of a needing function at a copy made for its graphs."""

    def __init__(
        self, model: ir.Model, needs: dict[ir.Function, list[str]], report, origins
    ) -> None:
        self.model = model
        self.needs = needs
        self.report = report
        self.origins = origins
        self.copies: dict[_Key, ir.Function] = {}
        self.copied: set[ir.Function] = set()  # the originals that have a copy
        # For each copy, the caller's attributes its graphs read: the copy's
        # own name for each, and its type.
        self.forwarded: dict[ir.Function, _Forwarded] = {}

    def run(self) -> None:
        live: list[GraphLike] = [self.model.graph]
        live += [f for f in self.model.functions.values() if f not in self.needs]
        while live:  # first come, first numbered
            root = live.pop(0)
            live += self._rewire_calls(root, root)
        for function in self.needs:
            del self.model.functions[function.identifier()]
            logger.debug("Removed function %r: every call now uses a copy", function.name)

    def _rewire_calls(self, graph: GraphLike, root: GraphLike) -> list[ir.Function]:
        """Rewire the calls in ``graph`` and its subgraphs; returns the new copies.

        A call is rewired before the graphs it holds are walked, so the graphs
        it hands over (now in the copy) are not walked here.
        """
        made: list[ir.Function] = []
        for node in list(graph):
            callee = self.model.functions.get(node.op_identifier())
            if callee in self.needs:
                copy = self._rewire(node, callee, root)
                if copy is not None:
                    made.append(copy)
            for sub in subgraphs(node):
                made += self._rewire_calls(sub, root)
        return made

    def _rewire(self, node: ir.Node, callee: ir.Function, root: GraphLike) -> ir.Function | None:
        """Point ``node`` at the copy for its graphs; returns the copy if it is new."""
        graphs = {name: self._argument(node, callee, name) for name in self.needs[callee]}
        key: _Key = (
            callee.identifier(),
            tuple((name, _bytes_of(graph)) for name, graph in graphs.items()),
        )
        made = None
        if key not in self.copies:
            made = self.copies[key] = self._copy(callee, graphs, root)
            self.copied.add(callee)
            self.report.setdefault(callee.name, []).append(made.name)
            self.origins[describe_function(made)] = describe_function(callee)
        copy = self.copies[key]
        captured = list(dict.fromkeys(v for graph in graphs.values() for v in _captured(graph)))
        node.op_type = copy.name
        for name in graphs:
            attr = node.attributes.pop(name, None)
            if attr is not None:
                _detach(attr.as_graph())
        first = len(node.inputs)
        node.resize_inputs(first + len(captured))
        for offset, value in enumerate(captured):
            node.replace_input_with(first + offset, value)
        for read, (name, type_) in self.forwarded[copy].items():
            node.attributes[name] = ir.RefAttr(name, read, type_)
        return made

    def _argument(self, node: ir.Node, callee: ir.Function, name: str) -> ir.Graph:
        attr = node.attributes.get(name)
        if attr is None:
            attr = callee.attributes[name]  # its default, checked before
        return attr.as_graph()

    def _copy(
        self, callee: ir.Function, graphs: dict[str, ir.Graph], root: GraphLike
    ) -> ir.Function:
        copy = callee.clone()
        copy.name = self._fresh_name(callee)
        for name in graphs:
            copy.attributes.pop(name, None)
        taken = {v.name for v in _defined(copy) if v.name}
        inputs = _captured_inputs(copy, graphs, taken)
        taken |= {value.name for value in inputs.values() if value.name}
        forwarded = self.forwarded[copy] = _forwarded_attributes(copy, graphs)
        _substitute_graphs(copy, graphs, inputs, forwarded, taken)
        _import_opsets(copy, graphs, root)
        self.model.functions[copy.identifier()] = copy
        logger.debug("Specialized function %r as %r", callee.name, copy.name)
        return copy

    def _fresh_name(self, callee: ir.Function) -> str:
        k = 0
        while True:
            k += 1
            name = f"{callee.name}_{k}"
            if (callee.domain, name, callee.overload) not in self.model.functions:
                return name


def _captured_inputs(
    copy: ir.Function, graphs: dict[str, ir.Graph], taken: set[str]
) -> dict[ir.Value, ir.Value]:
    """A new input of ``copy`` for each outer value the graphs read, in the
    order the call site passes them (renamed where ``copy`` has the name)."""
    inputs: dict[ir.Value, ir.Value] = {}
    for graph in graphs.values():
        for outer in _captured(graph):
            if outer not in inputs:
                value = ir.Value(name=outer.name, type=outer.type, shape=outer.shape)
                if value.name in taken:
                    fresh(value, value.name)
                inputs[outer] = value
                copy.inputs.append(value)
    return inputs


def _forwarded_attributes(copy: ir.Function, graphs: dict[str, ir.Graph]) -> _Forwarded:
    """The caller's attributes the graphs read (``@alpha``), declared by ``copy``
    too (renamed where it has one of that name) for the call to hand them on."""
    forwarded: _Forwarded = {}
    for graph in graphs.values():
        for inner in nodes_within(graph):
            for attr in inner.attributes.values():
                read = attr.ref_attr_name
                if read is not None and read not in forwarded:
                    name = _free_attribute_name(copy, read)
                    copy.attributes[name] = ir.Attr(name, ir.AttributeType.UNDEFINED, None)
                    forwarded[read] = (name, attr.type)
    return forwarded


def _free_attribute_name(copy: ir.Function, read: str) -> str:
    name, k = read, 0
    while name in copy.attributes:
        k += 1
        name = f"{read}_{k}"
    return name


def _substitute_graphs(
    copy: ir.Function,
    graphs: dict[str, ir.Graph],
    inputs: dict[ir.Value, ir.Value],
    forwarded: _Forwarded,
    taken: set[str],
) -> None:
    """Put a copy of each graph argument where ``copy``'s nodes refer to it."""
    sites = [
        (inner, attr.name, graphs[attr.ref_attr_name])
        for inner in nodes_within(copy)
        for attr in inner.attributes.values()
        if attr.ref_attr_name is not None and attr.ref_attr_name in graphs
    ]
    for inner, attr_name, graph in sites:
        body = graph.clone(allow_outer_scope_values=True)
        for value in _defined(body):
            if value.name in taken:
                fresh(value, value.name)
        for reader in nodes_within(body):
            _rebind_reader(reader, inputs, forwarded)
        inner.attributes[attr_name] = ir.Attr(attr_name, ir.AttributeType.GRAPH, body)


def _rebind_reader(
    reader: ir.Node, inputs: dict[ir.Value, ir.Value], forwarded: _Forwarded
) -> None:
    """Make ``reader`` read the copy's inputs and attributes, not the caller's."""
    for index, used in enumerate(reader.inputs):
        if used is not None and used in inputs:
            reader.replace_input_with(index, inputs[used])
    for ref in list(reader.attributes.values()):
        if ref.ref_attr_name is not None:
            name = forwarded[ref.ref_attr_name][0]
            if name != ref.ref_attr_name:
                reader.attributes[ref.name] = ir.RefAttr(ref.name, name, ref.type)


def _import_opsets(copy: ir.Function, graphs: dict[str, ir.Graph], root: GraphLike) -> None:
    """``copy`` imports each domain the graphs use, at the caller's version."""
    for graph in graphs.values():
        for inner in nodes_within(graph):
            if inner.domain not in copy.opset_imports:
                version = root.opset_imports.get(inner.domain)
                if version is not None:
                    copy.opset_imports[inner.domain] = version


def _bytes_of(graph: ir.Graph) -> bytes:
    return ir.serde.serialize_graph(graph).SerializeToString(deterministic=True)


def _defined(owner: GraphLike) -> Iterator[ir.Value]:
    """Every value defined in ``owner`` or in the graphs nested in it."""
    for graph in graphs_within(owner):
        yield from graph.inputs
        if isinstance(graph, ir.Graph):
            yield from graph.initializers.values()
        for node in graph:
            yield from node.outputs


def _captured(graph: ir.Graph) -> list[ir.Value]:
    """The values ``graph`` reads from its caller's scopes, in the order it reads them."""
    defined = set(_defined(graph))
    return list(
        dict.fromkeys(
            value
            for node in nodes_within(graph)
            for value in node.inputs
            if value is not None and value not in defined
        )
    )


def _detach(graph: ir.Graph) -> None:
    """Drop a graph's reads of outer values, so they are not counted as uses."""
    for node in nodes_within(graph):
        for index in range(len(node.inputs)):
            node.replace_input_with(index, None)
