"""The strategies a SequenceMap can be lowered with, one module each.

:mod:`lowering.sequence_map` plans every map (:mod:`.plan`), chooses a
strategy for each and calls the module that writes it:

- :mod:`.vectorize`: the body once, on the stacked elements (no loop);
- :mod:`.unroll`: one copy of the body per element of a static length;
- :mod:`.split_map_concat`: split -> map -> concat as one Scan;
- :mod:`.scan_outputs`: a Loop whose scan outputs stack uniform results
  (:mod:`.uniform_shapes` decides which are uniform);
- :mod:`.sequence_loop`: the general Loop over sequences.
"""
