"""Declare the IR version: the lowest the content allows, or the one asked for.

A model converted to opset 11 is for old runtimes, and those refuse it by
its ``ir_version`` before reading anything else ("max supported IR
version: 8"; a torch export declares 10; docs/runtimes.md). So after
``--target-opset N`` the model declares the lowest IR version its content
allows (:func:`lowering.irutils.ir_versions.lowest_ir_version`: the
opsets it imports and the features it uses, from ONNX's own tables);
``--ir-version N`` declares N, refused in one line if the content needs
more::

    ir_version 10, opset 18    --target-opset 11    ir_version 6, opset 11
    local function inside      -------------------> ir_version 8, opset 11
                               --ir-version 7       refused: model-local
                                                    functions need IR 8

Only the ``ir_version`` field changes; nothing else is rewritten.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.errors import LoweringError
from lowering.irutils import ir_versions
from lowering.options import check_ir_version
from lowering.rewrites import LoweringResult


class IrVersionPass(ir.passes.InPlacePass):
    """Declare ``ir_version`` (None: the lowest the content allows).

    Raises :class:`LoweringError` (model unchanged) when the content needs
    more than ``ir_version``. Returns a :class:`LoweringResult` with no
    rewrites; ``modified`` when the declared version changed.
    """

    def __init__(self, ir_version: int | None = None) -> None:
        super().__init__()
        self.ir_version = check_ir_version(ir_version)

    def call(self, model: ir.Model) -> LoweringResult:
        if self.ir_version is None:
            declared = ir_versions.lowest_ir_version(model)
        else:
            problem = ir_versions.refusal(model, self.ir_version)
            if problem is not None:
                raise LoweringError(problem)
            declared = self.ir_version
        modified = model.ir_version != declared
        model.ir_version = declared
        return LoweringResult(model, modified=modified)

    def ensures(self, model: ir.Model) -> None:
        lowest = ir_versions.lowest_ir_version(model)
        if model.ir_version < lowest:
            raise ir.passes.PostconditionError(
                f"the model declares IR version {model.ir_version}; its content needs {lowest}"
            )
