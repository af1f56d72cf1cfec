"""IR utilities the passes share: walking, naming, building and folding nodes.

One copy of each mechanism: the walker (:mod:`.walk`), fresh names
(:mod:`.naming`), node building (:mod:`.nodes`, :mod:`.constants`,
:mod:`.axes`), op facts (:mod:`.op_facts`), scopes (:mod:`.scopes`),
constant evaluation (:mod:`.static_values`), folding (:mod:`.static_fold`),
the Identities a rewrite made that may go (:mod:`.identities`),
per-node shape inference (:mod:`.node_inference`), the spec's own dim
arithmetic (:mod:`.shapes`), sequence positions counted from the end
(:mod:`.positions`) and the transaction (:mod:`.snapshot`). Nothing here
imports a pass.
"""
