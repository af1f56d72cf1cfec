"""Sequences read as the tensors they hold, and sequence ops left unread removed.

:mod:`.reads` holds the rules (a producer and a reader -> a tensor form);
:mod:`.dead` removes what they leave without a use. The passes that apply
them: ``FoldInsertChainsPass`` (before the maps), ``EliminateSequencesPass``
(after them) and ``ReadSequencesPass`` (on a model whose maps were not lowered).
"""
