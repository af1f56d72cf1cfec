"""One module per form a SequenceMap can be lowered to, fastest first.

- :mod:`.vectorize`: the body once, on the stacked elements (no loop);
- :mod:`.unroll`: one copy of the body per element of a static length;
- :mod:`.scan`: split -> map -> concat as one Scan;
- :mod:`.scan_outputs` (the strategy ``uniform``): a Loop whose scan outputs stack
  results of one shape;
- :mod:`.loop`: the general Loop over sequences (always correct, O(n^2)).
"""
