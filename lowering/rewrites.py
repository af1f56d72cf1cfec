"""What a pass rewrote, and what it left as written, for the CLI's summary and ``-v`` report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Literal

import onnx
import onnx_ir as ir

from lowering.irutils.op_facts import LOOP_OPS, SEQUENCE_OPS


@dataclasses.dataclass
class Rewrite:
    """One rewritten node: where it was, how it was rewritten, what replaced it.

    Attributes:
        scope: The graph or function the node sat in, for humans.
        node_name: The node's name ("" if it had none).
        op_type: The rewritten node's op: "SequenceMap", "SequenceInsert", an
            accumulator "Loop", or the sequence op a chain's node became a tensor op for.
        original: The node as it was, serialized before the rewrite, when
            the pass was asked to keep it (it costs a copy of the body).
        written: The nodes the rewrite wrote in its place; :attr:`new_nodes`
            is those still in the model (a later pass may remove some).
        strategy: How it was rewritten (e.g. "loop", "uniform").
        reason: Why that strategy was chosen.
        rejected_by: The runtimes (:mod:`lowering.runtimes.profiles`) that cannot run
            the loop or sequence ops the rewrite added and the model still
            holds (a later pass may remove some), each with the first such
            op, such as "tract (Loop)"; empty when all of them can.
            :attr:`rejections` is the same as pairs, ``("tract", "Loop")``.
    """

    scope: str
    node_name: str
    op_type: str
    original: onnx.NodeProto | None = dataclasses.field(repr=False)
    written: list[ir.Node] = dataclasses.field(repr=False)
    strategy: str = ""
    reason: str = ""
    rejecting: Callable[[], list[tuple[str, str]]] = dataclasses.field(
        default=list, repr=False, compare=False
    )

    @property
    def new_nodes(self) -> list[ir.Node]:
        """The nodes that replaced it and are still in the model (render after names are fixed)."""
        return [node for node in self.written if node.graph is not None]

    @property
    def rejections(self) -> list[tuple[str, str]]:
        """Asked when read: what the model holds then, not what the pass first wrote."""
        return self.rejecting()

    @property
    def rejected_by(self) -> list[str]:
        """:attr:`rejections` as the summary says them: "tract (Loop)"."""
        return spelled(self.rejections)

    def explained(self) -> str:
        """The strategy's reason, and which runtimes will reject the result."""
        return explained(self.reason, self.rejections)

    def before(self) -> str:
        """The rewritten node in ONNX text syntax, if it was kept."""
        return "" if self.original is None else onnx.printer.to_text(self.original)

    def after(self) -> str:
        """The replacement in ONNX text syntax."""
        return "".join(onnx.printer.to_text(ir.serde.serialize_node(n)) for n in self.new_nodes)


@dataclasses.dataclass(frozen=True)
class Kept:
    """A SequenceInsert whose position, or a Loop whose accumulator, was left as written, and why.

    Attributes:
        scope: The graph or function the node sits in, for humans.
        node_name: The node's name ("" if it has none).
        reason: Why it was left: the runtime lacks an op that every form of
            its position needs, such as "mnn has no SequenceLength"; for a
            Loop, which sequence stays and why no form serves it, such as
            "'acc' stays a sequence: the element's rank is not proven".
        op_type: "SequenceInsert" or "Loop".
    """

    scope: str
    node_name: str
    reason: str
    op_type: str = "SequenceInsert"


@dataclasses.dataclass(frozen=True)
class Conversion:
    """What ``target_opset`` expanded into ONNX function bodies or adapted.

    ``what``: the op and version expanded (``"Gelu-20"``) or the adapter's
    label; ``count``: how many nodes.
    """

    how: Literal["expanded", "adapted"]
    what: str
    count: int

    def __str__(self) -> str:
        return f"{self.what} x{self.count}"


@dataclasses.dataclass
class LoweringResult(ir.passes.PassResult):
    """What a pass of this package returns: onnx_ir's result, what it rewrote
    and what it left as written.

    Attributes:
        rewrites: One :class:`Rewrite` per node rewritten, in the order done.
        kept: One :class:`Kept` per node that a pass would have rewritten but
            left as written, since ``--runtime`` lacks an op every form of it
            needs (:class:`lowering.NormalizeSequenceInsertPass`'s positions),
            or since no form serves a sequence a Loop accumulates where the
            target has no sequences (:class:`lowering.LowerAccumulatorLoopsPass`),
            in the order found.
        conversions: What :class:`lowering.TargetOpsetPass` expanded or adapted.
        not_optimized: Why :class:`lowering.OptimizePass`'s result was dropped (it
            failed the ONNX checker, so the model was kept unoptimized); else None.
    """

    rewrites: list[Rewrite] = dataclasses.field(default_factory=list)
    kept: list[Kept] = dataclasses.field(default_factory=list)
    conversions: list[Conversion] = dataclasses.field(default_factory=list)
    not_optimized: str | None = None


def stays(kept: Sequence[Kept]) -> str:
    """Why each Loop accumulator in ``kept`` stays a sequence, in one phrase ("" if none):
    what a refusal for a target without sequences adds."""
    return "; ".join(k.reason for k in kept if k.op_type == "Loop")


def spelled(rejections: list[tuple[str, str]]) -> list[str]:
    """``[("tract", "Loop")]`` as the summary says it: ``["tract (Loop)"]``."""
    return [f"{runtime} ({op})" for runtime, op in rejections]


def explained(reason: str, rejections: list[tuple[str, str]]) -> str:
    """A rewrite's reason and the runtimes (or releases) that reject its form, as the
    summary says them (one copy, for :class:`Rewrite` and :class:`lowering.report.Node`)."""
    loops = [(r, op) for r, op in rejections if op in LOOP_OPS or op in SEQUENCE_OPS]
    others = [pair for pair in rejections if pair not in loops]
    said = [reason] if reason else []
    if loops:
        said.append("not loop-free or sequence-free, so rejected by " + ", ".join(spelled(loops)))
    if others:
        said.append("rejected by " + ", ".join(spelled(others)))
    return "; ".join(said)
