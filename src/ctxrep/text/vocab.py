"""The biLM's word vocabulary: specials, then words by descending training-set frequency.

Ids sorted by frequency are what the log-uniform (Zipfian) candidate sampler of the sampled
softmax assumes. Ties are broken by the word itself so the file is the same on every run.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

BOS, EOS, UNK = "<S>", "</S>", "<UNK>"
SPECIALS = [BOS, EOS, UNK]


def build_word_vocab(counts: Counter, size: int) -> list[str]:
    words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if w not in SPECIALS]
    return SPECIALS + words[: max(0, size - len(SPECIALS))]


def save_word_vocab(words: list[str], counts: Counter, path: Path) -> None:
    """``word<TAB>train count`` a line, in id order (the count of ``<UNK>`` covers all OOV words)."""
    known = set(words)
    oov = sum(c for w, c in counts.items() if w not in known)
    n_sentences = counts.get(BOS, 0)
    lines = []
    for w in words:
        c = oov if w == UNK else (n_sentences if w in (BOS, EOS) else counts.get(w, 0))
        lines.append(f"{w}\t{c}\n")
    path.write_text("".join(lines), encoding="utf-8")


def load_word_vocab(path: Path) -> tuple[list[str], list[int]]:
    words, counts = [], []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        word, _, count = line.partition("\t")
        if not word or not count.isdigit():
            raise ValueError(f"{path}:{n}: expected 'word<TAB>count', got {line[:60]!r}")
        words.append(word)
        counts.append(int(count))
    if words[:3] != SPECIALS:
        raise ValueError(f"{path}: the first three words must be {SPECIALS}, got {words[:3]}")
    return words, counts
