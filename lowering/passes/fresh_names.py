"""Unique names for what a caller built: :func:`lowering.irutils.naming.name_fresh` as a pass.

Every pass of the package names what it creates itself. This pass is for
an exporter that builds nodes of its own with
:func:`lowering.irutils.naming.fresh` (or leaves values unnamed) between
them: it names them so that no name repeats anywhere in the model::

    fresh(Node("", "Add", ...))      ->   Add  -> add_1   (its output: add_1 too)
    an unnamed value                 ->   named after its producer
    an inner name hiding an outer    ->   renamed
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.irutils.naming import name_fresh
from lowering.irutils.walk import duplicate_names


class FreshNamesPass(ir.passes.InPlacePass):
    """Name every fresh or unnamed value, and every fresh node, uniquely in the model."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, modified=name_fresh(model))

    def ensures(self, model: ir.Model) -> None:
        if repeated := duplicate_names(model):
            raise ir.passes.PostconditionError(f"names defined twice: {sorted(repeated)[:5]}")
