"""SequenceMap, planned and written in one of five forms.

:mod:`lowering.passes.lower_sequence_maps` plans every map (:mod:`.plan`),
chooses a strategy for each and calls the module of :mod:`.strategies` that
writes it; :mod:`.uniform_shapes` decides which results have one shape, and
:mod:`.stack_reads` lets a sequence's readers read the stack of its elements.
"""
