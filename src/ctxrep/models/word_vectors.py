"""Static word vectors: the context-independent representation x_k of a word (ELMo §3.3, Table 1).

Saved by the ``pretrain_static`` stage in ``data/models/static/``::

    vectors.npy     (V, dim) float32, row i is the vector of word i (numpy.load reads it)
    vocab.tsv       word<TAB>corpus count, one line per row of vectors.npy, most frequent first
    config.json     dim, lowercase, vocabulary size, the training params

``gensim.models.KeyedVectors`` rebuilds from the two files (``kv.add_vectors(words, vectors)``).

**Out-of-vocabulary words get the zero vector**, not a learned UNK. The vectors are frozen
features, like the biLM's layers, so there is nothing in them to learn an UNK from; a learned UNK
in the task model would be trained only on the task's rare words and give the ``static`` baseline
a trainable lexical parameter the contextual methods' x_k does not have. Zero says "no lexical
information": the task model must read the word from its context (the task BiLSTM, and for
``elmo`` and the others the contextual mix, which still sees the word's characters).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxrep.errors import InputError

VECTORS, VOCAB, CONFIG = "vectors.npy", "vocab.tsv", "config.json"


@dataclass
class WordVectors:
    """A frozen word → vector table; :meth:`ids` maps words to rows, OOV to the zero row."""

    words: list[str]
    counts: list[int]
    vectors: np.ndarray            # (V, dim) float32
    lowercase: bool                # task words are lower-cased before lookup, as the corpus was

    def __post_init__(self):
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.words):
            raise ValueError(f"{self.vectors.shape} vectors for {len(self.words)} words")
        if len(self.counts) != len(self.words) or len(set(self.words)) != len(self.words):
            raise ValueError("words must be distinct and have one count each")
        self._index = {w: i for i, w in enumerate(self.words)}
        # the table the task models gather from: the vectors, then the zero row of OOV words
        self.table = np.concatenate([self.vectors, np.zeros((1, self.dim), np.float32)])

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    @property
    def oov_id(self) -> int:
        return len(self.words)

    def normalize(self, word: str) -> str:
        return word.lower() if self.lowercase else word

    def ids(self, words: list[str]) -> np.ndarray:
        """Row of each word in :attr:`table`; an out-of-vocabulary word gets :attr:`oov_id`."""
        return np.fromiter((self._index.get(self.normalize(w), self.oov_id) for w in words),
                           dtype=np.int64, count=len(words))

    def oov_rate(self, texts) -> float:
        """Share of the words of ``texts`` (an iterable of word lists) that get the zero vector."""
        total = oov = 0
        for words in texts:
            ids = self.ids(words)
            total += len(ids)
            oov += int((ids == self.oov_id).sum())
        return oov / max(1, total)

    def lookup(self, words: list[str]) -> np.ndarray:
        """(n_words, dim) float32 vectors; zero for an out-of-vocabulary word."""
        return self.table[self.ids(words)]

    def save(self, folder: Path | str, extra_config: dict | None = None) -> None:
        folder = Path(folder)
        np.save(folder / VECTORS, np.ascontiguousarray(self.vectors, dtype=np.float32))
        (folder / VOCAB).write_text("".join(f"{w}\t{c}\n" for w, c in zip(self.words, self.counts)),
                                    encoding="utf-8")
        config = {"dim": self.dim, "vocab_size": len(self.words), "lowercase": self.lowercase,
                  "oov": "zero vector", **(extra_config or {})}
        (folder / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, folder: Path | str) -> "WordVectors":
        folder = Path(folder)
        if not (folder / CONFIG).exists():
            raise FileNotFoundError(f"{folder / CONFIG}: missing; run the pretrain_static stage")
        config = json.loads((folder / CONFIG).read_text())
        try:
            vectors = np.load(folder / VECTORS)
            rows = [line.split("\t") for line in
                    (folder / VOCAB).read_text(encoding="utf-8").splitlines()]
            words, counts = [r[0] for r in rows], [int(r[1]) for r in rows]
            return cls(words, counts, vectors.astype(np.float32, copy=False), config["lowercase"])
        except (OSError, ValueError, IndexError, KeyError) as e:
            raise InputError(f"{folder}: not readable word vectors ({e}); rerun pretrain_static") from e
