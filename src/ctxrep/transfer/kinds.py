"""What a task kind means to every transfer path, in one place.

The canonical columns of each kind are in :mod:`ctxrep.data.schemas`; this module holds what
the feature-based path (:mod:`~ctxrep.transfer.feature_train`), fine-tuning
(:mod:`~ctxrep.transfer.finetune_tasks`), the probes (:mod:`~ctxrep.transfer.probe`) and the
cell record (:mod:`~ctxrep.transfer.cell`) must agree on:

- ``FIELDS[kind]``: the text fields whose words get features, in order;
- :func:`n_labels`: the size of the label set a head predicts (0 for scores and spans);
- :func:`target_word`: the word a word-in-context example asks about;
- :func:`word_at` / :func:`answer_words`: a span QA answer as first and last word;
- :func:`best_span`: the answer search, ``argmax_{i <= j < i + max_len} start_i + end_j``;
- :func:`is_degenerate`: a model that predicts one label (or one score) for everything.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right

import torch

FIELDS = {"classification": ("text",), "pair_classification": ("text", "text_pair"),
          "regression": ("text", "text_pair"),
          "tagging": ("tokens",), "word_in_context": ("sentence1", "sentence2"),
          "span_qa": ("question", "context")}
# kinds whose prediction is one label id per example
LABEL_KINDS = ("classification", "pair_classification", "word_in_context")

_WORD = re.compile(r"\S+")


def words_with_spans(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Whitespace words and their character spans (the task texts are already tokenized, or
    — SQuAD, SICK — close enough that whitespace words keep answer spans recoverable)."""
    spans = [m.span() for m in _WORD.finditer(text)]
    return [text[s:e] for s, e in spans], spans


def n_labels(kind: str, dataset) -> int:
    """Classes of the kind's label column (``label``, or ``tags`` for tagging); 0 where the
    kind predicts a score (regression) or a span (span QA)."""
    column = "tags" if kind == "tagging" else "label"
    if kind in ("regression", "span_qa"):
        return 0
    feature = dataset.features[column]
    feature = getattr(feature, "feature", feature)        # a list of ClassLabel (tags)
    if not hasattr(feature, "num_classes"):
        raise ValueError(f"{column}: expected a ClassLabel column (canonical schema), got "
                         f"{feature}")
    return feature.num_classes


def target_word(sentence: str, start: int) -> int:
    """Index of the whitespace word whose character span contains ``start`` (word in context:
    the target word's first character)."""
    for index, (begin, end) in enumerate(words_with_spans(sentence)[1]):
        if begin <= start < end:
            return index
    raise ValueError(f"no word of {sentence[:60]!r} covers character {start}")


def word_at(spans: list[tuple[int, int]], char: int) -> int:
    """Index of the word whose span contains (or, in the gap after it, precedes) character
    ``char``: answer boundaries may fall on punctuation or spaces."""
    starts = [s for s, _ in spans]
    i = max(0, bisect_right(starts, char) - 1)
    return min(i, len(spans) - 1)


def answer_words(context: str, answers: dict) -> tuple[int, int, list[tuple[int, int]]]:
    """The first answer of a span QA example as (first word, last word) of ``context``, and
    the context's word spans."""
    spans = words_with_spans(context)[1]
    start = answers["answer_start"][0]
    end = start + len(answers["text"][0]) - 1
    return word_at(spans, start), word_at(spans, end), spans


def best_span(start_logits: torch.Tensor, end_logits: torch.Tensor,
              max_len: int) -> tuple[float, int, int]:
    """max over first <= last < first + max_len of start[first] + end[last] -> (score, first,
    last)."""
    n = len(start_logits)
    scores = start_logits[:, None] + end_logits[None, :]
    first, last = torch.arange(n)[:, None], torch.arange(n)[None, :]
    scores = scores.masked_fill((last < first) | (last - first >= max_len), -math.inf)
    best = int(scores.argmax())
    return float(scores.flatten()[best]), best // n, best % n


def is_degenerate(kind: str, predictions: list) -> bool:
    """One label (or one score) for every example (or every word): the model learned only the
    prior."""
    if kind in (*LABEL_KINDS, "regression"):
        return len(set(predictions)) <= 1
    if kind == "tagging":
        return len({t for tags in predictions for t in tags}) <= 1
    return False
