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
- :func:`is_degenerate`: a model that predicts (nearly) one label, or one score, for
  everything.
"""

from __future__ import annotations

import math
import re
import statistics
from bisect import bisect_right
from collections import Counter

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


# a seed that gives one label to at least this share of its predictions learned only the prior
DEGENERATE_SHARE = 0.95
# regression: predictions whose spread is below this share of the gold spread are a constant
NEAR_CONSTANT = 0.01


def is_degenerate(kind: str, predictions: list, references: list | None = None) -> bool:
    """Whether a seed learned (next to) nothing but the prior: one label, or one score, for
    (nearly) every example. ``predictions`` and ``references`` (the gold, optional) are in the
    same form, e.g. both as :func:`~ctxrep.transfer.scoring.readable` saves them.

    - Labels (classification, pair classification, word in context) and tags (tagging, over
      every token of every sentence): degenerate when at most one distinct label is predicted,
      or when the most frequent predicted label ``y`` takes a share ``p`` of the predictions
      with ``p >= max(95 %, (1 + g) / 2)``, ``g`` being the gold share of ``y`` (0 without
      ``references``). The 95 % floor flags a seed that gives one class to 98.1 % of the
      examples, and, on a binary task, one whose other class rate is below 5 % (1.3 % positive
      predictions, F1 5.0): with two classes "minority rate < 5 %" and "majority share > 95 %"
      are the same rule. The gold term only matters where the gold is itself dominated by one
      label: there the seed must predict fewer than half as many of the other labels as the
      gold holds (``1 - p < (1 - g) / 2``) before it is called degenerate, so a tagger that
      follows an 'O'-heavy gold is not. Why not a flat 95 % on tags: a dataset whose gold is
      97 % 'O' would flag every good tagger. Why not exempt 'O' outright: CoNLL-2003 NER gold is
      about 83 % 'O', so a tagger that puts 'O' on 96 % of the tokens tags at most 4 % of them
      as entities where the gold has 17 %: at least three entity tokens in four missed, which
      is the prior with a little noise, and it is flagged (threshold max(95 %, 91.5 %)); a
      reasonable tagger (about 83-88 % 'O') is not.
    - Regression: one value for every pair, or (with ``references``) predictions whose
      population standard deviation is below 1 % of the gold's: a near-constant score.
    - Span QA: never (answers are texts of each context, not labels from one set)."""
    if kind == "regression":
        values = [float(x) for x in predictions]
        if len(set(values)) <= 1:
            return True
        if not references:
            return False
        spread = statistics.pstdev(float(x) for x in references)
        return spread > 0 and statistics.pstdev(values) < NEAR_CONSTANT * spread
    if kind in LABEL_KINDS:
        labels, gold = list(predictions), list(references or [])
    elif kind == "tagging":
        labels = [t for tags in predictions for t in tags]
        gold = [t for tags in references or [] for t in tags]
    else:
        return False
    counts = Counter(labels)
    if len(counts) <= 1:
        return True
    label, n = counts.most_common(1)[0]
    gold_share = gold.count(label) / len(gold) if gold else 0.0
    return n / len(labels) >= max(DEGENERATE_SHARE, (1 + gold_share) / 2)
