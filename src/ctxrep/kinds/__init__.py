"""Task kinds: one module per kind owns everything the kind means (see
:mod:`~ctxrep.kinds.interface` for what each defines), and this registry maps a kind's name to
its module. Every transfer path, the scoring, the baselines and the probes ask
``kinds.get(kind)``; none compares kind names.

    classification        one text → a label                (kinds/classification.py)
    pair_classification   two texts → a label               (kinds/pair_classification.py)
    regression            two texts → a score               (kinds/regression.py)
    tagging               a tag per word                    (kinds/tagging.py)
    word_in_context       a word in two sentences → same sense?  (kinds/word_in_context.py)
    span_qa               a question → a span of the context (kinds/span_qa.py)

Adding a kind: one new module defining :data:`~ctxrep.kinds.interface.ATTRIBUTES`, and its
entry in :data:`KINDS`. What the kinds share (word spans, the pair vector, the span search, the
label degeneracy rule, probe items) is in :mod:`~ctxrep.kinds.shared`.
"""

from __future__ import annotations

from types import ModuleType

from ctxrep.kinds import (classification, pair_classification, regression, span_qa, tagging,
                          word_in_context)
from ctxrep.kinds.interface import ATTRIBUTES
from ctxrep.kinds.shared import (best_span, pair_features, pair_vector, target_word, word_at,
                                 words_with_spans)

KINDS: dict[str, ModuleType] = {
    module.NAME: module for module in (classification, pair_classification, regression,
                                       tagging, word_in_context, span_qa)}


def get(kind: str) -> ModuleType:
    """The module of task kind ``kind``."""
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {list(KINDS)}")
    return KINDS[kind]


__all__ = ["ATTRIBUTES", "KINDS", "get", "best_span", "pair_features", "pair_vector",
           "target_word", "word_at", "words_with_spans"]
