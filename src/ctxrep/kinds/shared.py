"""What several task kinds share: words and their spans, the pair vector, the span search, the
degeneracy rule over labels, label-set sizes and the probes' item matrices.

- :func:`words_with_spans`: whitespace words and their character spans;
- :func:`target_word`: the word a word-in-context example asks about;
- :func:`word_at`: the word covering (or preceding) a character;
- :func:`best_span`: the answer search, ``argmax_{i <= j < i + max_len} start_i + end_j``;
- :func:`pair_features` / :func:`pair_vector`: ``[u; v; |u - v|; u * v]`` (torch / numpy);
- :func:`labels_degenerate`: one label for (nearly) every prediction;
- :func:`label_count`: the classes of a ``ClassLabel`` column (or a list of them);
- :class:`ProbeData`: one split's probe items, per layer.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

_WORD = re.compile(r"\S+")


def words_with_spans(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Whitespace words and their character spans (the task texts are already tokenized, or
    — SQuAD, SICK — close enough that whitespace words keep answer spans recoverable)."""
    spans = [m.span() for m in _WORD.finditer(text)]
    return [text[s:e] for s, e in spans], spans


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


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """[u; v; |u − v|; u * v] along the last axis, the standard sentence-pair matching vector
    (Conneau et al. 2017): (..., H), (..., H) → (..., 4H)."""
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


def pair_vector(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """:func:`pair_features` of two numpy arrays, in float32 (the probes' items). Each element
    is one IEEE float32 subtraction, absolute value or product, so numpy and torch agree bit
    for bit."""
    u, v = u.astype(np.float32), v.astype(np.float32)
    return pair_features(torch.from_numpy(u), torch.from_numpy(v)).numpy()


def label_count(dataset, column: str) -> int:
    """Classes of ``column``: a ``ClassLabel``, or a list of ``ClassLabel`` (tags)."""
    feature = dataset.features[column]
    feature = getattr(feature, "feature", feature)        # a list of ClassLabel (tags)
    if not hasattr(feature, "num_classes"):
        raise ValueError(f"{column}: expected a ClassLabel column (canonical schema), got "
                         f"{feature}")
    return feature.num_classes


# a seed that gives one label to at least this share of its predictions learned only the prior
DEGENERATE_SHARE = 0.95


def labels_degenerate(labels: list, gold: list) -> bool:
    """Whether predicted ``labels`` are (nearly) one label: at most one distinct label, or the
    most frequent predicted label ``y`` takes a share ``p`` of the predictions with
    ``p >= max(95 %, (1 + g) / 2)``, ``g`` being the share of ``y`` in ``gold`` (0 when
    ``gold`` is empty).

    The 95 % floor flags a seed that gives one class to 98.1 % of the examples, and, on a
    binary task, one whose other class rate is below 5 % (1.3 % positive predictions, F1 5.0):
    with two classes "minority rate < 5 %" and "majority share > 95 %" are the same rule. The
    gold term only matters where the gold is itself dominated by one label: there the seed
    must predict fewer than half as many of the other labels as the gold holds
    (``1 - p < (1 - g) / 2``) before it is called degenerate, so a tagger that follows an
    'O'-heavy gold is not. Why not a flat 95 % on tags: a dataset whose gold is 97 % 'O' would
    flag every good tagger. Why not exempt 'O' outright: CoNLL-2003 NER gold is about 83 % 'O',
    so a tagger that puts 'O' on 96 % of the tokens tags at most 4 % of them as entities where
    the gold has 17 %: at least three entity tokens in four missed, which is the prior with a
    little noise, and it is flagged (threshold max(95 %, 91.5 %)); a reasonable tagger (about
    83-88 % 'O') is not."""
    counts = Counter(labels)
    if len(counts) <= 1:
        return True
    label, n = counts.most_common(1)[0]
    gold_share = gold.count(label) / len(gold) if gold else 0.0
    return n / len(labels) >= max(DEGENERATE_SHARE, (1 + gold_share) / 2)


# --------------------------------------------------------------------------------------------
# probe items


@dataclass
class ProbeData:
    """One split's probe items: ``x`` (n_layers, n_items, dim) and ``y`` (n_items,) labels;
    ``sizes[e]`` items come from example ``e`` (a sentence's words; 1 for a pair)."""

    x: np.ndarray
    y: np.ndarray
    sizes: list[int]

    @property
    def n_items(self) -> int:
        return len(self.y)

    @property
    def n_examples(self) -> int:  # sentences (tagging) or pairs (word in context) of the items
        return len(self.sizes)

    def per_example(self, items: np.ndarray) -> list:
        """Item values regrouped by example: a list per sentence (tagging), a value per pair."""
        if all(size == 1 for size in self.sizes):
            return items.tolist()
        bounds = np.cumsum([0, *self.sizes])
        return [items[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]


def example_order(n: int, seed: int | None) -> np.ndarray:
    """All example indices, shuffled with ``seed`` (training) or in order (``None``: evaluation)."""
    return np.arange(n) if seed is None else np.random.default_rng(seed).permutation(n)


def check_aligned(features, split, where: str) -> None:
    """Stop unless the data set ``split`` has an example for each of ``features``' examples."""
    if len(features) > len(split):
        raise ValueError(f"{where}: features for {len(features)} examples but the data set split "
                         f"has {len(split)} (features and data set are out of sync; rerun extract)")
