"""Long messages as warnings: one line per thought, cut between clauses when too long."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from webhook.admission.warning_texts import warning_texts

DENIAL = ("poolguard [protectedLast] would delete protected-pool pod llm-serve-7c9d8f6b5-x7k2p "
          "(node gpu-inf-1, pool inference) while llm-serve-7c9d8f6b5-k4z9s (node gpu-hyb-2, "
          "pool hybrid) outside protected pools survives; fix: scale to 4 replicas or more for "
          "now (the smallest count that removes no protected-pool pod); or give the pods "
          "outside protected pools a lower deletion cost than the protected ones, then retry")


# --- warnings: one per thought ----------------------------------------------------------


def test_a_long_thought_is_one_warning_cut_at_a_clause():
    [warning] = warning_texts([DENIAL], 256, 4096)
    assert warning == (
        "poolguard [protectedLast] would delete protected-pool pod llm-serve-7c9d8f6b5-x7k2p "
        "(node gpu-inf-1, pool inference) while llm-serve-7c9d8f6b5-k4z9s (node gpu-hyb-2, "
        "pool hybrid) outside protected pools survives ...")


@given(st.lists(st.text(alphabet=st.sampled_from("ab ,;.()\n\t\x00é"), max_size=600),
                max_size=30),
       st.integers(min_value=30, max_value=300), st.integers(min_value=0, max_value=5000))
def test_one_warning_per_text_within_the_limits(texts, limit, total):
    warnings = warning_texts(texts, limit, total)
    kept = [t for t in texts if " ".join(t.replace("\x00", " ").split())]
    assert warnings == warning_texts(kept[:len(warnings)], limit, total)  # in order, none split
    assert sum(map(len, warnings)) <= total
    for text, warning in zip(kept, warnings, strict=False):
        assert len(warning) <= limit
        assert not any(c in warning for c in "\n\t\x00")
        plain = " ".join(text.replace("\x00", " ").split())
        assert warning == plain or (warning.endswith(" ...") and len(plain) > limit)
