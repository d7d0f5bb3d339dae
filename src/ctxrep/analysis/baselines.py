"""Trivial baselines, fitted on the training examples the methods train on and scored on the
same evaluation examples: a model that does not beat these has learned nothing worth reporting.

    majority   every example gets the most frequent training label (tagging: the most
               frequent tag, at every word)
    lookup     tagging: each word's most frequent training tag; unseen words get the most
               frequent tag overall (the classic POS baseline; ~90 % on full PTB)
    tfidf-lr   classification: TF-IDF of word 1–2-grams → logistic regression (scikit-learn);
               pairs (and word-in-context) put the two texts' vectors side by side
    mean       regression: every pair gets the mean training score (correlation 0 by definition
               of the metric: a constant prediction captures no relation)
    tfidf-ridge  regression: ridge regression on [tfidf(a); tfidf(b); tfidf(a) ⊙ tfidf(b);
               cosine(a, b)], the word-overlap signal a similarity model must beat
    window     span QA: the sliding-window baseline of Richardson et al. (2013), as in the SQuAD
               paper: the candidate span (≤ 3 words, question words excluded) whose window of
               ±``WINDOW`` words shares most distinct words with the question

Ties break toward the first label id / earliest span, so every baseline is deterministic.
Each returns predictions in the transfer's format (see ``ctxrep.kinds.interface``); which
baselines a task gets is its kind's ``baselines`` (``ctxrep.kinds.<kind>``).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

WINDOW = 10
MAX_SPAN_WORDS = 3
_WORD = re.compile(r"\S+")


def _most_common(counter: Counter):
    """The most frequent key; ties → the smallest key (deterministic)."""
    best = max(counter.values())
    return min(k for k, v in counter.items() if v == best)


def majority(train_labels: list[int], n_eval: int) -> list[int]:
    return [_most_common(Counter(train_labels))] * n_eval


def majority_tags(train_tags: list[list[int]], eval_tokens: list[list[str]]) -> list[list[int]]:
    tag = _most_common(Counter(t for tags in train_tags for t in tags))
    return [[tag] * len(tokens) for tokens in eval_tokens]


def lookup_tags(train_tokens: list[list[str]], train_tags: list[list[int]],
                eval_tokens: list[list[str]]) -> list[list[int]]:
    per_word: dict[str, Counter] = {}
    overall: Counter = Counter()
    for tokens, tags in zip(train_tokens, train_tags):
        for word, tag in zip(tokens, tags):
            per_word.setdefault(word, Counter())[tag] += 1
            overall[tag] += 1
    fallback = _most_common(overall)
    table = {word: _most_common(c) for word, c in per_word.items()}
    return [[table.get(word, fallback) for word in tokens] for tokens in eval_tokens]


def tfidf_lr(train_texts: list[str | tuple[str, str]], train_labels: list[int],
             eval_texts: list[str | tuple[str, str]], seed: int = 0) -> list[int]:
    """TF-IDF (1–2-grams, sublinear tf) + logistic regression; a pair → [tfidf(a); tfidf(b)]."""
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    if len(set(train_labels)) < 2:
        return majority(train_labels, len(eval_texts))
    pair = isinstance(train_texts[0], tuple)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=True,
                                 token_pattern=r"\S+")
    if pair:
        vectorizer.fit([t for ab in train_texts for t in ab])

        def encode(texts):
            return hstack([vectorizer.transform([a for a, _ in texts]),
                           vectorizer.transform([b for _, b in texts])]).tocsr()
    else:
        vectorizer.fit(train_texts)

        def encode(texts):
            return vectorizer.transform(texts)
    model = LogisticRegression(max_iter=2000, random_state=seed)
    model.fit(encode(train_texts), train_labels)
    return [int(x) for x in model.predict(encode(eval_texts))]


def mean_score(train_scores: list[float], n_eval: int) -> list[float]:
    return [float(np.mean(train_scores))] * n_eval


def tfidf_ridge(train_pairs: list[tuple[str, str]], train_scores: list[float],
                eval_pairs: list[tuple[str, str]], alpha: float = 1.0) -> list[float]:
    """TF-IDF (1–2-grams, sublinear tf, L2-normalised) of each text of a pair → ridge regression
    on [a; b; a ⊙ b; cos(a, b)] (a ⊙ b and the cosine carry the overlap the pair shares)."""
    from scipy.sparse import csr_matrix, hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=True,
                                 token_pattern=r"\S+")
    vectorizer.fit([t for ab in train_pairs for t in ab])

    def encode(pairs):
        a = vectorizer.transform([x for x, _ in pairs])
        b = vectorizer.transform([y for _, y in pairs])
        overlap = a.multiply(b)
        cosine = csr_matrix(np.asarray(overlap.sum(1)))
        return hstack([a, b, overlap, cosine]).tocsr()

    model = Ridge(alpha=alpha)
    model.fit(encode(train_pairs), np.asarray(train_scores, dtype=float))
    return [float(x) for x in model.predict(encode(eval_pairs))]


def overlap_window(question: str, context: str) -> str:
    """The best-overlap candidate span of ``context`` (see module docstring), as text."""
    q_words = {w.lower() for w in _WORD.findall(question)}
    spans = [m.span() for m in _WORD.finditer(context)]
    words = [context[s:e].lower() for s, e in spans]
    if not spans:
        return ""
    hits = np.array([w in q_words for w in words], dtype=np.int64)
    best, best_span = -1, (0, 0)
    for start in range(len(words)):
        for end in range(start, min(len(words), start + MAX_SPAN_WORDS)):
            if hits[end]:
                break  # an answer rarely repeats the question's words
            lo, hi = max(0, start - WINDOW), min(len(words), end + 1 + WINDOW)
            score = len({words[i] for i in range(lo, hi) if hits[i]})
            if score > best:
                best, best_span = score, (start, end)
    return context[spans[best_span[0]][0]:spans[best_span[1]][1]]
