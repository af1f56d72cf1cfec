"""Loops that build sequences of their own: accumulator loops (docs/strategies.md).

:mod:`lowering.loops.accumulators` finds them and plans, before anything is
changed, the form each accumulated sequence gets;
:mod:`lowering.loops.rewrite` writes it.
"""
