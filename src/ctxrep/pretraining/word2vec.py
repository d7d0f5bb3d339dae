"""word2vec (Mikolov et al. 2013) through gensim on the tokenized corpus: the static word vectors.

They play the part GloVe plays in ELMo's Table 1 baseline: a context-independent vector per word,
trained on the same corpus (the training documents of ``data/tokenized/``, the same words the
biLM reads, lower-cased when the corpus was tokenized with ``lowercase``) with a budget of the
same class (a few passes over it on a CPU).

Determinism: gensim trains byte-identically only with one worker thread and a fixed seed
(``workers: 1``). Its initial vectors come from numpy's generator seeded with ``seed``; a word's
hash (Python's ``hash``, which ``PYTHONHASHSEED`` salts) is only used by gensim's deprecated
``seeded_vector``, and a salt-free hash is passed anyway so that nothing depends on it.
"""

from __future__ import annotations

import logging
import zlib
from typing import Iterator

from gensim.models import Word2Vec
from gensim.models.callbacks import CallbackAny2Vec
from tqdm.auto import tqdm

from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.errors import InputError
from ctxrep.models.word_vectors import WordVectors


def stable_hash(text: str) -> int:
    """CRC-32 of the UTF-8 bytes: the same in every process, unlike ``hash``."""
    return zlib.crc32(text.encode("utf-8"))


class CorpusSentences:
    """The words of every sentence of a split, re-readable (gensim passes over it once to count
    the vocabulary and once per epoch), streamed shard by shard."""

    def __init__(self, corpus: TokenizedCorpus, split: str, lowercase: bool):
        self.corpus, self.split, self.lowercase = corpus, split, lowercase

    def __iter__(self) -> Iterator[list[str]]:
        for doc in self.corpus.documents(self.split, columns=["words"]):
            for words in doc["words"]:
                yield [w.lower() for w in words] if self.lowercase else words


class EpochProgress(CallbackAny2Vec):
    """A gensim callback: a progress bar over epochs."""

    def __init__(self, epochs: int):
        self.bar = tqdm(total=epochs, desc="pretrain_static", unit="epoch", disable=None)

    def on_epoch_end(self, model) -> None:
        self.bar.update(1)

    def on_train_end(self, model) -> None:
        self.bar.close()


def train_word2vec(sentences: CorpusSentences, p) -> tuple[WordVectors, int]:
    """Vectors of every word seen ``p.min_count`` times, and the number of corpus words one
    epoch trained on. ``p`` is :class:`ctxrep.config.StaticParams`."""
    logging.getLogger("gensim").setLevel(logging.WARNING)  # progress: the bar over epochs
    model = Word2Vec(vector_size=p.dim, sg=int(p.sg), window=p.window, min_count=p.min_count,
                     negative=p.negative, hs=0, sample=p.sample, alpha=p.lr,
                     min_alpha=min(p.lr, 1e-4), workers=p.workers, seed=p.seed,
                     hashfxn=stable_hash)
    model.build_vocab(sentences)
    if not model.wv.index_to_key:
        raise InputError(f"no word of the corpus occurs pretrain_static.min_count="
                         f"{p.min_count} times: lower it or use a larger corpus")
    model.train(sentences, total_examples=model.corpus_count, epochs=p.epochs,
                callbacks=[EpochProgress(p.epochs)])
    words = list(model.wv.index_to_key)
    counts = [int(model.wv.get_vecattr(w, "count")) for w in words]
    vectors = WordVectors(words, counts, model.wv.vectors.copy(), sentences.lowercase)
    return vectors, int(model.corpus_total_words)


def train_flops(p, words_per_epoch: int) -> float:
    """Training FLOPs, estimated: each (word, context) update with negative sampling takes
    ``1 + negative`` dot products of size ``dim`` forward and twice that backward (6·dim per
    output row). Skip-gram makes ~``window`` updates per word (the window is shrunk uniformly
    at random, so ~window/2 on each side); CBOW makes one per word, on the mean of its context
    (plus ~2·window·dim to average and scatter it). Down-sampling is ignored: an over-count."""
    per_update = 6.0 * p.dim * (1 + p.negative)
    per_word = p.window * per_update if p.sg else per_update + 2.0 * p.window * p.dim
    return per_word * words_per_epoch * p.epochs
