"""SequenceInsert golden cases: each kind of position beside its canonical rewrite.

Read by the insert tests (tests/test_sequence_insert.py) and, as a corpus of
models, by the pass contracts. A text without its own header takes ``H``.
"""

from __future__ import annotations

F2 = "float[2]"
H = '<ir_version: 8, opset_import: ["" : 17]>'
H12 = '<ir_version: 7, opset_import: ["" : 12]>'
STATIC3 = "s = SequenceConstruct(a, b, c)"
SIG = f"({F2} a, {F2} b, {F2} c, {F2} x, seq({F2}) d, seq({F2}) a_seq{{extra}}) => (seq({F2}) y)"

# Each kind of position beside its fewest-nodes canonical rewrite.
GOLDEN = {
    "append_at_known_length_is_dropped": (
        f"g {SIG.format(extra='')} <int32 p = {{3}}> {{ {STATIC3}  y = SequenceInsert(s, x, p) }}",
        f"g {SIG.format(extra='')} <int32 p = {{3}}> {{ {STATIC3}  y = SequenceInsert(s, x) }}",
    ),
    "negative_at_known_length_is_folded": (
        f"g {SIG.format(extra='')} <int64[1] p = {{-2}}> {{ {STATIC3}  y = SequenceInsert(s, x, p) }}",
        f"""g {SIG.format(extra="")} <int64[1] p = {{-2}}> {{ {STATIC3}
              q = Constant <value = int64 {{1}}> ()
              y = SequenceInsert(s, x, q) }}""",
    ),
    "canonical_is_left_alone": (
        f"g {SIG.format(extra='')} <int64 p = {{1}}> {{ {STATIC3}  y = SequenceInsert(s, x, p) }}",
        f"g {SIG.format(extra='')} <int64 p = {{1}}> {{ {STATIC3}  y = SequenceInsert(s, x, p) }}",
    ),
    # 0 may be n too: on an empty sequence it is the end.
    "zero_constant_unknown_length_is_guarded_against_n": (
        f"g {SIG.format(extra='')} <int32[1] p = {{0}}> {{ y = SequenceInsert(d, x, p) }}",
        f"""g {SIG.format(extra="")} <int32[1] p = {{0}}> {{
              q = Constant <value = int64 {{0}}> ()
              n = SequenceLength(d)
              is_end = Equal(q, n)
              y = If (is_end) <
                then_branch = append () => (seq({F2}) appended) {{ appended = SequenceInsert(d, x) }},
                else_branch = insert () => (seq({F2}) inserted) {{
                  inserted = SequenceInsert(d, x, q) }}> }}""",
    ),
    "positive_constant_unknown_length_is_guarded_against_n": (
        f"g {SIG.format(extra='')} <int32[1] p = {{2}}> {{ y = SequenceInsert(d, x, p) }}",
        f"""g {SIG.format(extra="")} <int32[1] p = {{2}}> {{
              q = Constant <value = int64 {{2}}> ()
              n = SequenceLength(d)
              is_end = Equal(q, n)
              y = If (is_end) <
                then_branch = append () => (seq({F2}) appended) {{ appended = SequenceInsert(d, x) }},
                else_branch = insert () => (seq({F2}) inserted) {{
                  inserted = SequenceInsert(d, x, q) }}> }}""",
    ),
    "positive_constant_unknown_length_below_opset_13_gets_dtype_and_shape_only": (
        f"{H12} g {SIG.format(extra='')} <int32[1] p = {{2}}> {{ y = SequenceInsert(d, x, p) }}",
        f"""{H12} g {SIG.format(extra="")} <int32[1] p = {{2}}> {{
              q = Constant <value = int64 {{2}}> ()
              y = SequenceInsert(d, x, q) }}""",
    ),
    # Only where p is in [-n, 0): below -n, p stays out of range for the runtime to refuse.
    "negative_constant_unknown_length_adds_the_length": (
        f"g {SIG.format(extra='')} <int64 p = {{-1}}> {{ y = SequenceInsert(d, x, p) }}",
        f"""g {SIG.format(extra="")} <int64 p = {{-1}}> {{
              n = SequenceLength(d)
              zero = Constant <value = int64 {{0}}> ()
              shifted = Add(p, n)
              below = Less(shifted, zero)
              q = Where(below, p, shifted)
              y = SequenceInsert(d, x, q) }}""",
    ),
    "negative_int32_constant_unknown_length_adds_the_length": (
        f"g {SIG.format(extra='')} <int32[1] p = {{-2}}> {{ y = SequenceInsert(d, x, p) }}",
        f"""g {SIG.format(extra="")} <int32[1] p = {{-2}}> {{
              k = Constant <value = int64 {{-2}}> ()
              n = SequenceLength(d)
              zero = Constant <value = int64 {{0}}> ()
              shifted = Add(k, n)
              below = Less(shifted, zero)
              q = Where(below, k, shifted)
              y = SequenceInsert(d, x, q) }}""",
    ),
    "dynamic_int64_scalar_is_guarded_against_n": (
        f"g {SIG.format(extra=', int64 p')} {{ y = SequenceInsert(d, x, p) }}",
        f"""g {SIG.format(extra=", int64 p")} {{
              n = SequenceLength(d)
              is_end = Equal(p, n)
              y = If (is_end) <
                then_branch = append () => (seq({F2}) appended) {{ appended = SequenceInsert(d, x) }},
                else_branch = insert () => (seq({F2}) inserted) {{
                  zero = Constant <value = int64 {{0}}> ()
                  shifted = Add(p, n)
                  neg = Less(p, zero)
                  wrapped = Where(neg, shifted, p)
                  below = Less(shifted, zero)
                  q = Where(below, p, wrapped)
                  inserted = SequenceInsert(d, x, q) }}> }}""",
    ),
    "dynamic_int32_of_shape_1_gets_every_fix": (
        f"g {SIG.format(extra=', int32[1] p')} {{ y = SequenceInsert(d, x, p) }}",
        f"""g {SIG.format(extra=", int32[1] p")} {{
              p64 = Cast <to = 7> (p)
              shape = Constant <value = int64[0] {{}}> ()
              scalar = Reshape(p64, shape)
              n = SequenceLength(d)
              is_end = Equal(scalar, n)
              y = If (is_end) <
                then_branch = append () => (seq({F2}) appended) {{ appended = SequenceInsert(d, x) }},
                else_branch = insert () => (seq({F2}) inserted) {{
                  zero = Constant <value = int64 {{0}}> ()
                  shifted = Add(scalar, n)
                  neg = Less(scalar, zero)
                  wrapped = Where(neg, shifted, scalar)
                  below = Less(shifted, zero)
                  q = Where(below, scalar, wrapped)
                  inserted = SequenceInsert(d, x, q) }}> }}""",
    ),
    "dynamic_non_negative_is_guarded_without_where": (
        f"g {SIG.format(extra='')} {{ k = SequenceLength(d)  y = SequenceInsert(a_seq, x, k) }}",
        f"""g {SIG.format(extra="")} {{ k = SequenceLength(d)
              n = SequenceLength(a_seq)
              is_end = Equal(k, n)
              y = If (is_end) <
                then_branch = append () => (seq({F2}) appended) {{ appended = SequenceInsert(a_seq, x) }},
                else_branch = insert () => (seq({F2}) inserted) {{
                  inserted = SequenceInsert(a_seq, x, k) }}> }}""",
    ),
    "below_opset_13_a_dynamic_position_keeps_where_only": (
        f"""{H12} g {SIG.format(extra=", int64 p")} {{ y = SequenceInsert(d, x, p) }}""",
        f"""{H12} g {SIG.format(extra=", int64 p")} {{
              n = SequenceLength(d)
              zero = Constant <value = int64 {{0}}> ()
              shifted = Add(p, n)
              neg = Less(p, zero)
              wrapped = Where(neg, shifted, p)
              below = Less(shifted, zero)
              q = Where(below, p, wrapped)
              y = SequenceInsert(d, x, q) }}""",
    ),
    "squeezed_constant_appending_at_known_length_is_dropped_with_its_chain": (
        f"""g {SIG.format(extra="")} {{ {STATIC3}
              k = Constant <value = int64[1] {{3}}> ()
              axes = Constant <value = int64[1] {{0}}> ()
              p = Squeeze(k, axes)
              y = SequenceInsert(s, x, p) }}""",
        f"g {SIG.format(extra='')} {{ {STATIC3}  y = SequenceInsert(s, x) }}",
    ),
    "reshaped_cast_constant_is_folded": (
        f"""g {SIG.format(extra="")} {{ {STATIC3}
              k = Constant <value = int32[1, 1] {{-1}}> ()
              shape = Constant <value = int64[0] {{}}> ()
              r = Reshape(k, shape)
              p = Cast <to = 7> (r)
              y = SequenceInsert(s, x, p) }}""",
        f"""g {SIG.format(extra="")} {{ {STATIC3}
              q = Constant <value = int64 {{2}}> ()
              y = SequenceInsert(s, x, q) }}""",
    ),
    "overridable_initializer_is_not_a_constant": (
        f"""g ({F2} a, {F2} b, {F2} c, {F2} x, int64 p) => (seq({F2}) y) <int64 p = {{3}}> {{
              {STATIC3}  y = SequenceInsert(s, x, p) }}""",
        f"""g ({F2} a, {F2} b, {F2} c, {F2} x, int64 p) => (seq({F2}) y) <int64 p = {{3}}> {{
              {STATIC3}
              n = Constant <value = int64 {{3}}> ()  # s's static length
              is_end = Equal(p, n)
              y = If (is_end) <
                then_branch = append () => (seq({F2}) appended) {{ appended = SequenceInsert(s, x) }},
                else_branch = insert () => (seq({F2}) inserted) {{
                  zero = Constant <value = int64 {{0}}> ()
                  shifted = Add(p, n)
                  neg = Less(p, zero)
                  wrapped = Where(neg, shifted, p)
                  below = Less(shifted, zero)
                  q = Where(below, p, wrapped)
                  inserted = SequenceInsert(s, x, q) }}> }}""",
    ),
    "dynamic_length_of_the_same_sequence_appends": (
        f"g {SIG.format(extra='')} {{ n = SequenceLength(d)  y = SequenceInsert(d, x, n) }}",
        f"g {SIG.format(extra='')} {{ n = SequenceLength(d)  y = SequenceInsert(d, x) }}",
    ),
    "constant_from_a_dead_constant_node_is_replaced": (
        f"""g {SIG.format(extra="")} {{ {STATIC3}
              p = Constant <value = int32 {{-3}}> ()
              y = SequenceInsert(s, x, p) }}""",
        f"""g {SIG.format(extra="")} {{ {STATIC3}
              q = Constant <value = int64 {{0}}> ()
              y = SequenceInsert(s, x, q) }}""",
    ),
}
